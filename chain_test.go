package qgemv_test

import (
	"errors"
	"math"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
)

// TestChain: Engine.Chain runs the MatVANS chain through public calls on
// plain and entropy-coded int8 matrices with the reference's hash, and
// refuses malformed chains with errors.
func TestChain(t *testing.T) {
	const d = 256
	wl, err := matvans.New(d, 4, 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := qgemv.Open(qgemv.WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var sets [3][]*qgemv.Matrix
	for _, w := range wl.W {
		for k := range sets {
			var m layout.Matrix
			switch k {
			case 0:
				m, err = layout.NewInt8(w, d, d)
			case 1:
				m, err = ans.Encode(w, d, d, ans.WarpRows)
			case 2:
				m, err = ans.Encode(w, d, d, ans.WarpStripes)
			}
			if err != nil {
				t.Fatal(err)
			}
			mx, err := eng.Load(m)
			if err != nil {
				t.Fatal(err)
			}
			sets[k] = append(sets[k], mx)
		}
	}
	out := make([]int8, d)
	for k, mats := range sets {
		if err := eng.Chain(out, mats, wl.Alpha, wl.V0); err != nil {
			t.Fatalf("set %d: %v", k, err)
		}
		if h, want := matvans.Hash(out), matvans.Hash(wl.Ref); h != want {
			t.Fatalf("set %d: hash %08x, want %08x", k, h, want)
		}
	}
	// Malformed chains.
	other, err := qgemv.Open(qgemv.WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	q, _ := layout.RandomQ4G128(d, d, 1)
	qm, err := eng.Load(q)
	if err != nil {
		t.Fatal(err)
	}
	small, _ := layout.RandomInt8(d, d/2, 2)
	sm, err := eng.Load(small)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Load(small)
	if err != nil {
		t.Fatal(err)
	}
	mats := sets[0]
	nan := append([]float32(nil), wl.Alpha...)
	nan[1] = float32(math.NaN())
	for name, err := range map[string]error{
		"no matrices":      eng.Chain(out, nil, nil, wl.V0),
		"scales short":     eng.Chain(out, mats, wl.Alpha[:2], wl.V0),
		"NaN scale":        eng.Chain(out, mats, nan, wl.V0),
		"v0 short":         eng.Chain(out, mats, wl.Alpha, wl.V0[:d-1]),
		"dst short":        eng.Chain(out[:d-1], mats, wl.Alpha, wl.V0),
		"shapes disagree":  eng.Chain(out, []*qgemv.Matrix{mats[0], sm}, wl.Alpha[:2], wl.V0),
		"other engine":     eng.Chain(out, []*qgemv.Matrix{foreign}, wl.Alpha[:1], wl.V0[:d/2]),
		"nil matrix":       eng.Chain(out, []*qgemv.Matrix{nil}, wl.Alpha[:1], wl.V0),
		"quantized format": eng.Chain(out, []*qgemv.Matrix{qm}, wl.Alpha[:1], wl.V0),
		"dst overlaps v0":  eng.Chain(wl.V0, mats, wl.Alpha, wl.V0),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if !errors.Is(eng.Chain(out, []*qgemv.Matrix{qm}, wl.Alpha[:1], wl.V0), qgemv.ErrFormatNotImplemented) {
		t.Error("a quantized matrix in a chain: want ErrFormatNotImplemented")
	}
	// A matrix may appear twice; a closed one is ErrClosed.
	twice := []*qgemv.Matrix{mats[0], mats[0]}
	if err := eng.Chain(out, twice, wl.Alpha[:2], wl.V0); err != nil {
		t.Errorf("the same matrix twice: %v", err)
	}
	if err := mats[2].Close(); err != nil {
		t.Fatal(err)
	}
	if err := eng.Chain(out, mats, wl.Alpha, wl.V0); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("a closed matrix: %v, want ErrClosed", err)
	}
}
