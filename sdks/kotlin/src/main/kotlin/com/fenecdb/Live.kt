/*
 * Live queries (docs/changes.md): a `get` kept up to date over Server-Sent
 * Events, as a Flow of its events that reconnects where it left off.
 */
package com.fenecdb

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.FlowCollector
import kotlinx.coroutines.flow.flow
import kotlinx.coroutines.future.await
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.booleanOrNull
import kotlinx.serialization.json.contentOrNull
import kotlinx.serialization.json.longOrNull
import java.io.ByteArrayOutputStream
import java.io.IOException
import java.net.URI
import java.net.URLEncoder
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.nio.ByteBuffer
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds

/**
 * One event of a live query (docs/changes.md, "Live queries"): its [name]
 * (`rows`, `insert`, `update`, `delete`, `reset`, `gap`, `closing`), the
 * commit [position] it carries (the SSE `id:`), and its [data] as sent.
 * Rows are JSON objects as sent: not typed by the collection's fields.
 */
public class LiveEvent(
    public val name: String,
    public val position: Long,
    public val data: JsonObject,
) {
    /** A `rows` or `reset` event's rows (at most 1 000 an event); else empty. */
    public val rows: List<JsonObject> get() = (data["rows"] as? JsonArray)?.map { it as JsonObject } ?: emptyList()

    /** Whether this is the last `rows` or `reset` event of a series. */
    public val last: Boolean get() = (data["last"] as? JsonPrimitive)?.booleanOrNull ?: false

    /** An `insert` or `update` event's row, as it is now; else null. */
    public val row: JsonObject? get() = data["row"] as? JsonObject

    /** A `delete` event's id; else null. */
    public val id: Long? get() = (data["id"] as? JsonPrimitive)?.longOrNull

    /** A `closing` event's reason (`shutdown`, `behind`, `token expired`, `the query failed: …`); else null. */
    public val reason: String? get() = (data["reason"] as? JsonPrimitive)?.contentOrNull

    override fun toString(): String = "LiveEvent($name, $position, $data)"
}

/**
 * Follows this read as a live query over Server-Sent Events
 * (docs/changes.md): its rows now, then each insert, update and delete of
 * a row it matches, for as long as the flow is collected. Only `where` and
 * `select` may be set: the server refuses the rest (400).
 *
 * A dropped connection, a `closing` event (the server shutting down, or
 * the client fallen behind), or an answer that may succeed later
 * ([FenecException.retryable]: a server shutting down answers 503
 * `unavailable`) is followed by a reconnect with `Last-Event-ID`, so no
 * change is missed: the server sends nothing again, or a `reset` with the
 * rows as they are now. A refusal (400, 401, 403, 404) throws its
 * [FenecException]; so do [retries] failed reconnects in a row, [retryDelay]
 * apart: [ErrorCode.NETWORK], or the last answer's error when the last
 * reconnect was answered. [after] resumes after a position.
 */
public fun Query.watch(after: Long? = null, retries: Int = 10, retryDelay: Duration = 500.milliseconds): Flow<LiveEvent> =
    client.watch(renderRows(), after, retries, retryDelay)

/** Follows a `get` statement as a live query: see [Query.watch]. */
public fun Client.watch(statement: Statement, after: Long? = null, retries: Int = 10, retryDelay: Duration = 500.milliseconds): Flow<LiveEvent> {
    val body = statement.toJson().toString()
    return live(this, "POST", "/query", body, after, retries, retryDelay)
}

/**
 * Follows `GET /<collection>/changes?where=…&select=…`: the same live
 * query, its condition FenecQL text (null: every row) and its fields a
 * comma-separated list (null: every field).
 */
public fun Client.watchCollection(
    collection: String,
    where: String? = null,
    select: String? = null,
    after: Long? = null,
    retries: Int = 10,
    retryDelay: Duration = 500.milliseconds,
): Flow<LiveEvent> {
    val q = listOfNotNull(where?.let { "where=" + enc(it) }, select?.let { "select=" + enc(it) }).joinToString("&")
    val path = "/" + enc(collectionName(collection)) + "/changes" + (if (q.isEmpty()) "" else "?$q")
    return live(this, "GET", path, null, after, retries, retryDelay)
}

private fun enc(s: String): String = URLEncoder.encode(s, Charsets.UTF_8).replace("+", "%20")

