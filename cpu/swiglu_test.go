package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSwiGLU: every path (the assembly one where the CPU has it, the
// generic one) is within 4 ulps of the formula with exp in float64, on
// random and extreme gates, odd lengths (tails), in place, with NaN and
// infinities handled as the formula does.
func TestSwiGLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 16*257 + 11
	g, u := make([]float32, n), make([]float32, n)
	for i := range g {
		switch i % 4 {
		case 0:
			g[i] = float32(rng.NormFloat64())
		case 1:
			g[i] = float32(rng.NormFloat64() * 20)
		case 2:
			g[i] = float32((rng.Float64()*2 - 1) * 120) // exp over- and underflow
		default:
			g[i] = float32(rng.NormFloat64() * 1e-3)
		}
		u[i] = float32(rng.NormFloat64())
	}
	special := []float32{0, float32(math.Copysign(0, -1)), 88.7, -88.7, 89.5, -89.5, 103.9, -104.5, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-40, -1e-40}
	copy(g[100:], special)
	copy(g[n-len(special):], special) // in the generic tail too
	want := func(x, y float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) * y }
	paths := map[string]func(d, g, u []float32){"generic": swigluGeneric}
	if swigluAsm != nil {
		paths["asm"] = func(d, g, u []float32) { SwiGLU(d, g, u) }
	}
	for name, f := range paths {
		for _, inPlace := range []bool{false, true} {
			d := make([]float32, n)
			gg := append([]float32(nil), g...)
			if inPlace {
				d = gg
			}
			f(d, gg, u)
			worst := 0.0
			for i := range d {
				w := want(g[i], u[i])
				switch {
				case math.IsNaN(float64(w)) || math.IsNaN(float64(d[i])):
					if math.IsNaN(float64(w)) != math.IsNaN(float64(d[i])) {
						t.Fatalf("%s: SwiGLU(%v, %v) = %v, want %v", name, g[i], u[i], d[i], w)
					}
					continue
				case math.IsInf(float64(w), 0):
					if d[i] != w {
						t.Fatalf("%s: SwiGLU(%v, %v) = %v, want %v", name, g[i], u[i], d[i], w)
					}
					continue
				}
				e := math.Abs(float64(d[i]-w)) / ulp32(w)
				worst = max(worst, e)
				if e > 4 {
					t.Fatalf("%s (in place %v): SwiGLU(%v, %v) = %v, want %v (%.1f ulps)", name, inPlace, g[i], u[i], d[i], w, e)
				}
			}
			t.Logf("%s: worst %.2f ulps", name, worst)
		}
	}
}

// ulp32 is the spacing of float32 values at v (the smallest denormal
// step at zero).
func ulp32(v float32) float64 {
	a := math.Abs(float64(v))
	return float64(math.Nextafter32(float32(a), float32(math.Inf(1)))) - a
}

// TestSwiGLUShort: a gate or up shorter than the destination is an error.
func TestSwiGLUShort(t *testing.T) {
	if err := SwiGLU(make([]float32, 4), make([]float32, 1), make([]float32, 4)); err == nil {
		t.Error("gate of 1 for 4: no error")
	}
	if err := SwiGLU(make([]float32, 40), make([]float32, 40), nil); err == nil {
		t.Error("nil up for 40: no error")
	}
	if err := SwiGLU(make([]float32, 40), make([]float32, 41), make([]float32, 40)); err != nil {
		t.Error(err)
	}
}
