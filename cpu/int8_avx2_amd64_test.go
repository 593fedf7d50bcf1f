//go:build !noasm && !purego

package cpu

import (
	"math/rand/v2"
	"testing"
)

// TestInt8KernelAVX2Direct runs Int8GemvAvx2 where it is usable on
// matrices with a stride larger than the columns it reads.
func TestInt8KernelAVX2Direct(t *testing.T) {
	be, err := New(Config{ISA: AVX2, Threads: 1})
	if err != nil || int8KernelFor(be) != int8AVX2 {
		t.Skip("no AVX2 int8 kernel here")
	}
	rng := rand.New(rand.NewPCG(63, 64))
	for _, sh := range [][3]int{{1, 1, 32}, {2, 3, 100}, {3, 2, 64}} { // quads, n32, stride
		quads, n32, stride := sh[0], sh[1], sh[2]
		w := make([]int8, 4*quads*stride)
		for i := range w {
			w[i] = int8(rng.IntN(256) - 128)
		}
		v := make([]int8, 32*n32)
		xw := make([]int16, len(v))
		for i := range v {
			v[i] = int8(rng.IntN(256) - 128)
			xw[i] = int16(v[i])
		}
		out := make([]int32, 4*quads+1)
		out[4*quads] = 77
		int8KernelAVX2(w, stride, xw, n32, quads, out)
		if out[4*quads] != 77 {
			t.Fatalf("%v: wrote past out", sh)
		}
		for r := 0; r < 4*quads; r++ {
			if want := dotInt8(w[r*stride:r*stride+32*n32], v); out[r] != want {
				t.Fatalf("%v: row %d = %d, want %d", sh, r, out[r], want)
			}
		}
	}
}
