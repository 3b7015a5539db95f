package com.fenecdb

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.lang.reflect.Method
import kotlin.time.Duration.Companion.milliseconds

/**
 * The public API holds the names of docs/sdks.md's "One word per idea"
 * table (read by reflection, as a Java or Kotlin caller sees them), and the
 * old names stay as deprecated aliases that still work.
 */
class ApiNamesTest {
    private fun method(c: Class<*>, name: String, vararg params: Class<*>): Method =
        c.getMethod(name, *params).also { assertTrue(java.lang.reflect.Modifier.isPublic(it.modifiers), "$name is public") }

    private fun deprecated(m: Method): Boolean = m.getAnnotation(Deprecated::class.java) != null

    /** A property's Kotlin annotations sit on a synthetic `get…$annotations` method, not on its getter. */
    private fun deprecatedProperty(c: Class<*>, getter: String): Boolean =
        c.declaredMethods.any { it.name == "$getter\$annotations" && it.getAnnotation(Deprecated::class.java) != null }

    @Test
    fun `the table's names are the public API, the old ones deprecated`() {
        val q = Query::class.java
        val map = Map::class.java
        val list = List::class.java
        val boxedLong = java.lang.Long::class.java
        val renamed = listOf(
            Triple("renderRows", "rowsStatement", arrayOf<Class<*>>()),
            Triple("renderFirst", "firstStatement", arrayOf()),
            Triple("renderCount", "countStatement", arrayOf()),
            Triple("renderInsert", "insertStatement", arrayOf(map)),
            Triple("renderInsert", "insertStatement", arrayOf(list)),
            Triple("renderUpdate", "updateStatement", arrayOf(map, boxedLong, list)),
            Triple("renderDelete", "deleteStatement", arrayOf(boxedLong, list)),
        )
        for ((new, old, params) in renamed) {
            assertTrue(!deprecated(method(q, new, *params)), "$new is not deprecated")
            assertTrue(deprecated(method(q, old, *params)), "$old is deprecated")
        }
        // raw, expr and inc: Raw, Expr and Inc.
        for ((f, type) in listOf("raw" to Raw::class.java, "expr" to Expr::class.java, "inc" to Inc::class.java)) {
            assertTrue(Class.forName("com.fenecdb.Values").methods.any { it.name == f && it.returnType == type }, "$f answers $type")
        }
        // The worker: ownerPrefix (owner deprecated), onError(WorkerException), runUntilEmpty.
        val o = WorkerOptions::class.java
        method(o, "getOwnerPrefix")
        method(o, "getOwner")
        assertTrue(!deprecatedProperty(o, "getOwnerPrefix"), "ownerPrefix is not deprecated")
        assertTrue(deprecatedProperty(o, "getOwner"), "owner is deprecated")
        assertTrue(deprecated(method(o, "withOwner", String::class.java)))
        assertEquals(WorkerErrorHandler::class.java, method(o, "getOnError").returnType)
        assertNotNull(method(WorkerErrorHandler::class.java, "onError", WorkerException::class.java))
        assertTrue(Worker::class.java.methods.any { it.name == "runUntilEmpty" }, "Worker.runUntilEmpty")
        assertEquals(100.milliseconds, WorkerOptions.MIN_LEASE)
        assertEquals(
            listOf("claim", "extend", "ack", "fail", "release", "handler", "dead_letter", "lost_lease"),
            WorkerStep.entries.map { it.wire },
        )
    }

    @Test
    @Suppress("DEPRECATION")
    fun `the deprecated aliases still render what the new names render`() {
        val jobs = Fenec.connect("http://names.invalid").from("jobs").where("owner", "w1")
        val patch = mapOf("owner" to null)
        val pairs = listOf(
            jobs.rowsStatement() to jobs.renderRows(),
            jobs.firstStatement() to jobs.renderFirst(),
            jobs.countStatement() to jobs.renderCount(),
            jobs.updateStatement(patch, 1) to jobs.renderUpdate(patch, 1),
            jobs.deleteStatement(returning = listOf("id")) to jobs.renderDelete(returning = listOf("id")),
        )
        for ((old, new) in pairs) assertEquals(new.toString(), old.toString())
        val docs = db().from("jobs")
        assertEquals(docs.renderInsert(mapOf("a" to 1)).toString(), docs.insertStatement(mapOf("a" to 1)).toString())
        assertEquals("w-legacy", WorkerOptions(owner = "w-legacy").prefix)
        assertEquals("w-legacy", WorkerOptions().withOwner("w-legacy").prefix)
        assertNull(WorkerOptions(ownerPrefix = "p").owner)
    }

    private fun db() = Fenec.connect("http://names.invalid")
}
