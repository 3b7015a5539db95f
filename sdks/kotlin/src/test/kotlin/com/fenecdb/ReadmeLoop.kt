package com.fenecdb

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.isActive
import java.util.UUID
import kotlin.time.Duration.Companion.seconds

// The README's worker loop ("The loop by hand"), verbatim: SeedLoopTest
// runs it, and checks the README still holds this text.

suspend fun work(db: Client, send: suspend (Row) -> Unit) {
    val jobs = db.from("jobs")
    val me = "w-${UUID.randomUUID()}"
    var n = 0
    while (currentCoroutineContext().isActive) {
        val owner = "$me:${++n}"
        val claimed = jobs.where(raw("run_at <= now()")).order("run_at").limit(10)
            .withWait(30.seconds)
            .updateReturning(mapOf("owner" to owner, "run_at" to expr("now() + ?", 30000), "attempts" to inc(1)))
        for (job in claimed) {
            try {
                send(job)
                jobs.where("id", job["id"]).where("owner", owner).delete(require = 1)
            } catch (e: CancellationException) {
                throw e
            } catch (e: Exception) { // the work failed, or its ack: back off
                val backoff = 1000L shl job.long("attempts")!!.toInt()
                runCatching { // a 412: the lease lapsed, and the job is another's
                    jobs.where("id", job["id"]).where("owner", owner)
                        .update(mapOf("owner" to null, "run_at" to expr("now() + ?", backoff)), require = 1)
                }
            }
        }
    }
}
