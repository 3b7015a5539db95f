module github.com/fenecdb/fenec/bench/workers/go

go 1.26.0

require github.com/fenecdb/fenec/sdks/go v0.0.0

// The SDK from this checkout, as sdks/go/README.md has a user do before
// the module is published.
replace github.com/fenecdb/fenec/sdks/go => ../../../sdks/go
