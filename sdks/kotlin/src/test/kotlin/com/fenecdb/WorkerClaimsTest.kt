package com.fenecdb

import com.sun.net.httpserver.HttpServer
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.long
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.net.InetSocketAddress
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.util.Collections
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.Executors
import kotlin.time.Duration.Companion.seconds

/**
 * How the worker's claims and acks go out (docs/workers.md, "Claim"): seen
 * by a loopback proxy in front of a real server, which records each
 * /query and /batch request — its Fenec-Wait and its statements.
 */
class WorkerClaimsTest {
    /** One statement of a recorded request. */
    private data class Sent(val query: String, val params: List<JsonElement>)

    /**
     * One recorded /query or /batch request: its Fenec-Wait ("" when none),
     * its statements, and the status the proxy answered it itself (null:
     * forwarded to the server).
     */
    private data class Request(val path: String, val wait: String, val statements: List<Sent>, val answered: Int? = null) {
        val claim: Boolean get() = statements.lastOrNull()?.query?.startsWith("set jobs {owner: \$1") == true
        val acks: List<Sent> get() = statements.filter { it.query.startsWith("del jobs where id in \$1") }
    }

    private class RecordingProxy(private val target: String) : AutoCloseable {
        val requests: MutableList<Request> = Collections.synchronizedList(mutableListOf<Request>())

        /** Answers (status, body) the proxy gives the next claims carrying acks itself, not forwarding them. */
        val carriedAnswers = ConcurrentLinkedQueue<Pair<Int, String>>()
        private val forward = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()
        private val server = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
        private val pool = Executors.newCachedThreadPool { r -> Thread(r).apply { isDaemon = true } }
        val url: String

        init {
            // A thread per request: a held claim holds one until it is answered.
            server.executor = pool
            server.createContext("/") { ex ->
                val body = ex.requestBody.readAllBytes()
                val path = ex.requestURI.path
                if (path == "/query" || path == "/batch") {
                    val json = Json.parseToJsonElement(body.decodeToString()).jsonObject
                    val statements = (if (path == "/batch") json["statements"]!!.jsonArray.map { it.jsonObject } else listOf(json))
                        .map { s -> Sent(s["query"]!!.jsonPrimitive.content, (s["params"] as? JsonArray).orEmpty()) }
                    val request = Request(path, ex.requestHeaders.getFirst("Fenec-Wait") ?: "", statements)
                    val canned = if (request.claim && request.acks.isNotEmpty()) carriedAnswers.poll() else null
                    requests += request.copy(answered = canned?.first)
                    if (canned != null) {
                        val out = canned.second.toByteArray()
                        ex.responseHeaders.add("Content-Type", "application/json")
                        ex.sendResponseHeaders(canned.first, out.size.toLong())
                        ex.responseBody.use { it.write(out) }
                        return@createContext
                    }
                }
                val req = HttpRequest.newBuilder(URI(target + ex.requestURI))
                    .method(ex.requestMethod, HttpRequest.BodyPublishers.ofByteArray(body))
                for (h in listOf("Content-Type", "Idempotency-Key", "Authorization", "Fenec-After", "Fenec-Wait")) ex.requestHeaders.getFirst(h)?.let { req.header(h, it) }
                val res = forward.send(req.build(), HttpResponse.BodyHandlers.ofByteArray())
                for ((k, v) in res.headers().map()) if (k.lowercase().startsWith("fenec-")) v.forEach { ex.responseHeaders.add(k, it) }
                ex.responseHeaders.add("Content-Type", res.headers().firstValue("Content-Type").orElse("application/json"))
                ex.sendResponseHeaders(res.statusCode(), if (res.body().isEmpty()) -1 else res.body().size.toLong())
                ex.responseBody.use { it.write(res.body()) }
            }
            server.start()
            url = "http://127.0.0.1:${server.address.port}"
        }

        fun snapshot(): List<Request> = synchronized(requests) { requests.toList() }

        override fun close() {
            server.stop(0)
            pool.shutdownNow()
        }
    }

    /** The ids an ack statement names (its `$1`). */
    private fun ids(s: Sent): List<Long> = s.params[0].jsonArray.map { it.jsonPrimitive.long }

