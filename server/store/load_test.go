package store

import (
	"bytes"
	"testing"
)

// TestCutBody: bodies cut from the load's blocks hold what was read, even
// after the read buffer is written over; appending to one never reaches
// the next; a body larger than a block gets a block of its own.
func TestCutBody(t *testing.T) {
	var slab []byte
	var bodies, want [][]byte
	buf := make([]byte, 3*loadSlab)
	for i, n := range []int{0, 1, 100, loadSlab - 50, 200, 2 * loadSlab, 7} {
		read := buf[:n]
		for k := range read {
			read[k] = byte(i + k)
		}
		var body []byte
		body, slab = cutBody(slab, read)
		bodies, want = append(bodies, body), append(want, bytes.Clone(read))
		clear(buf) // the driver's buffer is reused by the next row
	}
	for i, b := range bodies {
		if !bytes.Equal(b, want[i]) {
			t.Errorf("body %d (%d bytes) changed", i, len(want[i]))
		}
		if cap(b) != len(b) {
			t.Errorf("body %d: cap %d past its length %d", i, cap(b), len(b))
		}
	}
	_ = append(bodies[2], 0xff) // must not write into body 3
	if !bytes.Equal(bodies[3], want[3]) {
		t.Error("appending to a body wrote into the next")
	}
}
