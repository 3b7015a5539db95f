package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// walTail is what a scan of the WAL file found after its last complete
// transaction: frames SQLite's recovery will ignore. A crash in the middle
// of a commit leaves them (a torn or never-finished write); SQLite drops
// them silently, so the store says so.
type walTail struct {
	frames int   // frames (whole or torn) of the current WAL after its last commit
	bytes  int64 // their bytes
	kept   int   // committed frames SQLite will replay
}

// The WAL format: https://www.sqlite.org/fileformat2.html#the_write_ahead_log
const (
	walHeaderSize = 32
	walFrameHead  = 24
	walMagicLE    = 0x377f0682
	walMagicBE    = 0x377f0683
)

// scanWAL reads the WAL file at path (absent: nothing found) and answers
// what SQLite will drop from it: the frames of the current WAL (those with
// its salts) that follow its last valid commit frame. Frames with other
// salts are an older WAL's, overwritten in place and rightly ignored.
func scanWAL(path string) (walTail, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return walTail{}, nil
	}
	if err != nil {
		return walTail{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return walTail{}, err
	}
	size := st.Size()
	if size == 0 {
		return walTail{}, nil
	}
	hdr := make([]byte, walHeaderSize)
	if _, err := io.ReadFull(f, hdr); err != nil {
		// A header cut short: the whole WAL is ignored.
		return walTail{frames: 1, bytes: size}, nil
	}
	var order binary.ByteOrder
	switch binary.BigEndian.Uint32(hdr) {
	case walMagicLE:
		order = binary.LittleEndian
	case walMagicBE:
		order = binary.BigEndian
	default:
		return walTail{frames: 1, bytes: size}, nil
	}
	pageSize := int64(binary.BigEndian.Uint32(hdr[8:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	s0, s1 := walChecksum(order, hdr[:24], 0, 0)
	if s0 != binary.BigEndian.Uint32(hdr[24:]) || s1 != binary.BigEndian.Uint32(hdr[28:]) {
		return walTail{frames: 1, bytes: size}, nil // a torn header: SQLite ignores the WAL
	}
	salt1, salt2 := binary.BigEndian.Uint32(hdr[16:]), binary.BigEndian.Uint32(hdr[20:])
	frame := make([]byte, walFrameHead+pageSize)
	var t walTail
	commitEnd := int64(walHeaderSize)
	off := int64(walHeaderSize)
	pending := 0
	for off < size {
		n, err := io.ReadFull(f, frame)
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			// A frame cut short: torn, if its header (as far as it goes)
			// carries this WAL's salts.
			if n < walFrameHead || (binary.BigEndian.Uint32(frame[8:]) == salt1 && binary.BigEndian.Uint32(frame[12:]) == salt2) {
				pending++
			}
			break
		}
		if err != nil {
			return walTail{}, err
		}
		if binary.BigEndian.Uint32(frame[8:]) != salt1 || binary.BigEndian.Uint32(frame[12:]) != salt2 {
			break // an older WAL's frame: the current one ends here
		}
		s0, s1 = walChecksum(order, frame[:8], s0, s1)
		s0, s1 = walChecksum(order, frame[walFrameHead:], s0, s1)
		if s0 != binary.BigEndian.Uint32(frame[16:]) || s1 != binary.BigEndian.Uint32(frame[20:]) {
			pending++ // a damaged frame: it and all after it are ignored
			break
		}
		off += int64(len(frame))
		pending++
		if binary.BigEndian.Uint32(frame[4:]) != 0 { // a commit frame
			t.kept += pending
			pending = 0
			commitEnd = off
		}
	}
	if pending > 0 {
		t.frames = pending
		t.bytes = size - commitEnd
		if end := commitEnd + int64(pending)*int64(len(frame)); end < size {
			t.bytes = end - commitEnd
		}
	}
	return t, nil
}

// walChecksum continues SQLite's WAL checksum over b (a multiple of 8
// bytes), reading words in the WAL's byte order.
func walChecksum(order binary.ByteOrder, b []byte, s0, s1 uint32) (uint32, uint32) {
	for i := 0; i+8 <= len(b); i += 8 {
		s0 += order.Uint32(b[i:]) + s1
		s1 += order.Uint32(b[i+4:]) + s0
	}
	return s0, s1
}

func (t walTail) String() string {
	return fmt.Sprintf("%d frame(s), %d bytes", t.frames, t.bytes)
}
