package qgemv_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// stressCase is one matrix of the stress test with its expected results
// for the vectors xs (A32: reference and bound; A8: exact bits; I32:
// exact).
type stressCase struct {
	m      layout.Matrix
	rows   int
	cols   int
	x      []float32 // maxStressBatch vectors
	xi     []int8    // maxStressBatch int8 vectors (int8 formats)
	ref    []float64 // A32 reference per vector and row
	bound  []float64
	a8     []float32 // exact A8 results (nil: the format takes no A8)
	i32    []int32   // exact int32 results (int8 formats)
	floats bool      // takes float activations
}

const maxStressBatch = 4

func newStressCase(t *testing.T, m layout.Matrix, seed uint64) *stressCase {
	rows, cols := m.Shape()
	c := &stressCase{m: m, rows: rows, cols: cols}
	rng := rand.New(rand.NewPCG(seed, 5))
	c.x = make([]float32, maxStressBatch*cols)
	for i := range c.x {
		c.x[i] = float32(rng.NormFloat64())
	}
	if im, ok := m.(layout.Int32Matrix); ok {
		c.xi = make([]int8, maxStressBatch*cols)
		for i := range c.xi {
			c.xi[i] = int8(rng.IntN(256) - 128)
		}
		c.i32 = make([]int32, maxStressBatch*rows)
		for v := 0; v < maxStressBatch; v++ {
			if err := im.DotInt32(c.i32[v*rows:(v+1)*rows], c.xi[v*cols:(v+1)*cols]); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	c.floats = true
	c.ref, c.bound = make([]float64, maxStressBatch*rows), make([]float64, maxStressBatch*rows)
	mag := make([]float64, rows)
	for v := 0; v < maxStressBatch; v++ {
		xv := c.x[v*cols : (v+1)*cols]
		if err := m.DotRef(c.ref[v*rows:(v+1)*rows], xv); err != nil {
			t.Fatal(err)
		}
		if err := m.DotRefMag(mag, xv); err != nil {
			t.Fatal(err)
		}
		rel, abs := m.Tolerance(xv)
		for r := range mag {
			c.bound[v*rows+r] = rel*mag[r] + abs
		}
	}
	if am, ok := m.(layout.A8Matrix); ok && am.IntegerZeros() == nil {
		pc := m.PaddedCols()
		xq, xs := make([]int8, pc), make([]float32, pc/layout.GroupSize)
		c.a8 = make([]float32, maxStressBatch*rows)
		for v := 0; v < maxStressBatch; v++ {
			if err := layout.QuantizeA8(xq, xs, c.x[v*cols:(v+1)*cols]); err != nil {
				t.Fatal(err)
			}
			if err := am.DotA8Exact(c.a8[v*rows:(v+1)*rows], xq, xs); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c
}

// check runs one random multiply of c on mat and compares it with the
// expected results; an error wrapping ErrClosed is returned as is (the
// engine may be closing).
func (c *stressCase) check(mat *qgemv.Matrix, rng *rand.Rand) error {
	batch := 1 + rng.IntN(maxStressBatch)
	if !c.floats {
		dst := make([]int32, batch*c.rows)
		if err := mat.MulInt32(dst, c.xi[:batch*c.cols], batch); err != nil {
			return err
		}
		for i, want := range c.i32[:batch*c.rows] {
			if dst[i] != want {
				return fmt.Errorf("%s MulInt32 batch %d: output %d = %d, want %d", c.m.Name(), batch, i, dst[i], want)
			}
		}
		return nil
	}
	dst := make([]float32, batch*c.rows)
	if c.a8 != nil && rng.IntN(2) == 0 {
		if err := mat.Mul(dst, c.x[:batch*c.cols], batch, qgemv.A8); err != nil {
			return err
		}
		for i, want := range c.a8[:batch*c.rows] {
			if math.Float32bits(dst[i]) != math.Float32bits(want) {
				return fmt.Errorf("%s A8 batch %d: output %d = %v, want exactly %v", c.m.Name(), batch, i, dst[i], want)
			}
		}
		return nil
	}
	if err := mat.Mul(dst, c.x[:batch*c.cols], batch, qgemv.A32); err != nil {
		return err
	}
	for i, got := range dst {
		if d := math.Abs(float64(got) - c.ref[i]); !(d <= c.bound[i]) {
			return fmt.Errorf("%s A32 batch %d: output %d = %v, want %v within %v", c.m.Name(), batch, i, got, c.ref[i], c.bound[i])
		}
	}
	return nil
}

// misuse runs a random malformed call, which must be an error.
func (c *stressCase) misuse(mat *qgemv.Matrix, rng *rand.Rand) error {
	var err error
	k := rng.IntN(4)
	switch {
	case k == 0 && c.floats:
		err = mat.Mul(make([]float32, c.rows), c.x[:c.cols-1], 1, qgemv.A32)
	case k == 1 && c.floats:
		err = mat.Mul(make([]float32, c.rows*17), make([]float32, c.cols*17), 17, qgemv.A8)
	case k == 2 && c.floats:
		buf := make([]float32, c.rows+c.cols)
		err = mat.Mul(buf[:c.rows], buf[c.rows-1:c.rows-1+c.cols], 1, qgemv.A32) // overlapping
	case c.floats:
		err = mat.MulInt32(make([]int32, c.rows), make([]int8, c.cols), 1) // not an int8 format
	default:
		err = mat.MulInt32(make([]int32, c.rows), c.xi[:c.cols-1], 1)
	}
	if err == nil {
		return fmt.Errorf("%s: malformed call %d accepted", c.m.Name(), k)
	}
	return nil
}

// stressCases returns one small matrix per registered format example
// (the short list), shaped so that every layout holds it.
func stressCases(t *testing.T) []*stressCase {
	var out []*stressCase
	seed := uint64(1)
	for _, f := range layout.Formats() {
		for _, name := range f.Examples[:f.ShortExamples] {
			rows, cols := 40, 300
			if f.Int8Values {
				rows, cols = 64, 256
			}
			m, err := synth.Named(name, rows, cols, seed)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, newStressCase(t, m, seed))
			seed++
		}
	}
	return out
}

// TestStressConcurrent: many goroutines multiply every format on several
// engines at once with random batches and activation types, every result
// checked (A8 and int32 exactly, float within its bound) and every
// malformed call an error; meanwhile engines are opened, used and closed
// while other goroutines still multiply on them, which must give ErrClosed
// or a correct result. Nothing may panic or hang, and once every engine
// is closed no worker goroutine may remain.
func TestStressConcurrent(t *testing.T) {
	cases := stressCases(t)
	runtime.GC()
	before := runtime.NumGoroutine()
	dur := 3 * time.Second
	if testing.Short() {
		dur = time.Second
	}
	opts := [][]qgemv.Option{
		{qgemv.WithBackend("cpu"), qgemv.WithThreads(2)},
		{qgemv.WithBackend("cpu"), qgemv.WithThreads(3)},
		{qgemv.WithBackend("cpu-generic"), qgemv.WithThreads(2)},
	}
	type loaded struct {
		eng  *qgemv.Engine
		mats []*qgemv.Matrix
	}
	load := func(o []qgemv.Option) (*loaded, error) {
		eng, err := qgemv.Open(o...)
		if err != nil {
			return nil, err
		}
		l := &loaded{eng: eng}
		for _, c := range cases {
			mat, err := eng.Load(c.m)
			if err != nil {
				return nil, fmt.Errorf("%s on %s: %w", c.m.Name(), eng.Backend(), err)
			}
			l.mats = append(l.mats, mat)
		}
		return l, nil
	}
	var stable []*loaded
	for _, o := range opts {
		l, err := load(o)
		if err != nil {
			t.Fatal(err)
		}
		stable = append(stable, l)
	}
	// A short-lived engine, replaced as the test goes: goroutines that
	// hold it multiply while it closes.
	var doomedMu sync.Mutex
	doomed, err := load(opts[0])
	if err != nil {
		t.Fatal(err)
	}

	errc := make(chan error, 64)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for time.Now().Before(deadline) {
				i := rng.IntN(len(cases))
				c := cases[i]
				switch k := rng.IntN(10); {
				case k < 6:
					if err := c.check(stable[rng.IntN(len(stable))].mats[i], rng); err != nil {
						fail(err)
						return
					}
				case k < 8:
					doomedMu.Lock()
					mat := doomed.mats[i]
					doomedMu.Unlock()
					if err := c.check(mat, rng); err != nil && !errors.Is(err, qgemv.ErrClosed) {
						fail(err)
						return
					}
				default:
					if err := c.misuse(stable[rng.IntN(len(stable))].mats[i], rng); err != nil {
						fail(err)
						return
					}
				}
			}
		}()
	}
	// Replace the doomed engine every few milliseconds, closing the old
	// one while the others may still multiply on it.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			next, err := load(opts[rand.IntN(len(opts))])
			if err != nil {
				fail(err)
				return
			}
			doomedMu.Lock()
			old := doomed
			doomed = next
			doomedMu.Unlock()
			if err := old.eng.Close(); err != nil {
				fail(fmt.Errorf("closing a busy engine: %w", err))
				return
			}
		}
	}()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(dur + 60*time.Second):
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		t.Fatalf("stress test hung; goroutines:\n%s", b.String())
	}
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	for _, l := range append(stable, doomed) {
		if err := l.eng.Close(); err != nil {
			t.Fatal(err)
		}
		for i, mat := range l.mats {
			if err := cases[i].check(mat, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, qgemv.ErrClosed) {
				t.Fatalf("%s after Close: %v, want ErrClosed", cases[i].m.Name(), err)
			}
		}
	}
	// Every engine's workers are gone (a few runtime goroutines may take
	// a moment to settle).
	var after int
	for i := 0; i < 100; i++ {
		runtime.GC()
		if after = runtime.NumGoroutine(); after <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	t.Fatalf("%d goroutines before the engines opened, %d after all closed:\n%s", before, after, b.String())
}

