package engine

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/store"
)

// crashChild is the writer TestCrashSafety kills: four goroutines putting
// pairs of documents in one statement each, printing a number once its
// put is acknowledged.
func crashChild(file string) {
	db, err := Open(Options{File: file, Sync: store.SyncMode{Kind: store.SyncAlways}})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	if _, err := db.Exec(context.Background(), `create collection if not exists pairs (n int @sorted, half text)`, nil); err != nil {
		fmt.Println("create:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; ; i += 4 {
				n := fenecql.Int(int64(i))
				if _, err := db.Exec(context.Background(), `put pairs [{n: $1, half: "a"}, {n: $1, half: "b"}]`, []fenecql.Value{n}); err != nil {
					fmt.Println("put:", err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Println(i)
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
}

func TestMain(m *testing.M) {
	if file := os.Getenv("FENEC_CRASH_CHILD"); file != "" {
		crashChild(file)
		return
	}
	if file := os.Getenv("FENEC_LOAD_CHILD"); file != "" {
		loadChild(file)
		return
	}
	if v := os.Getenv("FENEC_IDS_CHILD"); v != "" {
		how, file, _ := strings.Cut(v, ":")
		idsChild(file, how)
		return
	}
	os.Exit(m.Run())
}

// TestCrashSafety kills a writer with SIGKILL mid-stream: after reopening,
// every acknowledged put is there, and no put is there by half.
func TestCrashSafety(t *testing.T) {
	file := filepath.Join(t.TempDir(), "crash.db")
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "FENEC_CRASH_CHILD="+file)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := map[int]bool{}
		sc := bufio.NewScanner(out)
		for sc.Scan() && len(acked) < 300 {
			n, err := strconv.Atoi(sc.Text())
			if err != nil {
				t.Fatalf("child: %s", sc.Text())
			}
			acked[n] = true
		}
		cmd.Process.Signal(syscall.SIGKILL)
		for sc.Scan() {
			if n, err := strconv.Atoi(sc.Text()); err == nil {
				acked[n] = true
			}
		}
		cmd.Wait()
		if len(acked) < 300 {
			t.Fatalf("round %d: the child acknowledged only %d puts", round, len(acked))
		}
		db, err := Open(Options{File: file, Sync: store.SyncMode{Kind: store.SyncAlways}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := db.Exec(context.Background(), `get pairs select n, half`, nil)
		if err != nil {
			t.Fatal(err)
		}
		halves := map[int64]string{}
		for _, row := range r.Rows {
			halves[row[0].Int()] += row[1].Text()
		}
		for n := range acked {
			if !strings.Contains(halves[int64(n)], "a") || !strings.Contains(halves[int64(n)], "b") {
				t.Errorf("round %d: acknowledged put %d lost (%q)", round, n, halves[int64(n)])
			}
		}
		for n, h := range halves {
			if strings.Count(h, "a") != strings.Count(h, "b") {
				t.Errorf("round %d: put %d half applied: %q", round, n, h)
			}
		}
		db.Close()
	}
}
