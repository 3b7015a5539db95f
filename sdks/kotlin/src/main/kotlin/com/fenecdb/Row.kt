package com.fenecdb

import kotlinx.serialization.json.JsonElement
import java.math.BigInteger
import java.time.Instant
import java.time.format.DateTimeParseException

/**
 * One row as answered, its columns in order (`id` first for `*`). Values
 * are decoded by the field's declared type (`GET /collections`): `int` a
 * [Long] (exact), `float` a [Double], `text` a [String], `bool` a
 * [Boolean], `timestamp` an [Instant], `json` and `geo` a [JsonElement];
 * a column no collection declares (`id`, a path, an expression) by its
 * JSON: whole numbers [Long] (or [BigInteger] past 64 bits), others
 * [Double], strings [String], objects and arrays [JsonElement].
 *
 * From Java the getters are `getString`, `getLong`, `getDouble`,
 * `getBool`, `getInstant` and `getJson` (`long` and `double` are Java
 * keywords).
 */
public class Row(private val columns: Map<String, Any?>) : Map<String, Any?> by columns {
    /** The text of [name], or null. */
    @JvmName("getString")
    public fun string(name: String): String? = get(name, "text") { it as? String }

    /** The whole number of [name], exact, or null. */
    @JvmName("getLong")
    public fun long(name: String): Long? = get(name, "whole number") { (it as? Long) ?: (it as? Int)?.toLong() }

    /** The number of [name] as a Double, or null. */
    @JvmName("getDouble")
    public fun double(name: String): Double? = get(name, "number") { (it as? Number)?.toDouble() }

    /** The boolean of [name], or null. */
    @JvmName("getBool")
    public fun bool(name: String): Boolean? = get(name, "bool") { it as? Boolean }

    /**
     * The timestamp of [name], or null. A column no collection declares a
     * timestamp (a path, a raw query's answer) is read from its ISO-8601
     * text here, because the caller asked for an instant.
     */
    @JvmName("getInstant")
    public fun instant(name: String): Instant? = get(name, "timestamp") {
        when (it) {
            is Instant -> it
            is String -> try { Instant.parse(it) } catch (e: DateTimeParseException) { null }
            else -> null
        }
    }

    /** The JSON of [name] (any value, as a tree), or null. */
    @JvmName("getJson")
    public fun json(name: String): JsonElement? = get(name, "json") { toJson("json", it) }

    private fun <T> get(name: String, kind: String, convert: (Any) -> T?): T? {
        require(columns.containsKey(name)) { "the row has no field ${quote(name)} (it has ${columns.keys.joinToString(", ")})" }
        val v = columns[name] ?: return null
        return convert(v) ?: throw IllegalArgumentException("field ${quote(name)} is ${show(v)}, not a $kind")
    }

    override fun toString(): String = columns.toString()
    override fun equals(other: Any?): Boolean = columns == other
    override fun hashCode(): Int = columns.hashCode()
}

private fun show(v: Any): String = when (v) {
    is String -> "the text ${quote(v)}"
    is BigInteger -> "a number past 64 bits ($v)"
    else -> "a ${v.javaClass.simpleName} ($v)"
}

/**
 * One statement's whole answer ([Client.query], [Client.batch]): [rows] for
 * a read or a write with `returning` (null when a write answered its
 * count), [affected] (rows written, or for rows how many were answered),
 * [seq] (`Fenec-Seq`, 0 when none) and [replayed] (`Idempotent-Replayed`:
 * the first answer to this key again, nothing written).
 */
public class Result(
    public val rows: List<Row>?,
    public val affected: Long,
    public val seq: Long,
    public val replayed: Boolean,
) {
    override fun toString(): String = rows?.toString() ?: "{affected: $affected}"
}
