package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Pair order: the AVX2 kernels of Q2_K and Q3_K read a copy of the
// matrix whose codes the CPU backend reorders at load (cpu.q2kPairSrc).
// Code register v (v = 4H + i: bits 2i of the 32 code bytes of H) holds,
// in byte 16h + 2k + b, the code of column 128h + 16k + 2v + b: word k of
// lane h is two columns of sub-block 8h + k. So the VPMADDUBSW pairs of
// every code register fall in the sub-block of their word, the eight
// registers' pairs add up in int16 (at most 8*2*7*128) and one VPMADDWD
// with the super-block's 16 scale words applies every sub-block scale at
// once, instead of a scale spread and a VPMADDWD per register. Q3_K's
// high bits are reordered likewise: register v's in bit pairHighBit[v]
// of the 32 hmask bytes, which puts registers 2g and 2g+1 two bits apart,
// so one shift serves both. The activations come in the same order
// (cpu.pairsInt8); the sums term and the float steps are the
// definition's.

// pairType is a 16-column sub-block type in pair order.
type pairType struct {
	c     ggmlSuper
	qs    int  // offset of the 64 code bytes
	d, dm int  // offsets of d and dmin (Q3_K: no dmin)
	hm    bool // Q3_K: the high bits (adding 4) in 32 bytes at 0
}

var pairTypes = map[string]pairType{
	"Q2K": {c: ggmlSupers[0], qs: 16, d: 80, dm: 82},
	"Q3K": {c: ggmlSupers[1], qs: 32, d: 108, hm: true},
}

// pairHighBit is the hmask bit of each code register in pair order
// (cpu.q3kPairHighBit): 0 and 2, 1 and 3, 4 and 6, 5 and 7 for registers
// 0 and 1, 2 and 3, ...
var pairHighBit = [8]int{0, 2, 1, 3, 4, 6, 5, 7}

// pairWords returns the 16 scale words of the super-block at base (in
// sub-block order) and the words its sums term multiplies the activation
// sums by: Q2_K's mins (each scale byte zero-extended, its low nibble and
// its high nibble), Q3_K's scales again.
func pairWords(pt pairType, base Mem) (sw, mw VecVirtual) {
	if pt.c.t != "Q2K" {
		return ggmlScaleWordsAVX2(pt.c, base)
	}
	sw, mw = YMM(), YMM()
	VPMOVZXBW(base, sw)
	VPSRLW(U8(4), sw, mw)
	VPAND(fvec{avx512: false}.broadcast(0x000f000f), sw, sw)
	return sw, mw
}

// pairCodes returns the four code registers 4H..4H+3 of the super-block
// at base as the codes (Q3_K: plus 4, the high bit added as 4).
func pairCodes(pt pairType, base Mem, H int, three, four VecVirtual) (cr [4]VecVirtual) {
	for i := range cr {
		v := YMM()
		VMOVDQU(base.Offset(pt.qs+32*H), v)
		if i > 0 {
			VPSRLW(U8(2*i), v, v)
		}
		VPAND(three, v, v)
		if pt.hm {
			highBits(base, pairHighBit[4*H+i], 2, four, v)
		}
		cr[i] = v
	}
	return cr
}

// pairsA8R4AVX2 emits Ggml<t>PA8R4Avx2, the four-row one-vector kernel
// in pair order (for the avx2 and avxvnni kernel sets): per row the eight
// code registers, the odd ones masked as 4q (which saves a shift; Q3_K's
// high bits go to bit 2 or 4, one shift for both registers of a pair),
// times the activations (VPMADDUBSW); the even registers' pairs and the
// odd ones' summed in int16 (at most 4*2*28*128), the latter divided by 4
// (exact: each is a multiple of 4) and added; one VPMADDWD with the scale
// words (lane h: half h's S in four dwords), the sums term as in
// ggmlSuperA8R4AVX2, then its reductions and float steps with the rows in
// the lanes.
func pairsA8R4AVX2(pt pairType) {
	c := pt.c
	name := "Ggml" + c.t + "PA8R4Avx2"
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s computes the exact A8 product of layout/ggml %s rows in pair order (the codes reordered at load, the activations in the same order) with AVX2, one vector and four rows at a time (rows a multiple of 4; nvec and the strides ignored): per row and super-block one VPMADDWD with the 16 scale words, the reductions and float steps with the rows in the lanes.", name, ggmlTypeName(c.t)))
	part := AllocLocal(4 * 48)
	av2 := fvec{avx512: false}
	mask := [2]VecVirtual{av2.broadcast(0x03030303), av2.broadcast(0x0c0c0c0c)}
	var hmask [2]VecVirtual
	if pt.hm {
		hmask = [2]VecVirtual{av2.broadcast(0x04040404), av2.broadcast(0x10101010)}
	}
	fourRows(name, false, c.bytes, 256, 32, 8, func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual) {
		dh, mh := XMM(), XMM()
		VPXOR(dh, dh, dh)
		if c.mins {
			VPXOR(mh, mh, mh)
		}
		for r, rm := range rows {
			VPINSRW(U8(r), rm.Offset(pt.d), dh, dh)
			if c.mins {
				VPINSRW(U8(r), rm.Offset(pt.dm), mh, mh)
			}
			sw, mw := pairWords(pt, rm)
			var a [2]VecVirtual // pair sums of the even registers, of the odd ones (4x)
			for H := 0; H < 2; H++ {
				w, w4 := YMM(), YMM()
				VMOVDQU(rm.Offset(pt.qs+32*H), w)
				VPSRLW(U8(4), w, w4)
				var hs VecVirtual
				for i := 0; i < 4; i++ {
					src := w
					if i >= 2 {
						src = w4
					}
					cv := YMM()
					VPAND(mask[i%2], src, cv)
					if pt.hm {
						if i%2 == 0 { // registers v, v+1: bits pairHighBit[v] - s = 2 and 4
							hs = YMM()
							VMOVDQU(rm, hs)
							switch s := pairHighBit[4*H+i] - 2; {
							case s > 0:
								VPSRLW(U8(s), hs, hs)
							case s < 0:
								VPSLLW(U8(-s), hs, hs)
							}
						}
						hb := YMM()
						VPAND(hmask[i%2], hs, hb)
						VPOR(hb, cv, cv)
					}
					p := YMM()
					VPMADDUBSW(Mem{Base: ak, Disp: 32 * (4*H + i)}, cv, p)
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
		r4PartSteps(part, c.mins, c.shift, dh, mh, xk, acc4)
	})
}

// pairsF32Prep is Ggml<t>PF32Avx2's unit preparation: D = d*sc and E
// (-dmin*m, or -4*D for Q3_K's codes plus 4) of each sub-block, each
// twice in the words' order (position 2s and 2s+1 of 32: sub-block s) at
// tmp+256 and tmp+384, stored first so that the stores have left by the
// time the kernel loads them whole; then the eight code registers at tmp.
func pairsF32Prep(pt pairType, wp, tp GPVirtual) {
	c := pt.c
	av2 := fvec{avx512: false}
	sw, mw := pairWords(pt, Mem{Base: wp})
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
	three := av2.broadcast(0x03030303)
	var four VecVirtual
	if pt.hm {
		four = av2.broadcast(0x04040404)
	}
	for H := 0; H < 2; H++ {
		for i, v := range pairCodes(pt, Mem{Base: wp}, H, three, four) {
			VMOVDQU(v, Mem{Base: tp, Disp: 128*H + 32*i})
		}
	}
}
