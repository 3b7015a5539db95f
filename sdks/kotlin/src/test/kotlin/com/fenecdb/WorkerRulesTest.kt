package com.fenecdb

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.slf4j.event.Level
import java.util.Collections
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.AtomicInteger
import kotlin.coroutines.AbstractCoroutineContextElement
import kotlin.coroutines.CoroutineContext
import kotlin.time.Duration
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeSource

/** Ready jobs `{payload: {n: i}}`, i from [from] on. */
internal suspend fun enqueueJobs(db: Client, n: Int, from: Int = 0) {
    val jobs = db.from("jobs")
    for (start in 0 until n step 250) {
        jobs.insert((start until minOf(n, start + 250)).map { i -> mapOf("payload" to mapOf("n" to from + i), "run_at" to expr("now()"), "attempts" to 0) })
    }
}

internal suspend fun eventually(limit: Duration, what: String, check: suspend () -> Boolean) {
    try {
        withTimeout(limit) { while (!check()) delay(20) }
    } catch (e: CancellationException) {
        throw AssertionError("$what: not within $limit")
    }
}

/** Statements the server ran, of [kind] (read, write, claim), from its /metrics. */
internal suspend fun statements(db: Client, kind: String): Long =
    Regex("^fenec_statements_total\\{kind=\"$kind\",outcome=\"[a-z_]+\"\\} (\\d+)", RegexOption.MULTILINE)
        .findAll(db.metrics()).sumOf { it.groupValues[1].toLong() }

/** A context element of the caller's, to see it in a handler. */
private class Trace(val id: String) : AbstractCoroutineContextElement(Trace) {
    companion object Key : CoroutineContext.Key<Trace>
}

