package com.fenecdb

import kotlinx.coroutines.channels.ReceiveChannel
import kotlinx.coroutines.flow.buffer
import kotlinx.coroutines.flow.produceIn
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.longOrNull
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.InputStream
import java.net.InetAddress
import java.net.ServerSocket
import java.net.Socket
import java.nio.file.Files
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.AtomicInteger
import kotlin.concurrent.thread
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/**
 * Live queries (docs/changes.md) against a real `fenec serve`: the first
 * rows, then inserts, updates and deletes as they are written; refusals;
 * and a server restarted mid-stream, after which the flow reconnects with
 * Last-Event-ID and goes on.
 */
class LiveTest {
    /**
     * A loopback proxy that answers the request of each of its first
     * [refusals] connections 503 `unavailable`, as a server shutting down
     * does, and pipes every later connection through to [target]
     * (host:port) byte for byte, so a live query's stream flows.
     */
    private class RefusingProxy(private val target: String, refusals: Int) : AutoCloseable {
        private val server = ServerSocket(0, 50, InetAddress.getLoopbackAddress())
        private val left = AtomicInteger(refusals)
        private val sockets = ConcurrentLinkedQueue<Socket>()

        /** How many requests were answered 503. */
        val refused = AtomicInteger()
        val url = "http://127.0.0.1:${server.localPort}"

        init {
            thread(isDaemon = true) {
                while (true) {
                    val s = runCatching { server.accept() }.getOrNull() ?: break
                    sockets += s
                    thread(isDaemon = true) { runCatching { serve(s) } }
                }
            }
        }

        private fun serve(s: Socket) {
            if (left.getAndDecrement() > 0) {
                // The whole request is read before the answer, so the client
                // meets the 503 and not a reset connection.
                val input = s.getInputStream()
                val length = readHead(input).lines().firstNotNullOfOrNull { line ->
                    line.takeIf { it.startsWith("content-length:", ignoreCase = true) }?.substringAfter(':')?.trim()?.toInt()
                } ?: 0
                input.readNBytes(length)
                val body = """{"error":"the server is shutting down","code":"unavailable"}"""
                refused.incrementAndGet() // before the answer: the client may be back at once
                s.getOutputStream().write(
                    ("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n" +
                        "Content-Length: ${body.length}\r\nConnection: close\r\n\r\n$body").toByteArray(),
                )
                s.shutdownOutput()
                s.close()
                return
            }
            val up = Socket(target.substringBefore(':'), target.substringAfter(':').toInt())
            sockets += up
            thread(isDaemon = true) { runCatching { s.getInputStream().transferTo(up.getOutputStream()) }; runCatching { up.shutdownOutput() } }
            runCatching { up.getInputStream().transferTo(s.getOutputStream()) }
            runCatching { s.shutdownOutput() }
        }

        private fun readHead(input: InputStream): String {
            val head = StringBuilder()
            while (!head.endsWith("\r\n\r\n")) {
                val b = input.read()
                if (b < 0) break
                head.append(b.toChar())
            }
            return head.toString()
        }

        override fun close() {
            server.close()
            sockets.forEach { runCatching { it.close() } }
        }
    }

    /** The next event, or a failure after 15 s (the machine may be loaded: generous). */
    private suspend fun ReceiveChannel<LiveEvent>.next(): LiveEvent = withTimeout(15.seconds) { receive() }

    private suspend fun idOf(db: Client, where: String): Long =
        (db.query("get msgs where $where select id").rows!!.single()["id"] as Number).toLong()

