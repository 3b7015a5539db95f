package h1

import (
	"fmt"
	"strings"
	"testing"
)

// The scan reads a connection's bytes however they were split into reads:
// every split of each text gives the answer the whole text gives.
func TestFramingScanSplits(t *testing.T) {
	body := `{"statements":[{"query":"del jobs where id = $1","params":[1]}]}`
	for _, c := range []struct {
		text    string
		refused bool
	}{
		{"POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", true},
		{"POST / HTTP/1.1\r\ntRANSFER-eNCODING:chunked\r\nHost: localhost\r\ncontent-length:4\r\n\r\n", true},
		{"POST / HTTP/1.1\nContent-Length: 4\nTransfer-Encoding: chunked\n\n", true},
		// A bare "\r" is passed over inside a name, as before.
		{"POST / HTTP/1.1\r\nContent-\rLength: 4\r\nTransfer-Encoding: chunked\r\n\r\n", true},
		// Not a name: longer, shorter, another, or not at the line's start.
		{"POST / HTTP/1.1\r\nContent-Lengths: 4\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"POST / HTTP/1.1\r\nContent-Length 4\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"POST / HTTP/1.1\r\nContent-Type: x\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"POST / HTTP/1.1\r\nX: Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		// The two in different blocks: a header block, then a body's lines.
		{"POST / HTTP/1.1\r\nContent-Length: 40\r\n\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		// One alone, with bodies, requests after one another.
		{"POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n" + body + "POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n" + body, false},
		// A body, then a block with both.
		{"POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n" + body + "\r\nPOST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", true},
	} {
		for split := 0; split <= len(c.text); split++ {
			for _, step := range []int{len(c.text), 1, 3} {
				fc := &framingConn{}
				got := false
				for _, part := range []string{c.text[:split], c.text[split:]} {
					for len(part) > 0 && !got {
						n := min(step, len(part))
						got = fc.scan([]byte(part[:n]))
						part = part[n:]
					}
				}
				if got != c.refused {
					t.Fatalf("%q split at %d in reads of %d: refused %v, want %v", c.text, split, step, got, c.refused)
				}
			}
		}
	}
}

// BenchmarkFramingScan is the scan's cost for a /batch of ten acks with
// the headers Go's client sends:
//
//	cd server && go test ./httpapi -run '^$' -bench BenchmarkFramingScan
func BenchmarkFramingScan(b *testing.B) {
	var stmts []string
	for i := range 10 {
		stmts = append(stmts, fmt.Sprintf(`{"query":"del jobs where id = $1 and owner = $2 require 1","params":[%d,"w1"]}`, 1000+i))
	}
	body := `{"statements":[` + strings.Join(stmts, ",") + `]}`
	req := []byte(fmt.Sprintf("POST /batch HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: %d\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n%s", len(body), body))
	fc := &framingConn{}
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		if fc.scan(req) {
			b.Fatal("refused")
		}
	}
}
