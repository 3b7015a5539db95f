// Package fenecdb is the Go client of Fenec, a document database served over
// HTTP and queried in FenecQL.
//
// Connect with [New], then build statements with the immutable query
// builder that [DB.From] starts, or send FenecQL text with [DB.Query] and
// [DB.Batch]:
//
//	db, err := fenecdb.New("http://127.0.0.1:8080", fenecdb.WithToken(token))
//	if err != nil {
//		return err
//	}
//	jobs := db.Wait(30 * time.Second).From("jobs")
//	claimed, err := jobs.
//		WhereRaw(fenecdb.Raw("run_at <= now()")).
//		Order("run_at").
//		Limit(10).
//		Update(ctx, fenecdb.D(
//			"owner", owner,
//			"run_at", fenecdb.Expr("now() + ?", 30000),
//			"attempts", fenecdb.Inc(1),
//		), fenecdb.Returning("*"))
//
// # Rendering
//
// The builder renders the same FenecQL text as every other Fenec SDK for the
// same chain: values become parameters $1..$n, numbered left to right in the
// rendered text; names of collections and fields are checked against
// FenecQL's identifier rule, so no value or name can change the statement's
// shape. A mistake in a chain (a bad name, a negative limit) is kept and
// returned by the call that ends the chain. The Render methods
// ([Collection.RenderUpdate] and its siblings) answer the text and
// parameters without sending them, for logs, tests and [DB.Batch].
//
// # Waiting, idempotency and cancellation
//
// [DB.Wait] and [DB.IdempotencyKey] answer copies of a DB that send the
// Fenec-Wait and Idempotency-Key headers. A claim sent with a wait is held
// at the server until it takes a job or the wait ends, and the request's
// timeout is extended by the wait. Every call takes a [context.Context] and
// gives the request up when the context is done; a held claim given up is
// dropped by the server and takes no job.
//
// # Errors
//
// A statement the server refuses is returned as an [*Error], carrying the
// HTTP status, the error code (see [CodeUnmet] and its siblings) and, for
// [DB.Batch], the statement refused; reach it with [errors.As].
package fenecdb
