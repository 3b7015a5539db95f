package com.fenecdb

/**
 * Every failure of a request: a refusal the server answered (its status,
 * its [code] and message, and for a `/batch` the 0-based statement [at]),
 * or the client's own — [ErrorCode.NETWORK] (the request could not be sent
 * or its answer read: the message names host:port and the cause, such as
 * "connection refused"), [ErrorCode.TIMEOUT] (which timeout, how long) and
 * [ErrorCode.UNEXPECTED] (an answer that is not the API's JSON, such as a
 * proxy's HTML page: the status and the start of the body). A refused
 * statement, or a refused batch, changed nothing.
 *
 * It is one of three, as a catch needs to tell them apart (the OpenAI and
 * Stripe clients' split): a [FenecConnectionException] (no answer: the
 * network), its [FenecTimeoutException] (no answer in time), or a
 * [FenecStatusException] (an answer: the server's refusal, or one that is
 * not the API's). A catch of `FenecException` still takes all three.
 *
 * A builder's own checks (a bad identifier, a non-finite number, …) are
 * [IllegalArgumentException]s thrown before anything is sent.
 */
public open class FenecException(
    /** The HTTP status; 0 when there was no answer (network, timeout). */
    public val status: Int,
    /** What kind of failure it is. */
    public val code: ErrorCode,
    message: String,
    /** In a `/batch`, the 0-based statement that was refused; else null. */
    public val at: Int? = null,
    cause: Throwable? = null,
    /**
     * On a 403 [ErrorCode.FORBIDDEN] of a cluster's node that is not the
     * leader, the leader's URL it named (`Fenec-Leader`); else null. A call
     * follows it itself ([Fenec.connect]): an error naming one was not
     * followed (a fourth follow in one call, https to http, or a leader that
     * refused the connection).
     */
    public val leader: String? = null,
    /**
     * The code as the server wrote it: [code]'s wire name, or, when [code]
     * is [ErrorCode.UNKNOWN], the code this version does not know.
     */
    public val wireCode: String = code.wire,
) : Exception(message, cause) {
    /**
     * Whether the call may be sent again: a fault — [ErrorCode.NETWORK],
     * [ErrorCode.TIMEOUT], [ErrorCode.UNAVAILABLE], [ErrorCode.INTERNAL].
     * A write is safe to send again only under an idempotency key.
     */
    public val retryable: Boolean
        get() = code == ErrorCode.NETWORK || code == ErrorCode.TIMEOUT || code == ErrorCode.UNAVAILABLE || code == ErrorCode.INTERNAL

    /** What was asked: `POST /query` or `POST /batch`; null for other requests. */
    public var method: String? = null
        private set

    /** The node the call went to last. */
    public var node: String? = null
        private set

    /** The statement(s) sent, their first 200 characters. */
    public var statement: String? = null
        private set

    /** The Idempotency-Key the call was sent under, if any. */
    public var idempotencyKey: String? = null
        private set

    internal fun describe(method: String, node: String, statement: String, key: String?) {
        this.method = method
        this.node = node
        this.statement = if (statement.length > 200) statement.take(200) + "…" else statement
        this.idempotencyKey = key
    }

    override fun toString(): String {
        val where = at?.let { " (statement $it)" } ?: ""
        return "FenecException(${wireCode}${if (status > 0) " $status" else ""}$where): $message"
    }
}

/**
 * The request could not be sent or its answer read ([ErrorCode.NETWORK]:
 * the message names host:port and the cause), or, as a
 * [FenecTimeoutException], not in time. [status] is 0. A fault: [retryable].
 */
public open class FenecConnectionException internal constructor(
    code: ErrorCode,
    message: String,
    cause: Throwable?,
) : FenecException(0, code, message, cause = cause)

/** No answer in time ([ErrorCode.TIMEOUT]): the message says which timeout and how long. */
public class FenecTimeoutException internal constructor(
    message: String,
    cause: Throwable?,
) : FenecConnectionException(ErrorCode.TIMEOUT, message, cause)

/**
 * An answer: the server's refusal ([status], [code], for a batch [at],
 * on a follower [leader]), or an answer that is not the API's
 * ([ErrorCode.UNEXPECTED], such as a proxy's page).
 */
public class FenecStatusException internal constructor(
    status: Int,
    code: ErrorCode,
    message: String,
    at: Int?,
    cause: Throwable?,
    leader: String?,
    wireCode: String,
) : FenecException(status, code, message, at, cause, leader, wireCode)

/** The exception of the right kind for [code]: every failure the client throws is made here. */
internal fun fenecException(
    status: Int,
    code: ErrorCode,
    message: String,
    at: Int? = null,
    cause: Throwable? = null,
    leader: String? = null,
    wireCode: String = code.wire,
): FenecException = when (code) {
    ErrorCode.TIMEOUT -> FenecTimeoutException(message, cause)
    ErrorCode.NETWORK -> FenecConnectionException(ErrorCode.NETWORK, message, cause)
    else -> FenecStatusException(status, code, message, at, cause, leader, wireCode)
}
