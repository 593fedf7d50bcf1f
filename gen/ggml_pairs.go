package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Pair order: the AVX2 kernels of the K types (Q2_K to Q6_K), and of
// IQ4_XS on the avx2 set, read a copy of the matrix whose codes the CPU backend reorders at load
// (cpu.q2kPairSrc, cpu.q4kPairSrc), so that every 16-bit word of a code
// register belongs to one sub-block, the same in all eight registers.
// Then the VPMADDUBSW pairs of the registers add up in int16 and one
// VPMADDWD with the super-block's scale words applies every sub-block
// scale at once (per group of registers: pairGroup), instead of a scale
// spread and a VPMADDWD per register.
//
// 16-column sub-blocks (Q2_K, Q3_K): code register v holds, in byte 16h +
// 2k + b, the code of column 128h + 16k + 2v + b: word k of lane h is
// two columns of sub-block 8h + k. Q2_K keeps llama.cpp's packing of
// 2-bit codes (register v = 4H + i: bits 2i of the 32 code bytes of H).
// Q3_K's 3-bit codes (q + 4, the hmask bit as 4) are stored in three
// planes of 32 bytes in place of hmask and qs: plane A holds registers 0
// (bits 0-2) and 1 (bits 3-5), B registers 2 and 3, C registers 4 and 5,
// and bits 6-7 of A and B hold the low two bits of registers 6 and 7,
// bits 6 and 7 of C their third.
//
// Q6_K (16-column sub-blocks, 6-bit codes) keeps its low nibbles as the
// 32-column types do (below) and its high two bits in two blocks of 32
// bytes in place of qh: bits 2i..2i+1 of byte p of block G are the code
// bits 4-5 of register 4G + i at p. A word sums at most 2*63*128 per
// register, so its registers add up in pairs (pairGroup).
//
// 32-column sub-blocks (Q4_K, Q5_K, IQ4_XS): register v holds, in byte 16h + 4s +
// j, the code of column 128h + 32s + 4v + j: words 2s and 2s+1 of lane h
// are sub-block 4h + s. The 32 bytes at qs + 32H hold register H in their
// low nibbles and H + 4 in their high ones; Q5_K's 32 high-bit bytes, in
// place of qh, hold in bit v of byte p the high bit (16) of register v's
// code at p. A Q5_K word sums at most 2*31*128 per register, so its
// registers add up in two groups of four.
//
// The activations come in the same order (cpu.pairsInt8, or
// cpu.pairsInt8By4 for 32-column sub-blocks); the sums term and the float
// steps are the definition's.

// pairType is a super-block type in pair order.
type pairType struct {
	c     ggmlSuper
	qs    int  // offset of the code bytes (Q3_K: of the three planes)
	nib   bool // codes as nibbles: register H low, H + 4 high at qs + 32H
	kv    bool // IQ4_XS: the nibbles index KValues (signed: signedDot)
	qh    int  // offset of the high bits in pair order (with hi)
	hi    int  // high bits per code: Q5_K 1, Q6_K 2 (0: none)
	d, dm int  // offsets of d and dmin (Q3_K, Q6_K, IQ4_XS: no dmin)
	plane bool // Q3_K: 3-bit codes in three planes
}

var pairTypes = map[string]pairType{
	"Q2K":   {c: ggmlSupers[0], qs: 16, d: 80, dm: 82},
	"Q3K":   {c: ggmlSupers[1], qs: 0, d: 108, plane: true},
	"Q4K":   {c: ggmlSupers[2], qs: 16, nib: true, d: 0, dm: 2},
	"Q5K":   {c: ggmlSupers[3], qs: 48, nib: true, qh: 16, hi: 1, d: 0, dm: 2},
	"Q6K":   {c: ggmlSupers[4], qs: 0, nib: true, qh: 128, hi: 2, d: 208},
	"IQ4XS": {c: ggmlSupers[5], qs: 8, nib: true, kv: true, d: 0},
}

// pairGroup is how many code registers' pair sums a word adds in int16
// before their VPMADDWD: all eight (Q2_K and Q3_K take theirs scaled, see
// pairSums; Q4_K at most 8*2*15*128), Q5_K four (4*2*31*128), Q6_K two
// (2*2*63*128), IQ4_XS one (signedDot: 2*128*127).
func pairGroup(pt pairType) int {
	if pt.kv {
		return 1
	}
	switch pt.hi {
	case 1:
		return 4
	case 2:
		return 2
	}
	return 8
}

