//go:build !noasm && !purego

package cpu

import (
	"encoding/binary"
	"slices"
	"sync"
	"unsafe"

	"github.com/klauspost/cpuid/v2"
	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout/ggml"
)

// The GGML block kernels on AVX-512 (asm/ggml_amd64.s): the super-block
// types with int8 activations. Each call covers a range of rows and every
// vector of the batch; prep lays out each vector's activations once per
// call (ggmlActOrder: the column order of the one-vector kernels' code
// bytes; ggmlPrepT: the rows-in-lanes batch kernels' layout) and the int16
// sum of each sub-block's activations.

type ggmlA8Func func(w *byte, stride int, rows int, nsb int, act *int8, astride int, sums *int16, sstride int, xs *float32, xstride int, nvec int, out *float32, ostride int)

// ggmlA8Requires is every feature the kernels' instructions need (GFNI:
// Q3_K's and Q5_K's high bits; the avx512vnni set requires it anyway).
var ggmlA8Requires = []string{"AVX", "AVX2", "AVX512F", "AVX512BW", "AVX512DQ", "AVX512VL", "AVX512VNNI", "BMI2", "F16C", "GFNI"}

var ggmlA8Funcs = map[ggml.Type]ggmlA8Func{
	ggml.Q2_K:   asm.GgmlQ2KA8Avx512,
	ggml.Q3_K:   asm.GgmlQ3KA8Avx512,
	ggml.Q4_K:   asm.GgmlQ4KA8Avx512,
	ggml.Q5_K:   asm.GgmlQ5KA8Avx512,
	ggml.Q6_K:   asm.GgmlQ6KA8Avx512,
	ggml.IQ4_XS: asm.GgmlIQ4XSA8Avx512,
	ggml.Q4_0:   asm.GgmlQ40A8Avx512,
	ggml.Q4_1:   asm.GgmlQ41A8Avx512,
	ggml.Q5_0:   asm.GgmlQ50A8Avx512,
	ggml.Q5_1:   asm.GgmlQ51A8Avx512,
	ggml.Q8_0:   asm.GgmlQ80A8Avx512,
	ggml.IQ4_NL: asm.GgmlIQ4NLA8Avx512,
}

// ggmlA8R4Funcs are the one-vector kernels for four rows at a time (the
// rows in the lanes of the float steps, and for the super-block types of
// the reductions), for batch 1.
var ggmlA8R4Funcs = map[ggml.Type]ggmlA8Func{
	ggml.Q2_K:   asm.GgmlQ2KA8R4Avx512,
	ggml.Q3_K:   asm.GgmlQ3KA8R4Avx512,
	ggml.Q4_K:   asm.GgmlQ4KA8R4Avx512,
	ggml.Q5_K:   asm.GgmlQ5KA8R4Avx512,
	ggml.Q6_K:   asm.GgmlQ6KA8R4Avx512,
	ggml.IQ4_XS: asm.GgmlIQ4XSA8R4Avx512,
	ggml.Q4_0:   asm.GgmlQ40A8R4Avx512,
	ggml.Q4_1:   asm.GgmlQ41A8R4Avx512,
	ggml.Q5_0:   asm.GgmlQ50A8R4Avx512,
	ggml.Q5_1:   asm.GgmlQ51A8R4Avx512,
	ggml.Q8_0:   asm.GgmlQ80A8R4Avx512,
	ggml.IQ4_NL: asm.GgmlIQ4NLA8R4Avx512,
}

// ggmlA8R4PfL1Funcs are ggmlA8R4Funcs prefetching the next four rows into
// L1 instead of L2, run where ggmlR4L1 says.
var ggmlA8R4PfL1Funcs = map[ggml.Type]ggmlA8Func{
	ggml.Q2_K: asm.GgmlQ2KA8R4PfL1Avx512, ggml.Q3_K: asm.GgmlQ3KA8R4PfL1Avx512, ggml.Q4_K: asm.GgmlQ4KA8R4PfL1Avx512,
	ggml.Q5_K: asm.GgmlQ5KA8R4PfL1Avx512, ggml.Q6_K: asm.GgmlQ6KA8R4PfL1Avx512, ggml.IQ4_XS: asm.GgmlIQ4XSA8R4PfL1Avx512,
	ggml.Q4_0: asm.GgmlQ40A8R4PfL1Avx512, ggml.Q4_1: asm.GgmlQ41A8R4PfL1Avx512, ggml.Q5_0: asm.GgmlQ50A8R4PfL1Avx512,
	ggml.Q5_1: asm.GgmlQ51A8R4PfL1Avx512, ggml.Q8_0: asm.GgmlQ80A8R4PfL1Avx512, ggml.IQ4_NL: asm.GgmlIQ4NLA8R4PfL1Avx512,
}

// ggmlA8R4PfLeadFuncs are ggmlA8R4PfL1Funcs prefetching 2 KiB (at most
// half a row) ahead in each of the four rows instead of the next four
// rows in order, run where ggmlR4Lead says; Q2_K and Q3_K, bound by their
// arithmetic at about 18 GB/s a core, keep the PfL1 kernels (Q3_K's lead
// variant ran 1.1x their time).
var ggmlA8R4PfLeadFuncs = map[ggml.Type]ggmlA8Func{
	ggml.Q4_K: asm.GgmlQ4KA8R4PfLeadAvx512, ggml.Q5_K: asm.GgmlQ5KA8R4PfLeadAvx512,
	ggml.Q6_K: asm.GgmlQ6KA8R4PfLeadAvx512, ggml.IQ4_XS: asm.GgmlIQ4XSA8R4PfLeadAvx512,
	ggml.Q4_0: asm.GgmlQ40A8R4PfLeadAvx512, ggml.Q4_1: asm.GgmlQ41A8R4PfLeadAvx512, ggml.Q5_0: asm.GgmlQ50A8R4PfLeadAvx512,
	ggml.Q5_1: asm.GgmlQ51A8R4PfLeadAvx512, ggml.Q8_0: asm.GgmlQ80A8R4PfLeadAvx512, ggml.IQ4_NL: asm.GgmlIQ4NLA8R4PfLeadAvx512,
}

// ggmlR4L1 (cpu/ggml.go) enables ggmlA8R4PfL1Funcs (l1PrefetchCPU): on
// Zen 5 the Q4_K_M decode step took 0.84x the time with one thread and
// 0.93x with two (three alternating rounds), where on Zen 4 the next four
// rows of 4096x14336 Q4_K evicted themselves from its 32 KiB L1 and
// streamed at half the rate. On Zen 5 that holds for tiles larger than
// its 48 KiB L1 too: Q8_0 4096x14336 (61 KB tiles) took 0.89-0.94x the
// time on two threads (five alternating rounds) and 0.91-0.93x on one,
// and 4096x28672 rows of Q4_0, Q4_K, Q5_K, Q6_K and Q8_0 (64-122 KB
// tiles) streamed at 79-91% of the read meter against 58-83%. Intel cores
// with 48 KiB of L1D run them too: on a 2-core Emerald Rapids VM the
// Q4_0 and Q4_K_M decode steps reached a larger share of the read meter
// in 15 of 16 alternating pairs (medians, two threads, 65.7 -> 70.1% and
// 70.5 -> 73.7%; one thread 61.7 -> 69.9% and 62.1 -> 68.0%), while on
// the 16-core Xeon host they measured neither faster nor slower.
//
// ggmlR4Lead: wherever the L1 variants run, the lead variants replace them
// on rows where four rows keep ggmlLeadMin bytes in flight (leadFits).
// Alternated call by call in one process from DRAM
// (TestGGMLPrefetchAB), on Zen 5 (two threads) they took 0.78-0.94x the
// PfL1 ones' time on 4096x14336, 14336x4096 and 1024x4096 (four rows of
// 4096x14336 Q6_K, 47 KB, and the next four prefetched overflow its 48
// KiB L1; where they fit a steady lead still streamed faster). On the
// 16-core Xeon host (16 threads / one) 4096x14336 took 0.84-0.88x /
// 0.82-0.87x and 14336x4096 Q6_K (rows of 3.4 KB) 0.94x / 0.90x, but
// Q4_K and Q4_0 there (2.3 KB) 1.02x and 1.02x / 1.04x and 0.95x, and
// 1024x4096 Q4_K 1.01x / 1.02x: Intel takes them from 6 KiB in flight.
func init() {
	ggmlR4L1 = l1PrefetchCPU() || cpuid.CPU.VendorID == cpuid.Intel && cpuid.CPU.Cache.L1D >= 48<<10
	ggmlR4Lead = ggmlR4L1
	if !l1PrefetchCPU() {
		ggmlLeadMin = 6 << 10
	}
}

