package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The log: commit groups appended to segment files beside the SQLite file,
// named <file>-log-<the first seq the segment may hold, 16 hex digits>.
// Each group is one record written with one pwrite:
//
//	length  uint32  the body's size, little-endian
//	crc     uint32  CRC-32C (Castagnoli) of length, seq, synced and body
//	seq     uint64  the group's last seq
//	synced  uint64  the last seq known durable when the record was written:
//	                a sync that covers it had returned (0: none known)
//	body            the group's changes (encode.go)
//
// A record never spans segments. The writer moves to a new segment (a
// rotation) once the current one holds segBytes, and only when every group
// in the old one is synced (flush): a segment before the last is whole.
// synced is what tells, at open, a record torn by a power loss (never
// acknowledged) from damage to one that was durable (scanLog).
const recordHead = 24

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segment is one log file.
type segment struct {
	path  string
	first uint64 // from its name: every record in the segments before it has a lower seq
	f     *os.File
	size  int64 // where its records end: the next record goes there
	// end is the file's size: its preallocated space ends there (zeroAhead
	// writes only below it, so the file never grows by a zero block).
	end int64
	// zeroed is where the blocks written so far end, records' or zeros'
	// (zeroAhead).
	zeroed int64
}

// zeroBlock is the size of the zeros zeroAhead writes with one pwrite: a
// page, so that the page cache holds them in pages of their own (a larger
// write may be held in one large folio, and a record written into it
// later then costs its sync a walk over the whole folio).
const zeroBlock = 4096

// zeroChunk is how far zeroAhead writes zeros past the records at once,
// and zeroSlack how close the records may come to the end of the zeros
// before it does.
const (
	zeroChunk = 64 << 10
	zeroSlack = 16 << 10
)

var zeros [zeroBlock]byte

// zeroAhead writes zeros over the preallocated space just past the
// segment's records, a chunk at a time, ahead of the records that will go
// there. A preallocated block is unwritten until a write reaches the disk,
// and the sync that carries the first write into it must also convert it
// (the extent split, and the inode written back with it: a second write
// to the disk the sync waits for). With records of a few hundred bytes to
// a few KB most syncs would pay that once; with the zeros ahead, the sync
// after a chunk's zeros converts the whole chunk, and the next ones write
// only their data (BenchmarkSegmentAppend: fallocate against ahead). The
// zeros change nothing a reader sees: the space past the records reads as
// zeros either way, written or not, before and after a power loss. A
// failed write leaves the rest unwritten, as it was: only a saving is
// lost (a sync after it returns the error, if the disk lost the page).
// wmu is held.
func (seg *segment) zeroAhead() {
	if seg.size+zeroSlack <= seg.zeroed {
		return
	}
	// The block the records end in is written (its start is theirs).
	from := max(seg.zeroed, (seg.size+zeroBlock-1)/zeroBlock*zeroBlock)
	to := min(from+zeroChunk, seg.end)
	for ; from+zeroBlock <= to; from += zeroBlock {
		if _, err := seg.f.WriteAt(zeros[:], from); err != nil {
			return
		}
		seg.zeroed = from + zeroBlock
	}
}

// logRecord is a record read back at open.
type logRecord struct {
	seq    uint64
	synced uint64
	body   []byte
}

// segmentPrefix returns the directory and the name prefix of path's log
// segments.
func segmentPrefix(path string) (dir, prefix string) {
	return filepath.Dir(path), filepath.Base(path) + "-log-"
}

// listSegments returns path's log segments, oldest first (unopened).
func listSegments(path string) ([]*segment, error) {
	dir, prefix := segmentPrefix(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []*segment
	for _, e := range entries {
		hex, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || len(hex) != 16 || !e.Type().IsRegular() {
			continue
		}
		first, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			continue
		}
		segs = append(segs, &segment{path: filepath.Join(dir, e.Name()), first: first})
	}
	slices.SortFunc(segs, func(a, b *segment) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	return segs, nil
}

// appendRecord appends the record of a group (seq, changes) to dst, written
// when every seq up to synced is durable.
func appendRecord(dst []byte, seq, synced uint64, changes []Change) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recordHead)...)
	dst = appendChanges(dst, changes)
	rec := dst[start:]
	binary.LittleEndian.PutUint32(rec[0:], uint32(len(rec)-recordHead))
	binary.LittleEndian.PutUint64(rec[8:], seq)
	binary.LittleEndian.PutUint64(rec[16:], synced)
	binary.LittleEndian.PutUint32(rec[4:], recordCRC(rec))
	return dst
}

