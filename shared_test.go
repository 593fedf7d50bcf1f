package qgemv_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// sharedMatrices returns matrices of 1000 columns that read one input:
// Q4G128, Bits4G128, Bits3G128 (another padding), and two act-order
// Bits4G128 with equal permutations in distinct slices, and one with
// another permutation.
func sharedMatrices(t *testing.T) []layout.Matrix {
	t.Helper()
	var out []layout.Matrix
	for i, name := range []string{"q4g128", "bits4g128", "bits3g128", "bits4g128", "bits4g128", "bits4g128"} {
		spec, err := layout.ParseFormatSpec(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := synth.Matrix(spec, 100+37*i, 1000, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if i >= 3 {
			seed := uint64(5)
			if i == 5 {
				seed = 6
			}
			p := rand.New(rand.NewPCG(seed, 1)).Perm(1000)
			b := m.(*layout.Bits)
			b.Perm = make([]int32, 1000)
			for j, v := range p {
				b.Perm[j] = int32(v)
			}
		}
		out = append(out, m)
	}
	return out
}

// TestSharedInputSameResults: MulShared and SharedInput give each
// matrix's own Mul results bit for bit, with A8 (quantized once per
// column order and padding), A16 (rounded once) and A32, at batch 1
// and 3.
func TestSharedInputSameResults(t *testing.T) {
	ms := sharedMatrices(t)
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	var mats []*qgemv.Matrix
	for _, m := range ms {
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		if !mat.TakesA8() {
			t.Fatalf("%s: TakesA8 false", mat.Format())
		}
		mats = append(mats, mat)
	}
	in, err := eng.NewSharedInput(mats...)
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{1, 3} {
		x := synth.Vector(batch*1000, uint64(batch))
		for _, act := range []qgemv.Activation{qgemv.A8, qgemv.A16, qgemv.A32} {
			dst := make([][]float32, len(mats))
			for i, m := range mats {
				dst[i] = make([]float32, batch*m.Rows())
			}
			if err := eng.MulShared(dst, mats, x, batch, act); err != nil {
				t.Fatal(err)
			}
			if err := in.Set(x, batch, act); err != nil {
				t.Fatal(err)
			}
			for i, m := range mats {
				want := make([]float32, batch*m.Rows())
				if err := m.Mul(want, x, batch, act); err != nil {
					t.Fatal(err)
				}
				got := make([]float32, len(want))
				if err := in.Mul(i, got); err != nil {
					t.Fatal(err)
				}
				for r := range want {
					if dst[i][r] != want[r] || got[r] != want[r] {
						t.Fatalf("batch %d %v matrix %d (%s) output %d: MulShared %v, SharedInput %v, Mul %v", batch, act, i, m.Format(), r, dst[i][r], got[r], want[r])
					}
				}
			}
		}
	}
}

// TestSharedInputErrors: mismatched matrices, a float-only matrix with
// A8, bad lengths, overlaps and closed engines are errors.
func TestSharedInputErrors(t *testing.T) {
	eng, _ := qgemv.Open()
	defer eng.Close()
	other, _ := qgemv.Open()
	defer other.Close()
	load := func(e *qgemv.Engine, name string, rows, cols int) *qgemv.Matrix {
		return loadNamed(t, e, name, rows, cols, 3)
	}
	a, b := load(eng, "bits4g128", 64, 256), load(eng, "q4g128", 32, 256)
	wide := load(eng, "q4g128", 32, 384)
	foreign := load(other, "q4g128", 32, 256)
	cb := load(eng, "cb-m1v4b8g128", 32, 256)
	if cb.TakesA8() {
		t.Fatal("a codebook matrix says it takes int8 activations")
	}
	if _, err := eng.NewSharedInput(); err == nil {
		t.Error("no matrices: no error")
	}
	if _, err := eng.NewSharedInput(a, wide); err == nil {
		t.Error("different columns: no error")
	}
	if _, err := eng.NewSharedInput(a, foreign); err == nil {
		t.Error("a matrix of another engine: no error")
	}
	if _, err := eng.NewSharedInput(a, nil); err == nil {
		t.Error("a nil matrix: no error")
	}
	in, err := eng.NewSharedInput(a, b, cb)
	if err != nil {
		t.Fatal(err)
	}
	x := synth.Vector(256, 1)
	if err := in.Mul(0, make([]float32, 64)); err == nil {
		t.Error("Mul before Set: no error")
	}
	if err := in.Set(x, 1, qgemv.A8); !errors.Is(err, qgemv.ErrFormatNotImplemented) {
		t.Errorf("A8 with a codebook: %v, want ErrFormatNotImplemented", err)
	}
	if err := in.Set(x[:255], 1, qgemv.A32); err == nil {
		t.Error("short x: no error")
	}
	if err := in.Set(x, 0, qgemv.A32); !errors.Is(err, qgemv.ErrBatch) {
		t.Errorf("batch 0: %v", err)
	}
	if err := in.Set(x, 1, qgemv.Activation(9)); err == nil {
		t.Error("unknown activation: no error")
	}
	if err := in.Set(x, 1, qgemv.A32); err != nil {
		t.Fatal(err)
	}
	if err := in.Mul(3, make([]float32, 32)); err == nil {
		t.Error("matrix 3 of 3: no error")
	}
	if err := in.Mul(1, make([]float32, 31)); err == nil {
		t.Error("short dst: no error")
	}
	buf := make([]float32, 64+32)
	if err := eng.MulShared([][]float32{buf[:64], buf[32:]}, []*qgemv.Matrix{a, b}, x, 1, qgemv.A8); !errors.Is(err, qgemv.ErrOverlap) {
		t.Errorf("overlapping outputs: %v", err)
	}
	xy := make([]float32, 256)
	if err := eng.MulShared([][]float32{xy[:64]}, []*qgemv.Matrix{a}, xy, 1, qgemv.A8); !errors.Is(err, qgemv.ErrOverlap) {
		t.Errorf("output over the input: %v", err)
	}
	if err := eng.MulShared([][]float32{make([]float32, 64)}, []*qgemv.Matrix{a, b}, x, 1, qgemv.A8); err == nil {
		t.Error("one output for two matrices: no error")
	}
	eng.Close()
	if err := in.Set(x, 1, qgemv.A8); err == nil {
		t.Error("Set A8 on a closed engine: no error")
	}
	if err := in.Set(x, 1, qgemv.A32); err != nil {
		t.Fatal(err) // a copy only
	}
	if err := in.Mul(0, make([]float32, 64)); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("Mul on a closed engine: %v", err)
	}
}

// TestSharedInputNoAllocs: Set and Mul of a prepared SharedInput
// allocate nothing beyond what the same QuantizeA8 and MulInt8 calls
// allocate in the backend, once the batch has been seen.
func TestSharedInputNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	eng, _ := qgemv.Open(qgemv.WithThreads(1))
	defer eng.Close()
	spec, _ := layout.ParseFormatSpec("bits4g128")
	var mats []*qgemv.Matrix
	for i := range 3 {
		m, _ := synth.Matrix(spec, 128, 512, uint64(i))
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		mats = append(mats, mat)
	}
	in, err := eng.NewSharedInput(mats...)
	if err != nil {
		t.Fatal(err)
	}
	x := synth.Vector(512, 2)
	y := make([]float32, 128)
	step := func() {
		if err := in.Set(x, 1, qgemv.A8); err != nil {
			t.Fatal(err)
		}
		for i := range mats {
			if err := in.Mul(i, y); err != nil {
				t.Fatal(err)
			}
		}
	}
	xq, xs := make([]int8, 512), make([]float32, 4)
	direct := func() {
		if err := eng.QuantizeA8(xq, xs, x); err != nil {
			t.Fatal(err)
		}
		for _, m := range mats {
			if err := m.MulInt8(y, xq, xs, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	step()
	direct()
	if n, base := testing.AllocsPerRun(20, step), testing.AllocsPerRun(20, direct); n > base {
		t.Errorf("a step allocates %v times, the same calls made directly %v", n, base)
	}
}
