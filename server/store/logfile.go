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
//	crc     uint32  CRC-32C (Castagnoli) of length, seq and body
//	seq     uint64  the group's last seq
//	body            the group's changes (encode.go)
//
// A record never spans segments. The writer moves to a new segment (a
// rotation) once the current one holds segBytes, and only when every group
// in the old one is synced (flush): a segment before the last is whole.
const recordHead = 16

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segment is one log file.
type segment struct {
	path  string
	first uint64 // from its name: every record in the segments before it has a lower seq
	f     *os.File
	size  int64 // where its records end: the next record goes there
}

// logRecord is a record read back at open.
type logRecord struct {
	seq  uint64
	body []byte
}

// segmentPrefix answers the directory and the name prefix of path's log
// segments.
func segmentPrefix(path string) (dir, prefix string) {
	return filepath.Dir(path), filepath.Base(path) + "-log-"
}

// listSegments answers path's log segments, oldest first (unopened).
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

// appendRecord appends the record of a group (seq, changes) to dst.
func appendRecord(dst []byte, seq uint64, changes []Change) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recordHead)...)
	dst = appendChanges(dst, changes)
	rec := dst[start:]
	binary.LittleEndian.PutUint32(rec[0:], uint32(len(rec)-recordHead))
	binary.LittleEndian.PutUint64(rec[8:], seq)
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
	seq := binary.LittleEndian.Uint64(rec[8:])
	if seq == 0 || binary.LittleEndian.Uint32(rec[4:]) != recordCRC(rec) {
		return r, 0, false
	}
	return logRecord{seq: seq, body: rec[recordHead:len(rec):len(rec)]}, len(rec), true
}

// recordAfter answers whether a whole record with a seq above prev starts
// anywhere in b past its first byte: whether what follows a bad record
// holds intact ones.
func recordAfter(b []byte, prev uint64) bool {
	// A record's seq is not zero: none starts past the last byte that is
	// not (the preallocated space after a torn record is skipped).
	last := len(b) - 1
	for last >= 0 && b[last] == 0 {
		last--
	}
	for i := 1; i <= last && i+recordHead <= len(b); i++ {
		if r, _, ok := parseRecord(b[i:]); ok && r.seq > prev {
			return true
		}
	}
	return false
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
	cut     int64       // bytes of a torn tail cut off the last segment holding records
	cutAt   string      // that segment
	cutOff  int64       // and where
}

// scanLog reads path's segments and checks them: the records' seqs rise,
// and after the first spot that is not an intact record only zeros (or
// the preallocated space) follow — the end of the log — or the rest of a
// record cut short (a crash in the middle of its write, or its pages not
// written before a power loss: never acknowledged, since a record is
// answered only once a sync that began after its write returns). A bad
// spot followed by intact records is damage, refused with the file and
// offset; the one exception is a record whose header is all zeros, a page
// that never reached the disk while later ones did (a power loss while
// the record's sync was under way), which the same argument shows was
// never acknowledged either, nor anything after it. A torn tail is cut
// off (truncated) so that the next record follows the last intact one.
func scanLog(path string, log func(msg string, args ...any)) (*logScan, error) {
	segs, err := listSegments(path)
	if err != nil {
		return nil, fmt.Errorf("listing its log segments: %w", err)
	}
	sc := &logScan{}
	var prev uint64
	var data [][]byte
	bad, badOff := -1, 0
	for i, seg := range segs {
		b, err := os.ReadFile(seg.path)
		if err != nil {
			return nil, err
		}
		data = append(data, b)
		if bad >= 0 {
			if _, _, ok := parseRecord(b); ok || !allZero(b) {
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
		seg.size = int64(off)
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
		hole := allZero(b[off:min(off+recordHead, len(b))])
		if !hole && recordAfter(b[off:], prev) {
			return nil, fmt.Errorf("log segment %s is damaged at offset %d (a record that is not intact, followed by intact ones); restore the file from a backup", seg.path, off)
		}
		bad, badOff = i, off
	}
	if bad >= 0 {
		seg := segs[bad]
		sc.cut, sc.cutAt, sc.cutOff = int64(len(data[bad])-badOff), seg.path, int64(badOff)
		log("the store's log ends in a record that never completed (a crash in the middle of a write); cutting it off",
			"segment", seg.path, "offset", badOff, "dropped_bytes", sc.cut, "kept_records", len(sc.records))
		if err := os.Truncate(seg.path, int64(badOff)); err != nil {
			return nil, fmt.Errorf("cutting the torn tail of %s: %w", seg.path, err)
		}
		// The segments after it hold nothing: the next record goes right
		// after the last intact one.
		for _, later := range segs[bad+1:] {
			if err := os.Remove(later.path); err != nil {
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
	if bad >= 0 {
		if err := fdatasync(segs[bad].f); err != nil {
			closeSegments(segs)
			return nil, err
		}
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
	if prealloc > 0 && preallocate(f, prealloc) != nil {
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