// pairHigh ORs into r, register v's low four code bits, its high bits
// (mask: k.hi).
func pairHigh(pt pairType, base Mem, v int, k pairCodeConsts, r VecVirtual) {
	switch pt.hi {
	case 1:
		highBits(base.Offset(pt.qh), v, 4, k.hi, r)
	case 2:
		highBits(base.Offset(pt.qh+32*(v/4)), 2*(v%4), 4, k.hi, r)
	}
}

// pairNibw loads the word mask pairWords takes for Q2_K (0x000f per
// word; nil for the others), once per kernel rather than per super-block.
func pairNibw(pt pairType) VecVirtual {
	if pt.plane || pt.nib {
		return nil
	}
	return fvec{avx512: false}.broadcast(0x000f000f)
}

// pairWords returns the 16 scale words of the super-block at base in the
// words' order (16-column sub-blocks: sub-block k at word k; 32-column
// ones: sub-block j at words 2j and 2j+1) and the words its sums term
// multiplies the activation sums by, one per sub-block: Q2_K's mins (each
// scale byte zero-extended, its low nibble, masked by nibw, and its high
// nibble), Q3_K's and Q6_K's scales again, the mins of Q4_K and Q5_K (an
// XMM; IQ4_XS: its scales, unused).
func pairWords(pt pairType, base Mem, nibw VecVirtual) (sw, mw VecVirtual) {
	if pt.c.sub == 32 {
		var sc, m VecVirtual
		if pt.kv {
			sc, m = ggmlScaleWordsAVX2(pt.c, base)
		} else {
			sc, m = q4kScaleWords(base, false)
		}
		lo, hi := XMM(), XMM()
		VPUNPCKLWD(sc, sc, lo)
		VPUNPCKHWD(sc, sc, hi)
		sw = YMM()
		VINSERTI128(U8(1), hi, lo.AsY(), sw)
		return sw, m
	}
	if pt.plane || pt.nib {
		return ggmlScaleWordsAVX2(pt.c, base)
	}
	sw, mw = YMM(), YMM()
	VPMOVZXBW(base, sw)
	VPSRLW(U8(4), sw, mw)
	VPAND(nibw, sw, sw)
	return sw, mw
}

// pairCodeConsts are the byte masks pairCodes takes: three for the 2-bit
// fields; Q3_K's seven and four for its planes; the nibble mask and the
// high bits' mask (Q5_K 16, Q6_K 48); IQ4_XS's KValues (plus 128 with
// kvOffset, for the float kernel's unsigned codes).
type pairCodeConsts struct{ three, seven, four, nib, hi, kv VecVirtual }

func newPairCodeConsts(pt pairType, kvOffset bool) pairCodeConsts {
	av2 := fvec{avx512: false}
	if pt.nib {
		k := pairCodeConsts{nib: nibbleMask(YMM())}
		if pt.kv {
			k.kv = ggmlKValuesYMM(kvOffset)
		}
		switch pt.hi {
		case 1:
			k.hi = av2.broadcast(0x10101010)
		case 2:
			k.hi = av2.broadcast(0x30303030)
		}
		return k
	}
	k := pairCodeConsts{three: av2.broadcast(0x03030303)}
	if pt.plane {
		k.seven, k.four = av2.broadcast(0x07070707), av2.broadcast(0x04040404)
	}
	return k
}