// ggmlLeadMin is the bytes in flight from which the lead variants run
// (leadFits).
var ggmlLeadMin = 4 << 10

// ggmlR4VBMIRequires are the features the split four-row kernels
// (ggmlR4Split) unpack their codes with; without them the row-at-a-time
// kernel runs their rows.
var ggmlR4VBMIRequires = []string{"AVX512VBMI", "GFNI"}

// ggmlR4Requires returns the features type t's AVX-512 four-row kernel
// needs beyond ggmlA8Requires: the split types' ggmlR4VBMIRequires.
func ggmlR4Requires(t ggml.Type) []string {
	if ggmlR4Split[t] {
		return ggmlR4VBMIRequires
	}
	return nil
}

// ggmlR4Split are the 4-bit block types, whose AVX-512 four-row kernels
// read the activations split by nibble (ggmlSplitOrder; unrelated to the
// YMM sets' paired kernels): one VPERMT2B gathers a group's code
// bytes, the low and high nibbles multiply into one accumulator per row
// (Q5_x: their qh bits set by two VPMULTISHIFTQB), and the
// rows reduce in two levels instead of three. Where they run, the rows
// past a multiple of four run on them too, zero-padded (ggmlPerVector),
// so no kernel reads the column order.
var ggmlR4Split = map[ggml.Type]bool{ggml.Q4_0: true, ggml.Q4_1: true, ggml.IQ4_NL: true, ggml.Q5_0: true, ggml.Q5_1: true}

// ggmlSplitOrder is ggmlActOrder's form of the split order: per 128
// columns (four blocks) columns 0..15 of each block, then 16..31.
var ggmlSplitOrder = [8]int{0, 32, 64, 96, 16, 48, 80, 112}

type ggmlA8M16Func func(w *byte, stride int, rows int, nsb int, act *int8, astride int, sums *int32, xs *float32, nvec int, out *float32)

type ggmlF32Func func(w *byte, stride int, rows int, nsb int, x *float32, nvec int, tmp *byte, accs *float32, out *float32, ostride int)

// ggmlF32Funcs are the float-activation kernels (every type).
var ggmlF32Funcs = map[ggml.Type]ggmlF32Func{
	ggml.Q2_K:   asm.GgmlQ2KF32Avx512,
	ggml.Q3_K:   asm.GgmlQ3KF32Avx512,
	ggml.Q4_K:   asm.GgmlQ4KF32Avx512,
	ggml.Q5_K:   asm.GgmlQ5KF32Avx512,
	ggml.Q6_K:   asm.GgmlQ6KF32Avx512,
	ggml.IQ4_XS: asm.GgmlIQ4XSF32Avx512,
	ggml.Q4_0:   asm.GgmlQ40F32Avx512,
	ggml.Q4_1:   asm.GgmlQ41F32Avx512,
	ggml.Q5_0:   asm.GgmlQ50F32Avx512,
	ggml.Q5_1:   asm.GgmlQ51F32Avx512,
	ggml.Q8_0:   asm.GgmlQ80F32Avx512,
	ggml.IQ4_NL: asm.GgmlIQ4NLF32Avx512,
}

// ggmlA8AVX2Requires is every feature the AVX2 kernels' instructions need.
var ggmlA8AVX2Requires = []string{"AVX", "AVX2", "BMI2", "F16C"}

// ggmlA8M16AVXVNNIFuncs and ggmlA8M16AVXVNNISmallFuncs are the avxvnni
// set's batch kernels of IQ4_XS in column order (VPDPBUSD on KValues +
// 128, which AVX2 has no way to multiply without the sign trick), for at
// least ggmlM16FullFrom vectors (all 16 lanes; activations laid out by
// ggmlPrepM16) and from ggmlM16AVX2From (the pairs that hold the batch).
// The avx2 set's batch kernels are the pair-order ones (ggmlPairs).
var (
	ggmlA8M16AVXVNNIFuncs = map[ggml.Type]ggmlA8M16Func{
		ggml.IQ4_XS: asm.GgmlIQ4XSA8M16FullAvxVnni,
	}
	ggmlA8M16AVXVNNISmallFuncs = map[ggml.Type]ggmlA8M16Func{
		ggml.IQ4_XS: asm.GgmlIQ4XSA8M16AvxVnni,
	}
)

// ggmlA8TFunc is a rows-in-lanes kernel of M vector slots: 16 rows from w
// (stride bytes apart) over nsb super-blocks, the activations as
// ggmlPrepT lays them out, the results added to out[16v + r] (slot v, row
// r).
type ggmlA8TFunc func(w *byte, stride int, nsb int, act *int8, out *float32)

