package com.fenecdb

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.delay
import kotlinx.coroutines.future.future
import kotlinx.coroutines.runInterruptible
import kotlinx.coroutines.withContext
import kotlinx.coroutines.runBlocking
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.booleanOrNull
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.contentOrNull
import kotlinx.serialization.json.intOrNull
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.longOrNull
import kotlinx.serialization.json.put
import java.math.BigInteger
import java.net.ConnectException
import java.net.URI
import java.net.URISyntaxException
import java.net.UnknownHostException
import java.net.http.HttpClient
import java.net.http.HttpConnectTimeoutException
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.net.http.HttpTimeoutException
import java.nio.channels.ClosedChannelException
import java.nio.file.Files
import java.nio.file.Path
import java.security.KeyStore
import java.security.cert.CertificateFactory
import java.time.Instant
import java.time.format.DateTimeParseException
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CompletionException
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong
import java.util.concurrent.atomic.AtomicReference
import javax.net.ssl.SSLContext
import javax.net.ssl.SSLHandshakeException
import javax.net.ssl.TrustManagerFactory
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeSource
import kotlin.time.toJavaDuration

/** The longest `Fenec-Wait` the server takes: 30 s. */
private const val MAX_WAIT_MS = 30_000L

/**
 * Connects to a Fenec server: `Fenec.connect(url, token = …, timeout = …)`
 * answers a [Client].
 */
public object Fenec {
    /** Every SDK's default timeout. */
    public val DEFAULT_TIMEOUT: Duration = 30.seconds

    /**
     * Connects to the server at [url] (`http://host:port`, or https), or to
     * the nodes of a cluster, their URLs separated by commas
     * (`http://10.0.0.1:8080,http://10.0.0.2:8080,http://10.0.0.3:8080`, so
     * one environment variable can hold them): a URL without a scheme or a
     * host is refused here, named with its position, not at the first
     * call; duplicates are dropped. [token] is sent as
     * `Authorization: Bearer …`.
     *
     * Every call goes to the client's current node, the first URL at the
     * start (docs/sdks.md, "Several nodes"). A 403 `forbidden` naming the
     * leader ([FenecException.leader]) was refused unrun: the call sends the
     * same request to the leader (at most 3 times between pauses, never from
     * https to http), which becomes the current node. A 503 `no_leader` (an
     * election, or a leader just elected) was refused unrun too: it is sent
     * again after a pause of 50 ms doubling to 1 s, to the next URL given
     * several, else to the same node. With several URLs, a node that refuses
     * the connection (`java.net.ConnectException`), or names a leader whose
     * connection was refused in this call, has the call try the next URL,
     * round robin, pausing between full rounds. Both go on until the call's
     * deadline (its timeout, plus the wait of a held claim), which throws the
     * last such error. Anything else
     * (a timeout, a connection lost after sending, any other 503, a 403 of
     * the token's rules) is thrown as is: only an idempotency key makes the
     * retry of a write whose outcome is unknown safe.
     *
     * Over https the server's certificate is checked against the JVM's
     * trusted CAs, or with [sslContext] when given: [trusting] makes one
     * that trusts the CAs of a PEM file (a CA of your own); an SSLContext
     * with a key manager presents a client certificate. A certificate that
     * fails the check fails the call with [ErrorCode.NETWORK], its message
     * starting "TLS:".
     */
    public fun connect(url: String, token: String? = null, timeout: Duration = DEFAULT_TIMEOUT, sslContext: SSLContext? = null): Client {
        val parts = url.split(',')
        return connect(if (parts.size > 1) parts.map { it.trim() } else parts, token, timeout, sslContext)
    }

    /**
     * [connect] to the URL(s) in the environment variable FENEC_URL, with
     * the token in FENEC_TOKEN (none when it is unset); FENEC_URL unset is
     * an IllegalArgumentException.
     */
    @JvmStatic
    public fun connect(): Client = connectFromEnv(System::getenv)

    /** [connect] from the variables [getenv] reads (the process's environment, or a test's). */
    internal fun connectFromEnv(getenv: (String) -> String?): Client {
        val url = getenv("FENEC_URL")?.takeIf { it.isNotEmpty() }
            ?: throw IllegalArgumentException("no server URL given, and FENEC_URL is not set")
        return connect(url, getenv("FENEC_TOKEN")?.takeIf { it.isNotEmpty() }, DEFAULT_TIMEOUT)
    }

    /** [connect] to the nodes of a cluster, one URL each. */
    public fun connect(urls: List<String>, token: String? = null, timeout: Duration = DEFAULT_TIMEOUT, sslContext: SSLContext? = null): Client {
        val b = builder(urls).token(token).timeout(timeout)
        if (sslContext != null) b.sslContext(sslContext)
        return b.build()
    }

    /**
     * A [ClientBuilder] for the server at [url] (or a cluster's URLs,
     * separated by commas): for what [connect] does not take — an
     * HttpClient of your own, headers on every request.
     */
    @JvmStatic
    public fun builder(url: String): ClientBuilder = builder(url.split(',').map { it.trim() })

    /** A [ClientBuilder] for the nodes of a cluster, one URL each. */
    @JvmStatic
    public fun builder(urls: List<String>): ClientBuilder = ClientBuilder(urls)

