// Package matvans is the MatVANS chain workload: N int8 matrices d x d
// with elements round(N(0, sigma^2)) clipped to int8, an int8 start
// vector drawn the same way, and per-step scales alpha_i fixed ahead so
// that every v_i = round_half_even(alpha_i * W_i v_{i-1}) fits int8. The
// result is checked by value and by MatVANS's FxHash-style hash.
package matvans

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/qgemv/qgemv/layout"
)

// Workload is one chain: matrices W[i] (row-major d x d), V0, Alpha, and
// the reference result.
type Workload struct {
	D     int
	Sigma float64
	W     [][]int8
	V0    []int8
	Alpha []float32
	Ref   []int8 // v_N computed on the raw matrices
}

// Draw returns values round_half_even(N(0, sigma^2)) clipped to int8.
func Draw(rng *rand.Rand, n int, sigma float64) []int8 {
	w := make([]int8, n)
	for i := range w {
		v := math.RoundToEven(rng.NormFloat64() * sigma)
		w[i] = int8(max(-128, min(127, v)))
	}
	return w
}

// Dot computes y = W v exactly (int32), W rows x cols row-major.
func Dot(w []int8, rows, cols int, v []int8, y []int32) {
	for r := 0; r < rows; r++ {
		var acc int32
		row := w[r*cols : (r+1)*cols]
		for c, x := range row {
			acc += int32(x) * int32(v[c])
		}
		y[r] = acc
	}
}

// Step returns round_half_even(alpha * y) as int8 (the chain's
// requantization), computed in float32 then rounded; v at least as long as
// y and alpha finite (the workload's own).
func Step(alpha float32, y []int32, v []int8) { _ = layout.Requantize(v, y, alpha) }

// New draws a workload of n matrices and computes its alphas and
// reference with the plain int8 product.
func New(d, n int, sigma float64, seed uint64) (*Workload, error) {
	if d < 4 || d > 8192 || d%4 != 0 || n < 1 || n > 100 || !(sigma > 0) || sigma > 1000 {
		return nil, fmt.Errorf("matvans: d %d (a multiple of 4 up to 8192), n %d (1..100), sigma %v (0..1000]: out of range", d, n, sigma)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d))
	wl := &Workload{D: d, Sigma: sigma, V0: Draw(rng, d, sigma)}
	v := append([]int8(nil), wl.V0...)
	y := make([]int32, d)
	for i := 0; i < n; i++ {
		w := Draw(rng, d*d, sigma)
		wl.W = append(wl.W, w)
		Dot(w, d, d, v, y)
		var m int32 = 1
		for _, x := range y {
			m = max(m, x, -x)
		}
		alpha := float32(127) / float32(m)
		wl.Alpha = append(wl.Alpha, alpha)
		Step(alpha, y, v)
	}
	wl.Ref = v
	return wl, nil
}

// Hash is the FxHash-style hash MatVANS prints: for each byte b,
// h = (rotl32(h, 5) ^ b) * 0x27220A95.
func Hash(v []int8) uint32 {
	var h uint32
	for _, b := range v {
		h = (bits.RotateLeft32(h, 5) ^ uint32(uint8(b))) * 0x27220A95
	}
	return h
}

// Run computes the chain with mul (y = W_i v) and checks it against the
// reference by value and by hash.
func (wl *Workload) Run(mul func(i int, v []int8, y []int32) error) ([]int8, error) {
	v := append([]int8(nil), wl.V0...)
	y := make([]int32, wl.D)
	for i := range wl.W {
		if err := mul(i, v, y); err != nil {
			return nil, err
		}
		Step(wl.Alpha[i], y, v)
	}
	for i := range v {
		if v[i] != wl.Ref[i] {
			return v, fmt.Errorf("matvans: result element %d = %d, reference %d (hash %08x, reference %08x)", i, v[i], wl.Ref[i], Hash(v), Hash(wl.Ref))
		}
	}
	return v, nil
}
