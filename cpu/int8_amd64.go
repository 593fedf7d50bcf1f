//go:build !noasm && !purego

package cpu

import "github.com/qgemv/qgemv/asm"

// int8Requires is what Int8GemvAvx512 needs.
var int8Requires = []string{"AVX", "AVX2", "AVX512F", "AVX512BW", "AVX512VNNI"}

// int8AVX2Requires is what Int8GemvAvx2 needs.
var int8AVX2Requires = []string{"AVX", "AVX2"}

// int8KernelFor picks the int8 kernel of b's kernel set: the AVX-512 VNNI
// one, the AVX2 one for the avx2 and avxvnni sets, else generic Go.
func int8KernelFor(b *Backend) int8Kind {
	switch {
	case b.set.isa == AVX512VNNI && hasAll(int8Requires):
		return int8VNNI
	case (b.set.isa == AVX2 || b.set.isa == AVXVNNI) && hasAll(int8AVX2Requires):
		return int8AVX2
	}
	return int8Generic
}

func int8Kernel(w []int8, stride int, xu []uint8, n64, quads int, out []int32) {
	_ = w[(4*quads-1)*stride+64*n64-1]
	_ = xu[64*n64-1]
	_ = out[4*quads-1]
	asm.Int8GemvAvx512(&w[0], stride, &xu[0], n64, quads, &out[0])
}

func int8KernelAVX2(w []int8, stride int, xw []int16, n32, quads int, out []int32) {
	_ = w[(4*quads-1)*stride+32*n32-1]
	_ = xw[32*n32-1]
	_ = out[4*quads-1]
	asm.Int8GemvAvx2(&w[0], stride, &xw[0], n32, quads, &out[0])
}
