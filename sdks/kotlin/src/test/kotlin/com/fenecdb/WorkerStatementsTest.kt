package com.fenecdb

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import kotlin.time.Duration.Companion.seconds

/** Every statement the worker sends is its `worker …` case of conformance/builder-golden.json, byte for byte. */
class WorkerStatementsTest {
    @Test
    fun `the worker's statements are the golden file's`() {
        val cases = Json.parseToJsonElement(REPO.resolve("conformance/builder-golden.json").toFile().readText())
            .jsonObject.getValue("cases").jsonArray.map { it.jsonObject }
            .associateBy { it.getValue("name").jsonPrimitive.content }
        val db = Fenec.connect("http://golden.invalid")
        val w = Worker(db.from("jobs"), WorkerOptions(lease = 30.seconds)) {}
        val queue = Worker(db.from("jobs"), WorkerOptions(lease = 30.seconds, where = raw("queue = ? and priority >= ?", "mail", 2))) {}
        val owner = "w-5f3a9c:7"
        val mine = mapOf(
            "worker claim" to w.claimStatement(10, owner),
            "worker claim with a where of its own" to queue.claimStatement(3, owner),
            "worker extend" to w.extendStatement(listOf(42L, 43L), owner),
            "worker ack" to w.ackStatement(listOf(42L, 43L), owner),
            "worker fail" to w.failStatement(42L, owner, "smtp timeout", 4000),
            "worker dead letter" to w.deadLetterStatement(42L, owner, "smtp timeout"),
            "worker release" to w.releaseStatement(42L, owner),
            "worker release a given-up claim" to w.releaseGivenUpStatement(owner),
        )
        val golden = cases.keys.filter { it.startsWith("worker ") }.toSet()
        assertEquals(golden, mine.keys, "the golden file's worker cases")
        for ((name, s) in mine) {
            val c = cases.getValue(name)
            assertEquals(c.getValue("query").jsonPrimitive.content, s.query, name)
            assertTrue(sameJson(c.getValue("params"), JsonArray(s.params)), "$name: params ${JsonArray(s.params)}, want ${c["params"]}")
        }
        assertTrue(w.claimStatement(10, owner).claim, "a claim goes with the wait")
        for ((name, s) in mine) {
            assertEquals(name.startsWith("worker claim") || name == "worker extend", s.claim, "$name: a claim (a set with returning)")
        }
    }

    @Test
    fun `a claim is a set with the word returning, in any case`() {
        for (q in listOf("set jobs {a: 1} returning *", "  SET jobs {a: 1} where x = 1 Returning id", "set\tjobs {a: 1}\nreturning id")) {
            assertTrue(isClaim(q), q)
        }
        for (q in listOf("get jobs", "del jobs returning id", "settle jobs returning id", "set jobs {returning_at: 1}", "set jobs {a: 1} where x_returning = 1", "set jobs {a: 1}", "")) {
            assertEquals(false, isClaim(q), q)
        }
    }
}
