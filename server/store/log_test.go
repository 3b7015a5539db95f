package store

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testRecord is a record of the log as the test reads it, by the format
// written in logfile.go and docs/architecture.md (not with the store's
// reader): a 24-byte header (body length and CRC-32C, little-endian
// uint32s; the seq and synced, uint64s), then the body.
type testRecord struct {
	seq, synced uint64
	file        string
	off, size   int
}

const testHead = 24

// testParse reads the record at the start of b, or ok false.
func testParse(b []byte) (seq, synced uint64, size int, ok bool) {
	if len(b) < testHead {
		return 0, 0, 0, false
	}
	n := int(binary.LittleEndian.Uint32(b))
	if testHead+n > len(b) {
		return 0, 0, 0, false
	}
	c := crc32.Update(0, crc32.MakeTable(crc32.Castagnoli), b[:4])
	c = crc32.Update(c, crc32.MakeTable(crc32.Castagnoli), b[8:testHead+n])
	seq, synced = binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
	if c != binary.LittleEndian.Uint32(b[4:]) || seq == 0 {
		return 0, 0, 0, false
	}
	return seq, synced, testHead + n, true
}

// testRecordBytes builds a record as the format says.
func testRecordBytes(seq, synced uint64, body []byte) []byte {
	b := make([]byte, testHead+len(body))
	binary.LittleEndian.PutUint32(b, uint32(len(body)))
	binary.LittleEndian.PutUint64(b[8:], seq)
	binary.LittleEndian.PutUint64(b[16:], synced)
	copy(b[testHead:], body)
	c := crc32.Update(0, crc32.MakeTable(crc32.Castagnoli), b[:4])
	c = crc32.Update(c, crc32.MakeTable(crc32.Castagnoli), b[8:])
	binary.LittleEndian.PutUint32(b[4:], c)
	return b
}

// readLog reads the segments beside path, oldest first, up to the first
// spot in each that is not an intact record.
func readLog(t *testing.T, path string) []testRecord {
	t.Helper()
	names, err := filepath.Glob(path + "-log-*")
	if err != nil {
		t.Fatal(err)
	}
	var out []testRecord
	for _, name := range names { // Glob sorts; the names are fixed-width hex
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; ; {
			seq, synced, size, ok := testParse(b[off:])
			if !ok {
				break
			}
			out = append(out, testRecord{seq: seq, synced: synced, file: name, off: off, size: size})
			off += size
		}
	}
	return out
}

// copyStore copies the files of the store at from (the SQLite file, its
// WAL, the log's segments) to the same names at to, as a kill would leave
// them.
func copyStore(t *testing.T, from, to string) {
	t.Helper()
	copyFile(t, from, to)
	if _, err := os.Stat(from + "-wal"); err == nil {
		copyFile(t, from+"-wal", to+"-wal")
	}
	names, err := filepath.Glob(from + "-log-*")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		copyFile(t, name, to+strings.TrimPrefix(name, from))
	}
}

// unitChanges is unit i of the crash child's pattern (prefixOf checks it).
func unitChanges(i uint64) []Change {
	body := []byte(fmt.Sprintf("unit %d %s", i, strings.Repeat("x", 100)))
	return []Change{
		{Op: OpPut, Coll: "c", ID: int64(2 * i), Body: body},
		{Op: OpPut, Coll: "c", ID: int64(2*i + 1), Body: body},
		{Op: OpMetaPut, Key: fmt.Sprint("m", i), Body: body},
	}
}

var noFoldTuning = tuning{foldBytes: 1 << 40, foldAge: time.Hour, foldChunk: 1 << 40, maxPending: 64 << 20, busyTimeout: time.Second}

