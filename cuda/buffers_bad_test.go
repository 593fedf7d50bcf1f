//go:build cuda

package cuda_test

import (
	"testing"

	"github.com/qgemv/qgemv/cuda"
	"github.com/qgemv/qgemv/internal/devtest"
)

// TestDeviceBuffersBadInput: operations on device buffers check what the
// kernels would read or write past (a device fault ends the context),
// the batch, non-finite scalars, a nil capture function and nil matrices
// to time; the backend keeps working after each.
func TestDeviceBuffersBadInput(t *testing.T) {
	b, mx, newBuf := q4Backend(t, 64, 256)
	devtest.BadBuffers(t, b, mx, (*cuda.DevBuf)(nil))
	if _, err := b.Capture(nil); err == nil {
		t.Error("Capture(nil): no error")
	}
	if _, err := cuda.TimeGEMV([]*cuda.Matrix{mx, nil}, "a8", 1, 1); err == nil {
		t.Error("TimeGEMV of a nil matrix: no error")
	}
	// A panic in a captured function ends the capture: the backend still
	// queues and runs work.
	func() {
		defer func() { _ = recover() }()
		_, _ = b.Capture(func() error { panic("boom") })
	}()
	big := newBuf(1 << 16)
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

// TestCloseNilAndZero: Close of a nil or zero-value object (a deferred
// Close after a failed Open or Load) returns instead of panicking.
func TestCloseNilAndZero(t *testing.T) {
	for name, c := range map[string]interface{ Close() error }{
		"nil Backend": (*cuda.Backend)(nil),
		"nil Matrix":  (*cuda.Matrix)(nil), "zero Matrix": &cuda.Matrix{},
		"nil GGMLMatrix": (*cuda.GGMLMatrix)(nil), "zero GGMLMatrix": &cuda.GGMLMatrix{},
		"nil ANSMatrix": (*cuda.ANSMatrix)(nil), "zero ANSMatrix": &cuda.ANSMatrix{},
		"nil Int8Matrix": (*cuda.Int8Matrix)(nil), "zero Int8Matrix": &cuda.Int8Matrix{},
		"nil CBMatrix": (*cuda.CBMatrix)(nil), "zero CBMatrix": &cuda.CBMatrix{},
		"nil DevBuf": (*cuda.DevBuf)(nil), "zero DevBuf": &cuda.DevBuf{},
		"nil Graph": (*cuda.Graph)(nil), "zero Graph": &cuda.Graph{},
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: Close panicked: %v", name, p)
				}
			}()
			_ = c.Close()
		}()
	}
}
