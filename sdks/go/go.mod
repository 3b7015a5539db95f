module github.com/fenecdb/fenec/sdks/go

go 1.25.0
