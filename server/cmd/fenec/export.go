package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// An export is JSON lines (docs/operations.md, "Export and import"): for
// each collection a schema line, {"collection": name, "fields": [{"name",
// "type", "index"}]} — what `create collection` needs — then its documents,
// one a line, as `get` answers them, id first. A document line is told
// from a schema line by its "id".

// schemaLine is an export's line for a collection.
type schemaLine struct {
	Collection string       `json:"collection"`
	Fields     []fieldEntry `json:"fields"`
}

type fieldEntry struct {
	Name  string  `json:"name"`
	Type  string  `json:"type"`
	Index *string `json:"index,omitempty"`
}

// createStatement is the FenecQL that makes the collection again.
func (s schemaLine) createStatement() string {
	var b strings.Builder
	b.WriteString("create collection if not exists " + s.Collection + " (")
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Name + " " + f.Type)
		if f.Index != nil && *f.Index != "" {
			b.WriteString(" @" + *f.Index)
		}
	}
	b.WriteString(")")
	return b.String()
}

// exportPage is how many documents one `get` of the export reads.
const exportPage = 2000

// exportCmd is `fenec export`.
func exportCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fenec export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var r remote
	r.define(fs, "from", "to export")
	var only []string
	fs.Func("collection", "export only this `collection`; repeatable (default: every collection)", func(v string) error {
		only = append(only, v)
		return nil
	})
	out := fs.String("out", "", "the `file` to write (default: stdout)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: fenec export --from URL [--collection C] [--out FILE]\n\nWrites collections and their documents as JSON lines (fenec import reads\nthem). Documents are read page by page while writes go on: for a copy\nof one moment, use fenec backup.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := r.parse(fs, args, "from"); err != nil {
		return err
	}
	ctx := context.Background()
	colls, err := listCollections(ctx, &r)
	if err != nil {
		return err
	}
	if len(only) > 0 {
		var picked []collectionInfo
		for _, name := range only {
			found := false
			for _, c := range colls {
				if c.Name == name {
					picked, found = append(picked, c), true
				}
			}
			if !found {
				return fmt.Errorf("--collection %s: the server has no such collection", name)
			}
		}
		colls = picked
	}
	w := stdout
	var f *os.File
	if *out != "" {
		if f, err = os.Create(*out); err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	p := newProgress(stderr)
	total, start := 0, time.Now()
	for _, c := range colls {
		line, err := json.Marshal(schemaLine{Collection: c.Name, Fields: c.Fields})
		if err != nil {
			return err
		}
		bw.Write(append(line, '\n'))
		n, err := exportDocs(ctx, &r, c, bw, func(n int) {
			p.show("exporting %s: %d of %d documents", c.Name, n, c.Documents)
		})
		if err != nil {
			return err
		}
		total += n
	}
	p.done()
	if err := bw.Flush(); err != nil {
		return err
	}
	if f != nil {
		if err := f.Sync(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "exported %d collections, %d documents from %s to %s in %.1fs\n", len(colls), total, r.url, *out, time.Since(start).Seconds())
	}
	return nil
}

type collectionInfo struct {
	Name      string       `json:"name"`
	Documents int          `json:"documents"`
	Fields    []fieldEntry `json:"fields"`
}