/** The rules of docs/workers.md this SDK's worker follows since acks were batched. */
class WorkerRulesTest {
    @Test
    fun `acks are batched - far fewer ack statements than jobs, each job acked once`() = runBlocking<Unit> {
        FenecServer(manualClock = false).use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            val total = 500
            enqueueJobs(db, total)
            val writesBefore = statements(db, "write")
            val claimsBefore = statements(db, "claim")
            val ran = AtomicInteger()
            val reports = Collections.synchronizedList(mutableListOf<WorkerException>())
            val worker = Worker(db.from("jobs"), WorkerOptions(concurrency = 10, onError = { reports += it })) { ran.incrementAndGet() }
            withTimeout(60.seconds) { worker.runUntilEmpty() }
            assertEquals(0L, db.from("jobs").count(), "runUntilEmpty returned before every ack was answered")
            val acks = statements(db, "write") - writesBefore
            val claims = statements(db, "claim") - claimsBefore
            println("batched acks: $total jobs, $acks ack statements, $claims claims")
            assertEquals(total, ran.get())
            assertTrue(acks <= total / 4, "$acks ack statements for $total jobs")
            assertTrue(claims <= total / 2, "$claims claims for $total jobs at concurrency 10")
            assertEquals(emptyList<WorkerException>(), reports.toList())
        }
    }

    @Test
    fun `the ack window closes once no handler runs - a lone job is acked at once, even under a long window`() = runBlocking<Unit> {
        FenecServer(manualClock = false).use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            val worker = Worker(db.from("jobs"), WorkerOptions(concurrency = 10)) { }
            worker.ackWindow = 120.seconds // waited out, the ack would come two minutes late
            val running = launch(Dispatchers.Default) { worker.run() }
            try {
                enqueueJobs(db, 1)
                eventually(20.seconds, "the lone job's ack") { db.from("jobs").count() == 0L }
            } finally {
                worker.stop()
                running.join()
            }
        }
    }

    @Test
    fun `the ack window stays open while a handler runs - jobs returning apart are acked in one statement`() = runBlocking<Unit> {
        FenecServer(manualClock = false).use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            enqueueJobs(db, 2)
            val gate = CompletableDeferred<Unit>()
            val first = CompletableDeferred<Unit>()
            val worker = Worker(db.from("jobs"), WorkerOptions(concurrency = 10)) { job ->
                if (job.json("payload").toString().contains("\"n\":1")) gate.await() else first.complete(Unit)
            }
            worker.ackWindow = 120.seconds
            val running = launch(Dispatchers.Default) { worker.run() }
            try {
                // Both claimed together (one claim of up to 10); job 0 returns at once.
                withTimeout(20.seconds) { first.await() }
                val writesBefore = statements(db, "write")
                eventually(5.seconds, "job 0 waiting in the ack batch") { db.from("jobs").count() == 2L }
                gate.complete(Unit)
                eventually(20.seconds, "both jobs acked once job 1 returned") { db.from("jobs").count() == 0L }
                assertEquals(1L, statements(db, "write") - writesBefore, "one ack statement for both jobs")
            } finally {
                worker.stop()
                running.join()
            }
        }
    }

    @Test
    fun `a full batch of 100 is acked at once, while the window is still open`() = runBlocking<Unit> {
        FenecServer(manualClock = false).use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            enqueueJobs(db, 150)
            val gate = CompletableDeferred<Unit>()
            // One claim of all 150; job 0 runs until the gate opens, the others return at once.
            val worker = Worker(db.from("jobs"), WorkerOptions(concurrency = 150)) { job ->
                if (job.json("payload").toString().contains("\"n\":0}")) gate.await()
            }
            worker.ackWindow = 120.seconds // waited out, the first 100 would be acked two minutes late
            val running = launch(Dispatchers.Default) { worker.run() }
            try {
                eventually(20.seconds, "100 jobs acked while job 0 still runs") { db.from("jobs").count() <= 50L }
                assertTrue(!gate.isCompleted)
                gate.complete(Unit)
                eventually(20.seconds, "every job acked once job 0 returned") { db.from("jobs").count() == 0L }
            } finally {
                worker.stop()
                running.join()
            }
        }
    }

    @Test
    fun `a lost lease inside a batch is reported, and the others are acked`() = runBlocking<Unit> {
        FenecServer(manualClock = false).use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            enqueueJobs(db, 5)
            val gate = CompletableDeferred<Unit>()
            val reports = Collections.synchronizedList(mutableListOf<WorkerException>())
            var stolen: Any? = null
            val worker = Worker(db.from("jobs"), WorkerOptions(concurrency = 10, onError = { reports += it })) { job ->
                if (job.json("payload").toString().contains("\"n\":2")) {
                    // Another owner takes this job while its handler runs; the handler returns as if nothing happened.
                    stolen = job["id"]
                    assertEquals(1L, db.from("jobs").where("id", job["id"]).update(mapOf("owner" to "thief"), require = 1))
                    gate.complete(Unit)
                }
                gate.await() // all five return together: one ack statement
            }
            val writesBefore = statements(db, "write")
            withTimeout(30.seconds) { worker.runUntilEmpty() }
            val left = db.from("jobs").rows()
            assertEquals(1, left.size, left.toString())
            assertEquals(stolen, left[0]["id"])
            assertEquals("thief", left[0].string("owner"))
            val lost = reports.filter { it.step == WorkerStep.LOST_LEASE }
            assertEquals(listOf(stolen), lost.map { it.jobId }, reports.toString())
            // The thief's update and one ack of the five ids.
            val writes = statements(db, "write") - writesBefore
            println("a lost lease in a batch: ${writes - 1} ack statements for 5 jobs")
            assertTrue(writes <= 3, "the thief's update and at most two acks, not $writes writes")
        }
    }

    @Test
    fun `with no onError, a failed attempt is a warning and a dead letter an error, through SLF4J, and error keeps the message alone`() = runBlocking<Unit> {
        FenecServer(manualClock = false).use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            enqueueJobs(db, 2)
            CapturedLogs.events.clear()
            val worker = Worker(db.from("jobs"), WorkerOptions(concurrency = 2, maxAttempts = 2, backoff = { Duration.ZERO })) { job ->
                if (job.json("payload").toString().contains("\"n\":0")) throw IllegalStateException("boom") else throw RuntimeException()
            }
            withTimeout(30.seconds) { worker.runUntilEmpty() }
            val dead = db.from("jobs").order("id").rows()
            assertEquals(listOf("boom", "RuntimeException"), dead.map { it.string("error") }, "the stored error: the message alone, else the type's name")
            assertTrue(dead.all { it["run_at"] == null && it.long("attempts") == 2L }, dead.toString())
            val mine = CapturedLogs.events.filter { it.logger == "com.fenecdb.Worker" }
            val warnings = mine.filter { it.level == Level.WARN }
            val errors = mine.filter { it.level == Level.ERROR }
            assertEquals(2, warnings.size, mine.toString())
            assertEquals(2, errors.size, mine.toString())
            assertTrue(warnings.all { "[handler]" in it.message && "attempt 1 of 2" in it.message }, warnings.toString())
            assertTrue(errors.all { "[dead_letter]" in it.message }, errors.toString())
            assertTrue(errors.any { "boom" in it.message && it.error is IllegalStateException }, errors.toString())
        }
    }

    @Test
    fun `stop from inside a handler returns at once, and the worker stops when the running handlers return`() = runBlocking<Unit> {
        FenecServer(manualClock = false).use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            enqueueJobs(db, 3)
            lateinit var worker: Worker
            val stopReturned = CompletableDeferred<Unit>()
            val handled = AtomicInteger()
            worker = Worker(db.from("jobs"), WorkerOptions(concurrency = 1, grace = 30.seconds, onError = {})) {
                handled.incrementAndGet()
                worker.stop() // only asks
                stopReturned.complete(Unit)
                delay(200)
            }
            val start = TimeSource.Monotonic.markNow()
            withTimeout(10.seconds) { worker.run() }
            val took = start.elapsedNow()
            assertTrue(stopReturned.isCompleted, "stop() from the handler did not return")
            assertTrue(took < 5.seconds, "the worker waited for the grace: $took")
            assertEquals(1, handled.get())
            assertEquals(2L, db.from("jobs").count(), "the handled job was not acked")
            assertEquals(0L, db.from("jobs").where("owner", "!=", null).count(), "left leased")
        }
    }

    @Test
    fun `runUntilEmpty returns once no ready job is left and leaves jobs not ready yet`() = runBlocking<Unit> {
        FenecServer(manualClock = false).use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            enqueueJobs(db, 40)
            db.from("jobs").insert(mapOf("payload" to mapOf("n" to 999), "run_at" to expr("now() + ?", 3_600_000), "attempts" to 0))
            val seen = ConcurrentHashMap.newKeySet<Int>()
            val worker = Worker(db.from("jobs"), WorkerOptions(concurrency = 4, onError = {})) { job ->
                seen += Regex("\"n\":(\\d+)").find(job.json("payload").toString())!!.groupValues[1].toInt()
                delay(5)
            }
            withTimeout(30.seconds) { worker.runUntilEmpty() }
            assertEquals((0 until 40).toSet(), seen.toSet())
            val left = db.from("jobs").rows()
            assertEquals(1, left.size)
            assertNull(left[0]["owner"])
            assertTrue(worker.stopping)
        }
    }

    @Test
    fun `a handler that ignores its cancellation is given up a second after the grace`() = runBlocking<Unit> {
        FenecServer(manualClock = false).use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            enqueueJobs(db, 1)
            val started = CompletableDeferred<Unit>()
            val letGo = AtomicBoolean(false)
            val reports = Collections.synchronizedList(mutableListOf<WorkerException>())
            val worker = Worker(
                db.from("jobs"),
                WorkerOptions(concurrency = 1, grace = 300.milliseconds, dispatcher = Dispatchers.IO, onError = { reports += it }),
            ) {
                started.complete(Unit)
                @Suppress("BlockingMethodInNonBlockingContext")
                while (!letGo.get()) Thread.sleep(20) // deaf to cancellation
            }
            val running = launch(Dispatchers.Default) { worker.run() }
            withTimeout(10.seconds) { started.await() }
            val stop = TimeSource.Monotonic.markNow()
            withTimeout(10.seconds) { worker.stop() }
            val took = stop.elapsedNow()
            running.join()
            println("stop with a handler deaf to cancellation: returned after $took (grace 300 ms + 1 s)")
            assertTrue(took >= 1300.milliseconds && took < 4.seconds, "stopped after $took")
            val given = reports.filter { it.step == WorkerStep.RELEASE && "ignored its cancellation" in (it.message ?: "") }
            assertEquals(1, given.size, reports.toString())
            letGo.set(true)
            delay(300)
            val job = db.from("jobs").first()
            assertNotNull(job, "the given-up job was acked")
            assertNotNull(job!!["owner"], "the given-up job was released: nothing is sent for it")
        }
    }

    @Test
    fun `handlers run in the caller's coroutine context, not under its Job`() = runBlocking<Unit> {
        FenecServer(manualClock = false).use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            enqueueJobs(db, 3)
            val traces = Collections.synchronizedList(mutableListOf<String?>())
            val worker = Worker(db.from("jobs"), WorkerOptions(concurrency = 2, onError = {})) {
                traces += kotlin.coroutines.coroutineContext[Trace]?.id
            }
            withContext(Trace("req-7")) { withTimeout(30.seconds) { worker.runUntilEmpty() } }
            assertEquals(listOf("req-7", "req-7", "req-7"), traces.toList())
        }
    }

    @Test
    fun `options are checked when made - a lease under 100 ms is refused`() {
        val e = assertThrows<IllegalArgumentException> { WorkerOptions(lease = 99.milliseconds) }
        assertTrue("100 ms" in e.message!!, e.message)
        WorkerOptions(lease = 100.milliseconds)
        @Suppress("DEPRECATION")
        assertEquals("legacy", WorkerOptions(owner = "legacy").prefix, "the deprecated owner option still sets the prefix")
        assertEquals("p", WorkerOptions().withOwnerPrefix("p").prefix)
    }
}
