package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fenecdb/fenec/server/engine"
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

// mib writes a count of bytes in MiB, to a tenth.
func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + "MiB" }

// checkMemory refuses a --memory (limit) below what the loaded collections'
// indexes alone need. The figure is engine.Footprint's IndexBytes: each
// collection's documents times the estimated bytes of one entry in its id
// map and in each of its field indexes (engine/footprint.go, measured in
// bench/results/memory.md). It leaves out the rows themselves, which the
// server evicts to the file under the limit (engine/evict.go), so it is a
// floor: a --memory above it may still be past what the server holds (the
// rows it may not evict, the collector's headroom), and the server then
// serves on and reports it (httpapi.WatchMemory).
func checkMemory(limit int64, fps []engine.Footprint) error {
	var need int64
	var parts []string
	for _, f := range fps {
		if f.IndexBytes > 0 {
			need += f.IndexBytes
			parts = append(parts, fmt.Sprintf("%s: %d documents, %s", f.Name, f.Rows+f.Evicted, mib(f.IndexBytes)))
		}
	}
	if limit >= need {
		return nil
	}
	return fmt.Errorf("--memory %s is less than the indexes of the loaded collections alone need: about %s (%s); give --memory %dMiB or more",
		mib(limit), mib(need), strings.Join(parts, "; "), need>>20+1)
}
