package com.fenecdb

import java.io.File
import java.nio.file.Path
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit

/** The repository's root, from sdks/kotlin (where Maven runs the tests). */
val REPO: Path = Path.of("").toAbsolutePath().parent.parent

/**
 * A real `fenec serve --file :memory: --http 127.0.0.1:0` for a test (or
 * on [file] and [http]) —
 * the binary `make build` writes, or FENEC_BIN — on a free port, with the
 * manual clock unless [manualClock] is false. Close stops it.
 */
class FenecServer(
    vararg flags: String,
    manualClock: Boolean = true,
    file: String = ":memory:",
    http: String = "127.0.0.1:0",
) : AutoCloseable {
    private val process: Process
    private val stderr = StringBuffer()
    val url: String

    init {
        val bin = System.getenv("FENEC_BIN")?.takeIf { it.isNotEmpty() } ?: REPO.resolve("bin/fenec").toString()
        check(File(bin).canExecute()) { "no fenec binary at $bin: set FENEC_BIN=/path/to/fenec, or install Go and run make build (make dist writes dist/fenec)" }
        val args = mutableListOf(bin, "serve", "--http", http, "--file", file, "--slow-ms", "0")
        if (manualClock) args += listOf("--clock", "manual")
        args += flags
        process = ProcessBuilder(args).start()
        val lines = LinkedBlockingQueue<String>()
        // Readers end when the process's pipes close (an IOException then is the end).
        Thread { runCatching { process.inputStream.bufferedReader().forEachLine { lines.put(it) } } }.apply { isDaemon = true }.start()
        val errors = Thread { runCatching { process.errorStream.bufferedReader().forEachLine { stderr.append(it).append('\n') } } }
        errors.apply { isDaemon = true }.start()
        var addr: String? = null
        val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20)
        while (addr == null && System.nanoTime() < deadline) {
            val line = lines.poll(100, TimeUnit.MILLISECONDS) ?: if (process.isAlive) continue else break
            addr = Regex("^listening on (\\S+)").find(line)?.groupValues?.get(1)
        }
        if (addr == null) {
            process.destroyForcibly().waitFor()
            errors.join(2000) // the whole of stderr, for the message
            error("fenec did not start: $stderr")
        }
        url = (if ("--tls-cert" in flags) "https://" else "http://") + addr
    }

    /** A client of this server. */
    fun connect(token: String? = null): Client = Fenec.connect(url, token)

    /** Stops the server at once (SIGKILL) and waits for it to be gone. */
    fun kill() {
        process.destroyForcibly().waitFor()
    }

    /** Whether the server runs. */
    val alive: Boolean get() = process.isAlive

    /** The server's stderr so far, for a failure's message. */
    val log: String get() = stderr.toString()

    override fun close() {
        process.destroy()
        if (!process.waitFor(10, TimeUnit.SECONDS)) process.destroyForcibly().waitFor()
    }
}

/** The queue page's collection. */
const val JOBS_SCHEMA = "create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)"