private fun live(db: Client, method: String, path: String, body: String?, after: Long?, retries: Int, retryDelay: Duration): Flow<LiveEvent> = flow {
    var last = after
    var failures = 0
    while (true) {
        val node = db.node.trimEnd('/')
        val req = HttpRequest.newBuilder(URI.create(node + path))
            .header("Accept", "text/event-stream")
            .header("User-Agent", USER_AGENT)
            .apply {
                db.token?.let { header("Authorization", "Bearer $it") }
                last?.let { header("Last-Event-ID", it.toString()) }
                if (body != null) header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body))
                else GET()
            }
            .build()
        var opened = false
        try {
            val resp = db.http.sendAsync(req, HttpResponse.BodyHandlers.ofPublisher()).await()
            val body = Chunks(resp.body())
            try {
                if (resp.statusCode() != 200) throw refused(resp.statusCode(), body.all(), node, resp.headers().firstValue("Fenec-Leader").orElse(null))
                opened = true
                readEvents(body) { ev ->
                    if (ev.position > 0) last = ev.position
                    emit(ev)
                }
            } finally {
                body.cancel()
            }
        } catch (e: FenecException) {
            // A refusal is final; a server that cannot answer now (one
            // shutting down answers 503 `unavailable`) is tried again like a
            // dropped connection, within the same retries.
            if (opened || !e.retryable || ++failures > retries) throw e
        } catch (e: CancellationException) {
            throw e
        } catch (e: IOException) {
            if (!opened && ++failures > retries) {
                throw fenecException(0, ErrorCode.NETWORK, "network: the live query at ${URI(node).authority} could not reconnect: ${e.message ?: e}", cause = e)
            }
        }
        if (opened) failures = 0 else delay(retryDelay)
    }
}

private fun refused(status: Int, text: String, node: String, leader: String?): FenecException {
    val o = runCatching { Json.parseToJsonElement(text) as? JsonObject }.getOrNull()
    val message = (o?.get("error") as? JsonPrimitive)?.takeIf { it.isString }?.content
    val code = (o?.get("code") as? JsonPrimitive)?.takeIf { it.isString }?.content?.let { ErrorCode.of(it) }
    if (message == null || code == null) {
        return fenecException(status, ErrorCode.UNEXPECTED, "unexpected answer from ${URI(node).authority}: HTTP $status: ${text.trim().take(200)}")
    }
    return fenecException(status, code, message, leader = if (code == ErrorCode.FORBIDDEN) leader else null)
}

/**
 * The body as it arrives, read without blocking a thread: a collector
 * cancelled while the stream is quiet (between heartbeats) stops at once,
 * and [cancel] closes the connection.
 */
private class Chunks(publisher: java.util.concurrent.Flow.Publisher<List<ByteBuffer>>) {
    private val ch = Channel<List<ByteBuffer>>(Channel.UNLIMITED)
    @Volatile private var sub: java.util.concurrent.Flow.Subscription? = null
    private var cancelled = false

    init {
        publisher.subscribe(object : java.util.concurrent.Flow.Subscriber<List<ByteBuffer>> {
            override fun onSubscribe(s: java.util.concurrent.Flow.Subscription) {
                sub = s
                synchronized(this@Chunks) { if (cancelled) s.cancel() else s.request(1) }
            }
            override fun onNext(item: List<ByteBuffer>) { ch.trySend(item) }
            override fun onError(t: Throwable) { ch.close(if (t is IOException) t else IOException(t.message ?: t.toString(), t)) }
            override fun onComplete() { ch.close() }
        })
    }

    /** The next chunk's bytes, or null at the end. */
    suspend fun next(): ByteArray? {
        val bufs = ch.receiveCatching().also { it.exceptionOrNull()?.let { e -> throw e } }.getOrNull() ?: return null
        sub?.request(1)
        val out = ByteArray(bufs.sumOf { it.remaining() })
        var at = 0
        for (b in bufs) {
            val n = b.remaining()
            b.get(out, at, n)
            at += n
        }
        return out
    }

    /** The whole body (up to 1 MiB), as text: a refusal's. */
    suspend fun all(): String {
        val out = ByteArrayOutputStream()
        while (out.size() < (1 shl 20)) out.write(next() ?: break)
        return out.toString(Charsets.UTF_8)
    }

    fun cancel() {
        synchronized(this) { cancelled = true }
        sub?.cancel()
        ch.cancel()
    }
}

/** Reads a text/event-stream's events; comments (`: heartbeat`, `: resumed`) are skipped. */
private suspend fun FlowCollector<LiveEvent>.readEvents(body: Chunks, each: suspend FlowCollector<LiveEvent>.(LiveEvent) -> Unit) {
    val pending = ByteArrayOutputStream()
    var name = ""
    var id = ""
    val data = StringBuilder()
    var any = false
    while (true) {
        val chunk = body.next() ?: return
        // Lines split on the \n byte, which no UTF-8 sequence holds, then decoded.
        var start = 0
        for (i in chunk.indices) {
            if (chunk[i] != '\n'.code.toByte()) continue
            pending.write(chunk, start, i - start)
            start = i + 1
            val line = pending.toString(Charsets.UTF_8).removeSuffix("\r")
            pending.reset()
            when {
                line.isEmpty() -> {
                    if (name.isNotEmpty()) {
                        val obj = if (any) Json.parseToJsonElement(data.toString()) as JsonObject else JsonObject(emptyMap())
                        each(LiveEvent(name, id.toLongOrNull() ?: 0, obj))
                    }
                    name = ""
                    id = ""
                    data.setLength(0)
                    any = false
                }
                line.startsWith(":") -> {}
                else -> {
                    val k = line.substringBefore(':')
                    val v = line.substringAfter(':', "").removePrefix(" ")
                    when (k) {
                        "event" -> name = v
                        "id" -> id = v
                        "data" -> {
                            if (any) data.append('\n')
                            data.append(v)
                            any = true
                        }
                    }
                }
            }
        }
        pending.write(chunk, start, chunk.size - start)
    }
}