    /** The HttpClient [connect] makes: HTTP/1.1, no executor of its own ([directExecutor]), the connect timeout, [sslContext] when given. */
    internal fun defaultHttpClient(timeout: Duration, sslContext: SSLContext?): HttpClient {
        // HTTP/1.1: a held claim given up closes its connection, which is
        // how the server learns the claim is gone (docs/queues.md).
        val builder = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .executor(directExecutor)
            .connectTimeout(connectTimeout(timeout).toJavaDuration())
        if (sslContext != null) builder.sslContext(sslContext)
        return builder.build()
    }

    /**
     * An SSLContext that trusts the CA certificates of the PEM file
     * [caFile], and only them: for [connect] to a server whose certificate
     * a CA of your own signed.
     */
    @JvmStatic
    public fun trusting(caFile: Path): SSLContext {
        val certs = Files.newInputStream(caFile).use { CertificateFactory.getInstance("X.509").generateCertificates(it) }
        require(certs.isNotEmpty()) { "$caFile holds no PEM certificate" }
        val store = KeyStore.getInstance(KeyStore.getDefaultType()).apply { load(null, null) }
        certs.forEachIndexed { i, c -> store.setCertificateEntry("ca$i", c) }
        val tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm()).apply { init(store) }
        return SSLContext.getInstance("TLS").apply { init(null, tmf.trustManagers, null) }
    }

    /** [connect] for Java, with the default timeout (30 s). */
    @JvmStatic
    @JvmOverloads
    public fun connect(url: String, token: String? = null): Client = connect(url, token, DEFAULT_TIMEOUT)

    /** [connect] for Java, with a java.time.Duration timeout. */
    @JvmStatic
    public fun connect(url: String, token: String?, timeout: java.time.Duration): Client =
        connect(url, token, timeout.toMillis().milliseconds)

    /** [connect] for Java, with a java.time.Duration timeout and an SSLContext. */
    @JvmStatic
    public fun connect(url: String, token: String?, timeout: java.time.Duration, sslContext: SSLContext): Client =
        connect(url, token, timeout.toMillis().milliseconds, sslContext)

    /** [connect] to several nodes for Java, with the default timeout (30 s). */
    @JvmStatic
    @JvmOverloads
    public fun connect(urls: List<String>, token: String? = null): Client = connect(urls, token, DEFAULT_TIMEOUT)

    /** [connect] to several nodes for Java, with a java.time.Duration timeout. */
    @JvmStatic
    public fun connect(urls: List<String>, token: String?, timeout: java.time.Duration): Client =
        connect(urls, token, timeout.toMillis().milliseconds)
}

/**
 * Runs [block] on Dispatchers.Default as a CompletableFuture: the twins of
 * the suspend calls for Java. Cancelling the future cancels the coroutine.
 */
internal fun <T> futureOf(block: suspend kotlinx.coroutines.CoroutineScope.() -> T): CompletableFuture<T> =
    kotlinx.coroutines.CoroutineScope(Dispatchers.Default).future(block = block)

/** Whether a statement only reads (`get …`): sent again as it is. */
private fun isRead(s: Statement): Boolean = s.query.trimStart().startsWith("get ", ignoreCase = true)

/** Headers a client sets itself: a [ClientBuilder] refuses them. */
private val OWN_HEADERS = setOf("authorization", "user-agent", "content-type", "fenec-wait", "fenec-after", "idempotency-key")

/**
 * Makes a [Client] with what [Fenec.connect] does not take:
 *
 * ```
 * val db = Fenec.builder("https://db.example.com")
 *     .token(System.getenv("FENEC_TOKEN"))
 *     .httpClient(HttpClient.newBuilder().proxy(ProxySelector.of(InetSocketAddress("proxy", 3128))).build())
 *     .header("X-Tenant", "a1")
 *     .build()
 * ```
 *
 * Each setter returns this builder; [build] checks the URLs and the
 * timeout (an IllegalArgumentException naming what is wrong).
 */
public class ClientBuilder internal constructor(private val urls: List<String>) {
    private var token: String? = null
    private var timeout: Duration = Fenec.DEFAULT_TIMEOUT
    private var sslContext: SSLContext? = null
    private var http: HttpClient? = null
    private var maxRetries = 0
    private val headers = LinkedHashMap<String, String>()

    /** Sent as `Authorization: Bearer …`; null for none. */
    public fun token(token: String?): ClientBuilder = apply { this.token = token }

    /** The default timeout of every call (30 s unless set); [Client.withTimeout] changes it per call. */
    public fun timeout(timeout: Duration): ClientBuilder = apply { this.timeout = timeout }

    /** [timeout] with a java.time.Duration. */
    public fun timeout(timeout: java.time.Duration): ClientBuilder = timeout(timeout.toMillis().milliseconds)

    /** The TLS context of the HttpClient the builder makes ([Fenec.trusting]); not with [httpClient]. */
    public fun sslContext(sslContext: SSLContext): ClientBuilder = apply { this.sslContext = sslContext }

    /**
     * The HttpClient every request goes through, as you built it: its
     * SSLContext, proxy, authenticator, executor and connect timeout are
     * yours. Keep it on HTTP/1.1 (`version(HTTP_1_1)`): a held claim given
     * up is told to the server by closing its connection.
     */
    public fun httpClient(client: HttpClient): ClientBuilder = apply { this.http = client }

