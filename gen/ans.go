package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ansPrefetch is how far ahead (bytes) the AVX-512 decoders prefetch each
// unit's word stream at every step: a step uses about 66 bytes of a unit's
// stream at sigma 4, so this is several steps ahead; the distance matters
// little between 256 and 1024, and not prefetching at all is much slower
// on a chain of distinct matrices.
const ansPrefetch = 512

// ansKernels emits the ANS family: the AVX-512 decoders (one or two units,
// each product mode, both layouts), then the AVX2 ones.
func ansKernels() {
	for _, mode := range []ansMode{ansMul, ansMadd, ansMaddQ} {
		for _, units := range []int{1, 2} {
			ansDot(false, units, mode, false)
			ansDot(true, units, mode, false)
		}
	}
	for _, mode := range []ansMode{ansMul, ansMadd, ansMaddQ} {
		for _, units := range []int{1, 2} {
			ansDot(false, units, mode, true)
		}
	}
	ansDotAVX2(false)
	ansDotAVX2(true)
}

// ansDot emits AnsDot{Rows,Stripes}X<units>Avx512: the fused rANS decode
// and int8 dot product of units (1 or 2) layout/ans units of 32 coders,
// with AVX-512 F, BW, DQ, VBMI, VBMI2, VNNI, BMI2 and POPCNT. Two units interleave two
// independent state chains (the update is a serial chain per coder).
//
// The mode says how F, the rank and the state product are computed (see
// ansMode). With decode (warp rows) the kernel is AnsDecodeRowsX<units>:
// instead of the dot products it stores each step's decoded bytes (the
// table's value plus 128, escapes likewise) to the unit's output, 128
// bytes a step: the words of an ans.Bits matrix.
func ansDot(stripes bool, units int, mode ansMode, decode bool) {
	kind := "Rows"
	if stripes {
		kind = "Stripes"
	}
	name := fmt.Sprintf("AnsDot%sX%d%sAvx512", kind, units, mode.suffix())
	madd := mode != ansMul
	arith := [...]string{"by VPMULLD and VPMULLQ", "by multiply-adds and VPMULUDQ (frequencies <= 127)", "by multiply-adds and VPMULLQ (frequencies <= 127)"}[mode]
	if decode {
		name = fmt.Sprintf("AnsDecodeRowsX%d%sAvx512", units, mode.suffix())
		TEXT(name, NOSPLIT, "func(words *[2]*uint32, nwords *[2]int, steps int, tabs *byte, out *[2]*byte, esc *[2]*int8, nesc *[2]int, ahead int) int")
		Pragma("noescape")
		kernelDoc("ANS kernels", fmt.Sprintf("%s decodes %d layout/ans unit(s) of 32 coders (warp rows) with AVX-512 and stores each step's 128 decoded bytes (value plus 128) at out[u] + 128*step; F, the rank and the state product %s.",
			name, units, arith))
	} else {
		TEXT(name, NOSPLIT, "func(words *[2]*uint32, nwords *[2]int, steps int, tabs *byte, v *int8, acc *int32, esc *[2]*int8, nesc *[2]int, ahead int) int")
		Pragma("noescape")
		kernelDoc("ANS kernels", fmt.Sprintf("%s decodes %d layout/ans unit(s) of 32 coders (warp %s) with AVX-512 and accumulates each coder's int8 dot products; F, the rank and the state product %s.",
			name, units, strings.ToLower(kind), arith))
	}
	tab := param("tabs")
	var tF, tO, tV [2]VecVirtual
	for i, tt := range []*[2]VecVirtual{&tF, &tO, &tV} {
		for h := 0; h < 2; h++ {
			tt[h] = ZMM()
			VMOVDQU8(Mem{Base: tab, Disp: 128*i + 64*h}, tt[h])
		}
	}
	digCtrl := ZMM() // VPMULTISHIFTQB: bytes 0..3 and 4..7 of each qword = bits 0, 7, 14, 21
	{
		t := GP64()
		MOVQ(U64(0x15_0e_07_00_15_0e_07_00), t)
		VPBROADCASTQ(t, digCtrl)
	}
	khi := K() // bytes 4..7 of each qword
	{
		t := GP64()
		MOVQ(U64(0xf0f0f0f0f0f0f0f0), t)
		KMOVQ(t, khi)
	}
	// Memory operands, not registers: the loop of two units needs nearly
	// all 32.
	cff := ansConst("ansCff", 0x000000ff000000ff) // byte 0 of each dword
	low := ansConst("ansLow", 1<<31)
	sign := ansConst("ansSign", 1<<63)
	x := make([][4]VecVirtual, units)
	acc := make([][2]VecVirtual, units)
	wp := make([]GPVirtual, units)
	end := make([]GPVirtual, units)
	wpp, nwp := param("words"), param("nwords")
	ep, eend := make([]GPVirtual, units), make([]GPVirtual, units)
	epp, nep := param("esc"), param("nesc")
	for u := 0; u < units; u++ {
		wp[u], end[u] = GP64(), GP64()
		MOVQ(Mem{Base: wpp, Disp: 8 * u}, wp[u])
		MOVQ(Mem{Base: nwp, Disp: 8 * u}, end[u])
		LEAQ(Mem{Base: wp[u], Index: end[u], Scale: 4}, end[u])
		// The unit's escape list: next byte and end.
		ep[u], eend[u] = GP64(), GP64()
		MOVQ(Mem{Base: epp, Disp: 8 * u}, ep[u])
		MOVQ(Mem{Base: nep, Disp: 8 * u}, eend[u])
		ADDQ(ep[u], eend[u])
		// Word pairs 2t, 2t+1 are coder t's little-endian 64-bit state.
		for i := range x[u] {
			x[u][i] = ZMM()
			VMOVDQU64(Mem{Base: wp[u], Disp: 64 * i}, x[u][i])
			kb := K()
			VPCMPUQ_BCST(U8(1), low, x[u][i], kb) // below 2^31
			m := GP32()
			KMOVB(kb, m)
			TESTL(m, m)
			JNZ(LabelRef(name + "_badstate"))
			VPTESTMQ_BCST(sign, x[u][i], kb) // at or above 2^63
			KMOVB(kb, m)
			TESTL(m, m)
			JNZ(LabelRef(name + "_badstate"))
		}
		ADDQ(U32(256), wp[u])
		// Each half's 16 coders as even coders (qword i: coder 16h+2i)
		// and odd ones (coder 16h+2i+1), so that one VPMULTISHIFTQB of
		// each gives the digits in coder order (see the step).
		for h := 0; h < 2; h++ {
			a, b := x[u][2*h], x[u][2*h+1]
			e, o, ie, io := ZMM(), ZMM(), ZMM(), ZMM()
			VMOVDQU64(ansEvenOdd(0), ie)
			VMOVDQU64(ansEvenOdd(1), io)
			VMOVDQA64(a, e)
			VPERMT2Q(b, ie, e)
			VMOVDQA64(a, o)
			VPERMT2Q(b, io, o)
			x[u][2*h], x[u][2*h+1] = e, o
		}
		if !decode {
			for h := range acc[u] {
				acc[u][h] = ZMM()
				VPXORD(acc[u][h], acc[u][h], acc[u][h])
			}
		}
	}
	ahead := Load(Param("ahead"), GP64())
	step := GP64()
	XORQ(step, step)
	Label(name + "_step")
	for u := 0; u < units; u++ {
		PREFETCHT0(Mem{Base: wp[u], Disp: ansPrefetch})
		PREFETCHT0(Mem{Base: wp[u], Index: ahead, Scale: 1})
	}
	var vp, off GPVirtual
	switch {
	case decode:
		off = GP64()
		IMUL3Q(U32(128), step, off) // the step's bytes in each unit's output
	case !stripes:
		vp = param("v")
		IMUL3Q(U32(128), step, vp) // v + 128*step
		ADDQ(NewParamAddr("v", 32), vp)
	default:
		vp = param("v")
		LEAQ(Mem{Base: vp, Index: step, Scale: 4}, vp)
	}
	for h := 0; h < 2; h++ {
		var vin VecVirtual
		switch {
		case decode:
		case stripes:
			vin = ZMM()
			VPBROADCASTD(Mem{Base: vp}, vin)
		default:
			vin = ZMM()
			VMOVDQU8(Mem{Base: vp, Disp: 64 * h}, vin)
		}
		for u := 0; u < units; u++ {
			xa, xb := x[u][2*h], x[u][2*h+1] // even and odd coders
			// The 64 digits in coder order (byte 4j+i is digit i of coder
			// 16h+j; bit 7 of each byte is ignored below): one
			// VPMULTISHIFTQB of the even coders, one of the odd ones
			// merged into bytes 4..7. That is the order of the escape list
			// and of the accumulators, and dword 2i of F and of the rank
			// belongs to xa's qword i, dword 2i+1 to xb's: a VPANDQ and a
			// VPSRLQ take them.
			dig := ZMM()
			VPMULTISHIFTQB(xa, digCtrl, dig)
			VPMULTISHIFTQB(xb, digCtrl, khi, dig)
			// look returns table t at the digits of dig, copied first
			// unless this is dig's last use (VPERMI2B overwrites its index).
			look := func(t [2]VecVirtual, last bool) VecVirtual {
				r := dig
				if !last {
					r = ZMM()
					VMOVDQA32(dig, r)
				}
				VPERMI2B(t[1], t[0], r)
				return r
			}
			vb := look(tV, false)
			ke := K() // the escape symbol's value byte is the marker no other symbol has
			VPCMPEQB(Mem{Base: tab, Disp: 384}, vb, ke)
			// Escapes are rare but irregular (at sigma 4, a quarter of the
			// halves have one): a branch on them mispredicts often enough
			// to cost a third of the decode time. Instead the half's escaped
			// values, stored plus 128 like the table's, are expand-loaded
			// over the escape symbol's marker in vb.
			kx, cnt, nx := GP64(), GP64(), GP64()
			KMOVQ(ke, kx)
			POPCNTQ(kx, cnt)
			LEAQ(Mem{Base: ep[u], Index: cnt, Scale: 1}, nx)
			CMPQ(nx, eend[u])
			JA(LabelRef(name + "_toomany"))
			VPEXPANDB(Mem{Base: ep[u]}, ke, vb)
			MOVQ(nx, ep[u])
			if decode {
				o := param("out")
				MOVQ(Mem{Base: o, Disp: 8 * u}, o)
				VMOVDQU8(vb, Mem{Base: o, Index: off, Scale: 1, Disp: 64 * h})
			} else {
				VPDPBUSD(vin, vb, acc[u][h])
			}
			part := func(bytes VecVirtual, i int) VecVirtual {
				r := ZMM()
				switch i {
				case 0:
					VPANDD(cff, bytes, r)
				case 3:
					VPSRLD(U8(24), bytes, r)
				default:
					VPSRLD(U8(8*i), bytes, r)
					VPANDD(cff, r, r)
				}
				return r
			}
			// The 16 words at the stream position, loaded before the
			// refill mask is known, so that the refill's expand on the
			// state chain is a register one. This is why 16 words past a
			// unit's end must be readable.
			wpre := ZMM()
			VMOVDQU32(Mem{Base: wp[u]}, wpre)
			var F, rank VecVirtual
			if madd {
				F, rank = ansMaddFR(look(tF, false), look(tO, true))
			} else {
				// Shallow trees (the state update is a serial chain across steps):
				// F = (f0 f1)(f2 f3), rank = (o0 + f0 o1) + (f0 f1)(o2 + f2 o3),
				// in an order that keeps few values live.
				fb, ob := look(tF, false), look(tO, true)
				f0, o1 := part(fb, 0), part(ob, 1)
				lo := ZMM()
				VPMULLD(f0, o1, lo)
				o0 := part(ob, 0)
				VPADDD(o0, lo, lo)
				f1 := part(fb, 1)
				f01 := ZMM()
				VPMULLD(f0, f1, f01)
				f2, o3 := part(fb, 2), part(ob, 3)
				hi := ZMM()
				VPMULLD(f2, o3, hi)
				o2 := part(ob, 2)
				VPADDD(o2, hi, hi)
				f3 := part(fb, 3)
				F = ZMM()
				VPMULLD(f2, f3, F)
				VPMULLD(f01, F, F)
				rank = ZMM()
				VPMULLD(f01, hi, rank)
				VPADDD(lo, rank, rank)
			}
			var kr [2]OpmaskVirtual
			for q, xs := range []VecVirtual{xa, xb} {
				Fq, rq := ZMM(), ZMM()
				if q == 0 {
					VPANDQ(ansConst("ansLo32", 0xffffffff), F, Fq)
					VPANDQ(ansConst("ansLo32", 0xffffffff), rank, rq)
				} else {
					VPSRLQ(U8(32), F, Fq)
					VPSRLQ(U8(32), rank, rq)
				}
				t := ZMM()
				VPSRLQ(U8(28), xs, t)
				if mode == ansMadd { // F * t with t < 2^35: F*(t mod 2^32) + (F*(t >> 32)) << 32
					th := ZMM()
					VPSRLQ(U8(32), t, th)
					VPMULUDQ(Fq, th, th)
					VPSLLQ(U8(32), th, th)
					VPMULUDQ(Fq, t, t)
					VPADDQ(th, t, t)
				} else {
					VPMULLQ(Fq, t, t)
				}
				VPADDQ(rq, t, xs)
				kr[q] = K()
				VPCMPUQ_BCST(U8(1), low, xs, kr[q]) // lanes below 2^31
			}
			// One refill for the half's 16 coders: bit j of the mask is
			// coder 16h+j (the even coders' bits deposited at even
			// positions, the odd ones' at odd), so one expand hands them
			// consecutive words in coder order.
			me, mo, msk := GP32(), GP32(), GP32()
			KMOVB(kr[0], me)
			KMOVB(kr[1], mo)
			MOVL(U32(0x5555), msk)
			PDEPL(msk, me, me)
			MOVL(U32(0xaaaa), msk)
			PDEPL(msk, mo, mo)
			ORL(mo, me)
			k16 := K()
			KMOVW(me, k16)
			wcnt := GP32()
			POPCNTL(me, wcnt)
			nxt := GP64()
			LEAQ(Mem{Base: wp[u], Index: wcnt.As64(), Scale: 4}, nxt)
			CMPQ(nxt, end[u])
			JA(LabelRef(name + "_exhausted"))
			w := ZMM()
			VPEXPANDD_Z(wpre, k16, w)
			MOVQ(nxt, wp[u])
			// Odd coder 16h+2i+1's word is dword 2i+1 of w, the high
			// dword of qword i: x<<32 | word in one VPSHLDQ. Even coder
			// 16h+2i's is dword 2i, the low one: x<<32, then OR the
			// word's dword in (VPTERNLOGQ: A | B&C).
			VPSHLDQ(U8(32), w, xb, kr[1], xb)
			VPSLLQ(U8(32), xa, kr[0], xa)
			VPTERNLOGQ(U8(0xf8), ansConst("ansLo32", 0xffffffff), w, kr[0], xa)
		}
	}
	INCQ(step)
	CMPQ(step, NewParamAddr("steps", 16))
	JB(LabelRef(name + "_step"))
	var ap GPVirtual
	if !decode {
		ap = param("acc")
	}
	for u := 0; u < units; u++ {
		for i := range x[u] { // every coder back at 2^31
			kb := K()
			VPCMPUQ_BCST(U8(4), low, x[u][i], kb) // not equal
			m := GP32()
			KMOVB(kb, m)
			TESTL(m, m)
			JNZ(LabelRef(name + "_badstate"))
		}
		CMPQ(ep[u], eend[u]) // every escape used
		JNE(LabelRef(name + "_toomany"))
		if !decode {
			for h := range acc[u] {
				VMOVDQU32(acc[u][h], Mem{Base: ap, Disp: 128*u + 64*h})
			}
		}
	}
	zero := GP64()
	XORQ(zero, zero)
	ansEpilogue(name, zero)
}

