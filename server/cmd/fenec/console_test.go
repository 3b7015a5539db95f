package main

import (
	"net/http"
	"testing"
)

// TestConsoleFlag: `fenec serve` serves the console at /console, and not
// with --no-console (then /console is the API's 404).
func TestConsoleFlag(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want int
	}{{nil, 200}, {[]string{"--no-console"}, 404}} {
		p, _ := start(t, append([]string{"--file", ":memory:"}, tt.args...)...)
		resp, err := http.Get(p.URL + "/console")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%v: GET /console %d, want %d", tt.args, resp.StatusCode, tt.want)
		}
	}
}
