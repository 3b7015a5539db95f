package httpapi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDiskFull runs the server on a small tmpfs the test mounts: writes
// fill it until the store fails. The refused write is not visible, health
// says the store failed, and once space is freed (a ballast file deleted)
// the server takes writes again by itself; after a restart the file holds
// exactly the writes answered 200.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=8m"); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skip("TestDiskFull did not run: mounting a tmpfs is not permitted here (it needs root or CAP_SYS_ADMIN)")
		}
		t.Fatalf("mounting a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	ballast := filepath.Join(dir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 6<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "f.db")
	ts := newTestServer(t, file, nil)
	ts.c.MustQuery(`create collection c (i int @unique, pad text)`)
	pad := strings.Repeat("x", 16<<10)
	put := func(i int) int {
		r, err := ts.c.Do("POST", "/query", map[string]any{"query": "put c {i: $1, pad: $2}", "params": []any{i, pad}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	acked := 0
	refusedAt := -1
	for i := range 1000 {
		switch st := put(i); st {
		case 200:
			acked++
		case 503:
			refusedAt = i
		default:
			t.Fatalf("put %d on a filling disk: %d", i, st)
		}
		if refusedAt >= 0 {
			break
		}
	}
	if refusedAt < 0 {
		t.Fatal("1000 puts of 16 KB did not fill an 8 MB tmpfs (6 MB of it ballast)")
	}
	if got := string(ts.c.MustQuery(`get c where i = $1 count`, refusedAt).Body); got != `[{"count":0}]`+"\n" {
		t.Fatalf("the put refused on a full disk is visible: %s", got)
	}
	r, err := ts.c.Do("GET", "/_health", nil, nil)
	if err != nil || r.Status != 503 || !strings.Contains(string(r.Body), "full") {
		t.Fatalf("health on a full disk: %v %d %s", err, r.Status, r.Body)
	}
	if st := put(refusedAt); st != 503 {
		t.Fatalf("a put while the store is failed: %d", st)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r, err := ts.c.Do("GET", "/_health", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == 200 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the store did not recover within 15 s of space being freed: %s", r.Body)
		}
	}
	for i := refusedAt; i < refusedAt+5; i++ {
		if st := put(i); st != 200 {
			t.Fatalf("put %d once space was freed: %d", i, st)
		}
		acked++
	}
	want := fmt.Sprintf(`[{"count":%d}]`+"\n", acked)
	if got := string(ts.c.MustQuery(`get c count`).Body); got != want {
		t.Fatalf("in memory: %s, want %s", got, want)
	}
	if err := ts.db.Close(); err != nil {
		t.Fatal(err)
	}
	ts2 := newTestServer(t, file, nil)
	if got := string(ts2.c.MustQuery(`get c count`).Body); got != want {
		t.Fatalf("after a restart: %s, want %s", got, want)
	}
	t.Logf("%d puts answered 200 before the disk filled; refused put %d; recovered", acked-5, refusedAt)
}