// TestEngineCloseStopsWorkers: an engine's CPU workers start with its
// first parallel multiply and stop on Close, engine by engine.
func TestEngineCloseStopsWorkers(t *testing.T) {
	m, err := synth.Q4G128(2048, 2048, 1)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	before := runtime.NumGoroutine()
	var engs []*qgemv.Engine
	for i := 0; i < 3; i++ {
		eng, err := qgemv.Open(qgemv.WithBackend("cpu"), qgemv.WithThreads(4)) // the CPU backend's workers
		if err != nil {
			t.Fatal(err)
		}
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := mat.Mul(make([]float32, 2048), make([]float32, 2048), 1, qgemv.A32); err != nil {
			t.Fatal(err)
		}
		engs = append(engs, eng)
	}
	busy := runtime.NumGoroutine()
	if busy < before+3*3 {
		t.Fatalf("%d goroutines after three 4-thread engines multiplied, %d before: want each engine's 3 workers", busy, before)
	}
	for i, eng := range engs {
		if err := eng.Close(); err != nil {
			t.Fatal(err)
		}
		// Close waits for its workers to finish (the goroutines may take
		// a moment longer to be gone): 3 fewer each time.
		want := busy - 3*(i+1)
		n := runtime.NumGoroutine()
		for try := 0; n > want && try < 100; try++ {
			time.Sleep(time.Millisecond)
			n = runtime.NumGoroutine()
		}
		if n > want {
			t.Fatalf("after closing %d engines: %d goroutines, want at most %d", i+1, n, want)
		}
	}
}
