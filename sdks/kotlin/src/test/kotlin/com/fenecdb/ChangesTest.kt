package com.fenecdb

import kotlinx.coroutines.async
import kotlinx.coroutines.flow.take
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.serialization.json.JsonPrimitive
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.nio.file.Files
import kotlin.time.Duration.Companion.seconds

/**
 * The change stream's consumer (docs/changes.md) against a real `fenec
 * serve` with a file (on one with none a change carries no row): a read
 * hands out the writes in commit order and moves nothing; an ack does; a
 * second reader is refused; batches() acknowledges a batch when the next
 * is asked for.
 */
class ChangesTest {
    private fun server() = FenecServer("--token", "sekret", "--sync", "always", file = Files.createTempDirectory("fenec-changes-").resolve("c.db").toString())

    private fun bodies(cs: List<Change>) = cs.map { (it.row?.get("body") as? JsonPrimitive)?.content }

    @Test
    fun `a consumer reads the writes in commit order, only an ack moves it, a second reader is refused`() = server().use { server ->
        runBlocking {
            val db = server.connect("sekret")
            db.query("create collection msgs (room text, body text)")
            db.query("create collection other (n int)")
            val a = db.query("""insert msgs {room: "lobby", body: "a"}""")
            db.query("insert other {n: 1}")
            val b = db.query("""set msgs {body: "b"} where body = "a"""")
            val c = db.query("""del msgs where body = "b"""")

            val k = db.consumer("mailer", "msgs")
            val first = k.read()
            assertEquals(listOf("put" to a.seq, "put" to b.seq, "delete" to c.seq), first.changes.map { it.op to it.position })
            assertEquals(listOf("a", "b", null), bodies(first.changes))
            assertEquals(c.seq, first.next)
            assertEquals(first.changes.map { it.position }, k.read().changes.map { it.position })
            k.ack(first.next)
            assertEquals(0, k.read().changes.size)

            val held = async { k.read(wait = 10.seconds) }
            var busy: FenecException? = null
            withTimeout(10.seconds) {
                // Until the held read is at the server, this one may come first: it answers none.
                while (busy == null) busy = runCatching { k.read() }.exceptionOrNull() as? FenecException
            }
            assertEquals(ErrorCode.CONSUMER_BUSY, busy!!.code)
            assertEquals(409, busy!!.status)
            val d = db.query("""insert msgs {room: "attic", body: "d"}""")
            assertEquals(listOf(d.seq), withTimeout(15.seconds) { held.await() }.changes.map { it.position })
        }
    }

    @Test
    fun `batches acknowledges a batch when the next is asked for`() = server().use { server ->
        runBlocking {
            val db = server.connect("sekret")
            db.query("create collection msgs (room text, body text)")
            for (i in 1..5) db.query("""insert msgs {room: "x", body: $1}""", listOf("$i"))
            val k = db.consumer("w", "msgs")
            // take(2) stops after the second batch: the first is acknowledged, the second not.
            val got = withTimeout(15.seconds) { k.batches(limit = 2, wait = 1.seconds).take(2).toList() }
            assertEquals(listOf("1", "2", "3", "4"), got.flatMap { bodies(it.changes) })
            assertEquals(listOf("3", "4", "5"), bodies(k.read().changes))
            assertTrue(got.all { it.consumer == "w" })
        }
    }
}
