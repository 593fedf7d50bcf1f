package qgemv_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/dispatch"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/codebook"
)

// TestHugePagesSameResults: a matrix copied into huge-page memory gives
// bit-identical results, and closing the engine closes its matrices.
func TestHugePagesSameResults(t *testing.T) {
	for _, name := range []string{"q4g128", "bits4g128", "sparse12g128"} {
		spec, err := layout.ParseFormatSpec(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := synth.Matrix(spec, 300, 1000, 7)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) { hugePagesSame(t, m) })
	}
}

func hugePagesSame(t *testing.T, m layout.Matrix) {
	x := synth.Vector(2*1000, 8)
	var want [2][]float32
	for i, huge := range []bool{false, true} {
		eng, err := qgemv.Open(qgemv.WithHugePages(huge))
		if err != nil {
			t.Fatal(err)
		}
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		for j, act := range []qgemv.Activation{qgemv.A8, qgemv.A32} {
			y := make([]float32, 2*300)
			if err := mat.Mul(y, x, 2, act); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				want[j] = y
				continue
			}
			for k := range y {
				if y[k] != want[j][k] {
					t.Fatalf("%v: huge-page copy differs at %d: %v vs %v", act, k, y[k], want[j][k])
				}
			}
		}
		if err := eng.Close(); err != nil {
			t.Fatal(err)
		}
		if err := mat.Mul(make([]float32, 300), x[:1000], 1, qgemv.A8); !errors.Is(err, qgemv.ErrClosed) {
			t.Fatalf("multiply after engine Close: %v", err)
		}
		if err := mat.Close(); !errors.Is(err, qgemv.ErrClosed) {
			t.Fatalf("second close: %v", err)
		}
	}
}

func TestAPIBadInput(t *testing.T) {
	var unset qgemv.Option // a nil option changes nothing (it panicked)
	eng, err := qgemv.Open(qgemv.WithBackend("cpu-generic"), unset)
	if err != nil {
		t.Fatal(err)
	}
	if eng.Backend() != "cpu-generic" {
		t.Fatalf("backend %s", eng.Backend())
	}
	if _, err := eng.Load(nil); err == nil {
		t.Error("Load(nil) accepted")
	}
	bad, _ := layout.NewQ4G128(4, 4)
	bad.Scales[0] = float32(rand.NormFloat64()) / 0 // +-Inf
	if _, err := eng.Load(bad); err == nil {
		t.Error("Load accepted an infinite scale")
	}
	m, _ := layout.NewQ4G128(4, 130)
	mat, err := eng.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	y, x := make([]float32, 4), make([]float32, 130)
	if err := mat.Mul(y, x, 1, qgemv.Activation(7)); err == nil {
		t.Error("unknown activation accepted")
	}
	if err := mat.MulInt8(y, make([]int8, 130), make([]float32, 2), 1); err == nil {
		t.Error("MulInt8 accepted xq shorter than PCols")
	}
	if err := mat.MulInt8(y, make([]int8, 256), make([]float32, 2), 1); err != nil {
		t.Errorf("MulInt8 with padded xq: %v", err)
	}
	if err := eng.QuantizeA8(make([]int8, 128), make([]float32, 2), x); err == nil {
		t.Error("QuantizeA8 accepted mismatched lengths")
	}
	// Outputs sharing memory with inputs: the last element of one on the
	// first of the other, in both orders.
	buf := make([]float32, 4+130-1)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"Mul dst ends on x", mat.Mul(buf[:4], buf[3:], 1, qgemv.A32)},
		{"Mul x ends on dst", mat.Mul(buf[129:], buf[:130], 1, qgemv.A8)},
		{"MulInt8 dst on xs", mat.MulInt8(buf[:4], make([]int8, 256), buf[3:5], 1)},
		{"QuantizeA8 xs on x", eng.QuantizeA8(make([]int8, 256), buf[129:131], buf[:130])},
	} {
		if !errors.Is(c.err, qgemv.ErrOverlap) {
			t.Errorf("%s: %v, want ErrOverlap", c.name, c.err)
		}
	}
	adj := make([]float32, 4+130)
	if err := mat.Mul(adj[:4], adj[4:], 1, qgemv.A32); err != nil {
		t.Errorf("adjacent dst and x: %v", err)
	}
	// Batches outside 1..16: ErrBatch from every method, whatever the
	// backend (the GPU backends' own error was internal to qgemv).
	for _, b := range []int{0, -1, 17} {
		for name, err := range map[string]error{
			"Mul":     mat.Mul(y, x, b, qgemv.A32),
			"Mul A8":  mat.Mul(y, x, b, qgemv.A8),
			"MulFP16": mat.MulFP16(y, make([]layout.FP16, 130), b),
			"MulInt8": mat.MulInt8(y, make([]int8, 256), make([]float32, 2), b),
		} {
			if !errors.Is(err, qgemv.ErrBatch) {
				t.Errorf("%s batch %d: %v, want ErrBatch", name, b, err)
			}
		}
	}
	if _, err := qgemv.Open(qgemv.WithBackend("nope")); err == nil {
		t.Error("unknown backend opened")
	}
	if _, err := qgemv.Open(qgemv.WithThreads(-2)); err == nil {
		t.Error("negative threads accepted")
	}
	if err := mat.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mat.Mul(y, x, 1, qgemv.A32); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("multiply after Close: %v", err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Load(m); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("Load after Close: %v", err)
	}
	if err := eng.Close(); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("second engine Close: %v", err)
	}
}