    /**
     * A header sent on every request (a tenant, a trace id, a proxy's
     * key). The headers the client sets itself (Authorization — use
     * [token] —, User-Agent, Content-Type, Fenec-Wait, Fenec-After,
     * Idempotency-Key) and those java.net.http refuses (Host, Connection,
     * …) are refused here.
     */
    public fun header(name: String, value: String): ClientBuilder = apply {
        require(name.lowercase() !in OWN_HEADERS) { "header $name is the client's own; it cannot be set" }
        try {
            HttpRequest.newBuilder(URI("http://header.check")).header(name, value)
        } catch (e: IllegalArgumentException) {
            throw IllegalArgumentException("header $name: ${e.message}", e)
        }
        headers[name] = value
    }

    /**
     * Opt-in retries: a call that failed with a fault (a network error, a
     * timeout, `unavailable`, `internal`) is sent again up to [n] times,
     * after a pause with exponential backoff and full jitter. A read is
     * retried as it is; every write is sent under an Idempotency-Key (the
     * caller's, or one made up), so a retry never applies it twice. 0 (the
     * default): no retries.
     */
    public fun maxRetries(n: Int): ClientBuilder = apply {
        require(n in 0..10) { "maxRetries must be 0 to 10, not $n" }
        maxRetries = n
    }

    /** [header] for each entry of [headers]. */
    public fun headers(headers: Map<String, String>): ClientBuilder = apply { headers.forEach { (k, v) -> header(k, v) } }

    /** The client. */
    public fun build(): Client {
        val nodes = parseUrls(urls)
        requireMillis("timeout", timeout)
        require(timeout > Duration.ZERO) { "timeout must be more than 0 ms, not $timeout" }
        require(http == null || sslContext == null) { "sslContext and httpClient cannot both be set: give the HttpClient its SSLContext" }
        val client = http ?: Fenec.defaultHttpClient(timeout, sslContext)
        return Client(nodes, token, timeout, null, client, Schema(), headers.toMap(), maxRetries)
    }
}

/** This SDK's version, as its User-Agent names it; a test keeps it equal to pom.xml's. */
public const val VERSION: String = "0.1.0"

/** Sent on every request: `fenecdb-kotlin/<version> java/<the JVM's version>`. */
internal val USER_AGENT: String = "fenecdb-kotlin/$VERSION java/${System.getProperty("java.version")}"

/**
 * The executor of every HttpClient [Fenec.connect] makes: none of its own.
 * java.net.http hands each answer its selector thread reads to the
 * executor, and a pool there adds a thread wake-up (and a context switch)
 * to every request: on two cores that was the worker's largest cost. The
 * work handed over is short and never blocks (the answer's bytes into a
 * String, a future completed, a live query's chunk put in its channel), so
 * it runs on the selector thread; the caller's `send` then wakes with its
 * answer.
 */
internal val directExecutor: java.util.concurrent.Executor = java.util.concurrent.Executor { it.run() }

/** The most Fenec-Leader answers one call follows. */
private const val MAX_FOLLOWS = 3

/** The pause between two full rounds of the nodes: from the first, doubling, to the last. */
private val FIRST_PAUSE = 50.milliseconds

/** The largest Fenec-After: 2^53−1, like an id (docs/http.md). */
private const val MAX_AFTER = (1L shl 53) - 1
private val LAST_PAUSE = 1.seconds

/**
 * A client's configured nodes and the one its calls go to now (docs/sdks.md,
 * "Several nodes"), shared by every copy [Client.withWait] makes — and the
 * highest Fenec-Seq any of them answered, sent as Fenec-After on every
 * query and batch given several, so that a node the client moves to (a
 * follower, after a failover) answers only once it has applied the
 * client's writes (read-your-writes, docs/cluster.md).
 */
internal class Nodes(val list: List<URI>) {
    private val current = AtomicReference(list[0])
    private val seq = AtomicLong(0)

    val several: Boolean get() = list.size > 1

    fun current(): URI = current.get()

    fun use(node: URI) = current.set(node)

    /** Remembers a Fenec-Seq answered; only ever upwards. */
    fun saw(answered: Long) {
        seq.accumulateAndGet(answered, ::maxOf)
    }

    /**
     * The Fenec-After to send: none with one URL (a lone server answers 400
     * for one beyond its own writes), or before any write.
     */
    fun after(): Long? = if (several) seq.get().takeIf { it > 0 } else null
}

/**
 * One call's way over the configured nodes while the current one cannot
 * have run its request: the next URL each time, round robin from the
 * current node, and a pause after every full round, until the call's
 * [deadline].
 */
private class Walk(private val nodes: Nodes, start: URI, private val deadline: kotlin.time.TimeMark) {
    private var at = nodes.list.indexOf(start) + 1
    private var misses = 0
    private var pause = FIRST_PAUSE

    /**
     * The follows of Fenec-Leader since the last pause (at most
     * MAX_FOLLOWS): a cluster in mid-election, whose follower names a
     * leader that answers no_leader, is paused between follows, not given
     * up while the deadline allows.
     */
    var follows = 0

    /** The node to try after one that failed with [last], once the pause due (if any) is over. */
    suspend fun next(last: FenecException): URI {
        if (++misses % nodes.list.size == 0) pause(last)
        return step()
    }

