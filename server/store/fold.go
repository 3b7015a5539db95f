package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// foldSet holds the logged changes not yet folded into the tables, already
// coalesced: the fold writes each document, collection and meta record once,
// however often it changed, and never writes a document put and then
// deleted in a collection it drops or creates. Across chunks, a document
// that a later chunk writes again is not written by the earlier one
// (latestDocs). It is owned by the committer goroutine (and by Load before
// that).
type foldSet struct {
	colls   map[string]*collFold
	meta    map[string]*metaFold
	first   uint64    // the seq of the first log record these changes came from
	seq     uint64    // the last logged seq these changes cover
	bytes   int64     // the size of the log records they came from
	since   time.Time // when the oldest of those records was logged
	creates int       // creations so far, to keep their order
	rows    int       // the rows its fold writes or deletes, about: what a fold's time grows with
	resets  bool      // a collection is dropped or created: folded in one transaction
	// room bounds the documents a collection may hold in this chunk, so
	// the size its maps are made at (collLatest.hint): Store.addFold sets
	// it from its first group (0: no bound).
	room int

	// A chunk that creates or drops nothing may be folded in parts
	// (writePart): order lists its documents in the order they are
	// written, and written counts those that parts before have committed.
	order   []docKey
	written int
}

// docKey is a document a chunk's fold writes: its body as the chunk left
// it (nil: delete), which no change alters once the chunk is sealed.
type docKey struct {
	coll string
	id   int64
	body []byte
}

// latestDocs maps each document with a write not yet folded to the last
// chunk that writes it (the puts and deletes it was given, not what it
// keeps of them: a chunk that drops or creates the collection forgets the
// puts before). A chunk's fold writes only the documents whose last
// writer it is (foldSet.seal): every document is then written once, by
// its last chunk, whatever number of chunks it changed in — a job's claim
// and its ack's delete make one row even when a chunk closes between them.
//
// That keeps the fold's contract. Until the later chunk folds, the tables
// hold the document as it was before the earlier chunk (or, after a later
// drop or creation of its collection, as that leaves it), and the log
// keeps every record from the first unfolded one on: the replay at open
// (Load) applies the later chunk's write, which sets the document whole
// (a put or a delete), or its drop or creation. Documents are only ever
// behind the folded seq, never ahead of the records replayed, so the
// replay meets the states it met before the fold.
//
// It is kept by collection name, then id, and each chunk's collFold holds
// its collection's entry: an int64 key per change, not a name hashed
// again. A name's entry stays while the store is open (its map emptied,
// not deleted), so that every chunk's collFold of that name holds the
// same one.
type latestDocs map[string]*collLatest

type collLatest struct {
	name string
	docs latestPages
	// sealed bounds the ids the docs table may hold of the collection:
	// those it held at open (Load) and those the chunks sealed so far put
	// (foldSet.seal). A document of a higher id was put after the last
	// seal, if at all, and no fold has written it, nor will but its last
	// writer's: its delete needs no row (foldSet.apply).
	sealed int64
	// hint is the documents the last chunk sealed held of the
	// collection, up to maxHint: a chunk's map of them is made that big,
	// not grown to it (a relaxed server's chunk holds thousands).
	hint int
}

// maxHint bounds collLatest.hint: after one chunk of a huge batch, each
// chunk made before the next seal would otherwise start with a map as
// big, whatever it then holds.
const maxHint = 1 << 14

// latestPages maps a document's id to its last chunk, in pages of
// pageIDs consecutive ids: a queue's ids are consecutive, so the map is
// pageIDs times smaller than one of ids, and the ids a chunk writes
// share pages, where a map of ids scatters them, each access a cache miss
// once a queue holds many jobs (docs/benchmarks.md, "Figures that were in code comments").
type latestPages map[uint64]*latestPage

const pageIDs = 32

type latestPage struct {
	last [pageIDs]*foldSet
	n    int // entries not nil: the page goes when none is left
}

func (l latestPages) get(id int64) *foldSet {
	if p := l[uint64(id)/pageIDs]; p != nil {
		return p.last[uint64(id)%pageIDs]
	}
	return nil
}

func (l latestPages) set(id int64, f *foldSet) {
	p := l[uint64(id)/pageIDs]
	if p == nil {
		p = &latestPage{}
		l[uint64(id)/pageIDs] = p
	}
	if p.last[uint64(id)%pageIDs] == nil {
		p.n++
	}
	p.last[uint64(id)%pageIDs] = f
}

