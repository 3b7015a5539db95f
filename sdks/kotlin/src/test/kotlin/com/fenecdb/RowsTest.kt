package com.fenecdb

import kotlinx.coroutines.runBlocking
import kotlinx.serialization.json.JsonObject
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.time.Instant

/** Values through a real server: int64 exact, timestamps as Instant by declared type, seq and replayed. */
class RowsTest {
    @Test
    fun `values decode by the declared field type`() = runBlocking<Unit> {
        FenecServer().use { s ->
            val db = s.connect()
            db.query("create collection t (n int, f float, s text, b bool, at timestamp, j json)")
            val big = 9_007_199_254_740_993L // 2^53 + 1: a double would round it
            val at = Instant.parse("2026-05-03T09:20:20.123Z")
            val t = db.from("t")
            val w = db.query(t.renderInsert(mapOf("n" to big, "f" to 1.5, "s" to "2026-05-03T09:20:00.000Z", "b" to true, "at" to at, "j" to mapOf("k" to listOf(1, 2)))))
            assertEquals(1L, w.affected)
            assertNull(w.rows)
            assertTrue(w.seq > 0)
            val row = t.first()!!
            assertEquals(listOf("id", "n", "f", "s", "b", "at", "j"), row.keys.toList())
            assertEquals(big, row.long("n"))
            assertEquals(big, row["n"])
            assertEquals(1.5, row.double("f"))
            assertEquals("2026-05-03T09:20:00.000Z", row["s"], "a text field stays text, whatever its shape")
            assertEquals(true, row.bool("b"))
            assertEquals(at, row["at"])
            assertEquals(at, row.instant("at"))
            assertEquals("[1,2]", (row.json("j") as JsonObject)["k"].toString())
            assertEquals(big, t.where("n", big).first()!!.long("n"), "an int64 parameter is exact too")
            assertEquals(1L, t.where("at", at).count())
            assertThrows<IllegalArgumentException> { row.long("s") }
            assertThrows<IllegalArgumentException> { row.string("missing") }
            // A raw query knows no collection: columns by their JSON, instant() reads text on request.
            val raw = db.query("get t select n, at").rows!![0]
            assertEquals(big, raw["n"])
            assertEquals(at, raw.instant("at"))
            // select replaces, paths answer
            val sel = t.select("s").select("n", "j.k").first()!!
            assertEquals(listOf("n", "j.k"), sel.keys.toList())
            assertEquals(null, t.where("b", false).first())
        }
    }

    @Test
    fun `an idempotent claim is replayed, and takes nothing more`() = runBlocking<Unit> {
        FenecServer().use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            db.query("put jobs [{run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}]")
            val claim = db.from("jobs").where(raw("run_at <= now()")).order("run_at").limit(1).withIdempotencyKey("claim-w1-1")
            val patch = mapOf("owner" to "w1", "run_at" to expr("now() + ?", 30000), "attempts" to inc())
            val whole = db.query(claim.renderUpdate(patch, returning = listOf("*")), idempotencyKey = "claim-w1-1")
            val again = db.query(claim.renderUpdate(patch, returning = listOf("*")), idempotencyKey = "claim-w1-1")
            assertEquals(false, whole.replayed)
            assertEquals(true, again.replayed)
            assertEquals(1L, whole.affected)
            val first = claim.updateReturning(patch) // the builder's key: the same answer again
            assertEquals(whole.rows!![0]["id"], again.rows!![0]["id"])
            assertEquals(whole.rows!![0]["id"], first[0]["id"])
            assertTrue(first[0]["run_at"] is Instant, "a claim's rows decode by type")
            assertEquals(1L, db.from("jobs").where("owner", null).count())
            val gone = db.from("jobs").where("owner", "w1").deleteReturning("id", "payload.to", require = 1)
            assertEquals(listOf("id", "payload.to"), gone[0].keys.toList())
            assertNull(gone[0]["payload.to"])
            assertEquals(first[0]["id"], gone[0]["id"])
        }
    }
}