func listCollections(ctx context.Context, r *remote) ([]collectionInfo, error) {
	resp, err := r.request(ctx, "GET", "/collections", nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, answerError("GET /collections", resp)
	}
	var out struct {
		Collections []collectionInfo `json:"collections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("GET /collections: %w", err)
	}
	return out.Collections, nil
}

// exportDocs writes c's documents, in id order, each as the server
// answered it (its bytes kept: numbers, timestamps and json as they
// are), and returns how many. It reads a window of exportPage ids at a
// time by id lookup (`where id in $1`), which costs the window, where a
// page of `where id > $1` scans from the collection's first id; past a
// window with no document it asks for the next id there is.
func exportDocs(ctx context.Context, r *remote, c collectionInfo, w io.Writer, shown func(int)) (int, error) {
	n := 0
	next, ok, err := nextID(ctx, r, c.Name, 0)
	for err == nil && ok {
		ids := make([]int64, exportPage)
		for i := range ids {
			ids[i] = next + int64(i)
		}
		var rows []json.RawMessage
		if rows, err = query(ctx, r, "get "+c.Name+" where id in $1 order id", ids); err != nil {
			break
		}
		for _, row := range rows {
			if _, err := w.Write(append(row, '\n')); err != nil {
				return n, err
			}
		}
		n += len(rows)
		shown(n)
		last := next + exportPage - 1
		if len(rows) > 0 {
			next = last + 1
			continue
		}
		next, ok, err = nextID(ctx, r, c.Name, last)
	}
	if err != nil {
		return n, fmt.Errorf("reading %s's documents: %w", c.Name, err)
	}
	return n, nil
}

// nextID returns the least id of coll above after, if there is one.
func nextID(ctx context.Context, r *remote, coll string, after int64) (int64, bool, error) {
	rows, err := query(ctx, r, "get "+coll+" select id where id > $1 order id limit 1", after)
	if err != nil || len(rows) == 0 {
		return 0, false, err
	}
	var doc struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(rows[0], &doc); err != nil || doc.ID <= after {
		return 0, false, fmt.Errorf("the next id after %d: %s", after, rows[0])
	}
	return doc.ID, true, nil
}

// query runs one read through POST /query and returns its rows, each as
// the server wrote it.
func query(ctx context.Context, r *remote, q string, params ...any) ([]json.RawMessage, error) {
	body, err := json.Marshal(map[string]any{"query": q, "params": params})
	if err != nil {
		return nil, err
	}
	resp, err := r.request(ctx, "POST", "/query", bytes.NewReader(body), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, answerError("POST /query ("+q+")", resp)
	}
	var rows []json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// The chunks of an import: at most this many documents, or about this
// many bytes (well under the server's --max-body default of 16 MB).
const (
	importDocs  = 2000
	importBytes = 4 << 20
)

// importCmd is `fenec import`: an export written into a server through
// /batch, a chunk a request, each under an Idempotency-Key made from the
// file up to and with that chunk. Run again after it was stopped, it sends
// the same chunks under the same keys: those the server took are
// answered from its keys (Idempotent-Replayed), unrun, and the rest run.
func importCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fenec import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var r remote
	r.define(fs, "to", "to import into")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: fenec import --to URL FILE\n\nWrites an export (fenec export) into a server through /batch, in chunks,\neach under its own Idempotency-Key: run it again after an interruption\nand the chunks the server took are replayed, not written twice.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	file, err := fileArg(fs, args, "name the export file: fenec import --to URL FILE")
	if err != nil {
		return err
	}
	if err := r.check("to"); err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	im := &importer{r: &r, ctx: context.Background(), p: newProgress(stderr), size: fi.Size(), file: file}
	start := time.Now()
	if err := im.run(f); err != nil {
		im.p.done()
		return err
	}
	im.p.done()
	fmt.Fprintf(stdout, "imported %s into %s: %d collections, %d documents in %d chunks (%d replayed: taken before); %.1fs\n",
		file, r.url, im.colls, im.docs, im.chunks, im.replayed, time.Since(start).Seconds())
	return nil
}

type importer struct {
	r    *remote
	ctx  context.Context
	p    *progress
	file string
	size int64
	read int64

	coll    *schemaLine // the collection the document lines go to
	create  bool        // its create statement goes with the next chunk
	docs    int         // documents sent
	pending [][]byte    // the chunk's documents
	bytes   int
	key     [32]byte // the chain the chunks' keys come from
	line    int

	colls, chunks, replayed int
}

func (im *importer) run(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		im.line++
		raw := bytes.TrimSpace(sc.Bytes())
		im.read += int64(len(sc.Bytes()) + 1)
		if len(raw) == 0 {
			continue
		}
		var probe struct {
			ID         *json.RawMessage `json:"id"`
			Collection *string          `json:"collection"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return fmt.Errorf("%s:%d: not a JSON object: %v", im.file, im.line, err)
		}
		if probe.ID == nil {
			var s schemaLine
			if err := json.Unmarshal(raw, &s); err != nil || probe.Collection == nil || s.Collection == "" || len(s.Fields) == 0 {
				return fmt.Errorf("%s:%d: a line without an id must be a collection's schema ({\"collection\", \"fields\"})", im.file, im.line)
			}
			if err := im.flush(); err != nil {
				return err
			}
			im.coll, im.create = &s, true
			im.colls++
			continue
		}
		if im.coll == nil {
			return fmt.Errorf("%s:%d: a document before any collection's schema line", im.file, im.line)
		}
		im.pending = append(im.pending, append([]byte(nil), raw...))
		im.bytes += len(raw)
		if len(im.pending) >= importDocs || im.bytes >= importBytes {
			if err := im.flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", im.file, im.line+1, err)
	}
	return im.flush()
}

// flush sends the chunk: the collection's create statement (first chunk
// of a collection, or one with no documents), then one put of its
// documents.
func (im *importer) flush() error {
	if im.coll == nil || (!im.create && len(im.pending) == 0) {
		return nil
	}
	var stmts []map[string]any
	if im.create {
		stmts = append(stmts, map[string]any{"query": im.coll.createStatement()})
	}
	if len(im.pending) > 0 {
		docs := append([]byte{'['}, bytes.Join(im.pending, []byte{','})...)
		docs = append(docs, ']')
		stmts = append(stmts, map[string]any{"query": "put " + im.coll.Collection + " $1", "params": []json.RawMessage{docs}})
	}
	body, err := json.Marshal(map[string]any{"statements": stmts})
	if err != nil {
		return err
	}
	// The key chains the file's chunks: the same file cut the same way
	// gives the same keys, another file other ones.
	h := sha256.New()
	h.Write(im.key[:])
	h.Write(body)
	copy(im.key[:], h.Sum(nil))
	key := "fenec-import-" + hex.EncodeToString(im.key[:16])
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		resp, err = im.r.request(im.ctx, "POST", "/batch", bytes.NewReader(body), map[string]string{"Idempotency-Key": key})
		// Unavailable (a store failure, an election) and no_leader are
		// worth a retry; the key keeps a retry from writing twice.
		if err == nil && resp.StatusCode != http.StatusServiceUnavailable {
			break
		}
		if attempt == 5 {
			break
		}
		if resp != nil {
			resp.Body.Close()
		}
		time.Sleep(time.Duration(200<<attempt) * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("%s, the chunk ending at line %d: %w", im.file, im.line, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s, the chunk ending at line %d: %w", im.file, im.line, answerError("POST /batch", resp))
	}
	io.Copy(io.Discard, resp.Body)
	if resp.Header.Get("Idempotent-Replayed") == "true" {
		im.replayed++
	}
	im.chunks++
	im.docs += len(im.pending)
	im.pending, im.bytes, im.create = im.pending[:0], 0, false
	if im.size > 0 {
		im.p.show("importing %s: %d documents, %d%%", im.file, im.docs, im.read*100/im.size)
	}
	return nil
}