func (l latestPages) del(id int64) {
	p := l[uint64(id)/pageIDs]
	if p == nil || p.last[uint64(id)%pageIDs] == nil {
		return
	}
	p.last[uint64(id)%pageIDs] = nil
	if p.n--; p.n == 0 {
		delete(l, uint64(id)/pageIDs)
	}
}

// (Ids are taken as unsigned, so that any int64 finds its page and slot.)

// of returns the entry of collection name.
func (l latestDocs) of(name string) *collLatest {
	m := l[name]
	if m == nil {
		m = &collLatest{name: name, docs: latestPages{}}
		l[name] = m
	}
	return m
}

// collFold is what the fold does to one collection name.
type collFold struct {
	reset   bool             // delete the table's rows for this name first (drop or re-create)
	created bool             // insert a collections row (created in this window)
	order   int              // creation order among this window's creates
	schema  []byte           // when created
	nextID  int64            // created: its next id; else the next_id to raise it to (0: none)
	docs    map[int64][]byte // nil body: delete
	// ids lists the ids docs took, in the order they came, for seal to
	// sort: a queue's come nearly in order, which sorts in about one pass
	// where the map's own order takes a full sort. An id may be listed
	// twice (deleted from docs and put again), or be no longer in docs.
	ids    []int64
	latest *collLatest // latestDocs' entry of this name
}

type metaFold struct {
	body    []byte
	expires int64
	del     bool
}

func newFoldSet() *foldSet {
	return &foldSet{colls: map[string]*collFold{}, meta: map[string]*metaFold{}}
}

func (f *foldSet) empty() bool { return f.seq == 0 }

// add folds one log record's changes (ending at seq, size bytes long) into
// f.
// Each document written is recorded in latest as written last by f.
func (f *foldSet) add(changes []Change, seq uint64, size int, latest latestDocs) {
	if f.empty() {
		f.since = time.Now()
		f.first = seq
	}
	for _, c := range changes {
		f.apply(c, latest)
	}
	f.seq = seq
	f.bytes += int64(size)
	f.rows++ // the record, as a row to delete in a version 1 file's log table
}

func (f *foldSet) coll(name string, latest latestDocs) *collFold {
	cf := f.colls[name]
	if cf == nil {
		l := latest.of(name)
		n := l.hint
		if f.room > 0 {
			n = min(n, f.room)
		}
		cf = &collFold{docs: make(map[int64][]byte, n), ids: make([]int64, 0, n), latest: l}
		f.colls[name] = cf
	}
	return cf
}

func (f *foldSet) apply(c Change, latest latestDocs) {
	switch c.Op {
	case OpCreate:
		cf := f.coll(c.Coll, latest)
		cf.unlatest()
		f.creates++
		f.rows++
		f.resets = true
		*cf = collFold{reset: true, created: true, order: f.creates, schema: c.Body, nextID: c.ID, docs: map[int64][]byte{}, ids: cf.ids[:0], latest: cf.latest}
	case OpDrop:
		cf := f.coll(c.Coll, latest)
		cf.unlatest()
		*cf = collFold{reset: true, docs: map[int64][]byte{}, ids: cf.ids[:0], latest: cf.latest}
		f.rows++
		f.resets = true
	case OpPut:
		cf := f.coll(c.Coll, latest)
		body := c.Body
		if body == nil {
			body = []byte{} // nil means delete here
		}
		f.newDoc(cf, c.ID)
		cf.docs[c.ID] = body
		cf.nextID = max(cf.nextID, c.ID+1)
	case OpDelete:
		cf := f.coll(c.Coll, latest)
		if cf.reset || c.ID >= cf.latest.sealed {
			// The table holds nothing of this collection by now, or never
			// held this document (a job put and acked between two folds):
			// forgetting the put is enough — here and in the chunks before,
			// which write the document (if at all) before f empties the
			// table, or, not being its last writer any more, not at all.
			delete(cf.docs, c.ID)
			cf.latest.docs.del(c.ID)
		} else {
			f.newDoc(cf, c.ID)
			cf.docs[c.ID] = nil
		}
	case OpMetaPut:
		f.newMeta(c.Key)
		f.meta[c.Key] = &metaFold{body: c.Body, expires: c.Expires}
	case OpMetaDelete:
		f.newMeta(c.Key)
		f.meta[c.Key] = &metaFold{del: true}
	}
}

