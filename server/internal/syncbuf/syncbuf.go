// Package syncbuf is a buffer written and read from several goroutines:
// a log the server writes while a test reads it. One definition for every
// package's tests (engine, httpapi, cmd/fenec), below them all.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer under a mutex. The zero Buffer is empty and
// ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
