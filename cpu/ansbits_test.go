package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
)

// TestANSBitsDecoders: on every kernel set this CPU runs, a multiply of
// an entropy-coded matrix equals its plain twin's bit for bit (A8) and
// exactly (the float kernels read the same words), and corrupted streams
// are errors wrapping ans.ErrCorrupt, never a panic or a read outside
// the stream.
func TestANSBitsDecoders(t *testing.T) {
	for _, be := range openSets(t, 2) {
		isa := be.ISA()
		for _, spec := range []struct{ n, g int }{{8, 128}, {4, 32}, {2, 0}, {1, 128}} {
			m, err := ans.RandomBits(100, 3000, spec.n, spec.g, uint64(spec.n))
			if err != nil {
				t.Fatal(err)
			}
			plain, err := m.Plain()
			if err != nil {
				t.Fatal(err)
			}
			mc, err := be.LoadANSBits(m)
			if err != nil {
				t.Fatal(err)
			}
			mp, err := be.LoadBits(plain)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(spec.n), 1))
			x := make([]float32, 3*3000)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			for _, a8 := range []bool{true, false} {
				yc, yp := make([]float32, 300), make([]float32, 300)
				mul := func(mx *LowMatrix, y []float32) error {
					if a8 {
						return mx.MulA8(y, x, 3)
					}
					return mx.MulF32(y, x, 3)
				}
				if err := mul(mc, yc); err != nil {
					t.Fatalf("%s %s: %v", isa, m.Name(), err)
				}
				if err := mul(mp, yp); err != nil {
					t.Fatal(err)
				}
				// The same kernels give the same bits; the table kernels
				// (plain 1- and 2-bit A32) differ within the bound.
				if a8 || strings.HasPrefix(mc.Kernel(), mp.Kernel()+"+ans-") {
					if !slices.Equal(yc, yp) {
						t.Fatalf("%s %s (%s), A8 %v: results differ from the plain twin's", isa, m.Name(), mc.Kernel(), a8)
					}
					continue
				}
				ref, mag := make([]float64, 100), make([]float64, 100)
				for v := 0; v < 3; v++ {
					_ = plain.DotRef(ref, x[v*3000:(v+1)*3000])
					_ = plain.DotRefMag(mag, x[v*3000:(v+1)*3000])
					for r := range ref {
						if d := math.Abs(float64(yc[v*100+r]) - ref[r]); d > layout.BitsTolerance*mag[r] {
							t.Fatalf("%s %s (%s): vector %d row %d off by %v", isa, m.Name(), mc.Kernel(), v, r, d)
						}
					}
				}
			}
			// Corruption: single-bit flips of the coded words.
			detected := 0
			for i := 0; i < 100; i++ {
				c := *m.Code
				c.Words = slices.Clone(c.Words)
				c.Words[rng.IntN(len(c.Words))] ^= 1 << rng.IntN(32)
				bad := &ans.Bits{Header: m.Header, Code: &c}
				mx, err := be.LoadANSBits(bad)
				if err != nil {
					t.Fatal(err)
				}
				if err := mx.MulA8(make([]float32, 100), x[:3000], 1); err != nil {
					if !errors.Is(err, ans.ErrCorrupt) {
						t.Fatalf("%s: corrupt stream: %v does not wrap ans.ErrCorrupt", isa, err)
					}
					detected++
				}
			}
			// A flip that moves a digit between two symbols of
			// frequency 1 leaves the state as it was: the decode goes on
			// with one wrong code, and only the container's CRCs catch
			// it. Most flips change the state and fail the final check.
			if detected < 15 {
				t.Errorf("%s %s: %d of 100 single-bit flips detected", isa, m.Name(), detected)
			}
		}
	}
}