// unlatest forgets cf's documents, whose collection its chunk is about to
// drop or create afresh: it no longer writes them, and the chunks before
// need not either, since it empties the collection's table after them.
func (cf *collFold) unlatest() {
	for id := range cf.docs {
		cf.latest.docs.del(id)
	}
}

// newDoc counts a row for the fold to write when id is new to cf, and
// records f as its last writer (latestDocs). A document already in cf has
// f recorded: f is the last chunk while changes are added to it, and a
// drop or creation that forgets its documents (unlatest) empties cf too.
func (f *foldSet) newDoc(cf *collFold, id int64) {
	if _, ok := cf.docs[id]; !ok {
		f.rows++
		cf.latest.docs.set(id, f)
		cf.ids = append(cf.ids, id)
	}
}

// newMeta counts a row for the fold to write when key is new to f.
func (f *foldSet) newMeta(key string) {
	if _, ok := f.meta[key]; !ok {
		f.rows++
	}
}

// write applies f to the tables and records the folded seq, all in tx: at
// open the records up to it are skipped, and those after it replayed. It
// also deletes the folded rows of a version 1 file's log table, in the
// same tx, so that a crash leaves either those rows or their folded
// effect, never both or neither. midway is asked between the documents and
// the meta records (Options.Fault's FaultFold).
func (f *foldSet) write(tx *foldTx, midway func() error) error {
	names := slices.Sorted(maps.Keys(f.colls))
	for _, name := range names {
		if !f.colls[name].reset {
			continue
		}
		if err := tx.exec(`DELETE FROM docs WHERE coll = ?`, name); err != nil {
			return err
		}
		if err := tx.exec(`DELETE FROM collections WHERE name = ?`, name); err != nil {
			return err
		}
	}

	// New collections take seqnos after every existing one, in the order
	// they were created, so Load gives them back in creation order.
	created := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !f.colls[n].created })
	slices.SortFunc(created, func(a, b string) int { return cmp.Compare(f.colls[a].order, f.colls[b].order) })
	var seqno int64
	if len(created) > 0 {
		if err := tx.conn.QueryRowContext(tx.ctx, `SELECT coalesce(max(seqno), 0) FROM collections`).Scan(&seqno); err != nil {
			return err
		}
	}
	for _, name := range created {
		cf := f.colls[name]
		seqno++
		if err := tx.exec(`INSERT INTO collections(name, seqno, schema, next_id) VALUES (?, ?, ?, ?)`,
			name, seqno, nonNil(cf.schema), cf.nextID); err != nil {
			return err
		}
	}

	for _, name := range names {
		cf := f.colls[name]
		if !cf.created && cf.nextID > 0 {
			if err := tx.exec(`UPDATE collections SET next_id = max(next_id, ?) WHERE name = ?`, cf.nextID, name); err != nil {
				return err
			}
		}
	}
	if err := f.writeDocs(tx, f.docOrder()[f.written:]); err != nil {
		return err
	}

	if err := midway(); err != nil {
		return err
	}
	var err error
	for _, key := range slices.Sorted(maps.Keys(f.meta)) {
		m := f.meta[key]
		if m.del {
			err = tx.exec(`DELETE FROM meta WHERE key = ?`, key)
		} else {
			err = tx.exec(`INSERT OR REPLACE INTO meta(key, body, expires) VALUES (?, ?, ?)`, key, nonNil(m.body), m.expires)
		}
		if err != nil {
			return err
		}
	}

	if err := tx.exec(`UPDATE state SET value = max(value, ?) WHERE key = 'folded_seq'`, int64(f.seq)); err != nil {
		return err
	}
	err = tx.exec(`DELETE FROM log WHERE seq <= ?`, int64(f.seq))
	return err
}

// seal fixes the documents f's fold writes, and their order, once f is
// the oldest chunk and its fold begins (fmu held, as latest is): those
// whose last writer is f (latestDocs), by collection, then by ascending
// id, which keeps the B-tree writes sequential. A later chunk may take a
// document over only before this: the order stays as sealed while f is
// written in parts, or written again after a failed try. The ids f puts
// are from now on ones the table may hold (collLatest.sealed).
func (f *foldSet) seal() {
	if f.order != nil {
		return
	}
	n := 0
	for _, cf := range f.colls {
		n += len(cf.docs)
	}
	f.order = make([]docKey, 0, n)
	for _, name := range slices.Sorted(maps.Keys(f.colls)) {
		cf := f.colls[name]
		cf.latest.sealed = max(cf.latest.sealed, cf.nextID)
		cf.latest.hint = min(len(cf.docs), maxHint)
		slices.Sort(cf.ids)
		for i, id := range cf.ids {
			if i > 0 && id == cf.ids[i-1] {
				continue
			}
			if body, ok := cf.docs[id]; ok && cf.latest.docs.get(id) == f {
				f.order = append(f.order, docKey{name, id, body})
			}
		}
		cf.ids = nil
	}
}

