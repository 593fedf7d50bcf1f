package gpuhost

import (
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout/ans"
)

func TestANSTable(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	w := make([]int8, 64*256)
	for i := range w {
		w[i] = int8(rng.NormFloat64() * 3)
	}
	w[5], w[77] = 127, -128 // rare values: escapes
	m, err := ans.Encode(w, 64, 256, ans.WarpRows)
	if err != nil {
		t.Fatal(err)
	}
	md := &m.Model
	tab := ANSTable(md)
	if len(tab) != ans.ProbScale {
		t.Fatalf("%d entries, want %d", len(tab), ans.ProbScale)
	}
	escapes := 0
	for d, e := range tab {
		k := int(md.PPF[d])
		if f := uint8(e >> 8); f != md.Freq[k] {
			t.Fatalf("digit %d: frequency %d, want %d", d, f, md.Freq[k])
		}
		if off := (e >> 16) & 0xff; int(off) != d-int(md.Cum[k]) || off >= uint32(md.Freq[k]) {
			t.Fatalf("digit %d: offset %d, cum %d freq %d", d, off, md.Cum[k], md.Freq[k])
		}
		if k == md.Escape {
			escapes++
			if e&0xff != 0 || e>>24 != 1 {
				t.Fatalf("escape digit %d: %#x", d, e)
			}
		} else if int8(uint8(e)) != md.Value[k] || e>>24 != 0 {
			t.Fatalf("digit %d: %#x, want value %d", d, e, md.Value[k])
		}
	}
	if md.Escape >= 0 && escapes != int(md.Freq[md.Escape]) {
		t.Errorf("%d escape digits, want %d", escapes, md.Freq[md.Escape])
	}
}

func TestANSStatus(t *testing.T) {
	if s := ANSStatus(2); s != "stream exhausted" {
		t.Errorf("status 2: %q", s)
	}
	if s := ANSStatus(99); s != "status 99" {
		t.Errorf("status 99: %q", s)
	}
	err := ANSCorrupt("cuda", "chain matrix 1", 7, 4)
	if !errors.Is(err, ans.ErrCorrupt) || err.Error() != "cuda: chain matrix 1 unit 7: "+ans.ErrCorrupt.Error()+": final state is not 2^31" {
		t.Errorf("ANSCorrupt: %v", err)
	}
}

type shape struct{ r, c int }

func (s shape) Rows() int { return s.r }
func (s shape) Cols() int { return s.c }

func TestCheckChain(t *testing.T) {
	mats := []shape{{300, 200}, {40, 300}, {8, 40}}
	n, w, err := CheckChain("p", mats, []float32{1, 2, 3}, 200, nil)
	if err != nil || n != 8 || w != 300 {
		t.Fatalf("CheckChain = %d, %d, %v; want 8, 300", n, w, err)
	}
	for _, c := range []struct {
		mats  []shape
		alpha []float32
		n0    int
		want  string
	}{
		{nil, nil, 200, "0 matrices"},
		{mats, []float32{1, 2}, 200, "3 matrices and 2 scales"},
		{mats, []float32{1, 2, 3}, 199, "matrix 0 has 200 columns, the vector 199"},
		{[]shape{{300, 200}, {40, 301}}, []float32{1, 2}, 200, "matrix 1 has 301 columns, the vector 300"},
		{mats, []float32{1, float32(math.NaN()), 3}, 200, "scale 1 is NaN"},
		{mats, []float32{1, 2, float32(math.Inf(-1))}, 200, "scale 2 is -Inf"},
	} {
		if _, _, err := CheckChain("p", c.mats, c.alpha, c.n0, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v %d: %v, want %q", c.mats, c.alpha, c.n0, err, c.want)
		}
	}
	bad := errors.New("closed")
	_, _, err = CheckChain("p", mats, []float32{1, 2, 3}, 5, func(i int, m shape) error {
		if i == 0 {
			return bad
		}
		return nil
	})
	if err != bad {
		t.Errorf("usable's error: %v (checked before the shape?)", err)
	}
	// Nil matrices, as a nil interface or a nil pointer in one, are errors
	// before any method is called.
	var nilPtr *shape
	if _, _, err := CheckChain("p", []Shape{shape{200, 5}, nilPtr}, []float32{1, 2}, 5, nil); err == nil || !strings.Contains(err.Error(), "matrix 1 is nil") {
		t.Errorf("a nil *shape: %v", err)
	}
	if _, _, err := CheckChain("p", []Shape{nil}, []float32{1}, 5, nil); err == nil || !strings.Contains(err.Error(), "matrix 0 is nil") {
		t.Errorf("a nil Shape: %v", err)
	}
	if err := CheckMul("p", "k", 3, 4, 4, 3); err != nil {
		t.Error(err)
	}
	if err := CheckMul("p", "k", 4, 4, 4, 3); err == nil || !strings.Contains(err.Error(), "v 4, y 4, want 3, 4") {
		t.Errorf("CheckMul: %v", err)
	}
}