    /** The next node in the round, without a pause. */
    fun step(): URI = nodes.list[at++ % nodes.list.size]

    /**
     * Waits the pause due (50 ms, doubling to 1 s): a `delay`, so cancelling
     * the coroutine ends it. [last] is thrown when the call's deadline comes
     * first.
     */
    suspend fun pause(last: FenecException) {
        val rest = -deadline.elapsedNow()
        if (rest <= Duration.ZERO) throw last
        delay(minOf(pause, rest))
        if (deadline.hasPassedNow()) throw last
        pause = minOf(pause * 2, LAST_PAUSE)
        follows = 0
    }
}

/**
 * A client of a Fenec server, or of a cluster's nodes (whose leader it
 * follows: [Fenec.connect]): its URLs, token, default timeout and one
 * shared `java.net.http.HttpClient`. Nothing is sent until a query is.
 * Immutable but for the node it sends to now ([node]): [withWait] answers a
 * copy that shares the HTTP client and that node.
 *
 * ```
 * val db = Fenec.connect("http://127.0.0.1:8080", token = System.getenv("FENEC_TOKEN"))
 * val jobs = db.from("jobs")
 * ```
 */
public class Client internal constructor(
    internal val nodes: Nodes,
    internal val token: String?,
    /** How long a request waits for its answer (a held claim: this plus its wait). */
    public val timeout: Duration,
    /** How long a claim is held at the server while it would take nothing; null: not held. */
    public val wait: Duration?,
    internal val http: HttpClient,
    internal val schema: Schema,
    /** Headers of the user's, sent on every request ([ClientBuilder.header]). */
    private val headers: Map<String, String> = emptyMap(),
    /** How many times a failed call is sent again (0: never; [ClientBuilder.maxRetries]). */
    public val maxRetries: Int = 0,
    /** The write every query and batch runs after ([withAfter]); null: none of the caller's. */
    public val after: Long? = null,
) {
    /**
     * A copy whose claims — a `set` with `returning`, or a `/batch` holding
     * one — are held at the server up to [wait] (0 to 30 s) while they would
     * take nothing (`Fenec-Wait`); every other request is sent as this
     * client sends it. A held claim waits for its answer [timeout] + [wait].
     */
    public fun withWait(wait: Duration): Client {
        requireMillis("wait", wait)
        require(wait >= Duration.ZERO && wait.inWholeMilliseconds <= MAX_WAIT_MS) {
            "wait must be 0 to 30 s (0 to 30000 milliseconds), not ${wait.inWholeMilliseconds} ms"
        }
        return Client(nodes, token, timeout, wait, http, schema, headers, maxRetries, after)
    }

    /**
     * A copy whose calls wait [timeout] for their answer (a held claim:
     * this plus its wait), rather than this client's: a per-call timeout,
     * `db.withTimeout(2.seconds).query(…)`. It shares this client's HTTP
     * client and current node.
     */
    public fun withTimeout(timeout: Duration): Client {
        requireMillis("timeout", timeout)
        require(timeout > Duration.ZERO) { "timeout must be more than 0 ms, not $timeout" }
        return Client(nodes, token, timeout, wait, http, schema, headers, maxRetries, after)
    }

    /**
     * A copy whose queries and batches run once the server has applied write
     * [seq] — a [Result.seq], perhaps another client's or another node's —
     * sent as `Fenec-After` (read-your-writes, docs/cluster.md):
     * `db.withAfter(res.seq).from("notes").count()`. A cluster node not there
     * within 5 s throws `behind`; a lone server, with no other node to wait
     * for, refuses at once (400) a write it has not made. Given several URLs
     * the larger of [seq] and the highest Fenec-Seq the nodes returned is
     * sent. [seq] is 0 to 2^53−1.
     */
    public fun withAfter(seq: Long): Client {
        require(seq in 0..MAX_AFTER) { "after must be a whole number from 0 to 2^53-1 (a Result.seq), not $seq" }
        return Client(nodes, token, timeout, wait, http, schema, headers, maxRetries, seq)
    }

    /** The Fenec-After to send: the larger of [after] and the nodes' ([Nodes.after]). */
    private fun afterHeader(): Long? {
        val mine = after ?: return nodes.after()
        return maxOf(mine, nodes.after() ?: 0)
    }

    /** [withTimeout] with a java.time.Duration. */
    public fun withTimeout(timeout: java.time.Duration): Client = withTimeout(timeout.toMillis().milliseconds)

    /** [withWait] with a java.time.Duration. */
    public fun withWait(wait: java.time.Duration): Client = withWait(wait.toMillis().milliseconds)

    /** A copy that holds no claim: for a `set … returning` that must be answered at once (a worker's extension). */
    internal fun unheld(): Client = if (wait == null) this else Client(nodes, token, timeout, null, http, schema, headers, maxRetries, after)

    /**
     * The URL of the node this client sends its calls to now: the first
     * given to [Fenec.connect], or the leader it was last sent to
     * (docs/sdks.md, "Several nodes").
     */
    public val node: String get() = nodes.current().toString()

    /** A query builder on the collection [name] (an identifier, else this throws). */
    public fun from(name: String): Query = Query(this, State(collectionName(name)), null)

    /**
     * Runs one FenecQL statement, its values as `$1…$n` in [params] (any
     * value [toJson] takes), and answers its whole [Result]. Its rows are
     * left as the JSON says (a text has no collection to decode them by).
     * A write under an [idempotencyKey] retried with the same key is
     * answered the first answer, and writes nothing.
     */
    public suspend fun query(text: String, params: List<Any?> = emptyList(), idempotencyKey: String? = null): Result {
        require(text.isNotBlank()) { "query: the statement is empty" }
        return query(Statement(text, params.mapIndexed { i, v -> toJson("query parameter ${i + 1}", v) }), idempotencyKey)
    }

    /**
     * Runs a statement a builder rendered (`jobs.where("id", 1).renderDelete(require = 1)`)
     * and answers its whole [Result]: its rows decoded by the collection's field types.
     */
    @JvmOverloads
    public suspend fun query(statement: Statement, idempotencyKey: String? = null): Result {
        val collection = statement.collection
        if (collection != null) schema.load(collection) { fetchSchema() }
        val body = statement.toJson().toString()
        val wait = if (statement.claim) wait else null
        val key = keyFor(listOf(statement), idempotencyKey)
        val reply = retrying("POST /query", statement.query, key, idempotencyKey != null || key != null || isRead(statement)) {
            send(wait) { url, t -> queryRequest(url, body, wait?.inWholeMilliseconds, key, afterHeader(), token, t) }
        }
        return answer(reply.body, collection, reply)
    }

    /**
     * The Idempotency-Key a call is sent under: the caller's, or with
     * retries on, one made up for a write (a UUID), so that no retry of a
     * write applies twice (docs/http.md, "Idempotency keys").
     */
    private fun keyFor(statements: List<Statement>, given: String?): String? =
        given ?: if (maxRetries > 0 && !statements.all { isRead(it) }) java.util.UUID.randomUUID().toString() else null

    /**
     * Runs [call], and with [maxRetries] again after a fault — a network
     * error, a timeout, `unavailable`, `internal` ([FenecException.retryable])
     * — with exponential backoff and full jitter (a random pause up to
     * 100 ms × 2^(try − 1), at most 5 s), only when [safe]: a read, or a
     * write under an idempotency key. Every error it throws names the
     * method, the node, the statement (its first 200 characters) and the key.
     */
    private suspend fun retrying(method: String, statement: String, key: String?, safe: Boolean, call: suspend () -> Reply): Reply {
        var tries = 0
        while (true) {
            try {
                return call()
            } catch (e: FenecException) {
                e.describe(method, node, statement, key)
                if (!safe || tries >= maxRetries || !e.retryable) throw e
                tries++
                val cap = minOf(5_000L, 100L shl minOf(tries - 1, 10))
                delay(java.util.concurrent.ThreadLocalRandom.current().nextLong(cap + 1))
            }
        }
    }

    /**
     * Runs statements all or nothing, in order, under one lock; answers each
     * statement's answer. A refusal names the statement in [FenecException.at].
     * Builders render statements: `jobs.where("id", 1).renderDelete(require = 1)`.
     */
    public suspend fun batch(statements: List<Statement>, idempotencyKey: String? = null): List<Result> {
        require(statements.isNotEmpty()) { "batch: no statements" }
        for (c in statements.mapNotNull { it.collection }.toSet()) schema.load(c) { fetchSchema() }
        val body = buildJsonObject { put("statements", JsonArray(statements.map { it.toJson() })) }.toString()
        val wait = if (statements.any { it.claim }) wait else null
        val key = keyFor(statements, idempotencyKey)
        val reply = retrying("POST /batch", statements.joinToString("; ") { it.query }, key, key != null || statements.all { isRead(it) }) {
            send(wait) { url, t -> batchRequest(url, body, wait?.inWholeMilliseconds, key, afterHeader(), token, t) }
        }
        val results = (reply.body as? JsonObject)?.get("results") as? JsonArray ?: throw unexpected(reply)
        if (results.size != statements.size) throw unexpected(reply)
        return results.mapIndexed { i, r -> answer(r, statements[i].collection, reply) }
    }

    /** [query] as a CompletableFuture (for Java); cancelling the future gives the call up. */
    @JvmOverloads
    public fun queryAsync(text: String, params: List<Any?> = emptyList(), idempotencyKey: String? = null): CompletableFuture<Result> =
        futureOf { query(text, params, idempotencyKey) }

    /** [query] of a rendered statement as a CompletableFuture (for Java). */
    @JvmOverloads
    public fun queryAsync(statement: Statement, idempotencyKey: String? = null): CompletableFuture<Result> =
        futureOf { query(statement, idempotencyKey) }

    /** [batch] as a CompletableFuture (for Java). */
    @JvmOverloads
    public fun batchAsync(statements: List<Statement>, idempotencyKey: String? = null): CompletableFuture<List<Result>> =
        futureOf { batch(statements, idempotencyKey) }

    /** [query], blocking (for Java). */
    @JvmOverloads
    public fun queryBlocking(text: String, params: List<Any?> = emptyList(), idempotencyKey: String? = null): Result =
        runBlocking { query(text, params, idempotencyKey) }

    /** [batch], blocking (for Java). */
    @JvmOverloads
    public fun batchBlocking(statements: List<Statement>, idempotencyKey: String? = null): List<Result> =
        runBlocking { batch(statements, idempotencyKey) }

    /** The server's Prometheus metrics, as text. */
    public suspend fun metrics(): String = send(null, text = true) { url, t -> metricsRequest(url, token, t) }.text

    /** Moves a manual clock on by [by] (only under `fenec serve --clock manual`); answers its new time. */
    public suspend fun advanceClock(by: Duration): Instant {
        val body = buildJsonObject { put("advance_ms", by.inWholeMilliseconds) }.toString()
        val now = (send(null) { url, t -> moveClockRequest(url, body, token, t) }.body as? JsonObject)?.get("now")
        return Instant.parse(now?.jsonPrimitive?.content ?: throw fenecException(200, ErrorCode.UNEXPECTED, "no time in the clock's answer"))
    }

    private suspend fun answer(body: JsonElement?, collection: String?, reply: Reply): Result = when (body) {
        is JsonArray -> decode(collection, body, reply).let { Result(it, it.size.toLong(), reply.seq, reply.replayed) }
        is JsonObject -> {
            val n = (body["affected"] as? JsonPrimitive)?.longOrNull ?: throw unexpected(reply)
            Result(null, n, reply.seq, reply.replayed)
        }
        else -> throw unexpected(reply)
    }

    private suspend fun decode(collection: String?, rows: JsonArray, reply: Reply): List<Row> {
        val objects = rows.map { it as? JsonObject ?: throw unexpected(reply) }
        val types = if (collection == null) emptyMap() else schema.types(collection, objects) { fetchSchema() }
        return objects.map { o ->
            Row(LinkedHashMap<String, Any?>(o.size).apply {
                for ((k, v) in o) {
                    put(k, try {
                        decodeValue(v, types[k])
                    } catch (e: IllegalArgumentException) {
                        throw fenecException(reply.status, ErrorCode.UNEXPECTED, "unexpected answer from ${hostPort(reply.node)}: field ${quote(k)} of ${quote(collection ?: "?")}: ${e.message}", cause = e)
                    })
                }
            })
        }
    }

    /** Every collection's declared field types, from `GET /collections`. */
    private suspend fun fetchSchema(): Map<String, Map<String, FieldType>> {
        val reply = send(null) { url, t -> collectionsRequest(url, token, t) }
        val list = (reply.body as? JsonObject)?.get("collections") as? JsonArray ?: throw unexpected(reply)
        return list.associate { c ->
            val o = c.jsonObject
            o.getValue("name").jsonPrimitive.content to o.getValue("fields").jsonArray.associate { f ->
                val fo = f.jsonObject
                fo.getValue("name").jsonPrimitive.content to (FieldType.of(fo.getValue("type").jsonPrimitive.content) ?: FieldType.JSON)
            }
        }
    }

    /** An answer: the node that sent it, its status, body (parsed JSON, null when it is not), text and headers. */
    private class Reply(
        val node: URI,
        val status: Int,
        val body: JsonElement?,
        val text: String,
        val seq: Long,
        val replayed: Boolean,
        val leader: String?,
    )

    /**
     * Sends a request, built for a node with the time left of its deadline
     * — the timeout, plus [wait] for a held claim — to the node the rules of
     * docs/sdks.md, "Several nodes" pick (see [Fenec.connect]), and maps
     * every failure to a FenecException. Cancelling the calling coroutine
     * gives the request up (the connection closes, so the server drops a
     * held claim), and ends a pause between rounds.
     */
    private suspend fun send(wait: Duration?, text: Boolean = false, build: (URI, java.time.Duration) -> HttpRequest): Reply {
        val limit = timeout + (wait ?: Duration.ZERO)
        val deadline = TimeSource.Monotonic.markNow() + limit
        var node = nodes.current()
        val walk = Walk(nodes, node, deadline)
        val refused = HashSet<URI>() // nodes whose connection was refused in this call
        while (true) {
            // The generated request, with the SDK's User-Agent (docs/sdks.md).
            val request = HttpRequest.newBuilder(build(node, maxOf(-deadline.elapsedNow(), 1.milliseconds).toJavaDuration())) { _, _ -> true }
                .header("User-Agent", USER_AGENT)
                .apply { headers.forEach { (k, v) -> header(k, v) } }
                .build()
            val response: HttpResponse<String> = try {
                exchange(request)
            } catch (e: CancellationException) {
                throw e
            } catch (e: Throwable) {
                val x = unwrap(e)
                val failed = failure(x, node, limit, wait)
                // Only a connection never made is known not to have run it.
                if (!nodes.several || x !is ConnectException) throw failed
                refused += node
                node = walk.next(failed)
                continue
            }
            val reply = reply(node, response, text)
            if (reply.status in 200..299) {
                if (!text && reply.body == null) throw unexpected(reply)
                nodes.use(node)
                nodes.saw(reply.seq)
                return reply
            }
            val e = refusal(reply)
            val leader = e.leader
            if (leader != null && runCatching { URI(leader.trimEnd('/')) }.getOrNull() !in refused) {
                // Refused unrun: the same request goes to the leader, unless
                // that would be a downgrade from https (the token in clear).
                val to = leaderUrl(leader)
                if (to == null || walk.follows == MAX_FOLLOWS || (node.scheme == "https" && to.scheme != "https")) throw e
                walk.follows++
                node = to
                nodes.use(to)
                continue
            }
            if (e.code == ErrorCode.NO_LEADER) {
                // Refused unrun: no leader known now (an election), or a
                // leader just elected that applies the earlier terms' writes
                // first (docs/cluster.md). Again after the pause: to the next
                // node, or to the same one when it is the only.
                walk.pause(e)
                if (nodes.several) node = walk.step()
                continue
            }
            if (nodes.several && e.code == ErrorCode.FORBIDDEN && leader != null) {
                // A leader named that refused the connection in this call (a
                // follower that has not yet seen it die): another node may
                // know better. A 403 of a token's rules names none: thrown.
                node = walk.next(e)
                continue
            }
            nodes.use(node)
            throw e
        }
    }

    private fun reply(node: URI, response: HttpResponse<String>, text: Boolean): Reply {
        val raw = response.body() ?: ""
        val headers = response.headers()
        return Reply(
            node,
            response.statusCode(),
            if (text) null else parseJson(raw),
            raw,
            headers.firstValue(ApiHeaders.FENEC_SEQ).map { it.toLongOrNull() ?: 0L }.orElse(0L),
            headers.firstValue(ApiHeaders.IDEMPOTENT_REPLAYED).orElse(null) == "true",
            headers.firstValue(FENEC_LEADER).orElse(null)?.takeIf { it.isNotEmpty() },
        )
    }

    private fun hostPort(url: URI): String = "${url.host}:${if (url.port >= 0) url.port else if (url.scheme == "https") 443 else 80}"

    private fun failure(e: Throwable, node: URI, limit: Duration, wait: Duration?): FenecException {
        val at = hostPort(node)
        return when {
            e is HttpConnectTimeoutException -> fenecException(
                0, ErrorCode.TIMEOUT,
                "timeout: no connection to $at in ${connectTimeout(timeout).inWholeMilliseconds} ms (the connect timeout)", cause = e,
            )
            e is HttpTimeoutException -> fenecException(
                0, ErrorCode.TIMEOUT,
                "timeout: no answer from $at in ${limit.inWholeMilliseconds} ms (the request's timeout of ${timeout.inWholeMilliseconds} ms" +
                    (if (wait != null) " plus the wait of ${wait.inWholeMilliseconds} ms)" else ")"),
                cause = e,
            )
            else -> fenecException(0, ErrorCode.NETWORK, "network: cannot reach $at: ${cause(e)}", cause = e)
        }
    }

    private fun refusal(reply: Reply): FenecException {
        val o = reply.body as? JsonObject
        val message = (o?.get("error") as? JsonPrimitive)?.takeIf { it.isString }?.content
        val wire = (o?.get("code") as? JsonPrimitive)?.takeIf { it.isString }?.content
        if (message == null || wire == null) return unexpected(reply)
        // A code a newer server added: UNKNOWN, its text kept (wireCode).
        val code = ErrorCode.of(wire) ?: ErrorCode.UNKNOWN
        val at = (o["at"] as? JsonPrimitive)?.intOrNull
        return fenecException(reply.status, code, message, at, leader = if (code == ErrorCode.FORBIDDEN) reply.leader else null, wireCode = wire)
    }

    private fun unexpected(reply: Reply): FenecException {
        val start = reply.text.trim().take(200).ifEmpty { "(an empty body)" }
        return fenecException(reply.status, ErrorCode.UNEXPECTED, "unexpected answer from ${hostPort(reply.node)}: HTTP ${reply.status}: $start")
    }

    /**
     * Sends [request] and waits for its answer on a thread of
     * Dispatchers.IO (pooled: no thread is started per request). Not
     * `sendAsync`: that one hands every answer to the common ForkJoinPool,
     * which on a machine of two cores or fewer starts a new thread per task.
     * Cancelling the coroutine interrupts `send`, which cancels the exchange
     * and closes its connection (so the server drops a held claim).
     */
    private suspend fun exchange(request: HttpRequest): HttpResponse<String> =
        withContext(Dispatchers.IO) { runInterruptible { http.send(request, HttpResponse.BodyHandlers.ofString()) } }

    override fun toString(): String = "Client(${nodes.current()}${wait?.let { ", wait $it" } ?: ""})"
}

