//go:build !noasm && !purego

package cpu

import (
	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
)

// widenKernel is the F16C widening of binary16 activations and the
// features it needs (checked against its Requires line by
// TestRequiresCoverKernels).
var widenKernel = struct {
	fn       func(dst *float32, src *uint16, n int)
	requires []string
}{asm.WidenF16, []string{"AVX", "F16C"}}

var hasWiden = hasAll(widenKernel.requires)

// narrowKernel is the F16C rounding of float32 activations to binary16,
// which layout.ToFP16s runs (installed at init where the CPU has F16C, as
// the widening is for layout.FromFP16s).
var narrowKernel = struct {
	fn       func(dst *uint16, src *float32, n int)
	requires []string
}{asm.NarrowF16, []string{"AVX", "F16C"}}

func init() {
	if hasAll(narrowKernel.requires) {
		layout.SetF16Kernel(func(dst []layout.FP16, src []float32) {
			narrowKernel.fn((*uint16)(&dst[0]), &src[0], len(src))
		})
	}
	if hasWiden {
		layout.SetWidenKernel(func(dst []float32, src []layout.FP16) {
			widenKernel.fn(&dst[0], (*uint16)(&src[0]), len(src))
		})
	}
}

// widenF16 sets dst[i] = src[i].Float32() for i < len(src) (len(dst) >=
// len(src)), with F16C where the CPU has it: the scalar conversion took
// about 1.7 ns per value, a twentieth of a 14336-column W2A16 multiply.
func widenF16(dst []float32, src []layout.FP16) {
	n := 0
	if hasWiden && len(src) >= 32 {
		n = len(src) &^ 31
		widenKernel.fn(&dst[:n][0], (*uint16)(&src[0]), n)
	}
	for i := n; i < len(src); i++ {
		dst[i] = src[i].Float32()
	}
}
