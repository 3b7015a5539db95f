module github.com/fenecdb/fenec/conformance

go 1.26
