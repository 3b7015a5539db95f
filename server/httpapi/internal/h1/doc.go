// Package h1 is fenec serve's HTTP/1.1 connection server: the plain
// requests read and answered on one goroutine per connection (server.go,
// conn.go, head.go, response.go), every other one handed with its
// connection to net/http (listeners.go), whose answers stay the authority
// (docs/architecture.md, "Connections"). A handler sees an http.Request
// and an http.ResponseWriter as under net/http; what it may ask of the
// connection beyond them — to be watched for its client going away, to
// say its write is queued — it finds in the request's context (ConnOf).
//
// The tests here hold the server to net/http's answers byte for byte
// (FuzzConnSame, FuzzHeadSubset); h1test holds what they share with
// httpapi's tests.
package h1
