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
import java.nio.file.Files
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds

/**
 * Live queries (docs/changes.md) against a real `fenec serve`: the first
 * rows, then inserts, updates and deletes as they are written; refusals;
 * and a server restarted mid-stream, after which the flow reconnects with
 * Last-Event-ID and goes on.
 */
class LiveTest {
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
}