/**
 * Fields' declared types per collection (docs/sdks.md, "Rows"): loaded
 * before the first statement that answers a collection's rows is sent (a
 * failure then loses no answer), and again when a row holds a field they
 * lack.
 */
internal class Schema {
    private val types = ConcurrentHashMap<String, Map<String, FieldType>>()

    suspend fun load(collection: String, fetch: suspend () -> Map<String, Map<String, FieldType>>) {
        if (!types.containsKey(collection)) refresh(collection, fetch)
    }

    private suspend fun refresh(collection: String, fetch: suspend () -> Map<String, Map<String, FieldType>>) {
        val all = fetch()
        types.putAll(all)
        // A collection not listed (not made yet, or not this token's to read): no declared types.
        types.putIfAbsent(collection, emptyMap())
    }

    suspend fun types(
        collection: String,
        rows: List<JsonObject>,
        fetch: suspend () -> Map<String, Map<String, FieldType>>,
    ): Map<String, FieldType> {
        val known = types[collection] ?: emptyMap()
        // `id` and paths (`payload.to`) are no declared field; any other
        // column the types lack means the collection is new or changed.
        val missing = rows.any { r -> r.keys.any { k -> k != "id" && '.' !in k && k !in known } }
        if (!missing) return known
        try {
            refresh(collection, fetch)
        } catch (e: FenecException) {
            return known // the answer is kept: its new columns as the JSON says
        }
        return types[collection] ?: emptyMap()
    }
}

