//go:build !noasm && !purego

package cpu

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// TestCodebookCopiesAtLoad: on HugePages backends the code copies the
// 8-bit kernels read (the int16 kernels' transposed copy on AVX-512, the
// scalar kernel's tile-major copy on AVX2) exist once LoadCodebook
// returns, so the first multiply costs what the others do; without
// HugePages neither is made.
func TestCodebookCopiesAtLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	c := randomCodebook(t, rng, 2048, 512, 1, 4, 8, 128, false)
	for _, isa := range []ISA{AVX512VNNI, AVX2} {
		for _, huge := range []bool{true, false} {
			be, err := New(Config{ISA: isa, HugePages: huge})
			if err != nil {
				t.Logf("%s: %v", isa, err)
				continue
			}
			mx, err := be.LoadCodebook(c, false)
			if err != nil {
				t.Fatal(err)
			}
			var made bool
			switch {
			case mx.i16():
				made = mx.i16st != nil && mx.i16st.codes != nil
			case mx.scalar():
				made = mx.tm != nil
			default:
				t.Fatalf("%s: kernel %s, want the int16 or the scalar one", isa, mx.Kernel())
			}
			if made != huge {
				t.Errorf("%s huge=%v: code copy made at load: %v", isa, huge, made)
			}
			if err := mx.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestTransposeI16 checks the int16 kernels' transposed copy byte for
// byte against its definition (cbI16): code c of row r, codebook i and
// segment j is byte j%4 of packed word ((r/32*M + i)*WL + j/4)*32 + r%32,
// and lands at i*per + j0*NB*64 + b*64*n + s*64 + p for block b = r/64,
// column tile [j0, j0+n) holding j = j0+s, and cbI16Row(p) = r%64; rows
// past Rows stay zero. Tiles of 1 to all segments, rows not a multiple
// of 64 or 32.
func TestTransposeI16(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	be, err := New(Config{ISA: AVX512VNNI, HugePages: true})
	if err != nil {
		t.Skip(err)
	}
	for _, cfg := range [][4]int{{1, 4, 128, 2048}, {2, 8, 128, 2100}, {1, 2, 32, 2111}, {2, 4, 16, 2048}, {1, 8, 0, 2200}} {
		m, v, g, rows := cfg[0], cfg[1], cfg[2], cfg[3]
		for _, cols := range []int{136, 1024} {
			if cols%v != 0 || (g != 0 && cols%g != 0) {
				continue
			}
			c := randomCodebook(t, rng, rows, cols, m, v, 8, g, false)
			mx, err := be.LoadCodebook(c, false)
			if err != nil {
				t.Fatal(err)
			}
			nv, wl := c.NV(), c.WL()
			nb := (c.PRows + 63) / 64
			var pos [64]int
			for p := range pos {
				pos[cbI16Row(p)] = p
			}
			for _, T := range []int{1, 3, 8, 32, nv} {
				st := &cbI16{nb: nb, t: T}
				got, blk := mx.transposeI16(st)
				per := nb * 64 * nv
				want := make([]uint8, m*per)
				for i := 0; i < m; i++ {
					for j0 := 0; j0 < nv; j0 += T {
						n := min(T, nv-j0)
						for r := 0; r < rows; r++ {
							for s := 0; s < n; s++ {
								j := j0 + s
								w := c.Words[((r/32*m+i)*wl+j/4)*32+r%32]
								want[i*per+j0*nb*64+r/64*64*n+s*64+pos[r%64]] = uint8(w >> (8 * (j % 4)))
							}
						}
					}
				}
				if string(got) != string(want) {
					t.Errorf("m%dv%dg%d %dx%d, tiles of %d: transposed copy differs", m, v, g, rows, cols, T) // g 0: whole row
				}
				blk.Free()
			}
			mx.Close()
		}
	}
}

// TestCodebookDroppedFreesCopies: a matrix dropped without Close frees
// its huge-page code copies once collected (they leaked before: only
// Close freed them), and Close frees them at once.
func TestCodebookDroppedFreesCopies(t *testing.T) {
	if raceEnabled { // the cleanup's write of Bytes is not ordered before the reads below
		t.Skip("race detector")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	c := randomCodebook(t, rng, 2048, 512, 1, 4, 8, 128, false)
	for _, isa := range []ISA{AVX512VNNI, AVX2} {
		be, err := New(Config{ISA: isa, HugePages: true})
		if err != nil {
			t.Logf("%s: %v", isa, err)
			continue
		}
		mx, err := be.LoadCodebook(c, false)
		if err != nil {
			t.Fatal(err)
		}
		blocks := mx.codeBlocks()
		if len(blocks) == 0 {
			t.Fatalf("%s: no huge-page code copy (kernel %s)", isa, mx.Kernel())
		}
		if err := mx.Close(); err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if b.Bytes != nil {
				t.Errorf("%s: Close kept a code copy", isa)
			}
		}
		mx, err = be.LoadCodebook(c, false)
		if err != nil {
			t.Fatal(err)
		}
		blocks = mx.codeBlocks()
		mx = nil
		kept := func() bool {
			for _, b := range blocks {
				if b.Bytes != nil {
					return true
				}
			}
			return false
		}
		for i := 0; i < 200 && kept(); i++ {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
		if kept() {
			t.Errorf("%s: a dropped matrix kept its code copies", isa)
		}
		be.Close()
	}
}
