// make worker-bench's Kotlin worker: Worker on the collection jobs with a
// handler that does nothing, at the concurrency given. It prints "ready" as
// it starts the worker and cancels it (a graceful stop) when its stdin is
// closed.
//
// Before "ready" it warms the JVM, as a worker that has run for a while is
// warm (its classes loaded, its hot code compiled): a worker of the same
// concurrency runs rounds of 10 000 empty jobs of a collection of its own
// (dropped afterwards) until a round's JIT compiling takes under 2 % of its
// time, or for at most a minute. FENEC_BENCH_WARM=0 skips it. The harness says so in
// the results' header.
//
//   java -cp … MainKt URL CONCURRENCY
import com.fenecdb.*
import kotlinx.coroutines.*
import kotlin.system.exitProcess

fun main(args: Array<String>) {
    runBlocking {
        val db = Fenec.connect(args[0])
        val concurrency = args[1].toInt()
        warm(db, concurrency, System.getenv("FENEC_BENCH_WARM")?.toInt() ?: 10_000)
        val worker = Worker(db.from("jobs"), WorkerOptions(concurrency = concurrency)) { _ -> }
        println("ready")
        val running = launch(Dispatchers.Default) { worker.run() }
        withContext(Dispatchers.IO) { System.`in`.readBytes() }
        running.cancelAndJoin()
    }
    exitProcess(0)
}

/** Rounds of [jobs] empty jobs of the collection `warmup` through a worker, until the JIT has settled; then it is dropped. */
suspend fun warm(db: Client, concurrency: Int, jobs: Int) = coroutineScope {
    if (jobs <= 0) return@coroutineScope
    db.query("create collection warmup (payload json, run_at timestamp @sorted, owner text, attempts int, error text)")
    val queue = db.from("warmup")
    val jit = java.lang.management.ManagementFactory.getCompilationMXBean()
    val since = System.nanoTime()
    var round = 0
    while (System.nanoTime() - since < 60_000_000_000L) {
        round++
        for (start in 0 until jobs step 1000) {
            queue.insert((start until minOf(jobs, start + 1000)).map { i -> mapOf("payload" to mapOf("to" to "user$i@example.com"), "run_at" to expr("now()"), "attempts" to 0) })
        }
        val compiled = jit.totalCompilationTime
        val started = System.nanoTime()
        // run(), not runUntilEmpty(): the measured worker's held claims.
        val worker = Worker(queue, WorkerOptions(concurrency = concurrency)) { _ -> }
        val running = launch(Dispatchers.Default) { worker.run() }
        withTimeout(120_000) { while (queue.count() > 0) delay(50) }
        worker.stop()
        running.join()
        val tookMs = (System.nanoTime() - started) / 1_000_000
        val jitMs = jit.totalCompilationTime - compiled
        System.err.println("warm-up round $round: $jobs jobs in $tookMs ms, $jitMs ms compiling")
        if (jitMs * 50 < tookMs) break
    }
    db.query("drop collection warmup")
}
