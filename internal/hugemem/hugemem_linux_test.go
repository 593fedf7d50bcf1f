//go:build linux

package hugemem

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// maps returns the address ranges of /proc/self/maps.
func maps(t *testing.T) [][2]uintptr {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	var out [][2]uintptr
	for _, l := range strings.Split(string(b), "\n") {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(l, "%x-%x", &lo, &hi); err == nil {
			out = append(out, [2]uintptr{lo, hi})
		}
	}
	return out
}

// mapsAt returns the ranges that hold addr.
func mapsAt(t *testing.T, addr uintptr) [][2]uintptr {
	var out [][2]uintptr
	for _, r := range maps(t) {
		if r[0] <= addr && addr < r[1] {
			out = append(out, r)
		}
	}
	return out
}

// TestAllocMapping: a block is one mapping starting on a 2 MiB boundary
// (the alignment slack unmapped), counted while held, and gone after
// Free; past maxMappings blocks come from Go memory.
func TestAllocMapping(t *testing.T) {
	n0 := mappings.Load()
	before := map[[2]uintptr]bool{}
	for _, r := range maps(t) {
		before[r] = true
	}
	b := Alloc(3<<20 + 5)
	lo := uintptr(unsafe.Pointer(&b.Bytes[0]))
	hi := lo + uintptr(3<<20+pageSize) // 3 MiB + 5 bytes in whole pages
	if lo%hugePage != 0 || mappings.Load() != n0+1 {
		t.Fatalf("block at %#x, %d mappings counted (want %d)", lo, mappings.Load(), n0+1)
	}
	if r := mapsAt(t, lo); len(r) != 1 || r[0] != [2]uintptr{lo, hi} {
		t.Fatalf("maps at the block: %x, want [%x %x]", r, lo, hi)
	}
	for _, r := range maps(t) { // the slack mapped to align it is gone
		if !before[r] && r != [2]uintptr{lo, hi} && (r[1] == lo || r[0] == hi) {
			t.Fatalf("a new mapping %x beside the block [%x %x]", r, lo, hi)
		}
	}
	b.Free()
	if r := mapsAt(t, lo); len(r) != 0 || mappings.Load() != n0 {
		t.Fatalf("after Free: maps %x, %d mappings counted (want %d)", r, mappings.Load(), n0)
	}
	mappings.Add(maxMappings) // as if that many were held
	g := Alloc(1 << 20)
	mappings.Add(-maxMappings)
	if g.free != nil || len(g.Bytes) != 1<<20 || mappings.Load() != n0 {
		t.Fatalf("past the cap: a mapped block (%v), %d bytes, %d mappings counted", g.free != nil, len(g.Bytes), mappings.Load())
	}
}
