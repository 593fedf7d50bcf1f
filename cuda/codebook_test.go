//go:build cuda

package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/cuda"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/codebook"
)

// cbMatrix returns a synthetic codebook matrix; with fp32 its centroids
// and scales are float32 (the same values plus a fraction binary16 cannot
// hold, so a kernel reading them as binary16 fails).
func cbMatrix(t testing.TB, name string, rows, cols int, seed uint64, fp32 bool) *codebook.Codebook {
	t.Helper()
	spec, err := layout.ParseFormatSpec(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := synth.Codebook(spec, rows, cols, seed)
	if err != nil {
		t.Fatal(err)
	}
	if !fp32 {
		return c
	}
	f := *c
	f.FP32, f.Centroids16, f.Scales16 = true, nil, nil
	for _, h := range c.Centroids16 {
		f.Centroids32 = append(f.Centroids32, h.Float32()*(1+1.0/3000))
	}
	for _, h := range c.Scales16 {
		f.Scales32 = append(f.Scales32, h.Float32()*(1+1.0/5000))
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return &f
}

// checkCB multiplies batch vectors with A32 and A16 activations and
// requires codebook.Tolerance (float32 Psumbook) against the float64
// reference, with guard bands around the output.
func checkCB(t *testing.T, mx cuda.Mat, c *codebook.Codebook, batch int, seed uint64) {
	t.Helper()
	rows, cols := c.Rows, c.Cols
	x := synth.Vector(batch*cols, seed)
	for i := range x {
		if i%97 == 5 {
			x[i] *= 30
		}
	}
	const guard, sentinel = 8, float32(-1234.5)
	for _, act := range []string{"A32", "A16"} {
		full := make([]float32, batch*rows+2*guard)
		for i := range full {
			full[i] = sentinel
		}
		dst := full[guard : guard+batch*rows]
		xin := x
		var err error
		if act == "A32" {
			err = mx.MulF32(dst, x, batch)
		} else {
			h := make([]layout.FP16, len(x))
			xin = make([]float32, len(x))
			for i, v := range x {
				h[i] = layout.ToFP16(v)
				xin[i] = h[i].Float32()
			}
			err = mx.MulF16(dst, h, batch)
		}
		if err != nil {
			t.Fatalf("%s batch %d: %v", act, batch, err)
		}
		for i := 0; i < guard; i++ {
			if full[i] != sentinel || full[guard+batch*rows+i] != sentinel {
				t.Fatalf("%s batch %d: guard band overwritten", act, batch)
			}
		}
		ref, mag := make([]float64, rows), make([]float64, rows)
		for v := 0; v < batch; v++ {
			xv := xin[v*cols : (v+1)*cols]
			if err := c.DotRef(ref, xv); err != nil {
				t.Fatal(err)
			}
			if err := c.DotRefMag(mag, xv); err != nil {
				t.Fatal(err)
			}
			for r := range ref {
				got := float64(dst[v*rows+r])
				if d := math.Abs(got - ref[r]); !(d <= codebook.Tolerance*mag[r]) {
					t.Fatalf("%s %s batch %d: vector %d row %d = %v, want %v within %v", mx.Kernel(), act, batch, v, r, got, ref[r], codebook.Tolerance*mag[r])
				}
			}
		}
	}
}

// TestCodebook runs every code width, both codebook counts, every vector
// length, per-vector, power-of-two and whole-row groups, binary16 and
// float32 metadata, on tail shapes (split and unsplit K), batch 1..16,
// with the Psumbook in shared and in global memory and with the
// dequantizing baseline.
func TestCodebook(t *testing.T) {
	device(t)
	b, err := cuda.Open(0, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	configs := []struct {
		name string
		fp32 bool
	}{
		{"cb-m1v4b8g128", false}, {"cb-m2v8b6g128", false}, {"cb-m1v2b4g2", false}, {"cb-m2v4b10g256", false},
		{"cb-m1v8b12row", false}, {"cb-m2v2b12g32", true}, {"cb-m1v4b6g4", false}, {"cb-m2v4b4row", true},
		{"cb-m1v8b10g64", false}, {"cb-m2v8b8g128", false},
	}
	shapes := [][2]int{{1, 1}, {33, 700}, {70, 2100}, {4100, 200}, {37, 9000}}
	for ci, cfg := range configs {
		for si, sh := range shapes {
			if strings.Contains(cfg.name, "b12") && sh[0] == 4100 {
				continue // the float64 reference is slow; 37x9000 covers splits
			}
			c := cbMatrix(t, cfg.name, sh[0], sh[1], uint64(10*ci+si), cfg.fp32)
			for _, kind := range []string{"shared", "global", "dequant"} {
				t.Run(fmt.Sprintf("%s/fp32=%v/%dx%d/%s", cfg.name, cfg.fp32, sh[0], sh[1], kind), func(t *testing.T) {
					var m layout.Matrix = c
					if kind == "dequant" {
						m = codebook.Baseline{Codebook: c}
					} else {
						t.Setenv(cuda.EnvPsumbook, kind)
					}
					mx, err := b.Load(m)
					if err != nil {
						t.Fatal(err)
					}
					defer mx.Close()
					want := map[string]string{"shared": "psumbook", "global": "psumbook-global", "dequant": "dequant"}[kind]
					if !strings.HasSuffix(mx.Kernel(), "-"+want) {
						t.Errorf("kernel %s, want *-%s", mx.Kernel(), want)
					}
					batches := []int{1, 3, 16}
					if sh[0]*sh[1] > 200000 {
						batches = []int{1, 5}
					}
					for _, batch := range batches {
						checkCB(t, mx, c, batch, uint64(batch))
					}
				})
			}
		}
	}
}

// TestCodebookBadInput: wrong batches and lengths, int8 activations,
// a bad override, invalid matrices and closed handles are errors.
func TestCodebookBadInput(t *testing.T) {
	device(t)
	b, err := cuda.Open(0, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const rows, cols = 20, 300
	c := cbMatrix(t, "cb-m1v4b8g128", rows, cols, 3, false)
	mx, err := b.Load(c)
	if err != nil {
		t.Fatal(err)
	}
	x, dst := make([]float32, cols), make([]float32, rows)
	for name, err := range map[string]error{
		"batch 0":      mx.MulF32(dst, x, 0),
		"batch 17":     mx.MulF32(make([]float32, 17*rows), make([]float32, 17*cols), 17),
		"short x":      mx.MulF32(dst, x[:cols-1], 1),
		"short dst":    mx.MulF32(dst[:rows-1], x, 1),
		"long dst":     mx.MulF32(make([]float32, rows+1), x, 1),
		"short fp16 x": mx.MulF16(dst, make([]layout.FP16, cols-1), 1),
		"fp16 batch 2": mx.MulF16(dst, make([]layout.FP16, cols), 2),
		"A8":           mx.MulA8(dst, x, 1),
		"I8":           mx.MulI8(dst, make([]int8, c.PCols), make([]float32, c.PCols/128), 1),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := mx.MulA8(dst, x, 1); !errors.Is(err, cuda.ErrCodebookA8) {
		t.Errorf("A8: %v, want ErrCodebookA8", err)
	}
	if err := mx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mx.MulF32(dst, x, 1); !errors.Is(err, cuda.ErrClosed) {
		t.Errorf("multiply after Close: %v", err)
	}
	if err := mx.Close(); err == nil {
		t.Error("second Close: accepted")
	}
	bad := *c
	bad.Words = bad.Words[1:]
	if _, err := b.Load(&bad); err == nil {
		t.Error("Load accepted short code words")
	}
	bad = *c
	bad.Scales16 = append([]layout.FP16(nil), c.Scales16...)
	bad.Scales16[2] = layout.ToFP16(float32(math.Inf(1)))
	if _, err := b.Load(codebook.Baseline{Codebook: &bad}); err == nil {
		t.Error("Load accepted an infinite scale")
	}
	t.Setenv(cuda.EnvPsumbook, "sometimes")
	if _, err := b.Load(c); err == nil || !strings.Contains(err.Error(), cuda.EnvPsumbook) {
		t.Errorf("bad %s: %v", cuda.EnvPsumbook, err)
	}
}

// TestCodebookReport prints the codebook benchmark table
// (QGEMV_CUDA_REPORT=1): per format, shape and batch the kernel time
// (events, back-to-back launches rotating over more than 4x L2 of
// matrices), GB/s streamed and the ratio to the same-run read kernel over
// buffers of the matrix's size, for the Psumbook in shared memory, in
// global memory, the dequantizing baseline, and Q4G128 on the same shape.
func TestCodebookReport(t *testing.T) {
	b, rb := openReport(t)
	d := b.Device()
	fmt.Printf("device: %s, PTX sm_%d\nread kernel: %.0f GB/s (1 GiB)\n", d, b.PTXArch(), rb.GBps())
	formats := strings.Split(envOr("QGEMV_CB_FORMATS", "cb-m1v4b8g128,cb-m2v8b8g128,cb-m1v4b4g128,cb-m1v8b12g128"), ",")
	fmt.Printf("%-22s %-5s %-11s %5s %10s %8s %6s %7s %8s\n", "format", "act", "shape", "batch", "time(us)", "GB/s", "ratio", "bits/w", "host(us)")
	for _, sh := range [][2]int{{4096, 14336}, {14336, 4096}} {
		spec, _ := layout.ParseFormatSpec("q4g128")
		q, err := synth.Matrix(spec, sh[0], sh[1], 1)
		if err != nil {
			t.Fatal(err)
		}
		n := synth.Rotation(q.StreamBytes(), int64(4*d.L2))
		rm, err := b.ReadBandwidth(q.StreamBytes(), n, 200)
		if err != nil {
			t.Fatal(err)
		}
		qs := loadCopies[*cuda.Matrix](t, b, q, n)
		bpw := 8 * float64(q.StreamBytes()) / float64(sh[0]*sh[1])
		shape := fmt.Sprintf("%dx%d", sh[0], sh[1])
		for _, act := range []string{"A16", "A32"} {
			for _, batch := range []int{1, 16} {
				tm, err := cuda.TimeGEMV(qs, act, batch, 200)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("%-22s %-5s %-11s %5d %10.2f %8.0f %6.2f %7.2f %8.2f\n", q.Name(), act, shape, batch, 1e6*tm.Seconds, tm.GBps(), tm.GBps()/rm.GBps(), bpw, 1e6*tm.Host)
			}
		}
		for _, mx := range qs {
			mx.Close()
		}
		for _, f := range formats {
			c := cbMatrix(t, f, sh[0], sh[1], 1, false)
			n := synth.Rotation(c.StreamBytes(), int64(4*d.L2))
			rc, err := b.ReadBandwidth(c.StreamBytes(), n, 200)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%-22s read kernel over %d x %d bytes: %.0f GB/s\n", c.Name(), n, c.StreamBytes(), rc.GBps())
			for _, kind := range []string{"shared", "global", "dequant"} {
				var m layout.Matrix = c
				os.Setenv(cuda.EnvPsumbook, "shared")
				switch kind {
				case "global":
					os.Setenv(cuda.EnvPsumbook, "global")
				case "dequant":
					m = codebook.Baseline{Codebook: c}
				}
				mats := loadCopies[*cuda.CBMatrix](t, b, m, n)
				os.Unsetenv(cuda.EnvPsumbook)
				for _, batch := range []int{1, 16} {
					tm, err := cuda.TimeCodebook(mats, "A16", batch, 100)
					if err != nil {
						t.Fatal(err)
					}
					label := c.Name() + "/" + kind
					fmt.Printf("%-22s %-5s %-11s %5d %10.2f %8.0f %6.2f %7.2f %8.2f\n", label, "A16", shape, batch, 1e6*tm.Seconds, tm.GBps(), tm.GBps()/rc.GBps(), c.BitsPerWeight(), 1e6*tm.Host)
				}
				for _, mx := range mats {
					mx.Close()
				}
			}
		}
	}
}
