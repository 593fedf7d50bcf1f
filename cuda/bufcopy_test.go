//go:build cuda

package cuda_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/qgemv/qgemv/cuda"
)

// TestBufCopies writes and reads device buffers at offsets and lengths
// that are and are not multiples of 16 (copy_bytes takes 16 bytes at a
// time only where both sides are aligned), with the kernels' copies on
// pinned memory and with the copy engine's (QGEMV_CUDA_HOSTMAP=0): every
// read returns what a host mirror of the writes holds.
func TestBufCopies(t *testing.T) {
	device(t)
	for _, hostMap := range []string{"1", "0"} {
		t.Run(cuda.EnvHostMap+"="+hostMap, func(t *testing.T) {
			t.Setenv(cuda.EnvHostMap, hostMap)
			b, err := cuda.Open(0, cuda.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			const size = 70000
			buf, err := b.NewBuf(size)
			if err != nil {
				t.Fatal(err)
			}
			mirror := make([]byte, size)
			rng := rand.New(rand.NewPCG(7, 9))
			spans := [][2]int{{0, 16}, {0, 1}, {3, 15}, {16, 17}, {1, 4099}, {17, 65536}, {size - 5, 5}, {48, 1000}, {0, size}}
			for _, sp := range spans {
				off, n := sp[0], sp[1]
				src := make([]byte, n)
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				if err := buf.Write(int64(off), src); err != nil {
					t.Fatalf("write %d bytes at %d: %v", n, off, err)
				}
				copy(mirror[off:], src)
				for _, rd := range [][2]int{{off, n}, {0, size}, {max(0, off-7), min(size-max(0, off-7), n+9)}} {
					got := make([]byte, rd[1])
					if err := buf.Read(int64(rd[0]), got); err != nil {
						t.Fatalf("read %d bytes at %d: %v", rd[1], rd[0], err)
					}
					if want := mirror[rd[0] : rd[0]+rd[1]]; !bytes.Equal(got, want) {
						t.Fatalf("after writing %d bytes at %d, reading %d bytes at %d: %s", n, off, rd[1], rd[0], firstDiff(got, want))
					}
				}
			}
			if err := buf.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func firstDiff(got, want []byte) string {
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("byte %d is %#x, want %#x", i, got[i], want[i])
		}
	}
	return "equal"
}
