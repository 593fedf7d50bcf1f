//go:build cuda

package cuda_test

import (
	"math"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/cuda"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// TestHostGraphs: host-slice multiplies replayed as graphs (from a
// matrix's second call with one operation and batch on) give the same
// bits as the same multiplies queued kernel by kernel (a backend opened
// with EnvHostGraph=0; MulRoundedF16 as MulF16 of the rounded values
// there), call after call with new activations; after the
// scratch memory grew under them (the graphs are captured again); and a
// NaN reaching a replayed quantization is still an error, with the next
// call right again.
func TestHostGraphs(t *testing.T) {
	device(t)
	b, err := cuda.Open(0, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t.Setenv(cuda.EnvHostGraph, "0")
	b0, err := cuda.Open(0, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b0.Close()
	big, err := synth.Named("q4g128", 512, 30720, 9)
	if err != nil {
		t.Fatal(err)
	}
	bigMx, err := b.Load(big)
	if err != nil {
		t.Fatal(err)
	}
	defer bigMx.Close()
	grow := func(batch int) { // more scratch and staging than any multiply below
		x := synth.Vector(batch*30720, 5)
		y := make([]float32, batch*512)
		if err := bigMx.MulA8(y, x, batch); err != nil {
			t.Fatal(err)
		}
		xh := make([]layout.FP16, len(x))
		for i, v := range x {
			xh[i] = layout.ToFP16(v)
		}
		if err := bigMx.MulF16(y, xh, batch); err != nil {
			t.Fatal(err)
		}
	}
	type mulFn func(mx cuda.Mat, y, x []float32, batch int) error
	ops := map[string]mulFn{
		"MulA8": func(mx cuda.Mat, y, x []float32, batch int) error { return mx.MulA8(y, x, batch) },
		"MulF16": func(mx cuda.Mat, y, x []float32, batch int) error {
			xh := make([]layout.FP16, len(x))
			for i, v := range x {
				xh[i] = layout.ToFP16(v)
			}
			return mx.MulF16(y, xh, batch)
		},
		"MulRoundedF16": func(mx cuda.Mat, y, x []float32, batch int) error {
			return mx.(interface {
				MulRoundedF16(dst, x []float32, batch int) error
			}).MulRoundedF16(y, x, batch)
		},
	}
	for _, f := range []string{"q4g128", "bits4g128", "bits3g64"} {
		for _, sh := range [][2]int{{300, 14336}, {37, 6000}} {
			m, err := synth.Named(f, sh[0], sh[1], 13)
			if err != nil {
				t.Fatal(err)
			}
			mx, err := b.Load(m)
			if err != nil {
				t.Fatal(err)
			}
			mx0, err := b0.Load(m)
			if err != nil {
				t.Fatal(err)
			}
			rows, cols := sh[0], sh[1]
			for name, op := range ops {
				if name == "MulA8" && f == "bits3g64" {
					continue // no int8 path for 3-bit codes
				}
				for _, batch := range []int{1, 5, 16} {
					for call := 0; call < 6; call++ {
						if call == 3 {
							grow(16)
						}
						x := synth.Vector(batch*cols, uint64(100*batch+call))
						y, y0 := make([]float32, batch*rows), make([]float32, batch*rows)
						if call == 4 && name == "MulA8" {
							x[len(x)-7] = float32(math.NaN())
							if err := op(mx, y, x, batch); err == nil || !strings.Contains(err.Error(), "NaN") {
								t.Fatalf("%s %dx%d %s batch %d call %d: NaN activation gave error %v", f, rows, cols, name, batch, call, err)
							}
							continue
						}
						if err := op(mx, y, x, batch); err != nil {
							t.Fatalf("%s %dx%d %s batch %d call %d: %v", f, rows, cols, name, batch, call, err)
						}
						ref := op
						if name == "MulRoundedF16" { // MulF16 of the rounded values, bit for bit
							ref = ops["MulF16"]
						}
						if err := ref(mx0, y0, x, batch); err != nil {
							t.Fatalf("%s %dx%d %s batch %d call %d (queued): %v", f, rows, cols, name, batch, call, err)
						}
						for i := range y {
							if math.Float32bits(y[i]) != math.Float32bits(y0[i]) {
								t.Fatalf("%s %dx%d %s batch %d call %d: vector %d row %d = %v, queued kernel by kernel %v",
									f, rows, cols, name, batch, call, i/rows, i%rows, y[i], y0[i])
							}
						}
					}
				}
			}
			mx.Close()
			mx0.Close()
		}
	}
}