// TestLowBitThroughAPI loads Bits and Sparse12 matrices through the public
// API and checks A32, A16 and A8 against the layout references.
func TestLowBitThroughAPI(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const rows, cols = 40, 333
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	opt := layout.QuantOptions{Method: layout.Search, IntegerZero: true}
	b2, err := layout.QuantizeBits(w, rows, cols, 2, 64, opt)
	if err != nil {
		t.Fatal(err)
	}
	sp, _, err := layout.QuantizeSparse12(w, rows, cols, 128, opt)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	x := make([]float32, cols)
	xh := make([]layout.FP16, cols)
	for i := range x {
		xh[i] = layout.ToFP16(float32(rng.NormFloat64()))
		x[i] = xh[i].Float32()
	}
	for _, m := range []interface {
		layout.Matrix
		DotRef([]float64, []float32) error
		DotA8Exact([]float32, []int8, []float32) error
	}{b2, sp} {
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		if mat.Format() != m.Name() {
			t.Errorf("format %s, want %s", mat.Format(), m.Name())
		}
		ref := make([]float64, rows)
		_ = m.DotRef(ref, x)
		y32, y16, y8 := make([]float32, rows), make([]float32, rows), make([]float32, rows)
		if err := mat.Mul(y32, x, 1, qgemv.A32); err != nil {
			t.Fatal(err)
		}
		if err := mat.MulFP16(y16, xh, 1); err != nil {
			t.Fatal(err)
		}
		if err := mat.Mul(y8, x, 1, qgemv.A8); err != nil {
			t.Fatal(err)
		}
		xq, xs := make([]int8, (cols+255)/256*256), make([]float32, (cols+255)/256*2)
		if m.Name() == b2.Name() {
			xq, xs = make([]int8, b2.PCols), make([]float32, b2.PCols/128)
		}
		_ = layout.QuantizeA8(xq, xs, x)
		want8 := make([]float32, rows)
		if err := m.DotA8Exact(want8, xq, xs); err != nil {
			t.Fatal(err)
		}
		for r := range ref {
			if d := float64(y32[r]) - ref[r]; d*d > 1e-6 || y16[r] != y32[r] || y8[r] != want8[r] {
				t.Fatalf("%s row %d: A32 %v, A16 %v, ref %v; A8 %v, exact %v", m.Name(), r, y32[r], y16[r], ref[r], y8[r], want8[r])
			}
		}
	}
}

// TestCodebookAPI loads a codebook matrix and its dequantizing baseline
// through the public API: float activations agree with the reference,
// int8 activations are an error.
func TestCodebookAPI(t *testing.T) {
	spec, err := layout.ParseFormatSpec("cb-m1v4b8g128")
	if err != nil {
		t.Fatal(err)
	}
	c, err := synth.Codebook(spec, 70, 600, 3)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	x := synth.Vector(600, 4)
	ref, mag := make([]float64, 70), make([]float64, 70)
	if err := c.DotRef(ref, x); err != nil {
		t.Fatal(err)
	}
	if err := c.DotRefMag(mag, x); err != nil {
		t.Fatal(err)
	}
	for _, m := range []layout.Matrix{c, codebook.Baseline{Codebook: c}} {
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		y := make([]float32, 70)
		if err := mat.Mul(y, x, 1, qgemv.A32); err != nil {
			t.Fatal(err)
		}
		for r := range y {
			if d := math.Abs(float64(y[r]) - ref[r]); d > 2*codebook.ToleranceF16*mag[r] {
				t.Fatalf("%s (%s): row %d = %v, want %v", m.Name(), mat.Kernel(), r, y[r], ref[r])
			}
		}
		if err := mat.Mul(y, x, 1, qgemv.A8); err == nil {
			t.Fatalf("%s: A8 did not fail", m.Name())
		}
	}
	var nilCB *codebook.Codebook
	if _, err := eng.Load(codebook.Baseline{Codebook: nilCB}); err == nil {
		t.Fatal("nil codebook loaded")
	}
}

// TestEngineCloseRacingMatrixClose: Engine.Close succeeds while another
// goroutine closes its matrices (a matrix closed by the caller after the
// engine's snapshot was reported as ErrClosed: 12 of 2000 first closes).
func TestEngineCloseRacingMatrixClose(t *testing.T) {
	m, err := synth.Q4G128(128, 128, 1)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2000; round++ {
		eng, err := qgemv.Open(qgemv.WithBackend("cpu-generic"))
		if err != nil {
			t.Fatal(err)
		}
		mats := make([]*qgemv.Matrix, 64)
		for i := range mats {
			if mats[i], err = eng.Load(m); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, mx := range mats {
				mx.Close() // ErrClosed once the engine got there first: fine
			}
		}()
		if err := eng.Close(); err != nil {
			t.Fatalf("round %d: Engine.Close: %v", round, err)
		}
		<-done
	}
}

// TestReportString: the engine's report names the chosen backend and its
// reason, marks it in the list, and formats as dispatch's does; Probe's,
// which selects none, has no "chosen" line.
func TestReportString(t *testing.T) {
	e, err := qgemv.Open(qgemv.WithBackend("cpu-generic"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := e.Report().String()
	if !strings.Contains(s, "chosen:    cpu-generic (") || !strings.Contains(s, "* cpu-generic ") {
		t.Errorf("engine report does not show its choice:\n%s", s)
	}
	p := qgemv.Probe()
	ps := p.String()
	if strings.Contains(ps, "chosen:") || !strings.Contains(ps, "cpu-generic") || !strings.HasPrefix(ps, "cpu:       "+p.CPU) {
		t.Errorf("probe report:\n%s", ps)
	}
	if got, want := ps, dispatch.Probe().String(); got != want {
		t.Errorf("Probe().String() = %q, dispatch's %q", got, want)
	}
}