// unfoldedStore commits units 1 (the collection) to n, each its own
// group, with no fold, and copies the files as a kill would leave them to
// a new path, which it returns.
func unfoldedStore(t *testing.T, n uint64, tune tuning) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.db")
	_, _, _, s := load(t, path, Options{}, tune)
	if err := s.Commit(1, []Change{{Op: OpCreate, Coll: "c", ID: 1}})(); err != nil {
		t.Fatal(err)
	}
	for i := uint64(2); i <= n; i++ {
		if err := s.Commit(i, unitChanges(i))(); err != nil {
			t.Fatal(err)
		}
	}
	crashed := filepath.Join(dir, "crashed.db")
	copyStore(t, path, crashed)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return crashed
}

// TestTornLog: the last record cut at every byte offset (the file ends
// there, or, as in a preallocated segment, zeros follow) opens with
// exactly the records before it, says so in the log when a part of the
// record was there, and takes new records after them.
func TestTornLog(t *testing.T) {
	t.Parallel()
	for _, prealloc := range []int64{0, 1 << 20} {
		t.Run(fmt.Sprintf("prealloc=%d", prealloc), func(t *testing.T) {
			tune := noFoldTuning
			tune.prealloc = prealloc
			crashed := unfoldedStore(t, 30, tune)
			recs := readLog(t, crashed)
			if len(recs) != 30 {
				t.Fatalf("%d records, want 30", len(recs))
			}
			last := recs[len(recs)-1]
			whole, err := os.ReadFile(last.file)
			if err != nil {
				t.Fatal(err)
			}
			if prealloc > 0 && int64(len(whole)) != prealloc {
				t.Fatalf("segment of %d bytes, want %d preallocated", len(whole), prealloc)
			}
			// Every offset in the header, a sample in the body, the last.
			for cut := 0; cut < last.size; cut = next(cut, last.size) {
				torn := filepath.Join(t.TempDir(), "torn.db")
				copyStore(t, crashed, torn)
				seg := torn + strings.TrimPrefix(last.file, crashed)
				b := bytes.Clone(whole)
				if prealloc > 0 {
					clear(b[last.off+cut : last.off+last.size])
				} else {
					b = b[:last.off+cut]
				}
				if err := os.WriteFile(seg, b, 0o644); err != nil {
					t.Fatal(err)
				}
				// Zeros over bytes that were zeros (the body's last) tear
				// nothing.
				intact := prealloc > 0 && allZero(whole[last.off+cut:last.off+last.size])
				want := uint64(29)
				if intact {
					want = 30
				}
				var logged bytes.Buffer
				got, seq, _, s := load(t, torn, Options{Log: slog.New(slog.NewTextHandler(&logged, nil))}, defaultTuning)
				if k := prefixOf(t, got, seq); k != want {
					t.Fatalf("cut at %d of the last record's %d bytes: units up to %d, want %d", cut, last.size, k, want)
				}
				said := strings.Contains(logged.String(), "never completed")
				if said != (cut > 0 && !intact) {
					t.Fatalf("cut at %d: logged %q", cut, logged.String())
				}
				if cut == 20 {
					// The next record follows the last intact one.
					if err := s.Commit(30, unitChanges(30))(); err != nil {
						t.Fatal(err)
					}
					again := filepath.Join(t.TempDir(), "again.db")
					copyStore(t, torn, again)
					got, seq, _, s2 := load(t, again, Options{}, defaultTuning)
					if k := prefixOf(t, got, seq); k != 30 {
						t.Fatalf("after the cut and one more unit: units up to %d, want 30", k)
					}
					s2.Close()
				}
				s.Close()
			}
		})
	}
}

