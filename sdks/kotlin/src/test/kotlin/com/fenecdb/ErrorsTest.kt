package com.fenecdb

import com.sun.net.httpserver.HttpServer
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows
import java.net.InetSocketAddress
import java.net.ServerSocket
import java.nio.file.Files
import java.util.Base64
import javax.crypto.Mac
import javax.crypto.spec.SecretKeySpec
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/** Each refusal of a real server, and each failure of the client's own, as one FenecException. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ErrorsTest {
    private lateinit var server: FenecServer
    private lateinit var db: Client

    @BeforeAll
    fun start() {
        server = FenecServer()
        db = server.connect()
        runBlocking { db.query(JOBS_SCHEMA) }
    }

    @AfterAll
    fun stop() = server.close()

    private fun refused(status: Int, code: ErrorCode, block: suspend () -> Unit): FenecException {
        val e = assertThrows<FenecException> { runBlocking { block() } }
        assertEquals(status, e.status, e.toString())
        assertEquals(code, e.code, e.toString())
        assertTrue(e.message!!.isNotBlank())
        return e
    }

    @Test
    fun `400 a statement that does not parse`() {
        val e = refused(400, ErrorCode.BAD_REQUEST) { db.query("get jobs wher id = 1") }
        assertNull(e.at)
    }

    @Test
    fun `404 an unknown collection`() {
        val e = refused(404, ErrorCode.NOT_FOUND) { db.from("nope").rows() }
        assertTrue(e is FenecStatusException && e !is FenecConnectionException, "a refusal is a FenecStatusException: $e")
        assertTrue(!e.retryable)
    }

    @Test
    fun `409 a taken unique value`() = runBlocking<Unit> {
        db.query("create collection users (email text @unique)")
        db.from("users").insert(mapOf("email" to "ada@example.com"))
        refused(409, ErrorCode.CONFLICT) { db.from("users").insert(mapOf("email" to "ada@example.com")) }
        assertEquals(1L, db.from("users").count())
    }

    @Test
    fun `412 a require that is not met`() {
        refused(412, ErrorCode.UNMET) { db.from("jobs").where("id", 999_999).delete(require = 1) }
    }

    @Test
    fun `422 an idempotency key used for another request`() = runBlocking<Unit> {
        val jobs = db.from("jobs")
        val first = db.query(jobs.renderInsert(mapOf("attempts" to 0)), idempotencyKey = "k-422")
        val again = db.query(jobs.renderInsert(mapOf("attempts" to 0)), idempotencyKey = "k-422")
        assertEquals(false, first.replayed)
        assertEquals(true, again.replayed)
        assertTrue(first.seq > 0)
        assertEquals(first.seq, again.seq)
        assertEquals(1L, jobs.insert(mapOf("attempts" to 0), idempotencyKey = "k-422"), "the endpoint's key is sent: a replay")
        refused(422, ErrorCode.KEY_REUSED) { jobs.insert(mapOf("attempts" to 1), idempotencyKey = "k-422") }
    }

    @Test
    fun `a refused batch names its statement and leaves no trace`() = runBlocking<Unit> {
        val jobs = db.from("jobs")
        val before = jobs.count()
        val e = refused(412, ErrorCode.UNMET) {
            db.batch(
                listOf(
                    jobs.renderInsert(mapOf("attempts" to 0)),
                    jobs.where("id", 999_999).renderDelete(require = 1),
                ),
            )
        }
        assertEquals(1, e.at)
        assertEquals(before, jobs.count())
        val ok = db.batch(listOf(jobs.renderInsert(mapOf("attempts" to 0)), jobs.renderCount()))
        assertEquals(1L, ok[0].affected)
        assertEquals(before + 1, ok[1].rows!![0].long("count"))
    }

    @Test
    fun `401 without the token`() {
        FenecServer("--token", "s3cret").use { s ->
            refused(401, ErrorCode.UNAUTHORIZED) { s.connect().query("get jobs") }
            runBlocking { s.connect("s3cret").query(JOBS_SCHEMA) }
        }
    }

    @Test
    fun `403 a write a policy does not grant`() {
        val secret = "a-secret-of-thirty-two-bytes-or-more"
        val policy = Files.createTempFile("policy", ".txt")
        Files.writeString(policy, "jobs read\n")
        try {
            FenecServer("--token", "admin", "--jwt-secret", secret, "--policy", policy.toString()).use { s ->
                runBlocking { s.connect("admin").query(JOBS_SCHEMA) }
                val reader = s.connect(hs256(secret, """{"sub":"r1","exp":${System.currentTimeMillis() / 1000 + 3600}}"""))
                runBlocking { reader.from("jobs").rows() }
                val e = refused(403, ErrorCode.FORBIDDEN) { reader.from("jobs").insert(mapOf("attempts" to 0)) }
                assertNull(e.leader)
                // With several URLs too, the token's 403 is thrown at once: no
                // other node would run it (docs/sdks.md, "Several nodes").
                val down = ServerSocket(0).use { "http://127.0.0.1:${it.localPort}" }
                val both = Fenec.connect(
                    listOf(s.url, down), hs256(secret, """{"sub":"r1","exp":${System.currentTimeMillis() / 1000 + 3600}}"""), 5.seconds,
                )
                val start = System.nanoTime()
                refused(403, ErrorCode.FORBIDDEN) { both.from("jobs").insert(mapOf("attempts" to 0)) }
                val tookMs = (System.nanoTime() - start) / 1_000_000
                assertTrue(tookMs < 1000, "the 403 came after $tookMs ms")
            }
        } finally {
            Files.delete(policy)
        }
    }

    @Test
    fun `network error names host, port and the cause`() {
        val port = ServerSocket(0).use { it.localPort } // free, and nothing listens once closed
        val e = refused(0, ErrorCode.NETWORK) { Fenec.connect("http://127.0.0.1:$port").query("get jobs") }
        assertTrue(e.message!!.contains("127.0.0.1:$port"), e.message)
        assertTrue(e.message!!.contains("connection refused"), e.message)
        assertTrue(e.cause != null)
        assertTrue(e is FenecConnectionException && e !is FenecTimeoutException, "no answer is a FenecConnectionException: $e")
        assertTrue(e.retryable)
    }

    @Test
    fun `timeout says which and how long`() {
        ServerSocket(0).use { silent -> // accepts, never answers
            val db = Fenec.connect("http://127.0.0.1:${silent.localPort}", timeout = 300.milliseconds)
            val e = refused(0, ErrorCode.TIMEOUT) { db.query("get jobs") }
            assertTrue(e.message!!.contains("300 ms"), e.message)
            assertTrue(e.message!!.contains("timeout"), e.message)
            assertTrue(e is FenecTimeoutException && e is FenecConnectionException, "a timeout is a FenecTimeoutException, a FenecConnectionException: $e")
        }
    }

    @Test
    fun `unexpected answer from a proxy`() {
        val proxy = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
        proxy.createContext("/") { ex ->
            val body = "<html><body>502 Bad Gateway</body></html>".toByteArray()
            ex.sendResponseHeaders(502, body.size.toLong())
            ex.responseBody.use { it.write(body) }
        }
        proxy.start()
        try {
            val e = refused(502, ErrorCode.UNEXPECTED) { Fenec.connect("http://127.0.0.1:${proxy.address.port}").query("get jobs") }
            assertTrue(e.message!!.contains("502") && e.message!!.contains("<html>"), e.message)
            assertTrue(e is FenecStatusException, "a proxy's answer is a FenecStatusException: $e")
        } finally {
            proxy.stop(0)
        }
    }

    @Test
    fun `a timestamp that is not ISO-8601 is an error naming the field and the value`() {
        // The server's own /collections (run_at declared a timestamp), and a
        // row whose run_at no server would send.
        val collections = java.net.URI("${server.url}/collections").toURL().readText()
        val proxy = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
        proxy.createContext("/") { ex ->
            val body = (if (ex.requestURI.path == "/collections") collections else """[{"id":1,"run_at":"yesterday"}]""").toByteArray()
            ex.responseHeaders.add("Content-Type", "application/json")
            ex.sendResponseHeaders(200, body.size.toLong())
            ex.responseBody.use { it.write(body) }
        }
        proxy.start()
        try {
            val e = refused(200, ErrorCode.UNEXPECTED) { Fenec.connect("http://127.0.0.1:${proxy.address.port}").from("jobs").rows() }
            assertTrue(e.message!!.contains("field \"run_at\"") && e.message!!.contains("\"yesterday\""), e.message)
        } finally {
            proxy.stop(0)
        }
    }

    @Test
    fun `a code this version does not know is UNKNOWN, its text kept`() {
        val proxy = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
        proxy.createContext("/") { ex ->
            val body = """{"error":"a refusal of a newer server","code":"brand_new_code"}""".toByteArray()
            ex.responseHeaders.add("Content-Type", "application/json")
            ex.sendResponseHeaders(409, body.size.toLong())
            ex.responseBody.use { it.write(body) }
        }
        proxy.start()
        try {
            val e = refused(409, ErrorCode.UNKNOWN) { Fenec.connect("http://127.0.0.1:${proxy.address.port}").query("get jobs") }
            assertEquals("brand_new_code", e.wireCode)
            assertEquals("a refusal of a newer server", e.message)
            assertTrue(e.toString().contains("brand_new_code"), e.toString())
            // An exhaustive when over the codes has a branch for it.
            val kind = when (e.code) {
                ErrorCode.UNKNOWN -> "unknown"
                else -> "known"
            }
            assertEquals("unknown", kind)
        } finally {
            proxy.stop(0)
        }
    }

    @Test
    fun `bad URLs and waits fail at once`() {
        for (url in listOf("127.0.0.1:8080", "ftp://x", "http://", "not a url")) {
            assertThrows<IllegalArgumentException>(url) { Fenec.connect(url) }
        }
        val e = assertThrows<IllegalArgumentException> { db.withWait(31.seconds) }
        assertTrue(e.message!!.contains("milliseconds"), e.message)
        assertThrows<IllegalArgumentException> { db.withWait(java.time.Duration.ofMillis(-1)) }
    }
}

/** A JWT signed with HS256. */
fun hs256(secret: String, claims: String): String {
    val enc = Base64.getUrlEncoder().withoutPadding()
    val signed = enc.encodeToString("""{"alg":"HS256","typ":"JWT"}""".toByteArray()) + "." + enc.encodeToString(claims.toByteArray())
    val mac = Mac.getInstance("HmacSHA256").apply { init(SecretKeySpec(secret.toByteArray(), "HmacSHA256")) }
    return signed + "." + enc.encodeToString(mac.doFinal(signed.toByteArray()))
}
