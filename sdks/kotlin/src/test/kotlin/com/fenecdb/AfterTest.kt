package com.fenecdb

import com.sun.net.httpserver.HttpServer
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.net.InetSocketAddress
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.util.Collections

/**
 * [Client.withAfter] against a real server behind a loopback proxy that
 * forwards each request and records the Fenec-After of each /query and
 * /batch ("" when none was sent).
 */
class AfterTest {
    private class RecordingProxy(private val target: String) : AutoCloseable {
        val afters: MutableList<String> = Collections.synchronizedList(mutableListOf<String>())
        private val forward = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build()
        private val server = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
        val url: String

        init {
            server.createContext("/") { ex ->
                val body = ex.requestBody.readAllBytes()
                if (ex.requestURI.path in setOf("/query", "/batch")) afters += ex.requestHeaders.getFirst("Fenec-After") ?: ""
                val req = HttpRequest.newBuilder(URI(target + ex.requestURI.path))
                    .method(ex.requestMethod, HttpRequest.BodyPublishers.ofByteArray(body))
                for (h in listOf("Content-Type", "Idempotency-Key", "Authorization", "Fenec-After")) ex.requestHeaders.getFirst(h)?.let { req.header(h, it) }
                val res = forward.send(req.build(), HttpResponse.BodyHandlers.ofByteArray())
                for ((k, v) in res.headers().map()) if (k.lowercase().startsWith("fenec-")) v.forEach { ex.responseHeaders.add(k, it) }
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
    fun `withAfter is sent as Fenec-After, and a lone server refuses a seq it has not reached`() = runBlocking<Unit> {
        FenecServer().use { s ->
            s.connect().query("create collection notes (body text)")
            RecordingProxy(s.url).use { proxy ->
                val db = Fenec.connect(proxy.url)
                val seq = db.query("insert notes {body: \$1}", listOf("x")).seq
                assertTrue(seq > 0)
                assertEquals(listOf(""), proxy.afters.toList(), "no Fenec-After without withAfter, to one URL")
                assertEquals(1L, db.withAfter(seq).from("notes").count())
                assertEquals(1L, db.from("notes").withAfter(seq).count())
                assertEquals(1, db.withAfter(seq).batch(listOf(db.from("notes").renderCount())).size)
                assertEquals(listOf(seq.toString()).let { it + it + it }, proxy.afters.drop(1))
                // A lone server has no other node to wait for: refused at once.
                val e = assertThrows<FenecException> { runBlocking { db.withAfter(seq + 1000).from("notes").rows() } }
                assertEquals(400, e.status)
                assertTrue(e.message!!.contains("Fenec-After"), e.message)
                assertEquals((seq + 1000).toString(), proxy.afters.last())
                assertEquals(1L, db.from("notes").count(), "the copy's after is its own")
                assertEquals("", proxy.afters.last())
                val n = proxy.afters.size
                assertThrows<IllegalArgumentException> { db.withAfter(-1) }
                assertThrows<IllegalArgumentException> { db.withAfter(1L shl 53) }
                assertEquals(n, proxy.afters.size)
            }
        }
    }

    @Test
    fun `given several URLs the larger of withAfter and the nodes' seq is sent`() = runBlocking<Unit> {
        FenecServer().use { s ->
            s.connect().query("create collection notes (body text)")
            RecordingProxy(s.url).use { proxy ->
                // The first answers; the second is never asked.
                val db = Fenec.connect(listOf(proxy.url, s.url))
                val seq = db.query("insert notes {body: 'a'}").seq
                assertEquals(1L, db.withAfter(0).from("notes").count())
                assertEquals(seq.toString(), proxy.afters.last())
                val e = assertThrows<FenecException> { runBlocking { db.withAfter(seq + 5).from("notes").count() } }
                assertEquals(400, e.status)
                assertEquals((seq + 5).toString(), proxy.afters.last())
            }
        }
    }
}
