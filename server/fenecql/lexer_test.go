package fenecql

import (
	"fmt"
	"strings"
	"testing"
)

func TestLex(t *testing.T) {
	kinds := map[tokKind]string{
		tokIdent: "id", tokPath: "path", tokInt: "int", tokFloat: "float", tokString: "str",
		tokParam: "param", tokClaim: "claim", tokPunct: "p", tokError: "err",
	}
	for _, tc := range []struct{ src, want string }{
		{`a.b.0 a. .5 1.5e3 1e-2 1.x 7E+1`, `path:a.b.0@1 id:a@7 p:.@8 p:.@10 int:5@11 float:1.5e3@13 float:1e-2@19 int:1@24 p:.@25 id:x@26 float:7E+1@28`},
		{"x--c\n<><=>=!=-- 2\n- 2", `id:x@1 p:<>@6 p:<=@8 p:>=@10 p:!=@12 p:-@19 int:2@21`},
		{`$1 $jwt.sub $JWT.org_id 'it''s'`, `param:1@1 claim:sub@4 claim:org_id@13 str:it@25 str:s@29`},
		{`"\u00e9" "a\"b" '' ;`, `str:é@1 str:a"b@10 str:@17 p:;@20`},
		{`_x1 Y_2 @geo`, `id:_x1@1 id:Y_2@5 p:@@9 id:geo@10`},
		{`a $ b`, `id:a@1 err:unknown parameter "$" ($1, $2, ... or $jwt.<claim>)@3`},
	} {
		l := lexer{src: tc.src}
		var got []string
		for tok := l.next(); tok.kind != tokEOF; tok = l.next() {
			got = append(got, fmt.Sprintf("%s:%s@%d", kinds[tok.kind], tok.val, tok.pos))
			if tok.kind != tokError && tc.src[tok.pos-1:tok.end] == "" {
				t.Errorf("%q: token %v has no text", tc.src, tok)
			}
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("lex %q\n got %s\nwant %s", tc.src, g, tc.want)
		}
	}
}
