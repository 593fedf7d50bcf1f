package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// nearest emits NearestV<v><isa>, the codebook quantizer's assignment
// (layout/codebook): for each point the centroid q minimizing
// norm[q] - 2 x.c_q, the first of equal ones, computed with the same
// float32 operations in the same order as the Go loop it replaces (the
// dot product multiplied and added element by element from the first,
// doubled, subtracted from the norm), so the codes are the same. Each
// lane keeps the best distance (VMINPS, which keeps the old value on
// ties and NaN) and its centroid (taken where the distance is strictly
// less) for the centroids q = lane mod lanes(); the lanes' best are then
// reduced to the least distance and, among equal ones, the least index.
func nearest(f cbVec, v int) {
	name := fmt.Sprintf("NearestV%d%s", v, f.suffix())
	TEXT(name, NOSPLIT, "func(x *float32, n int, ct *float32, k int, norm *float32, out *uint32)")
	Pragma("noescape")
	kernelDoc("Codebook kernels", fmt.Sprintf("%s assigns n points of %d float32 to the nearest of k centroids with %s (k a multiple of %d).", name, v, f.requires(), f.lanes()))
	L := f.lanes()
	kb, rows := ctRows(v)
	x, out, n, norm := param("x"), param("out"), param("n"), param("norm")
	// Constants: +Inf, the lane indices, the lane count.
	gp := GP32()
	inf, iota, step := f.vec(), f.vec(), f.vec()
	MOVL(U32(0x7f800000), gp)
	VMOVD(gp, inf.AsX())
	VBROADCASTSS(inf.AsX(), inf)
	MOVL(U32(uint32(L)), gp)
	VMOVD(gp, step.AsX())
	VPBROADCASTD(step.AsX(), step)
	iotaMem := rodata(fmt.Sprintf("nearestIota%d", L), L, 4, func(i int) uint64 { return uint64(i) })
	if f.avx512 {
		VMOVDQU32(iotaMem, iota)
	} else {
		VMOVDQU(iotaMem, iota)
	}
	// With AVX2 (16 registers) the point's elements stay in memory for
	// V = 8 and are broadcast for each product.
	keep := f.avx512 || v <= 4
	Label(name + "_point")
	var bx []VecVirtual
	if keep {
		bx = make([]VecVirtual, v)
		for e := range bx {
			bx[e] = f.vec()
			VBROADCASTSS(Mem{Base: x, Disp: 4 * e}, bx[e])
		}
	}
	elem := func(e int) VecVirtual {
		if keep {
			return bx[e]
		}
		t := f.vec()
		VBROADCASTSS(Mem{Base: x, Disp: 4 * e}, t)
		return t
	}
	best, bestQ, qv := f.vec(), f.vec(), f.vec()
	VMOVAPS(inf, best)
	if f.avx512 {
		VPXORD(bestQ, bestQ, bestQ)
		VMOVDQA32(iota, qv)
	} else {
		VPXOR(bestQ, bestQ, bestQ)
		VMOVDQA(iota, qv)
	}
	q := GP64()
	XORQ(q, q)
	Label(name + "_q")
	dot, t, d := f.vec(), f.vec(), f.vec()
	VMULPS(Mem{Base: rows[0], Index: q, Scale: 1}, elem(0), dot)
	for e := 1; e < v; e++ {
		VMULPS(Mem{Base: rows[e], Index: q, Scale: 1}, elem(e), t)
		VADDPS(t, dot, dot)
	}
	VADDPS(dot, dot, dot) // 2*dot, exactly
	VMOVUPS(Mem{Base: norm, Index: q, Scale: 1}, d)
	VSUBPS(dot, d, d) // norm - 2*dot
	const ltOQ = 0x11
	if f.avx512 {
		k := K()
		VCMPPS(U8(ltOQ), best, d, k) // d < best
		VMOVDQA32(qv, k, bestQ)
	} else {
		m := f.vec()
		VCMPPS(U8(ltOQ), best, d, m)
		VBLENDVPS(m, qv, bestQ, bestQ)
	}
	VMINPS(best, d, best) // min(d, best), best on ties and NaN
	VPADDD(step, qv, qv)
	ADDQ(U32(4*L), q)
	CMPQ(q, kb)
	JB(LabelRef(name + "_q"))
	// The lanes' least distance in every lane, then the least centroid
	// among the lanes that hold it (the others set to all ones).
	hmin := func(a VecVirtual, min func(b, a VecVirtual)) {
		s := f.vec()
		if f.avx512 {
			VSHUFF32X4(U8(0x4e), a, a, s)
			min(s, a)
			VSHUFF32X4(U8(0xb1), a, a, s)
			min(s, a)
		} else {
			VPERM2F128(U8(0x01), a, a, s)
			min(s, a)
		}
		VPERMILPS(U8(0x4e), a, s)
		min(s, a)
		VPERMILPS(U8(0xb1), a, s)
		min(s, a)
	}
	m := f.vec()
	VMOVAPS(best, m)
	hmin(m, func(b, a VecVirtual) { VMINPS(b, a, a) })
	all := f.vec()
	if f.avx512 {
		VPTERNLOGD(U8(0xff), all, all, all)
	} else {
		VPCMPEQD(all, all, all)
	}
	if f.avx512 {
		k := K()
		VCMPPS(U8(0), m, best, k) // best == least
		VMOVDQA32(bestQ, k, all)
	} else {
		eq := f.vec()
		VCMPPS(U8(0), m, best, eq)
		VBLENDVPS(eq, bestQ, all, all)
	}
	hmin(all, func(b, a VecVirtual) { VPMINUD(b, a, a) })
	VMOVD(all.AsX(), gp)
	MOVL(gp, Mem{Base: out})
	ADDQ(U32(4), out)
	ADDQ(U32(4*v), x)
	DECQ(n)
	JNZ(LabelRef(name + "_point"))
	VZEROUPPER()
	RET()
}
