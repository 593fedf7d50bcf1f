package cpu

import (
	"testing"

	"github.com/qgemv/qgemv/layout"
)

// TestMulAllocs: after a warm-up, a multiply allocates nothing on the CPU
// backend, one thread or several, with every activation type and batch
// (the worker team, the parallel steps' state and the scratch are
// reused): Q4G128, Bits4 and Bits8 with groups of 128, Sparse12, and an
// act-order Bits4.
func TestMulAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	q4, err := layout.RandomQ4G128(512, 2048, 1)
	if err != nil {
		t.Fatal(err)
	}
	b4, _ := layout.RandomBits(512, 2048, 4, 128, 2)
	b8, _ := layout.RandomBits(512, 2048, 8, 128, 3)
	sp, _ := layout.RandomSparse12(512, 2048, 128, 4)
	perm, _ := layout.RandomBits(512, 2048, 4, 128, 5)
	perm.Perm = make([]int32, 2048)
	for i := range perm.Perm {
		perm.Perm[i] = int32((i * 7) % 2048)
	}
	for _, m := range []layout.Matrix{q4, b4, b8, sp, perm} {
		allocsOf(t, m)
	}
}

func allocsOf(t *testing.T, m layout.Matrix) {
	for _, isa := range ISAs() {
		if !Supported(isa) {
			continue
		}
		for _, threads := range []int{1, 3} {
			be, err := New(Config{ISA: isa, Threads: threads})
			if err != nil {
				t.Fatal(err)
			}
			mx, err := be.LoadMatrix(m)
			if err != nil {
				t.Fatal(err)
			}
			for _, batch := range []int{1, 16} {
				x, y := make([]float32, batch*2048), make([]float32, batch*512)
				xh := make([]layout.FP16, batch*2048)
				xq, xs := make([]int8, batch*2048), make([]float32, batch*16)
				for name, f := range map[string]func() error{
					"A32": func() error { return mx.MulF32(y, x, batch) },
					"A16": func() error { return mx.MulF16(y, xh, batch) },
					"A8":  func() error { return mx.MulA8(y, x, batch) },
					"I8":  func() error { return mx.MulI8(y, xq, xs, batch) },
				} {
					if n := steadyAllocs(func() { _ = f() }); n != 0 {
						t.Errorf("%s %s, %d threads, batch %d, %s: %v allocations per multiply", m.Name(), isa, threads, batch, name, n)
					}
				}
			}
			be.Close()
		}
	}
}

// steadyAllocs is testing.AllocsPerRun(5, f), taken up to three times
// until it is zero: a garbage collection during the runs empties the
// scratch pools and the wait records of parked goroutines, so a run on
// a loaded machine (CI, test binaries in parallel) can allocate once
// without the multiply allocating in the steady state, which shows in
// every attempt.
func steadyAllocs(f func()) float64 {
	var n float64
	for range 3 {
		if n = testing.AllocsPerRun(5, f); n == 0 {
			break
		}
	}
	return n
}
