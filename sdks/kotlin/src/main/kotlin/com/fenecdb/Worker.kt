package com.fenecdb

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.CoroutineName
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.async
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.isActive
import kotlinx.coroutines.joinAll
import kotlinx.coroutines.launch
import kotlinx.coroutines.runInterruptible
import kotlinx.coroutines.sync.Semaphore
import kotlinx.coroutines.withContext
import kotlinx.coroutines.asContextElement
import kotlinx.coroutines.withTimeoutOrNull
import java.util.UUID
import java.util.concurrent.ThreadLocalRandom
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.AtomicLong
import kotlin.time.Duration
import kotlin.time.Duration.Companion.hours
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeMark
import kotlin.time.TimeSource

/** Where a [Worker] reports what went wrong: a fault it retries, a job that failed, a lease lost. */
public fun interface WorkerErrorHook {
    /** [what] happened to [job] (null for a claim), [error] the cause when there is one. */
    public fun report(what: String, job: Row?, error: Throwable?)
}

/**
 * How a [Worker] runs (docs/workers.md): [concurrency] jobs in flight,
 * each leased for [lease] and extended every half of it while its handler
 * runs; idle, one claim held at the server up to [wait]; a failed job
 * again after [backoff] of its attempts, and past [maxAttempts] a dead
 * letter; on stop, running handlers get [grace].
 */
public data class WorkerOptions(
    /** Jobs in flight at once. */
    val concurrency: Int = 10,
    /** How long a claimed job is the worker's before another may take it. */
    val lease: Duration = 30.seconds,
    /** How long an idle worker's claim is held at the server (0 to 30 s). */
    val wait: Duration = 30.seconds,
    /** A job whose handler failed this many times is a dead letter (`run_at: null`). */
    val maxAttempts: Int = 5,
    /** The delay before a failed job runs again, from its attempts (1 after its first run). */
    val backoff: (attempts: Long) -> Duration = ::defaultBackoff,
    /** A condition of the queue's own (a queue field, say), joined to the claim's with `and`. */
    val where: Raw? = null,
    /** The owner prefix: each claim's owner is `<owner>:<claim counter>`. */
    val owner: String = "w-" + UUID.randomUUID(),
    /** How long running handlers may go on after a stop before they are cancelled. */
    val grace: Duration = 30.seconds,
    /** Where faults and failures are reported; the default writes them to stderr. */
    val onError: WorkerErrorHook = WorkerErrorHook { what, _, error ->
        System.err.println("fenecdb worker: $what${error?.let { ": $it" } ?: ""}")
    },
    /** Where handlers run; Dispatchers.IO for handlers that block. */
    val dispatcher: CoroutineDispatcher = Dispatchers.Default,
) {
    init {
        require(concurrency >= 1) { "concurrency must be at least 1, not $concurrency" }
        require(lease >= 2.milliseconds && lease.inWholeMilliseconds > 0) { "lease must be at least 2 ms, not $lease" }
        require(wait >= Duration.ZERO && wait <= 30.seconds) { "wait must be 0 to 30 s (0 to 30000 milliseconds), not $wait" }
        require(maxAttempts >= 1) { "maxAttempts must be at least 1, not $maxAttempts" }
        require(grace >= Duration.ZERO) { "grace must not be negative, not $grace" }
    }

    // Copies with one option changed, for Java (a data class's copy and
    // kotlin.time.Duration are not for Java callers).

    /** A copy with [concurrency]. */
    public fun withConcurrency(concurrency: Int): WorkerOptions = copy(concurrency = concurrency)

    /** A copy with [lease]. */
    public fun withLease(lease: java.time.Duration): WorkerOptions = copy(lease = lease.toMillis().milliseconds)

    /** A copy with [wait]. */
    public fun withWait(wait: java.time.Duration): WorkerOptions = copy(wait = wait.toMillis().milliseconds)

    /** A copy with [maxAttempts]. */
    public fun withMaxAttempts(maxAttempts: Int): WorkerOptions = copy(maxAttempts = maxAttempts)

    /** A copy with a [backoff] from attempts to a java.time.Duration. */
    public fun withBackoff(backoff: java.util.function.LongFunction<java.time.Duration>): WorkerOptions =
        copy(backoff = { a -> backoff.apply(a).toMillis().milliseconds })

    /** A copy with the queue's own condition [where]. */
    public fun withWhere(where: Raw): WorkerOptions = copy(where = where)

    /** A copy with the owner prefix [owner]. */
    public fun withOwner(owner: String): WorkerOptions = copy(owner = owner)

    /** A copy with [grace]. */
    public fun withGrace(grace: java.time.Duration): WorkerOptions = copy(grace = grace.toMillis().milliseconds)

    /** A copy with [onError]. */
    public fun withOnError(onError: WorkerErrorHook): WorkerOptions = copy(onError = onError)
}

