package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/internal/syncbuf"
	"github.com/fenecdb/fenec/server/internal/testwait"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// docSection is one recipe of docs/redis.md as this test runs it.
type docSection struct {
	title   string
	fenecql []string // the statements of its fenecql blocks, up to the first clock move
	blocks  []docBlock
}

// docBlock is a ```sh block of curl lines and the output the page shows
// after it: a ```text block is what its `curl -N` (a live query) prints,
// a ```json block what its last other curl line prints.
type docBlock struct {
	line       int
	curls      []string
	sse, reply string
}

// readRedisDoc reads the sections of docs/redis.md with curl lines.
func readRedisDoc(t *testing.T) []docSection {
	t.Helper()
	b, err := os.ReadFile("../../../docs/redis.md")
	if err != nil {
		t.Fatal(err)
	}
	var (
		secs  []docSection
		lang  string
		body  []string
		moved bool
	)
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case lang == "" && strings.HasPrefix(line, "## "):
			secs = append(secs, docSection{title: line[3:]})
			moved = false
		case lang == "" && strings.HasPrefix(line, "```") && len(secs) > 0:
			lang, body = strings.TrimPrefix(line, "```"), nil
		case lang != "" && line == "```":
			s := &secs[len(secs)-1]
			text := strings.Join(body, "\n")
			switch lang {
			case "fenecql":
				for _, st := range body {
					if strings.HasPrefix(st, "-- ") {
						moved = true // a clock move: a real server's clock cannot follow
					}
					if !moved && st != "" {
						s.fenecql = append(s.fenecql, st)
					}
				}
			case "sh":
				s.blocks = append(s.blocks, docBlock{line: i + 1 - len(body), curls: body})
			case "text":
				s.blocks[len(s.blocks)-1].sse = text
			case "json":
				s.blocks[len(s.blocks)-1].reply = text
			}
			lang = ""
		case lang != "":
			body = append(body, line)
		}
	}
	var out []docSection
	for _, s := range secs {
		if len(s.blocks) > 0 {
			out = append(out, s)
		}
	}
	return out
}

var trailingComment = regexp.MustCompile(`\s+--\s.*$`)

// TestRedisDocRecipes runs the curl lines of docs/redis.md's pub/sub,
// stream and cache invalidation recipes, as the page writes them, with
// curl against a real `fenec serve`, after the statements of each
// recipe's fenecql block (which conformance/ replays on its own), and
// checks that they print what the page shows: the page cannot drift.
func TestRedisDocRecipes(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("FENEC_STRICT") == "1" {
			t.Fatal("FENEC_STRICT=1 and no curl: the page's curl lines cannot run")
		}
		t.Skip("no curl: the page's curl lines cannot run")
	}
	secs := readRedisDoc(t)
	var titles []string
	for _, s := range secs {
		titles = append(titles, s.title)
	}
	if got, want := strings.Join(titles, ", "), "Pub/sub, A stream with a consumer, Cache invalidation"; got != want {
		t.Fatalf("sections of docs/redis.md with curl lines: %s; want %s", got, want)
	}
	for _, sec := range secs {
		t.Run(sec.title, func(t *testing.T) {
			p := apitest.Start(t, bin, "--file", t.TempDir()+"/doc.db")
			c := &apitest.Client{T: t, Base: p.URL}
			for _, st := range sec.fenecql {
				c.MustQuery(trailingComment.ReplaceAllString(st, ""))
			}
			host := strings.TrimPrefix(p.URL, "http://")
			for _, blk := range sec.blocks {
				ctx, cancel := context.WithCancel(context.Background())
				var live *syncbuf.Buffer
				var liveCmd *exec.Cmd
				reply := ""
				for _, line := range blk.curls {
					line = strings.ReplaceAll(line, "localhost:8080", host)
					if strings.HasPrefix(line, "curl -N ") {
						live = &syncbuf.Buffer{}
						liveCmd = exec.CommandContext(ctx, "sh", "-c", "exec curl -s"+line[4:])
						liveCmd.Stdout = live
						if err := liveCmd.Start(); err != nil {
							t.Fatal(err)
						}
						if !testwait.Within(testwait.Timeout, func() bool { return strings.Contains(live.String(), `"last":true`) }) {
							t.Fatalf("docs/redis.md:%d: %s: no first rows in 10 s; it printed\n%s", blk.line, line, live)
						}
						continue
					}
					out, err := exec.CommandContext(ctx, "sh", "-c", "curl -sS --fail-with-body"+strings.TrimPrefix(line, "curl")).Output()
					if err != nil {
						t.Fatalf("docs/redis.md:%d: %s: %v\n%s", blk.line, line, err, out)
					}
					reply = string(out)
				}
				if blk.sse != "" {
					want := strings.TrimSpace(blk.sse)
					testwait.Within(testwait.Timeout, func() bool { return len(strings.TrimSpace(live.String())) >= len(want) })
					if got := strings.TrimSpace(live.String()); got != want {
						t.Errorf("docs/redis.md:%d: the live query printed\n%s\nthe page shows\n%s", blk.line, got, want)
					}
				}
				if blk.reply != "" {
					var got, want bytes.Buffer
					if err := json.Compact(&want, []byte(blk.reply)); err != nil {
						t.Fatalf("docs/redis.md:%d: the page's answer: %v", blk.line, err)
					}
					if err := json.Compact(&got, []byte(reply)); err != nil {
						t.Fatalf("docs/redis.md:%d: the answer %q: %v", blk.line, reply, err)
					}
					if got.String() != want.String() {
						t.Errorf("docs/redis.md:%d: the last curl printed\n%s\nthe page shows\n%s", blk.line, got.String(), want.String())
					}
				}
				cancel()
				if liveCmd != nil {
					_ = liveCmd.Wait()
				}
			}
		})
	}
}