// ansMode selects the arithmetic of an AVX-512 ANS decoder.
type ansMode int

const (
	// ansMul computes F and the rank with six VPMULLD and the state
	// product with VPMULLQ; it alone handles frequency 128 (a one-symbol
	// model).
	ansMul ansMode = iota
	// ansMadd computes F and the rank with byte and word multiply-adds
	// (VPMADDUBSW and VPMADDWD: 10 instructions instead of 21) and
	// the state product with two VPMULUDQ, for Intel cores, where VPMULLD
	// and VPMULLQ are multi-uop with long latencies. Frequencies must be
	// <= 127.
	ansMadd
	// ansMaddQ takes F and the rank from the multiply-adds and the state
	// product from one VPMULLQ: the fewest instructions where VPMULLQ is
	// a single fast uop (Zen 5: two per cycle). Frequencies must be <= 127.
	ansMaddQ
)

// suffix is the mode's part of the kernel name.
func (m ansMode) suffix() string {
	return [...]string{"", "Madd", "MaddQ"}[m]
}

// ansEpilogue ends an ANS decoder: it returns ret (the AVX2 decoder's
// escape count, the AVX-512 decoders' 0), then emits the error exits the
// decoder jumps to, name_exhausted (-1: the words ran out), name_toomany
// (-2: more than escCap escapes for the AVX2 decoder, escape counts that
// do not match the list for the AVX-512 ones) and name_badstate (-3: a
// coder state out of range).
func ansEpilogue(name string, ret Register) {
	Store(ret, ReturnIndex(0))
	VZEROUPPER()
	RET()
	for i, l := range []string{"_exhausted", "_toomany", "_badstate"} {
		Label(name + l)
		t := GP64()
		MOVQ(I64(int64(-1-i)), t)
		Store(t, ReturnIndex(0))
		VZEROUPPER()
		RET()
	}
}

