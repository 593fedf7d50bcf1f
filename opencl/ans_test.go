//go:build opencl

package opencl

import (
	"errors"
	"math"
	"math/rand"
	"testing"

	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
)

// randInt8 draws n values: mostly narrow Gaussian, with rare uniform
// outliers (so that the fitted model escapes some of them).
func randInt8(rng *rand.Rand, n int, sigma float64) []int8 {
	w := make([]int8, n)
	for i := range w {
		if rng.Intn(50) == 0 {
			w[i] = int8(rng.Intn(256) - 128)
			continue
		}
		w[i] = int8(max(-128, min(127, math.Round(rng.NormFloat64()*sigma))))
	}
	return w
}

// refDot is the exact int32 (wrapping) product of row-major w with v.
func refDot(w []int8, rows, cols int, v []int8) []int32 {
	y := make([]int32, rows)
	for r := range y {
		var s int32
		for c := 0; c < cols; c++ {
			s += int32(w[r*cols+c]) * int32(v[c])
		}
		y[r] = s
	}
	return y
}

// TestANS multiplies warp-rows and warp-stripes matrices (with escapes)
// and the plain int8 baseline, bit-exact against layout/ans's DotUnit and
// the row-major reference.
func TestANS(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewSource(7))
	escapes := 0
	for _, tc := range []struct {
		l          ans.Layout
		rows, cols int
		sigma      float64
	}{
		{ans.WarpRows, 37, 384, 4},
		{ans.WarpRows, 5, 128, 40},
		{ans.WarpStripes, 64, 200, 3},
		{ans.WarpStripes, 32, 4, 20},
	} {
		w := randInt8(rng, tc.rows*tc.cols, tc.sigma)
		m, err := ans.Encode(w, tc.rows, tc.cols, tc.l)
		if err != nil {
			t.Fatal(err)
		}
		mx, err := be.LoadANS(m)
		if err != nil {
			t.Fatal(err)
		}
		im, err := be.LoadInt8(w, tc.rows, tc.cols)
		if err != nil {
			t.Fatal(err)
		}
		for rep := 0; rep < 2; rep++ {
			v := randInt8(rng, tc.cols, 60)
			want := refDot(w, tc.rows, tc.cols, v)
			unit := make([]int32, 32)
			for u := 0; u < m.Units(); u++ {
				if err := m.DotUnit(u, v, unit); err != nil {
					t.Fatal(err)
				}
				if tc.l == ans.WarpRows && unit[0] != want[u] {
					t.Fatalf("reference disagreement at row %d", u)
				}
			}
			y, yi := make([]int32, tc.rows), make([]int32, tc.rows)
			if err := mx.Mul(v, y); err != nil {
				t.Fatalf("%s %dx%d: %v", mx.Kernel(), tc.rows, tc.cols, err)
			}
			if err := im.Mul(v, yi); err != nil {
				t.Fatal(err)
			}
			for r := range want {
				if y[r] != want[r] || yi[r] != want[r] {
					t.Fatalf("%s %dx%d row %d: ans %d, int8 %d, want %d", tc.l, tc.rows, tc.cols, r, y[r], yi[r], want[r])
				}
			}
		}
		escapes += len(m.Esc)
		mx.Close()
		im.Close()
		if err := mx.Mul(make([]int8, tc.cols), make([]int32, tc.rows)); !errors.Is(err, ErrClosed) {
			t.Errorf("after Close: %v, want ErrClosed", err)
		}
	}
	if escapes == 0 {
		t.Error("no escapes coded: the test does not cover them")
	}
}

