//go:build noasm || purego || !amd64

package cpu

import "github.com/qgemv/qgemv/layout"

// widenF16 sets dst[i] = src[i].Float32() for i < len(src).
func widenF16(dst []float32, src []layout.FP16) {
	for i, h := range src {
		dst[i] = h.Float32()
	}
}
