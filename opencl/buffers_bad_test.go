//go:build opencl

package opencl

import (
	"math"
	"testing"

	"github.com/qgemv/qgemv/internal/devbuf"
	"github.com/qgemv/qgemv/layout"
)

// TestDeviceBuffersBadInput: operations on device buffers check what the
// kernels would read or write past (each returned nil and queued it:
// a crash of the process or wrong results), the batch, typed nil
// buffers, a missing operand and non-finite scalars.
func TestDeviceBuffersBadInput(t *testing.T) {
	b := backend(t)
	m, err := layout.RandomQ4G128(64, 256, 1)
	if err != nil {
		t.Fatal(err)
	}
	mx, err := b.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	defer mx.Close()
	small, big := newBuf(t, b, 16), newBuf(t, b, 1<<16)
	defer small.Close()
	defer big.Close()
	var typedNil *Buf
	for name, f := range map[string]func() error{
		"Scale n past the buffers":  func() error { return b.Scale(small, small, 2, 1<<20) },
		"Add n past dst":            func() error { return b.Add(small, big, big, 17) },
		"SwiGLU n past up":          func() error { return b.SwiGLU(big, big, small, 100) },
		"SwiGLU without up":         func() error { return b.SwiGLU(big, big, nil, 4) },
		"Add of a typed nil":        func() error { return b.Add(big, typedNil, big, 4) },
		"Scale by NaN":              func() error { return b.Scale(big, big, float32(math.NaN()), 4) },
		"Requantize by Inf":         func() error { return b.Requantize(big, big, float32(math.Inf(1)), 4) },
		"Requantize n past src":     func() error { return b.Requantize(big, small, 1, 100) },
		"negative n":                func() error { return b.Scale(big, big, 1, -1) },
		"MulF16Buf into 16 bytes":   func() error { return mx.MulF16Buf(small, big, 1) },
		"MulA8Buf from 16 bytes":    func() error { return mx.MulA8Buf(big, small, 1) },
		"QuantizeBuf into 16 bytes": func() error { return mx.QuantizeBuf(small, big, big, 1) },
		"MulI8Buf, short scales":    func() error { return mx.MulI8Buf(big, big, small, 16) },
		"MulA8Buf batch 17":         func() error { return mx.MulA8Buf(big, big, 17) },
		"MulF16Buf batch 0":         func() error { return mx.MulF16Buf(big, big, 0) },
		"MulA8Buf of a typed nil":   func() error { return mx.MulA8Buf(big, typedNil, 1) },
		"ReadBandwidth, MaxInt iterations": func() error {
			_, err := b.ReadBandwidth(1<<20, math.MaxInt)
			return err
		},
	} {
		if err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	var _ devbuf.Buf = typedNil
	if _, err := Open(Options{Q4Layout: 7, CacheDir: cacheDir}); err == nil {
		t.Error("Open with Q4Layout 7: no error")
	}
	if err := b.Wait(); err != nil {
		t.Errorf("Wait after the refused operations: %v", err)
	}
	// Within the sizes they still run.
	if err := b.Scale(big, big, 2, 1<<14); err != nil {
		t.Error(err)
	}
	if err := mx.MulA8Buf(big, big, 16); err != nil {
		t.Error(err)
	}
	if err := b.Wait(); err != nil {
		t.Error(err)
	}
}
