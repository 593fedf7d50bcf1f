package layout

import (
	"math"
	"math/rand/v2"
	"testing"
)

// fp16Ref rounds via float64: the nearest half, ties to even, by search.
func fp16Ref(f float32) FP16 {
	if f != f {
		return 0x7e00
	}
	x := float64(f)
	best, bestErr := FP16(0), math.Inf(1)
	sign := FP16(0)
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	if x >= 65520 { // halfway between 65504 and 2^16 rounds to infinity
		return sign | 0x7c00
	}
	for h := FP16(0); h < 0x7c00; h++ {
		e := math.Abs(float64(h.Float32()) - x)
		if e < bestErr || e == bestErr && h&1 == 0 {
			best, bestErr = h, e
		}
	}
	return sign | best
}

func TestFP16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := FP16(h).Float32()
		if f != f {
			if got := ToFP16(f); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %04x -> %04x", h, got)
			}
			continue
		}
		if got := ToFP16(f); got != FP16(h) {
			t.Fatalf("%04x -> %v -> %04x", h, f, got)
		}
	}
}

func TestFP16Rounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	vals := []float32{0, 1, -1, 65504, 65519.996, 65520, 1e-8, 2.98e-8, 5.96e-8, 6.1e-5, 1.0009765625, 1.00048828125, 1.000732421875}
	for i := 0; i < 300; i++ {
		vals = append(vals, float32(rng.NormFloat64()*math.Pow(2, float64(rng.IntN(40)-25))))
	}
	for _, f := range vals {
		if got, want := ToFP16(f), fp16Ref(f); got != want {
			t.Errorf("ToFP16(%v) = %04x (%v), want %04x (%v)", f, uint16(got), got.Float32(), uint16(want), want.Float32())
		}
	}
}
