package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The gather-based codebook lookup kernels (Psumbook lookups and the
// dequantize baseline), any code width, AVX-512 and AVX2.

// cbLookup emits CbPsumB<b>M<m><isa> (table lookups) or
// CbDequantB<b>M<m><isa> (centroid gathers times activations, the
// baseline) for a block of lanes() rows. The segment loop is unrolled over
// one period of L = 32/gcd(32, b) codes, so every word offset and shift
// is an immediate.
func cbLookup(f cbVec, b, m int, dequant bool) {
	kind := "Psum"
	if dequant {
		kind = "Dequant"
	}
	name := fmt.Sprintf("Cb%sB%dM%d%s", kind, b, m, f.suffix())
	L := f.lanes()
	P := 32 / gcd(32, b) // codes per period
	pw := P * b / 32     // words per period
	TEXT(name, NOSPLIT, "func(words *uint32, cbstride int, nper int, tab *float32, tabstride int, segbytes int, x *float32, v int, spg int, scales *float32, sstride int, acc *float32)")
	Pragma("noescape")
	what := "Psumbook lookups (gathers)"
	if dequant {
		what = "centroid gathers times activations (the dequantize baseline)"
	}
	kernelDoc("Codebook kernels", fmt.Sprintf("%s accumulates %s for the %d rows of a block of a codebook tile, %d-bit codes, M = %d codebooks, periods of P = %d segments, with %s.", name, what, L, b, m, P, f.requires()))
	cbZeroVec = f.vec()
	cbZero(f, cbZeroVec)
	if !f.avx512 {
		cbOnesVec = YMM()
		VPCMPEQD(cbOnesVec, cbOnesVec, cbOnesVec)
	}
	accv := f.vec()
	VMOVUPS(Mem{Base: param("acc")}, accv)
	mask := f.vec()
	{
		t := GP32()
		MOVL(U32(uint32(1)<<b-1), t)
		xm := XMM()
		VMOVD(t, xm)
		VPBROADCASTD(xm, mask)
	}
	wps, tps := cbStreams(m)
	sp := param("scales")
	var xp GPVirtual
	if dequant {
		xp = param("x")
	}
	cnt := param("spg")
	gs := f.vec()
	cbZero(f, gs)
	Label(name + "_period")
	for j := 0; j < P; j++ {
		bit := j * b
		w, off := bit/32, bit%32
		for i := 0; i < m; i++ {
			p := wps[i]
			code := f.vec()
			VMOVDQU32orU(f, Mem{Base: p, Disp: 128 * w}, code)
			if off > 0 {
				VPSRLD(U8(off), code, code)
			}
			if off+b > 32 {
				hi := f.vec()
				VMOVDQU32orU(f, Mem{Base: p, Disp: 128 * (w + 1)}, hi)
				VPSLLD(U8(32-off), hi, hi)
				if f.avx512 {
					VPORD(hi, code, code)
				} else {
					VPOR(hi, code, code)
				}
			}
			if off+b != 32 { // the top code of a word needs no mask
				if f.avx512 {
					VPANDD(mask, code, code)
				} else {
					VPAND(mask, code, code)
				}
			}
			base := tps[i]
			if !dequant {
				gather(f, Mem{Base: base, Index: code, Scale: 4}, gs, false)
				continue
			}
			vv := param("v")
			idx := f.vec()
			{
				xv := XMM()
				VMOVQ(vv, xv)
				vb := f.vec()
				VPBROADCASTD(xv, vb)
				VPMULLD(vb, code, idx)
			}
			e := GP64()
			XORQ(e, e)
			lbl := fmt.Sprintf("%s_e%d_%d", name, j, i)
			Label(lbl)
			{
				cp := GP64()
				LEAQ(Mem{Base: base, Index: e, Scale: 4}, cp)
				g := f.vec()
				gather(f, Mem{Base: cp, Index: idx, Scale: 4}, g, true)
				bx := f.vec()
				VBROADCASTSS(Mem{Base: xp, Index: e, Scale: 4}, bx)
				VFMADD231PS(bx, g, gs)
				INCQ(e)
				CMPQ(e, vv)
				JB(LabelRef(lbl))
			}
		}
		if !dequant {
			sb := param("segbytes")
			for _, t := range tps {
				ADDQ(sb, t)
			}
		}
		if dequant {
			v4 := param("v")
			LEAQ(Mem{Base: xp, Index: v4, Scale: 4}, xp)
		}
		// Group end: scale and accumulate.
		skip := fmt.Sprintf("%s_nogroup%d", name, j)
		DECQ(cnt)
		JNZ(LabelRef(skip))
		VFMADD231PS(Mem{Base: sp}, gs, accv)
		cbZero(f, gs)
		ADDQ(param("sstride"), sp)
		Load(Param("spg"), cnt)
		Label(skip)
	}
	cbNextPeriod(name, wps, 128*pw)
	VMOVUPS(accv, Mem{Base: param("acc")})
	if !f.avx512 {
		VZEROUPPER()
	}
	RET()
}

// VMOVDQU32orU loads a vector of dwords.
func VMOVDQU32orU(f cbVec, m Mem, dst VecVirtual) {
	if f.avx512 {
		VMOVDQU32(m, dst)
	} else {
		VMOVDQU(m, dst)
	}
}

// gather gathers the float32 at m (an index vector) into acc (into) or
// adds them to acc.
func gather(f cbVec, m Mem, acc VecVirtual, into bool) {
	g := acc
	if !into {
		g = f.vec()
	}
	// Pure writes first (a copy of a hoisted register): the gather reads its
	// destination and mask, and avo would otherwise keep every unrolled
	// destination live from the function entry.
	if f.avx512 {
		VMOVDQA32(cbZeroVec, g)
	} else {
		VMOVDQA(cbZeroVec, g)
	}
	if f.avx512 {
		// KMOVW from a GP register is a pure write (KXNORW k, k, k would read
		// k, keeping every unrolled mask live from the function entry).
		t := GP32()
		MOVL(U32(0xffff), t)
		k := K()
		KMOVW(t, k)
		VGATHERDPS(m, k, g)
	} else {
		ones := YMM()
		VMOVDQA(cbOnesVec, ones)
		VGATHERDPS(ones, m, g)
	}
	if !into {
		VADDPS(g, acc, acc)
	}
}

// cbZeroVec and cbOnesVec (AVX2) are the zero and all-ones vectors of the
// kernel being generated, set at its entry.
var cbZeroVec, cbOnesVec VecVirtual

// cbZero zeroes a vector (VPXORD on ZMM needs only AVX-512F).
func cbZero(f cbVec, v VecVirtual) {
	if f.avx512 {
		VPXORD(v, v, v)
	} else {
		VXORPS(v, v, v)
	}
}
