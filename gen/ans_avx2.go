package main

import (
	"fmt"
	"math/bits"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ansDotAVX2 emits AnsDot{Rows,Stripes}Avx2: the fused rANS decode and
// int8 dot product of one layout/ans unit of 32 coders with AVX2 (and
// POPCNT). The 64-bit states are 8 YMM of 4 qwords, kept in the frame
// (16 YMM registers cannot hold them with the temporaries); each step
// decodes four groups of 8 coders: the low dwords of two state registers
// packed into one YMM (VSHUFPS; coder order 0,1,4,5 | 2,3,6,7 in the
// group, undone by VPERMQ 0xD8), the four digits looked up with four
// VPGATHERDD from a 128-dword table, F and the rank with VPMULLD, the
// products with VPMADDWD on sign-extended words. Refills: the lanes of a
// state register below 2^31 (VPCMPGTQ, VMOVMSKPD) take the next
// POPCNT(mask) words, loaded with VPMASKMOVD (no read past them) and
// spread to their lanes by a VPERMD table indexed by the mask.
func ansDotAVX2(stripes bool) {
	kind := "Rows"
	if stripes {
		kind = "Stripes"
	}
	name := fmt.Sprintf("AnsDot%sAvx2", kind)
	TEXT(name, NOSPLIT, "func(words *uint32, nwords int, steps int, tab *uint32, v *int8, acc *int32, esc *uint32, escCap int) int")
	Pragma("noescape")
	kernelDoc("ANS kernels", fmt.Sprintf("%s decodes one layout/ans unit of 32 coders (warp %s) with AVX2 and accumulates each coder's int8 dot products, recording escapes for the caller.", name, strings.ToLower(kind)))
	st := AllocLocal(256 + 128) // states (8 x 32 bytes), then accumulators (4 x 32)
	wp, end := param("words"), param("nwords")
	LEAQ(Mem{Base: wp, Index: end, Scale: 4}, end)
	low := YMM() // 2^31 per qword
	{
		t := GP64()
		MOVQ(U64(1<<31), t)
		VMOVQ(t, low.AsX())
		VPBROADCASTQ(low.AsX(), low)
	}
	zero := YMM()
	VPXOR(zero, zero, zero)
	for i := 0; i < 8; i++ {
		x := YMM()
		VMOVDQU(Mem{Base: wp, Disp: 32 * i}, x)
		bad := YMM()
		VPCMPGTQ(x, low, bad) // signed: below 2^31 or at or above 2^63
		VPTEST(bad, bad)
		JNZ(LabelRef(name + "_badstate"))
		VMOVDQU(x, st.Offset(32*i))
	}
	for g := 0; g < 4; g++ {
		VMOVDQU(zero, st.Offset(256+32*g))
	}
	ADDQ(U32(256), wp)
	nesc := GP64()
	XORQ(nesc, nesc)
	step := GP64()
	XORQ(step, step)
	tab := param("tab")
	perm, pre := ansAVX2Tables()
	Label(name + "_step")
	vp := param("v")
	var ve, vo VecVirtual
	inputs := func(src Mem) {
		vv := YMM()
		if stripes {
			VPBROADCASTD(src, vv)
		} else {
			VPERMQ(U8(0xd8), src, vv) // the group's dword order 0,1,4,5,2,3,6,7
		}
		ve, vo = YMM(), YMM()
		VPSLLW(U8(8), vv, ve)
		VPSRAW(U8(8), ve, ve) // words (v0, v2)
		VPSRAW(U8(8), vv, vo) // words (v1, v3)
	}
	if stripes {
		LEAQ(Mem{Base: vp, Index: step, Scale: 4}, vp)
		inputs(Mem{Base: vp})
	} else {
		t := GP64()
		MOVQ(step, t)
		SHLQ(U8(7), t)
		ADDQ(t, vp)
	}
	for g := 0; g < 4; g++ {
		if !stripes {
			inputs(Mem{Base: vp, Disp: 32 * g})
		}
		xa, xb := YMM(), YMM()
		VMOVDQU(st.Offset(64*g), xa)
		VMOVDQU(st.Offset(64*g+32), xb)
		s := YMM()
		VSHUFPS(U8(0x88), xb, xa, s) // low dwords: coders 0,1,4,5 | 2,3,6,7
		VPAND(ansAVX2Const("ansMask28", 1<<28-1), s, s)
		var gt [4]VecVirtual
		for i := 0; i < 4; i++ {
			d := YMM()
			if i > 0 {
				VPSRLD(U8(7*i), s, d)
				if i < 3 {
					VPAND(ansAVX2Const("ansMask127", 127), d, d)
				}
			} else {
				VPAND(ansAVX2Const("ansMask127", 127), s, d)
			}
			m := YMM()
			VPCMPEQD(m, m, m)
			gt[i] = YMM()
			VPXOR(gt[i], gt[i], gt[i])
			VPGATHERDD(m, Mem{Base: tab, Index: d, Scale: 4}, gt[i])
		}
		// Products: words (val0, val2) and (val1, val3) with the inputs.
		for k, pr := range [2][2]int{{0, 2}, {1, 3}} {
			a, b := YMM(), YMM()
			VPSRAD(U8(24), gt[pr[0]], a)
			VPSRAD(U8(8), gt[pr[1]], b)
			VPBLENDW(U8(0xaa), b, a, a)
			vin := ve
			if k == 1 {
				vin = vo
			}
			VPMADDWD(vin, a, a)
			VPADDD(st.Offset(256+32*g), a, a)
			VMOVDQU(a, st.Offset(256+32*g))
		}
		// Escapes (rare): flags to byte 4p+i, lane order, one bit each.
		{
			any := YMM()
			VPOR(gt[0], gt[1], any)
			VPOR(gt[2], any, any)
			VPOR(gt[3], any, any)
			VPTEST(ansAVX2Const("ansEscBit", 0x80<<16), any)
			noEsc := fmt.Sprintf("%s_noesc%d", name, g)
			JZ(LabelRef(noEsc))
			e, t := YMM(), YMM()
			eb := ansAVX2Const("ansEscBit", 0x80<<16)
			VPAND(eb, gt[0], e)
			VPSRLD(U8(16), e, e)
			VPAND(eb, gt[1], t)
			VPSRLD(U8(8), t, t)
			VPOR(t, e, e)
			VPAND(eb, gt[2], t)
			VPOR(t, e, e)
			VPAND(eb, gt[3], t)
			VPSLLD(U8(8), t, t)
			VPOR(t, e, e)
			VPERMQ(U8(0xd8), e, e) // lane order
			kx := GP32()
			VPMOVMSKB(e, kx) // bit 4t+i: coder 8g+t, element i
			loop := fmt.Sprintf("%s_esc%d", name, g)
			Label(loop)
			b := GP32()
			BSFL(kx, b)
			ev := GP64()
			MOVQ(step, ev)
			SHLQ(U8(8), ev)
			ADDQ(U32(uint32(32*g)), ev)
			ADDQ(b.As64(), ev)
			CMPQ(nesc, NewParamAddr("escCap", 56))
			JAE(LabelRef(name + "_toomany"))
			ep := param("esc")
			MOVL(ev.As32(), Mem{Base: ep, Index: nesc, Scale: 4})
			INCQ(nesc)
			MOVL(kx, b)
			DECL(b)
			ANDL(b, kx)
			JNZ(LabelRef(loop))
			Label(noEsc)
		}
		// F = (f0 f1)(f2 f3), rank = (o0 + f0 o1) + (f0 f1)(o2 + f2 o3).
		cff := ansAVX2Const("ansMaskFF", 0xff)
		f := func(i int) VecVirtual {
			r := YMM()
			VPAND(cff, gt[i], r)
			return r
		}
		o := func(i int) VecVirtual {
			r := YMM()
			VPSRLD(U8(8), gt[i], r)
			VPAND(cff, r, r)
			return r
		}
		f0 := f(0)
		lo := o(1)
		VPMULLD(f0, lo, lo)
		VPADDD(o(0), lo, lo)
		f01 := f(1)
		VPMULLD(f0, f01, f01)
		f2 := f(2)
		hi := o(3)
		VPMULLD(f2, hi, hi)
		VPADDD(o(2), hi, hi)
		F := f(3)
		VPMULLD(f2, F, F)
		VPMULLD(f01, F, F)
		rank := hi
		VPMULLD(f01, hi, rank)
		VPADDD(lo, rank, rank)
		for q, xs := range []VecVirtual{xa, xb} {
			Fq, rq := YMM(), YMM()
			if q == 0 {
				VPUNPCKLDQ(F, F, Fq)
				VPUNPCKLDQ(zero, rank, rq)
			} else {
				VPUNPCKHDQ(F, F, Fq)
				VPUNPCKHDQ(zero, rank, rq)
			}
			t, th := YMM(), YMM()
			VPSRLQ(U8(28), xs, t) // < 2^35: F*(t mod 2^32) + (F*(t >> 32)) << 32
			VPSRLQ(U8(32), t, th)
			VPMULUDQ(Fq, th, th)
			VPSLLQ(U8(32), th, th)
			VPMULUDQ(Fq, t, t)
			VPADDQ(th, t, t)
			VPADDQ(rq, t, xs)
			need := YMM()
			VPCMPGTQ(xs, low, need) // below 2^31
			m := GP32()
			VMOVMSKPD(need, m)
			cnt := GP32()
			POPCNTL(m, cnt)
			nxt := GP64()
			LEAQ(Mem{Base: wp, Index: cnt.As64(), Scale: 4}, nxt)
			CMPQ(nxt, end)
			JA(LabelRef(name + "_exhausted"))
			SHLL(U8(4), cnt)
			pm := GP64()
			LEAQ(pre, pm)
			lm := YMM()
			VMOVDQU(Mem{Base: pm, Index: cnt.As64(), Scale: 1}.Offset(0), lm.AsX())
			w := YMM()
			VPMASKMOVD(Mem{Base: wp}, lm.AsX(), w.AsX()) // the first cnt words only
			VPMOVZXDQ(w.AsX(), w)
			SHLL(U8(5), m)
			LEAQ(perm, pm)
			idx := YMM()
			VMOVDQU(Mem{Base: pm, Index: m.As64(), Scale: 1}, idx)
			VPERMD(w, idx, w)
			sh := YMM()
			VPSLLQ(U8(32), xs, sh)
			VPOR(w, sh, sh)
			VBLENDVPD(need, sh, xs, xs)
			VMOVDQU(xs, st.Offset(64*g+32*q))
			MOVQ(nxt, wp)
		}
	}
	INCQ(step)
	CMPQ(step, NewParamAddr("steps", 16))
	JB(LabelRef(name + "_step"))
	for i := 0; i < 8; i++ { // every coder back at 2^31
		x := YMM()
		VMOVDQU(st.Offset(32*i), x)
		VPXOR(low, x, x)
		VPTEST(x, x)
		JNZ(LabelRef(name + "_badstate"))
	}
	ap := param("acc")
	for g := 0; g < 4; g++ {
		a := YMM()
		VPERMQ(U8(0xd8), st.Offset(256+32*g), a)
		VMOVDQU(a, Mem{Base: ap, Disp: 32 * g})
	}
	ansEpilogue(name, nesc)
}

// ansAVX2Tables returns the refill tables: for each 4-bit mask of lanes
// that need a word, the VPERMD index putting the k-th loaded word (zero
// extended to a qword) into the k-th set lane; for each count c, the
// VPMASKMOVD mask of the first c dwords.
func ansAVX2Tables() (perm, pre Mem) {
	perm = rodata("ansAvx2Perm", 16*8, 4, func(i int) uint64 {
		m, j, half := i/8, i%8/2, i%2 // mask, lane, dword of the lane's qword
		k := j
		if m>>j&1 == 1 {
			k = bits.OnesCount(uint(m & (1<<j - 1))) // the set lanes below j
		}
		return uint64(2*k + half)
	})
	pre = rodata("ansAvx2Prefix", 5*4, 4, func(i int) uint64 {
		if i%4 < i/4 { // count i/4, dword i%4
			return 0xffffffff
		}
		return 0
	})
	return perm, pre
}

// ansAVX2Const returns a 32-byte read-only vector of the dword d repeated.
func ansAVX2Const(name string, d uint32) Mem {
	return rodata(name, 8, 4, func(int) uint64 { return uint64(d) })
}
