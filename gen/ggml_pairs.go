package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Q2_K in pair order: the AVX2 kernels of Q2_K read a copy of the matrix
// whose 2-bit codes the CPU backend reorders at load (cpu.q2kPairSrc).
// Code register v (v = 4H + i: bits 2i of the 32 bytes at 16 + 32H) holds,
// in byte 16h + 2k + b, the code of column 128h + 16k + 2v + b: word k of
// lane h is two columns of sub-block 8h + k. So the VPMADDUBSW pairs of
// every code register fall in the sub-block of their word, the eight
// registers' pairs add up in int16 (at most 8*2*3*128) and one VPMADDWD
// with the super-block's 16 scale words applies every sub-block scale at
// once, instead of a scale spread and a VPMADDWD per register. The
// activations come in the same order (cpu.ggmlPairsAct), the sums term is
// Q2_K's (activation sums in sub-block order times the mins), the int32
// half sums and the float steps are those of the definition.

// q2kPairWords returns the 16 scale words (sub-block order) and the 16
// min words of the Q2_K super-block at base: each byte zero-extended to a
// word, its low nibble and its high nibble.
func q2kPairWords(base Mem, nibw VecVirtual) (sw, mw VecVirtual) {
	sw, mw = YMM(), YMM()
	VPMOVZXBW(base, sw)
	VPSRLW(U8(4), sw, mw)
	VPAND(nibw, sw, sw)
	return sw, mw
}

// q2kPairCodes emits code register v = 4H+i of the super-block at base
// from the code bytes at w (and their copy shifted right by 4 at w4): the
// even registers as the codes q (mask 3), the odd ones as 4q (mask 12),
// which saves a shift; the caller divides their pair sums by 4.
func q2kPairCodes(w, w4 VecVirtual, i int, three, twelve VecVirtual) VecVirtual {
	src, mask := w, three
	if i >= 2 {
		src = w4
	}
	if i%2 == 1 {
		mask = twelve
	}
	c := YMM()
	VPAND(mask, src, c)
	return c
}

// ggmlQ2KPairsA8R4AVX2 emits GgmlQ2KPA8R4Avx2, Q2_K's four-row one-vector
// kernel in pair order (for the avx2 and avxvnni kernel sets): per row
// the eight code registers times the activations (VPMADDUBSW), the pairs
// of the even registers and a quarter of the odd ones' summed in int16,
// one VPMADDWD with the scale words (lane h: half h's S in four dwords),
// the sums term as in ggmlSuperA8R4AVX2, then its reductions and float
// steps with the rows in the lanes.
func ggmlQ2KPairsA8R4AVX2() {
	name := "GgmlQ2KPA8R4Avx2"
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s computes the exact A8 product of layout/ggml Q2_K rows in pair order (the codes reordered at load, the activations in the same order) with AVX2, one vector and four rows at a time (rows a multiple of 4; nvec and the strides ignored): per row and super-block one VPMADDWD with the 16 scale words, the reductions and float steps with the rows in the lanes.", name))
	part := AllocLocal(4 * 48)
	av2 := fvec{avx512: false}
	three := av2.broadcast(0x03030303)
	twelve := av2.broadcast(0x0c0c0c0c)
	nibw := av2.broadcast(0x000f000f)
	fourRows(name, false, 84, 256, 32, 8, func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual) {
		dh, mh := XMM(), XMM()
		VPXOR(dh, dh, dh)
		VPXOR(mh, mh, mh)
		for r, rm := range rows {
			VPINSRW(U8(r), rm.Offset(80), dh, dh)
			VPINSRW(U8(r), rm.Offset(82), mh, mh)
			sw, mw := q2kPairWords(rm, nibw)
			var a [2]VecVirtual // pair sums of the even registers, of the odd ones (4x)
			for H := 0; H < 2; H++ {
				w, w4 := YMM(), YMM()
				VMOVDQU(rm.Offset(16+32*H), w)
				VPSRLW(U8(4), w, w4)
				for i := 0; i < 4; i++ {
					c := q2kPairCodes(w, w4, i, three, twelve)
					p := YMM()
					VPMADDUBSW(Mem{Base: ak, Disp: 32 * (4*H + i)}, c, p)
					if a[i%2] == nil {
						a[i%2] = p
					} else {
						VPADDW(p, a[i%2], a[i%2])
					}
				}
			}
			VPSRAW(U8(2), a[1], a[1]) // exact: each pair sum of 4q*x is a multiple of 4
			VPADDW(a[1], a[0], a[0])
			S := YMM()
			VPMADDWD(sw, a[0], S)
			VMOVDQU(S, part.Offset(48*r))
			m8 := YMM()
			VPMADDWD(Mem{Base: sk}, mw, m8)
			hi, mm := XMM(), XMM()
			VEXTRACTI128(U8(1), m8, hi)
			VPHADDD(hi, m8.AsX(), mm)
			VMOVDQU(mm, part.Offset(48*r+32))
		}
		r4PartSteps(part, true, 0, dh, mh, xk, acc4)
	})
}
