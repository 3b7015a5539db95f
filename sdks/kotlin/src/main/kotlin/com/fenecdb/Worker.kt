package com.fenecdb

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.CoroutineName
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.ExperimentalCoroutinesApi
import kotlinx.coroutines.Job
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.asContextElement
import kotlinx.coroutines.cancel
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.delay
import kotlinx.coroutines.job
import kotlinx.coroutines.joinAll
import kotlinx.coroutines.launch
import kotlinx.coroutines.runInterruptible
import kotlinx.coroutines.selects.onTimeout
import kotlinx.coroutines.selects.select
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeoutOrNull
import kotlinx.coroutines.yield
import org.slf4j.Logger
import org.slf4j.LoggerFactory
import java.util.UUID
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.ThreadLocalRandom
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.atomic.AtomicLong
import kotlin.coroutines.AbstractCoroutineContextElement
import kotlin.coroutines.CoroutineContext
import kotlin.time.Duration
import kotlin.time.Duration.Companion.hours
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlin.time.TimeMark
import kotlin.time.TimeSource

/** The step of the worker's loop a [WorkerException] is about (docs/workers.md, "What is reported"). */
public enum class WorkerStep(
    /** The step's name as every SDK spells it: `claim`, `dead_letter`, `lost_lease`, … */
    public val wire: String,
) {
    /** A claim failed (a fault or a refusal); it is tried again with the backoff. */
    CLAIM("claim"),

    /** An extension of leases failed; the next tick tries again. */
    EXTEND("extend"),

    /** An ack could not be sent. */
    ACK("ack"),

    /** A fail (the job to run again later) could not be sent. */
    FAIL("fail"),

    /** A release (a job back to ready) could not be sent, or a handler was given up. */
    RELEASE("release"),

    /** A handler threw: a failed attempt, the job runs again after the backoff. */
    HANDLER("handler"),

    /** A handler threw on the job's last attempt: the job is a dead letter now. */
    DEAD_LETTER("dead_letter"),

    /** The job's lease was lost (it lapsed, or another worker holds the job): nothing more is sent for it. */
    LOST_LEASE("lost_lease"),
}

/**
 * What a [Worker] reports through [WorkerOptions.onError] (and logs when
 * there is no hook): the [step], the job's id when the step is about one
 * job ([jobId], with its [job] row), and the [cause] when there is one (the
 * handler's error, or the request's [FenecException]).
 */
public class WorkerException(
    /** The step that went wrong. */
    public val step: WorkerStep,
    /** The job's id when the step is about one job; null for a claim or a batch. */
    public val jobId: Any?,
    message: String,
    cause: Throwable? = null,
    /** The job's row as claimed, when the step is about one job. */
    public val job: Row? = null,
) : Exception(message, cause)

/** Where a [Worker] reports each fault, failed attempt, dead letter and lost lease (docs/workers.md). */
public fun interface WorkerErrorHandler {
    /** Called once for each report; it should return quickly (it runs on the worker's coroutines). */
    public fun onError(error: WorkerException)
}

/** The hook of the first versions: what happened in words, the job, the cause. */
@Deprecated("onError takes a WorkerErrorHandler of one WorkerException", ReplaceWith("WorkerErrorHandler"))
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
    /** How long a claimed job is the worker's before another may take it; at least 100 ms. */
    val lease: Duration = 30.seconds,
    /** How long an idle worker's claim is held at the server (0 to 30 s). */
    val wait: Duration = 30.seconds,
    /** A job whose handler failed this many times is a dead letter (`run_at: null`). */
    val maxAttempts: Int = 5,
    /** The delay before a failed job runs again, from its attempts (1 after its first run). */
    val backoff: (attempts: Long) -> Duration = ::defaultBackoff,
    /** A condition of the queue's own (a queue field, say), joined to the claim's with `and`. */
    val where: Raw? = null,
    /** The owner prefix: each claim's owner is `<ownerPrefix>:<claim counter>`. */
    val ownerPrefix: String = "w-" + UUID.randomUUID(),
    /** How long running handlers may go on after a stop before they are cancelled. */
    val grace: Duration = 30.seconds,
    /**
     * Where faults, failed attempts, dead letters and lost leases are
     * reported; null (the default) logs them through SLF4J's logger
     * `com.fenecdb.Worker`: a failed attempt and a fault as a warning, a
     * dead letter, a lost lease and a handler given up as an error.
     */
    val onError: WorkerErrorHandler? = null,
    /** Where handlers run; Dispatchers.IO for handlers that block. The rest of the caller's context is kept. */
    val dispatcher: CoroutineDispatcher = Dispatchers.Default,
    /** The owner prefix under its first name: when set, it wins over [ownerPrefix]. */
    @Deprecated("renamed ownerPrefix (docs/sdks.md, one word per idea)", ReplaceWith("ownerPrefix"))
    val owner: String? = null,
) {
    init {
        require(concurrency >= 1) { "concurrency must be at least 1, not $concurrency" }
        require(lease >= MIN_LEASE) { "lease must be at least 100 ms, not $lease" }
        require(wait >= Duration.ZERO && wait <= 30.seconds) { "wait must be 0 to 30 s (0 to 30000 milliseconds), not $wait" }
        require(maxAttempts >= 1) { "maxAttempts must be at least 1, not $maxAttempts" }
        require(grace >= Duration.ZERO) { "grace must not be negative, not $grace" }
        @Suppress("DEPRECATION")
        require((owner ?: ownerPrefix).isNotEmpty()) { "ownerPrefix must not be empty" }
    }

    /** The prefix the claims' owners get: [owner] when the old name was used, else [ownerPrefix]. */
    @Suppress("DEPRECATION")
    internal val prefix: String get() = owner ?: ownerPrefix

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

    /** A copy with the owner prefix [ownerPrefix]. */
    @Suppress("DEPRECATION")
    public fun withOwnerPrefix(ownerPrefix: String): WorkerOptions = copy(ownerPrefix = ownerPrefix, owner = null)

    /** A copy with the owner prefix [owner]. */
    @Deprecated("renamed withOwnerPrefix", ReplaceWith("withOwnerPrefix(owner)"))
    public fun withOwner(owner: String): WorkerOptions = withOwnerPrefix(owner)

    /** A copy with [grace]. */
    public fun withGrace(grace: java.time.Duration): WorkerOptions = copy(grace = grace.toMillis().milliseconds)

    /** A copy with [onError]. */
    public fun withOnError(onError: WorkerErrorHandler): WorkerOptions = copy(onError = onError)

    /** A copy with a hook of the first versions, given each report's message, job and cause. */
    @Suppress("DEPRECATION")
    @Deprecated("onError takes a WorkerErrorHandler", ReplaceWith("withOnError(WorkerErrorHandler { e -> })"))
    public fun withOnError(hook: WorkerErrorHook): WorkerOptions =
        copy(onError = WorkerErrorHandler { e -> hook.report(e.message ?: e.step.wire, e.job, e.cause) })

    public companion object {
        /** The shortest lease every SDK takes: 100 ms. */
        public val MIN_LEASE: Duration = 100.milliseconds
    }
}

