package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Pair order: the AVX2 kernels of Q2_K and Q3_K read a copy of the
// matrix whose codes the CPU backend reorders at load (cpu.q2kPairSrc).
// Code register v holds, in byte 16h + 2k + b, the code of column 128h +
// 16k + 2v + b: word k of lane h is two columns of sub-block 8h + k. So
// the VPMADDUBSW pairs of every code register fall in the sub-block of
// their word, the eight registers' pairs add up in int16 and one VPMADDWD
// with the super-block's 16 scale words applies every sub-block scale at
// once, instead of a scale spread and a VPMADDWD per register. Q2_K keeps
// llama.cpp's packing of 2-bit codes (register v = 4H + i: bits 2i of the
// 32 code bytes of H). Q3_K's 3-bit codes (q + 4, the hmask bit as 4) are
// stored in three planes of 32 bytes in place of hmask and qs: plane A
// holds registers 0 (bits 0-2) and 1 (bits 3-5), B registers 2 and 3, C
// registers 4 and 5, and bits 6-7 of A and B hold the low two bits of
// registers 6 and 7, bits 6 and 7 of C their third. The activations come
// in the same order (cpu.pairsInt8); the sums term and the float steps
// are the definition's.

// pairType is a 16-column sub-block type in pair order.
type pairType struct {
	c     ggmlSuper
	qs    int  // offset of the 64 code bytes (Q3_K: of the three planes)
	d, dm int  // offsets of d and dmin (Q3_K: no dmin)
	plane bool // Q3_K: 3-bit codes in three planes
}

var pairTypes = map[string]pairType{
	"Q2K": {c: ggmlSupers[0], qs: 16, d: 80, dm: 82},
	"Q3K": {c: ggmlSupers[1], qs: 0, d: 108, plane: true},
}

// pairNibw loads the word mask pairWords takes for Q2_K (0x000f per
// word; nil for Q3_K), once per kernel rather than per super-block.
func pairNibw(pt pairType) VecVirtual {
	if pt.plane {
		return nil
	}
	return fvec{avx512: false}.broadcast(0x000f000f)
}

// pairWords returns the 16 scale words of the super-block at base (in
// sub-block order) and the words its sums term multiplies the activation
// sums by: Q2_K's mins (each scale byte zero-extended, its low nibble,
// masked by nibw, and its high nibble), Q3_K's scales again.
func pairWords(pt pairType, base Mem, nibw VecVirtual) (sw, mw VecVirtual) {
	if pt.plane {
		return ggmlScaleWordsAVX2(pt.c, base)
	}
	sw, mw = YMM(), YMM()
	VPMOVZXBW(base, sw)
	VPSRLW(U8(4), sw, mw)
	VPAND(nibw, sw, sw)
	return sw, mw
}

// pairCodeConsts are the byte masks pairCodes takes: three for the 2-bit
// fields; Q3_K's seven and four for its planes.
type pairCodeConsts struct{ three, seven, four VecVirtual }

func newPairCodeConsts(pt pairType) pairCodeConsts {
	av2 := fvec{avx512: false}
	k := pairCodeConsts{three: av2.broadcast(0x03030303)}
	if pt.plane {
		k.seven, k.four = av2.broadcast(0x07070707), av2.broadcast(0x04040404)
	}
	return k
}

// pairCodes calls each(v, r) for the eight code registers of the
// super-block at base in turn, r holding register v's codes (Q3_K: plus
// 4).
func pairCodes(pt pairType, base Mem, k pairCodeConsts, each func(v int, r VecVirtual)) {
	if !pt.plane {
		for v := 0; v < 8; v++ {
			r := YMM()
			VMOVDQU(base.Offset(pt.qs+32*(v/4)), r)
			if v%4 > 0 {
				VPSRLW(U8(2*(v%4)), r, r)
			}
			VPAND(k.three, r, r)
			each(v, r)
		}
		return
	}
	for v := 0; v < 6; v++ { // plane v/2, bits 3*(v%2)
		r := YMM()
		VMOVDQU(base.Offset(pt.qs+32*(v/2)), r)
		if v%2 == 1 {
			VPSRLW(U8(3), r, r)
		}
		VPAND(k.seven, r, r)
		each(v, r)
	}
	for v := 6; v < 8; v++ { // bits 6-7 of plane v-6, bit v of plane C as 4
		r, h := YMM(), YMM()
		VMOVDQU(base.Offset(pt.qs+32*(v-6)), r)
		VPSRLW(U8(6), r, r)
		VPAND(k.three, r, r)
		VMOVDQU(base.Offset(pt.qs+64), h)
		VPSRLW(U8(v-2), h, h)
		VPAND(k.four, h, h)
		VPOR(h, r, r)
		each(v, r)
	}
}

