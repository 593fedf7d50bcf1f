package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/codebook"
)

// randomCodebook returns a codebook matrix with random codes, centroids
// and scales (quantizing is slow and beside the point here).
func randomCodebook(t *testing.T, rng *rand.Rand, rows, cols, m, v, b, g int, fp32 bool) *codebook.Codebook {
	t.Helper()
	c, err := codebook.New(rows, cols, m, v, b, g, fp32)
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < c.PRows; r++ {
		for i := 0; i < m; i++ {
			for j := 0; j < c.NV(); j++ {
				c.SetCode(r, i, j, uint32(rng.IntN(1<<b)))
			}
		}
	}
	for i := 0; i < m; i++ {
		for q := 0; q < 1<<b; q++ {
			for e := 0; e < v; e++ {
				c.SetCentroid(i, uint32(q), e, float32(rng.NormFloat64()))
			}
		}
	}
	for r := 0; r < rows; r++ {
		for gi := 0; gi < c.Groups(); gi++ {
			c.SetScale(r, gi, float32(rng.Float64()*0.1+0.01))
		}
	}
	return c
}

// TestCodebookKernels checks the Psumbook and dequantize kernels of every
// kernel set against the float64 reference on tails, configurations,
// batch sizes and A16, with guard bands; int8 activations are an error.
func TestCodebookKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	type cfg struct{ m, v, b, g int }
	// {2, 4, 8, 0}: the 64-row kernel's column tiles inside one whole-row group;
	// {1, 4, 8, 32}: several groups per column tile of the int16 kernel
	cfgs := []cfg{{1, 4, 8, 128}, {2, 8, 8, 128}, {1, 4, 4, 4}, {2, 4, 6, 0}, {1, 8, 10, 64}, {1, 2, 12, 32}, {2, 2, 4, 256}, {1, 4, 8, 0}, {2, 4, 8, 64}, {2, 4, 8, 0}, {1, 4, 8, 32}}
	// 200 rows: 7 row tiles over 3 threads (the scalar kernel walks several
	// per call)
	shapes := [][2]int{{1, 1}, {33, 700}, {70, 2100}, {200, 520}}
	if testing.Short() {
		shapes = shapes[1:2]
	}
	runs := 0
	for _, sh := range shapes {
		rows, cols := sh[0], sh[1]
		for _, cf := range cfgs {
			c := randomCodebook(t, rng, rows, cols, cf.m, cf.v, cf.b, cf.g, rng.IntN(2) == 0)
			for _, isa := range supportedSets() {
				// HugePages: the int16 kernel on its transposed code copy
				// and the AVX2 scalar kernel on its tile-major one (else
				// both on the packed words in place).
				huge := runs%2 == 1
				runs++
				be, err := New(Config{ISA: isa, Threads: 3, HugePages: huge})
				if err != nil {
					t.Fatal(err)
				}
				for _, dq := range []bool{false, true} {
					mx, err := be.LoadCodebook(c, dq)
					if err != nil {
						t.Fatal(err)
					}
					mx.dequant = dq   // test both kernels whatever the row count
					mx.prepareCodes() // the state of the kernel that choice selects
					for _, batch := range []int{1, 3} {
						name := fmt.Sprintf("%s/%s/%dx%d/b%d/huge=%v", c.Name(), mx.Kernel(), rows, cols, batch, huge)
						x := randVec(rng, batch*cols)
						full, dst := guarded(batch * rows)
						if err := mx.MulF32(dst, x, batch); err != nil {
							t.Fatal(err)
						}
						checkGuards(t, full, batch*rows)
						checkCodebook(t, name+"/A32", mx, dst, x, batch)
						h, xh := halfVec(x)
						if err := mx.MulF16(dst, h, batch); err != nil {
							t.Fatal(err)
						}
						checkCodebook(t, name+"/A16", mx, dst, xh, batch)
					}
					if err := mx.MulA8(make([]float32, rows), randVec(rng, cols), 1); err == nil {
						t.Fatal("codebook A8 did not fail")
					}
				}
			}
		}
	}
}

func checkCodebook(t *testing.T, name string, mx *CBMatrix, dst, x []float32, batch int) {
	t.Helper()
	c := mx.c
	f16 := strings.HasSuffix(mx.Kernel(), "-psumbook16")
	i16 := strings.HasSuffix(mx.Kernel(), "-psumbooki16")
	var smax float64
	for r := 0; r < c.Rows; r++ {
		for g := 0; g < c.Groups(); g++ {
			smax = max(smax, math.Abs(float64(c.Scale(r, g))))
		}
	}
	ref, mag := make([]float64, c.Rows), make([]float64, c.Rows)
	for v := 0; v < batch; v++ {
		xv := x[v*c.Cols : (v+1)*c.Cols]
		if err := c.DotRef(ref, xv); err != nil {
			t.Fatal(err)
		}
		if err := c.DotRefMag(mag, xv); err != nil {
			t.Fatal(err)
		}
		var xmax float64
		for _, e := range xv {
			xmax = max(xmax, math.Abs(float64(e)))
		}
		for r := range ref {
			tol := codebook.Tolerance * mag[r]
			if f16 { // codebook.ToleranceF16, with alpha <= 2*cAbs*max|x|/2^15
				alpha := 2 * float64(mx.cAbs) * xmax / 32768
				tol = codebook.ToleranceF16*mag[r] + float64(c.M*c.NV())*math.Ldexp(alpha, -24)*smax
			}
			if i16 { // codebook.ToleranceI16, with alpha <= 2*cAbs*max|x|/32767
				alpha := 2 * float64(mx.cAbs) * xmax / 32767
				tol = codebook.Tolerance*mag[r] + codebook.ToleranceI16*float64(c.M*c.NV())*alpha*smax
			}
			if d := math.Abs(float64(dst[v*c.Rows+r]) - ref[r]); d > tol || math.IsNaN(float64(dst[v*c.Rows+r])) {
				t.Fatalf("%s: vector %d row %d = %v, want %v (|err| %.3g > %.3g)", name, v, r, dst[v*c.Rows+r], ref[r], d, tol)
			}
		}
	}
}

