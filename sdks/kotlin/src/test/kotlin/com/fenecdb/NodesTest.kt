package com.fenecdb

import com.sun.net.httpserver.HttpServer
import com.sun.net.httpserver.HttpsConfigurator
import com.sun.net.httpserver.HttpsServer
import kotlinx.coroutines.async
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows
import java.io.File
import java.net.InetSocketAddress
import java.net.ServerSocket
import java.nio.file.Files
import java.security.KeyStore
import java.util.Collections
import javax.net.ssl.KeyManagerFactory
import javax.net.ssl.SSLContext
import javax.net.ssl.TrustManagerFactory
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeSource

/**
 * The rules of docs/sdks.md, "Several nodes", where no real server can make
 * the case: a leader named over https → http, the bound on follows. The
 * cluster's own cases are ClusterTest's.
 */
/** 503 no_leader; its message is not what the client goes by. */
private val NO_LEADER = 503 to """{"error":"no leader is elected now: send the write again shortly, to any node","code":"no_leader"}"""

/** A write's success. */
private val OK = 200 to """{"affected": 1}"""

@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class NodesTest {
    private val servers = mutableListOf<HttpServer>()

    @AfterAll
    fun stop() = servers.forEach { it.stop(0) }

    /**
     * A node that answers every request as a cluster's node refuses a write
     * unrun: 403 forbidden naming [leader], as a follower does, or with none
     * 503 no_leader, as a node that knows no leader or was just elected does
     * (docs/cluster.md); it records what it is sent.
     */
    private inner class Stub(
        val leader: () -> String?,
        https: SSLContext? = null,
        /** When set, answers the nth request (from 1): its status and body. */
        val answer: ((Int) -> Pair<Int, String>)? = null,
    ) {
        val got: MutableList<String> = Collections.synchronizedList(mutableListOf())
        val url: String

        init {
            val server = if (https == null) {
                HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
            } else {
                HttpsServer.create(InetSocketAddress("127.0.0.1", 0), 0).apply { httpsConfigurator = HttpsConfigurator(https) }
            }
            server.createContext("/") { ex ->
                val body = ex.requestBody.readBytes().decodeToString()
                val h = ex.requestHeaders
                got += listOf("${ex.requestMethod} ${ex.requestURI.path}", h.getFirst("Idempotency-Key"), h.getFirst("Fenec-Wait"), h.getFirst("Authorization"), body)
                    .joinToString(" | ")
                val l = leader()
                if (l != null) ex.responseHeaders.add("Fenec-Leader", l)
                ex.responseHeaders.add("Content-Type", "application/json")
                val (status, text) = answer?.invoke(got.size) ?: if (l != null) {
                    403 to """{"error":"this node is not the cluster's leader: send writes to the leader at $l","code":"forbidden"}"""
                } else {
                    NO_LEADER
                }
                val bytes = text.toByteArray()
                ex.sendResponseHeaders(status, bytes.size.toLong())
                ex.responseBody.use { it.write(bytes) }
            }
            server.start()
            servers += server
            url = "${if (https == null) "http" else "https"}://127.0.0.1:${server.address.port}"
        }
    }

    @Test
    fun `follows at most three times between pauses, the same request`() = runBlocking<Unit> {
        // Each node names the next as its leader.
        val nodes = arrayOfNulls<Stub>(5)
        for (i in 4 downTo 0) nodes[i] = if (i < 4) Stub({ nodes[i + 1]!!.url }) else Stub({ null }, answer = { OK })
        val db = Fenec.connect(nodes[0]!!.url, token = "tok")
        val e = assertThrows<FenecException> {
            runBlocking {
                db.withWait(2.seconds).query(
                    "set jobs {owner: 'w'} where run_at <= now() limit 1 returning id", idempotencyKey = "k1",
                )
            }
        }
        assertEquals(403, e.status)
        assertEquals(ErrorCode.FORBIDDEN, e.code)
        assertEquals(nodes[4]!!.url, e.leader)
        val first = nodes[0]!!.got.toList()
        assertEquals(1, first.size)
        assertTrue(first[0].startsWith("POST /query | k1 | 2000 | Bearer tok | {"), first[0])
        for (i in 1..3) assertEquals(first, nodes[i]!!.got.toList(), "node $i")
        assertEquals(emptyList<String>(), nodes[4]!!.got.toList(), "a fourth follow")
        // The client's current node is the last it followed.
        runCatching { db.query("get jobs") }
        assertEquals(2, nodes[3]!!.got.size)
    }

    @Test
    fun `never follows from https to http`() = runBlocking<Unit> {
        val tls = selfSigned()
        val plain = Stub({ null })
        val secure = Stub({ plain.url }, https = tls)
        val previous = SSLContext.getDefault()
        // The client's HttpClient takes the default context when it is built.
        SSLContext.setDefault(tls)
        val db = try {
            Fenec.connect(secure.url, token = "secret")
        } finally {
            SSLContext.setDefault(previous)
        }
        val e = assertThrows<FenecException> { runBlocking { db.query("put jobs {owner: 'w'}") } }
        assertEquals(ErrorCode.FORBIDDEN, e.code)
        assertEquals(plain.url, e.leader)
        assertEquals(1, secure.got.size)
        assertEquals(0, plain.got.size, "the http leader was sent the https request")
    }

    @Test
    fun `no_leader with one URL - the same node again after each pause, thrown at the deadline`() = runBlocking<Unit> {
        val office = Stub({ null }, answer = { n -> if (n <= 2) NO_LEADER else OK })
        val start = TimeSource.Monotonic.markNow()
        assertEquals(1L, Fenec.connect(office.url).query("put jobs {owner: 'w'}", idempotencyKey = "k3").affected)
        assertEquals(3, office.got.size)
        assertEquals(1, office.got.toSet().size, "the same request")
        assertTrue(start.elapsedNow() >= 150.milliseconds, "after ${start.elapsedNow()}: the pauses are 50 and 100 ms")

        val none = Stub({ null })
        val began = TimeSource.Monotonic.markNow()
        val e = assertThrows<FenecException> { runBlocking { Fenec.connect(none.url, timeout = 300.milliseconds).query("put jobs {owner: 'w'}") } }
        val took = began.elapsedNow()
        // The last 503; or, when the deadline cut a request sent again (a
        // loaded machine is slow to answer it), that request's timeout: its
        // outcome is unknown, so not a refusal. Never another answer.
        if (e.code == ErrorCode.TIMEOUT) {
            assertEquals(0, e.status, e.toString())
            assertTrue(e.message!!.startsWith("timeout: no answer from "), e.message)
        } else {
            assertEquals(503, e.status, e.toString())
            assertEquals(ErrorCode.NO_LEADER, e.code)
        }
        assertTrue(took >= 250.milliseconds && took < 2.seconds, "thrown after $took, the deadline is 300 ms")
        assertTrue(none.got.size in 3..5, "${none.got.size} requests: pauses of 50, 100, 200 ms within 300 ms")
    }

    @Test
    fun `no_leader with several URLs - the next node after each pause, round robin`() = runBlocking<Unit> {
        val order = Collections.synchronizedList(mutableListOf<String>())
        fun stub(name: String, serves: Boolean) = Stub({ null }, answer = {
            order += name
            if (serves && order.size >= 4) OK else NO_LEADER
        })
        val a = stub("a", false)
        val b = stub("b", true)
        val c = stub("c", false)
        val db = Fenec.connect(listOf(a.url, b.url, c.url))
        val start = TimeSource.Monotonic.markNow()
        assertEquals(1L, db.query("put jobs {owner: 'w'}", idempotencyKey = "k2").affected)
        assertEquals(listOf("a", "b", "c", "a", "b"), order.toList())
        assertTrue(start.elapsedNow() >= 750.milliseconds, "after ${start.elapsedNow()}: a pause before each resend (50+100+200+400 ms)")
        assertEquals(b.url, db.node)
        assertEquals(1, (a.got + b.got + c.got).toSet().size, "the same request to every node")
    }

    @Test
    fun `mid-election - the follows count since the last pause`() = runBlocking<Unit> {
        // Two followers name a leader that answers no_leader four times (just
        // elected) before it serves: 1 + 4 follows, at most one between two
        // pauses, so the bound of 3 follows between pauses does not end it.
        val leader = Stub({ null }, answer = { n -> if (n <= 4) NO_LEADER else OK })
        val fa = Stub({ leader.url })
        val fb = Stub({ leader.url })
        val db = Fenec.connect("${fa.url},${fb.url}")
        assertEquals(1L, db.query("put jobs {owner: 'w'}").affected)
        assertEquals(listOf(3, 2, 5), listOf(fa.got.size, fb.got.size, leader.got.size))
        assertEquals(leader.url, db.node)
    }

    @Test
    fun `a token's 403 and any 503 but no_leader are thrown at once, even with several URLs`() = runBlocking<Unit> {
        val other = Stub({ null }, answer = { OK })
        val rules = Stub({ null }, answer = { 403 to """{"error":"the token may not write jobs","code":"forbidden"}""" })
        val start = TimeSource.Monotonic.markNow()
        val e = assertThrows<FenecException> { runBlocking { Fenec.connect(listOf(rules.url, other.url)).query("put jobs {owner: 'w'}") } }
        assertEquals(ErrorCode.FORBIDDEN, e.code)
        assertNull(e.leader)
        assertEquals(1, rules.got.size)
        assertTrue(start.elapsedNow() < 2.seconds)

        val unknown = Stub({ null }, answer = {
            503 to """{"error":"the write was not committed: the write's outcome in the cluster is unknown","code":"unavailable"}"""
        })
        val u = assertThrows<FenecException> { runBlocking { Fenec.connect(listOf(unknown.url, other.url)).query("put jobs {owner: 'w'}") } }
        assertEquals(ErrorCode.UNAVAILABLE, u.code)
        assertEquals(1, unknown.got.size)
        assertEquals(0, other.got.size)
    }

    private fun closedAddr(): String = ServerSocket(0).use { "127.0.0.1:${it.localPort}" }

    @Test
    fun `several nodes down - the last network error at the deadline, and a cancel ends the pauses`() = runBlocking<Unit> {
        val a = closedAddr()
        val b = closedAddr()
        val db = Fenec.connect("http://$a, http://$b", timeout = 400.milliseconds)
        val start = TimeSource.Monotonic.markNow()
        val e = assertThrows<FenecException> { runBlocking { db.query("get jobs") } }
        val took = start.elapsedNow()
        // The last refusal of a connection; or, when the deadline cut a
        // connect still under way (a loaded machine is slow to refuse one),
        // the timeout of that attempt, naming one of the two nodes. Never
        // another code, and never before the deadline.
        when (e.code) {
            ErrorCode.NETWORK -> assertTrue(e.message!!.contains("connection refused"), e.message)
            ErrorCode.TIMEOUT -> assertTrue(e.message!!.startsWith("timeout: ") && (e.message!!.contains(a) || e.message!!.contains(b)), e.message)
            else -> throw AssertionError("want network (refused) or a timeout at the deadline: $e")
        }
        assertTrue(took >= 350.milliseconds && took < 3.seconds, "answered after $took")

        // Cancelling the coroutine ends a call pausing between rounds.
        val slow = Fenec.connect(listOf("http://$a", "http://$b"), timeout = 30.seconds)
        val call = async { runCatching { slow.query("get jobs") } }
        delay(200)
        val cancelled = TimeSource.Monotonic.markNow()
        call.cancel()
        withTimeout(2.seconds) { call.join() }
        assertTrue(call.isCancelled)
        assertTrue(cancelled.elapsedNow() < 1.seconds, "the cancel took ${cancelled.elapsedNow()}")

        // A URL listed twice is one: alone, its failure is at once.
        val once = TimeSource.Monotonic.markNow()
        val one = assertThrows<FenecException> { runBlocking { Fenec.connect("http://$a,http://$a/").query("get jobs") } }
        assertEquals(ErrorCode.NETWORK, one.code)
        assertTrue(once.elapsedNow() < 2.seconds)
    }

    /**
     * The client sends the highest Fenec-Seq it was answered as Fenec-After,
     * so a node it moves to answers only once it has applied those writes.
     * Two lone servers stand in for a node and one that has not applied the
     * client's writes (a lone server refuses at once, with a 400, a
     * Fenec-After beyond its own last write): moved to the second, the client
     * is refused rather than answered as if its writes were not there.
     */
    @Test
    fun `read-your-writes - Fenec-After goes with the client to the next node`() = runBlocking<Unit> {
        FenecServer().use { second ->
            val first = FenecServer()
            try {
                val db = Fenec.connect(listOf(first.url, second.url))
                db.query("create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int)")
                db.from("jobs").insert(mapOf("attempts" to 0))
                assertEquals(1L, db.from("jobs").count()) // sent with Fenec-After: the first node made the write
                first.close()
                val e = assertThrows<FenecException> { runBlocking { db.from("jobs").count() } }
                assertEquals(400, e.status, e.toString())
                assertTrue(e.message!!.contains("Fenec-After"), e.message)
                assertEquals(second.url, db.node)
            } finally {
                first.close()
            }
        }
    }

    @Test
    fun `a bad URL among several is named with its position`() {
        for ((raw, want) in mapOf(
            "http://a:1,b:2,http://c:3" to "node 2 of 3: url \"b:2\"",
            "http://a:1,http://b:2," to "node 3 of 3: url \"\"",
            "http://a:1, ftp://b:2" to "node 2 of 2: url \"ftp://b:2\"",
        )) {
            val e = assertThrows<IllegalArgumentException> { Fenec.connect(raw) }
            assertTrue(e.message!!.startsWith(want), "connect(\"$raw\"): ${e.message}")
        }
        val e = assertThrows<IllegalArgumentException> { Fenec.connect(listOf("http://a:1", "http://")) }
        assertTrue(e.message!!.startsWith("node 2 of 2"), e.message)
        assertThrows<IllegalArgumentException> { Fenec.connect(emptyList<String>()) }
        Fenec.connect(" http://a:1 , https://b:2/ ")
    }

    /** A TLS context whose key is a fresh self-signed certificate for 127.0.0.1 (made by the JDK's keytool), trusting it alone. */
    private fun selfSigned(): SSLContext {
        val dir = Files.createTempDirectory("fenec-tls-")
        val store = dir.resolve("k.p12").toFile()
        val keytool = File(System.getProperty("java.home"), "bin/keytool").path
        val p = ProcessBuilder(
            keytool, "-genkeypair", "-keystore", store.path, "-storetype", "PKCS12", "-storepass", "changeit",
            "-alias", "stub", "-keyalg", "EC", "-dname", "CN=127.0.0.1", "-ext", "SAN=ip:127.0.0.1", "-validity", "2",
        ).redirectErrorStream(true).start()
        val out = p.inputStream.readBytes().decodeToString()
        check(p.waitFor() == 0) { "keytool: $out" }
        val ks = KeyStore.getInstance("PKCS12").apply { store.inputStream().use { load(it, "changeit".toCharArray()) } }
        dir.toFile().deleteRecursively()
        val kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm()).apply { init(ks, "changeit".toCharArray()) }
        val tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm()).apply { init(ks) }
        return SSLContext.getInstance("TLS").apply { init(kmf.keyManagers, tmf.trustManagers, null) }
    }
}
