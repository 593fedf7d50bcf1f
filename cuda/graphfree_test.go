//go:build cuda

package cuda_test

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/qgemv/qgemv/cuda"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// TestGraphStaleAfterClose: a captured graph is not launched once a
// buffer or matrix of its backend was closed (Launch and IOGraph.Run
// return false, having queued nothing), since the memory it reads or
// writes may be freed or reused; captured again it gives the same bits.
// Before, the graph kept running on the freed memory of a closed input
// buffer.
func TestGraphStaleAfterClose(t *testing.T) {
	b, mx, newBuf := q4Backend(t, 256, 1024)
	x, y := newBuf(4*1024), newBuf(4*256)
	if err := x.Write(0, f32Bytes(synth.Vector(1024, 2))); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 256)
	if err := mx.MulA8(want, synth.Vector(1024, 2), 1); err != nil {
		t.Fatal(err)
	}
	read := func() []float32 {
		raw := make([]byte, 4*256)
		if err := y.Read(0, raw); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 256)
		for i := range got {
			got[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return got
	}
	capture := func() *cuda.Graph { // run once first, as a Sequence does (scratch and status word made)
		if err := mx.MulA8Buf(y, x, 1); err != nil {
			t.Fatal(err)
		}
		g, err := b.Capture(func() error { return mx.MulA8Buf(y, x, 1) })
		if err != nil {
			t.Fatal(err)
		}
		return g.(*cuda.Graph)
	}
	launch := func(g *cuda.Graph, wantOK bool, when string) {
		t.Helper()
		ok, err := g.Launch()
		if err != nil || ok != wantOK {
			t.Fatalf("%s: Launch %v, %v; want %v", when, ok, err, wantOK)
		}
	}
	clearY := func() {
		if err := y.Write(0, make([]byte, 4*256)); err != nil {
			t.Fatal(err)
		}
	}
	g := capture()
	clearY()
	launch(g, true, "after the capture")
	if got := read(); !slices.Equal(got, want) {
		t.Fatal("the graph's product differs from MulA8's")
	}
	other := newBuf(64)
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	launch(g, false, "after a buffer's Close")
	_ = g.Close()
	g = capture()
	clearY()
	launch(g, true, "captured again")
	if got := read(); !slices.Equal(got, want) {
		t.Fatal("the graph captured again differs from MulA8")
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	launch(g, false, "after its input's Close")
	_ = g.Close()
	if err := mx.MulA8Buf(y, x, 1); !errors.Is(err, cuda.ErrClosed) {
		t.Fatalf("a multiply on the closed input: %v, want ErrClosed", err)
	}
	x = newBuf(4 * 1024)
	if err := x.Write(0, f32Bytes(synth.Vector(1024, 2))); err != nil {
		t.Fatal(err)
	}
	g = capture()
	launch(g, true, "on a new input")
	if err := mx.Close(); err != nil {
		t.Fatal(err)
	}
	launch(g, false, "after its matrix's Close")
	_ = g.Close()
}

// q4Backend is openBackend with a random rows x cols Q4G128 matrix
// loaded, and a maker of its device buffers.
func q4Backend(t *testing.T, rows, cols int) (*cuda.Backend, *cuda.Matrix, func(n int64) *cuda.DevBuf) {
	t.Helper()
	b := openBackend(t)
	spec, _ := layout.ParseFormatSpec("q4g128")
	m, err := synth.Matrix(spec, rows, cols, 1)
	if err != nil {
		t.Fatal(err)
	}
	mat, err := b.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	newBuf := func(n int64) *cuda.DevBuf {
		v, err := b.NewBuf(n)
		if err != nil {
			t.Fatal(err)
		}
		return v.(*cuda.DevBuf)
	}
	return b, mat.(*cuda.Matrix), newBuf
}
