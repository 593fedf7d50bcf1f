//go:build linux

package cpu

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"

	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
)

// guardedWords returns a copy of w whose last element ends exactly where
// an inaccessible page begins, so that any load past the end of the
// stream faults; the mapping is released when the test ends.
func guardedWords(t *testing.T, w []uint32) []uint32 {
	t.Helper()
	page := syscall.Getpagesize()
	n := 4 * len(w)
	data := (n + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, data+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	if err := syscall.Mprotect(mem[data:], syscall.PROT_NONE); err != nil {
		syscall.Munmap(mem)
		t.Skipf("mprotect: %v", err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	g := unsafe.Slice((*uint32)(unsafe.Pointer(&mem[data-n])), len(w))
	copy(g, w)
	return g
}

// TestANSStreamAtPageEnd multiplies ANS matrices whose word stream ends
// right before an inaccessible page on every kernel set and decoder
// variant: the AVX-512 decoders load 16 words ahead of the stream
// position, which must never reach past the matrix's words (the last
// unit is decoded from a padded copy).
func TestANSStreamAtPageEnd(t *testing.T) {
	saved := ansVariant
	defer func() { ansVariant = saved }()
	rng := rand.New(rand.NewPCG(71, 72))
	for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
		for _, sh := range [][2]int{{32, 128}, {64, 512}, {96, 1024}} {
			rows, cols := sh[0], sh[1]
			w := matvans.Draw(rng, rows*cols, 6)
			v := matvans.Draw(rng, cols, 40)
			want := make([]int32, rows)
			matvans.Dot(w, rows, cols, v, want)
			a, err := ans.Encode(w, rows, cols, l)
			if err != nil {
				t.Fatal(err)
			}
			a.Words = guardedWords(t, a.Words)
			for _, variant := range []int{ansMul, ansMadd, ansMaddQ} {
				ansVariant = variant
				for _, isa := range supportedSets() {
					be, err := New(Config{ISA: isa, Threads: 2})
					if err != nil {
						t.Fatal(err)
					}
					y := make([]int32, rows)
					if err := be.MulANS(a, v, y); err != nil {
						t.Fatal(err)
					}
					for r := range y {
						if y[r] != want[r] {
							t.Fatalf("%s %s %dx%d variant %d: row %d = %d, want %d", isa, l, rows, cols, variant, r, y[r], want[r])
						}
					}
				}
			}
		}
	}
}
