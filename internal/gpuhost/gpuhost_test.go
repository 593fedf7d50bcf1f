package gpuhost

import (
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

func TestChecks(t *testing.T) {
	for _, b := range []int{0, -1, 17} {
		if err := CheckBatch("x", b); !errors.Is(err, ErrBatch) {
			t.Errorf("batch %d: %v, want ErrBatch", b, err)
		}
	}
	if err := CheckBatch("x", 16); err != nil {
		t.Error(err)
	}
	g := Geometry{Rows: 3, Cols: 5, PCols: 128}
	if err := g.CheckF32("p", 6, 10, 2); err != nil {
		t.Error(err)
	}
	if err := g.CheckF32("p", 6, 9, 2); err == nil || !strings.Contains(err.Error(), "x has 9") {
		t.Errorf("short x: %v", err)
	}
	if err := g.CheckF32("p", 5, 10, 2); err == nil || !strings.Contains(err.Error(), "dst has 5") {
		t.Errorf("short dst: %v", err)
	}
	xq := make([]int8, 256)
	if err := g.CheckI8("p", 6, xq, []float32{1, 2}, 2); err != nil {
		t.Error(err)
	}
	for _, xs := range [][]float32{{1, -1}, {1, float32(math.NaN())}, {float32(math.Inf(1)), 0}} {
		if err := g.CheckI8("p", 6, xq, xs, 2); err == nil || !strings.Contains(err.Error(), "activation scale") {
			t.Errorf("scales %v: %v", xs, err)
		}
	}
	if err := g.CheckI8("p", 6, xq, []float32{1}, 2); err == nil || !strings.Contains(err.Error(), "xs has 1") {
		t.Errorf("short xs: %v", err)
	}
}

func TestQuantizeBatch(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const batch, cols, pcols = 3, 200, 256
	x := make([]float32, batch*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	xq := make([]int8, batch*pcols)
	xs := make([]float32, batch*2)
	if err := QuantizeBatch(xq, xs, x, batch, cols, pcols); err != nil {
		t.Fatal(err)
	}
	for b := 0; b < batch; b++ {
		wq, ws := make([]int8, pcols), make([]float32, 2)
		if err := layout.QuantizeA8(wq, ws, x[b*cols:(b+1)*cols]); err != nil {
			t.Fatal(err)
		}
		for i := range wq {
			if wq[i] != xq[b*pcols+i] {
				t.Fatalf("vector %d value %d: %d, want %d", b, i, xq[b*pcols+i], wq[i])
			}
		}
		if ws[0] != xs[2*b] || ws[1] != xs[2*b+1] {
			t.Fatalf("vector %d scales %v, want %v", b, xs[2*b:2*b+2], ws)
		}
	}
	x[cols+7] = float32(math.Inf(-1))
	if err := QuantizeBatch(xq, xs, x, batch, cols, pcols); err == nil || !strings.Contains(err.Error(), "vector 1") {
		t.Errorf("infinite activation: %v", err)
	}
	if err := QuantizeBatch(xq[1:], xs, x, batch, cols, pcols); err == nil {
		t.Error("short xq accepted")
	}
}

func TestPad(t *testing.T) {
	x := []float32{1, 2, 3, 4, 5, 6}
	dst := make([]float32, 8)
	for i := range dst {
		dst[i] = -9
	}
	if err := PadF32(dst, x, 2, 3, 4, []int32{2, 0, 1}); err != nil {
		t.Fatal(err)
	}
	want := []float32{3, 1, 2, 0, 6, 4, 5, 0}
	for i := range want {
		if dst[i] != want[i] {
			t.Fatalf("PadF32 = %v, want %v", dst, want)
		}
	}
	h := make([]layout.FP16, 6)
	for i, v := range x {
		h[i] = layout.ToFP16(v + 0.5)
	}
	if err := PadF16(dst, h, 2, 3, 4, nil); err != nil {
		t.Fatal(err)
	}
	want = []float32{1.5, 2.5, 3.5, 0, 4.5, 5.5, 6.5, 0}
	for i := range want {
		if dst[i] != want[i] {
			t.Fatalf("PadF16 = %v, want %v", dst, want)
		}
	}
	if err := PadF32(dst, x, 2, 3, 4, []int32{0, 1, 3}); err == nil {
		t.Error("bad permutation accepted")
	}
	if err := PadF32(dst[1:], x, 2, 3, 4, nil); err == nil {
		t.Error("short dst accepted")
	}
}

func TestFlattenMeta(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	w := make([]float32, 20*300)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	q, err := layout.QuantizeQ4G128(w, 20, 300, layout.MinMax)
	if err != nil {
		t.Fatal(err)
	}
	mt, err := FlattenMeta(q)
	if err != nil {
		t.Fatal(err)
	}
	for g := 0; g < q.Groups(); g++ {
		for r := 0; r < q.PRows; r++ {
			i := g*mt.PRows + r
			if mt.S[i] != q.Scale(r, g) || mt.Z[i] != int32(q.Zero(r, g)) || mt.M[i] != q.Scale(r, g)*float32(q.Zero(r, g)) {
				t.Fatalf("Q4G128 row %d group %d: %v %v %v", r, g, mt.S[i], mt.M[i], mt.Z[i])
			}
		}
	}
	b, err := layout.QuantizeBits(w, 20, 300, 4, 64, layout.QuantOptions{Method: layout.MinMax})
	if err != nil {
		t.Fatal(err)
	}
	mt, err = FlattenMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	if mt.G != 64 || mt.Groups != b.Groups() {
		t.Fatalf("Bits meta geometry %d groups of %d", mt.Groups, mt.G)
	}
	for g := 0; g < b.Groups(); g++ {
		for r := 0; r < b.Rows; r++ {
			s, m := b.Affine(r, g)
			i := g*mt.PRows + r
			if mt.S[i] != s || mt.M[i] != m || (mt.Z != nil && float32(mt.Z[i]) != b.Zero(r, g)) {
				t.Fatalf("Bits row %d group %d", r, g)
			}
		}
	}
}

// TestCheckUses: an operand smaller than the operation needs, and counts
// outside the kernels' int range, are errors naming them.
func TestCheckUses(t *testing.T) {
	if err := CheckUses("x", "op", Use{"dst", 16, 16}, Use{"src", 64, 65}); err == nil || !strings.Contains(err.Error(), "src buffer holds 64 bytes, the operation needs 65") {
		t.Errorf("short src: %v", err)
	}
	if err := CheckUses("x", "op", Use{"dst", 16, 16}); err != nil {
		t.Error(err)
	}
	if err := CheckBufs("x", "op", 17, Use{"dst", 16, 16}); !errors.Is(err, ErrBatch) {
		t.Errorf("CheckBufs batch 17: %v", err)
	}
	if err := CheckBufs("x", "op", 1, Use{"dst", 8, 16}); err == nil {
		t.Error("CheckBufs of a short dst: no error")
	}
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		if err := CheckScalar("x", "scale", v); err == nil {
			t.Errorf("CheckScalar(%v): no error", v)
		}
	}
	if err := CheckScalar("x", "scale", -2); err != nil {
		t.Error(err)
	}
	for _, n := range []int{-1, math.MaxInt32 + 1} {
		if err := CheckElementwise("x", "op", n); err == nil {
			t.Errorf("CheckElementwise(%d): no error", n)
		}
	}
	g := Geometry{Rows: 3, Cols: 200, PCols: 256}
	if g.OutBytes(2) != 24 || g.InBytes(2, 2) != 800 || g.QBytes(2) != 512 || g.SBytes(2) != 16 {
		t.Errorf("sizes %d %d %d %d", g.OutBytes(2), g.InBytes(2, 2), g.QBytes(2), g.SBytes(2))
	}
}