    @Test
    fun `a builder watches its rows - the first rows, then each insert, update and delete it matches`() = FenecServer("--token", "sekret").use { server ->
        var cancelled = 0L
        runBlocking {
            val db = server.connect("sekret")
            db.query("create collection msgs (room text, body text)")
            db.query("""insert msgs [{room: "lobby", body: "a"}, {room: "lobby", body: "b"}, {room: "attic", body: "c"}]""")
            val live = db.from("msgs").where("room", "lobby").select("body").watch().buffer().produceIn(this)
            val first = live.next()
            assertEquals("rows", first.name)
            assertTrue(first.last)
            assertEquals(listOf("a", "b"), first.rows.map { (it["body"] as JsonPrimitive).content }.sorted())
            assertTrue(first.position > 0)

            val put = db.query("""insert msgs {room: "lobby", body: "d"}""")
            val id = idOf(db, """body = "d"""")
            val ins = live.next()
            assertEquals("insert", ins.name)
            assertEquals(put.seq, ins.position)
            assertEquals(id, (ins.row!!["id"] as JsonPrimitive).longOrNull)
            assertEquals("d", (ins.row!!["body"] as JsonPrimitive).content)

            db.query("""insert msgs {room: "attic", body: "not seen"}""")
            val upd = db.query("""set msgs {body: "d2"} where id = $1""", listOf(id))
            val ev = live.next()
            assertEquals(listOf("update", "d2"), listOf(ev.name, (ev.row!!["body"] as JsonPrimitive).content))
            assertEquals(upd.seq, ev.position)

            db.query("""set msgs {room: "attic"} where id = $1""", listOf(id))
            val gone = live.next()
            assertEquals(listOf("delete", id), listOf(gone.name, gone.id))
            cancelled = System.nanoTime()
            live.cancel()
        }
        // runBlocking waited for the cancelled flow: not for the next
        // heartbeat (15 s) to wake a blocked read.
        val took = (System.nanoTime() - cancelled) / 1_000_000
        assertTrue(took < 10_000, "the cancelled flow ended after $took ms")
    }

    @Test
    fun `a query that cannot be live, a wrong token, and a missing collection are refused at once`() = FenecServer("--token", "sekret").use { server ->
        runBlocking {
            val db = server.connect("sekret")
            db.query("create collection msgs (room text, body text)")
            val cases = listOf(
                db.from("msgs").order("body").watch() to ErrorCode.BAD_REQUEST,
                server.connect("nope").from("msgs").watch() to ErrorCode.UNAUTHORIZED,
                db.from("nothere").watch() to ErrorCode.NOT_FOUND,
                db.watchCollection("msgs", where = "room = ") to ErrorCode.BAD_REQUEST,
            )
            for ((flow, code) in cases) {
                val e = assertThrows<FenecException> { runBlocking { withTimeout(15.seconds) { flow.collect {} } } }
                assertEquals(code, e.code, e.toString())
            }
        }
    }

    @Test
    fun `a server restarted mid-stream - the flow reconnects with Last-Event-ID and sees the writes after`() {
        val file = Files.createTempDirectory("fenec-live-").resolve("live.db").toString()
        var server = FenecServer("--token", "sekret", "--sync", "always", file = file)
        try {
            runBlocking {
                var db = server.connect("sekret")
                db.query("create collection msgs (room text, body text)")
                db.query("""insert msgs {room: "lobby", body: "a"}""")
                val live = db.watchCollection("msgs", where = """room = "lobby"""", retries = 200, retryDelay = 50.milliseconds).buffer().produceIn(this)
                assertEquals("rows", live.next().name)
                val put = db.query("""insert msgs {room: "lobby", body: "b"}""")
                val ins = live.next()
                assertEquals(listOf("insert", put.seq), listOf(ins.name, ins.position))

                val addr = server.url.removePrefix("http://")
                server.close()
                val closing = live.next()
                assertEquals(listOf("closing", "shutdown"), listOf(closing.name, closing.reason))
                server = FenecServer("--token", "sekret", "--sync", "always", file = file, http = addr)
                db = server.connect("sekret")
                db.query("""insert msgs {room: "lobby", body: "after"}""")
                val id = idOf(db, """body = "after"""")
                var seen = false
                repeat(10) {
                    if (seen) return@repeat
                    val ev = live.next()
                    when (ev.name) {
                        "reset" -> seen = ev.rows.any { (it["id"] as JsonPrimitive).longOrNull == id }
                        "insert" -> seen = (ev.row!!["id"] as JsonPrimitive).longOrNull == id
                        "gap" -> {}
                        else -> error("after the restart: $ev")
                    }
                }
                assertTrue(seen, "the row written after the restart was never seen")
                live.cancel()
            }
        } finally {
            server.close()
        }
    }

    @Test
    fun `a live query that meets a server unable to answer yet (503 unavailable) tries again and goes on`() = FenecServer().use { server ->
        runBlocking {
            val db = server.connect()
            db.query("create collection msgs (body text)")
            db.query("""insert msgs {body: "a"}""")
            RefusingProxy(server.url.removePrefix("http://"), 2).use { proxy ->
                val live = Fenec.connect(proxy.url).from("msgs").watch(retryDelay = 10.milliseconds).buffer().produceIn(this)
                val first = live.next()
                assertEquals("rows", first.name)
                assertEquals(listOf("a"), first.rows.map { (it["body"] as JsonPrimitive).content })
                assertEquals(2, proxy.refused.get(), "both 503s were met before the rows")
                db.query("""insert msgs {body: "b"}""")
                val ins = live.next()
                assertEquals(listOf("insert", "b"), listOf(ins.name, (ins.row!!["body"] as JsonPrimitive).content))
                live.cancel()
            }
        }
    }

    @Test
    fun `a server that answers 503 on every reconnect ends the flow with that error once the retries are spent`() = FenecServer().use { server ->
        runBlocking {
            server.connect().query("create collection msgs (body text)")
            RefusingProxy(server.url.removePrefix("http://"), 100).use { proxy ->
                val flow = Fenec.connect(proxy.url).from("msgs").watch(retries = 2, retryDelay = 10.milliseconds)
                val e = assertThrows<FenecException> { runBlocking { withTimeout(15.seconds) { flow.collect {} } } }
                assertEquals(ErrorCode.UNAVAILABLE, e.code, e.toString())
                assertEquals(3, proxy.refused.get(), "the first request and two reconnects")
            }
        }
    }
}
