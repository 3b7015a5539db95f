package com.fenecdb

import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.delay
import kotlinx.coroutines.isActive
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test
import java.util.UUID
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicInteger
import kotlin.time.Duration.Companion.seconds

/**
 * The queue page's worker loop in Kotlin (the README's): four coroutines,
 * each holding its claim at the server, drain 500 jobs put while they
 * wait; each job is acked once.
 */
class SeedLoopTest {
    /** The README's loop: claim (held), run, ack — or fail with a backoff. */
    private suspend fun work(db: Fenec, send: suspend (Row) -> Unit) {
        val jobs = db.from("jobs")
        val me = "w-${UUID.randomUUID()}"
        var n = 0
        while (kotlinx.coroutines.currentCoroutineContext().isActive) {
            val owner = "$me:${++n}"
            val claimed = jobs.where(raw("run_at <= now()")).order("run_at").limit(10)
                .withWait(30.seconds)
                .updateReturning(mapOf("owner" to owner, "run_at" to expr("now() + ?", 30000), "attempts" to inc(1)))
            for (job in claimed) {
                try {
                    send(job)
                    jobs.where("id", job["id"]).where("owner", owner).delete(require = 1)
                } catch (e: FenecException) {
                    val backoff = 1000L shl job.long("attempts")!!.toInt()
                    jobs.where("id", job["id"]).where("owner", owner)
                        .update(mapOf("owner" to null, "run_at" to expr("now() + ?", backoff)), require = 1)
                }
            }
        }
    }

    @Test
    fun `four waiting coroutines drain 500 jobs, each acked once`() = runBlocking<Unit> {
        FenecServer().use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            val runs = ConcurrentHashMap<Long, AtomicInteger>()
            val workers = List(4) {
                launch(Dispatchers.Default) {
                    work(db) { job -> runs.computeIfAbsent(job.json("payload").toString().filter(Char::isDigit).toLong()) { AtomicInteger() }.incrementAndGet() }
                }
            }
            delay(300) // every worker's first claim is held by now
            val jobs = db.from("jobs")
            for (start in 0 until 500 step 25) {
                jobs.insert((start until start + 25).map { n -> mapOf("payload" to mapOf("n" to n), "run_at" to expr("now()"), "attempts" to 0) })
            }
            withTimeout(60.seconds) { while (jobs.count() > 0) delay(50) }
            workers.forEach { it.cancelAndJoin() }
            assertEquals(0L, jobs.count())
            assertEquals(500, runs.size)
            assertEquals(emptyList<Int>(), runs.values.map { it.get() }.filter { it != 1 })
        }
    }
}
