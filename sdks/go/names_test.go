package fenecdb_test

import (
	"context"
	"go/ast"
	godoc "go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
)

// publicAPI reads the package's exported declarations from its source, as
// godoc shows them.
func publicAPI(t *testing.T) *godoc.Package {
	t.Helper()
	fset := token.NewFileSet()
	paths, _ := filepath.Glob("*.go")
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := godoc.NewFromFiles(fset, files, "github.com/fenecdb/fenec/sdks/go")
	if err != nil {
		t.Fatal(err)
	}
	return pkg
}

// TestNamesOfOneWordPerIdea reads the public API for the names of
// docs/sdks.md's "One word per idea" table (Go's column), and checks that
// each former name is kept, marked // Deprecated: as godoc and gopls read
// it.
func TestNamesOfOneWordPerIdea(t *testing.T) {
	pkg := publicAPI(t)
	types := map[string]*godoc.Type{}
	for _, ty := range pkg.Types {
		types[ty.Name] = ty
	}
	funcs := map[string]*godoc.Func{}
	for _, f := range pkg.Funcs {
		funcs[f.Name] = f
	}
	for _, ty := range pkg.Types {
		for _, f := range ty.Funcs { // constructors, grouped under their type
			funcs[f.Name] = f
		}
	}
	methods := func(typ string) map[string]*godoc.Func {
		m := map[string]*godoc.Func{}
		if ty := types[typ]; ty != nil {
			for _, f := range ty.Methods {
				m[f.Name] = f
			}
		}
		return m
	}
	deprecated := func(text string) bool { return strings.Contains(text, "\nDeprecated: ") }

	// The builder's type is Query; Collection is its deprecated alias.
	if types["Query"] == nil {
		t.Error("no type Query (the builder's type)")
	}
	if ty := types["Collection"]; ty == nil || !deprecated(ty.Doc) {
		t.Error("the type Collection is not kept as a deprecated alias of Query")
	}
	// A statement rendered, not sent: Render<End>.
	q := methods("Query")
	for _, name := range []string{"RenderRows", "RenderFirst", "RenderCount", "RenderInsert", "RenderInsertMany", "RenderUpdate", "RenderDelete"} {
		if q[name] == nil {
			t.Errorf("no method Query.%s", name)
		}
	}
	// Raw condition, value expression, increment: the functions Raw, Expr
	// and Inc of the types Condition, Expression and Increment.
	for fn, typ := range map[string]string{"Raw": "Condition", "Expr": "Expression", "Inc": "Increment"} {
		f := funcs[fn]
		if f == nil || types[typ] == nil {
			t.Errorf("no function %s or no type %s", fn, typ)
			continue
		}
		if res := f.Decl.Type.Results; res == nil || len(res.List) != 1 || res.List[0].Type.(*ast.Ident).Name != typ {
			t.Errorf("%s does not return a %s", fn, typ)
		}
	}
	// The worker: OwnerPrefix, OnError func(error) told a *WorkerError,
	// RunUntilEmpty(ctx).
	fields := map[string]string{}
	if ty := types["WorkerOptions"]; ty != nil {
		for _, f := range ty.Decl.Specs[0].(*ast.TypeSpec).Type.(*ast.StructType).Fields.List {
			for _, n := range f.Names {
				fields[n.Name] = types2string(f.Type)
			}
		}
	}
	if fields["OwnerPrefix"] != "string" || fields["OnError"] != "func(error)" {
		t.Errorf("WorkerOptions' OwnerPrefix and OnError: %q, %q; want string and func(error)", fields["OwnerPrefix"], fields["OnError"])
	}
	if types["WorkerError"] == nil {
		t.Error("no type WorkerError")
	}
	if w := methods("Worker"); w["Run"] == nil || w["RunUntilEmpty"] == nil {
		t.Error("no Worker.Run and Worker.RunUntilEmpty")
	}
	// Former names, kept and marked.
	for _, name := range []string{"DB", "WriteOption"} {
		if ty := types[name]; ty == nil || !deprecated(ty.Doc) {
			t.Errorf("%s is not kept as a deprecated alias", name)
		}
	}
	if f := funcs["New"]; f == nil || !deprecated(f.Doc) {
		t.Error("New is not kept as a deprecated alias of Connect")
	}
	if f := methods("Client")["Collection"]; f == nil || !deprecated(f.Doc) {
		t.Error("Client.Collection is not kept as a deprecated alias of From")
	}
}

func types2string(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.FuncType:
		var ps []string
		for _, p := range e.Params.List {
			ps = append(ps, types2string(p.Type))
		}
		return "func(" + strings.Join(ps, ", ") + ")"
	case *ast.StarExpr:
		return "*" + types2string(e.X)
	case *ast.SelectorExpr:
		return types2string(e.X) + "." + e.Sel.Name
	}
	return "?"
}

// TestDeprecatedNamesStillWork: the former names are the same things as
// the new ones, and the shortest lease is 100 ms.
func TestDeprecatedNamesStillWork(t *testing.T) {
	var db *fenecdb.DB
	db, err := fenecdb.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	var c fenecdb.Collection = db.Collection("jobs").Where("id", 1)
	var q fenecdb.Query = c
	s, err := q.RenderRows()
	if err != nil || s.Query != "get jobs where id = $1" {
		t.Fatalf("through the former names: %q %v", s.Query, err)
	}
	var opt fenecdb.WriteOption = fenecdb.Timeout(time.Second)
	var _ fenecdb.CallOption = opt
	h := func(context.Context, fenecdb.Job) error { return nil }
	if _, err := fenecdb.NewWorker(c, h, fenecdb.WorkerOptions{Lease: 99 * time.Millisecond}); err == nil {
		t.Error("a lease of 99ms was taken, want at least 100ms")
	}
	if _, err := fenecdb.NewWorker(db.From("jobs"), h, fenecdb.WorkerOptions{Lease: 100 * time.Millisecond}); err != nil {
		t.Errorf("a lease of 100ms: %v", err)
	}
}
