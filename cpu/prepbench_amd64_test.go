//go:build !noasm && !purego

package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkYMMPrep times the YMM Bits A8 kernels' activation layout of
// one vector (the part of every multiply that runs before its rows).
func BenchmarkYMMPrep(b *testing.B) {
	be, err := New(Config{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	for _, n := range []int{4, 2, 8} {
		for _, cols := range []int{4096, 14336} {
			rng := rand.New(rand.NewPCG(1, 2))
			s := newBitsYMM(be, importedBits(b, rng, 16, cols, n, 128, false, false, false))
			if s == nil {
				b.Skip("no YMM kernel on this CPU")
			}
			xq := make([]int8, cols)
			for i := range xq {
				xq[i] = int8(rng.IntN(256) - 128)
			}
			xs := make([]float32, cols/128)
			act := make([]byte, s.chunks*s.actChunk)
			b.Run(fmt.Sprintf("Bits%dG128/%d", n, cols), func(b *testing.B) {
				b.SetBytes(int64(cols))
				for i := 0; i < b.N; i++ {
					s.prep(act, xq, xs, 0, s.chunks)
				}
			})
		}
	}
}
