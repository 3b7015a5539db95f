package engine

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/fenecdb/fenec/server/fenecql"
)

// Field is one declared field of a collection.
type Field struct {
	Name  string
	Type  fenecql.Type
	Index fenecql.IndexKind
	// TTL is the field's @ttl in milliseconds, 0 for none: a document
	// lapses once the field's time plus TTL is no longer after now()
	// (docs/fenecql.md, Expiry).
	TTL int64
}

// schema is a collection's fields; documents point at it to read
// themselves by name.
type schema struct {
	fields []Field
	byName map[string]int
	// star is the columns of `returning *` and `get` without select: id
	// and every field. Answers share it, and only read it.
	star []string
	// starKeys[k] is star[k] as a JSON object's key, quoted and with its
	// colon: written once here rather than escaped again for every
	// document encoded (appendDoc).
	starKeys [][]byte
	// l is where the fields sit in a document's block (row.go).
	l layout
}

func newSchema(fields []Field) *schema {
	s := &schema{fields: fields, byName: make(map[string]int, len(fields)), star: make([]string, 0, len(fields)+1), l: newLayout(fields)}
	s.star = append(s.star, "id")
	for i, f := range fields {
		s.byName[f.Name] = i
		s.star = append(s.star, f.Name)
	}
	for _, name := range s.star {
		s.starKeys = append(s.starKeys, append(fenecql.AppendJSONText(nil, name), ':'))
	}
	return s
}

// Doc is one document: its id and a value per declared field, the values
// held as one encoded block (row.go). A Doc is never changed once built;
// a write makes a new one.
type Doc struct {
	ID int64
	s  *schema
	// p is the block: in the same allocation as the Doc for all but a
	// large document (newBlock), nil for a schema of no fields.
	p *byte
}

// Field reads a field by name; "id" is the document's id. It makes *Doc a
// fenecql.Row.
func (d *Doc) Field(name string) fenecql.Value {
	if i, ok := d.s.byName[name]; ok {
		return d.val(i)
	}
	if name == "id" {
		return fenecql.Int(d.ID)
	}
	return fenecql.Null
}

// MaxID is the highest id a document may have: 2^53 - 1, the largest
// integer every JSON client reads exactly (docs/fenecql.md, Types). A new
// id one past it is refused, never wrapped round.
const MaxID = 1<<53 - 1

// Collection is a named set of documents with their indexes.
type Collection struct {
	Name    string
	s       *schema
	docs    docMap
	nextID  int64
	indexes []index // one per indexed field, and the queue's counts
	byField map[int]index
	unique  []int       // the @unique fields, for checkUnique to visit without a map's walk
	queue   *queueIndex // nil: not a queue (queue.go)
	// ttls are the @ttl fields, each with a sorted index of its times
	// that the sweeper walks from the oldest (ttl.go).
	ttls []ttlField
	// gen counts the changes to the documents: a read that let a writer
	// in goes on only if it has not moved (yield.go).
	gen uint64
	// touched is []string{Name}, the list a transaction that changes
	// only this collection tells its subscribers (tx.touch); read only.
	touched []string
	// ev is the collection's eviction state under a memory limit, nil
	// without one (evict.go).
	ev *collEvict
}

func newCollection(name string, fields []Field) *Collection {
	c := &Collection{
		Name:    name,
		s:       newSchema(fields),
		nextID:  1,
		byField: map[int]index{},
		touched: []string{name},
	}
	for i, f := range fields {
		var x index
		switch f.Index {
		case fenecql.IndexSorted:
			x = newSortedIndex(i, f.Type)
		case fenecql.IndexHash:
			x = newHashIndex(i, false, f.Type)
		case fenecql.IndexUnique:
			x = newHashIndex(i, true, f.Type)
			c.unique = append(c.unique, i)
		case fenecql.IndexGeo:
			x = newGeoIndex(i)
		default:
			continue
		}
		c.indexes = append(c.indexes, x)
		c.byField[i] = x
	}
	for i, f := range fields {
		if f.TTL <= 0 {
			continue
		}
		x, ok := c.byField[i].(*sortedIndex)
		if !ok {
			// Kept for the sweeper only: the planner does not see it, so a
			// @ttl changes no plan.
			x = newSortedIndex(i, f.Type)
			c.indexes = append(c.indexes, x)
		}
		c.ttls = append(c.ttls, ttlField{field: i, ms: f.TTL, times: x})
	}
	if c.queue = newQueueIndex(c.s); c.queue != nil {
		if x, ok := c.byField[c.queue.runAt].(*sortedIndex); ok {
			c.queue.useSorted(x)
		}
		c.indexes = append(c.indexes, c.queue)
	}
	return c
}

// Fields returns the declared fields, in order.
func (c *Collection) Fields() []Field { return c.s.fields }

// Len returns the number of documents.
func (c *Collection) Len() int { return c.docs.Len() }

// get returns the document of id (nil if none), read back from the file
// when it was evicted (evict.go).
func (c *Collection) get(id int64) *Doc {
	d, _ := c.docs.Get(id)
	if d == evictedDoc {
		return c.readOne(id)
	}
	return d
}

// field returns a field's position, or -1.
func (c *Collection) field(name string) int {
	if i, ok := c.s.byName[name]; ok {
		return i
	}
	return -1
}

