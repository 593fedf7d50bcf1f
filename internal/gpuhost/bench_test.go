package gpuhost

import (
	"fmt"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

// BenchmarkF32HostPrep times the host preparation of one float32 vector
// for the tensor-core kernels (the GPU backends' A32 multiplies): the
// hi/lo split, the fragment order with the Bits block sums, and the
// range scan of ScaleVectors, at 4096 and 14336 columns.
func BenchmarkF32HostPrep(b *testing.B) {
	for _, pc := range []int{4096, 14336} {
		x := make([]float32, pc)
		for i := range x {
			x[i] = float32(i%97) * 0.013
		}
		hl := make([]layout.FP16, 8*pc)
		xr := make([]layout.FP16, 8*pc)
		xsum := make([]float32, 8*pc/128)
		inv := make([]float32, 1)
		b.Run(fmt.Sprintf("split/%d", pc), func(b *testing.B) {
			for range b.N {
				SplitHiLoInto(hl, inv, x, 1, pc, 8)
			}
		})
		b.Run(fmt.Sprintf("order/%d", pc), func(b *testing.B) {
			for range b.N {
				MMAOrderInto(xr, xsum, 4, hl, 2, pc, 8)
			}
		})
		b.Run(fmt.Sprintf("scale/%d", pc), func(b *testing.B) {
			for range b.N {
				ScaleVectors(x, 1, pc)
			}
		})
	}
}
