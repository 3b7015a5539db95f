package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
	"unicode"
)

// funcs are the helpers every template may use.
var funcs = template.FuncMap{
	"camel":      camel,
	"pascal":     pascal,
	"snake":      snake,
	"upperSnake": func(s string) string { return strings.ToUpper(snake(s)) },
	"json":       toJSON,
	"lines":      lines,
	"args":       args,
	"xml":        xmlText,
	"swiftName":  swiftName,
}

// swiftReserved are Swift's keywords that an identifier may not be without
// backticks (the error code internal is one).
var swiftReserved = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`associatedtype class deinit enum extension fileprivate func import init
		inout internal let operator private precedencegroup protocol public rethrows static struct
		subscript typealias var break case catch continue default defer do else fallthrough for
		guard if in repeat return throw switch where while Any as await false is nil self Self
		super throws true try`) {
		swiftReserved[w] = true
	}
}

// swiftName is s in lowerCamelCase, in backticks when it is a Swift keyword.
func swiftName(s string) string {
	c := camel(s)
	if swiftReserved[c] {
		return "`" + c + "`"
	}
	return c
}

// xmlText escapes text for a C# XML doc comment.
func xmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// args makes a map of its key, value pairs, to hand a template several
// values: {{template "decode" args "type" .Type "expr" "json['a']"}}.
func args(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("args: %d values, not key, value pairs", len(kv))
	}
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("args: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// words splits an identifier, a header name or a path at '-', '_', '/',
// spaces and lower-to-upper case changes: "Fenec-Wait" and "moveClock" are
// two words each.
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = cur[:0]
		}
	}
	runes := []rune(s)
	for i, r := range runes {
		switch {
		case r == '-' || r == '_' || r == '/' || unicode.IsSpace(r):
			flush()
		case unicode.IsUpper(r) && i > 0 && unicode.IsLower(runes[i-1]):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return out
}

func pascal(s string) string {
	var b strings.Builder
	for _, w := range words(s) {
		r := []rune(strings.ToLower(w))
		r[0] = unicode.ToUpper(r[0])
		b.WriteString(string(r))
	}
	return b.String()
}

func camel(s string) string {
	p := []rune(pascal(s))
	if len(p) > 0 {
		p[0] = unicode.ToLower(p[0])
	}
	return string(p)
}

func snake(s string) string {
	ws := words(s)
	for i, w := range ws {
		ws[i] = strings.ToLower(w)
	}
	return strings.Join(ws, "_")
}

// toJSON writes a value as a JSON literal: a string quoted, nil as null.
func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// lines splits a description into its lines, trailing blanks dropped.
func lines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	ls := strings.Split(s, "\n")
	for i, l := range ls {
		ls[i] = strings.TrimRight(l, " \t")
	}
	return ls
}
