// Package devtest holds tests shared by the GPU backends' own test
// suites (opencl, cuda): it imports neither, so an internal test package
// of either can use it.
package devtest

import (
	"math"
	"testing"

	"github.com/qgemv/qgemv/internal/devbuf"
)

// Device is the buffer side of a GPU backend (dispatch.Device).
type Device interface {
	NewBuf(size int64) (devbuf.Buf, error)
	Wait() error
	SwiGLU(dst, g, u devbuf.Buf, n int) error
	Add(dst, a, b devbuf.Buf, n int) error
	Scale(dst, a devbuf.Buf, s float32, n int) error
	Requantize(dst, src devbuf.Buf, alpha float32, n int) error
}

// Matrix is a matrix multiplying device buffers (dispatch.DeviceMatrix).
type Matrix interface {
	MulF16Buf(dst, x devbuf.Buf, batch int) error
	MulA8Buf(dst, x devbuf.Buf, batch int) error
	QuantizeBuf(xq, xs, x devbuf.Buf, batch int) error
	MulI8Buf(dst, xq, xs devbuf.Buf, batch int) error
}

// BadBuffers checks that dev's elementwise operations and mx's
// multiplies (a matrix of at most 64 rows and 256 columns that takes
// int8 activations) refuse what the kernels would read or write past, a
// batch outside 1..16, a typed nil buffer (typedNil) and non-finite
// scalars, queueing nothing, and still run within the sizes afterwards.
func BadBuffers(t *testing.T, dev Device, mx Matrix, typedNil devbuf.Buf) {
	t.Helper()
	newBuf := func(n int64) devbuf.Buf {
		v, err := dev.NewBuf(n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		return v
	}
	small, big := newBuf(16), newBuf(1<<16)
	for name, f := range map[string]func() error{
		"Scale n past the buffers":  func() error { return dev.Scale(small, small, 2, 1<<20) },
		"Add n past dst":            func() error { return dev.Add(small, big, big, 17) },
		"SwiGLU n past up":          func() error { return dev.SwiGLU(big, big, small, 100) },
		"Add of a typed nil":        func() error { return dev.Add(big, typedNil, big, 4) },
		"Scale by NaN":              func() error { return dev.Scale(big, big, float32(math.NaN()), 4) },
		"Requantize by Inf":         func() error { return dev.Requantize(big, big, float32(math.Inf(1)), 4) },
		"Requantize n past src":     func() error { return dev.Requantize(big, small, 1, 100) },
		"negative n":                func() error { return dev.Scale(big, big, 1, -1) },
		"MulF16Buf into 16 bytes":   func() error { return mx.MulF16Buf(small, big, 1) },
		"MulA8Buf from 16 bytes":    func() error { return mx.MulA8Buf(big, small, 1) },
		"QuantizeBuf into 16 bytes": func() error { return mx.QuantizeBuf(small, big, big, 1) },
		"MulI8Buf, short scales":    func() error { return mx.MulI8Buf(big, big, small, 16) },
		"MulA8Buf batch 17":         func() error { return mx.MulA8Buf(big, big, 17) },
		"MulF16Buf batch 0":         func() error { return mx.MulF16Buf(big, big, 0) },
		"MulA8Buf of a typed nil":   func() error { return mx.MulA8Buf(big, typedNil, 1) },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := dev.Wait(); err != nil {
		t.Fatalf("Wait after the refused operations: %v", err)
	}
	if err := dev.Scale(big, big, 2, 1<<14); err != nil {
		t.Error(err)
	}
	if err := mx.MulA8Buf(big, big, 16); err != nil {
		t.Error(err)
	}
	if err := dev.Wait(); err != nil {
		t.Error(err)
	}
}