// TestDamagedLog: a record that is not intact followed by intact ones —
// in the same segment, or in a later one — makes Open refuse, naming the
// segment and the offset, and change nothing. The same damage in the last
// record is a torn tail, cut off.
func TestDamagedLog(t *testing.T) {
	t.Parallel()
	tune := noFoldTuning
	tune.segBytes = 2 << 10 // about 10 records a segment
	crashed := unfoldedStore(t, 60, tune)
	recs := readLog(t, crashed)
	if len(recs) != 60 || recs[0].file == recs[59].file {
		t.Fatalf("%d records, from %s to %s: want 60 in several segments", len(recs), recs[0].file, recs[59].file)
	}
	// A record in the middle of a segment, the last of a segment before
	// the last, the first of the last (intact ones follow in the same
	// segment only), and the very last.
	lastOfFirst, firstOfLast := 0, 59
	for i, r := range recs {
		if r.file == recs[0].file {
			lastOfFirst = i
		}
		if r.file == recs[59].file {
			firstOfLast = min(firstOfLast, i)
		}
	}
	if firstOfLast == 59 {
		t.Fatal("the last segment holds one record: nothing follows its first")
	}
	for _, at := range []int{3, lastOfFirst, firstOfLast, 59} {
		for _, field := range []int{0, 5, 9, 17, 30} { // length, crc, seq, synced, body
			damaged := filepath.Join(t.TempDir(), "d.db")
			copyStore(t, crashed, damaged)
			r := recs[at]
			seg := damaged + strings.TrimPrefix(r.file, crashed)
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			b[r.off+field] ^= 0x10
			if err := os.WriteFile(seg, b, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := open(damaged, Options{}, defaultTuning)
			if at == 59 {
				if err != nil {
					t.Fatalf("damage in the last record (byte %d): %v, want its tail cut", field, err)
				}
				got := newModel()
				seq, err := s.Load(got.apply)
				if err != nil {
					t.Fatal(err)
				}
				if k := prefixOf(t, got, seq); k != 59 {
					t.Fatalf("damage in the last record: units up to %d, want 59", k)
				}
				s.Close()
				continue
			}
			want := fmt.Sprintf("log segment %s is damaged at offset %d", seg, r.off)
			if err == nil || !strings.Contains(err.Error(), want) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("record %d, byte %d flipped: open answered %v, want %q", at, field, err, want)
			}
			after, _ := os.ReadFile(seg)
			if !bytes.Equal(after, b) {
				t.Fatalf("record %d: Open changed a segment it refused", at)
			}
		}
	}
}

