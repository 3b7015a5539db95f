/*
 * The change stream's consumer (docs/changes.md, "The change stream"):
 * every committed write in commit order, read in batches under a name and
 * acknowledged, so each is handled at least once.
 */
package com.fenecdb

import kotlinx.coroutines.future.await
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow
import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.buildJsonObject
import kotlinx.serialization.json.contentOrNull
import kotlinx.serialization.json.longOrNull
import kotlinx.serialization.json.put
import java.io.IOException
import java.net.URI
import java.net.URLEncoder
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.net.http.HttpTimeoutException
import kotlin.time.Duration
import kotlin.time.toJavaDuration

/** One committed write: a `put` (insert or update, [row] the document as written) or a `delete` ([row] null). */
public class Change(
    public val position: Long,
    public val collection: String,
    public val op: String,
    public val id: Long,
    /** The document as written; null for a delete, and on a server with no file. */
    public val row: JsonObject?,
) {
    override fun toString(): String = "Change($position, $collection, $op, $id, $row)"
}

/** A read's answer: the changes after [position], and [next], the position to acknowledge once they are handled. */
public class ChangeBatch(
    public val consumer: String,
    public val position: Long,
    public val next: Long,
    public val changes: List<Change>,
)

/** The consumer called [name] on [collection] (null: every collection): see [Consumer]. */
public fun Client.consumer(name: String, collection: String? = null): Consumer = Consumer(this, name, collection)

/** A named consumer of the change stream, made by [Client.consumer]. */
public class Consumer internal constructor(
    private val db: Client,
    public val name: String,
    public val collection: String?,
) {
    /**
     * Reads the changes after the consumer's acknowledged position, at most
     * [limit] (null: the server's default, 100), held up to [wait] while
     * there are none. A read moves nothing: read again without [ack], the
     * same changes come back. A second read under the name while one runs
     * is [ErrorCode.CONSUMER_BUSY] (409); a position older than the oldest
     * change kept is [ErrorCode.CHANGES_GONE] (410).
     */
    public suspend fun read(limit: Int? = null, wait: Duration? = null): ChangeBatch {
        val q = buildList {
            add("consumer=" + enc(name))
            collection?.let { add("collection=" + enc(it)) }
            limit?.let { add("limit=$it") }
            wait?.let { add("wait=${it.inWholeMilliseconds}") }
        }.joinToString("&")
        val o = call("GET", "/_changes?$q", null, wait) as? JsonObject ?: throw IOException("the answer of /_changes is not an object")
        val changes = (o["changes"] as? JsonArray ?: JsonArray(emptyList())).map {
            val c = it as JsonObject
            Change(
                long(c, "position"), (c["collection"] as JsonPrimitive).content, (c["op"] as JsonPrimitive).content,
                long(c, "id"), c["row"] as? JsonObject,
            )
        }
        return ChangeBatch((o["consumer"] as? JsonPrimitive)?.contentOrNull ?: name, long(o, "position"), long(o, "next"), changes)
    }

    /** Moves the consumer's position to [position] (a batch's [ChangeBatch.next]): durable once this returns. */
    public suspend fun ack(position: Long) {
        val body = buildJsonObject {
            put("consumer", name)
            put("position", position)
        }.toString()
        call("POST", "/_changes/ack", body, null)
    }

    /**
     * Batch after batch, each read held up to [wait] while there is none;
     * empty ones are not emitted. A batch is acknowledged when the
     * collector asks for the next, so a collector that stops early, or a
     * process that dies, reads it again.
     */
    public fun batches(limit: Int? = null, wait: Duration): Flow<ChangeBatch> = flow {
        while (true) {
            val b = read(limit, wait)
            if (b.changes.isEmpty()) continue
            emit(b)
            ack(b.next)
        }
    }

    private fun long(o: JsonObject, key: String): Long = (o[key] as? JsonPrimitive)?.longOrNull ?: 0

    private suspend fun call(method: String, path: String, body: String?, wait: Duration?): Any? {
        val node = db.node.trimEnd('/')
        val req = HttpRequest.newBuilder(URI.create(node + path))
            .header("User-Agent", USER_AGENT)
            .timeout((db.timeout + (wait ?: Duration.ZERO)).toJavaDuration())
            .apply {
                db.token?.let { header("Authorization", "Bearer $it") }
                if (body != null) header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)) else GET()
            }
            .build()
        val at = URI(node).authority
        val resp = try {
            db.http.sendAsync(req, HttpResponse.BodyHandlers.ofString()).await()
        } catch (e: HttpTimeoutException) {
            throw fenecException(0, ErrorCode.TIMEOUT, "timeout: no answer from $at in ${(db.timeout + (wait ?: Duration.ZERO)).inWholeMilliseconds} ms", cause = e)
        } catch (e: IOException) {
            throw fenecException(0, ErrorCode.NETWORK, "network: cannot reach $at: ${e.message ?: e}", cause = e)
        }
        val text = resp.body()
        val parsed = runCatching { Json.parseToJsonElement(text) }.getOrNull()
        if (resp.statusCode() / 100 != 2) {
            val o = parsed as? JsonObject
            val message = (o?.get("error") as? JsonPrimitive)?.takeIf { it.isString }?.content
            val code = (o?.get("code") as? JsonPrimitive)?.takeIf { it.isString }?.content?.let { ErrorCode.of(it) }
            if (message == null || code == null) {
                throw fenecException(resp.statusCode(), ErrorCode.UNEXPECTED, "unexpected answer from $at: HTTP ${resp.statusCode()}: ${text.trim().take(200)}")
            }
            val leader = resp.headers().firstValue("Fenec-Leader").orElse(null)
            throw fenecException(resp.statusCode(), code, message, leader = if (code == ErrorCode.FORBIDDEN) leader else null)
        }
        return parsed
    }

    private fun enc(s: String): String = URLEncoder.encode(s, Charsets.UTF_8).replace("+", "%20")
}
