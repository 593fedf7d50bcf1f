package cpu

import "github.com/qgemv/qgemv/layout"

// quantAsm, when the CPU has one, quantizes whole groups of 128 exactly as
// layout.QuantizeA8Go does and returns the index of the first group it
// leaves to Go (NaN or Inf, or an amax below 2^-100), or -1.
var quantAsm func(x *float32, groups int, q *int8, scales *float32) int

// a8Kernel is quantAsm as a layout.A8Kernel, which cpu installs at init
// so that every layout.QuantizeA8 (the GPU backends' host-side
// quantization included) runs it.
func a8Kernel(dst []int8, scales []float32, x []float32) int {
	groups := len(scales)
	if groups == 0 {
		return 0
	}
	if k := quantAsm(&x[0], groups, &dst[0], &scales[0]); k >= 0 {
		return k
	}
	return groups
}

// QuantizeA8 is layout.QuantizeA8 (same bytes, same errors; with the
// assembly quantizer once this package is linked in), on one goroutine:
// Backend.QuantizeA8 splits the groups across the backend's workers.
func QuantizeA8(dst []int8, scales []float32, x []float32) error {
	return layout.QuantizeA8(dst, scales, x)
}