private val json = Json { isLenient = false }

private fun parseJson(text: String): JsonElement? = try {
    json.parseToJsonElement(text)
} catch (e: Exception) {
    null
}

/**
 * A column's value by its declared type; by its JSON when none is declared.
 * A declared timestamp that is not ISO-8601 text throws
 * IllegalArgumentException saying what came, rather than becoming a String
 * the caller would only trip on later.
 */
internal fun decodeValue(v: JsonElement, type: FieldType?): Any? {
    if (v is JsonNull) return null
    return when (type) {
        FieldType.TIMESTAMP -> {
            val text = (v as? JsonPrimitive)?.takeIf { it.isString }?.content
                ?: throw IllegalArgumentException("a timestamp is ISO-8601 text, not $v")
            try {
                Instant.parse(text)
            } catch (e: DateTimeParseException) {
                throw IllegalArgumentException("the timestamp ${quote(text)} is not ISO-8601 (${e.message})", e)
            }
        }
        FieldType.JSON, FieldType.GEO -> v
        FieldType.FLOAT -> (v as? JsonPrimitive)?.takeIf { !it.isString }?.content?.toDoubleOrNull() ?: byShape(v)
        else -> byShape(v)
    }
}

private val WHOLE = Regex("-?[0-9]+")

private fun byShape(v: JsonElement): Any? = when (v) {
    is JsonNull -> null
    is JsonPrimitive -> when {
        v.isString -> v.content
        v.booleanOrNull != null -> v.booleanOrNull
        // Most numbers are whole and fit a Long: that parse first, the pattern only past it.
        else -> (if (v.content.startsWith("+")) null else v.content.toLongOrNull())
            ?: if (WHOLE.matches(v.content)) BigInteger(v.content) else v.content.toDouble()
    }
    else -> v
}