// forget removes from latest the documents whose last writer is f, once
// f's fold has committed whole (fmu held): those it wrote (seal), unless
// a later chunk has written them since.
func (f *foldSet) forget() {
	var cf *collFold
	for _, k := range f.order {
		if cf == nil || k.coll != cf.latest.name {
			cf = f.colls[k.coll]
		}
		if cf.latest.docs.get(k.id) == f {
			cf.latest.docs.del(k.id)
		}
	}
}

// docOrder returns the documents f's fold writes, in order (seal).
func (f *foldSet) docOrder() []docKey { return f.order }

// partable says whether f may be folded in parts of n documents, the last
// one with the rest of f: whether it creates and drops nothing and holds
// more than n documents still to write. A part commits documents without
// moving folded_seq past the records they came from, so a crash after it
// leaves the tables holding some of the documents as they are at f's end;
// the replay of those records at the next open (Load) then puts every document
// the chunk touched to that same end. That holds for puts and deletes of
// documents, each of which sets one document whole, but not for a drop
// or a creation: replaying the changes before it onto a collection the
// tables already dropped, or re-created with another schema, fails.
func (f *foldSet) partable(n int) bool {
	return n > 0 && !f.resets && len(f.docOrder())-f.written > n
}

// writePart writes f's next n documents in tx; the caller counts them in
// f.written once tx commits.
func (f *foldSet) writePart(tx *foldTx, n int) error {
	return f.writeDocs(tx, f.docOrder()[f.written:f.written+n])
}

// writeDocs puts or deletes the documents keys names: each run of puts,
// or of deletes, of one collection in statements of many rows (docBatch),
// which costs SQLite and database/sql far less a row than a statement a
// row (BenchmarkFold). In a run of deletes, each stretch of at least
// rangeMin consecutive ids is deleted by one statement of its bounds
// (rangeSQL), the rest as before.
func (f *foldSet) writeDocs(tx *foldTx, keys []docKey) error {
	for len(keys) > 0 {
		k := keys[0]
		put := k.body != nil
		run := 1
		for run < len(keys) && keys[run].coll == k.coll && (keys[run].body != nil) == put {
			run++
		}
		batch := keys[:run]
		if !put {
			var err error
			if batch, err = f.deleteRanges(tx, batch); err != nil {
				return err
			}
		}
		if err := f.writeBatches(tx, batch, put); err != nil {
			return err
		}
		keys = keys[run:]
	}
	return nil
}

// rangeMin is the fewest consecutive ids deleteRanges deletes by their
// bounds: a statement of two bound ids costs less than a row's share of
// a multi-row one from there on (BenchmarkFoldRelaxed).
const rangeMin = 4

// deleteRanges deletes each stretch of at least rangeMin consecutive ids
// of keys (deletes of one collection, ids ascending) by one statement of
// its first and last id, and returns the other keys, in order, for
// writeBatches (in tx.loose: keys is the chunk's sealed order, which
// stays as it is). Where the ids from first to last are all in keys, the
// rows the range holds are exactly those keys name: the same rows go as
// with a statement listing them, but SQLite steps from row to row
// deleting each, with no list to bind and search.
func (f *foldSet) deleteRanges(tx *foldTx, keys []docKey) ([]docKey, error) {
	loose := tx.loose[:0]
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j].id == keys[j-1].id+1 {
			j++
		}
		if j-i >= rangeMin {
			if err := tx.exec(rangeSQL, keys[i].coll, keys[i].id, keys[j-1].id); err != nil {
				return nil, err
			}
		} else {
			loose = append(loose, keys[i:j]...)
		}
		i = j
	}
	tx.loose = loose
	return loose, nil
}

// rangeSQL deletes a collection's documents of ids from ?2 to ?3, both
// included (deleteRanges).
const rangeSQL = `DELETE FROM docs WHERE coll = ?1 AND id BETWEEN ?2 AND ?3`

