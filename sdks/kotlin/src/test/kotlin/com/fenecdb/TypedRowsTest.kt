package com.fenecdb

import kotlinx.coroutines.runBlocking
import kotlinx.serialization.Serializable
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

@Serializable
data class Job(val id: Long, val attempts: Int, val owner: String? = null, val payload: JsonElement? = null, val run_at: String? = null)

@Serializable
data class Strict(val id: Long, val attempts: String)

/** rowsAs<T>(): a query's rows as a @Serializable class, against a real server. */
class TypedRowsTest {
    @Test
    fun `rows decode into a serializable class - the largest id, instants as ISO text, extra fields ignored`() = runBlocking<Unit> {
        FenecServer().use { s ->
            val db = s.connect()
            db.query(JOBS_SCHEMA)
            val jobs = db.from("jobs")
            jobs.insert(listOf(
                mapOf("id" to 9_007_199_254_740_991L, "payload" to mapOf("to" to "ada@example.com"), "attempts" to 2, "owner" to "w1", "run_at" to expr("now()"), "error" to "x"),
                mapOf("id" to 2L, "attempts" to 0),
            ))
            val rows = jobs.order("id").rowsAs<Job>()
            assertEquals(listOf(2L, 9_007_199_254_740_991L), rows.map { it.id }, "ids as whole numbers")
            val ada = rows[1]
            assertEquals(2, ada.attempts)
            assertEquals("w1", ada.owner)
            assertEquals("ada@example.com", ada.payload!!.jsonObject.getValue("to").jsonPrimitive.content)
            assertTrue(ada.run_at!!.endsWith("Z"), ada.run_at)
            assertNull(rows[0].owner)
            assertEquals(ada, jobs.where("owner", "w1").firstAs<Job>())
            assertNull(jobs.where("owner", "nobody").firstAs<Job>())
            val e = assertThrows<IllegalArgumentException> { runBlocking { jobs.rowsAs<Strict>() } }
            assertTrue(e.message!!.contains("Strict"), e.message)
        }
    }
}