// TestANSCorrupt: damaged streams are errors wrapping ans.ErrCorrupt that
// name the unit, never a wrong result or an out-of-bounds read.
func TestANSCorrupt(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewSource(9))
	const rows, cols = 8, 256
	w := randInt8(rng, rows*cols, 30)
	base, err := ans.Encode(w, rows, cols, ans.WarpRows)
	if err != nil {
		t.Fatal(err)
	}
	clone := func() *ans.Matrix {
		m := *base
		m.Words = append([]uint32(nil), base.Words...)
		m.Esc = append([]int8(nil), base.Esc...)
		return &m
	}
	v := randInt8(rng, cols, 50)
	for name, damage := range map[string]func(m *ans.Matrix){
		"initial state": func(m *ans.Matrix) { m.Words[m.Offsets[3]+5] = 0x80000000 }, // lane 2's high word: state >= 2^63
		"payload word":  func(m *ans.Matrix) { m.Words[m.Offsets[2]+64] ^= 0x00ff00ff },
		"stream cut": func(m *ans.Matrix) { // every word after the states zeroed in unit 1
			for i := m.Offsets[1] + 64; i < m.Offsets[2]; i++ {
				m.Words[i] = 0xffffffff
			}
		},
	} {
		m := clone()
		damage(m)
		_, refErr := m.Decode()
		mx, err := be.LoadANS(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err = mx.Mul(v, make([]int32, rows))
		if refErr == nil {
			t.Fatalf("%s: the reference decodes the damaged matrix; the case tests nothing", name)
		}
		if !errors.Is(err, ans.ErrCorrupt) {
			t.Errorf("%s: %v (reference: %v), want ans.ErrCorrupt", name, err, refErr)
		}
		mx.Close()
	}
	// escapes taken from the list: too few is an error
	if len(base.Esc) > 0 {
		m := clone()
		m.Esc = m.Esc[:len(m.Esc)-1]
		m.EscOffsets = append([]uint64(nil), base.EscOffsets...)
		m.EscOffsets[len(m.EscOffsets)-1]--
		for u := range m.EscOffsets[:len(m.EscOffsets)-1] {
			m.EscOffsets[u] = min(m.EscOffsets[u], uint64(len(m.Esc)))
		}
		if mx, err := be.LoadANS(m); err == nil {
			if err := mx.Mul(v, make([]int32, rows)); !errors.Is(err, ans.ErrCorrupt) {
				t.Errorf("short escape list: %v, want ans.ErrCorrupt", err)
			}
			mx.Close()
		}
	}
	bad := clone()
	bad.Offsets = append([]uint64(nil), base.Offsets...)
	bad.Offsets[2] += 3
	if _, err := be.LoadANS(bad); err == nil {
		t.Error("LoadANS accepted bad offsets")
	}
	mx, err := be.LoadANS(base)
	if err != nil {
		t.Fatal(err)
	}
	defer mx.Close()
	if err := mx.Mul(v[:cols-1], make([]int32, rows)); err == nil {
		t.Error("short vector accepted")
	}
	if _, err := be.LoadInt8(w[:5], rows, cols); err == nil {
		t.Error("LoadInt8 accepted a short matrix")
	}
}

// TestANSChain runs the MatVANS chain on the device (ANS and plain int8
// matrices mixed) against internal/matvans.Step on the host.
func TestANSChain(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewSource(13))
	const d = 256
	v0 := randInt8(rng, d, 30)
	var mats []ChainMat
	var alpha []float32
	v := append([]int8(nil), v0...)
	for i := 0; i < 4; i++ {
		w := randInt8(rng, d*d, 6)
		l := ans.WarpRows
		if i == 2 {
			l = ans.WarpStripes
		}
		var cm ChainMat
		if i == 1 {
			im, err := be.LoadInt8(w, d, d)
			if err != nil {
				t.Fatal(err)
			}
			cm = im
		} else {
			m, err := ans.Encode(w, d, d, l)
			if err != nil {
				t.Fatal(err)
			}
			am, err := be.LoadANS(m)
			if err != nil {
				t.Fatal(err)
			}
			cm = am
		}
		mats = append(mats, cm)
		y := refDot(w, d, d, v)
		var mx int32 = 1
		for _, x := range y {
			mx = max(mx, x, -x)
		}
		a := float32(127) / float32(mx) * 1.5 // some values clip
		alpha = append(alpha, a)
		matvans.Step(a, y, v)
	}
	got, err := be.RunChain(mats, alpha, v0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v {
		if got[i] != v[i] {
			t.Fatalf("chain output %d: %d, want %d", i, got[i], v[i])
		}
	}
	if _, err := be.RunChain(mats, alpha[:2], v0); err == nil {
		t.Error("RunChain accepted too few scales")
	}
	closeChain(mats)
}

// closeChain closes the chain's matrices.
func closeChain(mats []ChainMat) {
	for _, m := range mats {
		switch m := m.(type) {
		case *ANSMatrix:
			m.Close()
		case *Int8Matrix:
			m.Close()
		}
	}
}
