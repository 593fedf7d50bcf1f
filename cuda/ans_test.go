//go:build cuda

package cuda_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/cuda"
	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
)

// openBackend opens device 0 (skipping without one), closed when the
// test ends.
func openBackend(t *testing.T) *cuda.Backend {
	t.Helper()
	device(t)
	b, err := cuda.Open(0, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// ansCases are matrices of every kind the format handles: several
// shapes, sigma 0.5..40, a constant matrix, all 256 values (escapes) and
// rare outliers.
func ansCases(rng *rand.Rand) []struct {
	name       string
	rows, cols int
	w          []int8
} {
	type tc = struct {
		name       string
		rows, cols int
		w          []int8
	}
	var out []tc
	for _, s := range []struct {
		rows, cols int
		sigma      float64
	}{{32, 128, 0.5}, {64, 256, 4}, {96, 384, 40}, {33 * 32, 640, 4}, {128, 1024, 12}, {3000, 128, 2}} {
		out = append(out, tc{"sigma", s.rows, s.cols, matvans.Draw(rng, s.rows*s.cols, s.sigma)})
	}
	c := make([]int8, 64*256)
	for i := range c {
		c[i] = -7
	}
	out = append(out, tc{"constant", 64, 256, c})
	all := make([]int8, 64*512)
	for i := range all {
		all[i] = int8(rng.IntN(256) - 128)
	}
	out = append(out, tc{"all256", 64, 512, all})
	o := matvans.Draw(rng, 96*384, 3)
	for i := 0; i < 200; i++ {
		o[rng.IntN(len(o))] = int8(rng.IntN(2)*255 - 128)
	}
	out = append(out, tc{"outliers", 96, 384, o})
	return out
}

// TestANSMul: both layouts, bit-exact with the product of the raw matrix
// and with layout/ans's DotUnit.
func TestANSMul(t *testing.T) {
	b := openBackend(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range ansCases(rng) {
		v := matvans.Draw(rng, c.cols, 30)
		ref := make([]int32, c.rows)
		matvans.Dot(c.w, c.rows, c.cols, v, ref)
		for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
			if ans.CheckShape(l, c.rows, c.cols) != nil {
				continue
			}
			m, err := ans.Encode(c.w, c.rows, c.cols, l)
			if err != nil {
				t.Fatal(err)
			}
			if c.name == "all256" || c.name == "outliers" {
				if m.Model.Escape < 0 || len(m.Esc) == 0 {
					t.Errorf("%s %s: expected escapes", c.name, l)
				}
			}
			mx, err := b.LoadANS(m)
			if err != nil {
				t.Fatal(err)
			}
			y := make([]int32, c.rows)
			for i := range y {
				y[i] = 0x55555555
			}
			if err := mx.Mul(v, y); err != nil {
				t.Fatalf("%s %dx%d %s: %v", c.name, c.rows, c.cols, l, err)
			}
			for r := range y {
				if y[r] != ref[r] {
					t.Fatalf("%s %dx%d %s (%d escapes): y[%d] = %d, want %d", c.name, c.rows, c.cols, l, len(m.Esc), r, y[r], ref[r])
				}
			}
			mx.Close()
		}
	}
}

// mulRef multiplies with layout/ans's DotUnit, reporting whether any unit
// is corrupt.
func mulRef(m *ans.Matrix, v []int8) ([]int32, error) {
	per := 1
	if m.Layout == ans.WarpStripes {
		per = ans.Lanes
	}
	y := make([]int32, m.Rows)
	out := make([]int32, ans.Lanes)
	var first error
	for u := 0; u < m.Units(); u++ {
		if err := m.DotUnit(u, v, out); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		copy(y[u*per:], out[:per])
	}
	return y, first
}

// TestANSCorrupt: corrupted streams, states and escape offsets are errors
// on the GPU exactly when the reference decoder finds them, and a
// multiply the reference accepts gives its results; wrong offset tables
// are refused at load.
func TestANSCorrupt(t *testing.T) {
	b := openBackend(t)
	rng := rand.New(rand.NewPCG(9, 10))
	const rows, cols = 64, 384
	w := matvans.Draw(rng, rows*cols, 5)
	for i := 0; i < 100; i++ {
		w[rng.IntN(len(w))] = 127
	}
	v := matvans.Draw(rng, cols, 20)
	var detected int
	for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
		good, err := ans.Encode(w, rows, cols, l)
		if err != nil {
			t.Fatal(err)
		}
		if len(good.Esc) == 0 {
			t.Fatalf("%s: want escapes in the test matrix", l)
		}
		for trial := 0; trial < 60; trial++ {
			m := *good
			m.Words = append([]uint32(nil), good.Words...)
			m.EscOffsets = append([]uint64(nil), good.EscOffsets...)
			m.Esc = append([]int8(nil), good.Esc...)
			switch trial % 4 {
			case 0: // a flipped bit anywhere in a unit's stream
				m.Words[rng.IntN(len(m.Words))] ^= 1 << rng.IntN(32)
			case 1: // an initial state out of range
				u := rng.IntN(m.Units())
				m.Words[m.Offsets[u]+2*uint64(rng.IntN(ans.Lanes))+1] = uint32(rng.IntN(2)) << 31
			case 2: // escape bytes moved between units
				u := 1 + rng.IntN(m.Units()-1)
				if m.EscOffsets[u] > m.EscOffsets[u-1] {
					m.EscOffsets[u]--
				} else {
					m.EscOffsets[u]++
					if m.EscOffsets[u] > m.EscOffsets[u+1] {
						m.EscOffsets[u+1] = m.EscOffsets[u]
					}
				}
			case 3: // a stream truncated: the unit's tail zeroed
				u := rng.IntN(m.Units())
				for i := m.Offsets[u] + 64 + uint64(rng.IntN(64)); i < m.Offsets[u+1]; i++ {
					m.Words[i] = 0
				}
			}
			if m.CheckOffsets() != nil {
				continue
			}
			wantY, wantErr := mulRef(&m, v)
			mx, err := b.LoadANS(&m)
			if err != nil {
				t.Fatal(err)
			}
			y := make([]int32, rows)
			err = mx.Mul(v, y)
			mx.Close()
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%s trial %d: GPU error %v, reference error %v", l, trial, err, wantErr)
			}
			if err != nil {
				detected++
				if !errors.Is(err, ans.ErrCorrupt) {
					t.Errorf("%s trial %d: error %v does not wrap ans.ErrCorrupt", l, trial, err)
				}
				continue
			}
			for r := range y {
				if y[r] != wantY[r] {
					t.Fatalf("%s trial %d: y[%d] = %d, reference %d", l, trial, r, y[r], wantY[r])
				}
			}
		}
		// Offset tables that do not fit the stream are refused at load.
		m := *good
		m.Offsets = append([]uint64(nil), good.Offsets...)
		m.Offsets[1] += 64
		if _, err := b.LoadANS(&m); err == nil {
			t.Errorf("%s: offsets off the 128-word grid were accepted", l)
		}
		m.Offsets = good.Offsets
		m.Words = good.Words[:len(good.Words)-128]
		if _, err := b.LoadANS(&m); err == nil {
			t.Errorf("%s: a truncated payload was accepted", l)
		}
	}
	if detected < 40 {
		t.Errorf("only %d corruptions detected", detected)
	}
}