/** Exponential from 1 s, capped at 1 h, with full jitter: a random delay up to 2^(attempts-1) s. */
public fun defaultBackoff(attempts: Long): Duration {
    val cap = if (attempts >= 13) 1.hours else minOf(1.hours, (1L shl (attempts - 1).coerceAtLeast(0).toInt()).seconds)
    return ThreadLocalRandom.current().nextLong(cap.inWholeMilliseconds + 1).milliseconds
}

/** The most ids one ack carries, and the window an ack waits for more (docs/workers.md). */
private const val ACK_BATCH = 100
private val ACK_WINDOW = 5.milliseconds

/** How long a handler that ignores its cancellation is waited for after the grace. */
private val ABANDON_AFTER = 1.seconds

/**
 * Runs a queue's jobs: claims them under a lease (held at the server while
 * there are none), runs [handler] on each, extends the leases while they
 * run, and acks (in batches), fails with a backoff, or past `maxAttempts`
 * makes a dead letter — the loop of docs/workers.md, each step a statement
 * of the builder.
 *
 * ```
 * val worker = Worker(db.from("jobs")) { job -> send(job.json("payload")) }
 * coroutineScope { launch { worker.run() } … }   // cancel the scope, or close(): a graceful stop
 * ```
 *
 * Handlers run in the caller's coroutine context (its MDC or tracing
 * elements carry through) on [WorkerOptions.dispatcher], but not under the
 * caller's Job: cancelling the caller asks for a graceful stop. A handler is
 * cancelled (its coroutine) when its lease is lost — another worker may
 * hold the job; then neither ack nor fail is sent — and when a stop's grace
 * runs out. A handler that throws fails its job.
 */