// pairCodes calls each(v, r) for the eight code registers of the
// super-block at base in turn, r holding register v's codes (Q3_K: plus
// 4; IQ4_XS: their KValues, as k.kv holds them).
func pairCodes(pt pairType, base Mem, k pairCodeConsts, each func(v int, r VecVirtual)) {
	if pt.nib {
		for v := 0; v < 8; v++ {
			r := YMM()
			VMOVDQU(base.Offset(pt.qs+32*(v%4)), r)
			if v >= 4 {
				VPSRLW(U8(4), r, r)
			}
			VPAND(k.nib, r, r)
			pairHigh(pt, base, v, k, r)
			if pt.kv {
				VPSHUFB(r, k.kv, r)
			}
			each(v, r)
		}
		return
	}
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
// code registers times the activations (VPMADDUBSW; IQ4_XS signedDot),
// their pair sums
// added in int16 (pairSums: each word is then the dot product of its
// columns of one sub-block over all registers, or a group of them), one
// VPMADDWD per group with the scale words (lane h: half h's S in four
// dwords), the sums term (VPMADDWD of the activation sums with the mins,
// or Q6_K's scales for its recentring by 32; none for IQ4_XS), then the
// reductions and float steps with the rows in the lanes (r4PartSteps). Q3_K's recentring is folded in
// before the scales: each sub-block's sum less 4 times its activation sum
// (at most 14336 + 8192 in magnitude) times its scale is the definition's
// S - 4*sum(sc*sx), in one VPMADDWD.
func pairsA8R4AVX2(pt pairType) {
	c := pt.c
	name := "Ggml" + c.t + "PA8R4Avx2"
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s computes the exact A8 product of layout/ggml %s rows in pair order (the codes reordered at load, the activations in the same order) with AVX2, one vector and four rows at a time (rows a multiple of 4; nvec and the strides ignored): per row and super-block one VPMADDWD with the 16 scale words per group of code registers, the reductions and float steps with the rows in the lanes.", name, ggmlTypeName(c.t)))
	part := AllocLocal(4 * 48)
	sums := pairSums(pt)
	nibw := pairNibw(pt)
	shift := c.shift // the sums term's (Q6_K); Q3_K's is folded in, IQ4_XS has none (signed codes)
	if pt.plane || pt.kv {
		shift = 0
	}
	fourRows(name, r4PfL2, c.bytes, 256, 2*256/c.sub, 8, func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual) {
		dh, mh := XMM(), XMM()
		VPXOR(dh, dh, dh)
		if c.mins {
			VPXOR(mh, mh, mh)
		}
		var sx VecVirtual // Q3_K: 4 times the activation sums
		if pt.plane {
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
			S := YMM()
			for g, a := range sums(rm, ak) {
				if pt.plane {
					VPSUBW(sx, a, a)
				}
				if g == 0 {
					VPMADDWD(sw, a, S)
					continue
				}
				VPMADDWD(sw, a, a)
				VPADDD(a, S, S)
			}
			VMOVDQU(S, part.Offset(48*r))
			if !c.mins && shift == 0 {
				continue
			}
			mm := XMM()
			if c.sub == 32 {
				VPMADDWD(Mem{Base: sk}, mw, mm)
			} else {
				m8 := YMM()
				VPMADDWD(Mem{Base: sk}, mw, m8)
				hi := XMM()
				VEXTRACTI128(U8(1), m8, hi)
				VPHADDD(hi, m8.AsX(), mm)
			}
			VMOVDQU(mm, part.Offset(48*r+32))
		}
		r4PartSteps(part, c.mins, shift, dh, mh, xk, acc4, true)
	})
}

// pairSums loads its constants and returns a function emitting, for the
// super-block at base and the activations at ak (register v at ak+32v),
// the 16 int16 words of the sums of code times activation per word
// position over each group of pairGroup registers (registers 0..3 and
// 4..7 for Q5_K, pairs for Q6_K, each alone for IQ4_XS, all eight for the
// others).
// Registers are taken scaled by a power of two where that saves a shift
// (a mask in place of shift and mask), their pair sums added per scale
// and divided exactly (VPSRAW of sums of multiples) before the final add.
// Q2_K: the odd registers as 4q, two sums of at most 4*2*12*128. Q3_K:
// registers 1 and 3 as 8q (at most 2*2*56*128), 5 as 8q divided alone,
// the rest (6 and 7 from two planes) as q: at most 6*2*7*128. The nibble
// types: registers H and H + 4 from the 32 bytes at qs + 32H (IQ4_XS:
// looked up in KValues, times the activations by signedDot).
func pairSums(pt pairType) func(base Mem, ak GPVirtual) []VecVirtual {
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
	if pt.nib {
		k := newPairCodeConsts(pt, false)
		g := pairGroup(pt)
		return func(base Mem, ak GPVirtual) []VecVirtual {
			a := make([]VecVirtual, 8/g)
			for H := 0; H < 4; H++ {
				w, w4 := YMM(), YMM()
				VMOVDQU(base.Offset(pt.qs+32*H), w)
				VPSRLW(U8(4), w, w4)
				for i, cv := range []VecVirtual{w, w4} {
					v := H + 4*i
					VPAND(k.nib, cv, cv)
					pairHigh(pt, base, v, k, cv)
					if pt.kv { // KValues times x, sign moved to the codes
						VPSHUFB(cv, k.kv, cv)
						p := YMM()
						signedDot(cv, Mem{Base: ak, Disp: 32 * v}, nil, p)
						a[v] = p
						continue
					}
					add(&a[v/g], madd(v, cv, ak))
				}
			}
			return a
		}
	}
	if !pt.plane {
		mask := [2]VecVirtual{av2.broadcast(0x03030303), av2.broadcast(0x0c0c0c0c)}
		return func(base Mem, ak GPVirtual) []VecVirtual {
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
			return a[:1]
		}
	}
	m7, m38 := av2.broadcast(0x07070707), av2.broadcast(0x38383838)
	three, four := av2.broadcast(0x03030303), av2.broadcast(0x04040404)
	return func(base Mem, ak GPVirtual) []VecVirtual {
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
		return []VecVirtual{a1}
	}
}

