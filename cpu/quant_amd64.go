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

func init() {
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
