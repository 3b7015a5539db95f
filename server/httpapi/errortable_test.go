package httpapi

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// TestErrorTableInDocs: docs/http.md's table of error codes lists every
// code the server sends, each with the status statuses gives it, and no
// code the server does not send — so a code added to openapi.yaml and
// statuses without its row, or a row left behind, fails here.
func TestErrorTableInDocs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "http.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\|").FindAllSubmatch(b, -1)
	documented := map[gen.ErrorCode]int{}
	for _, r := range rows {
		status, _ := strconv.Atoi(string(r[2]))
		code := gen.ErrorCode(r[1])
		if _, twice := documented[code]; twice {
			t.Errorf("docs/http.md lists %s twice", code)
		}
		documented[code] = status
	}
	for code, status := range statuses {
		switch got, ok := documented[code]; {
		case !ok:
			t.Errorf("docs/http.md's error table has no row for %s (%d)", code, status)
		case got != status:
			t.Errorf("docs/http.md gives %s the status %d; the server sends %d", code, got, status)
		}
	}
	for code := range documented {
		if _, ok := statuses[code]; !ok {
			t.Errorf("docs/http.md lists %s, which the server never sends", code)
		}
	}
}
