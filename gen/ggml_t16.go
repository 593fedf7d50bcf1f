package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The rows-in-lanes batch kernels of the GGML super-block types: 16 rows
// in the dword lanes, 4, 8 or 16 vector slots, no reductions.

// ggmlSigT16 is the signature of the Ggml<t>A8T<M>Avx512 kernels
// (cpu.ggmlRunT calls them).
const ggmlSigT16 = "func(w *byte, stride int, nsb int, act *int8, out *float32)"

// ggmlT16Prefetch is how many super-blocks ahead the kernels prefetch
// each row.
const ggmlT16Prefetch = 2

// ggmlSuperA8T16 emits Ggml<t>A8T<M>Avx512 for Q4_K and Q5_K. Per
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
func ggmlSuperA8T16(c ggmlSuper, M int) {
	name := t16Text(c, M)
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
	scratch := alignedScratch(2048)
	pairs, xsOff, blk := ggmlT16LayoutM(c.sub, M)
	dword := t16Const
	x0f, x3f, x30, xff, xff16 := dword("0f", 0x0f0f0f0f), dword("3f", 0x3f3f3f3f), dword("30", 0x30303030), dword("ff", 0xff), dword("ff0000", 0xff0000)

	k := newT16(M)
	wp, nk := param("w"), param("nsb")
	Label(name + "_sb")
	rows := newT16Rows(wp)
	// d and dmin, the 12 bytes of scales and mins, in lanes
	hd := rows.lanes(0, 0, 1, 2, 3)
	halfFloats(hd[0], false, scratch.Offset(dOff))
	halfFloats(hd[0], true, scratch.Offset(dmOff))
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
	prefetch := ggmlT16Prefetches(c, wp, nk, rows.stride, rows.stride3, 8*k.chainGroups())
	if q5 {
		rows.transpose(16, scratch.Offset(qhOff), 8) // qh, then the first 32 code bytes
	}
	for h := 0; h < 2; h++ {
		rows.transpose(qs+64*h, scratch.Offset(codesOff), 16)
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
					orBits(cg[g], scratch.Offset(qhOff+64*g), s, 4, 0x10)
				}
			}
			sc := ZMM()
			VPSRLD(U8(8*sp), scratch.Offset(scOff+64*h), sc)
			VPANDD_BCST(xff, sc, sc)
			cols := make([]int, 8)
			for g := range cols {
				cols[g] = 32*s + 4*g
			}
			k.dots(cg, cols, sc, sp == 0, sp, prefetch)
		}
		// out[v] = out[v] + (d*xs)*S - (dmin*xs)*M, 16 rows per vector
		d, dm, p01, p23 := ZMM(), ZMM(), ZMM(), ZMM()
		VMOVUPS(scratch.Offset(dOff), d)
		VMOVUPS(scratch.Offset(dmOff), dm)
		VMOVDQU64(scratch.Offset(pairOff+128*h), p01)
		VMOVDQU64(scratch.Offset(pairOff+128*h+64), p23)
		k.halfEnd(h, []VecVirtual{p01, p23}, pairs, xsOff, d, dm)
	}
	k.next(name, c, wp, nk, blk)
}