// TestInt8Mul: the plain int8 kernels (columns a multiple of 16, and not).
func TestInt8Mul(t *testing.T) {
	b := openBackend(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, s := range [][2]int{{1, 16}, {37, 100}, {100, 4096}, {257, 2048 + 16}, {5, 3}} {
		rows, cols := s[0], s[1]
		w := matvans.Draw(rng, rows*cols, 60)
		v := matvans.Draw(rng, cols, 60)
		ref := make([]int32, rows)
		matvans.Dot(w, rows, cols, v, ref)
		mx, err := b.LoadInt8(w, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		y := make([]int32, rows)
		if err := mx.Mul(v, y); err != nil {
			t.Fatal(err)
		}
		for r := range y {
			if y[r] != ref[r] {
				t.Fatalf("%dx%d: y[%d] = %d, want %d", rows, cols, r, y[r], ref[r])
			}
		}
		if err := mx.Mul(v[:cols-1], y); err == nil {
			t.Errorf("%dx%d: a short vector was accepted", rows, cols)
		}
		mx.Close()
	}
	if _, err := b.LoadInt8(make([]int8, 10), 3, 4); err == nil {
		t.Error("LoadInt8 accepted 10 values for 3x4")
	}
}

// TestRunChain: the MatVANS chain on the device, int8 and both ANS
// layouts, equals the reference by value and hash; a corrupt matrix in
// the chain is reported by index.
func TestRunChain(t *testing.T) {
	b := openBackend(t)
	for _, d := range []int{256, 512} {
		wl, err := matvans.New(d, 4, 4, uint64(d))
		if err != nil {
			t.Fatal(err)
		}
		var int8s, rows, stripes []cuda.ChainMat
		var bad *ans.Matrix
		for _, w := range wl.W {
			mi, err := b.LoadInt8(w, d, d)
			if err != nil {
				t.Fatal(err)
			}
			int8s = append(int8s, mi)
			for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
				m, err := ans.Encode(w, d, d, l)
				if err != nil {
					t.Fatal(err)
				}
				bad = m
				ma, err := b.LoadANS(m)
				if err != nil {
					t.Fatal(err)
				}
				if l == ans.WarpRows {
					rows = append(rows, ma)
				} else {
					stripes = append(stripes, ma)
				}
			}
		}
		for name, ms := range map[string][]cuda.ChainMat{"int8": int8s, "warp-rows": rows, "warp-stripes": stripes} {
			got, err := b.RunChain(ms, wl.Alpha, wl.V0)
			if err != nil {
				t.Fatalf("d %d %s: %v", d, name, err)
			}
			if matvans.Hash(got) != matvans.Hash(wl.Ref) {
				t.Errorf("d %d %s: hash %08x, reference %08x", d, name, matvans.Hash(got), matvans.Hash(wl.Ref))
			}
			for i := range got {
				if got[i] != wl.Ref[i] {
					t.Fatalf("d %d %s: v[%d] = %d, reference %d", d, name, i, got[i], wl.Ref[i])
				}
			}
		}
		// The last matrix, its first state zeroed: an error naming matrix 3.
		bad.Words[0], bad.Words[1] = 0, 0
		mb, err := b.LoadANS(bad)
		if err != nil {
			t.Fatal(err)
		}
		ms := append(append([]cuda.ChainMat(nil), stripes[:3]...), mb)
		if _, err := b.RunChain(ms, wl.Alpha, wl.V0); !errors.Is(err, ans.ErrCorrupt) || !containsAll(err.Error(), "matrix 3", "unit 0") {
			t.Errorf("d %d: corrupt chain: %v", d, err)
		}
		if _, err := b.RunChain(ms[:2], wl.Alpha, wl.V0); err == nil {
			t.Errorf("d %d: RunChain accepted 2 matrices with 4 scales", d)
		}
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
