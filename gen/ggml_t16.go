package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The rows-in-lanes batch kernels of the 32-column-sub-block K-quants
// (Q4_K, Q5_K): 16 rows in the dword lanes, 16 vectors, no reductions.

// ggmlSigT16 is the signature of Ggml<t>A8T16Avx512 (cpu.ggmlRunT16 calls
// them).
const ggmlSigT16 = "func(w *byte, stride int, nsb int, act *int8, out *float32)"

// ggmlT16Prefetch is how many super-blocks ahead the kernels prefetch
// each row.
const ggmlT16Prefetch = 2

// ggmlSuperA8T16 emits Ggml<t>A8T16Avx512 for Q4_K and Q5_K. Per
// super-block the 16 rows' headers (d, dmin and the 12 scale bytes: one
// XMM per row) are transposed into lanes once and the 6-bit scales and
// mins unpacked with dword operations; per half the rows' 64 code bytes
// are transposed (transpose16) so that dword j of every row sits in one
// register, whose low nibbles hold four columns of one sub-block and the
// high nibbles four of the next (Q5_K: plus the qh bit of the sub-block,
// from the rows' transposed qh bytes). Then per sub-block and vector
// eight VPDPBUSD (16 rows' four codes times the vector's four
// activations, broadcast), one VPMULLD by the rows' sub-block scales and
// one add give S; M is two VPDPWSSD of the rows' mins (int16 pairs) with
// the vector's sub-block sum pairs; the float steps run on 16 rows at
// once in the definition's order, the partial results carried in out.
func ggmlSuperA8T16(c ggmlSuper) {
	name := "Ggml" + c.t + "A8T16Avx512"
	TEXT(name, 0, ggmlSigT16) // not NOSPLIT: the 2 KiB scratch frame
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s is %s for 16 rows and 16 vector slots with the rows in the lanes.", name, "Ggml"+c.t+"A8Avx512"))
	q5 := c.t == "Q5K"
	qs := 16 // the code bytes' offset in the super-block
	if q5 {
		qs = 48
	}
	const (
		codesOff = 0    // a half's transposed code bytes, 16 dwords
		qhOff    = 1024 // Q5_K: the transposed qh bytes, 8 dwords
		dOff     = 1536 // d and dmin as float32 lanes
		dmOff    = dOff + 64
		scOff    = dOff + 128 // the scales of sub-blocks 0..3 and 4..7, a byte each
		pairOff  = dOff + 256 // per half the mins pairs (m0,m1), (m2,m3) as int16
	)
	scratch := AllocLocal(2048)
	pairs, xsOff, blk := ggmlT16Layout(c.sub)
	dword := func(name string, v uint32) Mem {
		return rodata("ggmlT16_"+name, 1, 4, func(int) uint64 { return uint64(v) })
	}
	x0f, x3f, x30, xff, xff16 := dword("0f", 0x0f0f0f0f), dword("3f", 0x3f3f3f3f), dword("30", 0x30303030), dword("ff", 0xff), dword("ff0000", 0xff0000)

	// one set of registers for every super-block
	S := make([]VecVirtual, 16)
	for v := range S {
		S[v] = ZMM()
	}
	T, Mt := []VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}, ZMM()

	wp, ap, op, nk := param("w"), param("act"), param("out"), param("nsb")
	Label(name + "_sb")
	stride := param("stride")
	stride3 := GP64()
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)
	row := GP64()
	// rowMem(q) addresses row base+q (q < 4) at off
	rowMem := func(q, off int) Mem {
		return []Mem{{Base: row}, {Base: row, Index: stride, Scale: 1},
			{Base: row, Index: stride, Scale: 2}, {Base: row, Index: stride3, Scale: 1}}[q].Offset(off)
	}
	// forRows runs f on rows 0..15 in order (f(r, q): row r = 4*(r/4) + q).
	forRows := func(f func(r, q int)) {
		MOVQ(wp, row)
		for r := 0; r < 16; r++ {
			f(r, r%4)
			if r%4 == 3 && r != 15 {
				LEAQ(Mem{Base: row, Index: stride, Scale: 4}, row)
			}
		}
	}

	// Header: register q lane l holds row 4l+q's 16 bytes; a 4x4 dword
	// transpose per lane leaves dword d of row r in lane r of hd[d].
	var hdr [4]VecVirtual
	for q := range hdr {
		hdr[q] = ZMM()
	}
	forRows(func(r, q int) {
		if r < 4 {
			VBROADCASTI32X4(rowMem(q, 0), hdr[q])
		} else {
			VINSERTI32X4(U8(r/4), rowMem(q, 0), hdr[q], hdr[q])
		}
	})
	var hd [4]VecVirtual
	{
		t0, t1, t2, t3 := ZMM(), ZMM(), ZMM(), ZMM()
		VPUNPCKLDQ(hdr[1], hdr[0], t0) // r0.0 r1.0 r0.1 r1.1
		VPUNPCKHDQ(hdr[1], hdr[0], t1) // r0.2 r1.2 r0.3 r1.3
		VPUNPCKLDQ(hdr[3], hdr[2], t2)
		VPUNPCKHDQ(hdr[3], hdr[2], t3)
		for d := range hd {
			hd[d] = ZMM()
		}
		VPUNPCKLQDQ(t2, t0, hd[0])
		VPUNPCKHQDQ(t2, t0, hd[1])
		VPUNPCKLQDQ(t3, t1, hd[2])
		VPUNPCKHQDQ(t3, t1, hd[3])
	}
	{
		// d (low half of dword 0) and dmin (high half) to float32
		y, f := YMM(), ZMM()
		VPMOVDW(hd[0], y)
		VCVTPH2PS(y, f)
		VMOVUPS(f, scratch.Offset(dOff))
		t, y2, f2 := ZMM(), YMM(), ZMM()
		VPSRLD(U8(16), hd[0], t)
		VPMOVDW(t, y2)
		VCVTPH2PS(y2, f2)
		VMOVUPS(f2, scratch.Offset(dmOff))
	}
	{
		// ggml's get_scale_min_k4 on the lanes' dwords u0, u1, u2 (bytes
		// 4..15): scales 0..3 = u0 & 0x3f, 4..7 = (u2 & 0x0f) | (u0 >> 2
		// & 0x30), mins likewise from u1 and u2 >> 4.
		u0, u1, u2 := hd[1], hd[2], hd[3]
		hi := func(lo4, top VecVirtual) VecVirtual {
			a, b := ZMM(), ZMM()
			VPANDD_BCST(x0f, lo4, a)
			VPSRLD(U8(2), top, b)
			VPANDD_BCST(x30, b, b)
			VPORD(a, b, a)
			return a
		}
		sc0, m0 := ZMM(), ZMM()
		VPANDD_BCST(x3f, u0, sc0)
		VPANDD_BCST(x3f, u1, m0)
		sc1 := hi(u2, u0)
		u24 := ZMM()
		VPSRLD(U8(4), u2, u24)
		m1 := hi(u24, u1)
		VMOVDQU64(sc0, scratch.Offset(scOff))
		VMOVDQU64(sc1, scratch.Offset(scOff+64))
		// mins (m0, m1) and (m2, m3) of each half as int16 pairs
		for h, mn := range []VecVirtual{m0, m1} {
			a, b, p := ZMM(), ZMM(), ZMM()
			VPANDD_BCST(xff, mn, a)
			VPSLLD(U8(8), mn, b)
			VPANDD_BCST(xff16, b, b)
			VPORD(a, b, p)
			VMOVDQU64(p, scratch.Offset(pairOff+128*h))
			a2, b2, p2 := ZMM(), ZMM(), ZMM()
			VPSRLD(U8(16), mn, a2)
			VPANDD_BCST(xff, a2, a2)
			VPSRLD(U8(8), mn, b2)
			VPANDD_BCST(xff16, b2, b2)
			VPORD(a2, b2, p2)
			VMOVDQU64(p2, scratch.Offset(pairOff+128*h+64))
		}
	}
	// transposeRows transposes the 64 bytes at off of the 16 rows into
	// scratch at dst, the first n dwords.
	transposeRows := func(off, dst, n int) {
		rs := make([]Register, 16)
		forRows(func(r, q int) {
			z := ZMM()
			VMOVDQU64(rowMem(q, off), z)
			rs[r] = z
		})
		for j, t := range transpose16(rs)[:n] {
			VMOVDQU64(t, scratch.Offset(dst+64*j))
		}
	}
	prefetch := ggmlT16Prefetches(c, wp, stride, stride3, 32)
	if q5 {
		transposeRows(16, qhOff, 8) // qh, then the first 32 code bytes
	}
	for h := 0; h < 2; h++ {
		transposeRows(qs+64*h, codesOff, 16)
		for sp := 0; sp < 4; sp++ {
			s := 4*h + sp // sub-block
			// codes of columns 4g..4g+3 of the sub-block, 16 rows
			cg := make([]VecVirtual, 8)
			for g := range cg {
				cg[g] = ZMM()
				src := scratch.Offset(codesOff + 64*(8*(sp/2)+g))
				if sp%2 == 0 {
					VMOVDQU64(src, cg[g])
				} else {
					VPSRLD(U8(4), src, cg[g])
				}
				VPANDD_BCST(x0f, cg[g], cg[g])
				if q5 {
					// bit s of each qh byte, added as 16
					b, qh := ZMM(), scratch.Offset(qhOff+64*g)
					switch {
					case s < 4:
						VPSLLD(U8(4-s), qh, b)
					case s > 4:
						VPSRLD(U8(s-4), qh, b)
					default:
						VMOVDQU64(qh, b)
					}
					VPTERNLOGD_BCST(U8(0xf8), dword("10", 0x10101010), b, cg[g]) // cg | (b & 0x10)
				}
			}
			sc := ZMM()
			VPSRLD(U8(8*sp), scratch.Offset(scOff+64*h), sc)
			VPANDD_BCST(xff, sc, sc)
			// len(T) vectors at a time: independent VPDPBUSD chains
			for v0 := 0; v0 < 16; v0 += len(T) {
				for _, t := range T {
					VPXORD(t, t, t)
				}
				for g := 0; g < 8; g++ {
					for i, t := range T {
						VPDPBUSD_BCST(Mem{Base: ap, Disp: 256*(v0+i) + 32*s + 4*g}, cg[g], t)
					}
				}
				prefetch()
				for i, t := range T {
					if sp == 0 {
						VPMULLD(sc, t, S[v0+i])
					} else {
						VPMULLD(sc, t, t)
						VPADDD(t, S[v0+i], S[v0+i])
					}
				}
			}
		}
		// out[v] = out[v] + (d*xs)*S - (dmin*xs)*M, 16 rows per vector
		d, dm, p01, p23 := ZMM(), ZMM(), ZMM(), ZMM()
		VMOVUPS(scratch.Offset(dOff), d)
		VMOVUPS(scratch.Offset(dmOff), dm)
		VMOVDQU64(scratch.Offset(pairOff+128*h), p01)
		VMOVDQU64(scratch.Offset(pairOff+128*h+64), p23)
		for v := 0; v < 16; v++ {
			VPXORD(Mt, Mt, Mt)
			VPDPWSSD_BCST(Mem{Base: ap, Disp: pairs + 128*h + 8*v}, p01, Mt)
			VPDPWSSD_BCST(Mem{Base: ap, Disp: pairs + 128*h + 8*v + 4}, p23, Mt)
			xs := Mem{Base: ap, Disp: xsOff + 64*h + 4*v}
			f, a, g := ZMM(), ZMM(), ZMM()
			VMULPS_BCST(xs, d, f)
			VCVTDQ2PS(S[v], S[v])
			VMULPS(S[v], f, f)
			VADDPS(Mem{Base: op, Disp: 64 * v}, f, a)
			VMULPS_BCST(xs, dm, g)
			VCVTDQ2PS(Mt, Mt)
			VMULPS(Mt, g, g)
			VSUBPS(g, a, a)
			VMOVUPS(a, Mem{Base: op, Disp: 64 * v})
		}
	}
	ADDQ(U32(c.bytes), wp)
	ADDQ(U32(blk), ap)
	DECQ(nk)
	JNZ(LabelRef(name + "_sb"))
	VZEROUPPER()
	RET()
}