// ggmlSuperA8T16Q6 emits GgmlQ6KA8T<M>Avx512, the rows-in-lanes kernel
// of Q6_K: as ggmlSuperA8T16, with 16-column sub-blocks and signed 8-bit
// scales. The codes are q+32 (ql nibble and qh bits, unsigned) and S is
// recentred by 32*sum(sc*sx): per half four VPDPWSSD of the rows' scales
// times 32 (int16 pairs) with the vector's sub-block sum pairs.
func ggmlSuperA8T16Q6(c ggmlSuper, M int) {
	name := t16Text(c, M)
	const (
		codesOff = 0    // a half's transposed ql bytes, 16 dwords
		qhOff    = 1024 // the transposed qh bytes, 16 dwords (8 per half)
		scOff    = 2048 // the scales, four bytes per dword, 4 dwords
		pairOff  = 2304 // per half and pair p the scales 2p, 2p+1 times 32, int16
		dOff     = 2816 // d as float32 lanes
	)
	pairs, xsOff, blk := ggmlT16LayoutM(c.sub, M)
	scratch := alignedScratch(2880)
	dword := t16Const
	x0f, xffe0 := dword("0f", 0x0f0f0f0f), dword("ffe0", 0xffe0)

	t := newT16(M)
	wp, nk := param("w"), param("nsb")
	Label(name + "_sb")
	rows := newT16Rows(wp)
	// d: the high half of the dword at 206 (bytes 194..209 stay in the
	// super-block)
	halfFloats(rows.lanes(194, 3)[0], true, scratch.Offset(dOff))
	{
		sc := rows.lanes(192, 0, 1, 2, 3)
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
	prefetch := ggmlT16Prefetches(c, wp, nk, rows.stride, rows.stride3, 16*t.chainGroups())
	rows.transpose(128, scratch.Offset(qhOff), 16) // qh: dwords 0..7 half 0, 8..15 half 1
	for h := 0; h < 2; h++ {
		rows.transpose(64*h, scratch.Offset(codesOff), 16)
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
				orBits(cg[i], scratch.Offset(qhOff+64*(8*h+g)), 2*k, 4, 0x30)
			}
			sc := ZMM()
			VPSLLD(U8(24-8*(j%4)), scratch.Offset(scOff+64*(j/4)), sc)
			VPSRAD(U8(24), sc, sc)
			cols := make([]int, 4)
			for i := range cols {
				cols[i] = 128*h + 32*k + 4*(4*(jj%2)+i)
			}
			t.dots(cg, cols, sc, jj == 0, jj, prefetch)
		}
		// out[v] = out[v] + (d*xs)*(S - 32*sum(sc*sx)), 16 rows per vector
		d := ZMM()
		VMOVUPS(scratch.Offset(dOff), d)
		pr := make([]VecVirtual, 4)
		for p := range pr {
			pr[p] = ZMM()
			VMOVDQU64(scratch.Offset(pairOff+256*h+64*p), pr[p])
		}
		t.halfEnd(h, pr, pairs, xsOff, d, nil)
	}
	t.next(name, c, wp, nk, blk)
}