// ggmlA8TFuncs are the rows-in-lanes kernels by vector slots: each
// VPDPBUSD multiplies four codes of 16 rows by four activations of one
// vector, so no sum ends in a reduction. ggmlTKernel picks the slots for
// a batch.
var ggmlA8TFuncs = map[int]map[ggml.Type]ggmlA8TFunc{
	4: {
		ggml.Q2_K:   asm.GgmlQ2KA8T4Avx512,
		ggml.Q3_K:   asm.GgmlQ3KA8T4Avx512,
		ggml.Q4_K:   asm.GgmlQ4KA8T4Avx512,
		ggml.Q5_K:   asm.GgmlQ5KA8T4Avx512,
		ggml.Q6_K:   asm.GgmlQ6KA8T4Avx512,
		ggml.IQ4_XS: asm.GgmlIQ4XSA8T4Avx512,
		ggml.Q4_0:   asm.GgmlQ40A8T4Avx512,
		ggml.Q4_1:   asm.GgmlQ41A8T4Avx512,
		ggml.Q5_0:   asm.GgmlQ50A8T4Avx512,
		ggml.Q5_1:   asm.GgmlQ51A8T4Avx512,
		ggml.Q8_0:   asm.GgmlQ80A8T4Avx512,
		ggml.IQ4_NL: asm.GgmlIQ4NLA8T4Avx512,
	},
	8: {
		ggml.Q2_K:   asm.GgmlQ2KA8T8Avx512,
		ggml.Q3_K:   asm.GgmlQ3KA8T8Avx512,
		ggml.Q4_K:   asm.GgmlQ4KA8T8Avx512,
		ggml.Q5_K:   asm.GgmlQ5KA8T8Avx512,
		ggml.Q6_K:   asm.GgmlQ6KA8T8Avx512,
		ggml.IQ4_XS: asm.GgmlIQ4XSA8T8Avx512,
		ggml.Q4_0:   asm.GgmlQ40A8T8Avx512,
		ggml.Q4_1:   asm.GgmlQ41A8T8Avx512,
		ggml.Q5_0:   asm.GgmlQ50A8T8Avx512,
		ggml.Q5_1:   asm.GgmlQ51A8T8Avx512,
		ggml.Q8_0:   asm.GgmlQ80A8T8Avx512,
		ggml.IQ4_NL: asm.GgmlIQ4NLA8T8Avx512,
	},
	16: {
		ggml.Q2_K:   asm.GgmlQ2KA8T16Avx512,
		ggml.Q3_K:   asm.GgmlQ3KA8T16Avx512,
		ggml.Q4_K:   asm.GgmlQ4KA8T16Avx512,
		ggml.Q5_K:   asm.GgmlQ5KA8T16Avx512,
		ggml.Q6_K:   asm.GgmlQ6KA8T16Avx512,
		ggml.IQ4_XS: asm.GgmlIQ4XSA8T16Avx512,
		ggml.Q4_0:   asm.GgmlQ40A8T16Avx512,
		ggml.Q4_1:   asm.GgmlQ41A8T16Avx512,
		ggml.Q5_0:   asm.GgmlQ50A8T16Avx512,
		ggml.Q5_1:   asm.GgmlQ51A8T16Avx512,
		ggml.Q8_0:   asm.GgmlQ80A8T16Avx512,
		ggml.IQ4_NL: asm.GgmlIQ4NLA8T16Avx512,
	},
}

// ggmlA8TAVX2Funcs are the AVX2 rows-in-lanes kernels, by slots; their
// activations and output are those of the AVX-512 ones.
var ggmlA8TAVX2Funcs = map[int]map[ggml.Type]ggmlA8TFunc{
	4:  {ggml.Q4_0: asm.GgmlQ40A8T4Avx2, ggml.Q4_1: asm.GgmlQ41A8T4Avx2, ggml.Q5_0: asm.GgmlQ50A8T4Avx2, ggml.Q5_1: asm.GgmlQ51A8T4Avx2, ggml.Q8_0: asm.GgmlQ80A8T4Avx2, ggml.IQ4_NL: asm.GgmlIQ4NLA8T4Avx2},
	8:  {ggml.Q4_0: asm.GgmlQ40A8T8Avx2, ggml.Q4_1: asm.GgmlQ41A8T8Avx2, ggml.Q5_0: asm.GgmlQ50A8T8Avx2, ggml.Q5_1: asm.GgmlQ51A8T8Avx2, ggml.Q8_0: asm.GgmlQ80A8T8Avx2, ggml.IQ4_NL: asm.GgmlIQ4NLA8T8Avx2},
	16: {ggml.Q4_0: asm.GgmlQ40A8T16Avx2, ggml.Q4_1: asm.GgmlQ41A8T16Avx2, ggml.Q5_0: asm.GgmlQ50A8T16Avx2, ggml.Q5_1: asm.GgmlQ51A8T16Avx2, ggml.Q8_0: asm.GgmlQ80A8T16Avx2, ggml.IQ4_NL: asm.GgmlIQ4NLA8T16Avx2},
}

// ggmlA8TAVXVNNIFuncs are ggmlA8TAVX2Funcs with VEX VPDPBUSD, for the
// avxvnni kernel set, from batch 2 for every type (with no sign trick,
// one Zen 5 core in L2 at batch 2: IQ4_NL 42 against 74 us for a pass
// per vector, Q8_0 56 against 80, Q4_0 40 against 52).
var ggmlA8TAVXVNNIFuncs = map[int]map[ggml.Type]ggmlA8TFunc{
	4:  {ggml.Q4_0: asm.GgmlQ40A8T4AvxVnni, ggml.Q4_1: asm.GgmlQ41A8T4AvxVnni, ggml.Q5_0: asm.GgmlQ50A8T4AvxVnni, ggml.Q5_1: asm.GgmlQ51A8T4AvxVnni, ggml.Q8_0: asm.GgmlQ80A8T4AvxVnni, ggml.IQ4_NL: asm.GgmlIQ4NLA8T4AvxVnni},
	8:  {ggml.Q4_0: asm.GgmlQ40A8T8AvxVnni, ggml.Q4_1: asm.GgmlQ41A8T8AvxVnni, ggml.Q5_0: asm.GgmlQ50A8T8AvxVnni, ggml.Q5_1: asm.GgmlQ51A8T8AvxVnni, ggml.Q8_0: asm.GgmlQ80A8T8AvxVnni, ggml.IQ4_NL: asm.GgmlIQ4NLA8T8AvxVnni},
	16: {ggml.Q4_0: asm.GgmlQ40A8T16AvxVnni, ggml.Q4_1: asm.GgmlQ41A8T16AvxVnni, ggml.Q5_0: asm.GgmlQ50A8T16AvxVnni, ggml.Q5_1: asm.GgmlQ51A8T16AvxVnni, ggml.Q8_0: asm.GgmlQ80A8T16AvxVnni, ggml.IQ4_NL: asm.GgmlIQ4NLA8T16AvxVnni},
}

// ggmlA8AVXVNNIRequires is every feature the AVX-VNNI GGML kernels need.
var ggmlA8AVXVNNIRequires = []string{"AVX", "AVX2", "AVXVNNI", "BMI2", "F16C"}

// ggmlTAVX2From is the smallest batch the AVX2 rows-in-lanes kernels run,
// by type: Q8_0's (two more operations per vector and step than Q4_0's,
// for the sign trick) took 1.5x the row kernel's time at batch 2 and
// 0.51x at 4 (decode steps on the Zen 4 VM's AVX2 set); Q4_0's 0.53x at 2.
var ggmlTAVX2From = map[ggml.Type]int{ggml.Q4_0: 2, ggml.Q4_1: 2, ggml.Q5_0: 2, ggml.Q5_1: 2, ggml.Q8_0: 3, ggml.IQ4_NL: 3}

// ggmlT4From, ggmlT8From and ggmlT16From are the smallest batches the
// rows-in-lanes kernels of 4, 8 and 16 slots run.
const (
	ggmlT4From  = 2
	ggmlT8From  = 5
	ggmlT16From = 9
)

// ggmlTFrom is the smallest batch the rows-in-lanes kernels run for the
// types where that is above ggmlT4From: Q5_0's and Q5_1's (their qh
// gathered and spread per block) took 1.2x the time of a pass per vector
// at batch 2 and 0.8x at 3 (4096x14336, two Zen 4 cores).
var ggmlTFrom = map[ggml.Type]int{ggml.Q5_0: 3, ggml.Q5_1: 3}

// ggmlTKernel returns the rows-in-lanes kernel for a batch and its vector
// slots (nil if none runs it).
func ggmlTKernel(t ggml.Type, batch int) (ggmlA8TFunc, int) {
	slots := ggmlTSlots(batch)
	if slots == 0 || batch < ggmlTFrom[t] {
		return nil, 0
	}
	return ggmlA8TFuncs[slots][t], slots
}