// pairsA8R4AVX2 emits Ggml<t>PA8R4Avx2, the four-row one-vector kernel
// in pair order (for the avx2 and avxvnni kernel sets): per row the eight
// code registers times the activations (VPMADDUBSW), their pair sums
// added in int16 (pairSums: word k of lane h is then the whole dot
// product of sub-block 8h+k), one VPMADDWD with the scale words (lane h:
// half h's S in four dwords), the mins term as in ggmlSuperA8R4AVX2,
// then its reductions and float steps with the rows in the lanes. Q3_K's
// recentring is folded in before the scales: each sub-block's sum less 4
// times its activation sum (at most 14336 + 8192 in magnitude) times its
// scale is the definition's S - 4*sum(sc*sx), in one VPMADDWD.
func pairsA8R4AVX2(pt pairType) {
	c := pt.c
	name := "Ggml" + c.t + "PA8R4Avx2"
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s computes the exact A8 product of layout/ggml %s rows in pair order (the codes reordered at load, the activations in the same order) with AVX2, one vector and four rows at a time (rows a multiple of 4; nvec and the strides ignored): per row and super-block one VPMADDWD with the 16 scale words, the reductions and float steps with the rows in the lanes.", name, ggmlTypeName(c.t)))
	part := AllocLocal(4 * 48)
	sums := pairSums(pt)
	nibw := pairNibw(pt)
	fourRows(name, false, c.bytes, 256, 32, 8, func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual) {
		dh, mh := XMM(), XMM()
		VPXOR(dh, dh, dh)
		if c.mins {
			VPXOR(mh, mh, mh)
		}
		var sx VecVirtual // 2^shift times the activation sums
		if c.shift > 0 {
			sx = YMM()
			VMOVDQU(Mem{Base: sk}, sx)
			VPSLLW(U8(c.shift), sx, sx)
		}
		for r, rm := range rows {
			VPINSRW(U8(r), rm.Offset(pt.d), dh, dh)
			if c.mins {
				VPINSRW(U8(r), rm.Offset(pt.dm), mh, mh)
			}
			sw, mw := pairWords(pt, rm, nibw)
			a := sums(rm, ak)
			if c.shift > 0 {
				VPSUBW(sx, a, a)
			}
			S := YMM()
			VPMADDWD(sw, a, S)
			VMOVDQU(S, part.Offset(48*r))
			if !c.mins {
				continue
			}
			m8 := YMM()
			VPMADDWD(Mem{Base: sk}, mw, m8)
			hi, mm := XMM(), XMM()
			VEXTRACTI128(U8(1), m8, hi)
			VPHADDD(hi, m8.AsX(), mm)
			VMOVDQU(mm, part.Offset(48*r+32))
		}
		r4PartSteps(part, c.mins, 0, dh, mh, xk, acc4, true)
	})
}

