//go:build cuda

package cuda

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// TestOverheadBreakdown (QGEMV_CUDA_REPORT=1) times the pieces of a small
// multiply's host overhead: a backend call (lock, context pushed and popped), a staged
// copy each way, and a tiny kernel launch waited for.
func TestOverheadBreakdown(t *testing.T) {
	if os.Getenv("QGEMV_CUDA_REPORT") == "" {
		t.Skip("set QGEMV_CUDA_REPORT=1")
	}
	ds, err := Devices()
	if err != nil || len(ds) == 0 {
		t.Skip("no CUDA device")
	}
	b, err := Open(0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	x := make([]float32, 256)
	y := make([]float32, 256)
	per := func(name string, f func() error) {
		const n = 2000
		for i := 0; i < 100; i++ {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Printf("%-40s %6.1f us\n", name, 1e6*time.Since(start).Seconds()/n)
	}
	per("an empty backend call", func() error { return b.do(func() error { return nil }) })
	per("1 KiB staged copy to the device", func() error {
		return b.do(func() error {
			xb, err := b.scratchBuf("t", 1024)
			if err != nil {
				return err
			}
			if err := stagedPut(b, "t", xb, x); err != nil {
				return err
			}
			return cu.Synchronize()
		})
	})
	per("1 KiB staged copy from the device", func() error {
		return b.do(func() error {
			xb, err := b.scratchBuf("t", 1024)
			if err != nil {
				return err
			}
			return b.stagedDownload(xb, y)
		})
	})
	per("a wait with nothing queued", func() error { return b.do(cu.Synchronize) })
	// Pinned host memory is device-addressable under unified addressing:
	// a kernel can read its input from, and write its output to, the
	// staging memory itself, in place of the two copies.
	tiny := func(k int, in, out func() (cu.DevicePtr, error), wait func() error) func() error {
		return func() error {
			return b.do(func() error {
				t, err := b.scratchBuf("t", 1024)
				if err != nil {
					return err
				}
				u, err := b.scratchBuf("u", 1024)
				if err != nil {
					return err
				}
				src, err := in()
				if err != nil {
					return err
				}
				dst, err := out()
				if err != nil {
					return err
				}
				bufs := [2]cu.DevicePtr{t.ptr, u.ptr} // kernel i reads bufs[i%2], writes the other
				for i := 0; i < k; i++ {
					s, d := bufs[i%2], bufs[1-i%2]
					if i == 0 {
						s = src
					}
					if i == k-1 {
						d = dst
					}
					if err := b.launch("selftest", 1, 1, 256, 0, s, d, int64(256)); err != nil {
						return err
					}
				}
				return wait()
			})
		}
	}
	devIn := func() (cu.DevicePtr, error) {
		t, err := b.scratchBuf("t", 1024)
		if err != nil {
			return 0, err
		}
		return t.ptr, stagedPut(b, "t", t, x)
	}
	devOut := func() (cu.DevicePtr, error) {
		u, err := b.scratchBuf("v", 1024)
		return u.ptr, err
	}
	download := func() error {
		v, err := b.scratchBuf("v", 1024)
		if err != nil {
			return err
		}
		return b.stagedDownload(v, y)
	}
	pinIn := func() (cu.DevicePtr, error) {
		h, err := b.staging("pin-in", 1024)
		if err != nil {
			return 0, err
		}
		copy(unsafe.Slice((*float32)(h.p), 256), x)
		return cu.DevicePtr(uintptr(h.p)), nil
	}
	pinOut := func() (cu.DevicePtr, error) {
		h, err := b.staging("pin-out", 1024)
		return cu.DevicePtr(uintptr(h.p)), err
	}
	pinWait := func() error {
		if err := cu.Synchronize(); err != nil {
			return err
		}
		h := b.pinned["pin-out"]
		copy(y, unsafe.Slice((*float32)(h.p), 256))
		return nil
	}
	for _, k := range []int{1, 3} {
		per(fmt.Sprintf("copy in, %d kernels, copy out, one wait", k), tiny(k, devIn, devOut, download))
		per(fmt.Sprintf("%d kernels on pinned in and out, one wait", k), tiny(k, pinIn, pinOut, pinWait))
	}
	per("tiny kernel launched and waited for", func() error {
		return b.do(func() error {
			xb, err := b.scratchBuf("t", 1024)
			if err != nil {
				return err
			}
			yb, err := b.scratchBuf("u", 1024)
			if err != nil {
				return err
			}
			if err := b.launch("selftest", 1, 1, 256, 0, xb.ptr, yb.ptr, int64(256)); err != nil {
				return err
			}
			return b.stagedDownload(yb, y)
		})
	})
}

// TestCallerContextKept: a backend call runs on its caller's OS thread
// with the backend's context pushed for the call; the thread's own
// context stack is as the caller left it afterwards, whichever context
// that is.
func TestCallerContextKept(t *testing.T) {
	ds, err := Devices()
	if err != nil || len(ds) == 0 {
		t.Skip("no CUDA device")
	}
	b1, err := Open(0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Close()
	b2, err := Open(0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := cu.CurrentContext()
	if err != nil {
		t.Fatal(err)
	}
	if before == b1.ctx || before == b2.ctx {
		t.Fatalf("a backend's context %v is current after Open", before)
	}
	check := func(want cu.CUContext, what string) {
		t.Helper()
		got, err := cu.CurrentContext()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%s: current context %v, want %v", what, got, want)
		}
	}
	x := make([]float32, 1000)
	for i := range x {
		x[i] = float32(i)
	}
	work := func(b *Backend) {
		t.Helper()
		buf, err := b.NewBuf(4000)
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Close()
		src := unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4000)
		if err := buf.Write(0, src); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4000)
		if err := buf.Read(0, got); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(src) {
			t.Fatal("a buffer read back differs from what was written")
		}
	}
	work(b1)
	check(before, "after a call on the first backend")
	if err := b2.pushCtx(); err != nil {
		t.Fatal(err)
	}
	work(b1)
	check(b2.ctx, "after a call on the first backend with the second's context pushed")
	work(b2)
	check(b2.ctx, "after a call on the second backend with its context pushed")
	popCtx()
	check(before, "after popping")
}
