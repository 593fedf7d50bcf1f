//go:build opencl

package opencl

import (
	"testing"

	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// TestMulAllocs: after a warm-up, the host-slice multiplies allocate
// nothing (Q4G128, Bits4G128, Sparse12G128, Q4_0 and Q6_K; batch 1 and
// 16).
func TestMulAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	b := backend(t)
	for _, name := range []string{"q4g128", "bits4g128", "sparse12g128", "q4_0", "q6_k"} {
		m, err := synth.Named(name, 512, 2048, 1)
		if err != nil {
			t.Fatal(err)
		}
		mx, err := b.LoadMatrix(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, batch := range []int{1, 16} {
			x, y := synth.Vector(batch*2048, 2), make([]float32, batch*512)
			xh := make([]layout.FP16, batch*2048)
			xq, xs := make([]int8, batch*2048), make([]float32, batch*16)
			for v := 0; v < batch; v++ {
				if err := layout.QuantizeA8(xq[v*2048:(v+1)*2048], xs[v*16:(v+1)*16], x[v*2048:(v+1)*2048]); err != nil {
					t.Fatal(err)
				}
			}
			for what, f := range map[string]func() error{
				"MulF32": func() error { return mx.MulF32(y, x, batch) },
				"MulF16": func() error { return mx.MulF16(y, xh, batch) },
				"MulA8":  func() error { return mx.MulA8(y, x, batch) },
				"MulI8":  func() error { return mx.MulI8(y, xq, xs, batch) },
			} {
				if err := f(); err != nil {
					t.Fatalf("%s %s: %v", name, what, err)
				}
				if n := testing.AllocsPerRun(5, func() { _ = f() }); n != 0 {
					t.Errorf("%s batch %d %s: %v allocations per call", name, batch, what, n)
				}
			}
		}
		if err := mx.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
