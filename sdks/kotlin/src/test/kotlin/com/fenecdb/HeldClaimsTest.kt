package com.fenecdb

import kotlinx.coroutines.async
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeSource

/** Claims held at a real server by withWait (Fenec-Wait), on its manual clock. */
class HeldClaimsTest {
    private fun claim(db: Client, wait: Duration, owner: String = "w1"): suspend () -> List<Row> = {
        db.from("jobs").where(raw("run_at <= now()")).order("run_at").limit(10).withWait(wait)
            .updateReturning(mapOf("owner" to owner, "run_at" to expr("now() + ?", 30000), "attempts" to inc(1)))
    }

    private suspend fun held(db: Client): Long =
        Regex("(?m)^fenec_held_claims (\\d+)").find(db.metrics())?.groupValues?.get(1)?.toLong() ?: error("no fenec_held_claims")

    private suspend fun awaitHeld(db: Client, n: Long) = withTimeout(5.seconds) {
        while (held(db) != n) delay(10)
    }

    @Test
    fun `answered on a put`() = runBlocking<Unit> {
        FenecServer().use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            val claimed = async { claim(db, 10.seconds)() }
            awaitHeld(db, 1)
            val put = TimeSource.Monotonic.markNow()
            db.from("jobs").insert(mapOf("payload" to mapOf("to" to "ada@example.com"), "run_at" to expr("now()"), "attempts" to 0))
            val rows = claimed.await()
            assertTrue(put.elapsedNow() < 5.seconds)
            assertEquals(1, rows.size)
            assertEquals("w1", rows[0].string("owner"))
            assertEquals(1L, rows[0].long("attempts"))
            assertEquals("ada@example.com", rows[0].json("payload").toString().let { Regex("\"to\":\"([^\"]+)\"").find(it)!!.groupValues[1] })
            assertEquals(0L, held(db))
        }
    }

    @Test
    fun `answered on a clock move`() = runBlocking<Unit> {
        FenecServer().use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            db.query("put jobs {run_at: now() + 60000, attempts: 0}")
            val claimed = async { claim(db, 10.seconds)() }
            awaitHeld(db, 1)
            assertTrue(claimed.isActive, "answered before the job was due")
            db.advanceClock(60.seconds)
            assertEquals(1, claimed.await().size)
        }
    }

    @Test
    fun `empty at the end of the wait, and a held claim waits timeout plus wait`() = runBlocking<Unit> {
        FenecServer().use { s ->
            val db = Fenec.connect(s.url, timeout = 300.milliseconds)
            db.query(JOBS_SCHEMA)
            val start = TimeSource.Monotonic.markNow()
            val rows = claim(db, 1.seconds)() // longer than the client's timeout: held all the same
            val took = start.elapsedNow()
            assertEquals(0, rows.size)
            assertTrue(took >= 900.milliseconds, "answered after $took")
        }
    }

    @Test
    fun `a cancelled coroutine frees its claim`() = runBlocking<Unit> {
        FenecServer().use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            val claimed = async { claim(db, 30.seconds)() }
            awaitHeld(db, 1)
            claimed.cancelAndJoin()
            awaitHeld(db, 0)
            // The given-up claim takes nothing: a job put now stays ready.
            db.query("put jobs {run_at: now(), attempts: 0}")
            delay(200)
            assertEquals(1L, db.from("jobs").where("owner", null).count())
        }
    }

    @Test
    fun `wait goes only on claims`() = runBlocking<Unit> {
        FenecServer().use { s ->
            val db = s.connect().withWait(5.seconds)
            db.query(JOBS_SCHEMA)
            // A put under Fenec-Wait is refused (400): these are sent without it.
            db.from("jobs").insert(mapOf("run_at" to expr("now()"), "attempts" to 0))
            db.query("put jobs {run_at: now(), attempts: 0}")
            assertEquals(2L, db.from("jobs").count())
            val rows = db.batch(listOf(db.from("jobs").limit(1).renderUpdate(mapOf("owner" to "w1"), returning = listOf("id"))))
            assertEquals(1, rows[0].rows!!.size)
            val e = runCatching { s.connect().query("put jobs {attempts: 0}") }
            assertTrue(e.isSuccess)
        }
    }
}
