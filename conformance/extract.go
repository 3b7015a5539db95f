package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Extract reads the ```fenecql blocks of one Markdown page into a Page.
// name is the file's path as errors and Page.Source should show it
// ("docs/queues.md"); Page.Page is its base name without ".md".
//
// Within a block:
//   - a line starting at column 0 starts a statement; indented lines
//     (spaces or tabs) continue it; blank lines are skipped;
//   - a line starting at column 0 with "--" is a full-line comment and ends
//     the statement before it: "-- N ms|s|min|h later" moves the clock,
//     "-- params: [json, ...]" gives the next statement's parameters, any
//     other is ignored;
//   - a trailing "-- → x" (or "-- -> x") on a statement's last line is its
//     expectation: "no row", "refused: <status>", or a JSON scalar; text
//     after a ":" (value, no row) or "," (refused) is commentary. Other
//     trailing comments are kept in the query text.
//
// Errors name the file and line: "docs/queues.md:42: ...".
func Extract(name string, markdown []byte) (Page, error) {
	p := Page{
		Page:   strings.TrimSuffix(path.Base(filepath.ToSlash(name)), ".md"),
		Source: filepath.ToSlash(name),
		Steps:  []Step{},
	}
	x := extractor{name: p.Source}
	lines := strings.Split(strings.ReplaceAll(string(markdown), "\r\n", "\n"), "\n")
	var (
		inFence   bool
		replayed  bool
		fenceChar byte
		fenceLen  int
		fenceInd  int
		openLine  int
	)
	for i, raw := range lines {
		n := i + 1
		if !inFence {
			ind, ch, l, info, ok := fenceOpen(raw)
			if !ok {
				continue
			}
			inFence, fenceChar, fenceLen, fenceInd, openLine = true, ch, l, ind, n
			lang, _, _ := strings.Cut(strings.TrimSpace(info), " ")
			replayed = lang == "fenecql"
			continue
		}
		if fenceClose(raw, fenceChar, fenceLen) {
			if replayed {
				if err := x.endBlock(n); err != nil {
					return Page{}, err
				}
			}
			inFence, replayed = false, false
			continue
		}
		if replayed {
			if err := x.line(n, stripIndent(raw, fenceInd)); err != nil {
				return Page{}, err
			}
		}
	}
	if inFence {
		return Page{}, fmt.Errorf("%s:%d: code block is never closed", p.Source, openLine)
	}
	p.Steps = append(p.Steps, x.steps...)
	return p, nil
}

// ReadDir extracts every *.md file of dir, in name order, and returns the
// pages that hold at least one statement.
func ReadDir(dir string) ([]Page, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var pages []Page
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		file := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		p, err := Extract(file, b)
		if err != nil {
			return nil, err
		}
		if len(p.Steps) > 0 {
			pages = append(pages, p)
		}
	}
	sort.Slice(pages, func(i, j int) bool { return pages[i].Page < pages[j].Page })
	return pages, nil
}

// ReadCases reads the generated cases/*.json files of dir, in name order.
func ReadCases(dir string) ([]Page, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var pages []Page
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var p Page
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		d.DisallowUnknownFields()
		if err := d.Decode(&p); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, s := range p.Steps {
			if err := s.Expect.validate(); err != nil {
				return nil, fmt.Errorf("%s: line %d: %w", f, s.Line, err)
			}
		}
		pages = append(pages, p)
	}
	return pages, nil
}

// Encode renders p as the stable, indented JSON written to cases/.
func Encode(p Page) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// fenceOpen recognises a CommonMark fence opening: up to three spaces, then
// three or more backticks or tildes, then the info string.
func fenceOpen(s string) (indent int, ch byte, n int, info string, ok bool) {
	for indent < len(s) && indent < 4 && s[indent] == ' ' {
		indent++
	}
	if indent > 3 || indent >= len(s) || (s[indent] != '`' && s[indent] != '~') {
		return 0, 0, 0, "", false
	}
	ch = s[indent]
	j := indent
	for j < len(s) && s[j] == ch {
		j++
	}
	n = j - indent
	if n < 3 || (ch == '`' && strings.IndexByte(s[j:], '`') >= 0) {
		return 0, 0, 0, "", false
	}
	return indent, ch, n, s[j:], true
}

func fenceClose(s string, ch byte, n int) bool {
	t := strings.TrimLeft(s, " ")
	if len(s)-len(t) > 3 {
		return false
	}
	t = strings.TrimRight(t, " \t")
	return len(t) >= n && strings.Trim(t, string(ch)) == ""
}

