//go:build cuda

package cuda

import (
	"fmt"
	"os"
	"testing"
	"time"

	"gorgonia.org/cu"
)

// TestOverheadBreakdown (QGEMV_CUDA_REPORT=1) times the pieces of a small
// multiply's host overhead: the handoff to the CUDA thread, a staged
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
	per("handoff to the CUDA thread and back", func() error { return b.do(func() error { return nil }) })
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
