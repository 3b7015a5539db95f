package com.fenecdb

import com.sun.net.httpserver.HttpServer
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.net.InetSocketAddress
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.util.Collections
import java.util.concurrent.atomic.AtomicInteger

/**
 * Opt-in retries, against a real server behind a loopback proxy that
 * forwards each request and, for the first [drops] inserts, drops the
 * answer after the server applied the write (the connection closes with no
 * response).
 */
class RetriesTest {
    private class CuttingProxy(private val target: String, drops: Int) : AutoCloseable {
        val keys: MutableList<String?> = Collections.synchronizedList(mutableListOf<String?>()) // each insert's Idempotency-Key
        private val left = AtomicInteger(drops)
        private val forward = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()
        private val server = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
        val url: String

        init {
            server.createContext("/") { ex ->
                val body = ex.requestBody.readAllBytes()
                val insert = ex.requestURI.path == "/query" && String(body).contains("insert ")
                if (insert) keys += ex.requestHeaders.getFirst("Idempotency-Key")
                val req = HttpRequest.newBuilder(URI(target + ex.requestURI.path))
                    .method(ex.requestMethod, HttpRequest.BodyPublishers.ofByteArray(body))
                for (h in listOf("Content-Type", "Idempotency-Key", "Authorization")) ex.requestHeaders.getFirst(h)?.let { req.header(h, it) }
                val res = forward.send(req.build(), HttpResponse.BodyHandlers.ofByteArray())
                if (insert && left.getAndDecrement() > 0) {
                    ex.close() // applied at the server; the answer never comes
                    return@createContext
                }
                for ((k, v) in res.headers().map()) if (k.lowercase().startsWith("fenec-") || k.lowercase() == "idempotent-replayed") v.forEach { ex.responseHeaders.add(k, it) }
                ex.responseHeaders.add("Content-Type", "application/json")
                ex.responseHeaders.add("Connection", "close")
                ex.sendResponseHeaders(res.statusCode(), res.body().size.toLong())
                ex.responseBody.use { it.write(res.body()) }
            }
            server.start()
            url = "http://127.0.0.1:${server.address.port}"
        }

        override fun close() = server.stop(0)
    }

    @Test
    fun `a write whose answer was lost is retried under one key and applied once`() = runBlocking<Unit> {
        FenecServer().use { s ->
            s.connect().query(JOBS_SCHEMA)
            CuttingProxy(s.url, drops = 1).use { proxy ->
                val db = Fenec.builder(proxy.url).maxRetries(3).build()
                assertEquals(1L, db.from("jobs").insert(mapOf("payload" to mapOf("n" to 1), "attempts" to 0)))
                assertEquals(2, proxy.keys.size, "sent twice: ${proxy.keys}")
                assertNotNull(proxy.keys[0], "a write with retries on goes with a key")
                assertEquals(proxy.keys[0], proxy.keys[1], "the retry goes with the same key")
                assertEquals(1L, s.connect().from("jobs").count(), "applied once")
            }
        }
    }

    @Test
    fun `without retries the same loss is an error that says what was asked - and the write was applied`() = runBlocking<Unit> {
        FenecServer().use { s ->
            s.connect().query(JOBS_SCHEMA)
            CuttingProxy(s.url, drops = 1).use { proxy ->
                val db = Fenec.connect(proxy.url)
                val e = assertThrows<FenecException> { runBlocking { db.from("jobs").insert(mapOf("attempts" to 0)) } }
                assertEquals(ErrorCode.NETWORK, e.code)
                assertTrue(e.retryable)
                assertEquals("POST /query", e.method)
                assertEquals(proxy.url, e.node)
                assertTrue(e.statement!!.startsWith("insert jobs"), e.statement)
                assertNull(e.idempotencyKey, "no key is made up without retries")
                assertEquals(listOf<String?>(null), proxy.keys.toList(), "sent once, with no key")
                assertEquals(1L, s.connect().from("jobs").count(), "the server applied it")
            }
        }
    }

    @Test
    fun `a write is never retried without a key, and refusals are not retried`() = runBlocking<Unit> {
        FenecServer().use { s ->
            val db = Fenec.builder(s.url).maxRetries(2).build()
            // A refusal (409 conflict, not retryable): thrown at once.
            db.query(JOBS_SCHEMA)
            val e = assertThrows<FenecException> { runBlocking { db.query(JOBS_SCHEMA) } }
            assertEquals(ErrorCode.CONFLICT, e.code)
            assertTrue(!e.retryable)
            assertNotNull(e.idempotencyKey, "a write under retries carries a key")
        }
        assertThrows<IllegalArgumentException> { Fenec.builder("http://127.0.0.1:1").maxRetries(-1) }
    }
}