    /** A server on the system clock with [jobs] jobs ready in `jobs`, and a proxy before it recording each request. */
    private suspend fun withQueue(jobs: Int, body: suspend (db: Client, proxy: RecordingProxy) -> Unit) {
        FenecServer(manualClock = false).use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            enqueueJobs(db, jobs)
            RecordingProxy(s.url).use { proxy -> body(db, proxy) }
        }
    }

    @Test
    fun `acks go in the request of the next claim - about one request per round of 10 jobs`() = runBlocking<Unit> {
        val total = 400
        withQueue(total) { db, proxy ->
            val reports = Collections.synchronizedList(mutableListOf<WorkerException>())
            val worker = Worker(Fenec.connect(proxy.url).from("jobs"), WorkerOptions(concurrency = 10, wait = 2.seconds, onError = { reports += it })) { }
            whileRunning(worker) {
                eventually(60.seconds, "every job acked") { db.from("jobs").count() == 0L }
            }
            val sent = proxy.snapshot().filter { it.claim || it.acks.isNotEmpty() }
            val carried = sent.filter { it.claim && it.acks.isNotEmpty() }
            val alone = sent.filter { !it.claim }
            val perJob = sent.size.toDouble() / total
            println("acks with the claim: $total jobs at concurrency 10, ${sent.size} requests (${"%.3f".format(perJob)} a job): ${carried.size} claims carrying acks, ${alone.size} acks alone")
            assertEquals(emptyList<WorkerException>(), reports.toList())
            assertTrue(carried.all { it.path == "/batch" && it.wait == "0" }, "a carrying claim held, or not a /batch")
            // Each job acked once, by one statement of one request.
            val acked = sent.flatMap { r -> r.acks.flatMap { ids(it) } }
            assertEquals(total, acked.size, "acks sent twice or missing")
            assertEquals(total, acked.toSet().size)
            // About 40 rounds of 10: most claims carry the acks of the round before (35-40 seen; 0 without).
            assertTrue(carried.size * 4 >= total / 10, "${carried.size} claims carried acks for $total jobs")
            assertTrue(perJob <= 0.2, "${sent.size} requests for $total jobs")
        }
    }

    @Test
    fun `a lost lease inside a carried batch is reported, and the job is not acked`() = runBlocking<Unit> {
        withQueue(2) { db, proxy ->
            val reports = Collections.synchronizedList(mutableListOf<WorkerException>())
            val done = Collections.synchronizedList(mutableListOf<Long>())
            val worker = Worker(Fenec.connect(proxy.url).from("jobs"), WorkerOptions(concurrency = 1, wait = 2.seconds, onError = { reports += it })) { job ->
                val id = job.long("id")!!
                // The first job's owner is moved while its handler runs: its ack deletes nothing.
                if (done.isEmpty()) assertEquals(1L, db.from("jobs").where("id", id).update(mapOf("owner" to "thief"), require = 1))
                done += id
            }
            whileRunning(worker) {
                eventually(30.seconds, "the second job acked") { db.from("jobs").count() == 1L && done.size == 2 }
                eventually(30.seconds, "a claim held at the end") { proxy.snapshot().any { it.claim && it.wait == "2000" } }
            }
            val left = db.from("jobs").rows()
            assertEquals(listOf(done[0]), left.map { it.long("id") })
            assertEquals("thief", left[0].string("owner"))
            assertEquals(listOf(WorkerStep.LOST_LEASE to done[0]), reports.map { it.step to it.jobId }, reports.toString())
            val sent = proxy.snapshot()
            val carried = sent.filter { it.claim && it.acks.isNotEmpty() }
            assertEquals(listOf(listOf(listOf(done[0])), listOf(listOf(done[1]))), carried.map { r -> r.acks.map { ids(it) } }, sent.toString())
            assertTrue(carried.all { it.path == "/batch" && it.statements.size == 2 })
            assertEquals(emptyList<Request>(), sent.filter { !it.claim && it.acks.isNotEmpty() }, "an ack sent alone")
        }
    }

    @Test
    fun `a carried batch that meets a fault - the acks go alone, the claim is retried`() = runBlocking<Unit> {
        withQueue(2) { db, proxy ->
            // The first claim carrying acks is answered 503, as a server shutting down does: nothing of it ran.
            proxy.carriedAnswers += 503 to """{"error":"the server is shutting down","code":"unavailable"}"""
            val reports = Collections.synchronizedList(mutableListOf<WorkerException>())
            val done = Collections.synchronizedList(mutableListOf<Long>())
            val worker = Worker(Fenec.connect(proxy.url).from("jobs"), WorkerOptions(concurrency = 1, wait = 2.seconds, onError = { reports += it })) { job ->
                done += job.long("id")!!
            }
            whileRunning(worker) {
                eventually(30.seconds, "both jobs acked, and a claim held") {
                    db.from("jobs").count() == 0L && proxy.snapshot().any { it.claim && it.wait == "2000" }
                }
            }
            assertEquals(2, done.size, "a job ran twice: $done")
            assertEquals(listOf(WorkerStep.CLAIM to null), reports.map { it.step to it.jobId }, reports.toString())
            val sent = proxy.snapshot().filter { it.claim || it.acks.isNotEmpty() }
            val refused = sent.indexOfFirst { it.answered == 503 }
            assertTrue(refused >= 0, sent.toString())
            assertEquals(listOf(listOf(done[0])), sent[refused].acks.map { ids(it) })
            val after = sent.drop(refused + 1)
            // The acks alone (a request of their own), the claim again alone and not held.
            assertEquals(listOf(listOf(listOf(done[0]))), after.filter { !it.claim }.map { r -> r.acks.map { ids(it) } }, sent.toString())
            val nextClaim = after.first { it.claim }
            assertTrue(nextClaim.acks.isEmpty() && nextClaim.wait == "0", sent.toString())
            // Job 2's ack went with the claim after it, answered by the server.
            assertEquals(listOf(listOf(listOf(done[1]))), after.filter { it.claim && it.acks.isNotEmpty() }.map { r -> r.acks.map { ids(it) } }, sent.toString())
        }
    }

    @Test
    fun `a refused ack in a carried batch is reported as a lone one's, and the claim sent again alone`() = runBlocking<Unit> {
        withQueue(1) { db, proxy ->
            // The batch's first statement (the ack) refused: a batch runs all or nothing, so the claim did not run either.
            proxy.carriedAnswers += 400 to """{"error":"refused for the test","code":"bad_request","at":0}"""
            val reports = Collections.synchronizedList(mutableListOf<WorkerException>())
            val done = Collections.synchronizedList(mutableListOf<Long>())
            val worker = Worker(Fenec.connect(proxy.url).from("jobs"), WorkerOptions(concurrency = 1, wait = 2.seconds, onError = { reports += it })) { job ->
                done += job.long("id")!!
            }
            whileRunning(worker) {
                eventually(30.seconds, "a claim held") { proxy.snapshot().any { it.claim && it.wait == "2000" } }
            }
            assertEquals(1, done.size)
            assertEquals(listOf(WorkerStep.ACK to done[0]), reports.map { it.step to it.jobId }, reports.toString())
            assertTrue(reports[0].message!!.contains("refused for the test"), reports[0].message)
            // Not deleted: its ack was refused, and a refusal is not sent again.
            assertEquals(listOf(done[0]), db.from("jobs").rows().map { it.long("id") })
            val sent = proxy.snapshot().filter { it.claim || it.acks.isNotEmpty() }
            val refused = sent.indexOfFirst { it.answered == 400 }
            assertTrue(refused >= 0, sent.toString())
            assertEquals(emptyList<Request>(), sent.filter { !it.claim }, "an ack sent alone")
            // The claim sent again at once, alone, not held: it finds nothing, and the next is held.
            assertEquals(listOf("0" to 0, "2000" to 0), sent.drop(refused + 1).take(2).map { it.wait to it.acks.size }, sent.toString())
        }
    }

    @Test
    fun `claims go not held while the last took jobs, and held once one found none`() = runBlocking<Unit> {
        withQueue(3) { db, proxy ->
            val worker = Worker(Fenec.connect(proxy.url).from("jobs"), WorkerOptions(concurrency = 1, wait = 3.seconds, onError = {})) { }
            whileRunning(worker) {
                eventually(30.seconds, "every job acked, and a claim held") {
                    db.from("jobs").count() == 0L && proxy.snapshot().any { it.claim && it.wait == "3000" }
                }
            }
            // Three claims take a job each, the fourth finds none (all answered
            // at once), and only then is one held.
            val waits = proxy.snapshot().filter { it.claim }.map { it.wait }
            assertEquals(listOf("0", "0", "0", "0", "3000"), waits.take(5), waits.toString())
        }
    }
}

/** Runs [worker] in the background while [block] runs, then stops it and waits for its run to end. */
internal suspend fun whileRunning(worker: Worker, block: suspend () -> Unit) = coroutineScope {
    val running = launch(Dispatchers.Default) { worker.run() }
    try {
        block()
    } finally {
        worker.stop()
        running.join()
    }
}
