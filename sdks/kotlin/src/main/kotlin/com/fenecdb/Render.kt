/*
 * Rendering a builder's state to FenecQL text and `$n` parameters, by the
 * rules of docs/sdks.md. Every Fenec SDK renders the same text for the same
 * chain; conformance/builder-golden.json holds the cases.
 */
package com.fenecdb

import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.put

/** One FenecQL statement and its parameters: what `POST /query` is sent. */
public class Statement @JvmOverloads constructor(
    /** The text, its values as `$1…$n`. */
    public val query: String,
    /** The values of `$1…$n`, as the request body carries them. */
    public val params: List<JsonElement>,
    /** The collection a builder rendered it on: its rows decode by that collection's field types. */
    public val collection: String? = null,
) {
    /** Whether it is a claim (a `set` with `returning`): what a wait holds. */
    internal val claim: Boolean get() = isClaim(query)

    internal fun toJson(): JsonObject = buildJsonObject {
        put("query", query)
        put("params", JsonArray(params))
    }

    override fun toString(): String = "$query ${JsonArray(params)}"
}

/** The comparison operators of `where(field, op, value)`. */
private val OPERATORS = setOf("=", "!=", "<", "<=", ">", ">=", "in", "not in")

/** One `where` condition. */
internal sealed class Condition {
    class Compare(val field: String, val op: String, val value: Any /* JsonElement or Expr */) : Condition()
    class IsNull(val field: String) : Condition()
    class Text(val raw: Raw) : Condition()
}

internal class Order(val field: String, val desc: Boolean)

/** What a builder holds: everything but the endpoint. */
internal data class State(
    val collection: String,
    val where: List<Condition> = emptyList(),
    val order: List<Order> = emptyList(),
    val select: List<String>? = null,
    val limit: Long? = null,
    val offset: Long? = null,
    /** `near <field> <point> [exact]`: nearest first over a `@geo` field. */
    val near: Near? = null,
    /** `ifAbsent()` (set null) or `upsert(set)`: an insert renders `put c {…} if absent [else set {…}]`. */
    val absent: Absent? = null,
)

internal class Near(val field: String, val point: JsonElement, val exact: Boolean)

internal class Absent(val set: Map<String, Any?>?)

/** `where(field, value)`: `field = $n`, or `field is null` for null. */
internal fun equality(field: String, value: Any?): Condition {
    fieldPath(field)
    return if (value == null) Condition.IsNull(field) else Condition.Compare(field, "=", whereValue(field, value))
}

/** `where(field, op, value)`: null is a parameter here (`= $1`). */
internal fun comparison(field: String, op: String, value: Any?): Condition {
    fieldPath(field)
    require(op in OPERATORS) { "operator ${quote(op)} is not one of ${OPERATORS.joinToString(", ")}" }
    if (op == "in" || op == "not in") {
        val list = when (value) {
            is Iterable<*> -> value.toList()
            is Array<*> -> value.toList()
            is JsonArray -> value
            else -> throw IllegalArgumentException("$op needs a list of values for $field")
        }
        require(list.isNotEmpty()) { "$op needs values for $field: the list is empty" }
    }
    return Condition.Compare(field, op, whereValue(field, value))
}

private fun whereValue(field: String, v: Any?): Any = when (v) {
    is Expr -> v
    is Raw -> throw IllegalArgumentException("where $field: raw is not a value (use expr)")
    is Inc -> throw IllegalArgumentException("where $field: inc is not a value (use expr)")
    else -> toJson("where $field", v)
}

/** Checks a `select` or `returning` list: fields and paths, or `*` alone. */
internal fun fieldList(what: String, list: List<String>): List<String> {
    require(list.isNotEmpty()) { "$what: an empty list of fields" }
    if (list.size == 1 && list[0] == "*") return list
    return list.map { fieldPath(it) }
}

/** `get c [select …] [where …] [order …] [limit n] [offset n]`. */
internal fun statementRows(s: State): Statement {
    refuse(s, "a read", absent = true)
    val p = Params()
    val select = s.select?.let { " select " + it.joinToString(", ") } ?: ""
    return Statement("get ${s.collection}$select${where(s, p)}${near(s, p)}${order(s)}${limits(s, true)}", p.values, s.collection)
}

/** `get c [where …] count`. */
internal fun statementCount(s: State): Statement {
    refuse(s, "count", absent = true)
    val p = Params()
    // No collection: a count's one column is no field to decode.
    return Statement("get ${s.collection}${where(s, p)} count", p.values)
}

/**
 * `insert c {…}` or `insert c [{…}, …]`; after `ifAbsent()`
 * `put c {…} if absent`, after `upsert(set)` `put c {…} if absent else set {…}`.
 */
internal fun statementInsert(s: State, docs: List<Map<String, Any?>>, many: Boolean): Statement {
    refuse(s, "insert", where = true, order = true, limit = true, offset = true, select = true, near = true)
    require(docs.isNotEmpty()) { "insert: an empty list of documents" }
    val p = Params()
    val text = if (many) docs.joinToString(", ", "[", "]") { doc(it, p) } else doc(docs[0], p)
    val absent = s.absent ?: return Statement("insert ${s.collection} $text", p.values, s.collection)
    val set = absent.set?.let { " else set ${patch("upsert", it, p)}" } ?: ""
    return Statement("put ${s.collection} $text if absent$set", p.values, s.collection)
}

