module github.com/fenecdb/fenec/sdks/go

go 1.26.0

require github.com/oapi-codegen/runtime v1.9.0

require (
	github.com/apapsch/go-jsonmerge/v2 v2.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
)

// The conformance cases are replayed by this module's tests alone.
require github.com/fenecdb/fenec/conformance v0.0.0

replace github.com/fenecdb/fenec/conformance => ../../conformance