// ggmlSuperA8T16Q6 emits GgmlQ6KA8T16Avx512, the rows-in-lanes kernel of
// Q6_K: as ggmlSuperA8T16, with 16-column sub-blocks and signed 8-bit
// scales. The codes are q+32 (ql nibble and qh bits, unsigned) and S
// starts at -32*sum(sc*sx): per half four VPDPWSSD of the rows' scales
// times 32 (int16 pairs) with the vector's sub-block sum pairs.
func ggmlSuperA8T16Q6(c ggmlSuper) {
	name := "Ggml" + c.t + "A8T16Avx512"
	TEXT(name, 0, ggmlSigT16) // not NOSPLIT: the scratch frame
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s is %s for 16 rows and 16 vector slots with the rows in the lanes.", name, "Ggml"+c.t+"A8Avx512"))
	const (
		codesOff = 0    // a half's transposed ql bytes, 16 dwords
		qhOff    = 1024 // the transposed qh bytes, 16 dwords (8 per half)
		scOff    = 2048 // the scales, four bytes per dword, 4 dwords
		pairOff  = 2304 // per half and pair p the scales 2p, 2p+1 times 32, int16
		dOff     = 2816 // d as float32 lanes
	)
	pairs, xsOff, blk := ggmlT16Layout(c.sub)
	scratch := AllocLocal(2880)
	dword := func(name string, v uint32) Mem {
		return rodata("ggmlT16_"+name, 1, 4, func(int) uint64 { return uint64(v) })
	}
	x0f, xffe0, x30 := dword("0f", 0x0f0f0f0f), dword("ffe0", 0xffe0), dword("30", 0x30303030)

	S := make([]VecVirtual, 16)
	for v := range S {
		S[v] = ZMM()
	}
	T, Mt := []VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}, ZMM()

	wp, ap, op, nk := param("w"), param("act"), param("out"), param("nsb")
	Label(name + "_sb")
	stride := param("stride")
	stride3 := GP64()
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)
	row := GP64()
	rowMem := func(q, off int) Mem {
		return []Mem{{Base: row}, {Base: row, Index: stride, Scale: 1},
			{Base: row, Index: stride, Scale: 2}, {Base: row, Index: stride3, Scale: 1}}[q].Offset(off)
	}
	forRows := func(f func(r, q int)) {
		MOVQ(wp, row)
		for r := 0; r < 16; r++ {
			f(r, r%4)
			if r%4 == 3 && r != 15 {
				LEAQ(Mem{Base: row, Index: stride, Scale: 4}, row)
			}
		}
	}
	// laneDwords loads 16 bytes at off of the 16 rows and returns, for
	// each dword d in want, the register whose lane r holds row r's dword d.
	laneDwords := func(off int, want []int) map[int]VecVirtual {
		var hdr [4]VecVirtual
		for q := range hdr {
			hdr[q] = ZMM()
		}
		forRows(func(r, q int) {
			if r < 4 {
				VBROADCASTI32X4(rowMem(q, off), hdr[q])
			} else {
				VINSERTI32X4(U8(r/4), rowMem(q, off), hdr[q], hdr[q])
			}
		})
		t0, t1, t2, t3 := ZMM(), ZMM(), ZMM(), ZMM()
		VPUNPCKLDQ(hdr[1], hdr[0], t0)
		VPUNPCKHDQ(hdr[1], hdr[0], t1)
		VPUNPCKLDQ(hdr[3], hdr[2], t2)
		VPUNPCKHDQ(hdr[3], hdr[2], t3)
		out := map[int]VecVirtual{}
		for _, d := range want {
			r := ZMM()
			switch d {
			case 0:
				VPUNPCKLQDQ(t2, t0, r)
			case 1:
				VPUNPCKHQDQ(t2, t0, r)
			case 2:
				VPUNPCKLQDQ(t3, t1, r)
			default:
				VPUNPCKHQDQ(t3, t1, r)
			}
			out[d] = r
		}
		return out
	}
	{
		// d: the high half of the dword at 206 (bytes 194..209 stay in
		// the super-block)
		dd := laneDwords(194, []int{3})[3]
		t, y, f := ZMM(), YMM(), ZMM()
		VPSRLD(U8(16), dd, t)
		VPMOVDW(t, y)
		VCVTPH2PS(y, f)
		VMOVUPS(f, scratch.Offset(dOff))
	}
	{
		sc := laneDwords(192, []int{0, 1, 2, 3})
		for d := 0; d < 4; d++ {
			VMOVDQU64(sc[d], scratch.Offset(scOff+64*d))
			// pairs (4d, 4d+1) and (4d+2, 4d+3) as int16 words times 32
			for p := 0; p < 2; p++ {
				lo, hi := ZMM(), ZMM()
				VPSLLD(U8(24-16*p), sc[d], lo)
				VPSRAD(U8(19), lo, lo) // sext(byte 2p) * 32, byte 2p-1 >> 3 below
				VPANDD_BCST(xffe0, lo, lo)
				VPSLLD(U8(16-16*p), sc[d], hi)
				VPSRAD(U8(24), hi, hi) // sext(byte 2p+1)
				VPSLLD(U8(21), hi, hi) // times 32, in the high word
				VPORD(lo, hi, lo)
				// sub-blocks 4d+2p, +1: half d/2, pair 2(d%2)+p
				VMOVDQU64(lo, scratch.Offset(pairOff+256*(d/2)+64*(2*(d%2)+p)))
			}
		}
	}
	transposeRows := func(off, dst int) {
		rs := make([]Register, 16)
		forRows(func(r, q int) {
			z := ZMM()
			VMOVDQU64(rowMem(q, off), z)
			rs[r] = z
		})
		for j, t := range transpose16(rs) {
			VMOVDQU64(t, scratch.Offset(dst+64*j))
		}
	}
	prefetch := ggmlT16Prefetches(c, wp, stride, stride3, 64)
	transposeRows(128, qhOff) // qh: dwords 0..7 half 0, 8..15 half 1
	for h := 0; h < 2; h++ {
		transposeRows(64*h, codesOff)
		for jj := 0; jj < 8; jj++ { // sub-block 8h+jj: columns 32k+4g, g in 4(jj%2)..+3
			k, j := jj/2, 8*h+jj
			cg := make([]VecVirtual, 4)
			for i := range cg {
				g := 4*(jj%2) + i
				cg[i] = ZMM()
				src := scratch.Offset(codesOff + 64*(8*(k%2)+g))
				if k < 2 {
					VMOVDQU64(src, cg[i])
				} else {
					VPSRLD(U8(4), src, cg[i])
				}
				VPANDD_BCST(x0f, cg[i], cg[i])
				b, qh := ZMM(), scratch.Offset(qhOff+64*(8*h+g))
				if k < 3 {
					VPSLLD(U8(4-2*k), qh, b)
				} else {
					VPSRLD(U8(2), qh, b)
				}
				VPTERNLOGD_BCST(U8(0xf8), x30, b, cg[i]) // cg | (b & 0x30)
			}
			sc := ZMM()
			VPSLLD(U8(24-8*(j%4)), scratch.Offset(scOff+64*(j/4)), sc)
			VPSRAD(U8(24), sc, sc)
			for v0 := 0; v0 < 16; v0 += len(T) {
				for _, t := range T {
					VPXORD(t, t, t)
				}
				for i := range cg {
					g := 4*(jj%2) + i
					for vi, t := range T {
						VPDPBUSD_BCST(Mem{Base: ap, Disp: 256*(v0+vi) + 128*h + 32*k + 4*g}, cg[i], t)
					}
				}
				prefetch()
				for vi, t := range T {
					if jj == 0 {
						VPMULLD(sc, t, S[v0+vi])
					} else {
						VPMULLD(sc, t, t)
						VPADDD(t, S[v0+vi], S[v0+vi])
					}
				}
			}
		}
		// out[v] = out[v] + (d*xs)*(S - 32*sum(sc*sx)), 16 rows per vector
		d := ZMM()
		VMOVUPS(scratch.Offset(dOff), d)
		pr := make([]VecVirtual, 4)
		for p := range pr {
			pr[p] = ZMM()
			VMOVDQU64(scratch.Offset(pairOff+256*h+64*p), pr[p])
		}
		for v := 0; v < 16; v++ {
			VPXORD(Mt, Mt, Mt)
			for p := range pr {
				VPDPWSSD_BCST(Mem{Base: ap, Disp: pairs + 256*h + 16*v + 4*p}, pr[p], Mt)
			}
			VPSUBD(Mt, S[v], S[v])
			f, a := ZMM(), ZMM()
			VMULPS_BCST(Mem{Base: ap, Disp: xsOff + 64*h + 4*v}, d, f)
			VCVTDQ2PS(S[v], S[v])
			VMULPS(S[v], f, f)
			VADDPS(Mem{Base: op, Disp: 64 * v}, f, a)
			VMOVUPS(a, Mem{Base: op, Disp: 64 * v})
		}
	}
	ADDQ(U32(c.bytes), wp)
	ADDQ(U32(blk), ap)
	DECQ(nk)
	JNZ(LabelRef(name + "_sb"))
	VZEROUPPER()
	RET()
}

