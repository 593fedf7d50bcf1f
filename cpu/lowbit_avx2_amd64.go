//go:build !noasm && !purego

package cpu

import (
	"unsafe"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
)

type bitsA8Func = func(w *byte, stride int, meta *byte, act *byte, chunks int, out *float32, ntiles int, ctrl *byte, idx *int32)

// bitsA8YMM are the YMM W(n)A8 kernels for Bits by kernel set: AVX2
// (VPMADDUBSW + VPMADDWD) for avx2, AVX-VNNI (VEX VPDPBUSD) for avxvnni;
// by [n, unit] with unit = min(G, 128) columns, with the features they
// need (checked against their Requires lines by TestRequiresCoverKernels).
var bitsA8YMM = map[ISA]*ymmA8Kernels{
	AVX2: {
		kernels: map[[2]int]bitsA8Func{
			{8, 128}: asm.Bits8A8Avx2, {8, 64}: asm.Bits8A8G64Avx2, {8, 32}: asm.Bits8A8G32Avx2,
			{4, 128}: asm.Bits4A8Avx2, {4, 64}: asm.Bits4A8G64Avx2, {4, 32}: asm.Bits4A8G32Avx2,
			{2, 128}: asm.Bits2A8Avx2, {2, 64}: asm.Bits2A8G64Avx2,
			{1, 128}: asm.Bits1A8Avx2,
			{3, 128}: asm.Bits3A8Avx2, // its own geometry: newBits3YMM
		},
		requires: []string{"AVX", "AVX2"},
	},
	AVXVNNI: {
		kernels: map[[2]int]bitsA8Func{
			{8, 128}: asm.Bits8A8AvxVnni, {8, 64}: asm.Bits8A8G64AvxVnni, {8, 32}: asm.Bits8A8G32AvxVnni,
			{4, 128}: asm.Bits4A8AvxVnni, {4, 64}: asm.Bits4A8G64AvxVnni, {4, 32}: asm.Bits4A8G32AvxVnni,
			{2, 128}: asm.Bits2A8AvxVnni, {2, 64}: asm.Bits2A8G64AvxVnni,
			{1, 128}: asm.Bits1A8AvxVnni,
			{3, 128}: asm.Bits3A8Avx2, // VPMADDWD: no VNNI form
		},
		requires: []string{"AVX", "AVX2", "AVXVNNI"},
	},
}

// bitsA8YMM16 are bitsA8YMM's kernels reading binary16 scales and int16
// zeros (Meta16): half the metadata bytes, so that the backend keeps one
// copy of a matrix's metadata (dropMeta), as the AVX-512 kernels do.
var bitsA8YMM16 = map[ISA]*ymmA8Kernels{
	AVX2: {
		kernels: map[[2]int]bitsA8Func{
			{8, 128}: asm.Bits8A8Meta16Avx2, {8, 64}: asm.Bits8A8G64Meta16Avx2, {8, 32}: asm.Bits8A8G32Meta16Avx2,
			{4, 128}: asm.Bits4A8Meta16Avx2, {4, 64}: asm.Bits4A8G64Meta16Avx2, {4, 32}: asm.Bits4A8G32Meta16Avx2,
			{2, 128}: asm.Bits2A8Meta16Avx2, {2, 64}: asm.Bits2A8G64Meta16Avx2,
			{1, 128}: asm.Bits1A8Meta16Avx2,
		},
		requires: []string{"AVX", "AVX2", "F16C"},
	},
	AVXVNNI: {
		kernels: map[[2]int]bitsA8Func{
			{8, 128}: asm.Bits8A8Meta16AvxVnni, {8, 64}: asm.Bits8A8G64Meta16AvxVnni, {8, 32}: asm.Bits8A8G32Meta16AvxVnni,
			{4, 128}: asm.Bits4A8Meta16AvxVnni, {4, 64}: asm.Bits4A8G64Meta16AvxVnni, {4, 32}: asm.Bits4A8G32Meta16AvxVnni,
			{2, 128}: asm.Bits2A8Meta16AvxVnni, {2, 64}: asm.Bits2A8G64Meta16AvxVnni,
			{1, 128}: asm.Bits1A8Meta16AvxVnni,
		},
		requires: []string{"AVX", "AVX2", "AVXVNNI", "F16C"},
	},
}

