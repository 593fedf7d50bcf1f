//go:build !noasm && !purego

package cpu

import (
	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
)

// widenKernel and narrowKernel are the F16C conversions of activations
// between binary16 and float32, and the features they need (checked
// against their Requires lines by TestRequiresCoverKernels). Installed
// at init where the CPU has them, they run layout.FromFP16s and
// layout.ToFP16s, which this package's binary16 paths call: the scalar
// widening took about 1.7 ns per value, a twentieth of a 14336-column
// W2A16 multiply.
var widenKernel = struct {
	fn       func(dst *float32, src *uint16, n int)
	requires []string
}{asm.WidenF16, []string{"AVX", "F16C"}}

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
	if hasAll(widenKernel.requires) {
		layout.SetWidenKernel(func(dst []float32, src []layout.FP16) {
			widenKernel.fn(&dst[0], (*uint16)(&src[0]), len(src))
		})
	}
}