public class Worker(
    /** The queue: a collection builder (`db.from("jobs")`), whose client and collection the worker uses. */
    jobs: Query,
    public val options: WorkerOptions = WorkerOptions(),
    private val handler: suspend (Row) -> Unit,
) : AutoCloseable {
    // Unheld: an extension (`set … returning id`) renders like a claim, and
    // must be answered at once even when the caller's client has a wait.
    private val jobs: Query = jobs.client.unheld().from(jobs.collection)
    private val claimsClient: Client = jobs.client.withWait(options.wait)

    /** Claims not held (`Fenec-Wait: 0`): sent while the last claim took jobs, and with the acks they carry. */
    private val claimsNow: Client = this.jobs.client.withWait(Duration.ZERO)
    private val claims: Query = this.jobs.where(raw("run_at <= now()")).let { q ->
        options.where?.let { q.where(it) } ?: q
    }.order("run_at")
    private val leaseMs = options.lease.inWholeMilliseconds
    private val started = AtomicBoolean(false)
    private val stop = CompletableDeferred<Unit>()
    private val done = CompletableDeferred<Unit>()
    private val counter = AtomicLong()
    @Volatile private var stoppedAt: TimeMark? = null

    /** Jobs whose handler runs now (started, not yet returned). */
    private val inFlight = AtomicInteger()

    /** Jobs whose handler was dispatched and has not started yet: a claim waits for them (see [claimDue]). */
    private val unstarted = AtomicInteger()

    /**
     * Signalled when a handler starts or returns and a claim is due
     * ([claimDue]): the claim loop waits on it.
     */
    private val freed = Channel<Unit>(Channel.CONFLATED)

    /** Signalled when no job is in flight any more: the ack window closes then. */
    private val idle = Channel<Unit>(Channel.CONFLATED)

    /** How long an ack waits for more to join it; a test makes it long (docs/workers.md: 5 ms). */
    internal var ackWindow: Duration = ACK_WINDOW

    /** Finished handlers' jobs, waiting to be acked in a batch. */
    private val acks = Channel<Running>(Channel.UNLIMITED)

    /** How many jobs [acks] holds now (sent, not yet received by the ack loop). */
    private val queuedAcks = AtomicInteger()

    /** How many more jobs the ack batch being made takes: a job queued that fills it signals [full]. */
    @Volatile private var ackRoom = ACK_BATCH

    /** Signalled when the queued acks may fill the batch being made: the ack loop sends it then. */
    private val full = Channel<Unit>(Channel.CONFLATED)

    /** Signalled when the ack loop has put a job it received in [pending]: a claim about to carry the batch waits for it. */
    private val moved = Channel<Unit>(Channel.CONFLATED)

    /** Guards [pending] and [claimWaiting], between the ack loop and the claim loop. */
    private val ackLock = Any()

    /** The batch of acks being made: the ack loop's, or taken by a claim that carries it (under [ackLock]). */
    private var pending = ArrayList<Running>()

    /** Whether the claim loop is waiting for its next claim to be due (under [ackLock]). */
    private var claimWaiting = false

    /** Whether the last claim took jobs: the next is sent not held (docs/workers.md, "Claim"). */
    @Volatile private var lastTook = true

    /** Set by [runUntilEmpty]: its claims are never held, and carry no acks. */
    @Volatile private var untilEmpty = false

    /** The ack loop's scope: acks a carrying claim could not send go out alone in it, and a stop waits for them. */
    private val ackScope = CompletableDeferred<CoroutineScope>()

    /** Set once handlers that ignored their cancellation were given up: nothing more is sent for them. */
    @Volatile private var gaveUp = false

    /** One claim: its owner and its jobs whose handlers still run (extended together). */
    private class Claim(val owner: String) {
        val running = ConcurrentHashMap<Any, Running>()
    }

    /** One job's run. */
    private class Running(val row: Row, val id: Any, val claim: Claim) {
        @Volatile var job: Job? = null
        val lost = AtomicBoolean(false)
    }

    /** Marks a handler's coroutine: [stop] from it only asks. */
    private class HandlerOf(val worker: Worker) : AbstractCoroutineContextElement(HandlerOf) {
        companion object Key : CoroutineContext.Key<HandlerOf>
    }

    public companion object {
        /** The worker whose handler runs on this thread now (a handler's coroutine context sets it), for [close]. */
        private val inHandler = ThreadLocal<Worker?>()

        private val log: Logger = LoggerFactory.getLogger(Worker::class.java)

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

    /** [runUntilEmpty] on the calling thread (for Java and scripts). */
    public fun runUntilEmptyBlocking(): Unit = kotlinx.coroutines.runBlocking { runUntilEmpty() }

    /** Whether a stop was asked for (by [close], [stop], a cancelled [run], or an empty queue in [runUntilEmpty]). */
    public val stopping: Boolean get() = stop.isCompleted

    /**
     * Runs until [close] or [stop] is called or the calling coroutine is
     * cancelled; either way it stops gracefully before it returns (or
     * rethrows the cancellation): no new claims, unstarted jobs released at
     * once, running handlers given the grace and then cancelled, the acks
     * flushed.
     */
    public suspend fun run(): Unit = work(untilEmpty = false)

    /**
     * Runs as [run] does, and stops by itself once a claim finds no ready
     * job and no handler is running (acks flushed): for scripts and tests.
     * Jobs not ready yet (a later `run_at`) are left. Its claims are not
     * held at the server: an empty queue is seen at once.
     */
    public suspend fun runUntilEmpty(): Unit = work(untilEmpty = true)

    private suspend fun work(untilEmpty: Boolean) {
        check(started.compareAndSet(false, true)) { "a worker runs once" }
        this.untilEmpty = untilEmpty
        // The caller's context (MDC, tracing, its name) without its Job: a
        // cancelled caller asks for a graceful stop, it does not cut the
        // handlers off.
        val caller = currentCoroutineContext().minusKey(Job)
        val name = caller[CoroutineName] ?: CoroutineName("fenec-worker")
        val scope = CoroutineScope(caller + name + SupervisorJob() + options.dispatcher)
        val handlers = SupervisorJob(scope.coroutineContext.job)
        val background = SupervisorJob(scope.coroutineContext.job)
        // The claim loop, the acks and the lease ticker, on Dispatchers.IO:
        // their requests block a thread there (java.net.http's send), so
        // running them there spares each request a hop to it and back.
        val chores = CoroutineScope(scope.coroutineContext + background + Dispatchers.IO)
        val acker = chores.launch { ackLoop() }
        chores.launch { extendLoop() }
        val claimer = chores.launch { claimLoop(scope, handlers, untilEmpty) }
        try {
            stop.await()
        } finally {
            stop.complete(Unit)
            stoppedAt = TimeSource.Monotonic.markNow()
            withContext(NonCancellable) {
                claimer.cancelAndJoin()
                val finished = withTimeoutOrNull(options.grace) { handlers.children.toList().joinAll() }
                if (finished == null) {
                    handlers.children.toList().forEach { it.cancel() }
                    val gone = withTimeoutOrNull(ABANDON_AFTER) { handlers.children.toList().joinAll() }
                    if (gone == null) abandon()
                }
                // The acks of every handler that returned: flushed before the stop returns.
                acks.close()
                full.trySend(Unit) // an ack loop waiting out its window looks again, and sees the end
                acker.join()
                background.cancelAndJoin() // the lease ticker
                scope.cancel()
                done.complete(Unit)
            }
        }
    }

    /**
     * Gives up the handlers still running a second after their
     * cancellation: nothing more is sent for their jobs (no ack, fail or
     * release), their leases are no longer extended and lapse, and another
     * worker runs them again.
     */
    private fun abandon() {
        gaveUp = true
        val stuck = runningJobs()
        for (r in stuck) {
            report(
                WorkerException(
                    WorkerStep.RELEASE, r.id,
                    "job ${r.id}: its handler ignored its cancellation for ${ABANDON_AFTER.inWholeMilliseconds} ms past the grace; " +
                        "given up, its lease lapses and another worker runs it",
                    job = r.row,
                ),
                error = true,
            )
        }
    }

    private val claimsRunning = ConcurrentHashMap.newKeySet<Claim>()

    private fun runningJobs(): List<Running> = claimsRunning.flatMap { it.running.values }

    /**
     * Stops gracefully and waits for it, so `use {}` ends after the drain:
     * blocks the calling thread until [run] has stopped, at most the grace
     * and a second more (the releases of handlers cancelled then). From a
     * coroutine, [stop] waits without blocking a thread; close() on the very
     * thread whose event loop runs [run] (a `runBlocking` that launched it)
     * cannot see the drain and returns after that bound. Called by one of
     * this worker's own handlers, it only asks for the stop, and returns at
     * once: the worker stops as soon as its running handlers return.
     */
    override fun close() {
        stop.complete(Unit)
        if (!started.get() || inHandler.get() === this) return
        kotlinx.coroutines.runBlocking { withTimeoutOrNull(options.grace + ABANDON_AFTER) { done.await() } }
    }

    /**
     * Asks for a graceful stop and waits for [run] to have stopped; from
     * one of this worker's own handlers it only asks, and returns at once.
     */
    public suspend fun stop() {
        stop.complete(Unit)
        if (!started.get() || currentCoroutineContext()[HandlerOf]?.worker === this) return
        done.await()
    }

    private fun report(e: WorkerException, error: Boolean = false) {
        val hook = options.onError
        if (hook != null) {
            try {
                hook.onError(e)
            } catch (x: Exception) {
                log.error("the onError hook threw on a report ({}): {}", e.message, x.toString(), x)
            }
            return
        }
        val loud = error || e.step == WorkerStep.DEAD_LETTER || e.step == WorkerStep.LOST_LEASE
        if (loud) log.error("fenecdb worker [{}]: {}", e.step.wire, e.message, e.cause) else log.warn("fenecdb worker [{}]: {}", e.step.wire, e.message, e.cause)
    }

    private val half = (options.concurrency + 1) / 2

    private suspend fun claimLoop(scope: CoroutineScope, handlers: Job, untilEmpty: Boolean) {
        var faults = 0L
        // One context for every handler, made once: a job's start adds nothing to it.
        val handlerContext = handlers + HandlerOf(this) + inHandler.asContextElement(this)
        while (!stopping) {
            // At most one claim in flight, sent once half the slots (rounded
            // up) are free and every handler dispatched started, or nothing
            // runs (docs/workers.md, "Claim").
            synchronized(ackLock) { claimWaiting = true }
            while (!claimDue()) freed.receive()
            // Handlers that are returning now (dispatched on other threads)
            // may join this claim's free slots: one turn of the dispatcher
            // before it is sent makes claims of the whole concurrency likelier.
            if (inFlight.get() > 0) yield()
            val carried = takeCarried()
            val n = options.concurrency - inFlight.get()
            val claim = Claim("${options.prefix}:${counter.incrementAndGet()}")
            val claimed = try {
                val statement = claimStatement(n.toLong(), claim.owner)
                if (carried.isNotEmpty()) {
                    // Not cut off by a stop once sent: the acks' answers are
                    // read, and the rows claimed released (below).
                    withContext(NonCancellable) { claimWithAcks(statement, carried) } ?: continue
                } else {
                    val client = if (untilEmpty) jobs.client else if (lastTook) claimsNow else claimsClient
                    (client.query(statement).rows ?: emptyList()).also { lastTook = it.isNotEmpty() }
                }
            } catch (e: CancellationException) {
                // Given up (a stop): the server may have taken jobs for it in
                // that moment, so whatever this owner holds goes back.
                withContext(NonCancellable) {
                    settle(WorkerStep.RELEASE, null, null, { "release of the given-up claim ${claim.owner}" }) {
                        send(releaseGivenUpStatement(claim.owner))
                    }
                }
                throw e
            } catch (e: Exception) {
                // Whatever the claim met (a fault, a refusal, an answer it
                // could not read), the worker reports it and tries again.
                synchronized(ackLock) { claimWaiting = false } // no acks wait for a claim in backoff
                report(WorkerException(WorkerStep.CLAIM, null, "claim failed, retrying: ${e.message}", e))
                delay(defaultBackoff(++faults))
                continue
            }
            faults = 0
            inFlight.addAndGet(claimed.size)
            // Back to waiting for the next claim: once these jobs' handlers
            // have returned, their acks may wait for it (see [carries]).
            synchronized(ackLock) { claimWaiting = true }
            if (claimed.isNotEmpty()) claimsRunning.add(claim)
            // Every run is known to its claim before any handler starts, so a
            // handler that returns at once never leaves the claim looking empty.
            val runs = claimed.map { row -> row to row["id"]?.let { id -> Running(row, id, claim).also { claim.running[id] = it } } }
            unstarted.addAndGet(runs.size)
            for ((row, run) in runs) {
                if (stopping || run == null) {
                    handlerStarted()
                    // Claimed but not started: another worker takes it now, not after the lease.
                    if (run != null) {
                        claim.running.remove(run.id)
                        withContext(NonCancellable) { release(row, run.id, claim.owner) }
                    }
                    handlerReturned()
                    continue
                }
                // Dispatched, not started on this loop's thread: a handler
                // that blocks its thread blocks no claim or stop.
                scope.launch(handlerContext) {
                    run.job = coroutineContext.job
                    handlerStarted()
                    if (stopping) {
                        // Claimed, and not started before the stop: back at once.
                        run.claim.running.remove(run.id)
                        withContext(NonCancellable) { release(run.row, run.id, run.claim.owner) }
                        handlerReturned()
                    } else {
                        runJob(run)
                    }
                }
            }
            if (claim.running.isEmpty()) claimsRunning.remove(claim)
            if (claimed.isEmpty()) {
                if (untilEmpty) {
                    if (inFlight.get() == 0) {
                        stop.complete(Unit)
                        return
                    }
                    freed.receive() // no poll while the running handlers may still add nothing
                } else if (options.wait == Duration.ZERO) {
                    delay(1.seconds)
                }
            }
        }
    }

    /**
     * A slot is free again. The claim loop is woken only when a claim is due
     * (docs/workers.md, "Claim"), and the ack window closes once nothing is in
     * flight: each wake-up is a coroutine dispatched, so none is sent for nothing.
     */
    private fun handlerReturned() {
        val busy = inFlight.decrementAndGet()
        if (busy == 0) idle.trySend(Unit)
        if (claimDue(busy)) freed.trySend(Unit)
    }

    /** A handler dispatched has started: the last one to start may make a claim due. */
    private fun handlerStarted() {
        if (unstarted.decrementAndGet() == 0 && claimDue()) freed.trySend(Unit)
    }

    /**
     * Whether the ack batch that the last running handler's return closed
     * waits for the claim loop, to go in the request of the claim it sends
     * then (docs/workers.md, "Claim"): the loop waits for a claim to be due,
     * and that claim is not held (the last claim took jobs). Under [ackLock],
     * with nothing in flight: only the claim loop's next claim changes that.
     */
    private fun carries(): Boolean = claimWaiting && lastTook && !untilEmpty && !stopping

    /**
     * The acks the claim about to be sent carries: with nothing in flight and
     * a claim not held, every finished job's (at most ACK_BATCH), taken from
     * the ack loop's batch and queue; else none.
     */
    private suspend fun takeCarried(): List<Running> {
        while (true) {
            synchronized(ackLock) {
                if (!lastTook || untilEmpty || inFlight.get() != 0) {
                    claimWaiting = false
                    return emptyList()
                }
                drainAcks()
                if (pending.size >= ACK_BATCH || queuedAcks.get() <= 0) {
                    claimWaiting = false
                    return pending.also { pending = ArrayList() }
                }
            }
            // A job handed to the ack loop (a channel gives a waiting receiver
            // its element at once) and not yet put in the batch: the loop puts
            // it there as soon as its coroutine runs, and signals [moved].
            moved.receive()
        }
    }

    /** Moves queued acks into [pending], up to ACK_BATCH (under [ackLock]); returns whether the queue is closed. */
    private fun drainAcks(): Boolean {
        while (pending.size < ACK_BATCH) {
            val next = acks.tryReceive()
            if (next.isClosed) return true
            pending += next.getOrNull() ?: return false
            queuedAcks.decrementAndGet()
        }
        return false
    }

    /**
     * Sends [claim] (not held) after the acks of [runs], one statement per
     * claim owner, in one `/batch`; returns the rows claimed, or null when an
     * ack was refused: that refusal is reported as a lone ack's, and the
     * claim, which did not run, is to be sent again. Any other failure
     * sends the acks alone (their usual retries) and is thrown: the claim's.
     */
    private suspend fun claimWithAcks(claim: Statement, runs: List<Running>): List<Row>? {
        val work = runs.groupBy { it.claim.owner }.toList()
        val statements = work.map { (owner, rs) -> ackStatement(rs.map { it.id }, owner) } + claim
        val results = try {
            claimsNow.batch(statements)
        } catch (e: Exception) {
            val at = (e as? FenecException)?.at
            if (e is FenecException && at != null && at < work.size && !isFault(e)) {
                // Refused: the batch ran none of its statements. The refused
                // ack is reported as a lone one would be; the others go alone.
                work.forEachIndexed { i, (owner, rs) ->
                    if (i == at) refused(WorkerStep.ACK, rs.singleOrNull()?.id, rs.singleOrNull()?.row, { "ack of jobs ${rs.joinToString(", ") { it.id.toString() }}" }, e)
                    else ackAlone(owner, rs)
                }
                return null
            }
            for ((owner, rs) in work) ackAlone(owner, rs)
            throw e
        }
        work.forEachIndexed { i, (_, rs) -> acked(rs, results[i].rows.orEmpty().map { it["id"] }.toSet()) }
        lastTook = results.last().rows.orEmpty().isNotEmpty()
        return results.last().rows ?: emptyList()
    }

    /** Acks [runs] in a request of their own, in the ack loop's scope (a stop waits for it). */
    private suspend fun ackAlone(owner: String, runs: List<Running>) {
        ackScope.await().launch { ack(owner, runs) }
    }

    /**
     * Whether the next claim may be sent (docs/workers.md, "Claim"): nothing
     * in flight, or half the slots (rounded up) free and every handler
     * dispatched started. Handlers that have not started yet are waiting for
     * a thread of the dispatcher (they may be about to return at once): a
     * claim sent before them would ask for fewer slots than will be free
     * when it is answered, and one claim of all the slots is one request.
     */
    private fun claimDue(busy: Int = inFlight.get()): Boolean =
        busy == 0 || (options.concurrency - busy >= half && unstarted.get() == 0)

    private suspend fun runJob(run: Running) {
        val attempts = run.row.long("attempts") ?: 1
        val failure: Throwable? = try {
            handler(run.row)
            null
        } catch (e: Throwable) {
            e
        }
        run.claim.running.remove(run.id) // no more extensions
        if (run.claim.running.isEmpty()) claimsRunning.remove(run.claim)
        if (run.lost.get() || gaveUp) {
            // Reported when it was found; nothing is sent for it.
            handlerReturned()
            return
        }
        if (failure == null) {
            // Queued for its ack before the slot is free, so that once nothing
            // is in flight every finished job is in the queue and the window
            // closes on all of them. The slot is free then: the next claim
            // does not wait for the ack.
            val queued = acks.trySend(run).isSuccess
            // Counted once in the queue, so the ack loop never counts a job it
            // cannot take yet; the room is read after, so a batch this job
            // fills is signalled even when the loop published its room meanwhile.
            if (queued && queuedAcks.incrementAndGet() >= ackRoom) full.trySend(Unit)
            handlerReturned()
            if (!queued) withContext(NonCancellable) { ack(run.claim.owner, listOf(run)) }
            return
        }
        // A fail or a release holds the slot until it is sent, so that a
        // claim after it (runUntilEmpty's last one) sees the job again.
        val cancelled = run.job?.isCancelled == true // by the stop, once the grace ran out
        try {
            withContext(NonCancellable) {
                if (cancelled) {
                    // The stop's grace ran out: the job goes back at once, this run not counted.
                    release(run.row, run.id, run.claim.owner)
                    return@withContext
                }
                val text = errorText(failure)
                if (attempts >= options.maxAttempts) {
                    report(WorkerException(WorkerStep.DEAD_LETTER, run.id, "job ${run.id} failed (attempt $attempts of ${options.maxAttempts}): a dead letter: $text", failure, run.row))
                    settle(WorkerStep.FAIL, run.id, run.row, { "dead letter of job ${run.id}" }) { send(deadLetterStatement(run.id, run.claim.owner, text)) }
                } else {
                    report(WorkerException(WorkerStep.HANDLER, run.id, "job ${run.id} failed (attempt $attempts of ${options.maxAttempts}): $text", failure, run.row))
                    val delay = options.backoff(attempts).inWholeMilliseconds.coerceAtLeast(0)
                    settle(WorkerStep.FAIL, run.id, run.row, { "fail of job ${run.id}" }) { send(failStatement(run.id, run.claim.owner, text, delay)) }
                }
            }
        } finally {
            handlerReturned()
        }
    }

    /** The job's lease is lost: its handler is cancelled, the loss reported once, and nothing is sent for it. */
    private fun lose(run: Running, cause: Throwable?) {
        if (!run.lost.compareAndSet(false, true)) return
        run.job?.cancel()
        report(WorkerException(WorkerStep.LOST_LEASE, run.id, "job ${run.id}: the lease was lost; its handler was cancelled, and nothing is sent for it", cause, run.row))
    }

    /**
     * Every half lease, the leases of the jobs whose handlers run are
     * extended, one statement per claim owner. One ticker serves the whole
     * worker: a claim made just after a tick is extended at the next, half
     * a lease later, as a ticker of its own would. Each statement goes on
     * its own, so one that hangs holds up no other claim and no later tick;
     * an id the answer lacks whose handler still runs lost its lease.
     */
    private suspend fun extendLoop() = coroutineScope {
        val every = (leaseMs / 2).milliseconds
        while (true) {
            delay(every)
            for (claim in claimsRunning) {
                val ids = claim.running.keys.toList()
                if (ids.isNotEmpty()) launch { extend(claim, ids) }
            }
        }
    }

    private suspend fun extend(claim: Claim, ids: List<Any>) {
        val extended = try {
            jobs.client.query(extendStatement(ids, claim.owner)).rows.orEmpty().map { it["id"] }.toSet()
        } catch (e: CancellationException) {
            throw e
        } catch (e: Exception) {
            // One missed extension still leaves half a lease: the next tick tries again.
            report(WorkerException(WorkerStep.EXTEND, null, "extend of jobs ${ids.joinToString(", ")} failed, retrying at the next tick: ${e.message}", e))
            return
        }
        for (id in ids) {
            if (id in extended) continue
            val run = claim.running[id] ?: continue // returned meanwhile: its ack tells
            lose(run, null)
        }
    }

    /**
     * Acks finished jobs in batches: what arrives within the ack window of
     * the first (at most ACK_BATCH), one statement per claim owner, each
     * sent on its own so that a fault's retries hold up no later batch. The
     * window closes early once no job is in flight: nothing can join the
     * batch before the next claim answers (docs/workers.md). While the
     * window is open the loop is woken only when that may have changed —
     * nothing in flight, the batch possibly full, the window over — not by
     * every job queued: each wake-up is a coroutine dispatched. Returns once
     * the channel is closed and every batch is settled.
     */
    @OptIn(ExperimentalCoroutinesApi::class)
    private suspend fun ackLoop() = coroutineScope {
        ackScope.complete(this)
        while (true) {
            val first = acks.receiveCatching().getOrNull() ?: break
            synchronized(ackLock) {
                queuedAcks.decrementAndGet()
                pending += first
            }
            moved.trySend(Unit)
            val until = TimeSource.Monotonic.markNow() + ackWindow
            var closed = false
            while (true) {
                val size = synchronized(ackLock) {
                    closed = drainAcks()
                    pending.size
                }
                // A job is queued for its ack before its slot is freed: with
                // none in flight, every finished one is in the batch already
                // (or a carrying claim took the batch: it is empty).
                if (size >= ACK_BATCH || size == 0 || closed || inFlight.get() == 0) break
                val left = -until.elapsedNow()
                if (left <= Duration.ZERO) break
                ackRoom = ACK_BATCH - size
                // The room is published before the count is read: a job
                // counted after this read sees the room, and signals `full`
                // if it fills it. (The count may lag the queue, never lead it.)
                if (queuedAcks.get() >= ackRoom) continue
                select<Unit> {
                    idle.onReceive {}
                    full.onReceive {}
                    onTimeout(left) {}
                }
            }
            ackRoom = ACK_BATCH
            val batch = synchronized(ackLock) {
                // Closed by the last running handler's return, as the claim
                // loop sends a claim not held: the batch goes in its request.
                // (Only a batch that holds every finished job: one of ACK_BATCH
                // with more queued is sent, so a carried one never outgrows it.)
                val carried = !closed && inFlight.get() == 0 && queuedAcks.get() <= 0 && carries()
                if (carried) null else pending.also { pending = ArrayList() }
            }
            if (batch != null) sendAcks(batch)
        }
        // A batch left for a claim that a stop kept from being sent.
        sendAcks(synchronized(ackLock) { pending.also { pending = ArrayList() } })
    }

    /** Acks [batch], one request per claim owner, each on its own coroutine of this scope. */
    private fun CoroutineScope.sendAcks(batch: List<Running>) {
        if (batch.isEmpty()) return
        val owner = batch[0].claim.owner
        if (batch.all { it.claim.owner == owner }) {
            // Started at once on this coroutine's thread: it is dispatched
            // anyway as its request goes out.
            launch(start = CoroutineStart.UNDISPATCHED) { ack(owner, batch) }
        } else {
            for ((o, runs) in batch.groupBy { it.claim.owner }) launch(start = CoroutineStart.UNDISPATCHED) { ack(o, runs) }
        }
    }

    /** Acks [runs] of one claim; an id the answer lacks had lost its lease. Faults are retried as [settle] says. */
    private suspend fun ack(owner: String, runs: List<Running>) {
        val ids = runs.map { it.id }
        var deleted: Set<Any?> = emptySet()
        val sent = settle(WorkerStep.ACK, ids.singleOrNull(), runs.singleOrNull()?.row, { "ack of jobs ${ids.joinToString(", ")}" }) {
            deleted = jobs.client.query(ackStatement(ids, owner)).rows.orEmpty().map { it["id"] }.toSet()
            deleted.size.toLong()
        }
        if (sent) acked(runs, deleted)
    }

    /** An ack of [runs] was answered the ids it [deleted]: a job whose id is missing had lost its lease. */
    private fun acked(runs: List<Running>, deleted: Set<Any?>) {
        for (r in runs) {
            if (r.id !in deleted && r.lost.compareAndSet(false, true)) {
                report(WorkerException(WorkerStep.LOST_LEASE, r.id, "job ${r.id}: the lease was lost before its ack; another worker may run it again", null, r.row))
            }
        }
    }

    /**
     * Sends an ack, fail or release, retrying faults until it is sent — or,
     * once the worker is stopping, until the grace ends (the job's lease
     * then lapses and another worker runs it); a refusal is reported once
     * and not sent again. A 412 means the job is no longer this claim's: a
     * lost lease. Returns whether it was sent.
     */
    private suspend fun settle(step: WorkerStep, id: Any?, row: Row?, what: () -> String, send: suspend () -> Long): Boolean {
        var faults = 0L
        while (true) {
            try {
                send()
                return true
            } catch (e: FenecException) {
                val graceOver = stoppedAt?.let { it.elapsedNow() >= options.grace } == true
                if (e.code == ErrorCode.UNMET || !isFault(e) || graceOver) {
                    refused(step, id, row, what, e)
                    return false
                }
                report(WorkerException(step, id, "${what()} failed, retrying: ${e.message}", e, row))
                delay(defaultBackoff(++faults))
            }
        }
    }

    /** Reports a send that is not tried again: a 412 as a lost lease, else as a failure of [step]. */
    private fun refused(step: WorkerStep, id: Any?, row: Row?, what: () -> String, e: FenecException) {
        if (e.code == ErrorCode.UNMET) {
            report(WorkerException(WorkerStep.LOST_LEASE, id, "${what()}: refused (412), the job is no longer this worker's", e, row))
        } else {
            report(WorkerException(step, id, "${what()} failed: ${e.message}", e, row))
        }
    }

    // The statements of docs/workers.md, rendered by the builder: each is a
    // `worker …` case of conformance/builder-golden.json (WorkerStatementsTest).

    internal fun claimStatement(limit: Long, owner: String): Statement = claims.limit(limit)
        .renderUpdate(mapOf("owner" to owner, "run_at" to expr("now() + ?", leaseMs), "attempts" to inc(1)), returning = listOf("*"))

    internal fun extendStatement(ids: List<Any?>, owner: String): Statement =
        jobs.where("id", "in", ids).where("owner", owner).renderUpdate(mapOf("run_at" to expr("now() + ?", leaseMs)), returning = listOf("id"))

    internal fun ackStatement(ids: List<Any?>, owner: String): Statement =
        jobs.where("id", "in", ids).where("owner", owner).renderDelete(returning = listOf("id"))

    internal fun failStatement(id: Any?, owner: String, error: String, delayMs: Long): Statement =
        mine(id, owner).renderUpdate(mapOf("owner" to null, "error" to error, "run_at" to expr("now() + ?", delayMs)), require = 1)

    internal fun deadLetterStatement(id: Any?, owner: String, error: String): Statement =
        mine(id, owner).renderUpdate(mapOf("owner" to null, "error" to error, "run_at" to null), require = 1)

    internal fun releaseStatement(id: Any?, owner: String): Statement =
        mine(id, owner).renderUpdate(RELEASE, require = 1)

    internal fun releaseGivenUpStatement(owner: String): Statement = jobs.where("owner", owner).renderUpdate(RELEASE)

    private fun mine(id: Any?, owner: String): Query = jobs.where("id", id).where("owner", owner)

    /** Sends a statement other than a claim; returns how many rows it wrote. */
    private suspend fun send(s: Statement): Long = jobs.client.query(s).affected

    private suspend fun release(row: Row, id: Any, owner: String) {
        if (gaveUp) return
        settle(WorkerStep.RELEASE, id, row, { "release of job $id" }) { send(releaseStatement(id, owner)) }
    }
}

/** A release's patch: back to ready now, the run that did not happen not counted. */
private val RELEASE: Map<String, Any?> = mapOf("owner" to null, "run_at" to expr("now()"), "attempts" to inc(-1))

/** Network errors, timeouts and 5xx are faults: worth another try. */
private fun isFault(e: FenecException): Boolean =
    e.code == ErrorCode.NETWORK || e.code == ErrorCode.TIMEOUT || e.status >= 500

/**
 * The text a failed job keeps in `error` (docs/workers.md): the error's
 * message alone, or the name of its type when the message is empty.
 */
internal fun errorText(e: Throwable): String =
    e.message?.takeIf { it.isNotBlank() } ?: e.javaClass.simpleName.ifEmpty { e.javaClass.name }