// ggmlTSlots returns the vector slots of the rows-in-lanes kernel a batch
// runs on (0: below ggmlT4From).
func ggmlTSlots(batch int) int {
	switch {
	case batch >= ggmlT16From:
		return 16
	case batch >= ggmlT8From:
		return 8
	case batch >= ggmlT4From:
		return 4
	}
	return 0
}

// ggmlTLayout is the layout of one super-block's activations for a
// rows-in-lanes kernel of M slots and a type with sub-column sub-blocks
// (gen ggmlT16LayoutM): M vector slots of 256 int8 in column order (zero
// past the batch); per half h and slot v the np = 128/sub/2 dwords of
// int16 sums of the half's sub-blocks (2p, 2p+1) at pairs + 4np*(M*h + v)
// + 4p; per half and slot the float32 scale at xs + 4*(M*h + v); size
// bytes in all.
func ggmlTLayout(sub, M int) (np, pairs, xs, size int) {
	np = 128 / sub / 2
	pairs = 256 * M
	xs = pairs + 2*M*4*np
	return np, pairs, xs, xs + 2*M*4
}

// ggmlPrepT lays out the activations for the rows-in-lanes kernels
// (ggmlTLayout, c.slots slots), the super-blocks split between the
// backend's threads (one thread would take 2-4% of a batch-16 multiply).
// The sub-block sums are taken from the copied bytes (c.sums is not used).
func ggmlPrepT(mx *GGMLMatrix, c *ggmlCall) {
	m := mx.m
	_, _, _, size := ggmlTLayout(m.Type.SubLen(), c.slots)
	nsb := m.PCols / 256
	c.act8 = growAct(c, nsb*size)
	_ = mx.b.forJob(nsb, ggmlPrepTGrain, ggmlPrepTJob{c})
}

// ggmlPrepTGrain is the fewest super-blocks a thread prepares.
const ggmlPrepTGrain = 8

// ggmlPrepTJob prepares super-blocks [k0, k1) for ggmlPrepT (one pointer:
// as a rangeJob it allocates nothing).
type ggmlPrepTJob struct{ c *ggmlCall }

func (j ggmlPrepTJob) do(k0, k1 int) error {
	c := j.c
	m := c.mx.m
	M := c.slots
	pc, sub := m.PCols, m.Type.SubLen()
	np, po, xo, size := ggmlTLayout(sub, M)
	var sums [16]int16
	for k := k0; k < k1; k++ {
		blk := c.act8[k*size : (k+1)*size]
		clear(blk[256*c.batch:])
		pairs := unsafe.Slice((*uint32)(unsafe.Pointer(&blk[po])), 2*M*np)
		xs := unsafe.Slice((*float32)(unsafe.Pointer(&blk[xo])), 2*M)
		for v := 0; v < c.batch; v++ {
			a := blk[256*v : 256*v+256]
			copy(a, c.xq[v*pc+256*k:v*pc+256*k+256])
			sumsInt8(sums[:256/sub], a, sub)
			for h := 0; h < 2; h++ {
				for p := 0; p < np; p++ {
					j := 2*np*h + 2*p
					pairs[np*(M*h+v)+p] = uint32(uint16(sums[j])) | uint32(uint16(sums[j+1]))<<16
				}
				xs[M*h+v] = c.xs[v*pc/128+2*k+h]
			}
		}
	}
	return nil
}

// ggmlT32Shift is the codes' offset (as a power of two) of the
// 32-element types with rows-in-lanes kernels: their kernels take the
// codes as unsigned q + 2^shift (gen ggmlSmalls). Q4_1 and Q5_1 have none
// (0): their start values, minus the blocks' activation sums, feed the M
// term instead.
var ggmlT32Shift = map[ggml.Type]uint{ggml.Q4_0: 3, ggml.Q4_1: 0, ggml.Q5_0: 4, ggml.Q5_1: 0, ggml.Q8_0: 7, ggml.IQ4_NL: 7}

// ggmlT32Layout is the layout of one group of four 32-element blocks'
// activations for a rows-in-lanes kernel of M slots (gen ggmlBlockA8T):
// slot v's 128 int8 in column order at 128v, its int32 start values
// (-2^shift times block b's activation sum) at init + 16v + 4b, its
// float32 scale at xs + 4v; size bytes in all (zeros past the batch).
func ggmlT32Layout(M int) (init, xs, size int) {
	return 128 * M, 144 * M, 148 * M
}

// ggmlPrepT32 lays out the activations for the 32-element rows-in-lanes
// kernels (ggmlT32Layout, c.slots slots), the groups split between the
// backend's threads.
func ggmlPrepT32(mx *GGMLMatrix, c *ggmlCall) {
	_, _, size := ggmlT32Layout(c.slots)
	c.act8 = growAct(c, mx.m.PCols/128*size)
	_ = mx.b.forJob(mx.m.PCols/128, ggmlPrepTGrain, ggmlPrepT32Job{c})
}

// ggmlPrepT32Job prepares groups [k0, k1) for ggmlPrepT32.
type ggmlPrepT32Job struct{ c *ggmlCall }

func (j ggmlPrepT32Job) do(k0, k1 int) error {
	c := j.c
	m := c.mx.m
	M, pc, sh := c.slots, m.PCols, ggmlT32Shift[m.Type]
	io, xo, size := ggmlT32Layout(M)
	for k := k0; k < k1; k++ {
		blk := c.act8[k*size : (k+1)*size]
		clear(blk[128*c.batch:]) // the slots past the batch (the vectors' bytes are copied below)
		init := unsafe.Slice((*int32)(unsafe.Pointer(&blk[io])), 4*M)
		xs := unsafe.Slice((*float32)(unsafe.Pointer(&blk[xo])), M)
		for v := 0; v < c.batch; v++ {
			a := blk[128*v : 128*v+128]
			copy(a, c.xq[v*pc+128*k:v*pc+128*k+128])
			for b := 0; b < 4; b++ {
				init[4*v+b] = -sumInt8(a[32*b:32*b+32]) << sh
			}
			xs[v] = c.xs[v*pc/128+k]
		}
	}
	return nil
}

// ggmlRunT runs a rows-in-lanes kernel of M slots on rows [r0, r1), 16
// at a time; a last group of fewer rows runs on a zero-padded copy.
func ggmlRunT(fn ggmlA8TFunc, M int, mx *GGMLMatrix, c *ggmlCall, r0, r1 int) {
	m := mx.m
	t := ggmlTemps.Get().(*ggmlTemp)
	defer ggmlTemps.Put(t)
	out := t.out[:16*M]
	rb, nsb := m.RowBytes(), m.PCols/256
	if !m.Type.Super() { // groups of four 32-element blocks
		nsb = m.PCols / 128
	}
	for a := r0; a < r1; a += 16 {
		n := min(16, r1-a)
		w := m.Data[a*rb:]
		if n < 16 {
			w = t.padRows(m.Data[a*rb:(a+n)*rb], 16*rb)
		}
		clear(out)
		fn(&w[0], rb, nsb, &c.act8[0], &out[0])
		for v := 0; v < c.batch; v++ {
			copy(c.dst[v*m.Rows+a:v*m.Rows+a+n], out[16*v:16*v+n])
		}
	}
}

// ggmlM16AVX2From is the smallest batch the AVX2 batch kernels run: on
// two Zen 4 cores (4096x14336) the one-vector kernel per vector was
// faster at batch 2 (Q4_K 3.5-3.8 against 4.5-5.2 ms), neither at 4, the
// pairs kernel at 8 (Q4_K 6.7-8.7 against 9.5-9.9 ms, Q6_K 6.2-9.3
// against 14-20).
const ggmlM16AVX2From = 5

