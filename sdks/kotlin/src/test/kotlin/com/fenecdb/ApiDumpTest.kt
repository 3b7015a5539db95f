package com.fenecdb

import org.jetbrains.kotlin.abi.tools.AbiFilters
import org.jetbrains.kotlin.abi.tools.AbiTools
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Assertions.fail
import org.junit.jupiter.api.Test
import java.io.File

/**
 * The public API, as the JVM sees it, against the committed dump
 * api/fenecdb.api (README.md, "Compatibility"). The dump is made from the
 * compiled classes by the Kotlin team's ABI tool: every public and
 * protected class, member and JVM signature, with Kotlin's `internal`
 * declarations left out (they are public in bytecode, but not API).
 *
 * With FENEC_API_UPDATE=1 in the environment (`make generate`) the test
 * rewrites the dump instead of checking it.
 */
class ApiDumpTest {
    private val base = File(System.getProperty("basedir") ?: ".")
    private val committed = File(base, "api/fenecdb.api")
    private val tools = AbiTools.getInstance()

    /** Returns the dump of the classes the build compiled (target/classes). */
    private fun currentDump(): String {
        val classes = File(base, "target/classes").walk().filter { it.isFile && it.name.endsWith(".class") }.toList()
        assertTrue(classes.isNotEmpty(), "no compiled classes under ${File(base, "target/classes")}")
        return buildString { tools.printJvmDump(this, classes, AbiFilters.EMPTY) }
    }

    /** Returns null when [expected] and [actual] hold the same API, else a diff naming each changed line. */
    private fun difference(expected: File, actual: String): String? {
        val out = File(base, "target/api/fenecdb.api")
        out.parentFile.mkdirs()
        out.writeText(actual)
        return tools.filesDiff(expected, out)
    }

    @Test
    fun `the compiled public API is the committed dump`() {
        val dump = currentDump()
        if (System.getenv("FENEC_API_UPDATE") == "1") {
            committed.parentFile.mkdirs()
            committed.writeText(dump)
            return
        }
        if (!committed.isFile) fail<Unit>("${committed.path} is missing: run `make generate` (or FENEC_API_UPDATE=1 mvn test -Dtest=ApiDumpTest)")
        val diff = difference(committed, dump)
        if (diff != null) {
            fail<Unit>(
                "the public API differs from ${committed.path} (- the dump, + the compiled classes):\n$diff\n" +
                    "If the change is meant, run `make generate` and commit the dump; a removed or changed line breaks callers " +
                    "compiled against the old API (README.md, \"Compatibility\").",
            )
        }
    }

    @Test
    fun `a changed signature is named by the check`() {
        val dump = currentDump()
        // Worker.close(): changed to take an argument, as a careless edit would.
        val line = dump.lines().first { it.trim() == "public fun close ()V" }
        val altered = File(base, "target/api/altered.api")
        altered.parentFile.mkdirs()
        altered.writeText(dump.replaceFirst(line, line.replace("()V", "(J)V")))
        val diff = difference(altered, dump)
        assertNotNull(diff, "an altered signature went unnoticed")
        assertTrue(diff!!.lines().any { it.startsWith("-") && it.contains("close (J)V") }, "the diff names the dumped line:\n$diff")
        assertTrue(diff.lines().any { it.startsWith("+") && it.contains("close ()V") }, "the diff names the compiled line:\n$diff")
        // A removed class is named too.
        val removed = dump.replaceFirst("public final class com/fenecdb/Client ", "public final class com/fenecdb/Gone ")
        assertTrue(removed != dump, "the dump holds com/fenecdb/Client")
        altered.writeText(removed)
        assertTrue(difference(altered, dump)!!.contains("com/fenecdb/Client"), "a renamed class is named")
        // The same dump is no difference.
        altered.writeText(dump)
        assertNull(difference(altered, dump))
        assertEquals(dump, currentDump(), "the dump is stable from one run to the next")
    }
}
