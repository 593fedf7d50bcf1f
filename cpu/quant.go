package cpu

import "github.com/qgemv/qgemv/layout"

// quantAsm, when the CPU has one, quantizes whole groups of 128 exactly as
// layout.QuantizeA8 does and returns the index of the first group it
// leaves to Go (NaN or Inf, or an amax below 2^-100), or -1.
var quantAsm func(x *float32, groups int, q *int8, scales *float32) int

// QuantizeA8 is layout.QuantizeA8, same bytes and same errors, with the
// assembly quantizer (when the CPU has one) for the groups x covers fully;
// one goroutine (Backend.QuantizeA8 splits the groups across the team).
// The GPU backends quantize their A8 activations on the host with it.
// The Go layout.QuantizeA8 was a sizeable share of a batched multiply.
func QuantizeA8(dst []int8, scales []float32, x []float32) error {
	if quantAsm == nil || len(dst)%128 != 0 || len(scales) != len(dst)/128 || len(x) > len(dst) {
		return layout.QuantizeA8(dst, scales, x)
	}
	full := len(x) / 128
	for g := 0; g < full; g++ {
		k := quantAsm(&x[g*128], full-g, &dst[g*128], &scales[g])
		if k < 0 {
			break
		}
		g += k
		if err := layout.QuantizeA8(dst[g*128:g*128+128], scales[g:g+1], x[g*128:g*128+128]); err != nil {
			return layout.QuantizeA8(dst, scales, x) // the error, counted from x[0]
		}
	}
	if full < len(scales) {
		if err := layout.QuantizeA8(dst[full*128:], scales[full:], x[full*128:]); err != nil {
			return layout.QuantizeA8(dst, scales, x)
		}
	}
	return nil
}
