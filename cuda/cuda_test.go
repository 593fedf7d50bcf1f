//go:build cuda

package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/qgemv/qgemv/cuda"
	"github.com/qgemv/qgemv/dispatch"
	"github.com/qgemv/qgemv/internal/conformance"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/codebook"
)

// device skips the test when this machine has no CUDA device (the binary
// itself needs the driver's libcuda.so.1 to start at all).
func device(t testing.TB) {
	ds, err := cuda.Devices()
	if err != nil || len(ds) == 0 {
		t.Skipf("no CUDA device: %v", err)
	}
}

// TestConformance runs the backend-neutral suite through dispatch.
func TestConformance(t *testing.T) {
	device(t)
	be, _, err := dispatch.Open(dispatch.Options{Backend: "cuda"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	conformance.Run(t, be, conformance.Options{Short: testing.Short(), Batches: []int{1, 2, 3, 5, 8, 13, 16}})
}

// TestSplitK: few rows and many columns make the float kernels split K;
// every mode (data parallel, atomic, deterministic) meets the bound with
// float32 and binary16 activations (the tensor-core kernels for the
// formats that have them), and the deterministic mode gives the same bits
// every run. Multiplies of a matrix with more row tiles between the runs
// reuse the SplitK workspace with another tile count.
func TestSplitK(t *testing.T) {
	device(t)
	const cols = 6000
	for _, f := range []string{"q4g128", "bits4g128", "bits8g256", "bits2row", "bits3g64", "sparse12g128"} {
		spec, _ := layout.ParseFormatSpec(f)
		var ms [2]layout.Matrix
		for i, rows := range []int{37, 300} {
			m, err := synth.Matrix(spec, rows, cols, uint64(3+i))
			if err != nil {
				t.Fatal(err)
			}
			ms[i] = m
		}
		refs := map[string]*refResult{}
		for _, batch := range []int{1, 16} {
			x := synth.Vector(batch*cols, 4)
			h := make([]layout.FP16, len(x))
			xh := make([]float32, len(x))
			for i, v := range x {
				h[i] = layout.ToFP16(v)
				xh[i] = h[i].Float32()
			}
			for _, o := range []cuda.Options{{Split: 1}, {Split: 0, Mode: cuda.Atomic}, {Split: 7, Mode: cuda.Deterministic}, {Split: 0, Mode: cuda.Deterministic}} {
				b, err := cuda.Open(0, o)
				if err != nil {
					t.Fatal(err)
				}
				var mxs [2]cuda.Mat
				for i, m := range ms {
					if mxs[i], err = b.Load(m); err != nil {
						t.Fatal(err)
					}
				}
				first := map[string][]float32{}
				for run := 0; run < 3; run++ {
					for i, m := range ms {
						rows, _ := m.Shape()
						for _, act := range []string{"A32", "A16"} {
							y := make([]float32, batch*rows)
							xin := x
							if act == "A32" {
								err = mxs[i].MulF32(y, x, batch)
							} else {
								err, xin = mxs[i].MulF16(y, h, batch), xh
							}
							if err != nil {
								t.Fatal(err)
							}
							name := fmt.Sprintf("%s %dx%d %s split %+v batch %d run %d", f, rows, cols, act, o, batch, run)
							rk := fmt.Sprint(i, act, batch)
							if refs[rk] == nil {
								refs[rk] = newRef(t, m, xin, batch)
							}
							refs[rk].check(t, name, y)
							if o.Mode == cuda.Deterministic {
								key := fmt.Sprint(i, act)
								if first[key] == nil {
									first[key] = y
									continue
								}
								for k := range y {
									if math.Float32bits(y[k]) != math.Float32bits(first[key][k]) {
										t.Fatalf("%s: deterministic result differs from run 0 at %d", name, k)
									}
								}
							}
						}
					}
				}
				for _, mx := range mxs {
					mx.Close()
				}
				b.Close()
			}
		}
	}
}

// TestA8TensorCores: the int8 tensor-core kernels (Q4G128, Bits 8/4/2
// with groups of 128 columns or more) over rows long enough for several
// rounds and a partial last one, at batches that take the 8- and
// 16-vector kernels partly filled, equal layout's exact int8 reference
// bit for bit, through MulA8 (activations quantized on the device) and
// MulI8; a row count not a multiple of 16 leaves a partial row tile.
// Then again on two blocks (cuda.EnvA8Blocks), so that the persistent
// kernels pipeline several tiles per block, the last tiles uneven, and
// with the _s kernels (cuda.EnvA8Steps) wherever a launch
// runs one tile per block.
func TestA8TensorCores(t *testing.T) {
	device(t)
	for _, c := range [][2]string{{"", ""}, {"2", ""}, {"", "1"}} {
		t.Run("blocks="+c[0]+"/steps="+c[1], func(t *testing.T) {
			t.Setenv(cuda.EnvA8Blocks, c[0])
			t.Setenv(cuda.EnvA8Steps, c[1])
			testA8TensorCores(t)
		})
	}
}

func testA8TensorCores(t *testing.T) {
	b, err := cuda.Open(0, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, f := range []string{"q4g128", "bits8g128", "bits4g128", "bits4g256", "bits2g128", "bits8row", "bits2row", "bits4g32"} {
		for _, sh := range [][2]int{{37, 6000}, {300, 14336}, {45, 1001}} {
			m, err := synth.Named(f, sh[0], sh[1], 11)
			if err != nil {
				t.Fatal(err)
			}
			ref := m.(layout.A8Matrix)
			mx, err := b.Load(m)
			if err != nil {
				t.Fatal(err)
			}
			rows, cols := m.Shape()
			pc := m.PaddedCols()
			for _, batch := range []int{1, 3, 8, 9, 16} {
				x := synth.Vector(batch*cols, uint64(batch))
				xq, xs := make([]int8, batch*pc), make([]float32, batch*pc/128)
				want := make([]float32, batch*rows)
				for v := 0; v < batch; v++ {
					q, s := xq[v*pc:(v+1)*pc], xs[v*pc/128:(v+1)*pc/128]
					if err := layout.QuantizeA8(q, s, x[v*cols:(v+1)*cols]); err != nil {
						t.Fatal(err)
					}
					if err := ref.DotA8Exact(want[v*rows:(v+1)*rows], q, s); err != nil {
						t.Fatal(err)
					}
				}
				for _, path := range []string{"MulA8", "MulI8"} {
					y := make([]float32, batch*rows)
					if path == "MulA8" {
						err = mx.MulA8(y, x, batch)
					} else {
						err = mx.MulI8(y, xq, xs, batch)
					}
					if err != nil {
						t.Fatalf("%s %dx%d batch %d %s: %v", f, rows, cols, batch, path, err)
					}
					for i := range y {
						if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s %dx%d batch %d %s: vector %d row %d = %v, want exactly %v", f, rows, cols, batch, path, i/rows, i%rows, y[i], want[i])
						}
					}
				}
			}
			mx.Close()
		}
	}
}

// refResult is the float64 reference of a batch and its magnitudes.
type refResult struct {
	rows     int
	ref, mag []float64
}

func newRef(t *testing.T, m layout.Matrix, x []float32, batch int) *refResult {
	rows, cols := m.Shape()
	r := &refResult{rows: rows, ref: make([]float64, batch*rows), mag: make([]float64, batch*rows)}
	for v := 0; v < batch; v++ {
		dotRef(t, m, r.ref[v*rows:(v+1)*rows], r.mag[v*rows:(v+1)*rows], x[v*cols:(v+1)*cols])
	}
	return r
}

// check requires y within layout.BitsTolerance of the magnitude.
func (r *refResult) check(t *testing.T, name string, y []float32) {
	t.Helper()
	for i := range r.ref {
		if d := math.Abs(float64(y[i]) - r.ref[i]); !(d <= layout.BitsTolerance*r.mag[i]) {
			t.Fatalf("%s: vector %d row %d = %v, want %v", name, i/r.rows, i%r.rows, y[i], r.ref[i])
		}
	}
}

func dotRef(t testing.TB, m layout.Matrix, ref, mag []float64, x []float32) {
	type refs interface {
		DotRef(out []float64, x []float32) error
		DotRefMag(mag []float64, x []float32) error
	}
	r := m.(refs)
	if err := r.DotRef(ref, x); err != nil {
		t.Fatal(err)
	}
	if err := r.DotRefMag(mag, x); err != nil {
		t.Fatal(err)
	}
}

// otherFormat is a valid matrix of a format the CUDA backend has no
// kernels for: a Q4G128 matrix under an id nobody registered.
type otherFormat struct{ *layout.Q4G128 }

func (otherFormat) Name() string            { return "Other" }
func (otherFormat) Spec() layout.FormatSpec { return layout.FormatSpec{Format: 99} }

// TestOpenErrors: a device that does not exist and bad overrides are
// errors that say so; closed handles refuse work.
func TestOpenErrors(t *testing.T) {
	device(t)
	if _, err := cuda.Open(99, cuda.Options{}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("device 99: %v", err)
	}
	t.Setenv(cuda.EnvSplitMode, "sometimes")
	if _, err := cuda.Open(0, cuda.Options{}); err == nil {
		t.Error("bad split mode accepted")
	}
	t.Setenv(cuda.EnvSplitMode, "")
	b, err := cuda.Open(0, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := layout.RandomQ4G128(4, 4, 1)
	if _, err := b.Load(otherFormat{q}); !errors.Is(err, dispatch.ErrFormatNotImplemented) {
		t.Errorf("a format without CUDA kernels: %v", err)
	}
	spec, _ := layout.ParseFormatSpec("q4g128")
	m, _ := synth.Matrix(spec, 64, 256, 1)
	mx, err := b.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mx.MulF32(make([]float32, 64), make([]float32, 256), 1); err == nil {
		t.Error("multiply after the backend closed: accepted")
	}
	if _, err := b.Load(m); err == nil {
		t.Error("Load after Close: accepted")
	}
}

// TestReport prints the benchmark table (QGEMV_CUDA_REPORT=1): the read
// kernel, then every format, activation, shape and batch with kernel time
// (events, back-to-back launches, rotating over enough matrices to
// exceed L2), GB/s streamed, the ratio to the read kernel, and the host
// time per launch.
func TestReport(t *testing.T) {
	b, rb := openReport(t)
	d := b.Device()
	fmt.Printf("device: %s, PTX sm_%d\nread kernel: %.0f GB/s (1 GiB, host %.1f us/launch)\n", d, b.PTXArch(), rb.GBps(), 1e6*rb.Host)
	// Host overhead: whole MulF16 calls from Go (activations prepared and
	// copied, kernel, result copied back) on a matrix small enough that
	// the kernel takes almost no time.
	{
		spec, _ := layout.ParseFormatSpec("q4g128")
		m, _ := synth.Matrix(spec, 256, 256, 1)
		mx, err := b.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]layout.FP16, 256)
		y := make([]float32, 256)
		for i := 0; i < 100; i++ {
			_ = mx.MulF16(y, x, 1)
		}
		const n = 2000
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := mx.MulF16(y, x, 1); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Printf("host overhead: %.1f us per MulF16 call from Go (256x256 Q4G128, batch 1, copies and synchronization included)\n", 1e6*time.Since(start).Seconds()/n)
		mx.Close()
	}
	shapes := [][2]int{{4096, 14336}, {14336, 4096}, {8192, 8192}}
	formats := strings.Split(envOr("QGEMV_CUDA_FORMATS", "q4g128,bits8g128,bits4g128,bits3g128,bits2g128,bits1g128,sparse12g128"), ",")
	fmt.Printf("%-13s %-4s %-11s %5s %10s %9s %6s %8s\n", "format", "act", "shape", "batch", "time(us)", "GB/s", "ratio", "host(us)")
	for _, f := range formats {
		spec, err := layout.ParseFormatSpec(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range shapes {
			m0, err := synth.Matrix(spec, sh[0], sh[1], 1)
			if err != nil {
				t.Fatal(err)
			}
			n := synth.Rotation(m0.StreamBytes(), int64(4*d.L2))
			mats := loadCopies[*cuda.Matrix](t, b, m0, n)
			rm, err := b.ReadBandwidth(m0.StreamBytes(), n, 200)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%-13s read kernel over %d buffers of the matrix's %d bytes: %.2f us, %.0f GB/s (%.2f of 1 GiB reads)\n", m0.Name(), n, m0.StreamBytes(), 1e6*rm.Seconds, rm.GBps(), rm.GBps()/rb.GBps())
			for _, act := range strings.Split(envOr("QGEMV_CUDA_ACTS", "A16,A32,A8"), ",") {
				for _, batch := range batches() {
					tm, err := cuda.TimeGEMV(mats, act, batch, 200)
					if err != nil {
						t.Fatal(err)
					}
					fmt.Printf("%-13s %-4s %-11s %5d %10.2f %9.0f %6.2f %8.2f\n", m0.Name(), act, fmt.Sprintf("%dx%d", sh[0], sh[1]), batch, 1e6*tm.Seconds, tm.GBps(), tm.GBps()/rb.GBps(), 1e6*tm.Host)
				}
			}
			for _, mx := range mats {
				mx.Close()
			}
		}
	}
}

// openReport skips the test unless QGEMV_CUDA_REPORT is set, opens
// device 0 (closed when the test ends) and times the read kernel over
// 1 GiB: the roofline of the report tables.
func openReport(t *testing.T) (*cuda.Backend, cuda.Timing) {
	if os.Getenv("QGEMV_CUDA_REPORT") == "" {
		t.Skip("set QGEMV_CUDA_REPORT=1 to print the benchmark table")
	}
	device(t)
	b, err := cuda.Open(0, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	rb, err := b.ReadBandwidth(1<<30, 1, 50)
	if err != nil {
		t.Fatal(err)
	}
	return b, rb
}

// loadCopies loads n device copies of m (the same bytes: a rotation that
// keeps every multiply streaming from memory).
func loadCopies[T cuda.Mat](t *testing.T, b *cuda.Backend, m layout.Matrix, n int) []T {
	t.Helper()
	var mats []T
	for i := 0; i < n; i++ {
		mx, err := b.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		mats = append(mats, mx.(T))
	}
	return mats
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// batches returns the batch sizes of the report (QGEMV_CUDA_BATCHES, e.g.
// "1,16"; default 1, 4, 16).
func batches() []int {
	var out []int
	for _, s := range strings.Split(envOr("QGEMV_CUDA_BATCHES", "1,4,16"), ",") {
		var b int
		if _, err := fmt.Sscan(s, &b); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// TestFloatActivationsFarFromOne: float activations near 2^-120 or up to
// 2^127 meet the float bounds on the CUDA-core and tensor-core paths and
// for codebooks (found by review: the scaled-back factor 2^128 overflowed
// to +Inf, and the codebook path was not scaled: 3-8x over its tolerance
// at 2^-140, Inf at 2^124); a 12-bit codebook whose global Psumbook
// would pass the bound runs the shared-memory kernel instead of
// allocating it.
func TestFloatActivationsFarFromOne(t *testing.T) {
	device(t)
	b, err := cuda.Open(0, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	q4, _ := layout.ParseFormatSpec("q4g128")
	mq, err := synth.Matrix(q4, 256, 256, 3)
	if err != nil {
		t.Fatal(err)
	}
	mats := []layout.Matrix{mq}
	for _, name := range []string{"cb-m1v4b8g128", "cb-m1v4b8row", "cb-m2v2b12row"} {
		cols := 4096
		if strings.HasSuffix(name, "b12row") {
			cols = 16700 // 2 x 4096 x 4 bytes x 8350 segments: 267 MiB of table
		}
		mats = append(mats, cbMatrix(t, name, 128, cols, 5, false))
	}
	for _, m := range mats {
		mx, err := b.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		rows, cols := m.Shape()
		tol := layout.A32Tolerance
		if _, ok := m.(*codebook.Codebook); ok {
			tol = codebook.Tolerance
		}
		for _, e := range []int{-120, 0, 124, 127} { // results stay normal floats (a subnormal one cannot meet a relative bound)
			x := synth.Vector(cols, 9)
			for i := range x {
				x[i] = float32(math.Ldexp(float64(x[i]), e))
			}
			if e == 127 { // as large as float32 goes: the largest at 2^127
				x = synth.Vector(cols, 9)
				m := float32(0)
				for _, v := range x {
					m = max(m, v, -v)
				}
				for i := range x {
					x[i] = float32(math.Ldexp(float64(x[i]/m), 127))
				}
			}
			ref, mag := make([]float64, rows), make([]float64, rows)
			dotRef(t, m, ref, mag, x)
			y := make([]float32, rows)
			if err := mx.MulF32(y, x, 1); err != nil {
				t.Fatal(err)
			}
			for r := range y {
				if math.IsInf(ref[r], 0) || ref[r] > math.MaxFloat32 || ref[r] < -math.MaxFloat32 {
					continue // the true result is no float32
				}
				if d := math.Abs(float64(y[r]) - ref[r]); !(d <= tol*mag[r]) {
					t.Fatalf("%s (%s), x ~ 2^%d: row %d = %g, want %g within %g", m.Name(), mx.Kernel(), e, r, y[r], ref[r], tol*mag[r])
				}
			}
		}
		mx.Close()
	}
}
