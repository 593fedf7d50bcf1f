package layout

import (
	"math"
	"sync/atomic"
)

// FP16 is an IEEE 754 binary16 value (1 sign, 5 exponent, 10 fraction
// bits), as stored in Bits metadata and A16 activations.
type FP16 uint16

// ToFP16 rounds f to the nearest binary16 value, ties to even: values of
// magnitude 65520 and above (past the largest finite half, 65504, by half
// a step) become infinities; NaN stays NaN.
func ToFP16(f float32) FP16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	frac := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if frac != 0 {
			return FP16(sign | 0x7e00)
		}
		return FP16(sign | 0x7c00)
	case exp > 127+15: // overflow
		return FP16(sign | 0x7c00)
	case exp >= 127-14: // normal half
		h := uint32(exp-127+15)<<10 | frac>>13
		rest := frac & 0x1fff
		if rest > 0x1000 || rest == 0x1000 && h&1 == 1 {
			h++ // may carry into the exponent, up to infinity: correct
		}
		return FP16(sign | uint16(h))
	case exp >= 127-25: // subnormal half
		m := frac | 0x800000 // 24-bit significand
		shift := uint(126 - 14 - exp + 13 + 1)
		h := m >> shift
		rest := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || rest == half && h&1 == 1 {
			h++
		}
		return FP16(sign | uint16(h))
	}
	return FP16(sign) // underflow to zero
}

// ToFP16s sets dst[i] = ToFP16(src[i]) for i < min(len(dst), len(src))
// and returns that count, as copy does, with the installed F16Kernel
// (SetF16Kernel) over whole runs of 32: the same values, a NaN's payload
// aside (it stays NaN).
func ToFP16s(dst []FP16, src []float32) int {
	return convertRuns(dst, src, &f16Kernel, ToFP16)
}

// F16Kernel rounds src to binary16 into dst as ToFP16 does (NaN payloads
// aside); len(src) == len(dst), a multiple of 32.
type F16Kernel func(dst []FP16, src []float32)

var f16Kernel atomic.Pointer[F16Kernel]

// SetF16Kernel makes ToFP16s run k (nil: the Go loop only). Package cpu
// installs its F16C kernel at init where the CPU has F16C.
func SetF16Kernel(k F16Kernel) { installKernel(&f16Kernel, k) }

// installKernel stores k in p, or clears p for a nil k: the setters of
// the kernels other packages install.
func installKernel[K F16Kernel | WidenKernel | A8Kernel | EncodeKernel | BitsEncodeKernel](p *atomic.Pointer[K], k K) {
	if k == nil {
		p.Store(nil)
		return
	}
	p.Store(&k)
}

// HasF16Kernel reports whether ToFP16s runs an installed kernel (the Go
// loop takes several nanoseconds per value).
func HasF16Kernel() bool { return f16Kernel.Load() != nil }

// FromFP16s sets dst[i] = src[i].Float32() for i < min(len(dst),
// len(src)) and returns that count, as copy does, with the installed
// WidenKernel (SetWidenKernel) over whole runs of 32: the same values, a
// NaN's payload aside (it stays NaN).
func FromFP16s(dst []float32, src []FP16) int {
	return convertRuns(dst, src, &widenKernel, FP16.Float32)
}

// convertRuns sets dst[i] = one(src[i]) for i < min(len(dst), len(src))
// and returns that count, with the kernel installed in k (if any) over
// the leading whole runs of 32.
func convertRuns[S, D any, K ~func([]D, []S)](dst []D, src []S, k *atomic.Pointer[K], one func(S) D) int {
	m := min(len(dst), len(src))
	n := 0
	if kp := k.Load(); kp != nil {
		if n = m &^ 31; n > 0 {
			(*kp)(dst[:n], src[:n])
		}
	}
	for i := n; i < m; i++ {
		dst[i] = one(src[i])
	}
	return m
}

// WidenKernel widens src to float32 into dst as FP16.Float32 does (NaN
// payloads aside); len(src) == len(dst), a multiple of 32.
type WidenKernel func(dst []float32, src []FP16)

var widenKernel atomic.Pointer[WidenKernel]

// SetWidenKernel makes FromFP16s run k (nil: the Go loop only). Package
// cpu installs its F16C kernel at init where the CPU has F16C.
func SetWidenKernel(k WidenKernel) { installKernel(&widenKernel, k) }

// Float32 widens h to float32 exactly.
func (h FP16) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: value = frac * 2^-24.
	f := float32(frac) * (1.0 / (1 << 24))
	if sign != 0 {
		f = -f
	}
	return f
}
