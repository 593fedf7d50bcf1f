//go:build cuda

package cuda_test

import (
	"math"
	"testing"

	"github.com/qgemv/qgemv/cuda"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// TestHostQuantA8: host-slice MulA8 quantizing on the host (a backend
// opened with EnvHostQuant=1: every shape that can) gives the bits of
// the device's quantization (EnvHostQuant=0), call after call, at every
// batch, for the formats with int8 tensor-core kernels; padded rows go
// to the device as before; a NaN is still an error, and the next call
// is right again.
func TestHostQuantA8(t *testing.T) {
	device(t)
	if !layout.HasA8Kernel() {
		t.Skip("no assembly quantizer installed")
	}
	open := func(v string) *cuda.Backend {
		t.Setenv(cuda.EnvHostQuant, v)
		b, err := cuda.Open(0, cuda.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	bh, bd := open("1"), open("0")
	t.Setenv(cuda.EnvHostQuant, "x")
	if b, err := cuda.Open(0, cuda.Options{}); err == nil {
		b.Close()
		t.Errorf("Open with %s=x: no error", cuda.EnvHostQuant)
	}
	for _, f := range []string{"q4g128", "bits4g128", "bits8g128", "bits2g128"} {
		for _, sh := range [][2]int{{300, 4096}, {64, 14336}, {37, 6000}} {
			m, err := synth.Named(f, sh[0], sh[1], 21)
			if err != nil {
				t.Fatal(err)
			}
			mh, err := bh.Load(m)
			if err != nil {
				t.Fatal(err)
			}
			md, err := bd.Load(m)
			if err != nil {
				t.Fatal(err)
			}
			for i, batch := range []int{1, 3, 1, 16, 16} {
				x := synth.Vector(batch*sh[1], uint64(100+i))
				yh, yd := make([]float32, batch*sh[0]), make([]float32, batch*sh[0])
				if err := mh.MulA8(yh, x, batch); err != nil {
					t.Fatalf("%s %v batch %d: host quantization: %v", f, sh, batch, err)
				}
				if err := md.MulA8(yd, x, batch); err != nil {
					t.Fatal(err)
				}
				for r := range yh {
					if math.Float32bits(yh[r]) != math.Float32bits(yd[r]) {
						t.Fatalf("%s %v batch %d call %d: y[%d] = %g quantized on the host, %g on the device", f, sh, batch, i, r, yh[r], yd[r])
					}
				}
			}
			x := synth.Vector(sh[1], 7)
			x[sh[1]/2] = float32(math.NaN())
			y := make([]float32, sh[0])
			if err := mh.MulA8(y, x, 1); err == nil {
				t.Errorf("%s %v: a NaN activation gave no error", f, sh)
			}
			x[sh[1]/2] = 1
			yd := make([]float32, sh[0])
			if err := mh.MulA8(y, x, 1); err != nil {
				t.Fatal(err)
			}
			if err := md.MulA8(yd, x, 1); err != nil {
				t.Fatal(err)
			}
			for r := range y {
				if math.Float32bits(y[r]) != math.Float32bits(yd[r]) {
					t.Fatalf("%s %v after a NaN: y[%d] = %g, want %g", f, sh, r, y[r], yd[r])
				}
			}
			mh.Close()
			md.Close()
		}
	}
	// 4096 and 14336 columns of the four formats, six calls each past the NaN
	if n, want := cuda.HostQuantRuns(bh), 4*2*6; n < want || cuda.HostQuantRuns(bd) != 0 {
		t.Errorf("calls quantized on the host: %d with %s=1 (want at least %d), %d with 0", n, cuda.EnvHostQuant, want, cuda.HostQuantRuns(bd))
	}
}