/** The header of a follower's 403 naming the leader (openapi.yaml's Forbidden answer). */
private const val FENEC_LEADER = "Fenec-Leader"

/** A leader's URL as a Fenec-Leader header names it; null when it is no http(s) URL with a host. */
private fun leaderUrl(raw: String): URI? = try {
    URI(raw.trimEnd('/')).takeIf { (it.scheme == "http" || it.scheme == "https") && !it.host.isNullOrEmpty() }
} catch (e: URISyntaxException) {
    null
}

/** [connect]'s URLs, each checked (a bad one named with its position), duplicates dropped. */
private fun parseUrls(urls: List<String>): Nodes {
    require(urls.isNotEmpty()) { "connect needs at least one URL, such as http://127.0.0.1:8080" }
    val nodes = urls.mapIndexed { i, u ->
        if (urls.size == 1) {
            parseUrl(u)
        } else {
            try {
                parseUrl(u)
            } catch (e: IllegalArgumentException) {
                throw IllegalArgumentException("node ${i + 1} of ${urls.size}: ${e.message}")
            }
        }
    }
    return Nodes(nodes.map { URI(it.toString().trimEnd('/')) }.distinct())
}

private fun parseUrl(url: String): URI {
    val uri = try {
        URI(url)
    } catch (e: URISyntaxException) {
        throw IllegalArgumentException("url ${quote(url)} is not a URL: ${e.reason}")
    }
    require(uri.scheme == "http" || uri.scheme == "https") {
        "url ${quote(url)} needs the scheme http:// or https:// (such as http://127.0.0.1:8080)"
    }
    require(!uri.host.isNullOrEmpty()) { "url ${quote(url)} has no host (such as http://127.0.0.1:8080)" }
    require(uri.rawQuery == null && uri.rawFragment == null) { "url ${quote(url)} must not have a query or a fragment" }
    return uri
}