func stripIndent(s string, n int) string {
	for i := 0; i < n && strings.HasPrefix(s, " "); i++ {
		s = s[1:]
	}
	return s
}

type extractor struct {
	name  string
	steps []Step

	cur        *Step    // the statement being read, nil between statements
	curLines   []string // its lines, expectation removed
	expectLine int      // line of its expectation, 0 if none
	params     []any    // from "-- params:", for the next statement
	paramsLine int
}

func (x *extractor) errf(line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", x.name, line, fmt.Sprintf(format, args...))
}

var (
	clockRe   = regexp.MustCompile(`^--\s*(\d+)\s*(ms|s|min|h)\s+later\s*$`)
	clockLike = regexp.MustCompile(`^--\s*\d.*\blater\s*$`)
	paramsRe  = regexp.MustCompile(`^--\s*params\s*:(.*)$`)
)

func (x *extractor) line(n int, s string) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	indented := s[0] == ' ' || s[0] == '\t'
	trimmed := strings.TrimSpace(s)
	if !indented && strings.HasPrefix(trimmed, "--") {
		x.flush()
		return x.fullComment(n, trimmed)
	}
	if indented {
		if x.cur == nil {
			return x.errf(n, "indented line continues no statement (a statement starts at column 0)")
		}
		if strings.HasPrefix(trimmed, "--") {
			if isExpectation(trimmed) {
				return x.errf(n, "expectation on a line of its own: write it after the statement, on its last line")
			}
			x.curLines = append(x.curLines, strings.TrimRight(s, " \t"))
			return nil
		}
		if x.expectLine != 0 {
			return x.errf(x.expectLine, "expectation is not on the statement's last line (line %d continues it)", n)
		}
		return x.addLine(n, s)
	}
	x.flush()
	x.cur = &Step{Line: n}
	if x.params != nil {
		x.cur.Params, x.params = x.params, nil
	}
	return x.addLine(n, s)
}

func (x *extractor) addLine(n int, s string) error {
	code, comment, hasComment := splitComment(s)
	if hasComment && isExpectation(comment) {
		exp, err := parseExpectation(comment)
		if err != nil {
			return x.errf(n, "%v", err)
		}
		if strings.TrimSpace(code) == "" {
			return x.errf(n, "expectation on a line of its own: write it after the statement, on its last line")
		}
		x.cur.Expect, x.expectLine = exp, n
		s = code
	}
	if err := checkSemicolons(code); err != nil {
		return x.errf(n, "%v", err)
	}
	x.curLines = append(x.curLines, strings.TrimRight(s, " \t"))
	return nil
}

func (x *extractor) fullComment(n int, c string) error {
	if isExpectation(c) {
		return x.errf(n, "expectation on a line of its own: write it after the statement, on its last line")
	}
	if m := clockRe.FindStringSubmatch(c); m != nil {
		v, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || v <= 0 {
			return x.errf(n, "clock move %q: want a positive whole number", c)
		}
		mult := map[string]int64{"ms": 1, "s": 1000, "min": 60000, "h": 3600000}[m[2]]
		if x.params != nil {
			return x.errf(x.paramsLine, "params are followed by a clock move, not a statement")
		}
		x.steps = append(x.steps, Step{Line: n, AdvanceMS: v * mult})
		return nil
	}
	if clockLike.MatchString(c) {
		return x.errf(n, "cannot read clock move %q: want \"-- N ms|s|min|h later\"", c)
	}
	if m := paramsRe.FindStringSubmatch(c); m != nil {
		if x.params != nil {
			return x.errf(n, "params given twice for one statement (line %d)", x.paramsLine)
		}
		d := json.NewDecoder(strings.NewReader(m[1]))
		d.UseNumber()
		var ps []any
		if err := d.Decode(&ps); err != nil || d.More() || ps == nil {
			return x.errf(n, "cannot read params %q: want a JSON array", strings.TrimSpace(m[1]))
		}
		x.params, x.paramsLine = ps, n
		return nil
	}
	return nil
}

func (x *extractor) flush() {
	if x.cur == nil {
		return
	}
	x.cur.Query = strings.Join(x.curLines, "\n")
	x.steps = append(x.steps, *x.cur)
	x.cur, x.curLines, x.expectLine = nil, nil, 0
}