func TestQuantizeA8(t *testing.T) {
	x := []float32{1, -2, 3, 0.5, 4, -8}
	perm := []int32{2, 0, 1}
	xq, xs, err := QuantizeA8("p", x, 2, 3, 128, perm)
	if err != nil {
		t.Fatal(err)
	}
	xp := make([]float32, 256)
	if err := PadF32(xp, x, 2, 3, 128, perm); err != nil {
		t.Fatal(err)
	}
	wq, ws := make([]int8, 256), make([]float32, 2)
	if err := QuantizeBatch(wq, ws, xp, 2, 128, 128); err != nil {
		t.Fatal(err)
	}
	for i := range wq {
		if wq[i] != xq[i] {
			t.Fatalf("value %d: %d, want %d", i, xq[i], wq[i])
		}
	}
	if ws[0] != xs[0] || ws[1] != xs[1] {
		t.Fatalf("scales %v, want %v", xs, ws)
	}
	x[4] = float32(math.NaN())
	if _, _, err := QuantizeA8("p", x, 2, 3, 128, nil); err == nil || !strings.HasPrefix(err.Error(), "p: ") || !strings.Contains(err.Error(), "vector 1") {
		t.Errorf("NaN activation: %v", err)
	}
}

func TestPadGeneric(t *testing.T) {
	x := []uint16{1, 2, 3, 4, 5, 6}
	dst := []uint16{9, 9, 9, 9, 9, 9, 9, 9}
	if err := Pad(dst, x, 2, 3, 4, []int32{1, 2, 0}); err != nil {
		t.Fatal(err)
	}
	want := []uint16{2, 3, 1, 0, 5, 6, 4, 0}
	for i := range want {
		if dst[i] != want[i] {
			t.Fatalf("Pad = %v, want %v", dst, want)
		}
	}
}

// TestScaleVectors: vectors whose largest magnitude is outside
// [2^-60, 2^60] are scaled exactly into [0.5, 1) and the results back;
// others, and vectors with NaN or an infinity, are left alone; SplitHiLo
// refuses (ok false) what its scaling cannot hold instead of clamping.
func TestScaleVectors(t *testing.T) {
	x := []float32{3, -1, 0x1p-120, -0x1p-121, float32(math.Inf(1)), 1e30, 0, 0, 0x1p100, 0x1p99, 0x1p127, 0.5}
	orig := append([]float32(nil), x...)
	back := ScaleVectors(x, 6, 2)
	want := []int{0, -119, 0, 0, 41, 68} // up to [0.5, 1), down to [2^59, 2^60)
	for v := range want {
		if back[v] != want[v] {
			t.Errorf("vector %d: exponent %d, want %d", v, back[v], want[v])
		}
		for i := 2 * v; i < 2*v+2; i++ {
			if float32(math.Ldexp(float64(x[i]), back[v])) != orig[i] {
				t.Errorf("x[%d] = %g: times 2^%d is not %g", i, x[i], back[v], orig[i])
			}
		}
	}
	if x[2] != 0.5 || x[8] != 0x1p59 || x[9] != 0x1p58 || x[10] != 0x1p59 {
		t.Errorf("scaled values %g, %g, %g, %g, want 0.5, 2^59, 2^58, 2^59", x[2], x[8], x[9], x[10])
	}
	y := []float32{1, 2, 3, 4, 5, 0x1p-3}
	UnscaleResults(y, 6, 1, back)
	if y[1] != 2*0x1p-119 || y[4] != 5*0x1p41 || y[0] != 1 || y[5] != 0x1p65 {
		t.Errorf("unscaled %v", y)
	}
	z := []float32{0, 0x1p-3}
	UnscaleResults(z, 2, 1, []int{128, 128}) // a factor 2^128 is no float32
	if z[0] != 0 || z[1] != 0x1p125 {
		t.Errorf("unscaled by 2^128: %v, want [0 2^125]", z)
	}
	if ScaleVectors([]float32{1, 2, 1e-10}, 3, 1) != nil {
		t.Error("vectors within [2^-60, 2^60] scaled")
	}
	for _, m := range []float32{0x1p-90, 0x1p116} {
		if _, _, ok := SplitHiLo([]float32{m, m / 2}, 1, 2, 2); ok {
			t.Errorf("SplitHiLo of max %g: ok", m)
		}
	}
	if _, _, ok := SplitHiLo([]float32{0x1p-80, 1e-30}, 1, 2, 2); !ok {
		t.Error("SplitHiLo of max 2^-80: not ok")
	}
}