// ggmlT16Prefetches returns the prefetch emitter of the rows-in-lanes
// kernels: every line of the 16 rows' super-block ggmlT16Prefetch on
// (rows at wp, stride apart; stride3 = 3*stride; nk super-blocks left in
// the rows, counting this one), spread evenly over the
// slots calls it gets. Issued at once, the 48 or more misses to DRAM hold
// the load-miss buffers that the activations' L2 hits need.
func ggmlT16Prefetches(c ggmlSuper, wp, nk, stride, stride3 GPVirtual, slots int) func() {
	// Past the rows' last super-block (nk, the super-blocks left, at most
	// the distance) the next 16 rows' first ones: 15 rows further on, the
	// rows being contiguous (stride = nsb super-blocks).
	skip, zero := GP64(), GP64()
	IMUL3Q(U32(15), stride, skip)
	XORQ(zero, zero)
	CMPQ(nk, U8(ggmlT16Prefetch))
	CMOVQGT(zero, skip)
	var pf []Mem
	bases := make([]GPVirtual, 4)
	for i := range bases {
		bases[i] = GP64()
		if i == 0 {
			LEAQ(Mem{Base: wp, Index: skip, Scale: 1, Disp: ggmlT16Prefetch * c.bytes}, bases[0])
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

// t16Rows addresses the 16 rows of a rows-in-lanes kernel's super-block:
// row r at wp + r*stride.
type t16Rows struct {
	wp, stride, stride3, row GPVirtual
}

func newT16Rows(wp GPVirtual) *t16Rows {
	r := &t16Rows{wp: wp, stride: param("stride"), stride3: GP64(), row: GP64()}
	LEAQ(Mem{Base: r.stride, Index: r.stride, Scale: 2}, r.stride3)
	return r
}

// mem addresses byte off of row 4i+q, with row at row 4i.
func (r *t16Rows) mem(q, off int) Mem {
	return []Mem{{Base: r.row}, {Base: r.row, Index: r.stride, Scale: 1},
		{Base: r.row, Index: r.stride, Scale: 2}, {Base: r.row, Index: r.stride3, Scale: 1}}[q].Offset(off)
}

// each runs f on rows 0..15 in order, f(i, q) for row i = 4*(i/4) + q
// (address it with mem(q, off)).
func (r *t16Rows) each(f func(i, q int)) {
	MOVQ(r.wp, r.row)
	for i := 0; i < 16; i++ {
		f(i, i%4)
		if i%4 == 3 && i != 15 {
			LEAQ(Mem{Base: r.row, Index: r.stride, Scale: 4}, r.row)
		}
	}
}

// lanes loads the 16 bytes at off of every row and returns, for each
// dword d in want, the register whose lane i holds row i's dword d.
func (r *t16Rows) lanes(off int, want ...int) []VecVirtual {
	var hdr [4]VecVirtual
	for q := range hdr {
		hdr[q] = ZMM()
	}
	r.each(func(i, q int) {
		if i < 4 {
			VBROADCASTI32X4(r.mem(q, off), hdr[q])
		} else {
			VINSERTI32X4(U8(i/4), r.mem(q, off), hdr[q], hdr[q])
		}
	})
	t0, t1, t2, t3 := ZMM(), ZMM(), ZMM(), ZMM()
	VPUNPCKLDQ(hdr[1], hdr[0], t0) // r0.0 r1.0 r0.1 r1.1
	VPUNPCKHDQ(hdr[1], hdr[0], t1) // r0.2 r1.2 r0.3 r1.3
	VPUNPCKLDQ(hdr[3], hdr[2], t2)
	VPUNPCKHDQ(hdr[3], hdr[2], t3)
	out := make([]VecVirtual, len(want))
	for i, d := range want {
		out[i] = ZMM()
		switch d {
		case 0:
			VPUNPCKLQDQ(t2, t0, out[i])
		case 1:
			VPUNPCKHQDQ(t2, t0, out[i])
		case 2:
			VPUNPCKLQDQ(t3, t1, out[i])
		default:
			VPUNPCKHQDQ(t3, t1, out[i])
		}
	}
	return out
}

// transpose stores the 64 bytes at off of the 16 rows, transposed, at
// dst: its first n dwords j as 64 bytes each (lane i: row i's dword j).
func (r *t16Rows) transpose(off int, dst Mem, n int) {
	rs := make([]Register, 16)
	r.each(func(i, q int) {
		z := ZMM()
		VMOVDQU64(r.mem(q, off), z)
		rs[i] = z
	})
	for j, t := range transpose16(rs)[:n] {
		VMOVDQU64(t, dst.Offset(64*j))
	}
}

// halfFloats converts the binary16 in the low (high false) or high half
// of each dword lane of x to float32 lanes stored at dst.
func halfFloats(x VecVirtual, high bool, dst Mem) {
	src := x
	if high {
		src = ZMM()
		VPSRLD(U8(16), x, src)
	}
	y, f := YMM(), ZMM()
	VPMOVDW(src, y)
	VCVTPH2PS(y, f)
	VMOVUPS(f, dst)
}

// bytePairs returns the int16 pair (byte 2p of x's lanes, byte 2p+1) as
// one dword per lane: each byte masked with mask (low bits), minus sub,
// shifted left by shl.
func bytePairs(x VecVirtual, p int, mask uint32, sub int32, shl int) VecVirtual {
	k := t16Const
	lo, hi := ZMM(), ZMM()
	VPSRLD(U8(16*p), x, lo)
	VPANDD_BCST(k(fmt.Sprintf("m%x", mask), mask), lo, lo) // byte 2p
	VPSRLD(U8(16*p+8), x, hi)
	VPANDD_BCST(k(fmt.Sprintf("m%x", mask), mask), hi, hi) // byte 2p+1
	if sub != 0 {
		s := k(fmt.Sprintf("s%d", sub), uint32(sub))
		VPSUBD_BCST(s, lo, lo)
		VPSUBD_BCST(s, hi, hi)
	}
	if shl != 0 {
		VPSLLD(U8(shl), lo, lo)
	}
	VPSLLD(U8(16+shl), hi, hi)
	VPANDD_BCST(k("ffff", 0xffff), lo, lo)
	VPORD(lo, hi, lo)
	return lo
}

// ggmlSuperA8T16Low emits Ggml<t>A8T<M>Avx512 for Q2_K and Q3_K: 16 rows
// in the lanes and M vector slots. Both types keep the 2-bit codes of
// half h at byte 32h+l, column 32k+l of the half in bits 2k; Q3_K adds the
// hmask bit (set: +0, clear: -4) as 4, so its codes are q+4 and S is
// recentred by 4*sum(sc*sx), four VPDPWSSD per half; Q2_K's mins give M
// and its own float step. (With M = 1, as a batch-1 kernel, it was
// slower than the four-row kernels from DRAM: docs/KERNELS.md.)
func ggmlSuperA8T16Low(c ggmlSuper, M int) {
	name := t16Text(c, M)
	q3 := c.t == "Q3K"
	const (
		qsOff   = 0    // the transposed code bytes, 16 dwords (8 per half)
		hmOff   = 1024 // Q3_K: the transposed hmask bytes, 8 dwords
		scOff   = 1536 // the 16 scales as bytes (Q2_K: low nibbles, mins high), 4 dwords
		pairOff = 1792 // per half h and pair p at 256h + 64p: mins (Q2_K) or 4*scales (Q3_K), int16 pairs
		dOff    = 2304 // d, dmin as float32 lanes
		dmOff   = dOff + 64
	)
	pairs, xsOff, blk := ggmlT16LayoutM(c.sub, M)
	scratch := alignedScratch(2432)
	k := t16Const
	t := newT16(M)
	wp, nk := param("w"), param("nsb")
	Label(name + "_sb")
	rows := newT16Rows(wp)
	if q3 {
		// d at bytes 108..109: the high half of dword 3 of 94..109
		halfFloats(rows.lanes(94, 3)[0], true, scratch.Offset(dOff))
		// scale bytes sc+32: (a[j%8] >> 4(j/8) & 15) | (t[j%4] >> 2(j/4) & 3) << 4
		l := rows.lanes(92, 1, 2, 3) // bytes 96..99, 100..103, 104..107
		a0, a1, tm := l[0], l[1], l[2]
		for d, f := range [][3]int{{0, 0, 0}, {1, 0, 2}, {0, 4, 4}, {1, 4, 6}} {
			a := []VecVirtual{a0, a1}[f[0]]
			lo, hi := ZMM(), ZMM()
			VPSRLD(U8(f[1]), a, lo)
			VPANDD_BCST(k("0f", 0x0f0f0f0f), lo, lo)
			VPSRLD(U8(f[2]), tm, hi)
			VPANDD_BCST(k("03", 0x03030303), hi, hi)
			VPSLLD(U8(4), hi, hi)
			VPORD(lo, hi, lo)
			VMOVDQU64(lo, scratch.Offset(scOff+64*d))
			for p := 0; p < 2; p++ { // 4*(sc-32) of sub-blocks 4d+2p, +1
				VMOVDQU64(bytePairs(lo, p, 0xff, 32, 2), scratch.Offset(pairOff+256*(d/2)+64*(2*(d%2)+p)))
			}
		}
		rows.transpose(0, scratch.Offset(hmOff), 8)
		rows.transpose(32, scratch.Offset(qsOff), 16)
	} else {
		dd := rows.lanes(68, 3)[0] // bytes 80..83: d, dmin
		halfFloats(dd, false, scratch.Offset(dOff))
		halfFloats(dd, true, scratch.Offset(dmOff))
		for d, sc := range rows.lanes(0, 0, 1, 2, 3) {
			VMOVDQU64(sc, scratch.Offset(scOff+64*d))
			mn := ZMM()
			VPSRLD(U8(4), sc, mn) // the mins, low nibbles (and scales' bits above)
			for p := 0; p < 2; p++ {
				VMOVDQU64(bytePairs(mn, p, 0x0f, 0, 0), scratch.Offset(pairOff+256*(d/2)+64*(2*(d%2)+p)))
			}
		}
		rows.transpose(16, scratch.Offset(qsOff), 16)
	}
	prefetch := ggmlT16Prefetches(c, wp, nk, rows.stride, rows.stride3, 16*t.chainGroups())

	for h := 0; h < 2; h++ {
		for jj := 0; jj < 8; jj++ { // sub-block 8h+jj: columns 32kk+4g, g in 4(jj%2)..+3
			kk, j := jj/2, 8*h+jj
			cg := make([]VecVirtual, 4)
			for i := range cg {
				g := 4*(jj%2) + i
				cg[i] = ZMM()
				src := scratch.Offset(qsOff + 64*(8*h+g))
				if kk == 0 {
					VMOVDQU64(src, cg[i])
				} else {
					VPSRLD(U8(2*kk), src, cg[i])
				}
				VPANDD_BCST(k("03", 0x03030303), cg[i], cg[i])
				if q3 {
					// hmask bit 4h+kk of the column's byte, added as 4
					orBits(cg[i], scratch.Offset(hmOff+64*g), 4*h+kk, 2, 0x04)
				}
			}
			sc := ZMM()
			VPSRLD(U8(8*(j%4)), scratch.Offset(scOff+64*(j/4)), sc)
			if q3 {
				VPANDD_BCST(k("ff", 0xff), sc, sc)
				VPSUBD_BCST(k("s32", 32), sc, sc)
			} else {
				VPANDD_BCST(k("0f0", 0x0f), sc, sc)
			}
			cols := make([]int, 4)
			for i := range cols {
				cols[i] = 128*h + 32*kk + 4*(4*(jj%2)+i)
			}
			t.dots(cg, cols, sc, jj == 0, jj, prefetch)
		}
		// Q2_K: out += (d*xs)*S - (dmin*xs)*M; Q3_K: out += (d*xs)*(S - 4*sum(sc*sx))
		d, dm := ZMM(), ZMM()
		VMOVUPS(scratch.Offset(dOff), d)
		if !q3 {
			VMOVUPS(scratch.Offset(dmOff), dm)
		}
		pr := make([]VecVirtual, 4)
		for p := range pr {
			pr[p] = ZMM()
			VMOVDQU64(scratch.Offset(pairOff+256*h+64*p), pr[p])
		}
		if q3 {
			dm = nil
		}
		t.halfEnd(h, pr, pairs, xsOff, d, dm)
	}
	t.next(name, c, wp, nk, blk)
}

// ggmlT16LayoutM gives the offsets of the sub-block sums and of the
// scales in one super-block's activations for a rows-in-lanes kernel of M
// vector slots (cpu.ggmlPrepT), and its size, for sub-blocks of sub
// columns: after M vectors' 256 int8 in column order, per half h and slot
// v the np = 128/sub/2 dwords of the sums of the half's sub-blocks 2p
// (low word) and 2p+1 at pairs + 4np*(M*h + v) + 4p, then per half and
// slot the float32 scale at xs + 4*(M*h + v).
func ggmlT16LayoutM(sub, M int) (pairs, xs, size int) {
	np := 128 / sub / 2
	pairs = 256 * M
	xs = pairs + 2*M*4*np
	return pairs, xs, xs + 2*M*4
}

// alignedScratch returns n bytes of the frame at a 64-byte boundary (the
// Go stack keeps 8): a ZMM store and reload across a line boundary splits
// and stalls store forwarding.
func alignedScratch(n int) Mem {
	b := GP64()
	LEAQ(AllocLocal(n+64), b)
	ADDQ(U8(63), b)
	ANDQ(I8(-64), b)
	return Mem{Base: b}
}

// t16 holds a rows-in-lanes kernel's registers and pointers: S, one
// int32 sum per vector slot, the VPDPBUSD chains T, the sums term Mt, the
// activations ap and the results op.
type t16 struct {
	M      int
	S, T   []VecVirtual
	Mt     VecVirtual
	ap, op GPVirtual
}

// newT16 allocates the registers once for every super-block (avo's
// greedy allocator fails with fresh ones per half) and loads the
// pointers; the caller loads w and nsb.
func newT16(M int) *t16 {
	k := &t16{M: M, S: make([]VecVirtual, M), T: []VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}, Mt: ZMM()}
	for v := range k.S {
		k.S[v] = ZMM()
	}
	k.ap, k.op = param("act"), param("out")
	return k
}

// dots adds to every slot's S the sub-block scales sc times the products
// of the codes cg[i] (four columns of 16 rows each) with the slot's
// activations at column cols[i] of the super-block (S is set, not added
// to, if first); four slots' chains run together. The sub-block index j
// rotates the chains' registers when fewer than four slots run.
func (k *t16) dots(cg []VecVirtual, cols []int, sc VecVirtual, first bool, j int, prefetch func()) {
	nT := k.chainSlots()
	for v0 := 0; v0 < k.M; v0 += nT {
		ts := make([]VecVirtual, nT)
		for i := range ts {
			ts[i] = k.T[(j*nT+i)%len(k.T)]
			VPXORD(ts[i], ts[i], ts[i])
		}
		for i, c := range cg {
			for vi, t := range ts {
				VPDPBUSD_BCST(Mem{Base: k.ap, Disp: 256*(v0+vi) + cols[i]}, c, t)
			}
		}
		prefetch()
		for vi, t := range ts {
			if first {
				VPMULLD(sc, t, k.S[v0+vi])
			} else {
				VPMULLD(sc, t, t)
				VPADDD(t, k.S[v0+vi], k.S[v0+vi])
			}
		}
	}
}

// chainSlots is the slots whose chains run together, chainGroups the
// groups of them dots runs (and calls prefetch for).
func (k *t16) chainSlots() int  { return min(len(k.T), k.M) }
func (k *t16) chainGroups() int { return (k.M + k.chainSlots() - 1) / k.chainSlots() }

// halfEnd runs the float steps of half h for every slot v: Mt = sum_p
// pr[p] * (the slot's sum pair p: int16 words, at pairs + 4np*(M*h + v) +
// 4p), then out[v] = out[v] + (d*xs)*S - (dm*xs)*Mt (types with mins), or
// out[v] + (d*xs)*(S - Mt) (dm nil: Mt is the recentring term), xs the
// slot's scale at xs + 4*(M*h + v).
func (k *t16) halfEnd(h int, pr []VecVirtual, pairs, xs int, d, dm VecVirtual) {
	np, M, Mt := len(pr), k.M, k.Mt
	for v := 0; v < M; v++ {
		S := k.S[v]
		VPXORD(Mt, Mt, Mt)
		for p, r := range pr {
			VPDPWSSD_BCST(Mem{Base: k.ap, Disp: pairs + 4*np*(M*h+v) + 4*p}, r, Mt)
		}
		x := Mem{Base: k.ap, Disp: xs + 4*(M*h+v)}
		o := Mem{Base: k.op, Disp: 64 * v}
		if dm == nil {
			VPSUBD(Mt, S, S)
		}
		f, a := ZMM(), ZMM()
		VMULPS_BCST(x, d, f)
		VCVTDQ2PS(S, S)
		VMULPS(S, f, f)
		VADDPS(o, f, a)
		if dm != nil {
			g := ZMM()
			VMULPS_BCST(x, dm, g)
			VCVTDQ2PS(Mt, Mt)
			VMULPS(Mt, g, g)
			VSUBPS(g, a, a)
		}
		VMOVUPS(a, o)
	}
}

// next moves w and the activations on by a super-block, loops while
// super-blocks are left and returns.
func (k *t16) next(name string, c ggmlSuper, wp, nk GPVirtual, blk int) {
	ADDQ(U32(c.bytes), wp)
	ADDQ(U32(blk), k.ap)
	DECQ(nk)
	JNZ(LabelRef(name + "_sb"))
	VZEROUPPER()
	RET()
}

// ggmlSuperA8T16IQ4 emits GgmlIQ4XSA8T<M>Avx512, the rows-in-lanes
// kernel of IQ4_XS: sub-block k's 16 code bytes hold columns 0..15 in
// their low nibbles and 16..31 in the high ones, looked up as KValues+128
// (VPSHUFB, unsigned), so S is recentred by 128*sum(sc*sx) (two VPDPWSSD
// per half, as Q6_K's by 32).
func ggmlSuperA8T16IQ4(c ggmlSuper, M int) {
	name := t16Text(c, M)
	const (
		codesOff = 0    // a half's transposed code bytes, 16 dwords
		scOff    = 1024 // the 8 scales as int32 lanes
		pairOff  = 1536 // per half h and pair p at 128h + 64p: 128*scales, int16 pairs
		dOff     = 1792 // d as float32 lanes
	)
	pairs, xsOff, blk := ggmlT16LayoutM(c.sub, M)
	scratch := alignedScratch(1856)
	k := t16Const
	tab := ZMM()
	VBROADCASTI32X4(ggmlKValues128(), tab)
	t := newT16(M)
	wp, nk := param("w"), param("nsb")
	Label(name + "_sb")
	rows := newT16Rows(wp)
	{
		// d and scales_h (dword 0), scales_l (dword 1); ls_j = (sl >> 4j
		// & 15) | (sh >> 2j & 3) << 4, sc_j = ls_j - 32
		h := rows.lanes(0, 0, 1)
		halfFloats(h[0], false, scratch.Offset(dOff))
		sc := make([]VecVirtual, 8)
		for j := range sc {
			lo, hi := ZMM(), ZMM()
			VPSRLD(U8(4*j), h[1], lo)
			VPANDD_BCST(k("0f0", 0x0f), lo, lo)
			VPSRLD(U8(16+2*j), h[0], hi)
			VPANDD_BCST(k("03x", 0x03), hi, hi)
			VPSLLD(U8(4), hi, hi)
			VPORD(lo, hi, lo)
			VPSUBD_BCST(k("s32", 32), lo, lo)
			VMOVDQU64(lo, scratch.Offset(scOff+64*j))
			sc[j] = lo
		}
		for p := 0; p < 4; p++ { // sub-blocks 2p, 2p+1: half p/2, pair p%2
			a, b := ZMM(), ZMM()
			VPSLLD(U8(7), sc[2*p], a)
			VPANDD_BCST(k("ffff", 0xffff), a, a)
			VPSLLD(U8(23), sc[2*p+1], b)
			VPORD(a, b, a)
			VMOVDQU64(a, scratch.Offset(pairOff+128*(p/2)+64*(p%2)))
		}
	}
	prefetch := ggmlT16Prefetches(c, wp, nk, rows.stride, rows.stride3, 8*t.chainGroups())
	for h := 0; h < 2; h++ {
		rows.transpose(8+64*h, scratch.Offset(codesOff), 16)
		for kk := 0; kk < 4; kk++ { // sub-block 4h+kk
			j := 4*h + kk
			cg := make([]VecVirtual, 8)
			cols := make([]int, 8)
			for i := range cg {
				cg[i] = ZMM()
				src := scratch.Offset(codesOff + 64*(4*kk+i%4))
				if i < 4 {
					VMOVDQU64(src, cg[i])
				} else {
					VPSRLD(U8(4), src, cg[i])
				}
				VPANDD_BCST(k("0f", 0x0f0f0f0f), cg[i], cg[i])
				VPSHUFB(cg[i], tab, cg[i])
				cols[i] = 128*h + 32*kk + 16*(i/4) + 4*(i%4)
			}
			sc := ZMM()
			VMOVDQU64(scratch.Offset(scOff+64*j), sc)
			t.dots(cg, cols, sc, kk == 0, kk, prefetch)
		}
		d := ZMM()
		VMOVUPS(scratch.Offset(dOff), d)
		pr := []VecVirtual{ZMM(), ZMM()}
		for p := range pr {
			VMOVDQU64(scratch.Offset(pairOff+128*h+64*p), pr[p])
		}
		t.halfEnd(h, pr, pairs, xsOff, d, nil)
	}
	t.next(name, c, wp, nk, blk)
}

// orBits sets the bits of each byte of cg at to.. from those of src's
// bytes at from.. (mask: the byte bits, at to, that are taken): cg |=
// (src shifted by to-from) & mask in every byte.
func orBits(cg VecVirtual, src Mem, from, to int, mask uint8) {
	b := ZMM()
	switch {
	case to > from:
		VPSLLD(U8(to-from), src, b)
	case to < from:
		VPSRLD(U8(from-to), src, b)
	default:
		VMOVDQU64(src, b)
	}
	m := uint32(mask) * 0x01010101
	VPTERNLOGD_BCST(U8(0xf8), t16Const(fmt.Sprintf("b%02x", mask), m), b, cg) // cg | (b & m)
}

// t16Text starts the rows-in-lanes kernel of type c with M vector slots
// and returns its name (not NOSPLIT: the scratch frame).
func t16Text(c ggmlSuper, M int) string {
	name := fmt.Sprintf("Ggml%sA8T%dAvx512", c.t, M)
	TEXT(name, 0, ggmlSigT16)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s is %s for 16 rows and %d vector slots with the rows in the lanes.", name, "Ggml"+c.t+"A8Avx512", M))
	return name
}

// t16Const returns the read-only dword ggmlT16_<name> holding v (one
// value per name across the rows-in-lanes kernels).
func t16Const(name string, v uint32) Mem {
	return rodata("ggmlT16_"+name, 1, 4, func(int) uint64 { return uint64(v) })
}
