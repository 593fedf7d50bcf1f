//go:build !noasm && !purego

package cpu

import "github.com/qgemv/qgemv/asm"

// int8Requires is what Int8GemvAvx512 needs.
var int8Requires = []string{"AVX", "AVX2", "AVX512F", "AVX512BW", "AVX512VNNI"}

func int8KernelOK(b *Backend) bool { return b.set.isa == AVX512VNNI && hasAll(int8Requires) }

func int8Kernel(w []int8, stride int, xu []uint8, n64, quads int, out []int32) {
	_ = w[(4*quads-1)*stride+64*n64-1]
	_ = out[4*quads-1]
	asm.Int8GemvAvx512(&w[0], stride, &xu[0], n64, quads, &out[0])
}