type ymmA8Kernels struct {
	kernels  map[[2]int]bitsA8Func
	requires []string
}

// newBitsYMM returns the YMM kernel state for b, or nil where no kernel
// applies (3 bits or 2 bits with groups below 128 or 64; 1 bit with groups below 128;
// fractional zeros; a CPU without the kernel set's features).
//
// The kernel (see gen/bits_a8_avx2.go) reads a chunk of a row as 4 quarters
// of 8 words; with the byte transposition (all widths but 8 bits with
// blocks of 128), dword d of 128-bit lane l of quarter h holds byte 3-d of
// words 8h+4l+e (e = 0..3), else dword t holds word 8h+t. Field j (shift
// j*n; 8 bits: the two nibbles, one activation) of byte B of word w is
// plane p = (32-8B-j*n)/n - 1, column p*32+w of the chunk. The activation
// bytes of a chunk are those columns in the kernel's read order (ymmActSources).
func newBitsYMM(be *Backend, b *layout.Bits) *bitsSIMD {
	ks := bitsA8YMM[be.set.isa]
	if ks == nil {
		return nil
	}
	unit := min(b.G, 128)
	kern, ok := ks.kernels[[2]int{b.N, unit}]
	if !ok || !hasAll(ks.requires) || b.IntegerZeros() != nil {
		return nil
	}
	if b.N == 3 {
		return newBits3YMM(b, kern, be.set.isa)
	}
	n := b.N
	bpc := 8 / n
	nu := 128 * bpc / unit // units (blocks of the exact sum) per chunk
	R := 8 / nu
	chunkCols := 128 * bpc
	// binary16 scales and int16 zeros where the format has them (Meta16
	// kernels, 32 meta bytes per tile and chunk), else float32 and int32
	half, mb := false, 64
	if ks16 := bitsA8YMM16[be.set.isa]; hasAll(ks16.requires) && ks16.kernels[[2]int{n, unit}] != nil && meta16Zeros(b) {
		kern, half, mb = ks16.kernels[[2]int{n, unit}], true, 32
	}
	s := &bitsSIMD{n: n, bpc: bpc, r: R, lanes: 8, isa: be.set.isa, chunks: b.PCols / chunkCols, kern: kern,
		metaBlock: mb, words: b.Words, stride: 4 * b.WordsPerRow(), actChunk: chunkCols + 64}
	src := ymmActSources(n, unit)
	s.writeMeta(b, half)
	s.idx, s.ctrl = make([]int32, 1), make([]byte, 64) // unused by the YMM kernels
	gather := ymmGather(src)
	s.prep = func(act []byte, xq []int8, xs []float32, k0, k1 int) {
		var sums [8]int32
		for k := k0; k < k1; k++ {
			a := act[k*s.actChunk : (k+1)*s.actChunk]
			x := xq[k*chunkCols : (k+1)*chunkCols]
			gather(a, x)
			for u := 0; u < nu; u++ {
				sums[u] = sumInt8(x[u*unit : (u+1)*unit])
			}
			for lane := 0; lane < 8; lane++ {
				u := lane % nu
				putF32(a[chunkCols+4*lane:], xs[(k*chunkCols+u*unit)/128])
				putI32(a[chunkCols+32+4*lane:], sums[u])
			}
		}
	}
	return s
}