// TestCodebookI16Extremes drives the int16 kernel's tables to the edge of
// their range (entries of exactly cAbs*max|x|, which the scale step must
// keep within 32767) and feeds it NaN and infinite activations, which it
// must hand to a float kernel (every row NaN or infinite, as the generic
// kernel gives) rather than round into int16, and activations so large
// that the float32 sums behind the tables overflow.
func TestCodebookI16Extremes(t *testing.T) {
	const rows, cols = 128, 512
	c, err := codebook.New(rows, cols, 1, 4, 8, 128, true)
	if err != nil {
		t.Fatal(err)
	}
	// Centroid q: components +-1.5 by the bits of q; row r, segment j uses
	// code (r + j) % 256; x = +-2 so that segment j's entry for code j%16
	// is exactly 4*1.5*2 = cAbs*max|x|.
	for q := 0; q < 256; q++ {
		for e := 0; e < 4; e++ {
			c.SetCentroid(0, uint32(q), e, float32(1.5-3*float64(q>>e&1)))
		}
	}
	for r := 0; r < c.PRows; r++ {
		for j := 0; j < c.NV(); j++ {
			c.SetCode(r, 0, j, uint32((r+j)%256))
		}
		for g := 0; g < c.Groups(); g++ {
			c.SetScale(r, g, 1)
		}
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(2 - 4*float64(((i/4)%16)>>(i%4)&1))
	}
	gen, err := New(Config{ISA: Generic, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, isa := range supportedSets() {
		// HugePages: the int16 kernel's code copy in huge-page memory.
		be, err := New(Config{ISA: isa, Threads: 2, HugePages: true})
		if err != nil {
			t.Fatal(err)
		}
		mx, err := be.LoadCodebook(c, false)
		if err != nil {
			t.Fatal(err)
		}
		mx.dequant = false
		mx.prepareCodes() // the int16 kernel's state, which load skipped for the dequantizing one
		name := string(isa) + "/" + mx.Kernel()
		dst := make([]float32, rows)
		// Two multiplies at once: both read the state built at load (run
		// under -race in CI).
		var wg sync.WaitGroup
		dst2 := make([]float32, rows)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := mx.MulF32(dst2, x, 1); err != nil {
				t.Error(err)
			}
		}()
		if err := mx.MulF32(dst, x, 1); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		checkCodebook(t, name+"/edge", mx, dst, x, 1)
		if !slices.Equal(dst, dst2) {
			t.Fatalf("%s: concurrent multiplies differ", name)
		}
		// 3e38: finite, but the segment's float32 sums overflow.
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), 3e38} {
			xb := slices.Clone(x)
			xb[77] = bad
			want := make([]float32, rows)
			gm, err := gen.LoadCodebook(c, false)
			if err != nil {
				t.Fatal(err)
			}
			gm.dequant = false
			if err := gm.MulF32(want, xb, 1); err != nil {
				t.Fatal(err)
			}
			if err := mx.MulF32(dst, xb, 1); err != nil {
				t.Fatal(err)
			}
			for r := range dst {
				w, g := float64(want[r]), float64(dst[r])
				finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
				if !(math.IsNaN(w) && math.IsNaN(g) || math.IsInf(w, 0) && g == w || finite(w) && finite(g)) {
					t.Fatalf("%s: x[77] = %v: row %d = %v, generic %v", name, bad, r, dst[r], want[r])
				}
			}
		}
		if err := mx.Close(); err != nil {
			t.Fatal(err)
		}
		if err := mx.MulF32(dst, x, 1); !errors.Is(err, ErrClosed) {
			t.Fatalf("%s: multiply after Close: %v", name, err)
		}
	}
}

// TestCodebookBadInput: wrong activation and result lengths and batches
// are errors on every kernel set, never a panic in a kernel or a longer
// slice accepted (mutation testing found the length checks untested).
func TestCodebookBadInput(t *testing.T) {
	spec, err := layout.ParseFormatSpec("cb-m1v4b8g128")
	if err != nil {
		t.Fatal(err)
	}
	c, err := synth.Codebook(spec, 300, 256, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, isa := range ISAs() {
		be, err := New(Config{ISA: isa, Threads: 2})
		if err != nil {
			continue
		}
		for _, dequant := range []bool{false, true} {
			mx, err := be.LoadCodebook(c, dequant)
			if err != nil {
				t.Fatal(err)
			}
			dst, x := make([]float32, 300), make([]float32, 256)
			for name, err := range map[string]error{
				"short x":      mx.MulF32(dst, x[:255], 1),
				"long x":       mx.MulF32(dst, make([]float32, 257), 1),
				"short dst":    mx.MulF32(dst[:299], x, 1),
				"long dst":     mx.MulF32(make([]float32, 301), x, 1),
				"batch 0":      mx.MulF32(dst, x, 0),
				"batch 2":      mx.MulF32(dst, x, 2),
				"F16 short x":  mx.MulF16(dst, make([]layout.FP16, 255), 1),
				"F16 long dst": mx.MulF16(make([]float32, 301), make([]layout.FP16, 256), 1),
			} {
				if err == nil {
					t.Errorf("%s dequant %v: %s: no error", isa, dequant, name)
				}
			}
		}
	}
}