/** `set c {k: v, …} [where …] [order …] [limit n] [returning …] [require n]`. */
internal fun statementUpdate(s: State, patch: Map<String, Any?>, require: Long?, returning: List<String>?): Statement {
    refuse(s, "update", offset = true, select = true, absent = true)
    val p = Params()
    val set = patch("update", patch, p)
    return Statement(
        "set ${s.collection} $set${where(s, p)}${near(s, p)}${order(s)}${limits(s, false)}${writeTail(require, returning)}",
        p.values,
        s.collection,
    )
}

/** `del c [where …] [order …] [limit n] [returning …] [require n]`. */
internal fun statementDelete(s: State, require: Long?, returning: List<String>?): Statement {
    refuse(s, "delete", offset = true, select = true, absent = true)
    val p = Params()
    return Statement("del ${s.collection}${where(s, p)}${near(s, p)}${order(s)}${limits(s, false)}${writeTail(require, returning)}", p.values, s.collection)
}

private fun refuse(
    s: State,
    endpoint: String,
    where: Boolean = false,
    order: Boolean = false,
    limit: Boolean = false,
    offset: Boolean = false,
    select: Boolean = false,
    near: Boolean = false,
    absent: Boolean = false,
) {
    val used = listOfNotNull(
        "where".takeIf { where && s.where.isNotEmpty() },
        "order".takeIf { order && s.order.isNotEmpty() },
        "limit".takeIf { limit && s.limit != null },
        "offset".takeIf { offset && s.offset != null },
        "select".takeIf { select && s.select != null },
        "near".takeIf { near && s.near != null },
        "ifAbsent or upsert".takeIf { absent && s.absent != null },
    )
    require(used.isEmpty()) { "$endpoint cannot use ${used.first()}" }
}

private fun where(s: State, p: Params): String {
    if (s.where.isEmpty()) return ""
    val wrap = s.where.size > 1
    return " where " + s.where.joinToString(" and ") { c ->
        when (c) {
            is Condition.Text -> if (wrap) "(${c.raw.render(p)})" else c.raw.render(p)
            is Condition.IsNull -> "${c.field} is null"
            is Condition.Compare -> {
                val v = c.value
                "${c.field} ${c.op} ${if (v is Expr) v.render(p) else p.add(v as JsonElement)}"
            }
        }
    }
}

private fun near(s: State, p: Params): String {
    val n = s.near ?: return ""
    require(s.order.isEmpty()) { "near ${n.field} orders the rows: it takes no order beside it" }
    return " near ${n.field} ${p.add(n.point)}" + if (n.exact) " exact" else ""
}

/** `{k: v, …}` of an update or an upsert's `else set`. */
private fun patch(what: String, patch: Map<String, Any?>, p: Params): String {
    require(patch.isNotEmpty()) { "$what: an empty patch" }
    for (k in patch.keys) plainKey(what, k)
    return patch.entries.joinToString(", ", "{", "}") { (k, v) -> "$k: ${patchValue(what, k, v, p)}" }
}

private fun order(s: State): String =
    if (s.order.isEmpty()) "" else " order " + s.order.joinToString(", ") { if (it.desc) "${it.field} desc" else it.field }

private fun limits(s: State, withOffset: Boolean): String {
    val limit = s.limit?.let { " limit $it" } ?: ""
    return if (withOffset && s.offset != null) "$limit offset ${s.offset}" else limit
}

private fun writeTail(require: Long?, returning: List<String>?): String {
    var out = ""
    if (returning != null) out += " returning " + fieldList("returning", returning).joinToString(", ")
    if (require != null) out += " require ${nonNegative("require", require)}"
    return out
}

private fun doc(d: Map<String, Any?>, p: Params): String =
    d.entries.joinToString(", ", "{", "}") { (k, v) ->
        plainKey("insert", k)
        val value = when (v) {
            is Expr -> v.render(p)
            is Inc -> throw IllegalArgumentException("insert $k: inc is not a document value")
            is Raw -> throw IllegalArgumentException("insert $k: raw is not a document value (use expr)")
            else -> p.add(toJson("insert $k", v))
        }
        "$k: $value"
    }

// inc counts from nothing: a null field is 0 (docs/sdks.md, rule 8).
private fun patchValue(what: String, k: String, v: Any?, p: Params): String = when (v) {
    null, JsonNull -> "null"
    is Expr -> v.render(p)
    is Inc -> "coalesce($k, 0) + ${p.add(v.by)}"
    is Raw -> throw IllegalArgumentException("$what $k: raw is not a value (use expr)")
    else -> p.add(toJson("$what $k", v))
}

/**
 * Whether a statement is a claim: a `set` with `returning` — what Fenec-Wait
 * holds. Checked on every statement sent, so a scan of the text, not a
 * regular expression: `set` first (after blanks), then the word `returning`
 * anywhere, either in any case.
 */
internal fun isClaim(query: String): Boolean {
    val start = query.indexOfFirst { !it.isWhitespace() }
    if (start < 0 || !query.regionMatches(start, "set", 0, 3, ignoreCase = true)) return false
    if (start + 3 >= query.length || !query[start + 3].isWhitespace()) return false
    var at = start + 4
    while (true) {
        at = query.indexOf("returning", at, ignoreCase = true)
        if (at < 0) return false
        val end = at + "returning".length
        if (!wordChar(query.getOrNull(at - 1)) && !wordChar(query.getOrNull(end))) return true
        at = end
    }
}

/** A character of a word, as a regular expression's `\b` sees one. */
private fun wordChar(c: Char?): Boolean = c != null && (c.isLetterOrDigit() || c == '_')