/** A connection is given the client's timeout, at most 10 s. */
private fun connectTimeout(timeout: Duration): Duration = minOf(timeout, 10.seconds)

private fun requireMillis(what: String, d: Duration) {
    require(d.isFinite() && d >= Duration.ZERO) { "$what must be a finite, non-negative duration, not $d" }
}

private fun unwrap(e: Throwable): Throwable {
    var x = e
    while ((x is CompletionException || x is java.util.concurrent.ExecutionException) && x.cause != null) x = x.cause!!
    return x
}

/** The cause of a network failure in words: "connection refused", "unknown host …", or the exception's message. */
private fun cause(e: Throwable): String {
    var x: Throwable? = e
    while (x != null) {
        when (x) {
            is ConnectException -> return "connection refused" + (x.message?.takeIf { it.isNotBlank() && !it.contains("refused", true) }?.let { " ($it)" } ?: "")
            is UnknownHostException -> return "unknown host ${x.message ?: ""}".trim()
            is ClosedChannelException -> return "the connection was closed"
            is SSLHandshakeException -> return "TLS: the handshake failed (${x.message ?: "no reason given"})"
        }
        if (x.cause == null || x.cause === x) break
        x = x.cause
    }
    return e.message?.takeIf { it.isNotBlank() } ?: e.javaClass.simpleName
}
