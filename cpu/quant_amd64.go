//go:build !noasm && !purego

package cpu

import (
	"slices"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
)

// quantizers are the assembly int8 activation quantizers, best first,
// with the features their instructions need.
var quantizers = []struct {
	fn       func(x *float32, groups int, q *int8, scales *float32) int
	requires []string
}{
	{asm.QuantizeA8Avx512, []string{"AVX", "AVX2", "AVX512F", "AVX512BW", "AVX512VL"}},
	{asm.QuantizeA8Avx2, []string{"AVX", "AVX2"}},
}

// swigluRequires are the features of asm.SwiGLUAvx512.
var swigluRequires = []string{"AVX", "AVX512F"}

// encoders are the assembly candidate encoders of layout's quantizers
// (QuantizeQ4G128; QuantizeBits and QuantizeSparse12), best first, with the
// features their instructions need. AVX-512 first: on the 16-core Xeon
// host it quantized 0.75-0.9x the AVX2 set's time (BENCHMARKS.md).
var encoders = []struct {
	name     string
	q4       layout.EncodeKernel
	bits     layout.BitsEncodeKernel
	asm      []any // the assembly q4 and bits call, for the gate test
	requires []string
}{
	{"avx512", q4EncodeAvx512, bitsEncodeAvx512, []any{asm.Q4EncodeAvx512, asm.Q4EncodeAvx2, asm.BitsEncodeAvx512}, []string{"AVX", "AVX2", "AVX512F"}},
	{"avx2", q4EncodeAvx2, bitsEncodeAvx2, []any{asm.Q4EncodeAvx2, asm.BitsEncodeAvx2}, []string{"AVX", "AVX2"}},
}

// Encoders returns the candidate encoders this CPU runs, best first: init
// installs the first that QGEMV_CPU_DISABLE allows (installHelpers) in
// layout; tests check each against layout's Go.
func Encoders() []Encoder {
	var out []Encoder
	for _, e := range encoders {
		if hasAll(e.requires) {
			out = append(out, Encoder{e.name, e.q4, e.bits})
		}
	}
	return out
}

// q4EncodeAvx2 is layout's EncodeKernel on asm.Q4EncodeAvx2 (layout calls
// it with a whole number of eight values and len(q) == len(vals)).
func q4EncodeAvx2(vals []float32, q []uint8, s float32, z uint8, best float64) float64 {
	return asm.Q4EncodeAvx2(&vals[0], len(vals), &q[0], s, float32(z), best)
}

// q4EncodeAvx512 runs asm.Q4EncodeAvx512 on whole runs of sixteen values
// (a group of 128 is one), asm.Q4EncodeAvx2 otherwise.
func q4EncodeAvx512(vals []float32, q []uint8, s float32, z uint8, best float64) float64 {
	if len(vals)%16 != 0 {
		return q4EncodeAvx2(vals, q, s, z, best)
	}
	return asm.Q4EncodeAvx512(&vals[0], len(vals), &q[0], s, float32(z), best)
}

// bitsEncodeAvx2 and bitsEncodeAvx512 are layout's BitsEncodeKernel on
// asm.BitsEncodeAvx2 and asm.BitsEncodeAvx512 (a whole number of eight
// values, len(q) == len(vals)).
func bitsEncodeAvx2(vals []float32, q []uint32, s, z, qmax, best float64) float64 {
	return asm.BitsEncodeAvx2(&vals[0], len(vals), &q[0], s, z, qmax, best)
}

func bitsEncodeAvx512(vals []float32, q []uint32, s, z, qmax, best float64) float64 {
	return asm.BitsEncodeAvx512(&vals[0], len(vals), &q[0], s, z, qmax, best)
}

// encoderName names the encoder installHelpers installed ("": Go's).
var encoderName string

// helperAllowed reports whether an assembly helper (the activation
// quantizer, SwiGLU, a weight encoder, the codebook k-means assignment)
// whose instructions need requires
// runs under EnvDisable: none runs where it leaves only the generic set,
// and no AVX-512 form where it names avx512vnni (which users name to keep
// AVX-512 clocks off); the CPU must have requires.
func helperAllowed(requires []string, disabled []ISA) bool {
	if !hasAll(requires) {
		return false
	}
	if slices.Contains(requires, "AVX512F") && slices.Contains(disabled, AVX512VNNI) {
		return false
	}
	for _, k := range kernelSets {
		if k.isa != Generic && hasAll(k.requires) && !slices.Contains(disabled, k.isa) {
			return true
		}
	}
	return false
}

// installHelpers installs the first allowed form of each helper
// (helperAllowed), and the generic Go where none is.
// It runs in init after asm_amd64.go's, which lists the kernel sets.
func installHelpers(disabled []ISA) {
	layout.SetEncodeKernel(nil)
	layout.SetBitsEncodeKernel(nil)
	encoderName = ""
	for _, e := range encoders {
		if helperAllowed(e.requires, disabled) {
			layout.SetEncodeKernel(e.q4)
			layout.SetBitsEncodeKernel(e.bits)
			encoderName = e.name
			break
		}
	}
	swigluAsm = nil
	if helperAllowed(swigluRequires, disabled) {
		swigluAsm = asm.SwiGLUAvx512
	}
	installNearest(disabled)
	quantAsm = nil
	layout.SetA8Kernel(nil)
	for _, q := range quantizers {
		if helperAllowed(q.requires, disabled) {
			quantAsm = q.fn
			layout.SetA8Kernel(a8Kernel)
			break
		}
	}
}

func init() {
	disabled, _ := Disabled()
	installHelpers(disabled)
}
