package com.fenecdb

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.boolean
import kotlinx.serialization.json.int
import kotlinx.serialization.json.jsonArray
import kotlinx.serialization.json.jsonObject
import kotlinx.serialization.json.jsonPrimitive
import kotlinx.serialization.json.long
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.TestFactory
import org.junit.jupiter.api.assertThrows
import java.math.BigDecimal
import java.time.Instant

/**
 * conformance/builder-golden.json (format 2, docs/sdks.md): every case's
 * steps, run on this builder, render byte-identical text and the same
 * parameters; every refused case throws, its message holding the word.
 */
class GoldenTest {
    private val db = Fenec.connect("http://golden.invalid")

    @TestFactory
    fun golden(): List<DynamicTest> {
        val file = REPO.resolve("conformance/builder-golden.json").toFile()
        val root = Json.parseToJsonElement(file.readText()).jsonObject
        assertEquals(2, root["format"]?.jsonPrimitive?.int, "conformance/builder-golden.json is not format 2")
        val cases = root.getValue("cases").jsonArray.map { it.jsonObject }
        assertTrue(cases.size > 100, "only ${cases.size} golden cases")
        return cases.map { c ->
            DynamicTest.dynamicTest(c.getValue("name").jsonPrimitive.content) {
                val refuse = c["refuse"]?.jsonPrimitive?.content
                if (refuse != null) {
                    val e = assertThrows<IllegalArgumentException>("should be refused") { render(c) }
                    assertTrue(e.message!!.lowercase().contains(refuse.lowercase()), "\"${e.message}\" lacks \"$refuse\"")
                } else {
                    val s = render(c)
                    assertEquals(c.getValue("query").jsonPrimitive.content, s.query)
                    val want = c.getValue("params").jsonArray
                    assertTrue(sameJson(want, JsonArray(s.params)), "params ${JsonArray(s.params)}, want $want")
                }
            }
        }
    }

    /** The step interpreter: a builder from `from`, each step, then the end rendered. */
    private fun render(c: JsonObject): Statement {
        var q = db.from(c.getValue("from").jsonPrimitive.content)
        for (step in c.getValue("steps").jsonArray.map { it.jsonObject }) {
            q = when (step.getValue("op").jsonPrimitive.content) {
                "where" -> when {
                    step["raw"] != null -> q.where(raw(step.getValue("raw")))
                    step["cmp"] != null -> q.where(str(step, "field"), str(step, "cmp"), value(step.getValue("value")))
                    else -> q.where(str(step, "field"), value(step.getValue("value")))
                }
                "order" -> step["dir"]?.let { q.order(str(step, "field"), it.jsonPrimitive.content) } ?: q.order(str(step, "field"))
                "limit" -> q.limit(step.getValue("n").jsonPrimitive.long)
                "offset" -> q.offset(step.getValue("n").jsonPrimitive.long)
                "select" -> q.select(*step.getValue("fields").jsonArray.map { it.jsonPrimitive.content }.toTypedArray())
                "near" -> {
                    val (lon, lat) = (value(step.getValue("point")) as List<*>).map { it as Double }
                    q.near(str(step, "field"), lon, lat, step["exact"]?.jsonPrimitive?.boolean ?: false)
                }
                "ifAbsent" -> q.ifAbsent()
                "upsert" -> q.upsert(doc(step.getValue("set")))
                else -> error("unknown step $step")
            }
        }
        val end = c.getValue("end").jsonObject
        val require = end["require"]?.jsonPrimitive?.long
        val returning = end["returning"]?.jsonArray?.map { it.jsonPrimitive.content }
        return when (end.getValue("op").jsonPrimitive.content) {
            "rows" -> q.renderRows()
            "first" -> q.renderFirst()
            "count" -> q.renderCount()
            "insert" -> end["doc"]?.let { q.renderInsert(doc(it)) }
                ?: q.renderInsert(end.getValue("docs").jsonArray.map { doc(it) })
            "update" -> q.renderUpdate(doc(end.getValue("patch")), require, returning)
            "delete" -> q.renderDelete(require, returning)
            else -> error("unknown end $end")
        }
    }

    private fun str(o: JsonObject, key: String) = o.getValue(key).jsonPrimitive.content

    private fun doc(e: JsonElement): Map<String, Any?> = e.jsonObject.mapValues { (_, v) -> value(v) }

    private fun raw(e: JsonElement): Raw {
        val o = e.jsonObject
        return raw(str(o, "text"), *o.getValue("args").jsonArray.map { value(it) }.toTypedArray())
    }

    /** A typed value V: exactly one key. */
    private fun value(e: JsonElement): Any? {
        val (kind, v) = e.jsonObject.entries.single()
        return when (kind) {
            "null" -> null
            "bool" -> v.jsonPrimitive.content.toBooleanStrict()
            "int" -> v.jsonPrimitive.content.toLong()
            "float" -> v.jsonPrimitive.content.toDouble()
            "string" -> v.jsonPrimitive.content
            "timestamp" -> Instant.parse(v.jsonPrimitive.content)
            "json" -> v
            "list" -> v.jsonArray.map { value(it) }
            "expr" -> v.jsonObject.let { o -> expr(str(o, "text"), *o.getValue("args").jsonArray.map { value(it) }.toTypedArray()) }
            "inc" -> inc(value(v) as Number?)
            else -> error("unknown value kind $kind")
        }
    }
}

/** JSON equality with numbers compared by value (1 and 1.0 are one number). */
fun sameJson(a: JsonElement, b: JsonElement): Boolean = when {
    a is JsonNull || b is JsonNull -> a is JsonNull && b is JsonNull
    a is JsonPrimitive && b is JsonPrimitive -> when {
        a.isString || b.isString -> a.isString == b.isString && a.content == b.content
        a.content == "true" || a.content == "false" || b.content == "true" || b.content == "false" -> a.content == b.content
        else -> BigDecimal(a.content).compareTo(BigDecimal(b.content)) == 0
    }
    a is JsonArray && b is JsonArray -> a.size == b.size && a.indices.all { sameJson(a[it], b[it]) }
    a is JsonObject && b is JsonObject -> a.keys == b.keys && a.keys.all { sameJson(a.getValue(it), b.getValue(it)) }
    else -> false
}
