//go:build linux && amd64 && !noasm && !purego

package cpu

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// TestCodebookF16TableAtPageEnd: the binary16 Psumbook kernels read
// nothing past their tables. The pool hands the multiply a table buffer
// of exactly M*NV*2^B entries ending where an inaccessible page begins;
// the 4-bit kernels used to load 64 bytes for each 32-byte segment table
// (found by review: a fault in CbPsumF16B4M1Avx512).
func TestCodebookF16TableAtPageEnd(t *testing.T) {
	be, err := New(Config{ISA: AVX512VNNI, Threads: 1})
	if err != nil {
		t.Skipf("no AVX-512 kernel set: %v", err)
	}
	page := syscall.Getpagesize()
	for _, name := range []string{"cb-m1v4b4g128", "cb-m2v4b4g128", "cb-m1v2b4row", "cb-m1v4b6g128", "cb-m2v8b6g128"} {
		spec, err := layout.ParseFormatSpec(name)
		if err != nil {
			t.Fatal(err)
		}
		c, err := synth.Codebook(spec, 520, 256, 3)
		if err != nil {
			t.Fatal(err)
		}
		mx, err := be.LoadCodebook(c, false)
		if err != nil {
			t.Fatal(err)
		}
		if !mx.f16() {
			t.Fatalf("%s: not on the binary16-table kernel (%s)", name, mx.Kernel())
		}
		n := c.M * c.NV() << c.B // uint16 entries
		size := (2*n + page - 1) / page * page
		mem, err := syscall.Mmap(-1, 0, size+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			t.Skipf("mmap: %v", err)
		}
		if err := syscall.Mprotect(mem[size:], syscall.PROT_NONE); err != nil {
			t.Skipf("mprotect: %v", err)
		}
		tab := unsafe.Slice((*uint16)(unsafe.Pointer(&mem[size-2*n])), n)
		x := synth.Vector(c.Cols, 4)
		used := false
		for try := 0; try < 10 && !used; try++ { // the pool may drop a buffer at a GC
			for range 8 { // empty this P's slots, so that the next Get is tab
				f16Pool.Get()
			}
			f16Pool.Put(&tab)
			clear(tab)
			y := make([]float32, c.Rows)
			if err := mx.MulF32(y, x, 1); err != nil {
				t.Fatal(err)
			}
			for _, v := range tab {
				used = used || v != 0
			}
		}
		if !used {
			t.Fatalf("%s: the pool never handed out the guarded table", name)
		}
		// The mapping stays: the pool may still hold tab and hand it to a
		// later multiply, which may use it (its length and capacity are n).
	}
}
