// Package fenecdb is the Go client of Fenec, a document database served over
// HTTP and queried in FenecQL. It follows the SDK contract of docs/sdks.md
// and runs queues with the worker of docs/workers.md.
//
// Connect with [Connect], then build statements with the immutable query
// builder that [Client.From] starts, or send FenecQL text with
// [Client.Query] and [Client.Batch]:
//
//	db, err := fenecdb.Connect("http://127.0.0.1:8080", fenecdb.WithToken(token))
//	if err != nil {
//		return err
//	}
//	claimed, err := db.Wait(30 * time.Second).From("jobs").
//		WhereRaw(fenecdb.Raw("run_at <= now()")).
//		Order("run_at").
//		Limit(10).
//		Update(ctx, fenecdb.D(
//			"owner", owner,
//			"run_at", fenecdb.Expr("now() + ?", 30000),
//			"attempts", fenecdb.Inc(1),
//		), fenecdb.Returning("*"))
//
// or let a [Worker] ([NewWorker]) run the claim, the handler, the lease
// extensions, the acks, the fails with backoff and the dead letters.
//
// # Rendering
//
// The builder renders the same FenecQL text as every other Fenec SDK for the
// same chain: values become parameters $1..$n, numbered left to right in the
// rendered text; names of collections and fields are checked against
// FenecQL's identifier rule, so no value or name can change the statement's
// shape. A mistake in a chain (a bad name, a negative limit, a NaN) is kept
// and returned by the call that ends the chain, before anything is sent.
// The Render methods ([Query.RenderUpdate] and its siblings) answer
// the text and parameters without sending them, for logs, tests and
// [Client.Batch].
//
// # Per client and per call
//
// A [Client] holds the URL (or a cluster's URLs, whose leader it follows:
// [Connect]), the token, the HTTP client and the default timeout. What
// belongs to one call is a [CallOption] of that call: [IdempotencyKey] and
// [Timeout]. [Client.Wait] answers a copy whose claims
// (an update with [Returning]) are held at the server for up to the wait,
// their timeout extended by it; every other call through the copy is sent
// as through the client. Every call takes a [context.Context] and gives the
// request up when the context is done; a held claim given up takes no job.
//
// # Errors
//
// A call that reached the wire and failed answers an [*Error]: the HTTP
// status, the code (one of openapi.yaml's, or [CodeNetwork],
// [CodeTimeout], [CodeUnexpected]), the message, and, for [Client.Batch],
// the statement refused. Match codes with errors.Is and the sentinels
// [ErrUnmet], [ErrNotFound], [ErrNetwork] and their siblings.
package fenecdb
