//go:build !noasm && !purego

package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

// TestQuantizers checks every assembly quantizer this CPU runs against
// layout.QuantizeA8Go, byte for byte and error for error: random groups at
// many magnitudes, zero groups, groups whose amax is subnormal or tiny,
// halfway points, NaN and Inf anywhere, and partial last groups.
func TestQuantizers(t *testing.T) {
	defer func(q func(x *float32, groups int, q *int8, scales *float32) int) { quantAsm = q }(quantAsm)
	rng := rand.New(rand.NewPCG(5, 6))
	inputs := func() [][]float32 {
		var out [][]float32
		for _, n := range []int{1, 127, 128, 129, 300, 1024, 1000} {
			for _, mag := range []float64{1, 1e-3, 1e30, 1e-30, 1e-38, 1e-42, 0} {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * mag)
				}
				out = append(out, x)
			}
		}
		// Halfway points: amax 127 makes inv 1, so x = k + 0.5 rounds to even.
		x := make([]float32, 256)
		for i := range x {
			x[i] = float32(i%254) - 126.5
		}
		x[0], x[200] = 127, -127
		out = append(out, x)
		// One extreme group among ordinary ones.
		for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32, 1e-40, math.SmallestNonzeroFloat32} {
			// 1450 values: two quads of whole groups (the kernels take four
			// at a time), three whole groups after them (the kernels'
			// single-group loop) and a partial one (Go's)
			for _, at := range []int{0, 77, 128 + 5, 511, 640, 900, 1300, 1449} {
				x := make([]float32, 1450)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				x[at] = v
				if v == 1e-40 || v == math.SmallestNonzeroFloat32 { // a whole tiny group
					g := at / 128 * 128
					for i := g; i < min(g+128, len(x)); i++ {
						x[i] = v * float32(i%3-1)
					}
				}
				out = append(out, x)
			}
		}
		return out
	}()
	for _, q := range quantizers {
		if !hasAll(q.requires) {
			continue
		}
		quantAsm = q.fn
		name := funcName(q.fn)
		for i, x := range inputs {
			for _, extra := range []int{0, 128} { // x shorter than dst: zeros past it
				ng := (len(x)+127)/128 + extra/128
				want, got := make([]int8, 128*ng), make([]int8, 128*ng)
				ws, gs := make([]float32, ng), make([]float32, ng)
				for k := range got {
					got[k] = 99
				}
				werr := layout.QuantizeA8Go(want, ws, x)
				gerr := QuantizeA8(got, gs, x)
				if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
					t.Fatalf("%s input %d: error %v, want %v", name, i, gerr, werr)
				}
				if werr != nil {
					continue
				}
				if !slices.Equal(got, want) {
					k := 0
					for got[k] == want[k] {
						k++
					}
					t.Fatalf("%s input %d: q[%d] = %d, want %d (x %v, scale %v)", name, i, k, got[k], want[k], x[min(k, len(x)-1)], ws[k/128])
				}
				for k := range ws {
					if math.Float32bits(ws[k]) != math.Float32bits(gs[k]) {
						t.Fatalf("%s input %d: scale %d = %v, want %v", name, i, k, gs[k], ws[k])
					}
				}
			}
		}
	}
}

// TestSumsInt8: the word-at-a-time sub-block sums equal the byte loop,
// for 16- and 32-value sub-blocks and the extremes of int8.
func TestSumsInt8(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, sub := range []int{16, 32} {
		for _, fill := range []int{-128, -127, 0, 127, 1000} {
			x := make([]int8, 8*sub)
			for i := range x {
				v := fill
				if fill == 1000 {
					v = rng.IntN(256) - 128
				}
				x[i] = int8(v)
			}
			sums := make([]int16, len(x)/sub)
			sumsInt8(sums, x, sub)
			for i, got := range sums {
				var want int32
				for _, v := range x[i*sub : (i+1)*sub] {
					want += int32(v)
				}
				if int32(got) != want {
					t.Fatalf("sub %d, values %d: sum %d of block %d, want %d", sub, fill, got, i, want)
				}
			}
		}
	}
}
