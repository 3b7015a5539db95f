package com.fenecdb

import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicInteger
import kotlin.time.Duration.Companion.seconds

/**
 * The queue page's worker loop in Kotlin (the README's, ReadmeLoop.kt): four coroutines,
 * each holding its claim at the server, drain 500 jobs put while they
 * wait; each job is acked once.
 */
class SeedLoopTest {
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

    @Test
    fun `the README holds this loop`() {
        val readme = REPO.resolve("sdks/kotlin/README.md").toFile().readText()
        val block = Regex("```kotlin\n(suspend fun work.*?)```", RegexOption.DOT_MATCHES_ALL).find(readme)?.groupValues?.get(1)
            ?: error("README.md has no block with suspend fun work")
        val source = REPO.resolve("sdks/kotlin/src/test/kotlin/com/fenecdb/ReadmeLoop.kt").toFile().readText()
        assertTrue(source.endsWith(block), "ReadmeLoop.kt is not the README's loop")
    }
}