// ymmActSources returns the YMM kernels' activation order for n-bit codes
// and exact-sum units of unit columns (newBitsYMM): src[i] is the chunk
// column of activation byte i.
func ymmActSources(n, unit int) []int32 {
	bpc := 8 / n
	shuffle := n != 8 || unit < 128
	src := make([]int32, 128*bpc)
	fields := bpc
	if n == 8 {
		fields = 1
	}
	for h := 0; h < 4; h++ {
		for j := 0; j < fields; j++ {
			for v := 0; v < 32; v++ {
				w, B := 8*h+v/4, v%4
				if shuffle {
					l, d, e := v/16, (v%16)/4, v%4
					w, B = 8*h+4*l+e, 3-d
				}
				p := 3 - B
				if n != 8 {
					p = (32-8*B-j*n)/n - 1
				}
				src[(h*fields+j)*32+v] = int32(p*32 + w)
			}
		}
	}
	return src
}

// ymmGather returns the copy that lays out one chunk of activations in
// the order src (ymmActSources). The shuffled layouts read four
// consecutive columns per dword: copied as such (a quarter of the moves
// of a byte gather). Bits8 with units of 128 takes the columns w, 32+w,
// 64+w, 96+w per dword: four 16-byte runs per 64 bytes, interleaved by
// the assembly straight from the chunk (BenchmarkYMMPrep, one vector of
// 4096 columns on a Zen 3 core: 9.7-11.7 us byte by byte, 2.2-3.6 us
// so). Anything else is gathered byte by byte.
func ymmGather(src []int32) func(a []byte, x []int8) {
	if runs := dwordRuns(src); runs != nil {
		return func(a []byte, x []int8) { gatherDwords(a, x, runs) }
	}
	if g := interleaveGather(src, len(src)); g != nil {
		return g
	}
	return func(a []byte, x []int8) { gatherActs(a, x, src) }
}

// dwordRuns returns src (a gather table: byte i of a chunk's layout is
// column src[i]) as the first column of each dword, where every dword
// holds four consecutive columns; nil otherwise.
func dwordRuns(src []int32) []int32 {
	if len(src)%4 != 0 {
		return nil
	}
	runs := make([]int32, len(src)/4)
	for i := range runs {
		for e := 0; e < 4; e++ {
			if src[4*i+e] != src[4*i]+int32(e) {
				return nil
			}
		}
		runs[i] = src[4*i]
	}
	return runs
}

// gatherDwords writes dword i of a as the four bytes of x at runs[i].
// Not inlined: in the caller's loop it ran out of registers.
//
//go:noinline
func gatherDwords(a []byte, x []int8, runs []int32) {
	a = a[:4*len(runs)]
	for i, c := range runs {
		_ = x[c+3]
		*(*uint32)(unsafe.Pointer(&a[4*i])) = *(*uint32)(unsafe.Pointer(&x[c]))
	}
}

// newBits3YMM returns the state of the AVX2 3-bit kernel (newBits3State
// with tiles of 8 rows): per period, plane pair q and quarter h, 16 int16
// activations, lane 8l+2w+e holding column (2q+e)*32 + 8h + 4l + w
// (gen/bits_a8_avx2.go, bits3A8YMM).
func newBits3YMM(b *layout.Bits, kern bitsA8Func, isa ISA) *bitsSIMD {
	const nb, actCodes = 5, 10 * 4 * 32
	s := newBits3State(b, 8, 128, actCodes, kern, isa)
	s.prep = func(act []byte, xq []int8, xs []float32, k0, k1 int) {
		for k := k0; k < k1; k++ {
			a := act[k*s.actChunk : (k+1)*s.actChunk]
			x := xq[k*640 : (k+1)*640]
			for q := 0; q < 10; q++ { // planes 2q, 2q+1
				for h := 0; h < 4; h++ {
					for j := 0; j < 16; j++ { // 128-bit lane l, word w, plane 2q+e
						l, w, e := j/8, (j%8)/2, j%2
						v := int16(x[(2*q+e)*32+8*h+4*l+w])
						a[((q*4+h)*16+j)*2] = byte(v)
						a[((q*4+h)*16+j)*2+1] = byte(v >> 8)
					}
				}
			}
			bits3LaneActs(a[actCodes:], xq, xs, k, nb, 128, 8)
		}
	}
	return s
}
