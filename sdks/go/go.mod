module github.com/fenecdb/fenec/sdks/go

go 1.26.0