func recordCRC(rec []byte) uint32 {
	c := crc32.Update(0, castagnoli, rec[0:4])
	return crc32.Update(c, castagnoli, rec[8:])
}

// parseRecord reads the record at the start of b: its seq, body and size,
// or ok false when b does not start with a whole record whose checksum
// matches.
func parseRecord(b []byte) (r logRecord, n int, ok bool) {
	if len(b) < recordHead {
		return r, 0, false
	}
	size := uint64(binary.LittleEndian.Uint32(b[0:]))
	if size > uint64(len(b)-recordHead) {
		return r, 0, false
	}
	rec := b[:recordHead+int(size)]
	seq, synced := binary.LittleEndian.Uint64(rec[8:]), binary.LittleEndian.Uint64(rec[16:])
	// A record's own seq is never durable before it is written.
	if seq == 0 || synced >= seq || binary.LittleEndian.Uint32(rec[4:]) != recordCRC(rec) {
		return r, 0, false
	}
	return logRecord{seq: seq, synced: synced, body: rec[recordHead:len(rec):len(rec)]}, len(rec), true
}

// recordsAfter looks for the whole records with a seq above prev that
// start anywhere in b at from or past it: what follows a bad record. It
// returns how many it found and the highest synced among them.
func recordsAfter(b []byte, from int, prev uint64) (n int, synced uint64) {
	// A record's seq is not zero: none starts past the last byte that is
	// not (the preallocated space after a torn record is skipped).
	last := len(b) - 1
	for last >= 0 && b[last] == 0 {
		last--
	}
	for i := from; i <= last && i+recordHead <= len(b); {
		r, size, ok := parseRecord(b[i:])
		if !ok || r.seq <= prev {
			i++
			continue
		}
		n++
		synced = max(synced, r.synced)
		i += size
	}
	return n, synced
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	return !slices.ContainsFunc(b, func(c byte) bool { return c != 0 })
}

// logScan is what reading the segments at open found.
type logScan struct {
	segs    []*segment  // opened; the last takes the next record at its size
	records []logRecord // every intact record, in order
	synced  uint64      // the last record's seq: every record is durable (synced at open)
	cut     int64       // bytes of a torn tail cut off the last segment holding records
	cutAt   string      // that segment
	cutOff  int64       // and where
}