// ansEvenOdd returns the VPERMT2Q index taking the even (odd = 0) or
// odd (odd = 1) qwords of the pair A:B: qword i is qword 2i+odd.
func ansEvenOdd(odd int) Mem {
	return rodata(fmt.Sprintf("ansEvenOdd%d", odd), 8, 8, func(i int) uint64 { return uint64(2*i + odd) })
}

// ansMaddFR computes, per dword lane, F = f0 f1 f2 f3 and rank = (o0 + o1 f0)
// + f0 f1 (o2 + o3 f2) from the frequency bytes fb and offset bytes ob
// (bytes 0..3 of each dword) with multiply-adds; frequencies <= 127.
func ansMaddFR(fb, ob VecVirtual) (F, rank VecVirtual) {
	// VPSHLDW/VPSHLDD shift in the constant's 1 with the same
	// instruction, instead of a shift and an OR each.
	f1x := ZMM() // bytes (1, f0, 1, f2): fb<<8 | 0x0100>>8 per word
	VPSHLDW(U8(8), ansConst("ansOneHi16", 0x0100010001000100), fb, f1x)
	lohi := ZMM() // words (o0 + o1 f0, o2 + o3 f2)
	VPMADDUBSW(f1x, ob, lohi)
	fo := ZMM() // bytes (f1, 0, f3, 0)
	VPSRLW(U8(8), fb, fo)
	fw := ZMM()
	VPMADDUBSW(fo, fb, fw) // words (f0 f1, f2 f3)
	b1 := ZMM()            // words (1, f0 f1): fw<<16 | 0x00010000>>16 per dword
	VPSHLDD(U8(16), ansConst("ansOneHi32", 0x0001000000010000), fw, b1)
	rank = ZMM()
	VPMADDWD(b1, lohi, rank)
	f23 := ZMM()
	VPSRLD(U8(16), fw, f23) // words (f2 f3, 0)
	F = ZMM()
	VPMADDWD(f23, fw, F)
	return F, rank
}

// ansConst returns a 64-byte read-only vector of the qword q repeated.
func ansConst(name string, q uint64) Mem {
	return rodata(name, 8, 8, func(int) uint64 { return q })
}
