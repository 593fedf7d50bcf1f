package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

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
	// {2, 4, 8, 0}: the 64-row kernel's column tiles inside one whole-row group
	cfgs := []cfg{{1, 4, 8, 128}, {2, 8, 8, 128}, {1, 4, 4, 4}, {2, 4, 6, 0}, {1, 8, 10, 64}, {1, 2, 12, 32}, {2, 2, 4, 256}, {1, 4, 8, 0}, {2, 4, 8, 64}, {2, 4, 8, 0}}
	// 200 rows: 7 row tiles over 3 threads (the scalar kernel walks several
	// per call)
	shapes := [][2]int{{1, 1}, {33, 700}, {70, 2100}, {200, 520}}
	if testing.Short() {
		shapes = shapes[1:2]
	}
	for _, sh := range shapes {
		rows, cols := sh[0], sh[1]
		for _, cf := range cfgs {
			c := randomCodebook(t, rng, rows, cols, cf.m, cf.v, cf.b, cf.g, rng.IntN(2) == 0)
			for _, isa := range supportedSets() {
				be, err := New(Config{ISA: isa, Threads: 3})
				if err != nil {
					t.Fatal(err)
				}
				for _, dq := range []bool{false, true} {
					mx, err := be.LoadCodebook(c, dq)
					if err != nil {
						t.Fatal(err)
					}
					mx.dequant = dq // test both kernels whatever the row count
					for _, batch := range []int{1, 3} {
						name := fmt.Sprintf("%s/%s/%dx%d/b%d", c.Name(), mx.Kernel(), rows, cols, batch)
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
			if d := math.Abs(float64(dst[v*c.Rows+r]) - ref[r]); d > tol || math.IsNaN(float64(dst[v*c.Rows+r])) {
				t.Fatalf("%s: vector %d row %d = %v, want %v (|err| %.3g > %.3g)", name, v, r, dst[v*c.Rows+r], ref[r], d, tol)
			}
		}
	}
}
