//go:build cuda

package cuda_test

import (
	"errors"
	"math"
	"testing"

	"github.com/qgemv/qgemv/cuda"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// TestDeviceBuffersBadInput: operations on device buffers check what the
// kernels would read or write past (a device fault ends the context),
// the batch, non-finite scalars, a nil capture function and nil matrices
// to time; the backend keeps working after each.
func TestDeviceBuffersBadInput(t *testing.T) {
	device(t)
	b, err := cuda.Open(0, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	spec, _ := layout.ParseFormatSpec("q4g128")
	m, err := synth.Matrix(spec, 64, 256, 1)
	if err != nil {
		t.Fatal(err)
	}
	mat, err := b.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	mx := mat.(*cuda.Matrix)
	newBuf := func(n int64) *cuda.DevBuf {
		v, err := b.NewBuf(n)
		if err != nil {
			t.Fatal(err)
		}
		return v.(*cuda.DevBuf)
	}
	small, big := newBuf(16), newBuf(1<<16)
	var typedNil *cuda.DevBuf
	for name, f := range map[string]func() error{
		"Scale n past the buffers":  func() error { return b.Scale(small, small, 2, 1<<20) },
		"Add n past dst":            func() error { return b.Add(small, big, big, 17) },
		"SwiGLU n past up":          func() error { return b.SwiGLU(big, big, small, 100) },
		"Scale by NaN":              func() error { return b.Scale(big, big, float32(math.NaN()), 4) },
		"Requantize by Inf":         func() error { return b.Requantize(big, big, float32(math.Inf(1)), 4) },
		"Requantize n past src":     func() error { return b.Requantize(big, small, 1, 100) },
		"negative n":                func() error { return b.Scale(big, big, 1, -1) },
		"Add of a typed nil":        func() error { return b.Add(big, typedNil, big, 4) },
		"MulF16Buf into 16 bytes":   func() error { return mx.MulF16Buf(small, big, 1) },
		"MulA8Buf from 16 bytes":    func() error { return mx.MulA8Buf(big, small, 1) },
		"QuantizeBuf into 16 bytes": func() error { return mx.QuantizeBuf(small, big, big, 1) },
		"MulI8Buf, short scales":    func() error { return mx.MulI8Buf(big, big, small, 16) },
		"MulA8Buf batch 17":         func() error { return mx.MulA8Buf(big, big, 17) },
		"MulF16Buf batch 0":         func() error { return mx.MulF16Buf(big, big, 0) },
		"MulA8Buf of a typed nil":   func() error { return mx.MulA8Buf(big, typedNil, 1) },
		"Capture(nil)":              func() error { _, err := b.Capture(nil); return err },
		"TimeGEMV of a nil matrix": func() error {
			_, err := cuda.TimeGEMV([]*cuda.Matrix{mx, nil}, "a8", 1, 1)
			return err
		},
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("Wait after the refused operations: %v", err)
	}
	// A panic in a captured function ends the capture: the backend still
	// queues and runs work.
	func() {
		defer func() { _ = recover() }()
		_, _ = b.Capture(func() error { panic("boom") })
	}()
	if err := b.Scale(big, big, 2, 1<<14); err != nil {
		t.Error(err)
	}
	if err := mx.MulA8Buf(big, big, 16); err != nil {
		t.Error(err)
	}
	if err := b.Wait(); err != nil && !errors.Is(err, cuda.ErrClosed) {
		t.Error(err)
	}
}

// TestOpenBadOptions: Split and Mode outside their ranges are refused
// before the device is touched, as their environment variables are.
func TestOpenBadOptions(t *testing.T) {
	for _, o := range []cuda.Options{{Split: -1}, {Split: 65}, {Mode: 7}} {
		if b, err := cuda.Open(0, o); err == nil {
			b.Close()
			t.Errorf("Open(%+v): no error", o)
		}
	}
}
