package com.fenecdb

import kotlinx.coroutines.runBlocking
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.int
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.long
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.TestFactory
import org.junit.jupiter.api.fail
import kotlin.time.Duration.Companion.milliseconds

/**
 * Every page of conformance/cases (format in conformance/README.md),
 * replayed through Fenec.query on a fresh server with the manual clock.
 */
class ConformanceTest {
    @TestFactory
    fun pages(): List<DynamicTest> {
        val files = REPO.resolve("conformance/cases").toFile().listFiles { f -> f.name.endsWith(".json") }!!.sorted()
        assertTrue(files.size >= 2, "case files: $files")
        return files.map { file ->
            DynamicTest.dynamicTest(file.name) {
                val page = Json.parseToJsonElement(file.readText()).jsonObject
                val source = page.getValue("source").jsonPrimitive.content
                val steps = page.getValue("steps").jsonArray.map { it.jsonObject }
                assertTrue(steps.isNotEmpty())
                FenecServer().use { server ->
                    val db = server.connect()
                    runBlocking {
                        for (step in steps) {
                            val line = step.getValue("line").jsonPrimitive.int
                            step["advance_ms"]?.let { db.advanceClock(it.jsonPrimitive.long.milliseconds) }
                            val query = step["query"]?.jsonPrimitive?.content ?: continue
                            val params = step["params"]?.jsonArray ?: emptyList<JsonElement>()
                            val expect = step["expect"]?.jsonObject
                            val where = "$source:$line: $query"
                            val result = try {
                                db.query(query, params)
                            } catch (e: FenecException) {
                                val refused = expect?.get("refused")?.jsonPrimitive?.int
                                if (refused != e.status) fail("$where: refused ${e.status} ${e.code}: ${e.message}")
                                continue
                            }
                            when {
                                expect == null -> {}
                                expect["refused"] != null -> fail("$where: answered $result, want a refusal")
                                expect["no_row"] != null -> assertTrue(result.rows?.isEmpty() == true, "$where: answered $result, want no row")
                                else -> {
                                    val want = expect.getValue("value")
                                    val rows = result.rows
                                    val got: Any? = when {
                                        rows == null -> result.affected
                                        rows.isEmpty() -> fail("$where: no row, want $want")
                                        else -> rows[0].values.first()
                                    }
                                    assertTrue(sameJson(want, toJson("answer", got)), "$where: answered $got, want $want")
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