// ggmlA8AVX2Funcs are the AVX2 one-vector kernels (activations in column
// order), for the avx2 and avxvnni kernel sets.
var ggmlA8AVX2Funcs = map[ggml.Type]ggmlA8Func{
	ggml.Q4_0:   asm.GgmlQ40A8Avx2,
	ggml.Q4_1:   asm.GgmlQ41A8Avx2,
	ggml.Q5_0:   asm.GgmlQ50A8Avx2,
	ggml.Q5_1:   asm.GgmlQ51A8Avx2,
	ggml.Q8_0:   asm.GgmlQ80A8Avx2,
	ggml.IQ4_NL: asm.GgmlIQ4NLA8Avx2,
}

// ggmlF32AVX2Requires is every feature the AVX2 float kernels need.
var ggmlF32AVX2Requires = []string{"AVX", "AVX2", "BMI2", "F16C", "FMA3"}

// ggmlF32AVX2Funcs are the AVX2 float-activation kernels.
var ggmlF32AVX2Funcs = map[ggml.Type]ggmlF32Func{
	ggml.IQ4_XS: asm.GgmlIQ4XSF32Avx2,
	ggml.Q4_0:   asm.GgmlQ40F32Avx2,
	ggml.Q4_1:   asm.GgmlQ41F32Avx2,
	ggml.Q5_0:   asm.GgmlQ50F32Avx2,
	ggml.Q5_1:   asm.GgmlQ51F32Avx2,
	ggml.Q8_0:   asm.GgmlQ80F32Avx2,
	ggml.IQ4_NL: asm.GgmlIQ4NLF32Avx2,
}

// ggmlA8R4AVX2Funcs are the AVX2 four-row batch-1 kernels.
var ggmlA8R4AVX2Funcs = map[ggml.Type]ggmlA8Func{
	ggml.Q4_0:   asm.GgmlQ40A8R4Avx2,
	ggml.Q4_1:   asm.GgmlQ41A8R4Avx2,
	ggml.Q5_0:   asm.GgmlQ50A8R4Avx2,
	ggml.Q5_1:   asm.GgmlQ51A8R4Avx2,
	ggml.Q8_0:   asm.GgmlQ80A8R4Avx2,
	ggml.IQ4_NL: asm.GgmlIQ4NLA8R4Avx2,
}

// ggmlA8AVXVNNIFuncs and ggmlA8R4AVXVNNIFuncs are one-vector kernels with
// AVX-VNNI instructions, for the avxvnni kernel set: IQ4_XS's in column
// order (the scale words' VPMADDWD and VPADDD as one VPDPWSSD) and
// IQ4_NL's, whose codes become KValues + 128 with VPDPBUSD instead of
// taking the sign trick (one Zen 5 core in L2, 256x4096: 26.8 against
// 32.6 us). The other 32-element types' one-vector kernels measured even
// with VPDPBUSD (their AVX2 kernels sum pairs in int16) and keep the AVX2
// ones; the paired four-row kernels (ggmlR4PairsAVX2) of IQ4_NL, Q4_0
// and Q4_1 take VPDPBUSD too (one Zen 5 core in L2, four alternating
// rounds: IQ4_NL 32.2 -> 24.2 us against the per-row AVX-VNNI kernel,
// Q4_0 24.0 -> 22.1 and Q4_1 27.8 -> 26.1 against the paired AVX2 one).
var (
	ggmlA8AVXVNNIFuncs = map[ggml.Type]ggmlA8Func{
		ggml.IQ4_XS: asm.GgmlIQ4XSA8AvxVnni,
		ggml.IQ4_NL: asm.GgmlIQ4NLA8AvxVnni,
	}
	ggmlA8R4AVXVNNIFuncs = map[ggml.Type]ggmlA8Func{
		ggml.IQ4_XS: asm.GgmlIQ4XSA8R4AvxVnni,
		ggml.IQ4_NL: asm.GgmlIQ4NLA8R4AvxVnni,
		ggml.Q4_0:   asm.GgmlQ40A8R4AvxVnni,
		ggml.Q4_1:   asm.GgmlQ41A8R4AvxVnni,
	}
)

// ggmlActOrder gives, for each type whose kernel reads the activations of
// every 128 columns in another order, the source offsets of its 16-byte
// runs (nil: column order).
var ggmlActOrder = map[ggml.Type][8]int{
	ggml.Q4_K:   {0, 16, 64, 80, 32, 48, 96, 112},
	ggml.Q5_K:   {0, 16, 64, 80, 32, 48, 96, 112},
	ggml.IQ4_XS: {0, 32, 64, 96, 16, 48, 80, 112},
}

