package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag's size in bytes, written as a count with an optional
// unit: KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (of 1000),
// as Go's GOMEMLIMIT and most servers' settings read them.
type byteSize int64

var sizeUnits = []struct {
	suffix string
	n      int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

func (b *byteSize) String() string {
	if *b == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Set(s string) error {
	num, unit := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, unit = strings.TrimSpace(n), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/unit {
		return fmt.Errorf("%q is not a size: want a positive count of bytes, or one with KiB, MiB, GiB, TiB, KB, MB, GB or TB (512MiB)", s)
	}
	*b = byteSize(n * unit)
	return nil
}
