//go:build !noasm && !purego

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
)

// TestANSAVX2 checks the AVX2 decoder unit by unit against ans DotUnit
// (bit-exact) on the shapes and value sets of the layout/ans tests:
// gaussians, a constant (one symbol, frequency 128), every int8 value
// (escapes), rare outliers.
func TestANSAVX2(t *testing.T) {
	if !hasAll(ansAVX2Requires) {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(61, 62))
	gauss := func(n int, sigma float64) []int8 {
		w := make([]int8, n)
		for i := range w {
			w[i] = int8(max(-128, min(127, math.RoundToEven(rng.NormFloat64()*sigma))))
		}
		return w
	}
	escBuf := make([]uint32, 4096)
	for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
		shapes := [][2]int{{1, 128}, {3, 256}, {17, 1024}, {5, 128 * 9}}
		if l == ans.WarpStripes {
			shapes = [][2]int{{32, 4}, {32, 132}, {64, 1000}, {96, 256}}
		}
		for _, sh := range shapes {
			rows, cols := sh[0], sh[1]
			var sets [][]int8
			for _, sigma := range []float64{0.5, 1, 4, 10, 40} {
				sets = append(sets, gauss(rows*cols, sigma))
			}
			c, all, out := make([]int8, rows*cols), make([]int8, rows*cols), make([]int8, rows*cols)
			for i := range c {
				c[i] = -7
				all[i] = int8(rng.IntN(256) - 128)
				out[i] = int8(rng.IntN(3) - 1)
				if rng.IntN(500) == 0 {
					out[i] = 120
				}
			}
			sets = append(sets, c, all, out)
			for si, w := range sets {
				m, err := ans.Encode(w, rows, cols, l)
				if err != nil {
					t.Fatal(err)
				}
				v := matvans.Draw(rng, cols, 40)
				tab := ansAVX2Table(&m.Model)
				want, got := make([]int32, ans.Lanes), make([]int32, ans.Lanes)
				for u := 0; u < m.Units(); u++ {
					if err := m.DotUnit(u, v, want); err != nil {
						t.Fatal(err)
					}
					clear(got)
					if err := dotUnitAVX2(m, tab, u, v, got, escBuf, new([ans.Lanes]int32)); err != nil {
						t.Fatalf("%s %dx%d set %d unit %d: %v", l, rows, cols, si, u, err)
					}
					for k := range want {
						if got[k] != want[k] {
							t.Fatalf("%s %dx%d set %d unit %d: out[%d] = %d, want %d", l, rows, cols, si, u, k, got[k], want[k])
						}
					}
				}
			}
		}
	}
}

// TestANSCorruptAVX2 is TestANSCorruptSIMD for the AVX2 decoder.
func TestANSCorruptAVX2(t *testing.T) {
	if !Supported(AVX2) {
		t.Skip("no AVX2 kernel set")
	}
	rng := rand.New(rand.NewPCG(71, 72))
	be, err := New(Config{ISA: AVX2, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	if be.ANSKernel() != "cpu-avx2-ans" {
		t.Fatalf("ANS kernel %s, want cpu-avx2-ans", be.ANSKernel())
	}
	checkANSCorrupt(t, be, rng, func(l ans.Layout, m *ans.Matrix, v []int8) {
		// Every unit cut to its states plus one word: the kernel must stop
		// at the unit's end (stream exhausted), never read the next unit.
		c := *m
		c.Offsets = append([]uint64(nil), m.Offsets...)
		for u := 0; u+1 < len(c.Offsets); u++ {
			tab := ansAVX2Table(&c.Model)
			n := int(c.Offsets[u+1]-c.Offsets[u]) - 1
			steps := c.Cols / 128
			if l == ans.WarpStripes {
				steps = c.Cols / 4
			}
			got := asmFuncAVX2(l)(&c.Words[c.Offsets[u]], 64+n%2, steps, &tab[0], &v[0], &make([]int32, 32)[0], &make([]uint32, 4096)[0], 4096)
			if got != -1 && got != -3 {
				t.Fatalf("%s unit %d: truncated unit returned %d", l, u, got)
			}
		}
	})
}

func asmFuncAVX2(l ans.Layout) func(words *uint32, nwords int, steps int, tab *uint32, v *int8, acc *int32, esc *uint32, escCap int) int {
	if l == ans.WarpStripes {
		return ansAVX2Funcs[1]
	}
	return ansAVX2Funcs[0]
}