// set stores d, replacing any document of its id, and returns the one
// replaced (nil if none).
func (c *Collection) set(d *Doc) *Doc {
	c.gen++
	old, _ := c.docs.Set(d.ID, d)
	if c.ev != nil {
		// An evicted row is read back: its index entries go by its
		// values, and an undo puts it back.
		wasEvicted := old == evictedDoc
		if wasEvicted {
			old = c.readOne(d.ID)
		}
		c.ev.wrote(old, d, wasEvicted)
	}
	for _, x := range c.indexes {
		if old != nil {
			if u, ok := x.(unmoved); ok && u.same(old, d) {
				continue
			}
			x.remove(old)
		}
		x.add(d)
	}
	if d.ID >= c.nextID && c.nextID <= MaxID {
		// A document loaded from an older file may hold an id past MaxID;
		// the next id then stays past it, and a put without an id is
		// refused rather than wrapped round.
		c.nextID = min(d.ID, MaxID) + 1
	}
	return old
}

// delete removes the document of id and returns it (nil if none).
func (c *Collection) delete(id int64) *Doc {
	old, ok := c.docs.Delete(id)
	if !ok {
		return nil
	}
	if c.ev != nil {
		wasEvicted := old == evictedDoc
		if wasEvicted {
			if old = c.readOne(id); old == nil {
				// Not in the file (logged): its index entries stay.
				c.ev.evicted--
				c.gen++
				return nil
			}
		}
		c.ev.removed(old, wasEvicted)
	}
	c.gen++
	for _, x := range c.indexes {
		x.remove(old)
	}
	return old
}

// uniqueHolder returns the id of another live document holding v in the
// @unique field f, or 0.
func (c *Collection) uniqueHolder(f int, v fenecql.Value, self int64) int64 {
	x, ok := c.byField[f].(*hashIndex)
	if !ok || !x.unique {
		return 0
	}
	var buf [4]int64
	for _, id := range x.appendIDs(buf[:0], v) {
		if id != self {
			return id
		}
	}
	return 0
}

// schemaJSON is how a collection's schema is persisted.
type schemaJSON struct {
	Fields []fieldJSON `json:"fields"`
}

type fieldJSON struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Index string `json:"index,omitempty"`
	TTLMS int64  `json:"ttl_ms,omitempty"`
}

func encodeSchema(fields []Field) []byte {
	var s schemaJSON
	for _, f := range fields {
		fj := fieldJSON{Name: f.Name, Type: f.Type.String(), TTLMS: f.TTL}
		if f.Index != fenecql.NoIndex {
			fj.Index = f.Index.String()
		}
		s.Fields = append(s.Fields, fj)
	}
	b, _ := json.Marshal(s)
	return b
}

func decodeSchema(b []byte) ([]Field, error) {
	var s schemaJSON
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("bad schema: %w", err)
	}
	fields := make([]Field, 0, len(s.Fields))
	for _, fj := range s.Fields {
		t, ok := fenecql.TypeByName(fj.Type)
		if !ok {
			return nil, fmt.Errorf("bad schema: field %s has unknown type %q", fj.Name, fj.Type)
		}
		f := Field{Name: fj.Name, Type: t, TTL: fj.TTLMS}
		if f.TTL < 0 || f.TTL > 0 && t != fenecql.TypeTimestamp {
			return nil, fmt.Errorf("bad schema: field %s has a @ttl of %d ms on a %s", fj.Name, fj.TTLMS, t)
		}
		if fj.Index != "" {
			if f.Index, ok = fenecql.IndexByName(fj.Index); !ok {
				return nil, fmt.Errorf("bad schema: field %s has unknown index %q", fj.Name, fj.Index)
			}
		}
		fields = append(fields, f)
	}
	return fields, nil
}

// appendDoc appends a document as persisted to b: the object {"id": …,
// field: value, …} (nulls left out) written straight into the buffer
// rather than built as a fenecql.Object first.
func appendDoc(b []byte, d *Doc) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, d.ID, 10)
	var buf fieldBuf
	for f, v := range d.vals(&buf) {
		if !v.IsNull() {
			b = append(append(b, ','), d.s.starKeys[f+1]...)
			b = fenecql.AppendJSON(b, v)
		}
	}
	return append(b, '}')
}

func (c *Collection) decodeDoc(b []byte) (*Doc, error) {
	v, err := fenecql.ParseJSON(b)
	if err != nil {
		return nil, err
	}
	o := v.Object()
	if o == nil {
		return nil, fmt.Errorf("bad document in %s: not an object", c.Name)
	}
	var id int64
	var buf fieldBuf
	vals := c.s.blank(&buf)
	for i, k := range o.Keys {
		if k == "id" {
			id = o.Vals[i].Int()
			continue
		}
		f := c.field(k)
		if f < 0 {
			return nil, fmt.Errorf("bad document in %s: no field %s", c.Name, k)
		}
		if vals[f], err = storedValue(o.Vals[i], c.s.fields[f].Type); err != nil {
			// A timestamp past the years 0000..9999, written before they
			// were refused, loads as it was: the file still opens.
			if ms, ok := fenecql.ParseStoredTime(o.Vals[i].Text()); ok && c.s.fields[f].Type == fenecql.TypeTimestamp {
				vals[f] = fenecql.Time(ms)
				continue
			}
			return nil, fmt.Errorf("bad document in %s: %w", c.Name, err)
		}
	}
	if id == 0 {
		// Any other id is loaded as stored: a file written before ids
		// were held to 1..MaxID still opens.
		return nil, fmt.Errorf("bad document in %s: no id", c.Name)
	}
	return c.s.encode(id, vals), nil
}
