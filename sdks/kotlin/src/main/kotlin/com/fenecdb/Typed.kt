/*
 * Typed rows: a query's rows decoded into a class of the caller's through
 * kotlinx.serialization (the caller's class is `@Serializable`, compiled
 * with the serialization plugin on the caller's side).
 */
package com.fenecdb

import kotlinx.serialization.DeserializationStrategy
import kotlinx.serialization.SerializationException
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.serializer

/**
 * How rows are decoded into a class: fields the class lacks are ignored
 * (a collection may hold more than one class reads), and a class's default
 * stands in for a field the row lacks.
 */
public val ROWS_JSON: Json = Json {
    ignoreUnknownKeys = true
    coerceInputValues = true
}

/**
 * The row as the JSON the server sent: each value back to its JSON (an
 * instant as ISO-8601 text, an int64 as its exact digits).
 */
public fun Row.toJsonObject(): JsonObject = JsonObject(mapValues { (k, v) -> toJson("row field $k", v) })

/** The row decoded into a [T] by [deserializer]; a row that does not fit is an IllegalArgumentException naming the field. */
public fun <T> Row.decodeAs(deserializer: DeserializationStrategy<T>, json: Json = ROWS_JSON): T = try {
    json.decodeFromJsonElement(deserializer, toJsonObject())
} catch (e: SerializationException) {
    throw IllegalArgumentException("row ${get("id") ?: ""} does not decode as ${deserializer.descriptor.serialName}: ${e.message}", e)
}

/** [rows] decoded into [T] by [deserializer]. */
public suspend fun <T> Query.rowsAs(deserializer: DeserializationStrategy<T>, json: Json = ROWS_JSON): List<T> =
    rows().map { it.decodeAs(deserializer, json) }

/** [first] decoded into [T] by [deserializer], or null when there is none. */
public suspend fun <T> Query.firstAs(deserializer: DeserializationStrategy<T>, json: Json = ROWS_JSON): T? =
    first()?.decodeAs(deserializer, json)

/** [rows] decoded into the `@Serializable` class [T]: `jobs.rowsAs<Job>()`. */
public suspend inline fun <reified T> Query.rowsAs(json: Json = ROWS_JSON): List<T> = rowsAs(serializer<T>(), json)

/** [first] decoded into the `@Serializable` class [T], or null when there is none. */
public suspend inline fun <reified T> Query.firstAs(json: Json = ROWS_JSON): T? = firstAs(serializer<T>(), json)
