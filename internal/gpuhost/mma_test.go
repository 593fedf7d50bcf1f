package gpuhost

import (
	"math"
	"math/rand"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

// TestMMAOrderPermutes checks that MMAOrder moves every activation of the
// used vectors exactly once (tagging each value by its column and vector)
// and that the Bits block sums are the sums of the blocks.
func TestMMAOrderPermutes(t *testing.T) {
	const pc, nv, batch = 1024, 8, 3
	xp := make([]layout.FP16, nv*pc)
	for v := 0; v < batch; v++ {
		for c := 0; c < pc; c++ {
			xp[v*pc+c] = layout.FP16(1 + v*pc + c) // distinct bit patterns
		}
	}
	for _, n := range []int{0, 8, 4, 2} {
		xr, xsum, err := MMAOrder(n, xp, batch, pc, nv)
		if err != nil {
			t.Fatal(n, err)
		}
		seen := map[layout.FP16]int{}
		for i, h := range xr {
			if h != 0 {
				seen[h]++
				if v := (int(h) - 1) / pc; ((i/4)%(nv*4))/4 != v {
					t.Fatalf("n=%d: vector %d's value at %d, in the slot of vector %d", n, v, i, ((i/4)%(nv*4))/4)
				}
			}
		}
		if len(seen) != batch*pc {
			t.Fatalf("n=%d: %d distinct values placed, want %d", n, len(seen), batch*pc)
		}
		for h, k := range seen {
			if k != 1 {
				t.Fatalf("n=%d: value %d placed %d times", n, h, k)
			}
		}
		if (n == 0) != (xsum == nil) {
			t.Fatalf("n=%d: xsum %v", n, xsum != nil)
		}
		for v := 0; n != 0 && v < batch; v++ {
			for blk := 0; blk < pc/128; blk++ {
				var s float32
				for c := blk * 128; c < (blk+1)*128; c++ {
					s += xp[v*pc+c].Float32()
				}
				if xsum[v*(pc/128)+blk] != s {
					t.Fatalf("n=%d: block sum %d of vector %d = %v, want %v", n, blk, v, xsum[v*(pc/128)+blk], s)
				}
			}
		}
	}
	if _, _, err := MMAOrder(3, xp, batch, pc, nv); err == nil {
		t.Error("3-bit codes accepted")
	}
	if _, _, err := MMAOrder(4, xp[:pc], batch, pc, nv); err == nil {
		t.Error("short activations accepted")
	}
}

// TestSplitHiLo checks the hi/lo split's error bound, its scale and the
// refusal of non-finite activations.
func TestSplitHiLo(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const pc, batch = 256, 4
	x := make([]float32, batch*pc)
	scales := []float64{1, 1e-7, 3e4, 1e30}
	for v := 0; v < batch; v++ {
		for c := 0; c < pc; c++ {
			x[v*pc+c] = float32(rng.NormFloat64() * scales[v] * math.Pow(10, float64(rng.Intn(5)-2)))
		}
	}
	x[5] = 0
	xp, inv, ok := SplitHiLo(x, batch, pc, 8)
	if !ok {
		t.Fatal("finite activations refused")
	}
	for v := 0; v < batch; v++ {
		m := 0.0
		for _, f := range x[v*pc : (v+1)*pc] {
			m = math.Max(m, math.Abs(float64(f)))
		}
		if s := m / float64(inv[v]); s < 1<<14 || s >= 1<<15 {
			t.Errorf("vector %d: scaled maximum %g outside [2^14, 2^15)", v, s)
		}
		for c, f := range x[v*pc : (v+1)*pc] {
			hi, lo := xp[2*v*pc+c].Float32(), xp[(2*v+1)*pc+c].Float32()
			got := (float64(hi) + float64(lo)) * float64(inv[v])
			if d := math.Abs(got - float64(f)); d > math.Abs(float64(f))*math.Ldexp(1, -21)+m*math.Ldexp(1, -38) {
				t.Fatalf("vector %d column %d: %g split as %g + %g (error %g)", v, c, f, hi, lo, d)
			}
		}
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		x[7] = bad
		if _, _, ok := SplitHiLo(x, batch, pc, 8); ok {
			t.Errorf("%v accepted", bad)
		}
	}
	if _, _, ok := SplitHiLo(x, 5, pc, 8); ok {
		t.Error("5 vectors in 8 columns accepted")
	}
}