func init() {
	for t, fn := range ggmlA8Funcs {
		t, fn := t, fn
		ggmlKernels[t] = func(isa ISA) *ggmlKernel {
			f32, avx2, f32avx2, r4, r4avx2 := ggmlF32Funcs[t], ggmlA8AVX2Funcs[t], ggmlF32AVX2Funcs[t], ggmlA8R4Funcs[t], ggmlA8R4AVX2Funcs[t]
			if pk, ok := ggmlPairs[t]; ok && (isa == AVX2 || isa == AVXVNNI && !pk.avx2Only) {
				if !hasAll(ggmlPairsRequires) {
					return nil
				}
				return ggmlPairsKernel(isa, pk)
			}
			if (isa == AVX2 || isa == AVXVNNI) && ggmlQhRepack[t] != nil && !hasAll(ggmlF32AVX2Requires) {
				return nil // the float kernel must read the repacked copy too
			}
			vnni := isa == AVXVNNI && hasAll(ggmlA8AVXVNNIRequires)
			if f := ggmlA8AVXVNNIFuncs[t]; vnni && f != nil { // the AVX-VNNI variants where a type has them
				avx2 = f
			}
			if f := ggmlA8R4AVXVNNIFuncs[t]; vnni && f != nil {
				r4avx2 = f
			}
			if (isa == AVX2 || isa == AVXVNNI) && avx2 != nil && hasAll(ggmlA8AVX2Requires) {
				var m16avx2, m16avx2Small ggmlA8M16Func
				tFuncs := ggmlA8TAVX2Funcs
				if vnni {
					tFuncs = ggmlA8TAVXVNNIFuncs
					m16avx2, m16avx2Small = ggmlA8M16AVXVNNIFuncs[t], ggmlA8M16AVXVNNISmallFuncs[t]
				}
				batchKernel := func(batch int) ggmlA8M16Func {
					switch {
					case m16avx2 != nil && ggmlM16Full(batch):
						return m16avx2
					case m16avx2Small != nil && batch >= ggmlM16AVX2From:
						return m16avx2Small
					}
					return nil
				}
				tKernel := func(batch int) (ggmlA8TFunc, int) { // rows in lanes (the 32-element types)
					from, ok := ggmlTAVX2From[t]
					if vnni {
						from = ggmlT4From // see ggmlA8TAVXVNNIFuncs
					}
					if !ok || batch < from {
						return nil, 0
					}
					slots := ggmlTSlots(batch)
					return tFuncs[slots][t], slots
				}
				k := &ggmlKernel{isa: isa, minCode: t == ggml.Q8_0, repack: ggmlQhRepack[t], prep: func(mx *GGMLMatrix, c *ggmlCall) {
					c.slots = 0
					if fn, slots := tKernel(c.batch); fn != nil {
						c.slots = slots
						ggmlPrepT32(mx, c)
						return
					}
					ggmlPrepSums(mx, c)
					if batchKernel(c.batch) != nil {
						ggmlPrepM16(mx.m, c, c.xq, false)
					}
				}}
				if hasAll(ggmlF32AVX2Requires) {
					k.f32 = ggmlF32Runner(f32avx2)
				}
				k.a8 = func(mx *GGMLMatrix, c *ggmlCall, r0, r1 int) {
					if r1 <= r0 {
						return
					}
					m := mx.m
					if c.slots > 0 { // prep chose a rows-in-lanes kernel
						ggmlRunT(tFuncs[c.slots][t], c.slots, mx, c, r0, r1)
						return
					}
					if fn := batchKernel(c.batch); fn != nil {
						ggmlRunM16(fn, m, c, r0, r1)
						return
					}
					pc, sub := m.PCols, m.Type.SubLen()
					run := func(k ggmlA8Func, a, b int) {
						k(&m.Data[a*m.RowBytes()], m.RowBytes(), b-a, pc/max(m.Type.BlockElems(), 128),
							&c.xq[0], pc, &c.sums[0], 2*pc/sub, &c.xs[0], 4*pc/128, c.batch, &c.dst[a], 4*m.Rows)
					}
					if r4avx2 != nil && c.batch == 1 && r1-r0 >= 4 {
						four := r0 + (r1-r0)&^3
						run(r4avx2, r0, four)
						r0 = four
					}
					if r0 < r1 {
						run(avx2, r0, r1)
					}
				}
				return k
			}
			if isa != AVX512VNNI || !hasAll(ggmlA8Requires) {
				return nil
			}
			r4l1, r4lead := ggmlA8R4PfL1Funcs[t], ggmlA8R4PfLeadFuncs[t]
			if !hasAll(ggmlR4Requires(t)) {
				r4, r4l1, r4lead = nil, nil, nil
			}
			split := r4 != nil && ggmlR4Split[t]
			prep := ggmlPrep
			if split {
				prep = func(mx *GGMLMatrix, c *ggmlCall) { ggmlPrepOrder(mx, c, &ggmlSplitOrder) }
			}
			return &ggmlKernel{isa: isa, prep: prep, f32: ggmlF32Runner(f32), a8: func(mx *GGMLMatrix, c *ggmlCall, r0, r1 int) {
				m := mx.m
				pc := m.PCols
				if r1 <= r0 {
					return
				}
				if c.slots > 0 { // ggmlPrep chose a rows-in-lanes kernel
					ggmlRunT(ggmlA8TFuncs[c.slots][t], c.slots, mx, c, r0, r1)
					return
				}
				sub := m.Type.SubLen()
				run := func(k ggmlA8Func, a, b int) {
					// nsb: super-blocks, or groups of four 32-element blocks
					k(&m.Data[a*m.RowBytes()], m.RowBytes(), b-a, pc/max(m.Type.BlockElems(), 128),
						&c.act8[0], pc, &c.sums[0], 2*pc/sub, &c.xs[0], 4*pc/128,
						c.batch, &c.dst[a], 4*m.Rows)
				}
				if r4 != nil && c.batch > 1 {
					// The block types without rows-in-lanes kernels: a
					// pass per vector with the four-row kernel over row
					// chunks that stay in L2 took 0.57-0.82x the time of
					// the row kernel's loop over the vectors (decode steps
					// of Q4_0 and Q8_0 models on the Zen 4 VM, batches 2
					// to 16), which holds each row's codes in a register
					// but reduces and scales every vector apart.
					one := fn
					if split { // the row kernel reads column order: pad the rest to four rows
						one = nil
					}
					ggmlPerVector(r4, one, m, c, &c.act8[0], r0, r1)
					return
				}
				k := r4
				if r4l1 != nil && ggmlR4L1 {
					k = r4l1
					if r4lead != nil && ggmlR4Lead && leadFits(4, m.RowBytes(), ggmlLeadMin) {
						k = r4lead
					}
				}
				if split { // batch 1 (batches took the branches above): padded tail rows too
					ggmlPerVector(k, nil, m, c, &c.act8[0], r0, r1)
					return
				}
				if r4 != nil && c.batch == 1 && r1-r0 >= 4 {
					four := r0 + (r1-r0)&^3
					run(k, r0, four)
					r0 = four
				}
				if r0 < r1 {
					run(fn, r0, r1)
				}
			}}
		}
	}
}

// ggmlPerVector runs rows [r0, r1) of every vector of the call as a pass
// per vector over row chunks that stay in L2 (batch 1: one chunk): the
// four-row kernel r4 on each chunk's rows in fours, the row kernel one on
// the rest (nil: r4 on a zero-padded copy of them); act is the call's
// activations as the kernels take them.
func ggmlPerVector(r4, one ggmlA8Func, m *ggml.Matrix, c *ggmlCall, act *int8, r0, r1 int) {
	pc, sub, rb := m.PCols, m.Type.SubLen(), m.RowBytes()
	nsb := pc / max(m.Type.BlockElems(), 128)
	chunk := simdRowChunk
	if c.batch == 1 {
		chunk = r1 - r0
	}
	for a := r0; a < r1; a += chunk {
		b := min(r1, a+chunk)
		four := a + (b-a)&^3
		for v := 0; v < c.batch; v++ {
			av := (*int8)(unsafe.Add(unsafe.Pointer(act), v*pc))
			if four > a {
				r4(&m.Data[a*rb], rb, four-a, nsb, av, pc, &c.sums[v*pc/sub], 2*pc/sub, &c.xs[v*pc/128], 4*pc/128, 1, &c.dst[v*m.Rows+a], 4*m.Rows)
			}
			if b == four {
				continue
			}
			if one != nil {
				one(&m.Data[four*rb], rb, b-four, nsb, av, pc, &c.sums[v*pc/sub], 2*pc/sub, &c.xs[v*pc/128], 4*pc/128, 1, &c.dst[v*m.Rows+four], 4*m.Rows)
				continue
			}
			t := ggmlTemps.Get().(*ggmlTemp)
			pad := t.padRows(m.Data[four*rb:b*rb], 4*rb) // zero d and dmin: rows of zeros
			r4(&pad[0], rb, 4, nsb, av, pc, &c.sums[v*pc/sub], 2*pc/sub, &c.xs[v*pc/128], 4*pc/128, 1, &t.out[0], 16)
			copy(c.dst[v*m.Rows+four:v*m.Rows+b], t.out[:b-four])
			ggmlTemps.Put(t)
		}
	}
}

// ggmlQhRepack puts the high bits of Q5_0 and Q5_1 in lane order
// (repackQhLanes) for the AVX2 kernels, which read them so.
var ggmlQhRepack = map[ggml.Type]func([]byte){
	ggml.Q5_0: func(b []byte) { repackQhLanes(b, ggml.Q5_0.BlockBytes(), 2) },
	ggml.Q5_1: func(b []byte) { repackQhLanes(b, ggml.Q5_1.BlockBytes(), 4) },
}

// ggmlPairs are the kernels of the K types and IQ4_XS on the avx2 and avxvnni
// kernel sets, which read the matrix in pair order (repack at load;
// gen/ggml_pairs.go says why) and the activations in the same order; they
// need ggmlPairsRequires.
type ggmlPairKernels struct {
	avx2Only     bool // the avxvnni set keeps its column-order kernels (IQ4_XS)
	repack       func([]byte)
	order        *[256]uint8         // position -> column, per 256 columns
	perm         func(dst, x []int8) // the activations in that order
	r4           ggmlA8Func
	m16Full, m16 ggmlA8M16Func
	f32          ggmlF32Func
}

