//go:build opencl

package opencl

import (
	"math"
	"testing"

	"github.com/qgemv/qgemv/internal/devtest"
	"github.com/qgemv/qgemv/layout"
)

// TestDeviceBuffersBadInput: operations on device buffers check what the
// kernels would read or write past (each returned nil and queued it: a
// crash of the process or wrong results), the batch, typed nil buffers,
// a missing operand, non-finite scalars, iteration counts and options.
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
	devtest.BadBuffers(t, b, mx, (*Buf)(nil))
	big := newBuf(t, b, 1<<16)
	defer big.Close()
	if err := b.SwiGLU(big, big, nil, 4); err == nil {
		t.Error("SwiGLU without up: no error")
	}
	if _, err := b.ReadBandwidth(1<<20, math.MaxInt); err == nil {
		t.Error("ReadBandwidth of MaxInt iterations: no error")
	}
	if _, err := Open(Options{Q4Layout: 7, CacheDir: cacheDir}); err == nil {
		t.Error("Open with Q4Layout 7: no error")
	}
}

// TestCloseNilAndZero: Close of a nil or zero-value object (a deferred
// Close after a failed Open or Load) returns instead of panicking.
func TestCloseNilAndZero(t *testing.T) {
	for name, c := range map[string]interface{ Close() error }{
		"nil Backend": (*Backend)(nil), "zero Backend": &Backend{},
		"nil Matrix": (*Matrix)(nil), "zero Matrix": &Matrix{},
		"nil GGMLMatrix": (*GGMLMatrix)(nil), "zero GGMLMatrix": &GGMLMatrix{},
		"nil ANSMatrix": (*ANSMatrix)(nil), "zero ANSMatrix": &ANSMatrix{},
		"nil Int8Matrix": (*Int8Matrix)(nil), "zero Int8Matrix": &Int8Matrix{},
		"nil Buf": (*Buf)(nil), "zero Buf": &Buf{},
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
