package qgemv_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

func newBuf(t *testing.T, e *qgemv.Engine, n int, typ qgemv.ElemType) *qgemv.Buffer {
	t.Helper()
	b, err := e.NewBuffer(n, typ)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBufferMulMatchesMul: on every format, MulBuffer gives Mul's bits
// (A8 and A32), and one QuantizeBuffer shared by MulInt8Buffer gives
// Mul's A8 bits, act-order matrices included.
func TestBufferMulMatchesMul(t *testing.T) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	const rows, cols, batch = 70, 600, 3
	perm, err := layout.RandomBits(rows, cols, 4, 128, 9)
	if err != nil {
		t.Fatal(err)
	}
	perm.Perm = make([]int32, cols)
	for i, p := range rand.New(rand.NewPCG(1, 1)).Perm(cols) {
		perm.Perm[i] = int32(p)
	}
	ms := []layout.Matrix{perm}
	for _, name := range []string{"q4g128", "bits4g128", "bits2g64", "sparse12g128", "cb-m1v4b8g128", "ans4g128"} {
		m, err := synth.Named(name, rows, cols, 3)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	x := synth.Vector(batch*cols, 5)
	xb, yb := newBuf(t, eng, batch*cols, qgemv.Float32), newBuf(t, eng, batch*rows, qgemv.Float32)
	if err := xb.Write(x); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, act := range []qgemv.Activation{qgemv.A32, qgemv.A8} {
			want := make([]float32, batch*rows)
			err := mat.Mul(want, x, batch, act)
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
			if !slices.Equal(got, want) {
				t.Fatalf("%s %v: MulBuffer differs from Mul", m.Name(), act)
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
				t.Fatalf("%s: QuantizeBuffer + MulInt8Buffer differ from Mul A8", m.Name())
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
		m, err := synth.Named("bits4g128", rows, cols, seed)
		if err != nil {
			t.Fatal(err)
		}
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		return mat
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
	for step := uint64(0); step < 3; step++ {
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
		got := make([]float32, H)
		if err := y.Read(got); err != nil {
			t.Fatal(err)
		}
		gh, uh, hh, want := make([]float32, I), make([]float32, I), make([]float32, I), make([]float32, H)
		if err := gate.Mul(gh, in, 1, qgemv.A8); err != nil {
			t.Fatal(err)
		}
		if err := up.Mul(uh, in, 1, qgemv.A8); err != nil {
			t.Fatal(err)
		}
		for i := range hh {
			hh[i] = gh[i] / (1 + float32(math.Exp(float64(-gh[i])))) * uh[i]
		}
		if err := down.Mul(want, hh, 1, qgemv.A8); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if want[i] += in[i]; got[i] != want[i] {
				t.Fatalf("step %d: output %d = %v, want %v", step, i, got[i], want[i])
			}
		}
	}
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
	var mats []*qgemv.Matrix
	for _, w := range wl.W {
		m, err := layout.NewInt8(w, d, d)
		if err != nil {
			t.Fatal(err)
		}
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		mats = append(mats, mat)
	}
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
	for run := 0; run < 2; run++ {
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
			t.Fatalf("run %d: hash %08x, want %08x", run, h, want)
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
	seq, err := eng.Record(func() error { return mat.MulBuffer(y, x, 1, qgemv.A32) })
	if err != nil {
		t.Fatal(err)
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