// pairsF32Prep is Ggml<t>PF32Avx2's unit preparation: D = d*sc and E
// (-dmin*m, or -2^shift*D for the codes stored plus 2^shift: Q3_K, Q6_K,
// IQ4_XS's KValues + 128) of each sub-block, stored at
// tmp+256 and tmp+384 once per code position p (0..31) in the words'
// order (16-column sub-blocks: 8(p/16) + p%16/2; 32-column ones: 4(p/16)
// + p%16/4), first so that the stores have left by the time the kernel
// loads them whole; then the eight code registers at tmp.
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
	// DE returns D and E of eight sub-blocks from their scale words as
	// dwords in d and, with mins, the words of their mins that m loads as
	// dwords
	DE := func(d VecVirtual, m func(e VecVirtual)) (VecVirtual, VecVirtual) {
		VCVTDQ2PS(d, d)
		VMULPS(d8, d, d)
		e := YMM()
		if c.mins {
			m(e)
			VCVTDQ2PS(e, e)
			VMULPS(dm8, e, e)
			VXORPS(av2.broadcast(0x80000000), e, e)
		} else {
			VMULPS(av2.broadcast(math32bits(-float32(int(1)<<c.shift))), d, e)
		}
		return d, e
	}
	// spread stores D and E of the eight sub-blocks in v (k: the eight
	// sub-blocks 8k..8k+7 of 16 columns) for the runs of eight positions
	// that take them, through VPERMPS with idx
	spread := func(d, e VecVirtual, k int, idx []VecVirtual) {
		for q := range idx {
			for o, v := range []VecVirtual{d, e} {
				y := YMM()
				VPERMPS(v, idx[q], y)
				VMOVUPS(y, Mem{Base: tp, Disp: 256 + 128*o + 32*(len(idx)*k+q)})
			}
		}
	}
	if c.sub == 32 { // the sub-block's scale in both words of its dword
		d := YMM()
		if pt.kv { // signed scales
			VPSRAD(U8(16), sw, d)
		} else {
			VPSRLD(U8(16), sw, d)
		}
		d, e := DE(d, func(e VecVirtual) { VPMOVZXWD(mw, e) })
		idx := make([]VecVirtual, 4) // positions 8q..8q+7: sub-blocks 2q, 2q+1
		for q := range idx {
			idx[q] = YMM()
			VMOVDQU(ggmlPairSpread(q), idx[q])
		}
		spread(d, e, 0, idx)
	} else {
		idx := make([]VecVirtual, 2) // positions 8q..8q+7 of 16k: sub-blocks 8k+4q+i/2
		for q := range idx {
			idx[q] = YMM()
			VMOVDQU(rodata(fmt.Sprintf("ggmlPairDup%d", q), 8, 4, func(i int) uint64 { return uint64(4*q + i/2) }), idx[q])
		}
		for k := 0; k < 2; k++ { // sub-blocks 8k..8k+7
			sx, mx := sw.AsX(), mw.AsX()
			if k == 1 {
				sx = XMM()
				VEXTRACTI128(U8(1), sw, sx)
				if c.mins {
					mx = XMM()
					VEXTRACTI128(U8(1), mw, mx)
				}
			}
			d := YMM()
			if c.mins {
				VPMOVZXWD(sx, d)
			} else {
				VPMOVSXWD(sx, d)
			}
			d, e := DE(d, func(e VecVirtual) { VPMOVZXWD(mx, e) })
			spread(d, e, k, idx)
		}
	}
	pairCodes(pt, Mem{Base: wp}, newPairCodeConsts(pt, true), func(v int, r VecVirtual) {
		VMOVDQU(r, Mem{Base: tp, Disp: 32 * v})
	})
}