// writeBatches writes keys (of one collection, all puts or all deletes)
// in statements of docBatch's sizes.
func (f *foldSet) writeBatches(tx *foldTx, keys []docKey, put bool) error {
	args := tx.args
	for _, size := range docBatch {
		for len(keys) >= size {
			args = append(args[:0], keys[0].coll)
			for _, d := range keys[:size] {
				args = append(args, d.id)
				if put {
					args = append(args, d.body)
				}
			}
			// A run of deletes whose ids lie close together is
			// deleted by one scan of their range (docsSQL).
			dense := !put && size > 1 && keys[size-1].id-keys[0].id < int64(2*size)
			if err := tx.exec(docsText[docsKey{put, size, dense}], args...); err != nil {
				return err
			}
			keys = keys[size:]
		}
	}
	clear(args)
	tx.args = args[:0]
	return nil
}

// docBatch is the sizes of writeDocs' statements, largest first: a run is
// written in statements of 32 rows, then of 8, then of one.
var docBatch = []int{32, 8, 1}

// docsText holds writeDocs' statements, one for each size of docBatch
// and each of put, delete and delete of a dense run, made once.
var docsText = func() map[docsKey]string {
	m := map[docsKey]string{}
	for _, n := range docBatch {
		for _, k := range []docsKey{{true, n, false}, {false, n, false}, {false, n, true}} {
			m[k] = docsSQL(k.put, n, k.dense)
		}
	}
	return m
}()

type docsKey struct {
	put   bool
	n     int
	dense bool // a delete whose ids span less than 2n (writeDocs)
}

// docsSQL returns the statement that puts (or deletes) n documents of one
// collection: its parameters are the collection's name, then each
// document's id (and body), ids ascending.
//
// A delete of ids in a list seeks each one from the B-tree's root: the
// delete moves the cursor, and the next id is sought afresh. A dense
// delete also bounds the id by the first and the last of the list, which
// SQLite then reads as one range of the primary key, stepping from row to
// row and deleting those in the list (`+id` keeps it from seeking them):
// the rows between that stay are read and passed, so it pays only where
// the ids lie close together, as a queue's acked jobs do (BenchmarkFold
// shows it). Both delete the same rows.
func docsSQL(put bool, n int, dense bool) string {
	var b strings.Builder
	if put {
		b.WriteString(`INSERT OR REPLACE INTO docs(coll, id, body) VALUES `)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?1, ?, ?)")
		}
		return b.String()
	}
	b.WriteString(`DELETE FROM docs WHERE coll = ?1 AND `)
	if dense {
		b.WriteString("id BETWEEN ?2 AND ?" + strconv.Itoa(n+1) + " AND +")
	}
	b.WriteString("id IN (")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("?" + strconv.Itoa(i+2))
	}
	b.WriteString(")")
	return b.String()
}

// foldTx runs a fold's transaction on the store's connection, with its
// statements prepared once and kept from fold to fold: a chunk's few
// statements cost no parsing (database/sql's Tx would prepare its
// statements anew in each transaction). It is the Store's, under wmu.
type foldTx struct {
	ctx   context.Context
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	args  []any
	loose []docKey // writeDocs' deletes outside a range (deleteRanges)
}

func newFoldTx(conn *sql.Conn) *foldTx {
	return &foldTx{ctx: context.Background(), conn: conn, stmts: map[string]*sql.Stmt{}}
}

// exec runs q, prepared on its first use.
func (tx *foldTx) exec(q string, args ...any) error {
	st := tx.stmts[q]
	if st == nil {
		var err error
		if st, err = tx.conn.PrepareContext(tx.ctx, q); err != nil {
			return err
		}
		tx.stmts[q] = st
	}
	_, err := st.ExecContext(tx.ctx, args...)
	return err
}

// run runs write in one transaction: committed if write succeeds, else
// rolled back whole.
func (tx *foldTx) run(write func() error) error {
	if err := tx.exec("BEGIN"); err != nil {
		return err
	}
	err := write()
	if err == nil {
		err = tx.exec("COMMIT")
	}
	if err != nil {
		// Best effort: a failed COMMIT may have ended the transaction
		// already; the error that matters is err.
		tx.exec("ROLLBACK")
	}
	return err
}

// close closes the statements kept.
func (tx *foldTx) close() error {
	var errs []error
	for _, st := range tx.stmts {
		errs = append(errs, st.Close())
	}
	clear(tx.stmts)
	return errors.Join(errs...)
}

// nonNil keeps an empty body a zero-length blob rather than NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
