package com.fenecdb

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Test

/** ifAbsent writes once; upsert and inc count from nothing; near answers nearest first (docs/redis.md), on a real server. */
class InsteadOfRedisTest {
    @Test
    fun `if absent, upsert, inc and near`() = runBlocking<Unit> {
        FenecServer().use { s ->
            val db = s.connect()
            db.query("create collection counters (key text @unique, n int)")
            db.query("create collection places (name text, at geo @geo)")
            val counters = db.from("counters")
            fun n(key: String) = counters.where("key", key).firstBlocking()!!["n"]
            assertEquals(1L, counters.ifAbsent().insert(mapOf("key" to "a", "n" to 5)))
            assertEquals(0L, counters.ifAbsent().insert(mapOf("key" to "a", "n" to 9)), "taken: nothing written")
            assertEquals(5L, n("a"))
            val hit = counters.upsert(mapOf("n" to inc(1)))
            repeat(3) { assertEquals(1L, hit.insert(mapOf("key" to "b"))) }
            assertEquals(2L, n("b"), "written with n null, then coalesce(n, 0) + 1 twice")
            counters.upsert(mapOf("n" to expr("n + new.n"))).insert(mapOf("key" to "a", "n" to 10))
            assertEquals(15L, n("a"))

            val places = db.from("places")
            places.insert(
                listOf(
                    mapOf("name" to "far", "at" to listOf(10, 10)),
                    mapOf("name" to "near", "at" to listOf(1, 1)),
                    mapOf("name" to "mid", "at" to listOf(5, 5)),
                    mapOf("name" to "none"),
                ),
            )
            assertEquals(listOf("near", "mid", "far"), places.near("at", 0.0, 0.0).select("name").rows().map { it["name"] })
            assertEquals(listOf("far", "mid"), places.near("at", 9.0, 9.0, exact = true).limit(2).select("name").rows().map { it["name"] })
        }
    }
}