// pairSums loads its constants and returns a function emitting, for the
// super-block at base and the activations at ak (register v at ak+32v),
// the 16 int16 words of the sums of code times activation per word
// position over the eight registers (word k of lane h: sub-block 8h+k).
// Registers are taken scaled by a power of two where that saves a shift
// (a mask in place of shift and mask), their pair sums added per scale
// and divided exactly (VPSRAW of sums of multiples) before the final add.
// Q2_K: the odd registers as 4q, two sums of at most 4*2*12*128. Q3_K:
// registers 1 and 3 as 8q (at most 2*2*56*128), 5 as 8q divided alone,
// the rest (6 and 7 from two planes) as q: at most 6*2*7*128.
func pairSums(pt pairType) func(base Mem, ak GPVirtual) VecVirtual {
	av2 := fvec{avx512: false}
	madd := func(v int, cv VecVirtual, ak GPVirtual) VecVirtual {
		p := YMM()
		VPMADDUBSW(Mem{Base: ak, Disp: 32 * v}, cv, p)
		return p
	}
	add := func(acc *VecVirtual, p VecVirtual) {
		if *acc == nil {
			*acc = p
			return
		}
		VPADDW(p, *acc, *acc)
	}
	if !pt.plane {
		mask := [2]VecVirtual{av2.broadcast(0x03030303), av2.broadcast(0x0c0c0c0c)}
		return func(base Mem, ak GPVirtual) VecVirtual {
			var a [2]VecVirtual // the even registers' sums, the odd ones' (4x)
			for H := 0; H < 2; H++ {
				w, w4 := YMM(), YMM()
				VMOVDQU(base.Offset(pt.qs+32*H), w)
				VPSRLW(U8(4), w, w4)
				for i := 0; i < 4; i++ {
					src := w
					if i >= 2 {
						src = w4
					}
					cv := YMM()
					VPAND(mask[i%2], src, cv)
					add(&a[i%2], madd(4*H+i, cv, ak))
				}
			}
			VPSRAW(U8(2), a[1], a[1])
			VPADDW(a[1], a[0], a[0])
			return a[0]
		}
	}
	m7, m38 := av2.broadcast(0x07070707), av2.broadcast(0x38383838)
	three, four := av2.broadcast(0x03030303), av2.broadcast(0x04040404)
	return func(base Mem, ak GPVirtual) VecVirtual {
		var pl [3]VecVirtual
		for i := range pl {
			pl[i] = YMM()
			VMOVDQU(base.Offset(pt.qs+32*i), pl[i])
		}
		var a1, a8 VecVirtual // the sums of registers taken as q, as 8q
		for v := 0; v < 6; v++ {
			cv := YMM()
			if v%2 == 0 {
				VPAND(m7, pl[v/2], cv)
				add(&a1, madd(v, cv, ak))
				continue
			}
			VPAND(m38, pl[v/2], cv)
			p := madd(v, cv, ak)
			if v == 5 {
				VPSRAW(U8(3), p, p)
				add(&a1, p)
			} else {
				add(&a8, p)
			}
		}
		for v := 6; v < 8; v++ {
			cv, h := YMM(), YMM()
			VPSRLW(U8(6), pl[v-6], cv)
			VPAND(three, cv, cv)
			VPSRLW(U8(v-2), pl[2], h)
			VPAND(four, h, h)
			VPOR(h, cv, cv)
			add(&a1, madd(v, cv, ak))
		}
		VPSRAW(U8(3), a8, a8)
		VPADDW(a8, a1, a1)
		return a1
	}
}

// pairsF32Prep is Ggml<t>PF32Avx2's unit preparation: D = d*sc and E
// (-dmin*m, or -4*D for Q3_K's codes plus 4) of each sub-block, each
// twice in the words' order (position 2s and 2s+1 of 32: sub-block s) at
// tmp+256 and tmp+384, stored first so that the stores have left by the
// time the kernel loads them whole; then the eight code registers at tmp.
func pairsF32Prep(pt pairType, wp, tp GPVirtual) {
	c := pt.c
	av2 := fvec{avx512: false}
	sw, mw := pairWords(pt, Mem{Base: wp}, pairNibw(pt))
	dz := XMM()
	VPBROADCASTW(Mem{Base: wp, Disp: pt.d}, dz)
	d8 := YMM()
	VCVTPH2PS(dz, d8)
	var dm8 VecVirtual
	if c.mins {
		dmz := XMM()
		VPBROADCASTW(Mem{Base: wp, Disp: pt.dm}, dmz)
		dm8 = YMM()
		VCVTPH2PS(dmz, dm8)
	}
	var idx [2]VecVirtual
	for q := range idx {
		idx[q] = YMM()
		VMOVDQU(rodata(fmt.Sprintf("ggmlPairDup%d", q), 8, 4, func(i int) uint64 { return uint64(4*q + i/2) }), idx[q])
	}
	for k := 0; k < 2; k++ { // sub-blocks 8k..8k+7
		sx, mx := sw.AsX(), mw.AsX()
		if k == 1 {
			sx, mx = XMM(), XMM()
			VEXTRACTI128(U8(1), sw, sx)
			VEXTRACTI128(U8(1), mw, mx)
		}
		d, e := YMM(), YMM()
		if c.mins {
			VPMOVZXWD(sx, d)
		} else {
			VPMOVSXWD(sx, d)
		}
		VCVTDQ2PS(d, d)
		VMULPS(d8, d, d)
		if c.mins {
			VPMOVZXWD(mx, e)
			VCVTDQ2PS(e, e)
			VMULPS(dm8, e, e)
			VXORPS(av2.broadcast(0x80000000), e, e)
		} else {
			VMULPS(av2.broadcast(math32bits(-float32(int(1)<<c.shift))), d, e)
		}
		for q := range idx {
			for o, v := range []VecVirtual{d, e} {
				y := YMM()
				VPERMPS(v, idx[q], y)
				VMOVUPS(y, Mem{Base: tp, Disp: 256 + 128*o + 64*k + 32*q})
			}
		}
	}
	pairCodes(pt, Mem{Base: wp}, newPairCodeConsts(pt), func(v int, r VecVirtual) {
		VMOVDQU(r, Mem{Base: tp, Disp: 32 * v})
	})
}