var (
	ggmlPairs = map[ggml.Type]ggmlPairKernels{
		ggml.Q2_K: {repack: repackQ2KPairs, order: &q2kPairSrc, perm: pairsInt8,
			r4: asm.GgmlQ2KPA8R4Avx2, m16Full: asm.GgmlQ2KPA8M16FullAvx2, m16: asm.GgmlQ2KPA8M16Avx2, f32: asm.GgmlQ2KPF32Avx2},
		ggml.Q3_K: {repack: repackQ3KPairs, order: &q2kPairSrc, perm: pairsInt8,
			r4: asm.GgmlQ3KPA8R4Avx2, m16Full: asm.GgmlQ3KPA8M16FullAvx2, m16: asm.GgmlQ3KPA8M16Avx2, f32: asm.GgmlQ3KPF32Avx2},
		ggml.Q4_K: {repack: repackQ4KPairs, order: &q4kPairSrc, perm: pairsInt8By4,
			r4: asm.GgmlQ4KPA8R4Avx2, m16Full: asm.GgmlQ4KPA8M16FullAvx2, m16: asm.GgmlQ4KPA8M16Avx2, f32: asm.GgmlQ4KPF32Avx2},
		ggml.Q5_K: {repack: repackQ5KPairs, order: &q4kPairSrc, perm: pairsInt8By4,
			r4: asm.GgmlQ5KPA8R4Avx2, m16Full: asm.GgmlQ5KPA8M16FullAvx2, m16: asm.GgmlQ5KPA8M16Avx2, f32: asm.GgmlQ5KPF32Avx2},
		ggml.Q6_K: {repack: repackQ6KPairs, order: &q2kPairSrc, perm: pairsInt8,
			r4: asm.GgmlQ6KPA8R4Avx2, m16Full: asm.GgmlQ6KPA8M16FullAvx2, m16: asm.GgmlQ6KPA8M16Avx2, f32: asm.GgmlQ6KPF32Avx2},
		// IQ4_XS: its VPDPBUSD batch kernels keep the avxvnni set in
		// column order
		ggml.IQ4_XS: {avx2Only: true, repack: repackIQ4XSPairs, order: &q4kPairSrc, perm: pairsInt8By4,
			r4: asm.GgmlIQ4XSPA8R4Avx2, m16Full: asm.GgmlIQ4XSPA8M16FullAvx2, m16: asm.GgmlIQ4XSPA8M16Avx2, f32: asm.GgmlIQ4XSPF32Avx2},
	}
	ggmlPairsRequires = append(slices.Clone(ggmlA8AVX2Requires), "FMA3")
)

// ggmlPairsKernel is a pair-order type on the avx2 and avxvnni sets.
func ggmlPairsKernel(isa ISA, k ggmlPairKernels) *ggmlKernel {
	batchKernel := func(batch int) ggmlA8M16Func {
		switch {
		case ggmlM16Full(batch):
			return k.m16Full
		case batch >= ggmlM16AVX2From:
			return k.m16
		}
		return nil
	}
	return &ggmlKernel{isa: isa, repack: k.repack, order: k.order,
		prep: func(mx *GGMLMatrix, c *ggmlCall) {
			c.slots = 0
			ggmlPrepSums(mx, c)
			n := c.batch * mx.m.PCols
			if batchKernel(c.batch) != nil {
				c.sc.perm = grow(c.sc.perm, n)
				k.perm(c.sc.perm, c.xq[:n])
				ggmlPrepM16(mx.m, c, c.sc.perm, true)
				return
			}
			c.act8 = growAct(c, n)
			k.perm(c.act8, c.xq[:n])
		},
		f32: ggmlF32Runner(k.f32),
		a8: func(mx *GGMLMatrix, c *ggmlCall, r0, r1 int) {
			if r1 <= r0 {
				return
			}
			if fn := batchKernel(c.batch); fn != nil {
				ggmlRunM16(fn, mx.m, c, r0, r1)
				return
			}
			ggmlPerVector(k.r4, nil, mx.m, c, &c.act8[0], r0, r1)
		},
	}
}

// ggmlPrepSums computes c.sums, one int16 per sub-block (or 32-element
// block) of each vector's activations.
func ggmlPrepSums(mx *GGMLMatrix, c *ggmlCall) {
	m := mx.m
	pc, sub := m.PCols, m.Type.SubLen()
	c.sums = growSums(c, c.batch*pc/sub)
	sumsInt8(c.sums, c.xq[:c.batch*pc], sub)
}

// sumsInt8 writes the sum of each sub (16 or 32) values of x to sums, in
// 64-bit words of eight biased bytes (x+128) added as four 16-bit lanes:
// a lane holds at most 2*4*255, and the sums at most 32*127, so neither
// overflows.
func sumsInt8(sums []int16, x []int8, sub int) {
	const lo = 0x00ff00ff00ff00ff
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
	word := func(i int) uint64 {
		u := binary.LittleEndian.Uint64(b[i:]) ^ 0x8080808080808080
		return u&lo + (u>>8)&lo
	}
	fold := func(a uint64) int16 {
		return int16(int32(a&0xffff+a>>16&0xffff+a>>32&0xffff+a>>48) - 128*int32(sub))
	}
	sums = sums[:len(b)/sub]
	if sub == 32 {
		for i := range sums {
			o := 32 * i
			sums[i] = fold(word(o) + word(o+8) + word(o+16) + word(o+24))
		}
		return
	}
	for i := range sums {
		o := 16 * i
		sums[i] = fold(word(o) + word(o+8))
	}
}

// ggmlPrep lays out the activations for a type's kernel: c.act8 (the
// reordered int8 values, or xq itself) and c.sums (one int16 per
// sub-block, or per 32-element block).
func ggmlPrep(mx *GGMLMatrix, c *ggmlCall) {
	var order *[8]int
	if o, ok := ggmlActOrder[mx.m.Type]; ok {
		order = &o
	}
	ggmlPrepOrder(mx, c, order)
}

// ggmlPrepOrder is ggmlPrep with the 16-byte runs of every 128 columns
// in order (nil: column order).
func ggmlPrepOrder(mx *GGMLMatrix, c *ggmlCall, order *[8]int) {
	m := mx.m
	pc := m.PCols
	if fn, slots := ggmlTKernel(m.Type, c.batch); fn != nil {
		c.slots = slots
		if m.Type.Super() {
			ggmlPrepT(mx, c)
		} else {
			ggmlPrepT32(mx, c)
		}
		return
	}
	ggmlPrepSums(mx, c)
	if order == nil {
		c.act8 = c.xq
		return
	}
	c.act8 = growAct(c, c.batch*pc)
	for g := 0; g < c.batch*pc; g += 128 {
		src, dst := c.xq[g:g+128], c.act8[g:g+128]
		for i, o := range order {
			copy(dst[16*i:16*i+16], src[o:o+16])
		}
	}
}

func growSums(c *ggmlCall, n int) []int16 {
	if cap(c.sc.sums16) < n {
		c.sc.sums16 = make([]int16, n)
	}
	return c.sc.sums16[:n]
}

func growAct(c *ggmlCall, n int) []int8 {
	if cap(c.sc.act8) < n {
		c.sc.act8 = make([]int8, n)
	}
	return c.sc.act8[:n]
}

