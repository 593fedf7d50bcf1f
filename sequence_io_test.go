package qgemv_test

import (
	"errors"
	"math"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
)

// TestSequenceRunIO: RunIO gives, bit for bit, what Write, Run and Read
// give with the same sequence (on CUDA from its second call a graph
// that copies the input and output itself) and leaves the input buffer
// holding the input, across changes of the
// lengths copied, a buffer freed between steps (the graph captured
// again), a NaN reported as Read reports it and then cleared (A8), and
// bad arguments; for Q4G128 and Bits4G128 blocks with A8 and A16.
func TestSequenceRunIO(t *testing.T) {
	for _, c := range []struct {
		format string
		act    qgemv.Activation
	}{{"q4g128", qgemv.A8}, {"q4g128", qgemv.A16}, {"bits4g128", qgemv.A8}, {"bits4g128", qgemv.A16}} {
		t.Run(c.format+"/"+c.act.String(), func(t *testing.T) { sequenceRunIO(t, c.format, c.act) })
	}
}

func sequenceRunIO(t *testing.T, format string, act qgemv.Activation) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	const h, inter = 256, 512
	gate, up := loadNamed(t, eng, format, inter, h, 1), loadNamed(t, eng, format, inter, h, 2)
	down := loadNamed(t, eng, format, h, inter, 3)
	x, y := newBuf(t, eng, h, qgemv.Float32), newBuf(t, eng, h, qgemv.Float32)
	g, u := newBuf(t, eng, inter, qgemv.Float32), newBuf(t, eng, inter, qgemv.Float32)
	for _, b := range []*qgemv.Buffer{x, y, g, u} {
		defer b.Close()
	}
	block := func() error {
		if err := gate.MulBuffer(g, x, 1, act); err != nil {
			return err
		}
		if err := up.MulBuffer(u, x, 1, act); err != nil {
			return err
		}
		if err := eng.SwiGLU(g, g, u); err != nil {
			return err
		}
		return down.MulBuffer(y, g, 1, act)
	}
	seq, err := eng.Record(block)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	ref, err := eng.Record(block)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	want := func(in []float32, n int) []float32 {
		t.Helper()
		if err := x.Write(in); err != nil {
			t.Fatal(err)
		}
		if err := ref.Run(); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, n)
		if err := y.Read(out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	junk := synth.Vector(h, 99)
	step := func(name string, in []float32, n int) {
		t.Helper()
		exp := want(in, n)
		if len(in) == h { // the input must land in x whatever x held
			if err := x.Write(junk); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]float32, n)
		if err := seq.RunIO(x, in, y, got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range exp {
			if math.Float32bits(got[i]) != math.Float32bits(exp[i]) {
				t.Fatalf("%s: output %d = %v, want %v (Write, Run, Read)", name, i, got[i], exp[i])
			}
		}
		xr := make([]float32, len(in))
		if err := x.Read(xr); err != nil {
			t.Fatal(err)
		}
		for i := range in {
			if math.Float32bits(xr[i]) != math.Float32bits(in[i]) {
				t.Fatalf("%s: input buffer %d = %v after RunIO, want %v", name, i, xr[i], in[i])
			}
		}
	}
	for s := range uint64(4) {
		step("full", synth.Vector(h, 10+s), h)
	}
	// Other lengths: a shorter input leaves x's tail as it was.
	step("short output", synth.Vector(h, 20), 100)
	step("short output again", synth.Vector(h, 21), 100)
	step("short input", synth.Vector(200, 22), h)
	step("short input again", synth.Vector(200, 23), h)
	// A buffer freed between steps: what was captured may be stale.
	extra := newBuf(t, eng, 64, qgemv.Float32)
	step("before a free", synth.Vector(h, 30), h)
	if err := extra.Close(); err != nil {
		t.Fatal(err)
	}
	step("after a free", synth.Vector(h, 31), h)
	step("after a free again", synth.Vector(h, 32), h)

	// A NaN quantized by the sequence is the call's error, once.
	bad := synth.Vector(h, 40)
	bad[17] = float32(math.NaN())
	for range 2 { // through the captured copies too
		if act != qgemv.A8 {
			break
		}
		if err := seq.RunIO(x, bad, y, make([]float32, h)); err == nil {
			t.Fatal("a NaN quantized in RunIO was not reported")
		}
		step("after a NaN", synth.Vector(h, 41), h)
	}

	// Bad arguments.
	if err := seq.RunIO(x, make([]float32, h+1), y, make([]float32, h)); err == nil {
		t.Error("an input longer than its buffer was accepted")
	}
	if err := seq.RunIO(x, make([]float32, h), y, make([]float32, h+1)); err == nil {
		t.Error("an output longer than its buffer was accepted")
	}
	q := newBuf(t, eng, h, qgemv.Int8)
	defer q.Close()
	if err := seq.RunIO(q, make([]float32, h), y, make([]float32, h)); err == nil {
		t.Error("an Int8 input buffer was accepted")
	}
	other, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ob := newBuf(t, other, h, qgemv.Float32)
	if err := seq.RunIO(x, make([]float32, h), ob, make([]float32, h)); err == nil {
		t.Error("another engine's output buffer was accepted")
	}
	step("after the bad arguments", synth.Vector(h, 50), h)
	if err := seq.Close(); err != nil {
		t.Fatal(err)
	}
	if err := seq.RunIO(x, make([]float32, h), y, make([]float32, h)); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("RunIO after Close: %v, want ErrClosed", err)
	}
}