// TestLegacyLogTable: a file of format version 1, whose log is rows of
// the log table (built here as that version wrote them), opens: its rows
// are replayed after the folded tables, new units go to the log's
// segments, and the fold empties the table; the file is version 2 after.
func TestLegacyLogTable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	units, want := script(9, 300)
	// Units 1..100 folded into the tables (written through a store and
	// closed), 101..300 as log rows: what a version 1 store killed before
	// its fold left.
	_, _, _, s := load(t, path, Options{}, defaultTuning)
	commitAll(t, s, 1, units[:100])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if names, _ := filepath.Glob(path + "-log-*"); len(names) != 0 {
		t.Fatalf("segments left after a clean Close: %v", names)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 300; i += 4 { // rows of up to 4 units, as groups were
		var changes []Change
		for _, u := range units[i:min(i+4, 300)] {
			changes = append(changes, u...)
		}
		if _, err := tx.Exec(`INSERT INTO log(seq, body) VALUES (?, ?)`, min(i+4, 300), appendChanges(nil, changes)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(`PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s2 := loadSame(t, path, 300, "a version 1 file's log rows replayed", want)
	more, _ := script(10, 50)
	for _, u := range more {
		for _, c := range u {
			if err := want.apply(c); err != nil {
				t.Fatal(err)
			}
		}
	}
	commitAll(t, s2, 301, more)
	if n := len(readLog(t, path)); n == 0 {
		t.Fatal("the new units are not in the log's segments")
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var rows, version int
	err = db.QueryRow(`SELECT (SELECT count(*) FROM log), (SELECT user_version FROM pragma_user_version)`).Scan(&rows, &version)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rows != 0 || version != formatVersion {
		t.Fatalf("after the fold: %d log rows, version %d; want 0, %d", rows, version, formatVersion)
	}
	s3 := loadSame(t, path, 350, "upgraded, extended and folded", want)
	defer s3.Close()
}

// TestSegmentsDropped: with small segments and frequent folds the log
// moves to new segments and the folded ones are deleted as it goes, so
// the log stays a few segments long; a clean Close leaves none.
func TestSegmentsDropped(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	units, want := script(11, 3000)
	tune := tuning{foldBytes: 8 << 10, foldAge: 5 * time.Millisecond, foldChunk: 8 << 10, foldRows: 64, maxPending: 64 << 20, busyTimeout: time.Second, segBytes: 16 << 10}
	_, _, _, s := load(t, path, Options{}, tune)
	most, seen := 0, map[string]bool{}
	for i := 0; i < len(units); i += 100 {
		commitAll(t, s, uint64(i+1), units[i:i+100])
		names, err := filepath.Glob(path + "-log-*")
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, len(names))
		for _, n := range names {
			seen[n] = true
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if names, _ := filepath.Glob(path + "-log-*"); len(names) != 0 {
		t.Fatalf("segments left after a clean Close: %v", names)
	}
	t.Logf("%d segments in all, at most %d at once", len(seen), most)
	if len(seen) < 10 || most > len(seen)/2 {
		t.Fatalf("%d segments in all, at most %d at once: want many, deleted as they are folded", len(seen), most)
	}
	for n := range seen {
		hex := n[strings.LastIndex(n, "-")+1:]
		if _, err := strconv.ParseUint(hex, 16, 64); err != nil || len(hex) != 16 {
			t.Fatalf("segment name %s: want 16 hex digits", n)
		}
	}
	s2 := loadSame(t, path, 3000, "after many segments", want)
	defer s2.Close()
}

// next steps through the offsets of a record of size bytes: each of the
// header's, then every 13th, then the last.
func next(cut, size int) int {
	switch {
	case cut < testHead:
		return cut + 1
	case cut+13 < size-1:
		return cut + 13
	case cut < size-1:
		return size - 1
	}
	return size
}

// TestBackupHoldsTheLog: a backup is the SQLite file alone, and holds
// every unit committed before it, folded or not (the store folds the log
// into the tables first).
func TestBackupHoldsTheLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.db")
	units, want := script(12, 300)
	_, _, _, s := load(t, path, Options{}, noFoldTuning)
	defer s.Close()
	commitAll(t, s, 1, units)
	if len(readLog(t, path)) == 0 {
		t.Fatal("nothing in the log before the backup: the test checks nothing")
	}
	copyPath := filepath.Join(dir, "backup.db")
	if err := s.Backup(t.Context(), copyPath); err != nil {
		t.Fatal(err)
	}
	if names, _ := filepath.Glob(copyPath + "-*"); len(names) != 0 {
		t.Fatalf("files beside the backup: %v", names)
	}
	s2 := loadSame(t, copyPath, 300, "the backup", want)
	defer s2.Close()
}

// BenchmarkSegmentAppend measures what a log segment's layout costs a
// commit: a record of size bytes written with one pwrite and synced with
// fdatasync, into a file that grows as it is written (append), one
// preallocated with fallocate, the same with zeros written ahead of the
// records (ahead: the store's choice, segment.zeroAhead), or one whose
// 64 MB were written as zeros with one write and synced first (zerofill,
// as a recycled segment would be); with the process's CPU time per record.
//
//	cd server && go test ./store -run '^$' -bench SegmentAppend -benchtime 3000x
func BenchmarkSegmentAppend(b *testing.B) {
	for _, size := range []int{256, 2048} {
		for _, mode := range []string{"append", "fallocate", "ahead", "zerofill"} {
			b.Run(fmt.Sprintf("size=%d/%s", size, mode), func(b *testing.B) { benchSegmentAppend(b, mode, size) })
		}
	}
}

func benchSegmentAppend(b *testing.B, mode string, size int) {
	f, err := os.Create(filepath.Join(b.TempDir(), "seg"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	seg := &segment{f: f}
	switch mode {
	case "fallocate", "ahead":
		if err := preallocate(f, defaultSegBytes); err != nil {
			b.Skip("fallocate:", err)
		}
		seg.end = defaultSegBytes
	case "zerofill":
		if _, err := f.Write(make([]byte, defaultSegBytes)); err != nil {
			b.Fatal(err)
		}
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
	}
	rec := make([]byte, size)
	for i := range rec {
		rec[i] = byte(i) | 1
	}
	cpu0 := processCPU()
	b.ResetTimer()
	for i := range b.N {
		off := int64(i%(defaultSegBytes/size)) * int64(size)
		if _, err := f.WriteAt(rec, off); err != nil {
			b.Fatal(err)
		}
		if mode == "ahead" && off >= seg.size {
			seg.size = off + int64(size)
			seg.zeroAhead()
		}
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// TestZeroAhead: zeros go ahead of the records in a preallocated segment
// (segment.zeroAhead): past the last record's block, at least zeroSlack
// bytes past the records, never past the preallocated space (the file
// does not grow), never over a record; a crash leaves every record
// readable and every unit loads.
func TestZeroAhead(t *testing.T) {
	t.Parallel()
	tune := noFoldTuning
	tune.prealloc, tune.segBytes = 256<<10, 256<<10
	path := filepath.Join(t.TempDir(), "f.db")
	_, _, _, s := load(t, path, Options{}, tune)
	if err := s.Commit(1, []Change{{Op: OpCreate, Coll: "c", ID: 1}})(); err != nil {
		t.Fatal(err)
	}
	const n = 1500 // about 400 bytes a unit: three segments
	for i := uint64(2); i <= n; i++ {
		if err := s.Commit(i, unitChanges(i))(); err != nil {
			t.Fatal(err)
		}
		s.wmu.Lock()
		seg := s.segs[len(s.segs)-1]
		size, zeroed, end := seg.size, seg.zeroed, seg.end
		s.wmu.Unlock()
		fi, err := os.Stat(seg.path)
		if err != nil {
			t.Fatal(err)
		}
		if end != tune.prealloc || fi.Size() != max(end, size) {
			t.Fatalf("unit %d: the segment is %d bytes with records to %d, want its preallocated %d (end %d)", i, fi.Size(), size, tune.prealloc, end)
		}
		if want := min(size+zeroSlack, end); zeroed < want && size < end {
			t.Fatalf("unit %d: zeros written to %d, records to %d: want at least %d", i, zeroed, size, want)
		}
		if zeroed%zeroBlock != 0 || zeroed > end {
			t.Fatalf("unit %d: zeros written to %d in a segment of %d", i, zeroed, end)
		}
	}
	crashed := filepath.Join(filepath.Dir(path), "crashed.db")
	copyStore(t, path, crashed)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readLog(t, crashed)
	if len(recs) != n {
		t.Fatalf("%d records read back, want %d", len(recs), n)
	}
	files := map[string]bool{}
	for i, r := range recs {
		if r.seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.seq)
		}
		files[r.file] = true
	}
	if len(files) < 3 {
		t.Fatalf("the records fill %d segments, want 3 or more", len(files))
	}
	m, seq, _, s2 := load(t, crashed, Options{}, tune)
	defer s2.Close()
	if k := prefixOf(t, m, seq); k != n {
		t.Fatalf("units up to %d load after the crash, want %d", k, n)
	}
}

// TestPowerLossLog: a power loss before a sync returned may leave any of
// the unsynced pages on the disk: a record in the middle torn (its body or
// header zeros from the preallocated space, or cut off at a page) while
// later records reached the disk. When no later record says a sync covered
// the torn one (each record's synced is below its seq), none of them was
// acknowledged: the open cuts the torn record and all after it, says so,
// and takes the next record after the last intact one. When a later record
// says a sync covering it had returned, it was durable: the open refuses,
// naming the segment and offset, and changes nothing.
func TestPowerLossLog(t *testing.T) {
	t.Parallel()
	tune := noFoldTuning
	tune.prealloc = 1 << 20
	crashed := unfoldedStore(t, 30, tune)
	recs := readLog(t, crashed)
	if len(recs) != 30 || recs[0].file != recs[29].file {
		t.Fatalf("%d records: want 30 in one segment", len(recs))
	}
	for i, r := range recs[1:] {
		// Each unit waited for its sync: the next record says so.
		if r.synced != recs[i].seq {
			t.Fatalf("record of seq %d says %d synced, want %d", r.seq, r.synced, recs[i].seq)
		}
	}
	whole, err := os.ReadFile(recs[0].file)
	if err != nil {
		t.Fatal(err)
	}
	const k = 20 // the torn record; records k+1.. follow it
	torn := recs[k]
	tears := map[string]func(b []byte){
		"body zeros":         func(b []byte) { clear(b[torn.off+testHead : torn.off+torn.size]) },
		"header zeros":       func(b []byte) { clear(b[torn.off : torn.off+testHead]) },
		"all zeros":          func(b []byte) { clear(b[torn.off : torn.off+torn.size]) },
		"end of body zeros":  func(b []byte) { clear(b[torn.off+torn.size-40 : torn.off+torn.size]) },
		"a byte of its body": func(b []byte) { b[torn.off+testHead+7] ^= 1 },
	}
	for name, tear := range tears {
		for _, covered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/covered=%v", name, covered), func(t *testing.T) {
				b := bytes.Clone(whole)
				// The records after the torn one were written before its
				// sync returned (synced: the record before it), or, when
				// covered, the last of them after.
				for j := k + 1; j < len(recs); j++ {
					r := recs[j]
					synced := recs[k-1].seq
					if covered && j == len(recs)-1 {
						synced = torn.seq
					}
					copy(b[r.off:], testRecordBytes(r.seq, synced, bytes.Clone(whole[r.off+testHead:r.off+r.size])))
				}
				tear(b)
				path := filepath.Join(t.TempDir(), "p.db")
				copyStore(t, crashed, path)
				seg := path + strings.TrimPrefix(torn.file, crashed)
				if err := os.WriteFile(seg, b, 0o644); err != nil {
					t.Fatal(err)
				}
				var logged bytes.Buffer
				s, err := open(path, Options{Log: slog.New(slog.NewTextHandler(&logged, nil))}, defaultTuning)
				if covered {
					want := fmt.Sprintf("log segment %s is damaged at offset %d", seg, torn.off)
					if err == nil || !strings.Contains(err.Error(), want) {
						if s != nil {
							s.Close()
						}
						t.Fatalf("open answered %v, want %q", err, want)
					}
					if after, _ := os.ReadFile(seg); !bytes.Equal(after, b) {
						t.Fatal("Open changed a segment it refused")
					}
					return
				}
				if err != nil {
					t.Fatalf("open: %v, want the torn tail cut", err)
				}
				got := newModel()
				seq, err := s.Load(got.apply)
				if err != nil {
					t.Fatal(err)
				}
				if p := prefixOf(t, got, seq); p != recs[k-1].seq {
					t.Fatalf("units up to %d, want %d", p, recs[k-1].seq)
				}
				for _, want := range []string{"never completed", fmt.Sprintf("offset=%d", torn.off), fmt.Sprintf("dropped_records=%d", len(recs)-k-1)} {
					if !strings.Contains(logged.String(), want) {
						t.Fatalf("logged %q, want %q in it", logged.String(), want)
					}
				}
				// The next record follows the last intact one.
				if err := s.Commit(seq+1, unitChanges(seq+1))(); err != nil {
					t.Fatal(err)
				}
				again := filepath.Join(t.TempDir(), "again.db")
				copyStore(t, path, again)
				s.Close()
				got, seq2, _, s2 := load(t, again, Options{}, defaultTuning)
				defer s2.Close()
				if p := prefixOf(t, got, seq2); p != seq+1 {
					t.Fatalf("after the cut and one more unit: units up to %d, want %d", p, seq+1)
				}
			})
		}
	}
}
