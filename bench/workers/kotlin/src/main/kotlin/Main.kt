// make worker-bench's Kotlin worker: Worker on the collection jobs with a
// handler that does nothing, at the concurrency given. It prints "ready" as
// it starts the worker and cancels it (a graceful stop) when its stdin is
// closed.
//
//   java -cp … MainKt URL CONCURRENCY
import com.fenecdb.*
import kotlinx.coroutines.*
import kotlin.system.exitProcess

fun main(args: Array<String>) {
    runBlocking {
        val db = Fenec.connect(args[0])
        val worker = Worker(db.from("jobs"), WorkerOptions(concurrency = args[1].toInt())) { _ -> }
        println("ready")
        val running = launch(Dispatchers.Default) { worker.run() }
        withContext(Dispatchers.IO) { System.`in`.readBytes() }
        running.cancelAndJoin()
    }
    exitProcess(0)
}