// ggmlT16Layout gives the offsets of the sub-block sums and of the scales
// in one super-block's prepared activations (cpu.ggmlPrepT16), and its
// size, for sub-blocks of sub columns: after 16 vectors' 256 int8, per
// half h and vector v the np = 128/sub/2 dwords of the sums of the half's
// sub-blocks (2p, 2p+1) as int16 pairs at pairs + 64*np*h + 4*np*v + 4p,
// then per half and vector the float32 scale at xs + 64h + 4v.
func ggmlT16Layout(sub int) (pairs, xs, size int) {
	np := 128 / sub / 2 // pairs per half and vector
	pairs = 4096
	xs = pairs + 2*16*4*np
	return pairs, xs, xs + 2*16*4
}

// ggmlT16Prefetches returns the prefetch emitter of the rows-in-lanes
// kernels: every line of the 16 rows' super-block ggmlT16Prefetch on
// (rows at wp, stride apart; stride3 = 3*stride), spread evenly over the
// slots calls it gets. Issued at once, the 48 or more misses to DRAM hold
// the load-miss buffers that the activations' L2 hits need.
func ggmlT16Prefetches(c ggmlSuper, wp, stride, stride3 GPVirtual, slots int) func() {
	var pf []Mem
	bases := make([]GPVirtual, 4)
	for i := range bases {
		bases[i] = GP64()
		if i == 0 {
			LEAQ(Mem{Base: wp, Disp: ggmlT16Prefetch * c.bytes}, bases[0])
		} else {
			LEAQ(Mem{Base: bases[i-1], Index: stride, Scale: 4}, bases[i])
		}
	}
	for r := 0; r < 16; r++ {
		b := bases[r/4]
		m := []Mem{{Base: b}, {Base: b, Index: stride, Scale: 1},
			{Base: b, Index: stride, Scale: 2}, {Base: b, Index: stride3, Scale: 1}}[r%4]
		for o := 0; o < c.bytes; o += 64 {
			pf = append(pf, m.Offset(o))
		}
		pf = append(pf, m.Offset(c.bytes-1))
	}
	per := (len(pf) + slots - 1) / slots
	return func() {
		for n := per; n > 0 && len(pf) > 0; n-- {
			PREFETCHT0(pf[0])
			pf = pf[1:]
		}
	}
}