// scanLog reads path's segments and checks them: the records' seqs rise,
// and after the first spot that is not an intact record (a bad spot) only
// a torn tail follows: records that were never acknowledged, cut off.
//
// A record is acknowledged only once a sync that began after its write
// returned, and a sync covers every write before it. A power loss before
// a sync returned may leave any of the unsynced pages on the disk and not
// others: a record cut short, or its body (or header) zeros from the
// preallocated space, while a later record's page reached the disk. Each
// record carries synced, the last seq durable when it was written. So a
// bad spot where the record after seq base should start is damage to
// durable data — refused with the file and offset — when an intact record
// after it says a sync covering seq base+1 had returned (synced > base),
// or when a later segment holds more than zeros (the log moves to a new
// segment only once the old one is synced whole). Otherwise nothing from
// the bad spot on was ever durable, nor acknowledged: it is cut off
// (truncated, the later segments deleted), and the open says what it cut.
// Damage to the last records written, with no later record to say they
// were synced, is cut the same way: it cannot be told from a tear.
//
// The last segment is synced before the store writes to it: a record
// written after open says every record read here is durable.
func scanLog(path string, log func(msg string, args ...any)) (*logScan, error) {
	segs, err := listSegments(path)
	if err != nil {
		return nil, fmt.Errorf("listing its log segments: %w", err)
	}
	sc := &logScan{}
	var prev uint64
	bad, badOff := -1, 0
	var base uint64        // the last seq before the bad spot
	var after int          // intact records found past it
	var afterSynced uint64 // the highest synced among them
	var badSize int64      // the bad segment's size on disk
	for i, seg := range segs {
		b, err := os.ReadFile(seg.path)
		if err != nil {
			return nil, err
		}
		if bad >= 0 {
			if !allZero(b) {
				return nil, fmt.Errorf("log segment %s is damaged at offset %d (a record that is not intact, followed by more of the log in %s); restore the file from a backup", segs[bad].path, badOff, seg.path)
			}
			continue
		}
		off, from := 0, len(sc.records)
		for off < len(b) {
			r, n, ok := parseRecord(b[off:])
			if !ok {
				break
			}
			if r.seq <= prev {
				return nil, fmt.Errorf("log segment %s is damaged at offset %d (a record of seq %d after seq %d); restore the file from a backup", seg.path, off, r.seq, prev)
			}
			prev = r.seq
			sc.records = append(sc.records, r)
			off += n
		}
		seg.size, seg.end, seg.zeroed = int64(off), int64(len(b)), int64(off)
		if len(b)-off >= 64<<10 && len(b)-off > off {
			// A preallocated segment's unused space: keep only the
			// records' bytes, which the replayed changes alias.
			kept := bytes.Clone(b[:off])
			start := 0
			for i := range sc.records[from:] {
				r := &sc.records[from+i]
				end := start + recordHead + len(r.body)
				r.body = kept[start+recordHead : end : end]
				start = end
			}
		}
		if off == len(b) || allZero(b[off:]) {
			continue
		}
		bad, badOff, badSize = i, off, int64(len(b))
		base = prev
		if seg.first > 0 {
			// The records before the segment's first seq were synced
			// before it was made (they may be folded, their segments
			// gone).
			base = max(base, seg.first-1)
		}
		after, afterSynced = recordsAfter(b, off+1, base)
	}
	if bad >= 0 && afterSynced > base {
		return nil, fmt.Errorf("log segment %s is damaged at offset %d (a record that is not intact, followed by %d intact ones written after a sync covered it); restore the file from a backup", segs[bad].path, badOff, after)
	}
	if bad >= 0 {
		seg := segs[bad]
		sc.cut, sc.cutAt, sc.cutOff = badSize-int64(badOff), seg.path, int64(badOff)
		log("the store's log ends in a record that never completed (a crash in the middle of a write, or a power loss before its sync); cutting it off",
			"segment", seg.path, "offset", badOff, "dropped_bytes", sc.cut, "dropped_records", after, "kept_records", len(sc.records))
		if err := os.Truncate(seg.path, int64(badOff)); err != nil {
			return nil, fmt.Errorf("cutting the torn tail of %s: %w", seg.path, err)
		}
		seg.end = int64(badOff)
		// The segments after it hold nothing: the next record goes right
		// after the last intact one.
		if later := segs[bad+1:]; len(later) > 0 {
			for _, l := range later {
				if err := os.Remove(l.path); err != nil {
					return nil, err
				}
			}
			// Gone for good before a record goes where they were.
			if err := syncDir(filepath.Dir(seg.path)); err != nil {
				return nil, err
			}
		}
		segs = segs[:bad+1]
	}
	for _, seg := range segs {
		if seg.f, err = os.OpenFile(seg.path, os.O_RDWR, 0); err != nil {
			closeSegments(segs)
			return nil, err
		}
	}
	if n := len(segs); n > 0 {
		// The records read are durable from here on (a crash of the
		// process leaves its writes in the page cache, unsynced), and
		// the cut with them. The segments before the last were synced
		// whole before the next was made.
		if err := fdatasync(segs[n-1].f); err != nil {
			closeSegments(segs)
			return nil, err
		}
	}
	if n := len(sc.records); n > 0 {
		sc.synced = sc.records[n-1].seq
	}
	sc.segs = segs
	return sc, nil
}

func closeSegments(segs []*segment) error {
	var first error
	for _, seg := range segs {
		if seg.f != nil {
			if err := seg.f.Close(); err != nil && first == nil {
				first = err
			}
			seg.f = nil
		}
	}
	return first
}

// createSegment creates the segment that takes seqs from first on, and
// makes its name durable (a sync of the directory) before any record in
// it can be: a record synced in a file whose name a power loss undoes
// would be lost with it.
func createSegment(path string, first uint64, prealloc int64) (*segment, error) {
	dir, prefix := segmentPrefix(path)
	seg := &segment{path: filepath.Join(dir, fmt.Sprintf("%s%016x", prefix, first)), first: first}
	// Never over a file that is there: every segment at open is in the
	// list, and a new one's first seq is past every record in them.
	f, err := os.OpenFile(seg.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	if prealloc > 0 && preallocate(f, prealloc) == nil {
		seg.end = prealloc
	} else if prealloc > 0 {
		// Only a saving: on a disk with less room left (or a file system
		// without fallocate) the segment grows as it is written, and a
		// full disk fails the write that does not fit.
		if err := f.Truncate(0); err != nil {
			f.Close()
			os.Remove(seg.path)
			return nil, err
		}
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		os.Remove(seg.path) // the next try makes it again
		return nil, err
	}
	seg.f = f
	return seg, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
