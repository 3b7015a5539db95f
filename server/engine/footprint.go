package engine

import (
	"sort"

	"github.com/fenecdb/fenec/server/fenecql"
)

// Footprint is a collection's memory, estimated (DB.Footprints).
type Footprint struct {
	Name string
	// Rows is the documents held in memory: every document stored
	// without a memory limit; under one, those not evicted to the file.
	Rows int
	// Evicted is the documents whose rows are only in the file (their
	// index entries stay in memory): 0 without a memory limit.
	Evicted int
	// IndexBytes is the id map's and the field indexes' entries alone, of
	// every document, resident or evicted (an evicted row's id map entry
	// at the cost of a page without slots): what a server must keep in
	// memory to find any row.
	IndexBytes int64
	// Bytes is the rows and their indexes.
	Bytes int64
}

// The bytes one entry of each structure takes, as measured at a million
// jobs: bench/results/memory.md's breakdown, each structure's share of the
// heap per job less the indexed field's own value where the share holds
// it. They are estimates of the Go heap, not counts of it: a tree's nodes
// are more or less full, a hash's buckets more or less used.
const (
	idMapEntry = 16 // the id map's pages: 8 bytes a document where ids run without gaps, else 16
	// idMapEvicted is an evicted row's share of its page without slots
	// (docPage.dropSlots): a header of 64 bytes and its place in the list
	// of pages, over up to 256 rows, about 0.3; rounded up. A row evicted
	// in a page that still has a resident row keeps its 8-byte slot: the
	// sweep evicts page by page, so few are.
	idMapEvicted = 1
	// numIndexEntry is an int or timestamp @sorted, @ttl, or a queue's
	// run_at: a numSet's packed 8-byte item in leaves full when filled in
	// key order (8.2 measured, at 1 and 10 million) and 9.3 at random
	// (leaves split half full), rounded up (numset.go). A B-tree of
	// 16-byte items cost 35 in order and 25 at random.
	numIndexEntry  = 10
	sortIndexEntry = 48 // any other @sorted
	hashIndexEntry = 32 // @hash
	uniqIndexEntry = 72 // @unique
	geoIndexEntry  = 72 // @geo
	// footprintSample is how many documents of a collection are measured
	// to estimate its rows' size: enough for an average, few enough that
	// a scrape costs microseconds under the read lock.
	footprintSample = 64
)

// indexEntryBytes returns the estimated bytes per resident document of
// c's id map and indexes.
func (c *Collection) indexEntryBytes() int64 { return idMapEntry + c.fieldIndexBytes() }

// indexBytes returns the estimated bytes of c's id map and indexes: its
// evicted rows' id map entries at a page without slots' share.
func (c *Collection) indexBytes() int64 {
	if c.ev == nil {
		return int64(c.Len()) * c.indexEntryBytes()
	}
	f := c.fieldIndexBytes()
	return int64(c.ev.resident)*(idMapEntry+f) + int64(c.ev.evicted)*(idMapEvicted+f)
}

// fieldIndexBytes returns the estimated bytes per document of c's field
// indexes.
func (c *Collection) fieldIndexBytes() int64 {
	var n int64
	for i, f := range c.s.fields {
		num := f.Type == fenecql.TypeInt || f.Type == fenecql.TypeTimestamp
		switch f.Index {
		case fenecql.IndexSorted:
			if num {
				n += numIndexEntry
			} else {
				n += sortIndexEntry
			}
		case fenecql.IndexHash:
			n += hashIndexEntry
		case fenecql.IndexUnique:
			n += uniqIndexEntry
		case fenecql.IndexGeo:
			n += geoIndexEntry
		}
		if f.TTL > 0 && f.Index != fenecql.IndexSorted {
			n += numIndexEntry // a @ttl's own sorted index (newCollection)
		}
		if c.queue != nil && c.queue.sorted == nil && i == c.queue.runAt {
			n += numIndexEntry // the queue's own run_at tree
		}
	}
	return n
}

// Footprints returns each collection's estimated memory, in creation
// order. A row's size is its block's (docs/architecture.md, "Memory"),
// averaged over the first footprintSample documents; an
// index's from its entries at the sizes above.
func (db *DB) Footprints() []Footprint {
	db.mu.RLock()
	defer db.mu.RUnlock()
	out := make([]Footprint, 0, len(db.colls))
	for name, c := range db.colls {
		f := Footprint{Name: name, Rows: c.Len()}
		f.IndexBytes = c.indexBytes()
		f.Bytes = f.IndexBytes
		if c.ev != nil {
			// Counted as rows are set and evicted (evict.go).
			f.Rows, f.Evicted = c.ev.resident, c.ev.evicted
			f.Bytes += c.ev.resBytes
			out = append(out, f)
			continue
		}
		var sampled, held int64
		c.docs.Scan(func(_ int64, d *Doc) bool {
			sampled++
			held += int64(docHeader + len(d.row()))
			return sampled < footprintSample
		})
		if sampled > 0 {
			f.Bytes += int64(f.Rows) * (held / sampled)
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return db.created[out[i].Name] < db.created[out[j].Name] })
	return out
}
