package com.fenecdb

import kotlinx.coroutines.runBlocking
import java.util.concurrent.CompletableFuture
import kotlin.time.Duration

/**
 * An immutable query on one collection: each call answers a new builder,
 * so one can be kept and reused (`val jobs = db.from("jobs")`). The
 * endpoints (`rows`, `first`, `count`, `insert`, `update`,
 * `updateReturning`, `delete`, `deleteReturning`) send it; the `render…`
 * methods render it without sending (for [Fenec.batch], logs and tests).
 *
 * Values always become `$n` parameters; collection and field names are
 * checked against `[A-Za-z_][A-Za-z0-9_]*` (dotted paths for fields in
 * where, order, select and returning), and anything else throws an
 * [IllegalArgumentException] before anything is sent.
 */
public class Query internal constructor(
    private val db: Client,
    private val state: State,
    private val idempotencyKey: String?,
) {
    private fun with(s: State) = Query(db, s, idempotencyKey)

    /** The client this builder sends through. */
    public val client: Client get() = db

    /** The collection this builder is on. */
    public val collection: String get() = state.collection

    /** `field = $n`, or `field is null` when [value] is null. Several conditions join with `and`. */
    public fun where(field: String, value: Any?): Query = with(state.copy(where = state.where + equality(field, value)))

    /**
     * `field op $n`, [op] one of `=`, `!=`, `<`, `<=`, `>`, `>=`, `in`,
     * `not in` (the last two take a non-empty list). A null here is a
     * parameter (`owner = $1`).
     */
    public fun where(field: String, op: String, value: Any?): Query =
        with(state.copy(where = state.where + comparison(field, op, value)))

    /** A condition in FenecQL: `where(raw("run_at <= now() + ?", 1000))`. */
    public fun where(condition: Raw): Query = with(state.copy(where = state.where + Condition.Text(condition)))

    /** Orders by [field] (ascending unless [desc]); several calls order by several keys. */
    @JvmOverloads
    public fun order(field: String, desc: Boolean = false): Query =
        with(state.copy(order = state.order + Order(fieldPath(field), desc)))

    /** Orders by [field] in [direction], `"asc"` or `"desc"`. */
    public fun order(field: String, direction: String): Query {
        require(direction == "asc" || direction == "desc") { "order direction ${quote(direction)} is not asc or desc" }
        return order(field, direction == "desc")
    }

    /** Takes at most [n] rows. */
    public fun limit(n: Long): Query = with(state.copy(limit = nonNegative("limit", n)))

    /** Skips [n] rows of a read. */
    public fun offset(n: Long): Query = with(state.copy(offset = nonNegative("offset", n)))

    /** Answers these fields (paths allowed, or `*`) rather than every field; a second select replaces the first. */
    public fun select(vararg fields: String): Query = with(state.copy(select = fieldList("select", fields.toList())))

    /**
     * Orders the rows nearest first to the point ([lon], [lat]) over a `@geo`
     * field: `near field $n`, the order of `order distance(field, point)`;
     * with [exact] `near field $n exact` (docs/fenecql.md). It replaces an
     * earlier `near` and takes no `order` beside it.
     */
    @JvmOverloads
    public fun near(field: String, lon: Double, lat: Double, exact: Boolean = false): Query =
        with(state.copy(near = Near(fieldPath(field), toJson("near $field", listOf(lon, lat)), exact)))

    /**
     * Makes `insert` write only documents not there yet: `put c {…} if absent`,
     * which counts 0 for a document whose `id` or `@unique` value another
     * holds (writing nothing).
     */
    public fun ifAbsent(): Query = with(state.copy(absent = Absent(null)))

    /**
     * Makes `insert` an upsert: `put c {…} if absent else set {…}` writes the
     * document when it is absent, and else applies [set] to the one there. In
     * [set] a bare field reads the stored document and `expr("new.f")` the
     * incoming one; `inc(n)` counts from 0.
     */
    public fun upsert(set: Map<String, Any?>): Query = with(state.copy(absent = Absent(set)))

    /** A copy whose claims are held at the server up to [wait] (see [Client.withWait]). */
    public fun withWait(wait: Duration): Query = Query(db.withWait(wait), state, idempotencyKey)

    /** [withWait] with a java.time.Duration. */
    public fun withWait(wait: java.time.Duration): Query = Query(db.withWait(wait), state, idempotencyKey)

    /** A copy whose calls wait [timeout] for their answer (see [Client.withTimeout]). */
    public fun withTimeout(timeout: Duration): Query = Query(db.withTimeout(timeout), state, idempotencyKey)

    /** A copy whose calls run once the server has applied write [seq] (see [Client.withAfter]). */
    public fun withAfter(seq: Long): Query = Query(db.withAfter(seq), state, idempotencyKey)

    /** [withTimeout] with a java.time.Duration. */
    public fun withTimeout(timeout: java.time.Duration): Query = Query(db.withTimeout(timeout), state, idempotencyKey)

    /**
     * A copy whose write is sent under this `Idempotency-Key`: a retry with
     * the same key is answered the first answer, and writes nothing. One
     * builder, one statement, one key; an endpoint's own `idempotencyKey`
     * argument wins over it.
     */
    public fun withIdempotencyKey(key: String): Query {
        require(key.isNotEmpty() && key.toByteArray().size <= 255) { "an idempotency key is 1 to 255 bytes, not ${key.toByteArray().size}" }
        return Query(db, state, key)
    }

    // The statements, rendered without sending (docs/sdks.md: `render…`,
    // one word per idea); the `…Statement` names of the first versions stay
    // as deprecated aliases.

    /** The read [rows] sends. */
    public fun renderRows(): Statement = statementRows(state)

    /** The read [first] sends (`limit 1`). */
    public fun renderFirst(): Statement = statementRows(state.copy(limit = 1))

    /** The count [count] sends. */
    public fun renderCount(): Statement = statementCount(state)

    /** The insert of one document. */
    public fun renderInsert(doc: Map<String, Any?>): Statement = statementInsert(state, listOf(doc), many = false)

    /** The insert of several documents at once. */
    public fun renderInsert(docs: List<Map<String, Any?>>): Statement = statementInsert(state, docs, many = true)

    /** The update; [returning] null for none, empty or `*` for every field. */
    @JvmOverloads
    public fun renderUpdate(patch: Map<String, Any?>, require: Long? = null, returning: List<String>? = null): Statement =
        statementUpdate(state, patch, require, returning?.ifEmpty { listOf("*") })

    /** The delete; [returning] as for [renderUpdate]. */
    @JvmOverloads
    public fun renderDelete(require: Long? = null, returning: List<String>? = null): Statement =
        statementDelete(state, require, returning?.ifEmpty { listOf("*") })

    /** [renderRows] under its first name. */
    @Deprecated("renamed renderRows (docs/sdks.md, one word per idea)", ReplaceWith("renderRows()"))
    public fun rowsStatement(): Statement = renderRows()

    /** [renderFirst] under its first name. */
    @Deprecated("renamed renderFirst (docs/sdks.md, one word per idea)", ReplaceWith("renderFirst()"))
    public fun firstStatement(): Statement = renderFirst()

    /** [renderCount] under its first name. */
    @Deprecated("renamed renderCount (docs/sdks.md, one word per idea)", ReplaceWith("renderCount()"))
    public fun countStatement(): Statement = renderCount()

    /** [renderInsert] under its first name. */
    @Deprecated("renamed renderInsert (docs/sdks.md, one word per idea)", ReplaceWith("renderInsert(doc)"))
    public fun insertStatement(doc: Map<String, Any?>): Statement = renderInsert(doc)

    /** [renderInsert] of several documents under its first name. */
    @Deprecated("renamed renderInsert (docs/sdks.md, one word per idea)", ReplaceWith("renderInsert(docs)"))
    public fun insertStatement(docs: List<Map<String, Any?>>): Statement = renderInsert(docs)

    /** [renderUpdate] under its first name. */
    @JvmOverloads
    @Deprecated("renamed renderUpdate (docs/sdks.md, one word per idea)", ReplaceWith("renderUpdate(patch, require, returning)"))
    public fun updateStatement(patch: Map<String, Any?>, require: Long? = null, returning: List<String>? = null): Statement =
        renderUpdate(patch, require, returning)

    /** [renderDelete] under its first name. */
    @JvmOverloads
    @Deprecated("renamed renderDelete (docs/sdks.md, one word per idea)", ReplaceWith("renderDelete(require, returning)"))
    public fun deleteStatement(require: Long? = null, returning: List<String>? = null): Statement = renderDelete(require, returning)

    // The endpoints: each answers the plain value; Client.query(statement)
    // answers the whole Result (seq, replayed).

    /** Reads the rows: `get c [select …] [where …] [order …] [limit n] [offset n]`. */
    public suspend fun rows(): List<Row> = rowsOf(send(renderRows(), null))

    /** Reads the first row (`limit 1`), or null when there is none. */
    public suspend fun first(): Row? = rowsOf(send(renderFirst(), null)).firstOrNull()

    /** Counts the rows that match: `get c [where …] count`. */
    public suspend fun count(): Long {
        val r = send(renderCount(), null)
        return r.rows?.firstOrNull()?.long("count")
            ?: throw fenecException(200, ErrorCode.UNEXPECTED, "unexpected answer: a count answered $r")
    }

    /** Inserts a document; answers how many were written (1). A taken id or @unique value is 409. */
    public suspend fun insert(doc: Map<String, Any?>, idempotencyKey: String? = null): Long =
        written(send(renderInsert(doc), idempotencyKey))

    /** Inserts several documents at once, all or none; answers how many were written. */
    public suspend fun insert(docs: List<Map<String, Any?>>, idempotencyKey: String? = null): Long =
        written(send(renderInsert(docs), idempotencyKey))

    /**
     * Sets fields of the rows that match: `set c {…} [where …] [order …]
     * [limit n] [require n]`; answers how many were written. A patch value
     * is a value [toJson] takes, null, [expr] or [inc]; patch keys are plain
     * identifiers. [require] refuses (412, nothing written) unless exactly
     * that many rows are written.
     */
    public suspend fun update(patch: Map<String, Any?>, require: Long? = null, idempotencyKey: String? = null): Long =
        written(send(renderUpdate(patch, require), idempotencyKey))

    /**
     * [update] that answers the rows as written (`returning *`, or
     * [fields]): a claim. Through [withWait] it is held at the server while
     * it would write nothing.
     */
    public suspend fun updateReturning(
        patch: Map<String, Any?>,
        vararg fields: String,
        require: Long? = null,
        idempotencyKey: String? = null,
    ): List<Row> = rowsOf(send(renderUpdate(patch, require, fields.toList()), idempotencyKey))

    /** Deletes the rows that match: `del c [where …] [order …] [limit n] [require n]`; answers how many. */
    public suspend fun delete(require: Long? = null, idempotencyKey: String? = null): Long =
        written(send(renderDelete(require), idempotencyKey))

    /** [delete] that answers the rows as they were (`returning *`, or [fields]). */
    public suspend fun deleteReturning(vararg fields: String, require: Long? = null, idempotencyKey: String? = null): List<Row> =
        rowsOf(send(renderDelete(require, fields.toList()), idempotencyKey))

    // The blocking twins, for Java and other non-coroutine callers: each
    // runs its endpoint on the calling thread (runBlocking).

    /** [rows], blocking. */
    public fun rowsBlocking(): List<Row> = runBlocking { rows() }

    /** [first], blocking. */
    public fun firstBlocking(): Row? = runBlocking { first() }

    /** [count], blocking. */
    public fun countBlocking(): Long = runBlocking { count() }

    /** [insert] of one document, blocking. */
    @JvmOverloads
    public fun insertBlocking(doc: Map<String, Any?>, idempotencyKey: String? = null): Long = runBlocking { insert(doc, idempotencyKey) }

    /** [insert] of several documents, blocking. */
    @JvmOverloads
    public fun insertBlocking(docs: List<Map<String, Any?>>, idempotencyKey: String? = null): Long = runBlocking { insert(docs, idempotencyKey) }

    /** [update], blocking. */
    @JvmOverloads
    public fun updateBlocking(patch: Map<String, Any?>, require: Long? = null, idempotencyKey: String? = null): Long =
        runBlocking { update(patch, require, idempotencyKey) }

    /** [updateReturning], blocking; [fields] empty for every field. */
    @JvmOverloads
    public fun updateReturningBlocking(
        patch: Map<String, Any?>,
        fields: List<String> = emptyList(),
        require: Long? = null,
        idempotencyKey: String? = null,
    ): List<Row> = runBlocking { updateReturning(patch, *fields.toTypedArray(), require = require, idempotencyKey = idempotencyKey) }

    /** [delete], blocking. */
    @JvmOverloads
    public fun deleteBlocking(require: Long? = null, idempotencyKey: String? = null): Long = runBlocking { delete(require, idempotencyKey) }

    /** [deleteReturning], blocking; [fields] empty for every field. */
    @JvmOverloads
    public fun deleteReturningBlocking(fields: List<String> = emptyList(), require: Long? = null, idempotencyKey: String? = null): List<Row> =
        runBlocking { deleteReturning(*fields.toTypedArray(), require = require, idempotencyKey = idempotencyKey) }

    // The CompletableFuture twins, for Java callers that do not block:
    // cancelling a future gives its call up.

    /** [rows] as a CompletableFuture. */
    public fun rowsAsync(): CompletableFuture<List<Row>> = futureOf { rows() }

    /** [first] as a CompletableFuture (completed with null when there is none). */
    public fun firstAsync(): CompletableFuture<Row?> = futureOf { first() }

    /** [count] as a CompletableFuture. */
    public fun countAsync(): CompletableFuture<Long> = futureOf { count() }

    /** [insert] of one document as a CompletableFuture. */
    @JvmOverloads
    public fun insertAsync(doc: Map<String, Any?>, idempotencyKey: String? = null): CompletableFuture<Long> = futureOf { insert(doc, idempotencyKey) }

    /** [insert] of several documents as a CompletableFuture. */
    @JvmOverloads
    public fun insertAsync(docs: List<Map<String, Any?>>, idempotencyKey: String? = null): CompletableFuture<Long> = futureOf { insert(docs, idempotencyKey) }

    /** [update] as a CompletableFuture. */
    @JvmOverloads
    public fun updateAsync(patch: Map<String, Any?>, require: Long? = null, idempotencyKey: String? = null): CompletableFuture<Long> =
        futureOf { update(patch, require, idempotencyKey) }

    /** [updateReturning] as a CompletableFuture; [fields] empty for every field. */
    @JvmOverloads
    public fun updateReturningAsync(
        patch: Map<String, Any?>,
        fields: List<String> = emptyList(),
        require: Long? = null,
        idempotencyKey: String? = null,
    ): CompletableFuture<List<Row>> = futureOf { updateReturning(patch, *fields.toTypedArray(), require = require, idempotencyKey = idempotencyKey) }

    /** [delete] as a CompletableFuture. */
    @JvmOverloads
    public fun deleteAsync(require: Long? = null, idempotencyKey: String? = null): CompletableFuture<Long> = futureOf { delete(require, idempotencyKey) }

    /** [deleteReturning] as a CompletableFuture; [fields] empty for every field. */
    @JvmOverloads
    public fun deleteReturningAsync(fields: List<String> = emptyList(), require: Long? = null, idempotencyKey: String? = null): CompletableFuture<List<Row>> =
        futureOf { deleteReturning(*fields.toTypedArray(), require = require, idempotencyKey = idempotencyKey) }

    private suspend fun send(s: Statement, key: String?): Result = db.query(s, key ?: idempotencyKey)

    private fun rowsOf(r: Result): List<Row> =
        r.rows ?: throw fenecException(200, ErrorCode.UNEXPECTED, "unexpected answer: rows were asked for, and the answer is $r")

    private fun written(r: Result): Long {
        if (r.rows != null) throw fenecException(200, ErrorCode.UNEXPECTED, "unexpected answer: a count of writes was asked for, and the answer is $r")
        return r.affected
    }

    override fun toString(): String = renderRows().toString()
}
