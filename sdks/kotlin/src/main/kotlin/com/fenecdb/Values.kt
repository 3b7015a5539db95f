/*
 * The pieces a statement is rendered from: identifiers (checked — this is
 * the injection boundary), parameters (numbered `$1…$n` left to right, as
 * JSON), and the helpers `raw`, `expr` and `inc`. The rules are
 * docs/sdks.md's; every SDK renders the same text, held to
 * conformance/builder-golden.json.
 */
@file:JvmName("Values")

package com.fenecdb

import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import java.math.BigDecimal
import java.math.BigInteger
import java.time.Instant
import java.time.ZoneOffset
import java.time.format.DateTimeFormatter
import java.time.temporal.ChronoUnit

private val IDENTIFIER = Regex("[A-Za-z_][A-Za-z0-9_]*")
private val PATH = Regex("[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*")

/** Timestamps go out as ISO-8601 UTC with milliseconds: `2026-05-03T09:20:20.000Z`. */
private val ISO_MILLIS: DateTimeFormatter =
    DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC)

internal fun collectionName(name: String): String {
    require(IDENTIFIER.matches(name)) { "collection name ${quote(name)} is not an identifier" }
    return name
}

/** A field or a dotted path into one (`payload.to`): for where, order, select, returning. */
internal fun fieldPath(name: String): String {
    require(PATH.matches(name)) { "field ${quote(name)} is not an identifier or a dotted path" }
    return name
}

/** A document key or a patch key: a plain identifier, never a path. */
internal fun plainKey(what: String, name: String): String {
    require(!PATH.matches(name) || IDENTIFIER.matches(name)) {
        "$what: field ${quote(name)} is a dotted path; a document's or a patch's key must be a plain identifier"
    }
    require(IDENTIFIER.matches(name)) { "$what: field ${quote(name)} is not a plain identifier" }
    return name
}

internal fun nonNegative(what: String, n: Long): Long {
    require(n >= 0) { "$what must be a non-negative integer, not $n" }
    return n
}

internal fun quote(s: String): String = JsonPrimitive(s).toString()

/** An instant as the API reads it: ISO-8601 UTC, milliseconds. */
internal fun isoMillis(t: Instant): String = ISO_MILLIS.format(t.truncatedTo(ChronoUnit.MILLIS))

/**
 * A value as a `$n` parameter: null, strings, booleans, whole numbers
 * (exact: Long, Int, BigInteger), finite floating numbers, [Instant]
 * (ISO-8601 UTC with milliseconds), a [JsonElement], a Map with String keys
 * or a List/Array of these. Anything else is refused, as is a non-finite
 * number (the word `finite`); `where` names the call.
 */
public fun toJson(where: String, v: Any?): JsonElement = when (v) {
    null -> JsonNull
    is JsonElement -> v
    is String -> JsonPrimitive(v)
    is Boolean -> JsonPrimitive(v)
    is Long, is Int, is Short, is Byte, is BigInteger -> JsonPrimitive(v as Number)
    is Double -> finite(where, v)
    is Float -> finite(where, v.toDouble())
    is BigDecimal -> JsonPrimitive(v)
    is Instant -> JsonPrimitive(isoMillis(v))
    is Map<*, *> -> JsonObject(
        v.entries.associate { (k, x) ->
            require(k is String) { "$where: a JSON object's keys are strings, not ${k?.javaClass?.simpleName}" }
            k to toJson(where, x)
        },
    )
    is Iterable<*> -> JsonArray(v.map { toJson(where, it) })
    is Array<*> -> JsonArray(v.map { toJson(where, it) })
    is Raw -> throw IllegalArgumentException("$where: raw(…) is a condition, not a value (use expr)")
    is Expr, is Inc -> throw IllegalArgumentException("$where: ${v.javaClass.simpleName.lowercase()}(…) is not a JSON value here")
    else -> throw IllegalArgumentException("$where: a ${v.javaClass.name} has no JSON form")
}

private fun finite(where: String, d: Double): JsonPrimitive {
    require(d.isFinite()) { "$where: $d is not a finite number" }
    return JsonPrimitive(d)
}

/** The parameters of one statement, numbered in the order the text names them. */
internal class Params {
    val values: MutableList<JsonElement> = ArrayList()

    /** Adds a value and answers its mark, `$n`. */
    fun add(v: JsonElement): String {
        values.add(v)
        return "$" + values.size
    }
}

/**
 * FenecQL text with `?` marks (a `?` inside a '…' or "…" literal is not
 * one), split at the marks. A `$n` of its own is refused: the builder
 * numbers them.
 */
public sealed class Fragment(helper: String, text: String, args: List<Any?>) {
    private val parts: List<String> = splitMarks(helper, text)
    private val args: List<JsonElement>

    init {
        val marks = parts.size - 1
        require(marks == args.size) {
            "$helper(${quote(text)}): $marks ? marks, but ${args.size} arguments"
        }
        this.args = args.mapIndexed { i, a -> toJson("$helper argument ${i + 1}", a) }
    }

    internal fun render(p: Params): String {
        val b = StringBuilder(parts[0])
        for (i in args.indices) b.append(p.add(args[i])).append(parts[i + 1])
        return b.toString()
    }
}

private fun splitMarks(helper: String, text: String): List<String> {
    val parts = ArrayList<String>()
    var start = 0
    var quote = 0.toChar()
    var i = 0
    while (i < text.length) {
        val c = text[i]
        if (quote != 0.toChar()) {
            if (c == '\\') i++ else if (c == quote) quote = 0.toChar()
        } else if (c == '\'' || c == '"') {
            quote = c
        } else if (c == '?') {
            parts.add(text.substring(start, i))
            start = i + 1
        } else if (c == '$' && i + 1 < text.length && text[i + 1].isDigit()) {
            throw IllegalArgumentException("$helper: write ? for a value, not ${text.substring(i, i + 2)}…")
        }
        i++
    }
    parts.add(text.substring(start))
    return parts
}

/** A condition written in FenecQL; made by [raw]. */
public class Raw internal constructor(text: String, args: List<Any?>) : Fragment("raw", text, args)

/** A value written in FenecQL; made by [expr]. */
public class Expr internal constructor(text: String, args: List<Any?>) : Fragment("expr", text, args)

/** A patch value that adds to the field's own value; made by [inc]. */
public class Inc internal constructor(internal val by: JsonElement)

/**
 * A condition in FenecQL for `where`: each `?` becomes the next parameter.
 *
 * `jobs.where(raw("run_at <= now() and attempts < ?", 5))`
 */
public fun raw(text: String, vararg args: Any?): Raw = Raw(text, args.toList())

/**
 * A value in FenecQL for a patch, a document or a comparison: each `?`
 * becomes the next parameter.
 *
 * `jobs.update(mapOf("run_at" to expr("now() + ?", 30000)))`
 */
public fun expr(text: String, vararg args: Any?): Expr = Expr(text, args.toList())

/**
 * A patch value that adds [n] to the field: `attempts: inc(1)` renders
 * `attempts: coalesce(attempts, 0) + $1`. [n] is a whole number (exact) or a finite
 * floating one; negative subtracts.
 */
@JvmOverloads
public fun inc(n: Number? = 1): Inc {
    require(n != null) { "inc needs a finite number, not null" }
    return Inc(toJson("inc", n))
}
