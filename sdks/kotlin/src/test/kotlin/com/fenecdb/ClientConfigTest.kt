package com.fenecdb

import com.sun.net.httpserver.HttpServer
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.net.InetSocketAddress
import java.net.ProxySelector
import java.net.ServerSocket
import java.net.http.HttpClient
import java.util.Collections
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.TimeSource

/** What a user configures: an HttpClient of their own, headers, a per-call timeout. */
class ClientConfigTest {
    @Test
    fun `the builder's HttpClient carries every request, with the builder's headers`() = runBlocking<Unit> {
        FenecServer().use { s ->
            // An HTTP proxy in front of the real server: it records each
            // request's headers and forwards it.
            val seen = Collections.synchronizedList(mutableListOf<Map<String, String>>())
            val forward = HttpClient.newHttpClient()
            val proxy = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
            proxy.createContext("/") { ex ->
                seen += ex.requestHeaders.mapValues { it.value.joinToString(",") }.mapKeys { it.key.lowercase() }
                val body = ex.requestBody.readAllBytes()
                val req = java.net.http.HttpRequest.newBuilder(java.net.URI(s.url + ex.requestURI.path))
                    .method(ex.requestMethod, java.net.http.HttpRequest.BodyPublishers.ofByteArray(body))
                    .header("Content-Type", "application/json")
                    .build()
                val res = forward.send(req, java.net.http.HttpResponse.BodyHandlers.ofByteArray())
                ex.responseHeaders.add("Content-Type", "application/json")
                ex.sendResponseHeaders(res.statusCode(), res.body().size.toLong())
                ex.responseBody.use { it.write(res.body()) }
            }
            proxy.start()
            try {
                val http = HttpClient.newBuilder()
                    .version(HttpClient.Version.HTTP_1_1)
                    .proxy(ProxySelector.of(InetSocketAddress("127.0.0.1", proxy.address.port)))
                    .build()
                // A host nothing resolves: only the proxy reaches the server.
                val db = Fenec.builder("http://fenec.invalid:8080").httpClient(http).header("X-Tenant", "a1").build()
                db.query(JOBS_SCHEMA)
                db.from("jobs").insert(mapOf("attempts" to 0))
                assertEquals(1L, db.from("jobs").count())
                assertTrue(seen.size >= 3, seen.toString())
                assertTrue(seen.all { it["x-tenant"] == "a1" }, seen.toString())
                assertTrue(seen.all { it["user-agent"]!!.startsWith("fenecdb-kotlin/") }, seen.toString())
            } finally {
                proxy.stop(0)
            }
        }
    }

    @Test
    fun `the builder refuses the client's own headers and bad ones, at once`() {
        val b = Fenec.builder("http://127.0.0.1:1")
        for (h in listOf("Authorization", "user-agent", "Idempotency-Key", "Fenec-Wait")) {
            val e = assertThrows<IllegalArgumentException>(h) { b.header(h, "x") }
            assertTrue(e.message!!.contains(h), e.message)
        }
        assertThrows<IllegalArgumentException> { b.header("Host", "x") }
        assertThrows<IllegalArgumentException> {
            Fenec.builder("http://127.0.0.1:1").httpClient(HttpClient.newHttpClient()).sslContext(javax.net.ssl.SSLContext.getDefault()).build()
        }
        assertThrows<IllegalArgumentException> { Fenec.builder("ftp://x").build() }
    }

    @Test
    fun `a per-call timeout - withTimeout on the client and on a builder`() = runBlocking<Unit> {
        ServerSocket(0).use { silent ->
            // Accepts and never answers.
            val held = Collections.synchronizedList(mutableListOf<java.net.Socket>())
            val acceptor = Thread { runCatching { while (true) held += silent.accept() } }.apply { isDaemon = true; start() }
            val db = Fenec.connect("http://127.0.0.1:${silent.localPort}")
            assertEquals(Fenec.DEFAULT_TIMEOUT, db.timeout)
            val start = TimeSource.Monotonic.markNow()
            val e = assertThrows<FenecException> { runBlocking { db.withTimeout(300.milliseconds).query("get jobs") } }
            assertEquals(ErrorCode.TIMEOUT, e.code)
            assertTrue(e.message!!.contains("300 ms"), e.message)
            assertTrue(start.elapsedNow() < Fenec.DEFAULT_TIMEOUT / 2)
            val q = assertThrows<FenecException> { runBlocking { db.from("jobs").withTimeout(java.time.Duration.ofMillis(250)).renderCount().let { db.withTimeout(250.milliseconds).query(it) } } }
            assertEquals(ErrorCode.TIMEOUT, q.code)
            assertThrows<IllegalArgumentException> { db.withTimeout(0.milliseconds) }
            held.forEach { it.close() }
            acceptor.interrupt()
        }
    }
}