func (x *extractor) endBlock(n int) error {
	x.flush()
	if x.params != nil {
		return x.errf(x.paramsLine, "params are followed by no statement in their block")
	}
	return nil
}

// splitComment splits a line at its first "--" outside a string literal.
func splitComment(s string) (code, comment string, ok bool) {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			return s[:i], s[i:], true
		}
	}
	return s, "", false
}

// checkSemicolons refuses a ";" that is not the statement's last character:
// a step is one statement.
func checkSemicolons(code string) error {
	var quote byte
	t := strings.TrimRight(code, " \t")
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == ';' && i != len(t)-1:
			return fmt.Errorf("one statement a line: \";\" inside a statement")
		}
	}
	return nil
}

func expectationBody(comment string) (string, bool) {
	t := strings.TrimSpace(strings.TrimPrefix(comment, "--"))
	for _, arrow := range []string{"→", "->"} {
		if strings.HasPrefix(t, arrow) {
			return strings.TrimSpace(strings.TrimPrefix(t, arrow)), true
		}
	}
	return "", false
}

func isExpectation(comment string) bool {
	_, ok := expectationBody(comment)
	return ok
}

var (
	numberRe  = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`)
	refusedRe = regexp.MustCompile(`^refused\s*:\s*([0-9]+)\s*(,.*)?$`)
)

// parseExpectation reads the text of a "-- → x" comment.
func parseExpectation(comment string) (*Expect, error) {
	body, _ := expectationBody(comment)
	if body == "" {
		return nil, fmt.Errorf("empty expectation: want a JSON value, \"no row\" or \"refused: <status>\"")
	}
	if strings.HasPrefix(body, "no row") {
		rest := strings.TrimSpace(strings.TrimPrefix(body, "no row"))
		if rest != "" && rest[0] != ':' && rest[0] != ',' {
			return nil, fmt.Errorf("cannot read expectation %q: \"no row\" may be followed only by \": commentary\"", body)
		}
		return &Expect{NoRow: true}, nil
	}
	if strings.HasPrefix(body, "refused") {
		m := refusedRe.FindStringSubmatch(body)
		if m == nil {
			return nil, fmt.Errorf("cannot read expectation %q: want \"refused: <status>[, commentary]\"", body)
		}
		st, _ := strconv.Atoi(m[1])
		e := &Expect{Refused: st}
		if err := e.validate(); err != nil {
			return nil, err
		}
		return e, nil
	}
	lit, rest, err := scalarPrefix(body)
	if err != nil {
		return nil, err
	}
	rest = strings.TrimSpace(rest)
	if rest != "" && rest[0] != ':' {
		return nil, fmt.Errorf("cannot read expectation %q: a value may be followed only by \": commentary\"", body)
	}
	return &Expect{Value: json.RawMessage(lit)}, nil
}

// scalarPrefix reads the JSON scalar at the start of s.
func scalarPrefix(s string) (lit, rest string, err error) {
	bad := fmt.Errorf("cannot read expectation %q: want a JSON value (number, \"string\", true, false, null), \"no row\" or \"refused: <status>\"", s)
	switch {
	case s[0] == '"':
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '"':
				if !json.Valid([]byte(s[:i+1])) {
					return "", "", bad
				}
				return s[:i+1], s[i+1:], nil
			}
		}
		return "", "", bad
	case s[0] == '-' || (s[0] >= '0' && s[0] <= '9'):
		m := numberRe.FindString(s)
		if m == "" || (len(m) < len(s) && isWordByte(s[len(m)])) {
			return "", "", bad
		}
		return m, s[len(m):], nil
	}
	for _, w := range []string{"true", "false", "null"} {
		if strings.HasPrefix(s, w) && (len(s) == len(w) || !isWordByte(s[len(w)])) {
			return w, s[len(w):], nil
		}
	}
	return "", "", bad
}

func isWordByte(c byte) bool {
	return c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// CaseFiles returns the case files the docs in docsDir make, by file name
// ("queues.json"), each page's Source being "docs/<page>.md" wherever the
// docs are read from. cmd/extract writes them to cases/.
func CaseFiles(docsDir string) (map[string][]byte, error) {
	pages, err := ReadDir(docsDir)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, p := range pages {
		p.Source = "docs/" + p.Page + ".md"
		b, err := Encode(p)
		if err != nil {
			return nil, err
		}
		files[p.Page+".json"] = b
	}
	return files, nil
}
