package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ansDot emits AnsDot{Rows,Stripes}Avx512: the fused rANS decode and int8
// dot product of one unit (32 coders) of layout/ans, with AVX-512 F, BW,
// DQ, VBMI, VNNI and BMI2.
func ansDot(stripes bool) {
	name := "AnsDotRowsAvx512"
	if stripes {
		name = "AnsDotStripesAvx512"
	}
	TEXT(name, NOSPLIT, "func(words *uint32, nwords int, steps int, tabs *byte, v *int8, states *uint64, acc *int32, esc *uint32, escCap int) int")
	Pragma("noescape")
	vdesc := "v + 128*j + 4*t (warp rows: lane t's own 4 inputs)"
	if stripes {
		vdesc = "v + 4*j (warp stripes: the same 4 inputs for every lane)"
	}
	Doc(
		name+" decodes steps quads of each of the 32 coders of a layout/ans unit",
		"(states[t], 64-bit, in and out) from the interleaved words (nwords of",
		"them, after the 64 state words) exactly as the generic decoder does, and",
		"adds to acc[t] (int32) the dot product of each quad's values with the 4",
		"int8 inputs at "+vdesc+", quad j.",
		"",
		"tabs holds four 128-byte tables indexed by slot digit: the digit's symbol",
		"frequency, the digit minus the symbol's cumulative frequency, the value",
		"plus 128 (128 for the escape symbol, so an escape contributes 0), and",
		"1 for the escape symbol else 0. Each escape is recorded, in decoding",
		"order, as esc[n] = j<<8 | t<<2 | e (quad j, lane t, element e) for the",
		"caller to add; the products use unsigned (value+128) times signed inputs",
		"(VPDPBUSD), so the caller subtracts 128 * (sum of each lane's inputs).",
		"",
		"Returns the number of escapes, -1 if the words run out, -2 if more than",
		"escCap escapes occur. Never reads outside words[0:nwords].",
	)
	ret := func(v int32) {
		t := GP64()
		MOVQ(I64(int64(v)), t)
		Store(t, ReturnIndex(0))
		VZEROUPPER()
		RET()
	}
	// Constants.
	tab := param("tabs")
	var tF, tO, tV, tE [2]VecVirtual
	for i, tt := range []*[2]VecVirtual{&tF, &tO, &tV, &tE} {
		for h := 0; h < 2; h++ {
			tt[h] = ZMM()
			VMOVDQU8(Mem{Base: tab, Disp: 128*i + 64*h}, tt[h])
		}
	}
	digCtrl := ZMM() // VPMULTISHIFTQB: bytes 0..3 of each qword = bits 0, 7, 14, 21
	{
		t := GP64()
		MOVQ(U64(0x15_0e_07_00), t)
		VPBROADCASTQ(t, digCtrl)
	}
	pack := ZMM()
	VMOVDQU8(ansPackDigits(), pack)
	c7f, cff := ZMM(), ZMM()
	{
		t := GP32()
		MOVL(U32(0x7f7f7f7f), t)
		VPBROADCASTD(t, c7f)
		MOVL(U32(0xff), t)
		VPBROADCASTD(t, cff)
	}
	low := ZMM() // 2^31
	{
		t := GP64()
		MOVQ(U64(1<<31), t)
		VPBROADCASTQ(t, low)
	}
	sp := param("states")
	var x [4]VecVirtual
	for i := range x {
		x[i] = ZMM()
		VMOVDQU64(Mem{Base: sp, Disp: 64 * i}, x[i])
	}
	ap := param("acc")
	var acc [2]VecVirtual
	for h := range acc {
		acc[h] = ZMM()
		VMOVDQU32(Mem{Base: ap, Disp: 64 * h}, acc[h])
	}
	wp := param("words")
	end := GP64() // words + 4*nwords
	{
		n := param("nwords")
		LEAQ(Mem{Base: wp, Index: n, Scale: 4}, end)
	}
	vp := param("v")
	nesc := GP64()
	XORQ(nesc, nesc)
	step := GP64()
	XORQ(step, step)
	Label(name + "_step")
	for h := 0; h < 2; h++ {
		xa, xb := x[2*h], x[2*h+1]
		// 64 digit bytes, lane-major: byte 4t+i = digit i of lane 16h+t.
		da, db := ZMM(), ZMM()
		VPMULTISHIFTQB(xa, digCtrl, da)
		VPMULTISHIFTQB(xb, digCtrl, db)
		VPERMT2B(db, pack, da)
		dig := da
		VPANDD(c7f, dig, dig)
		look := func(t [2]VecVirtual) VecVirtual {
			r := ZMM()
			VMOVDQA32(dig, r)
			VPERMI2B(t[1], t[0], r)
			return r
		}
		fb, ob, vb, eb := look(tF), look(tO), look(tV), look(tE)
		// Escapes (rare): record them in decoding order.
		ke := K()
		VPTESTMB(eb, eb, ke)
		kx := GP64()
		KMOVQ(ke, kx)
		noEsc := fmt.Sprintf("%s_noesc%d", name, h)
		TESTQ(kx, kx)
		JZ(LabelRef(noEsc))
		{
			loop := fmt.Sprintf("%s_esc%d", name, h)
			Label(loop)
			b := GP64()
			TZCNTQ(kx, b)
			ev := GP64() // step<<8 | lane<<2 | e, lane = 16h + b/4, e = b%4
			MOVQ(step, ev)
			SHLQ(U8(8), ev)
			if h == 1 {
				ADDQ(U32(64), ev) // lane += 16
			}
			ADDQ(b, ev) // b = 4*(lane-16h) + e
			CMPQ(nesc, NewParamAddr("escCap", 64))
			JAE(LabelRef(name + "_toomany"))
			ep := param("esc")
			MOVL(ev.As32(), Mem{Base: ep, Index: nesc, Scale: 4})
			INCQ(nesc)
			BLSRQ(kx, kx)
			JNZ(LabelRef(loop))
		}
		Label(noEsc)
		// Frequencies and digit offsets per lane (dwords), F and the rank.
		part := func(bytes VecVirtual, i int) VecVirtual {
			r := ZMM()
			if i == 3 {
				VPSRLD(U8(24), bytes, r)
				return r
			}
			if i == 0 {
				VPANDD(cff, bytes, r)
				return r
			}
			VPSRLD(U8(8*i), bytes, r)
			VPANDD(cff, r, r)
			return r
		}
		f0, f1, f2, f3 := part(fb, 0), part(fb, 1), part(fb, 2), part(fb, 3)
		o0, o1, o2, o3 := part(ob, 0), part(ob, 1), part(ob, 2), part(ob, 3)
		// Shallow trees (the state update is a serial chain across steps):
		// F = (f0 f1)(f2 f3), rank = (o0 + f0 o1) + (f0 f1)(o2 + f2 o3).
		f01, f23, F := ZMM(), ZMM(), ZMM()
		VPMULLD(f0, f1, f01)
		VPMULLD(f2, f3, f23)
		VPMULLD(f23, f01, F)
		lo, hi, rank := ZMM(), ZMM(), ZMM()
		VPMULLD(f0, o1, lo)
		VPADDD(o0, lo, lo)
		VPMULLD(f2, o3, hi)
		VPADDD(o2, hi, hi)
		VPMULLD(f01, hi, rank)
		VPADDD(lo, rank, rank)
		// The dot product of this step's quads with the inputs.
		vin := ZMM()
		if stripes {
			VPBROADCASTD(Mem{Base: vp}, vin)
		} else {
			VMOVDQU8(Mem{Base: vp, Disp: 64 * h}, vin)
		}
		VPDPBUSD(vin, vb, acc[h])
		// State update and refill, lanes in order.
		for q, xs := range []VecVirtual{xa, xb} {
			Fq, rq := ZMM(), ZMM()
			if q == 0 {
				VPMOVZXDQ(F.AsY(), Fq)
				VPMOVZXDQ(rank.AsY(), rq)
			} else {
				fy, ry := YMM(), YMM()
				VEXTRACTI64X4(U8(1), F, fy)
				VEXTRACTI64X4(U8(1), rank, ry)
				VPMOVZXDQ(fy, Fq)
				VPMOVZXDQ(ry, rq)
			}
			t := ZMM()
			VPSRLQ(U8(28), xs, t)
			VPMULLQ(Fq, t, t)
			VPADDQ(rq, t, xs)
			kr := K()
			VPCMPUQ(U8(1), low, xs, kr) // lanes below 2^31
			m := GP32()
			KMOVB(kr, m)
			cnt := GP32()
			POPCNTL(m, cnt)
			nxt := GP64()
			LEAQ(Mem{Base: wp, Index: cnt.As64(), Scale: 4}, nxt)
			CMPQ(nxt, end)
			JA(LabelRef(name + "_exhausted"))
			spread := GP32()
			MOVL(U32(0x5555), spread)
			PDEPL(spread, m, spread) // qword lane j -> dword lane 2j
			k2 := K()
			KMOVW(spread, k2)
			w := ZMM()
			VPEXPANDD_Z(Mem{Base: wp}, k2, w)
			VPSLLQ(U8(32), xs, kr, xs)
			VPORQ(w, xs, xs)
			MOVQ(nxt, wp)
		}
	}
	if stripes {
		ADDQ(U32(4), vp)
	} else {
		ADDQ(U32(128), vp)
	}
	INCQ(step)
	CMPQ(step, NewParamAddr("steps", 16))
	JB(LabelRef(name + "_step"))
	sp = param("states")
	for i := range x {
		VMOVDQU64(x[i], Mem{Base: sp, Disp: 64 * i})
	}
	ap = param("acc")
	for h := range acc {
		VMOVDQU32(acc[h], Mem{Base: ap, Disp: 64 * h})
	}
	Store(nesc, ReturnIndex(0))
	VZEROUPPER()
	RET()
	Label(name + "_exhausted")
	ret(-1)
	Label(name + "_toomany")
	ret(-2)
}

var ansPack *Mem

// ansPackDigits returns the VPERMT2B index gathering bytes 0..3 of the 16
// qwords of two vectors into 64 bytes, lane-major.
func ansPackDigits() Mem {
	if ansPack == nil {
		m := GLOBL("ansPackDigits", RODATA|NOPTR)
		for j := 0; j < 64; j++ {
			t, i := j/4, j%4
			DATA(j, U8(uint8(8*t+i))) // qword t of the A:B pair, byte i
		}
		ansPack = &m
	}
	return *ansPack
}
