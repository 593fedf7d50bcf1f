//go:build !noasm && !purego

package cpu

import (
	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
)

// quantizers are the assembly int8 activation quantizers, best first,
// with the features their instructions need.
var quantizers = []struct {
	fn       func(x *float32, groups int, q *int8, scales *float32) int
	requires []string
}{
	{asm.QuantizeA8Avx512, []string{"AVX", "AVX2", "AVX512F"}},
	{asm.QuantizeA8Avx2, []string{"AVX", "AVX2"}},
}

// swigluRequires are the features of asm.SwiGLUAvx512.
var swigluRequires = []string{"AVX", "AVX512F"}

// encodeRequires are the features of asm.Q4EncodeAvx2 and
// asm.BitsEncodeAvx2.
var encodeRequires = []string{"AVX", "AVX2"}

// q4Encode is layout's EncodeKernel on asm.Q4EncodeAvx2 (layout calls it
// with a whole number of eight values and len(q) == len(vals)).
func q4Encode(vals []float32, q []uint8, s float32, z uint8, best float64) float64 {
	return asm.Q4EncodeAvx2(&vals[0], len(vals), &q[0], s, float32(z), best)
}

// bitsEncode is layout's BitsEncodeKernel on asm.BitsEncodeAvx2 (layout
// calls it with a whole number of eight values and len(q) == len(vals)).
func bitsEncode(vals []float32, q []uint32, s, z, qmax, best float64) float64 {
	return asm.BitsEncodeAvx2(&vals[0], len(vals), &q[0], s, z, qmax, best)
}

func init() {
	if hasAll(encodeRequires) {
		layout.SetEncodeKernel(q4Encode)
		layout.SetBitsEncodeKernel(bitsEncode)
	}
	if hasAll(swigluRequires) {
		swigluAsm = asm.SwiGLUAvx512
	}
	for _, q := range quantizers {
		if hasAll(q.requires) {
			quantAsm = q.fn
			layout.SetA8Kernel(a8Kernel)
			break
		}
	}
}
