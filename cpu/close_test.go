package cpu

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ggml"
)

// TestCloseDuringMul: Close while multiplies run on other goroutines
// waits for them, and the multiplies after it return ErrClosed; none
// reads the huge-page weights Close unmaps. Q4G128 and GGML matrices
// checked closed with an atomic flag alone before: Close unmapped their
// copy under running kernels and the test died of SIGSEGV.
func TestCloseDuringMul(t *testing.T) {
	be, err := New(Config{HugePages: true, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	const rows, cols = 512, 4096
	q4, err := layout.RandomQ4G128(rows, cols, 41)
	if err != nil {
		t.Fatal(err)
	}
	q40, err := ggml.Random(ggml.Q4_0, rows, cols, 42)
	if err != nil {
		t.Fatal(err)
	}
	q4k, err := ggml.Random(ggml.Q4_K, rows, cols, 43)
	if err != nil {
		t.Fatal(err)
	}
	bits, err := layout.RandomBits(rows, cols, 4, 128, 44)
	if err != nil {
		t.Fatal(err)
	}
	x := synth.Vector(2*cols, 45)
	xh := make([]layout.FP16, len(x))
	layout.ToFP16s(xh, x)
	for _, m := range []layout.Matrix{q4, q40, q4k, bits} {
		t.Run(m.Name(), func(t *testing.T) {
			rounds := 10
			if testing.Short() {
				rounds = 3
			}
			for round := range rounds {
				mx, err := be.LoadMatrix(m)
				if err != nil {
					t.Fatal(err)
				}
				muls := []func(dst []float32) error{
					func(dst []float32) error { return mx.MulA8(dst, x, 2) },
					func(dst []float32) error { return mx.MulF32(dst, x, 2) },
					func(dst []float32) error { return mx.MulF16(dst, xh, 2) },
				}
				var wg sync.WaitGroup
				errc := make(chan error, len(muls))
				started := make(chan struct{}, len(muls))
				for i, mul := range muls {
					wg.Add(1)
					go func() {
						defer wg.Done()
						dst := make([]float32, 2*rows)
						for n := 0; ; n++ {
							err := mul(dst)
							if n == 0 {
								started <- struct{}{}
							}
							if errors.Is(err, ErrClosed) {
								return
							}
							if err != nil {
								errc <- fmt.Errorf("multiply %d, call %d: %w", i, n, err)
								return
							}
						}
					}()
				}
				for range muls {
					<-started
				}
				time.Sleep(time.Duration(round%4) * 100 * time.Microsecond)
				if err := mx.Close(); err != nil {
					t.Fatalf("round %d: Close: %v", round, err)
				}
				wg.Wait()
				close(errc)
				for err := range errc {
					t.Errorf("round %d: %v", round, err)
				}
				if err := mx.Close(); !errors.Is(err, ErrClosed) {
					t.Errorf("round %d: second Close: %v, want ErrClosed", round, err)
				}
			}
		})
	}
}