/** Exponential from 1 s, capped at 1 h, with full jitter: a random delay up to 2^(attempts-1) s. */
public fun defaultBackoff(attempts: Long): Duration {
    val cap = if (attempts >= 13) 1.hours else minOf(1.hours, (1L shl (attempts - 1).coerceAtLeast(0).toInt()).seconds)
    return ThreadLocalRandom.current().nextLong(cap.inWholeMilliseconds + 1).milliseconds
}

/**
 * Runs a queue's jobs: claims them under a lease (held at the server while
 * there are none), runs [handler] on each, extends the lease while it runs,
 * and acks it, fails it with a backoff, or past `maxAttempts` makes it a
 * dead letter — the loop of docs/workers.md, each step a statement of the
 * builder.
 *
 * ```
 * val worker = Worker(db.from("jobs")) { job -> send(job.json("payload")) }
 * coroutineScope { launch { worker.run() } … }   // cancel the scope, or close(): a graceful stop
 * ```
 *
 * A handler is cancelled (its coroutine) when its lease is lost — another
 * worker may hold the job; then neither ack nor fail is sent — and when a
 * stop's grace runs out. A handler that throws fails its job.
 */
public class Worker(
    /** The queue: a collection builder (`db.from("jobs")`), whose client and collection the worker uses. */
    jobs: Query,
    public val options: WorkerOptions = WorkerOptions(),
    private val handler: suspend (Row) -> Unit,
) : AutoCloseable {
    private val jobs: Query = jobs.client.from(jobs.collection)
    private val claimsClient: Client = jobs.client.withWait(options.wait)
    private val claims: Query = this.jobs.where(raw("run_at <= now()")).let { q ->
        options.where?.let { q.where(it) } ?: q
    }.order("run_at")
    private val leaseMs = options.lease.inWholeMilliseconds
    private val started = AtomicBoolean(false)
    private val stop = CompletableDeferred<Unit>()
    private val done = CompletableDeferred<Unit>()
    private val counter = AtomicLong()
    @Volatile private var stoppedAt: TimeMark? = null

    public companion object {
        /** The worker whose handler runs on this thread now (a handler's coroutine context sets it), for [close]. */
        private val inHandler = ThreadLocal<Worker?>()

        /**
         * A worker whose handler blocks its thread (Java): it runs on
         * Dispatchers.IO, and is interrupted when its job is cancelled.
         */
        @JvmStatic
        public fun blocking(jobs: Query, options: WorkerOptions, handler: java.util.function.Consumer<Row>): Worker =
            Worker(jobs, options.copy(dispatcher = Dispatchers.IO)) { row -> runInterruptible { handler.accept(row) } }
    }

    /** [run] on the calling thread, until [close] (for Java: run it on a thread of its own). */
    public fun runBlocking(): Unit = kotlinx.coroutines.runBlocking { run() }

    /** Whether a stop was asked for (by [close] or a cancelled [run]). */
    public val stopping: Boolean get() = stop.isCompleted

    /**
     * Runs until [close] is called or the calling coroutine is cancelled;
     * either way it stops gracefully before it returns (or rethrows the
     * cancellation): no new claims, unstarted jobs released at once,
     * running handlers given the grace and then cancelled.
     */
    public suspend fun run() {
        check(started.compareAndSet(false, true)) { "a worker runs once" }
        val scope = CoroutineScope(SupervisorJob() + options.dispatcher + CoroutineName("fenec-worker"))
        val handlers = SupervisorJob(scope.coroutineContext[Job])
        val slots = Semaphore(options.concurrency)
        val claimer = scope.launch { claimLoop(scope, handlers, slots) }
        try {
            stop.await()
        } finally {
            stop.complete(Unit)
            stoppedAt = TimeSource.Monotonic.markNow()
            withContext(NonCancellable) {
                claimer.cancelAndJoin()
                val finished = withTimeoutOrNull(options.grace) { handlers.children.toList().joinAll() }
                if (finished == null) handlers.children.toList().forEach { it.cancel() }
                handlers.children.toList().joinAll()
                scope.coroutineContext[Job]?.cancelAndJoin()
                done.complete(Unit)
            }
        }
    }

    /**
     * Stops gracefully and waits for it, so `use {}` ends after the drain:
     * blocks the calling thread until [run] has stopped, at most the grace
     * and a second more (the releases of handlers cancelled then). From a
     * coroutine, [stop] waits without blocking a thread; close() on the very
     * thread whose event loop runs [run] (a `runBlocking` that launched it)
     * cannot see the drain and returns after that bound. Called by one of
     * this worker's own handlers, it only asks for the stop: the drain
     * waits for that handler.
     */
    override fun close() {
        stop.complete(Unit)
        if (!started.get() || inHandler.get() === this) return
        kotlinx.coroutines.runBlocking { withTimeoutOrNull(options.grace + 1.seconds) { done.await() } }
    }

    /** [close], then waits for [run] to have stopped. */
    public suspend fun stop() {
        close()
        if (started.get()) done.await()
    }

    private suspend fun claimLoop(scope: CoroutineScope, handlers: Job, slots: Semaphore) {
        var faults = 0L
        while (scope.isActive && !stopping) {
            slots.acquire()
            var n = 1
            while (n < options.concurrency && slots.tryAcquire()) n++
            val owner = "${options.owner}:${counter.incrementAndGet()}"
            val claimed = try {
                claimsClient.query(claimStatement(n.toLong(), owner)).rows ?: emptyList()
            } catch (e: CancellationException) {
                // Given up (a stop): the server may have taken jobs for it in
                // that moment, so whatever this owner holds goes back.
                repeat(n) { slots.release() }
                withContext(NonCancellable) {
                    settle("release of the given-up claim $owner", null) {
                        send(releaseGivenUpStatement(owner))
                    }
                }
                throw e
            } catch (e: Exception) {
                // Whatever the claim met (a fault, a refusal, an answer it
                // could not read), the worker reports it and tries again.
                repeat(n) { slots.release() }
                options.onError.report("claim failed, retrying", null, e)
                delay(defaultBackoff(++faults))
                continue
            }
            faults = 0
            repeat(n - claimed.size) { slots.release() }
            for (row in claimed) {
                if (stopping) {
                    // Claimed but not started: another worker takes it now, not after the lease.
                    withContext(NonCancellable) { release(row, owner) }
                    slots.release()
                    continue
                }
                scope.launch(handlers + inHandler.asContextElement(this@Worker), start = CoroutineStart.UNDISPATCHED) {
                    try {
                        runJob(row, owner)
                    } finally {
                        slots.release()
                    }
                }
            }
            if (claimed.isEmpty() && options.wait == Duration.ZERO) delay(1.seconds)
        }
    }

    private suspend fun runJob(row: Row, owner: String) {
        val id = row["id"]
        val attempts = row.long("attempts") ?: 1
        var lost = false
        val failure: Throwable? = try {
            coroutineScope {
                // Undispatched: the handler starts now, in claim order, so a
                // stop seen by the claim loop leaves no handler half-started.
                val work = async(start = CoroutineStart.UNDISPATCHED) {
                    try {
                        handler(row)
                        null
                    } catch (e: CancellationException) {
                        throw e
                    } catch (e: Throwable) {
                        e
                    }
                }
                val extender = launch {
                    if (!extendWhileRunning(row, id, owner)) {
                        lost = true
                        work.cancel()
                    }
                }
                try {
                    work.await()
                } finally {
                    extender.cancel()
                }
            }
        } catch (e: CancellationException) {
            if (!lost) {
                // The stop's grace ran out: the job goes back at once, this run not counted.
                withContext(NonCancellable) { release(row, owner) }
                throw e
            }
            null
        }
        if (lost) {
            options.onError.report("job $id: the lease was lost; its handler was cancelled, and nothing is sent for it", row, null)
            return
        }
        withContext(NonCancellable) {
            if (failure == null) {
                settle("ack of job $id", row) { send(ackStatement(id, owner)) }
            } else if (attempts >= options.maxAttempts) {
                options.onError.report("job $id failed (attempt $attempts of ${options.maxAttempts}): a dead letter", row, failure)
                settle("dead letter of job $id", row) { send(deadLetterStatement(id, owner, message(failure))) }
            } else {
                options.onError.report("job $id failed (attempt $attempts of ${options.maxAttempts})", row, failure)
                val delay = options.backoff(attempts).inWholeMilliseconds.coerceAtLeast(0)
                settle("fail of job $id", row) { send(failStatement(id, owner, message(failure), delay)) }
            }
        }
    }

    /** Extends the lease every half of it; answers false once it is lost (412), true if extending is refused otherwise. */
    private suspend fun extendWhileRunning(row: Row, id: Any?, owner: String): Boolean {
        val every = (leaseMs / 2).milliseconds
        while (true) {
            delay(every)
            try {
                send(extendStatement(id, owner))
            } catch (e: FenecException) {
                if (e.code == ErrorCode.UNMET) return false
                if (!isFault(e)) {
                    // A refusal that another try would meet again: the handler
                    // goes on under the lease it has.
                    options.onError.report("extend of job $id refused; no more extensions", row, e)
                    return true
                }
                // One missed extension still leaves half a lease: the next tick tries again.
                options.onError.report("extend of job $id failed, retrying at the next tick", row, e)
            }
        }
    }

    /**
     * Sends an ack, fail or release, retrying faults until it is sent — or,
     * once the worker is stopping, until the grace ends (the job's lease
     * then lapses and another worker runs it). A 412 means the job is no
     * longer this claim's.
     */
    private suspend fun settle(what: String, row: Row?, send: suspend () -> Long) {
        var faults = 0L
        while (true) {
            try {
                send()
                return
            } catch (e: FenecException) {
                if (e.code == ErrorCode.UNMET) {
                    options.onError.report("$what: refused (412), the job is no longer this worker's", row, e)
                    return
                }
                val graceOver = stoppedAt?.let { it.elapsedNow() >= options.grace } == true
                if (!isFault(e) || graceOver) {
                    options.onError.report("$what failed", row, e)
                    return
                }
                options.onError.report("$what failed, retrying", row, e)
                delay(defaultBackoff(++faults))
            }
        }
    }

    // The statements of docs/workers.md, rendered by the builder: each is a
    // `worker …` case of conformance/builder-golden.json (WorkerStatementsTest).

    internal fun claimStatement(limit: Long, owner: String): Statement = claims.limit(limit)
        .updateStatement(mapOf("owner" to owner, "run_at" to expr("now() + ?", leaseMs), "attempts" to inc(1)), returning = listOf("*"))

    internal fun extendStatement(id: Any?, owner: String): Statement =
        mine(id, owner).updateStatement(mapOf("run_at" to expr("now() + ?", leaseMs)), require = 1)

    internal fun ackStatement(id: Any?, owner: String): Statement = mine(id, owner).deleteStatement(require = 1)

    internal fun failStatement(id: Any?, owner: String, error: String, delayMs: Long): Statement =
        mine(id, owner).updateStatement(mapOf("owner" to null, "error" to error, "run_at" to expr("now() + ?", delayMs)), require = 1)

    internal fun deadLetterStatement(id: Any?, owner: String, error: String): Statement =
        mine(id, owner).updateStatement(mapOf("owner" to null, "error" to error, "run_at" to null), require = 1)

    internal fun releaseStatement(id: Any?, owner: String): Statement =
        mine(id, owner).updateStatement(RELEASE, require = 1)

    internal fun releaseGivenUpStatement(owner: String): Statement = jobs.where("owner", owner).updateStatement(RELEASE)

    private fun mine(id: Any?, owner: String): Query = jobs.where("id", id).where("owner", owner)

    /** Sends a statement other than a claim; answers how many rows it wrote. */
    private suspend fun send(s: Statement): Long = jobs.client.query(s).affected

    private suspend fun release(row: Row, owner: String) {
        val id = row["id"]
        settle("release of job $id", row) { send(releaseStatement(id, owner)) }
    }
}

/** A release's patch: back to ready now, the run that did not happen not counted. */
private val RELEASE: Map<String, Any?> = mapOf("owner" to null, "run_at" to expr("now()"), "attempts" to inc(-1))

/** Network errors, timeouts and 5xx are faults: worth another try. */
private fun isFault(e: FenecException): Boolean =
    e.code == ErrorCode.NETWORK || e.code == ErrorCode.TIMEOUT || e.status >= 500

private fun message(e: Throwable): String = e.message?.takeIf { it.isNotBlank() } ?: e.javaClass.name