// ggmlM16Lanes is the vector in each lane of the batch kernels' sums,
// scales and results: the kernels hold vectors 2j and 2j+1 in one
// accumulator, and their pair reduction leaves the first vectors of pairs
// 0..3 in lanes 0..3, the second in lanes 4..7, pairs 4..7 likewise in
// lanes 8..15.
var ggmlM16Lanes = [16]int{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}

// ggmlM16Lane is the inverse of ggmlM16Lanes: the lane of each vector.
var ggmlM16Lane = func() (l [16]int) {
	for i, v := range ggmlM16Lanes {
		l[v] = i
	}
	return l
}()

// ggmlM16FullFrom is the smallest batch the full AVX2 batch kernels (all
// 16 lanes) run.
const ggmlM16FullFrom = 9

func ggmlM16Full(batch int) bool { return batch >= ggmlM16FullFrom }

// ggmlPrepM16 lays out the activations x (batch vectors of PCols) for the
// AVX2 batch kernels (see asm/doc.go): per super-block, half, pair of
// vectors and chunk c (16 columns), 16 bytes of each vector, columns
// 16c .. 16c+15 of the half in order (pairOrder: x is in pair order and
// chunk c of half h is bytes 32c+16h .. 32c+16h+15 of the super-block),
// zeros for the slots the kernel reads but the batch does not fill; and
// the activation sums (pairs of int16 per dword) and scales in the
// kernels' lanes (ggmlM16Lanes); lanes past the batch are zero.
func ggmlPrepM16(m *ggml.Matrix, c *ggmlCall, x []int8, pairOrder bool) {
	pc, sub := m.PCols, m.Type.SubLen()
	nsub := pc / sub
	if n := nsub / 2 * 16; cap(c.sc.pairs) < n {
		c.sc.pairs = make([]int32, n)
	}
	c.pairs = c.sc.pairs[:nsub/2*16]
	clear(c.pairs)
	if n := pc / 128 * 16; cap(c.sc.xsT) < n {
		c.sc.xsT = make([]float32, n)
	}
	c.xsT = c.sc.xsT[:pc/128*16]
	clear(c.xsT)
	nsb := pc / 256
	c.act8 = growAct(c, nsb*4096)
	// the vector slots the kernel reads but the batch does not fill: the
	// second of the last pair, or every slot for the full kernel
	last := c.batch + c.batch%2
	if ggmlM16Full(c.batch) {
		last = 16
	}
	for v := 0; v < last; v++ { // the batch's vectors, then zeros
		base := 256*(v/2) + 16*(v%2)
		for k := 0; k < nsb; k++ {
			for hc := 0; hc < 16; hc++ { // half h, chunk c: hc = 8h + c
				o := 4096*k + 2048*(hc/8) + 32*(hc%8) + base
				if v >= c.batch {
					clear(c.act8[o : o+16])
					continue
				}
				s := v*pc + 256*k + 16*hc
				if pairOrder {
					s = v*pc + 256*k + 32*(hc%8) + 16*(hc/8)
				}
				copy(c.act8[o:o+16], x[s:s+16])
			}
		}
	}
	ggmlM16Lanes16(m, c)
}

// ggmlM16Lanes16 lays out the activation sums (pairs of int16 per dword)
// and scales in the batch kernels' lanes (ggmlM16Lanes).
func ggmlM16Lanes16(m *ggml.Matrix, c *ggmlCall) {
	pc := m.PCols
	nsub := pc / m.Type.SubLen()
	for v := 0; v < c.batch; v++ {
		l := ggmlM16Lane[v]
		sums := c.sums[v*nsub : (v+1)*nsub]
		for p := 0; p < nsub/2; p++ {
			c.pairs[p*16+l] = int32(uint16(sums[2*p])) | int32(sums[2*p+1])<<16
		}
		for g := 0; g < pc/128; g++ {
			c.xsT[g*16+l] = c.xs[v*pc/128+g]
		}
	}
}

// ggmlRunM16 runs a batch kernel on rows [r0, r1) and scatters its
// results (lanes in ggmlM16Lanes order) into dst.
func ggmlRunM16(fn ggmlA8M16Func, m *ggml.Matrix, c *ggmlCall, r0, r1 int) {
	t := ggmlTemps.Get().(*ggmlTemp)
	defer ggmlTemps.Put(t)
	out := &t.out
	pc := m.PCols
	nsb := pc / 256
	pairs := m.Type.SubBlocks() / 2 * 16 // sums dwords per super-block
	for a := r0; a < r1; a += ggmlChunk {
		b := min(r1, a+ggmlChunk)
		clear(out[:16*(b-a)])
		// column blocks whose activations stay in L1 for all the rows
		for k := 0; k < nsb; k += ggmlColBlock {
			n := min(ggmlColBlock, nsb-k)
			fn(&m.Data[a*m.RowBytes()+k*m.Type.BlockBytes()], m.RowBytes(), b-a, n, &c.act8[4096*k], pc, &c.pairs[pairs*k], &c.xsT[32*k], c.batch, &out[0])
		}
		for v := 0; v < c.batch; v++ {
			l := ggmlM16Lane[v]
			d := c.dst[v*m.Rows+a : v*m.Rows+b]
			for r := range d {
				d[r] = out[16*r+l]
			}
		}
	}
}

// ggmlF32Runner adapts a float kernel to ggmlKernel.f32.
func ggmlF32Runner(fn ggmlF32Func) func(mx *GGMLMatrix, dst, xt []float32, batch, r0, r1 int) {
	return func(mx *GGMLMatrix, dst, xt []float32, batch, r0, r1 int) {
		if r1 <= r0 {
			return
		}
		m := mx.m
		t := ggmlTemps.Get().(*ggmlTemp)
		fn(&m.Data[r0*m.RowBytes()], m.RowBytes(), r1-r0, m.PCols/max(m.Type.BlockElems(), 128),
			&xt[0], batch, &t.tmp[0], &t.accs[0], &dst[r0], 4*m.Rows)
		ggmlTemps.Put(t)
	}
}

// ggmlChunk is the rows per batch-kernel call: the results stay in L1.
const ggmlChunk = 64

// ggmlColBlock is the super-blocks per batch-kernel call: their
// activations (4 KiB each) stay in L1 while the kernel runs the chunk's
// rows over them, instead of streaming from L2 for every row. One: on
// Zen 4 the kernels' loads run 1.4x slower per half once the activations
// they cycle through span more than 4 KiB (measured in L1, 2 and 4
// super-blocks against 1).
const ggmlColBlock = 1

// ggmlTemp is a kernel call's scratch: the float kernels' unpacked block
// and accumulators, the batch kernels' results. Pooled: arrays passed to
// an assembly function through a function value escape to the heap.
type ggmlTemp struct {
	tmp  [512]byte
	accs [maxBatch * 16]float32
	out  [ggmlChunk * 16]float32
	pad  []byte // ggmlRunT's zero-padded last rows
}

var ggmlTemps = sync.Pool{New: func() any { return new(ggmlTemp) }}

// padRows returns t.pad holding rows followed by zeros up to n bytes:
// whole row groups for kernels that take rows in fours or sixteens.
func (t *ggmlTemp) padRows(rows []byte, n int) []byte {
	t.pad = grow(t.pad, n)
	copy(t.pad, rows)
	clear(t.pad[len(rows):n])
	return t.pad
}
