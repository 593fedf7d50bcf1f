//go:build opencl

package opencl

import (
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/codebook"
)

// randCodebook returns a codebook matrix with random codes, centroids and
// scales (binary16 or float32 metadata).
func randCodebook(t *testing.T, rng *rand.Rand, rows, cols, m, v, b, g int, fp32 bool) *codebook.Codebook {
	t.Helper()
	c, err := codebook.New(rows, cols, m, v, b, g, fp32)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Words[:len(c.Words)-32] {
		c.Words[i] = rng.Uint32()
	}
	for i := 0; i < m; i++ {
		for q := 0; q < 1<<b; q++ {
			for e := 0; e < v; e++ {
				c.SetCentroid(i, uint32(q), e, float32(rng.NormFloat64()))
			}
		}
	}
	for r := 0; r < c.PRows; r++ {
		for gi := 0; gi < c.Groups(); gi++ {
			c.SetScale(r, gi, float32(rng.Float64()*0.1+0.01))
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// checkCB multiplies batch random vectors (A32, or A16 with f16) and
// compares every result with the float64 reference within
// codebook.Tolerance; guard values around dst must stay untouched.
func checkCB(t *testing.T, mx *Matrix, c *codebook.Codebook, rng *rand.Rand, batch int, f16 bool) {
	t.Helper()
	x := make([]float32, batch*c.Cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if f16 {
			x[i] = layout.ToFP16(x[i]).Float32()
		}
	}
	full, dst := withGuards(batch * c.Rows)
	var err error
	if f16 {
		h := make([]layout.FP16, len(x))
		for i, f := range x {
			h[i] = layout.ToFP16(f)
		}
		err = mx.MulF16(dst, h, batch)
	} else {
		err = mx.MulF32(dst, x, batch)
	}
	if err != nil {
		t.Fatalf("%s batch %d: %v", mx.Kernel(), batch, err)
	}
	checkGuards(t, mx.Kernel(), full, batch*c.Rows)
	ref, mag := make([]float64, c.Rows), make([]float64, c.Rows)
	bad := 0
	for v := 0; v < batch; v++ {
		xv := x[v*c.Cols : (v+1)*c.Cols]
		if err := c.DotRef(ref, xv); err != nil {
			t.Fatal(err)
		}
		if err := c.DotRefMag(mag, xv); err != nil {
			t.Fatal(err)
		}
		for r := range ref {
			got := float64(dst[v*c.Rows+r])
			if d := math.Abs(got - ref[r]); !(d <= codebook.Tolerance*mag[r]+1e-30) {
				if bad++; bad <= 3 {
					t.Errorf("%s (%s) batch %d vector %d row %d: got %g, want %g (|err| %.3g > %.3g)",
						c.Name(), mx.Kernel(), batch, v, r, got, ref[r], d, codebook.Tolerance*mag[r])
				}
			}
		}
	}
}

// TestCodebook runs every configuration the layout allows (M 1/2, V
// 2/4/8, B 4/6/8/10/12, per-vector to 256-column and whole-row groups,
// binary16 and float32 metadata) with the local and the global Psumbook
// and the dequantizing baseline, split and unsplit columns, A32 and A16,
// batch 1..16, against the float64 reference.
func TestCodebook(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewSource(11))
	const rows, cols = 45, 300
	n := 0
	for _, m := range []int{1, 2} {
		for _, v := range []int{2, 4, 8} {
			for _, b := range []int{4, 6, 8, 10, 12} {
				groups := []int{v, 256, 0, 2 * v, 64}
				g := groups[n%len(groups)]
				if g != 0 && g < v {
					g = v
				}
				fp32 := n%2 == 1
				c := randCodebook(t, rng, rows, cols, m, v, b, g, fp32)
				batches := []int{1, 3, 16}
				if b >= 10 {
					batches = []int{1, 5} // big tables: keep PoCL fast
				}
				for _, mode := range []string{"local", "global", "dequant"} {
					var lm layout.Matrix = c
					if mode == "dequant" {
						lm = codebook.Baseline{Codebook: c}
					}
					mx, err := be.Load(lm)
					if err != nil {
						t.Fatalf("%s: %v", lm.Name(), err)
					}
					if mode != "dequant" {
						mx.cb.table = mode
					}
					if n%3 == 0 {
						mx.cb.splits = 1
					}
					for i, bt := range batches {
						checkCB(t, mx, c, rng, bt, (i+n)%2 == 1)
					}
					mx.Close()
				}
				n++
			}
		}
	}
}

// TestCodebookPlan checks that both Psumbook placements are really
// chosen: the local one for small tables at batch 1, the global one
// for large tables or batches.
func TestCodebookPlan(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewSource(3))
	small := randCodebook(t, rng, 40, 256, 1, 4, 8, 128, false)
	large := randCodebook(t, rng, 40, 256, 2, 8, 10, 128, false)
	for _, tc := range []struct {
		c     *codebook.Codebook
		batch int
		mode  int
	}{
		{small, 1, cbModeLocal},
		{small, 16, cbModeGlobal},
		{large, 1, cbModeGlobal},
	} {
		mx, err := be.Load(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		mx.cb.table = ""
		if p := mx.cb.plan(be, tc.batch); p.mode != tc.mode && be.localBudget() >= 4<<10 {
			t.Errorf("%s batch %d: mode %d, want %d", tc.c.Name(), tc.batch, p.mode, tc.mode)
		}
		mx.Close()
	}
	// A Psumbook past the global-table budget even for one vector (2 x
	// 4096 entries for each of 8350 segments: 267 MiB) runs, and is named,
	// dequantizing.
	huge := randCodebook(t, rng, 40, 16700, 2, 2, 12, 0, false)
	mx, err := be.Load(huge)
	if err != nil {
		t.Fatal(err)
	}
	defer mx.Close()
	if p := mx.cb.plan(be, 1); p.mode != cbModeDeqG || !strings.HasSuffix(mx.Kernel(), "-dequant") {
		t.Errorf("%s: mode %d, kernel %s; want the dequantizing kernel, named so", huge.Name(), p.mode, mx.Kernel())
	}
}

// TestCodebookErrors: int8 activations are refused, bad shapes and closed
// matrices are errors, corrupt matrices are rejected at load.
func TestCodebookErrors(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewSource(5))
	c := randCodebook(t, rng, 20, 300, 1, 4, 8, 0, false)
	mx, err := be.Load(c)
	if err != nil {
		t.Fatal(err)
	}
	dst, x := make([]float32, 20), make([]float32, 300)
	if err := mx.MulA8(dst, x, 1); !errors.Is(err, ErrCodebookA8) {
		t.Errorf("MulA8: %v, want ErrCodebookA8", err)
	}
	if err := mx.MulI8(dst, make([]int8, c.PCols), make([]float32, c.PCols/128), 1); !errors.Is(err, ErrCodebookA8) {
		t.Errorf("MulI8: %v, want ErrCodebookA8", err)
	}
	for name, err := range map[string]error{
		"short x":   mx.MulF32(dst, x[:299], 1),
		"short dst": mx.MulF32(dst[:19], x, 1),
		"batch 0":   mx.MulF32(dst, x, 0),
		"batch 17":  mx.MulF32(make([]float32, 17*20), make([]float32, 17*300), 17),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	mx.Close()
	if err := mx.MulF32(dst, x, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	bad := *c
	bad.Words = c.Words[:len(c.Words)-1]
	if _, err := be.Load(&bad); err == nil {
		t.Error("Load accepted a short code slice")
	}
	bad = *c
	bad.Scales16 = append([]layout.FP16(nil), c.Scales16...)
	bad.Scales16[3] = layout.ToFP16(float32(math.Inf(1)))
	if _, err := be.Load(codebook.Baseline{Codebook: &bad}); err == nil {
		t.Error("Load accepted an infinite scale")
	}
	t.Setenv(EnvPsumbook, "shared")
	if _, err := be.Load(c); err == nil || !strings.Contains(err.Error(), EnvPsumbook) {
		t.Errorf("Load with %s=shared: %v, want an error naming it", EnvPsumbook, err)
	}
}
