package qgemv_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
)

// loadNamed loads the synth matrix of a format spec, shape and seed.
func loadNamed(t *testing.T, e *qgemv.Engine, name string, rows, cols int, seed uint64) *qgemv.Matrix {
	t.Helper()
	m, err := synth.Named(name, rows, cols, seed)
	if err != nil {
		t.Fatal(err)
	}
	mat, err := e.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	return mat
}

func newBuf(t *testing.T, e *qgemv.Engine, n int, typ qgemv.ElemType) *qgemv.Buffer {
	t.Helper()
	b, err := e.NewBuffer(n, typ)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBufferMulMatchesMul: on every format and batch bucket, MulBuffer
// gives Mul's bits for A8 and A32 and Mul's A16 result within 1e-5 of
// its largest value (a device rounds and orders the activations itself;
// the block sums of the tensor-core kernels may add in another order),
// and one QuantizeBuffer shared by MulInt8Buffer gives Mul's A8 bits,
// act-order matrices included.
func TestBufferMulMatchesMul(t *testing.T) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	const rows, cols, maxBatch = 70, 600, 16
	perm, err := layout.RandomBits(rows, cols, 4, 128, 9)
	if err != nil {
		t.Fatal(err)
	}
	perm.Perm = make([]int32, cols)
	for i, p := range rand.New(rand.NewPCG(1, 1)).Perm(cols) {
		perm.Perm[i] = int32(p)
	}
	ms := []layout.Matrix{perm}
	for _, name := range []string{"q4g128", "bits4g128", "bits8g128", "bits2g128", "bits3g128", "bits2g64", "bits4row",
		"sparse12g128", "sparse12row", "cb-m1v4b8g128", "ans4g128"} {
		m, err := synth.Named(name, rows, cols, 3)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	x := synth.Vector(maxBatch*cols, 5)
	xb, yb := newBuf(t, eng, maxBatch*cols, qgemv.Float32), newBuf(t, eng, maxBatch*rows, qgemv.Float32)
	if err := xb.Write(x); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, batch := range []int{1, 3, 9, 16} {
			for _, act := range []qgemv.Activation{qgemv.A32, qgemv.A16, qgemv.A8} {
				want := make([]float32, batch*rows)
				err := mat.Mul(want, x[:batch*cols], batch, act)
				if errors.Is(err, qgemv.ErrFormatNotImplemented) {
					if err2 := mat.MulBuffer(yb, xb, batch, act); !errors.Is(err2, qgemv.ErrFormatNotImplemented) {
						t.Errorf("%s %v: Mul %v, MulBuffer %v", m.Name(), act, err, err2)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := mat.MulBuffer(yb, xb, batch, act); err != nil {
					t.Fatalf("%s %v: %v", m.Name(), act, err)
				}
				got := make([]float32, batch*rows)
				if err := yb.Read(got); err != nil {
					t.Fatal(err)
				}
				if act == qgemv.A16 {
					var top, worst float64
					for i := range want {
						top = max(top, math.Abs(float64(want[i])))
						worst = max(worst, math.Abs(float64(got[i]-want[i])))
					}
					if worst > 1e-5*top {
						t.Fatalf("%s A16 batch %d: MulBuffer differs from Mul by %g (largest value %g)", m.Name(), batch, worst, top)
					}
					continue
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s %v batch %d: MulBuffer differs from Mul", m.Name(), act, batch)
				}
				if act != qgemv.A8 {
					continue
				}
				pc := mat.PaddedCols()
				xq, xs := newBuf(t, eng, batch*pc, qgemv.Int8), newBuf(t, eng, batch*pc/128, qgemv.Float32)
				if err := mat.QuantizeBuffer(xq, xs, xb, batch); err != nil {
					t.Fatal(err)
				}
				if err := mat.MulInt8Buffer(yb, xq, xs, batch); err != nil {
					t.Fatal(err)
				}
				if err := yb.Read(got); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s batch %d: QuantizeBuffer + MulInt8Buffer differ from Mul A8", m.Name(), batch)
				}
				wq, ws := make([]int8, batch*pc), make([]float32, batch*pc/128)
				gq, gs := make([]int8, batch*pc), make([]float32, batch*pc/128)
				for v := 0; v < batch && m == layout.Matrix(ms[1]); v++ { // no permutation: QuantizeA8 is the reference
					if err := layout.QuantizeA8(wq[v*pc:(v+1)*pc], ws[v*pc/128:(v+1)*pc/128], x[v*cols:(v+1)*cols]); err != nil {
						t.Fatal(err)
					}
				}
				if err := xq.ReadInt8(gq); err != nil {
					t.Fatal(err)
				}
				if err := xs.Read(gs); err != nil {
					t.Fatal(err)
				}
				if m == layout.Matrix(ms[1]) && (!slices.Equal(gq, wq) || !slices.Equal(gs, ws)) {
					t.Fatalf("%s batch %d: QuantizeBuffer differs from layout.QuantizeA8", m.Name(), batch)
				}
				xq.Close()
				xs.Close()
			}
		}
	}
}

// TestBufferFFNAndReplay: an FFN block on buffers (gate and up sharing
// one quantization, SwiGLU, down, a residual Add), recorded once and
// replayed for new inputs, equals the same block computed with host
// slices.
func TestBufferFFNAndReplay(t *testing.T) {
	const H, I = 256, 640
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	load := func(rows, cols int, seed uint64) *qgemv.Matrix {
		return loadNamed(t, eng, "bits4g128", rows, cols, seed)
	}
	gate, up, down := load(I, H, 1), load(I, H, 2), load(H, I, 3)
	x := newBuf(t, eng, H, qgemv.Float32)
	xq, xs := newBuf(t, eng, gate.PaddedCols(), qgemv.Int8), newBuf(t, eng, gate.PaddedCols()/128, qgemv.Float32)
	g, u := newBuf(t, eng, I, qgemv.Float32), newBuf(t, eng, I, qgemv.Float32)
	y := newBuf(t, eng, H, qgemv.Float32)
	seq, err := eng.Record(func() error {
		if err := gate.QuantizeBuffer(xq, xs, x, 1); err != nil {
			return err
		}
		if err := gate.MulInt8Buffer(g, xq, xs, 1); err != nil {
			return err
		}
		if err := up.MulInt8Buffer(u, xq, xs, 1); err != nil {
			return err
		}
		if err := eng.SwiGLU(g, g, u); err != nil {
			return err
		}
		if err := down.MulBuffer(y, g, 1, qgemv.A8); err != nil {
			return err
		}
		return eng.Add(y, y, x)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	if seq.Len() != 6 {
		t.Fatalf("%d operations recorded, want 6", seq.Len())
	}
	for step := uint64(0); step < 4; step++ {
		if step == 2 {
			// Multiplies wider than the block's move the CUDA backend's
			// scratch memory: a graph captured before must not be
			// launched on the freed memory.
			wide := load(64, 4096, 4)
			xw, yw := synth.Vector(16*4096, 5), make([]float32, 16*64)
			for _, act := range []qgemv.Activation{qgemv.A8, qgemv.A16} {
				if err := wide.Mul(yw, xw, 16, act); err != nil {
					t.Fatal(err)
				}
			}
		}
		in := synth.Vector(H, 10+step)
		if err := x.Write(in); err != nil {
			t.Fatal(err)
		}
		if err := seq.Run(); err != nil {
			t.Fatal(err)
		}
		if err := eng.Wait(); err != nil {
			t.Fatal(err)
		}
		got, gd, ud := make([]float32, H), make([]float32, I), make([]float32, I)
		for _, r := range []struct {
			b   *qgemv.Buffer
			dst []float32
		}{{y, got}, {g, gd}, {u, ud}} {
			if err := r.b.Read(r.dst); err != nil {
				t.Fatal(err)
			}
		}
		// up's output is Mul's, bit for bit; SwiGLU within 4 ulps of the
		// float64 formula (devices use their exp); down and the residual
		// exact on SwiGLU's output as the buffer holds it.
		gh, uh, want := make([]float32, I), make([]float32, I), make([]float32, H)
		if err := gate.Mul(gh, in, 1, qgemv.A8); err != nil {
			t.Fatal(err)
		}
		if err := up.Mul(uh, in, 1, qgemv.A8); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ud, uh) {
			t.Fatalf("step %d: up's output differs from Mul", step)
		}
		for i := range gh {
			h := gh[i] / (1 + float32(math.Exp(float64(-gh[i])))) * uh[i]
			if d := math.Abs(float64(gd[i] - h)); d > 4*ulp(h) {
				t.Fatalf("step %d: SwiGLU %d = %v, want %v", step, i, gd[i], h)
			}
		}
		if err := down.Mul(want, gd, 1, qgemv.A8); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if want[i] += in[i]; got[i] != want[i] {
				t.Fatalf("step %d: output %d = %v, want %v", step, i, got[i], want[i])
			}
		}
		// CUDA captures the sequence as a graph on its first Run.
		if strings.HasPrefix(eng.Backend(), "cuda") && !seq.Graphed() {
			t.Fatalf("step %d: the sequence was not captured as a CUDA graph", step)
		}
	}
}

// ulp returns the spacing of float32 values at v.
func ulp(v float32) float64 {
	a := math.Abs(float64(v))
	return float64(math.Nextafter32(float32(a), float32(math.Inf(1)))) - a
}

// TestBufferChain: the MatVANS chain as buffer operations
// (MulInt32Buffer and Requantize), recorded and replayed, gives the
// reference hash.
func TestBufferChain(t *testing.T) {
	const d = 256
	wl, err := matvans.New(d, 3, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	v, y := newBuf(t, eng, d, qgemv.Int8), newBuf(t, eng, d, qgemv.Int32)
	load := func(kind string, i int, corrupt bool) *qgemv.Matrix {
		var m layout.Matrix
		if kind == "int8" {
			m, err = layout.NewInt8(wl.W[i], d, d)
		} else {
			var am *ans.Matrix
			if am, err = ans.Encode(wl.W[i], d, d, ans.WarpRows); err == nil && corrupt {
				am.Words[0], am.Words[1] = 0, 0 // the first unit's state
			}
			m = am
		}
		if err != nil {
			t.Fatal(err)
		}
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		return mat
	}
	record := func(mats []*qgemv.Matrix) *qgemv.Sequence {
		seq, err := eng.Record(func() error {
			for i, m := range mats {
				if err := m.MulInt32Buffer(y, v, 1); err != nil {
					return err
				}
				if err := eng.Requantize(v, y, wl.Alpha[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	// On CUDA the second and later runs launch a graph: the hash and the
	// corrupt stream's report must not change.
	for _, kind := range []string{"int8", "ans"} {
		var mats []*qgemv.Matrix
		for i := range wl.W {
			mats = append(mats, load(kind, i, false))
		}
		seq := record(mats)
		for run := 0; run < 3; run++ {
			if err := v.WriteInt8(wl.V0); err != nil {
				t.Fatal(err)
			}
			if err := seq.Run(); err != nil {
				t.Fatal(err)
			}
			out := make([]int8, d)
			if err := v.ReadInt8(out); err != nil {
				t.Fatal(err)
			}
			if h, want := matvans.Hash(out), matvans.Hash(wl.Ref); h != want {
				t.Fatalf("%s run %d: hash %08x, want %08x", kind, run, h, want)
			}
			if run > 0 && strings.HasPrefix(eng.Backend(), "cuda") && !seq.Graphed() {
				t.Fatalf("%s run %d: the chain was not captured as a CUDA graph", kind, run)
			}
		}
		if kind == "ans" {
			mats[len(mats)-1] = load(kind, len(mats)-1, true)
			bad := record(mats)
			for run := 0; run < 3; run++ {
				if err := v.WriteInt8(wl.V0); err != nil {
					t.Fatal(err)
				}
				// The CPU reports it from the multiply, GPUs from the
				// next read.
				err := bad.Run()
				if err == nil {
					err = v.ReadInt8(make([]int8, d))
				}
				if !errors.Is(err, ans.ErrCorrupt) {
					t.Fatalf("corrupt stream, run %d: %v", run, err)
				}
			}
		}
	}
}

// TestBufferBadInput: wrong element types, short buffers, a buffer of
// another engine, closed buffers, matrices and engines, bad batches,
// overlaps and bad scales are errors; a failed operation inside Record
// fails the recording.
func TestBufferBadInput(t *testing.T) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	other, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	m, _ := layout.RandomQ4G128(20, 300, 1)
	mat, err := eng.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	x, y := newBuf(t, eng, 300, qgemv.Float32), newBuf(t, eng, 20, qgemv.Float32)
	i8, i32 := newBuf(t, eng, 384, qgemv.Int8), newBuf(t, eng, 20, qgemv.Int32)
	short := newBuf(t, eng, 299, qgemv.Float32)
	foreign := newBuf(t, other, 300, qgemv.Float32)
	if _, err := eng.NewBuffer(0, qgemv.Float32); err == nil {
		t.Error("a buffer of 0 elements")
	}
	if _, err := eng.NewBuffer(4, qgemv.ElemType(9)); err == nil {
		t.Error("an unknown element type")
	}
	for name, err := range map[string]error{
		"x of another engine": mat.MulBuffer(y, foreign, 1, qgemv.A32),
		"short x":             mat.MulBuffer(y, short, 1, qgemv.A32),
		"int8 x":              mat.MulBuffer(y, i8, 1, qgemv.A32),
		"batch 0":             mat.MulBuffer(y, x, 0, qgemv.A32),
		"batch 2, x short":    mat.MulBuffer(y, x, 2, qgemv.A8),
		"dst is x":            mat.MulBuffer(x, x, 1, qgemv.A32),
		"unknown activation":  mat.MulBuffer(y, x, 1, qgemv.Activation(5)),
		"int32 on q4g128":     mat.MulInt32Buffer(i32, i8, 1),
		"quantize into float": mat.QuantizeBuffer(x, y, x, 1),
		"swiglu on int8":      eng.SwiGLU(i8, x, x),
		"add short input":     eng.Add(x, short, x),
		"requantize NaN":      eng.Requantize(i8, i32, float32(math.NaN())),
		"write too long":      y.Write(make([]float32, 21)),
		"read int8 of float":  x.ReadInt8(make([]int8, 4)),
		"nil buffer":          eng.Scale(nil, x, 2),
		"swiglu nil up":       eng.SwiGLU(y, y, nil),
		"add nil b":           eng.Add(x, x, nil),
		"scale nil input":     eng.Scale(x, nil, 2),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := eng.Record(func() error { return mat.MulBuffer(y, short, 1, qgemv.A32) }); err == nil {
		t.Error("a recording with a bad operation succeeded")
	}
	if _, err := eng.Record(func() error { return nil }); err == nil {
		t.Error("an empty recording succeeded")
	}
	seq, err := eng.Record(func() error { return mat.MulBuffer(y, x, 1, qgemv.A16) })
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // on CUDA: queued and captured, then the graph launched
		if err := seq.Run(); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := seq.Run(); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("replay with a closed buffer: %v", err)
	}
	if err := x.Write(make([]float32, 3)); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("write to a closed buffer: %v", err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if err := y.Read(make([]float32, 20)); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("read after the engine closed: %v", err)
	}
	if _, err := eng.NewBuffer(4, qgemv.Float32); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("new buffer on a closed engine: %v", err)
	}
}

// TestBufferQuantizeEdges: QuantizeBuffer equals layout.QuantizeA8Go on
// the edges of its arithmetic (zero groups, amax below 2^-100, subnormals,
// the largest floats, ties of the rounding, one-value groups), and Scale,
// Add and Requantize equal their host formulas exactly. A NaN reaching
// QuantizeBuffer is an error, from the call or from the next Wait (not
// from an operation queued in between).
func TestBufferQuantizeEdges(t *testing.T) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	const cols = 1024
	mat := loadNamed(t, eng, "bits4g128", 8, cols, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, cols)
	for g := 0; g < cols/128; g++ {
		for i := g * 128; i < (g+1)*128; i++ {
			switch g {
			case 0: // zeros
			case 1:
				x[i] = float32(rng.NormFloat64()) * 1e-33 // amax below 2^-100
			case 2:
				x[i] = math.Float32frombits(uint32(rng.IntN(1 << 23))) // subnormals
			case 3:
				x[i] = float32(rng.NormFloat64()) * 1e37
			case 4:
				x[i] = float32(i%255-127) + 0.5 // amax 127.5: ties after scaling
			case 5:
				if i == g*128+7 {
					x[i] = -3
				}
			default:
				x[i] = float32(rng.NormFloat64())
			}
		}
	}
	x[5*128+9] = math.MaxFloat32
	pc := mat.PaddedCols()
	wq, ws := make([]int8, pc), make([]float32, pc/128)
	if err := layout.QuantizeA8Go(wq, ws, x); err != nil {
		t.Fatal(err)
	}
	xb, xq, xs := newBuf(t, eng, cols, qgemv.Float32), newBuf(t, eng, pc, qgemv.Int8), newBuf(t, eng, pc/128, qgemv.Float32)
	if err := xb.Write(x); err != nil {
		t.Fatal(err)
	}
	if err := mat.QuantizeBuffer(xq, xs, xb, 1); err != nil {
		t.Fatal(err)
	}
	gq, gs := make([]int8, pc), make([]float32, pc/128)
	if err := xq.ReadInt8(gq); err != nil {
		t.Fatal(err)
	}
	if err := xs.Read(gs); err != nil {
		t.Fatal(err)
	}
	for i := range wq {
		if gq[i] != wq[i] {
			t.Fatalf("value %d (%v): %d, want %d", i, x[i], gq[i], wq[i])
		}
	}
	for g := range ws {
		if math.Float32bits(gs[g]) != math.Float32bits(ws[g]) {
			t.Fatalf("scale %d: %v, want %v", g, gs[g], ws[g])
		}
	}

	// Scale, Add, Requantize.
	a := synth.Vector(cols, 8)
	ab, yb := newBuf(t, eng, cols, qgemv.Float32), newBuf(t, eng, cols, qgemv.Float32)
	if err := ab.Write(a); err != nil {
		t.Fatal(err)
	}
	if err := eng.Scale(yb, ab, 0.37); err != nil {
		t.Fatal(err)
	}
	if err := eng.Add(yb, yb, ab); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, cols)
	if err := yb.Read(got); err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if want := float32(0.37)*a[i] + a[i]; got[i] != want {
			t.Fatalf("scale and add %d: %v, want %v", i, got[i], want)
		}
	}
	y32 := make([]int32, cols)
	for i := range y32 {
		y32[i] = int32(rng.Uint32())
	}
	y32[0], y32[1], y32[2] = 5, -5, 15 // ties at alpha 0.5, 0.1
	ib, vb := newBuf(t, eng, cols, qgemv.Int32), newBuf(t, eng, cols, qgemv.Int8)
	i32 := make([]int32, cols)
	copy(i32, y32)
	for _, alpha := range []float32{0.5, 0.1, 3e-9, 1e30} {
		if err := ib.WriteInt32(i32); err != nil {
			t.Fatal(err)
		}
		if err := eng.Requantize(vb, ib, alpha); err != nil {
			t.Fatal(err)
		}
		gv, wv := make([]int8, cols), make([]int8, cols)
		if err := vb.ReadInt8(gv); err != nil {
			t.Fatal(err)
		}
		if err := layout.Requantize(wv, i32, alpha); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(gv, wv) {
			t.Fatalf("requantize alpha %v differs from layout.Requantize", alpha)
		}
	}

	// A NaN: an error now or at the next Wait, and the engine goes on.
	x[300] = float32(math.NaN())
	if err := xb.Write(x); err != nil {
		t.Fatal(err)
	}
	err = mat.QuantizeBuffer(xq, xs, xb, 1)
	if err == nil { // queued: the fault is the next Wait's, not an operation's in between
		y8 := newBuf(t, eng, 8, qgemv.Float32)
		if err := mat.MulBuffer(y8, ab, 1, qgemv.A32); err != nil {
			t.Fatalf("an operation after the NaN's quantization: %v", err)
		}
		err = eng.Wait()
	}
	if err == nil {
		t.Fatal("a NaN activation quantized without an error")
	}
	if err := eng.Wait(); err != nil {
		t.Fatalf("the NaN's error was reported twice: %v", err)
	}
	x[300] = 1
	if err := xb.Write(x); err != nil {
		t.Fatal(err)
	}
	if err := mat.QuantizeBuffer(xq, xs, xb, 1); err != nil {
		t.Fatal(err)
	}
	if err := eng.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestBufferDeviceMemoryExhausted: on a device backend, buffers past the
// device's memory are an error, and the engine keeps working.
func TestBufferDeviceMemoryExhausted(t *testing.T) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if !strings.HasPrefix(eng.Backend(), "cuda") {
		t.Skip("buffers are host memory on", eng.Backend())
	}
	var held []*qgemv.Buffer
	for len(held) < 128 { // 4 GiB each: 512 GiB in all, past any device
		b, err := eng.NewBuffer(1<<30, qgemv.Float32)
		if err != nil {
			t.Logf("buffer %d: %v", len(held), err)
			break
		}
		held = append(held, b)
	}
	if len(held) == 128 {
		t.Fatal("512 GiB of device buffers allocated")
	}
	if len(held) == 0 {
		t.Fatal("not even one 4 GiB buffer allocated")
	}
	for _, b := range held {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b := newBuf(t, eng, 100, qgemv.Float32)
	in, out := synth.Vector(100, 1), make([]float32, 100)
	if err := b.Write(in); err != nil {
		t.Fatal(err)
	}
	if err := b.Read(out); err != nil || !slices.Equal(in, out) {
		t.Fatalf("after running out of memory: %v", err)
	}
}

// TestMulA16: Mul with A16 is MulFP16 of the activations rounded to
// binary16, bit for bit, and a short x is an error.
func TestMulA16(t *testing.T) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	x := synth.Vector(2*384, 3)
	// values whose rounding to binary16 is delicate (a device backend
	// rounds on the device): ties to even, binary16 subnormals and
	// underflow, the largest finite binary16 and values just below it
	for i, v := range []float32{1 + 0x1p-11, 1 + 3*0x1p-11, -(2 + 0x1p-10), 0x1p-20, -0x1.8p-24, 0x1p-26, 65504, 65519, -3.0000002, 1e-8} {
		x[37*i+5] = v
	}
	xh := make([]layout.FP16, len(x))
	for i, v := range x {
		xh[i] = layout.ToFP16(v)
	}
	var mat *qgemv.Matrix
	for _, name := range []string{"bits4g128", "q4g128", "bits8g128", "sparse12g128"} {
		mat = loadNamed(t, eng, name, 40, 384, 2)
		got, want := make([]float32, 80), make([]float32, 80)
		if err := mat.Mul(got, x, 2, qgemv.A16); err != nil {
			t.Fatal(err)
		}
		if err := mat.MulFP16(want, xh, 2); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: Mul A16 differs from MulFP16 of the rounded activations", name)
		}
	}
	if err := mat.Mul(make([]float32, 80), x[:700], 2, qgemv.A16); err == nil {
		t.Fatal("a short x accepted")
	}
	if s := qgemv.A16.String(); s != "A16" {
		t.Fatalf("A16.String() = %q", s)
	}
}

// TestReadTime: the CUDA backend times its read kernel; the others say
// they have none.
func TestReadTime(t *testing.T) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d, err := eng.ReadTime(16<<20, 10)
	if strings.HasPrefix(eng.Backend(), "cuda") {
		if err != nil || d <= 0 {
			t.Fatalf("ReadTime: %v, %v", d, err)
		}
		if _, err := eng.ReadTime(1000, 10); err == nil {
			t.Error("ReadTime accepted 1000 bytes")
		}
	} else if err == nil {
		t.Errorf("%s: ReadTime returned %v and no error", eng.Backend(), d)
	}
}

// TestSequenceHostRun: a sequence with an operation that has no device
// kernel on GPUs (A32 multiplies run on host copies) replays correctly:
// on CUDA its capture as a graph fails and it keeps queueing the
// operations.
func TestSequenceHostRun(t *testing.T) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	mat := loadNamed(t, eng, "q4g128", 256, 512, 1)
	x, y, z := newBuf(t, eng, 512, qgemv.Float32), newBuf(t, eng, 256, qgemv.Float32), newBuf(t, eng, 256, qgemv.Float32)
	seq, err := eng.Record(func() error {
		if err := mat.MulBuffer(y, x, 1, qgemv.A32); err != nil {
			return err
		}
		return eng.Scale(z, y, 2)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	for step := uint64(0); step < 3; step++ {
		in := synth.Vector(512, 20+step)
		if err := x.Write(in); err != nil {
			t.Fatal(err)
		}
		if err := seq.Run(); err != nil {
			t.Fatal(err)
		}
		got, want := make([]float32, 256), make([]float32, 256)
		if err := z.Read(got); err != nil {
			t.Fatal(err)
		}
		if err := mat.Mul(want, in, 1, qgemv.A32); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != 2*want[i] {
				t.Fatalf("step %d: output %d = %v, want %v", step, i, got[i], 2*want[i])
			}
		}
	}
}

// TestSequenceReplayState: what the host keeps about device state stays
// right across graph launches (CUDA): SplitK counters zeroed by another
// matrix's multiply between launches, and a NaN met by a replayed
// quantization after a host-run operation read the status.
func TestSequenceReplayState(t *testing.T) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	load := func(rows, cols int, seed uint64) *qgemv.Matrix { return loadNamed(t, eng, "q4g128", rows, cols, seed) }
	// Many row tiles (more SplitK counters) and few.
	a, b := load(2048, 4096, 1), load(512, 4096, 2)
	x, y := newBuf(t, eng, 4096, qgemv.Float32), newBuf(t, eng, 2048, qgemv.Float32)
	seq, err := eng.Record(func() error { return a.MulBuffer(y, x, 1, qgemv.A16) })
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	yb := make([]float32, 512)
	for step := uint64(0); step < 4; step++ {
		in := synth.Vector(4096, 30+step)
		if step > 1 { // between launches: b's partials where a's counters lie
			if err := b.Mul(yb, in, 1, qgemv.A16); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.Write(in); err != nil {
			t.Fatal(err)
		}
		if err := seq.Run(); err != nil {
			t.Fatal(err)
		}
		got, want := make([]float32, 2048), make([]float32, 2048)
		if err := y.Read(got); err != nil {
			t.Fatal(err)
		}
		if err := a.Mul(want, in, 1, qgemv.A16); err != nil {
			t.Fatal(err)
		}
		var top, worst float64 // A16 paths may round differently (TestBufferMulMatchesMul)
		for i := range want {
			top = max(top, math.Abs(float64(want[i])))
			worst = max(worst, math.Abs(float64(got[i]-want[i])))
		}
		if worst > 1e-5*top {
			t.Fatalf("step %d: the replayed multiply differs from Mul by %g (largest value %g)", step, worst, top)
		}
	}

	xq, xs := newBuf(t, eng, 4096, qgemv.Int8), newBuf(t, eng, 32, qgemv.Float32)
	z := newBuf(t, eng, 512, qgemv.Float32)
	quant, err := eng.Record(func() error { return a.QuantizeBuffer(xq, xs, x, 1) })
	if err != nil {
		t.Fatal(err)
	}
	defer quant.Close()
	in := synth.Vector(4096, 40)
	for range 2 {
		if err := x.Write(in); err != nil {
			t.Fatal(err)
		}
		if err := quant.Run(); err != nil {
			t.Fatal(err)
		}
	}
	// A host run (A32 has no device kernel on GPUs) reads the buffers,
	// and the status word with them, before the NaN is quantized.
	if err := b.MulBuffer(z, x, 1, qgemv.A32); err != nil {
		t.Fatal(err)
	}
	in[100] = float32(math.NaN())
	if err := x.Write(in); err != nil {
		t.Fatal(err)
	}
	err = quant.Run()
	if err == nil {
		err = eng.Wait()
	}
	if err == nil {
		t.Fatal("a NaN quantized by a replayed sequence was not reported")
	}
}

// TestBufferSharedInputOrder: multiplies reading one input buffer may
// share its preparation on a GPU (the gather, or the int8 reordering), so
// what writes that buffer in between must be seen: here a multiply whose
// output is the input of the next ones, of the other activation type
// (A8 into the buffer a binary16 multiply read) and of the same. Each
// result must equal the same multiply of the same values written fresh,
// bit for bit, and run the same in a recorded sequence.
func TestBufferSharedInputOrder(t *testing.T) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	const n = 384
	for _, name := range []string{"q4g128", "bits4g128"} {
		t.Run(name, func(t *testing.T) {
			a, a2 := loadNamed(t, eng, name, n, n, 1), loadNamed(t, eng, name, n, n, 2)
			b := loadNamed(t, eng, name, n, n, 3)
			x, x0 := newBuf(t, eng, n, qgemv.Float32), newBuf(t, eng, n, qgemv.Float32)
			xq, xs := newBuf(t, eng, b.PaddedCols(), qgemv.Int8), newBuf(t, eng, b.PaddedCols()/128, qgemv.Float32)
			y1, y2, y3, y4 := newBuf(t, eng, n, qgemv.Float32), newBuf(t, eng, n, qgemv.Float32), newBuf(t, eng, n, qgemv.Float32), newBuf(t, eng, n, qgemv.Float32)
			ops := func() error {
				for _, op := range []func() error{
					func() error { return b.QuantizeBuffer(xq, xs, x0, 1) },
					func() error { return a.MulBuffer(y1, x, 1, qgemv.A16) },
					func() error { return a2.MulBuffer(y2, x, 1, qgemv.A16) }, // same input, same order
					func() error { return a.MulInt8Buffer(y3, xq, xs, 1) },
					func() error { return b.MulInt8Buffer(x, xq, xs, 1) }, // overwrites x
					func() error { return a.MulBuffer(y4, x, 1, qgemv.A16) },
					func() error { return a2.MulBuffer(x, y4, 1, qgemv.A16) }, // overwrites x
					func() error { return a.MulBuffer(y1, x, 1, qgemv.A16) },
				} {
					if err := op(); err != nil {
						return err
					}
				}
				return nil
			}
			in := synth.Vector(n, 5)
			in0 := synth.Vector(n, 6)
			read := func(b *qgemv.Buffer) []float32 {
				v := make([]float32, n)
				if err := b.Read(v); err != nil {
					t.Fatal(err)
				}
				return v
			}
			// fresh: the multiply of values written just before it
			fresh := func(m *qgemv.Matrix, v []float32) []float32 {
				f, out := newBuf(t, eng, n, qgemv.Float32), newBuf(t, eng, n, qgemv.Float32)
				defer f.Close()
				defer out.Close()
				if err := f.Write(v); err != nil {
					t.Fatal(err)
				}
				if err := m.MulBuffer(out, f, 1, qgemv.A16); err != nil {
					t.Fatal(err)
				}
				return read(out)
			}
			seq, err := eng.Record(ops)
			if err != nil {
				t.Fatal(err)
			}
			defer seq.Close()
			for run := 0; run < 3; run++ { // eager, then recorded twice
				if err := x.Write(in); err != nil {
					t.Fatal(err)
				}
				if err := x0.Write(in0); err != nil {
					t.Fatal(err)
				}
				if run == 0 {
					err = ops()
				} else {
					err = seq.Run()
				}
				if err != nil {
					t.Fatal(err)
				}
				got2, got3, got4, got1 := read(y2), read(y3), read(y4), read(y1)
				bx, ax0 := make([]float32, n), make([]float32, n) // b's output, the input of y4
				if err := b.Mul(bx, in0, 1, qgemv.A8); err != nil {
					t.Fatal(err)
				}
				if err := a.Mul(ax0, in0, 1, qgemv.A8); err != nil {
					t.Fatal(err)
				}
				ax := fresh(a2, got4) // a2's output, the input of y1
				for _, c := range []struct {
					what      string
					got, want []float32
				}{
					{"second matrix on the shared input", got2, fresh(a2, in)},
					{"int8 multiply", got3, ax0},
					{"after an int8 multiply wrote the input", got4, fresh(a, bx)},
					{"after a binary16 multiply wrote the input", got1, fresh(a, ax)},
				} {
					for i := range c.want {
						if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
							t.Fatalf("run %d, %s: y[%d] = %v, want %v", run, c.what, i, c.got[i], c.want[i])
						}
					}
				}
			}
		})
	}
}
