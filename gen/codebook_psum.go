package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Psumbook lookup kernels without gathers: binary16 tables in registers
// (VPERMW), int16 tables read with byte permutes (64 rows per lookup), and
// scalar loads for 8-bit codes on AVX2.

// cbPsumF16 emits CbPsumF16B<b>M<m>Avx512: the Psumbook lookup for a whole
// 32-row tile with binary16 tables held in vector registers and read with
// VPERMW / VPERMT2W (b = 4, 6, 8: 16, 64, 256 entries), 32 rows per
// permute instead of a gather per 16.
func cbPsumF16(b, m int) {
	name := fmt.Sprintf("CbPsumF16B%dM%dAvx512", b, m)
	P := 32 / gcd(32, b)
	pw := P * b / 32
	TEXT(name, NOSPLIT, "func(words *uint32, cbstride int, nper int, tab *uint16, tabstride int, spg int, scales *float32, sstride int, acc *float32, pf int)")
	Pragma("noescape")
	kernelDoc("Codebook kernels", fmt.Sprintf("%s accumulates binary16 Psumbook lookups (%d-entry tables in registers, VPERMW / VPERMT2W) for the 32 rows of a codebook tile, %d-bit codes, M = %d codebooks, periods of P = %d segments, with AVX-512F and BW.", name, 1<<b, b, m, P))
	zero := ZMM()
	VPXORD(zero, zero, zero)
	pack := ZMM()
	VMOVDQU16(cbPackWords(), pack)
	// b = 8: byte j of every lane's word is segment j's code; one VPERMT2B
	// per segment moves it into the low byte of word l (VBMI).
	var packB [4]VecVirtual
	if b == 8 {
		for j := range packB {
			packB[j] = ZMM()
			VMOVDQU8(cbPackBytes(j), packB[j])
		}
	}
	acc0, acc1 := ZMM(), ZMM()
	{
		ap := param("acc")
		VMOVUPS(Mem{Base: ap}, acc0)
		VMOVUPS(Mem{Base: ap, Disp: 64}, acc1)
	}
	mask := ZMM()
	{
		t := GP32()
		MOVL(U32(uint32(1)<<b-1), t)
		VPBROADCASTD(t, mask)
	}
	var c64, c128 VecVirtual
	if b == 8 {
		c64, c128 = ZMM(), ZMM()
		t := GP32()
		MOVL(U32(64), t)
		VPBROADCASTW(t, c64)
		MOVL(U32(128), t)
		VPBROADCASTW(t, c128)
	}
	wps, tps := cbStreams(m)
	sp := param("scales")
	cnt := param("spg")
	gs0, gs1 := ZMM(), ZMM()
	VMOVDQA32(zero, gs0)
	VMOVDQA32(zero, gs1)
	Label(name + "_period")
	{
		pf := param("pf")
		for _, w := range wps {
			a := GP64()
			LEAQ(Mem{Base: w, Index: pf, Scale: 1}, a)
			for l := 0; l < 2*pw; l++ {
				PREFETCHT0(Mem{Base: a, Disp: 64 * l})
			}
		}
	}
	var words8 [2][2]VecVirtual // b = 8: the period's word, both halves, per codebook
	if b == 8 {
		for i := 0; i < m; i++ {
			for h := 0; h < 2; h++ {
				words8[i][h] = ZMM()
				VMOVDQU32(Mem{Base: wps[i], Disp: 64 * h}, words8[i][h])
			}
		}
	}
	for j := 0; j < P; j++ {
		bit := j * b
		w, off := bit/32, bit%32
		for i := 0; i < m; i++ {
			var idx VecVirtual
			if b == 8 {
				idx = ZMM()
				VMOVDQA32(words8[i][0], idx)
				VPERMT2B(words8[i][1], packB[j], idx)
			} else {
				var halves [2]VecVirtual
				for h := 0; h < 2; h++ {
					c := ZMM()
					VMOVDQU32(Mem{Base: wps[i], Disp: 128*w + 64*h}, c)
					if off > 0 {
						VPSRLD(U8(off), c, c)
					}
					if off+b > 32 {
						hi := ZMM()
						VMOVDQU32(Mem{Base: wps[i], Disp: 128*(w+1) + 64*h}, hi)
						VPSLLD(U8(32-off), hi, hi)
						VPORD(hi, c, c)
					}
					if off+b != 32 {
						VPANDD(mask, c, c)
					}
					halves[h] = c
				}
				// 32 word indexes, rows 0..15 then 16..31: the low words of
				// both halves' dwords, in one two-table permute.
				idx = halves[0]
				VPERMT2W(halves[1], pack, idx)
			}
			tp := tps[i]
			r := ZMM()
			switch b {
			case 4:
				// The 16 entries are 32 bytes: a YMM load (which zeroes the
				// rest) keeps the permute from reading 32 bytes past the
				// last segment's table, as its 64-byte memory operand did.
				t := ZMM()
				VMOVDQU16(Mem{Base: tp}, t.AsY())
				VPERMW(t, idx, r)
			case 6:
				VMOVDQU16(Mem{Base: tp}, r)
				VPERMT2W(Mem{Base: tp, Disp: 64}, idx, r)
			case 8:
				var rs [4]VecVirtual
				for q := 0; q < 4; q++ {
					rs[q] = ZMM()
					VMOVDQU16(Mem{Base: tp, Disp: 128 * q}, rs[q])
					VPERMT2W(Mem{Base: tp, Disp: 128*q + 64}, idx, rs[q])
				}
				k6, k7 := K(), K()
				VPTESTMW(c64, idx, k6)
				VPTESTMW(c128, idx, k7)
				// avo models the blend destination as read (merge masking):
				// define each destination first so it is not live from entry.
				r01, r23 := ZMM(), ZMM()
				VMOVDQA32(zero, r01)
				VMOVDQA32(zero, r23)
				VMOVDQA32(zero, r)
				VPBLENDMW(rs[1], rs[0], k6, r01)
				VPBLENDMW(rs[3], rs[2], k6, r23)
				VPBLENDMW(r23, r01, k7, r)
			}
			f0, f1 := ZMM(), ZMM()
			VCVTPH2PS(r.AsY(), f0)
			h := YMM()
			VEXTRACTI64X4(U8(1), r, h)
			VCVTPH2PS(h, f1)
			VADDPS(f0, gs0, gs0)
			VADDPS(f1, gs1, gs1)
		}
		for _, t := range tps {
			ADDQ(U32(2<<b), t)
		}
		skip := fmt.Sprintf("%s_nogroup%d", name, j)
		DECQ(cnt)
		JNZ(LabelRef(skip))
		VFMADD231PS(Mem{Base: sp}, gs0, acc0)
		VFMADD231PS(Mem{Base: sp, Disp: 64}, gs1, acc1)
		VMOVDQA32(zero, gs0)
		VMOVDQA32(zero, gs1)
		ADDQ(param("sstride"), sp)
		Load(Param("spg"), cnt)
		Label(skip)
	}
	cbNextPeriod(name, wps, 128*pw)
	ap := param("acc")
	VMOVUPS(acc0, Mem{Base: ap})
	VMOVUPS(acc1, Mem{Base: ap, Disp: 64})
	RET()
}

// cbPackWords returns the VPERMT2W index packing the low words of two
// dword vectors (A then B) into one word vector.
func cbPackWords() Mem {
	return rodata("cbPackWords", 32, 2, func(w int) uint64 {
		return uint64(2 * w) // word 2w of the A:B pair: A's dword w for w < 16, B's dword w-16 after
	})
}

// cbPackBytes returns the VPERMT2B index moving byte j of the dwords of
// two vectors (A then B) into the low bytes of 32 words (the high bytes
// take the same byte; only bits 0..7 of a word matter to the lookups).
func cbPackBytes(j int) Mem {
	return rodata(fmt.Sprintf("cbPackBytes%d", j), 64, 1, func(b int) uint64 {
		return uint64(4*(b/2) + j) // A's dword b/2 for b < 32; B's dword b/2-16 (bytes 64..127) after
	})
}

// cbPsumI16 emits CbPsumI16B8M<m>Avx512 (packed false) and
// CbPsumI16PB8M<m>Avx512 (packed true): 8-bit codes, 64 rows per lookup,
// int16 Psumbooks (CbTableI16) read with byte permutes and summed exactly
// in int32 with word multiply-adds. The first reads the codes from the
// CPU's transposed copy (64 bytes per segment and block); the second
// reads layout/codebook's packed words in place and transposes each word
// column of a block (4 segments, 256 bytes) in registers.
func cbPsumI16(m int, packed bool) {
	name := fmt.Sprintf("CbPsumI16B8M%dAvx512", m)
	if packed {
		name = fmt.Sprintf("CbPsumI16PB8M%dAvx512", m)
	}
	TEXT(name, NOSPLIT, "func(codes *uint8, bstride int, cbstride int, nblk int, nseg int, tab *uint8, tabstride int, spg int, scales *float32, sstride int, acc *float32, pf int)")
	Pragma("noescape")
	codes := "the CPU's transposed copy of the codes"
	if packed {
		codes = "layout/codebook's packed words in place"
	}
	kernelDoc("Codebook kernels", fmt.Sprintf("%s accumulates int16 Psumbook lookups (byte permutes, exact int32 sums) for blocks of 64 rows, 8-bit codes from %s, M = %d codebooks, with AVX-512F, BW, VBMI and VNNI.", name, codes, m))
	var one [2]VecVirtual // word multipliers: the even and the odd word of each dword
	for q := range one {
		one[q] = ZMM()
		t := GP32()
		MOVL(U32(1<<(16*q)), t)
		VPBROADCASTD(t, one[q])
	}
	var tr VecVirtual // packed: VPSHUFB index transposing each lane's 4 rows x 4 segments
	if packed {
		tr = ZMM()
		VMOVDQU8(rodata("cbI16Transpose", 64, 1, func(k int) uint64 {
			o := k % 16
			return uint64(4*(o%4) + o/4)
		}), tr)
	}
	Label(name + "_block")
	var accf, ia [4]VecVirtual
	ap := param("acc")
	for q := range accf {
		accf[q], ia[q] = ZMM(), ZMM()
		VMOVUPS(Mem{Base: ap, Disp: 64 * q}, accf[q])
		VPXORD(ia[q], ia[q], ia[q])
	}
	cps, tps := []GPVirtual{param("codes")}, []GPVirtual{param("tab")}
	if m > 1 {
		c1, t1 := param("cbstride"), param("tabstride")
		ADDQ(cps[0], c1)
		ADDQ(tps[0], t1)
		cps, tps = append(cps, c1), append(tps, t1)
	}
	pf := param("pf")
	var ts GPVirtual // packed: bytes to the block's second 32-row tile
	if packed {
		ts = param("bstride")
		SHRQ(U8(1), ts)
	}
	sp := param("scales")
	cnt := param("spg")
	s := param("nseg")
	flush := func() {
		for q := range ia {
			f := ZMM()
			VCVTDQ2PS(ia[q], f)
			VFMADD231PS(Mem{Base: sp, Disp: 64 * q}, f, accf[q])
			VPXORD(ia[q], ia[q], ia[q])
		}
		ADDQ(param("sstride"), sp)
		Load(Param("spg"), cnt)
	}
	// lookup adds segment table t (at tps[i] + disp) at the 64 codes idx.
	lookup := func(i int, idx VecVirtual, disp int) {
		kb := K()
		VPMOVB2M(idx, kb)
		var half [2]VecVirtual // low bytes, high bytes
		for hb := 0; hb < 2; hb++ {
			t0, t1 := ZMM(), ZMM()
			VMOVDQU8(Mem{Base: tps[i], Disp: disp + 256*hb}, t0)
			VPERMT2B(Mem{Base: tps[i], Disp: disp + 256*hb + 64}, idx, t0)
			VMOVDQU8(Mem{Base: tps[i], Disp: disp + 256*hb + 128}, t1)
			VPERMT2B(Mem{Base: tps[i], Disp: disp + 256*hb + 192}, idx, t1)
			VPBLENDMB(t1, t0, kb, t0)
			half[hb] = t0
		}
		wl, wh := ZMM(), ZMM()
		VPUNPCKLBW(half[1], half[0], wl)
		VPUNPCKHBW(half[1], half[0], wh)
		VPDPWSSD(one[0], wl, ia[0])
		VPDPWSSD(one[1], wl, ia[1])
		VPDPWSSD(one[0], wh, ia[2])
		VPDPWSSD(one[1], wh, ia[3])
	}
	// segEnd counts a segment against the run and flushes a full run.
	segEnd := func(label string) {
		DECQ(cnt)
		JNZ(LabelRef(label))
		flush()
		Label(label)
	}
	Label(name + "_seg")
	if !packed {
		for i := 0; i < m; i++ {
			idx := ZMM()
			VMOVDQU8(Mem{Base: cps[i]}, idx)
			lookup(i, idx, 0)
			PREFETCHT0(Mem{Base: cps[i], Index: pf, Scale: 1})
			ADDQ(U32(64), cps[i])
			ADDQ(U32(512), tps[i])
		}
		segEnd(name + "_nogroup")
		DECQ(s)
	} else {
		// One word column: per codebook, rows 0-15, 16-31 (this tile) and
		// 32-47, 48-63 (the next), each lane's 4 rows x 4 segments
		// transposed by VPSHUFB, then a 4x4 dword transpose across the
		// four: idx[i][j] holds segment j's codes, byte p of row
		// 16*((p%16)/4) + 4*(p/16) + p%4.
		idx := make([][4]VecVirtual, m)
		for i := 0; i < m; i++ {
			var a [4]VecVirtual
			for q := range a {
				a[q] = ZMM()
				mem := Mem{Base: cps[i], Disp: 64 * (q % 2)}
				if q >= 2 {
					mem = Mem{Base: cps[i], Index: ts, Scale: 1, Disp: 64 * (q % 2)}
				}
				VMOVDQU32(mem, a[q])
				VPSHUFB(tr, a[q], a[q])
			}
			t0, t1, t2, t3 := ZMM(), ZMM(), ZMM(), ZMM()
			VPUNPCKLDQ(a[1], a[0], t0)
			VPUNPCKHDQ(a[1], a[0], t1)
			VPUNPCKLDQ(a[3], a[2], t2)
			VPUNPCKHDQ(a[3], a[2], t3)
			for j := range idx[i] {
				idx[i][j] = ZMM()
			}
			VPUNPCKLQDQ(t2, t0, idx[i][0])
			VPUNPCKHQDQ(t2, t0, idx[i][1])
			VPUNPCKLQDQ(t3, t1, idx[i][2])
			VPUNPCKHQDQ(t3, t1, idx[i][3])
			pa := GP64()
			LEAQ(Mem{Base: cps[i], Index: pf, Scale: 1}, pa)
			PREFETCHT0(Mem{Base: pa})
			PREFETCHT0(Mem{Base: pa, Disp: 64})
			PREFETCHT0(Mem{Base: pa, Index: ts, Scale: 1})
			PREFETCHT0(Mem{Base: pa, Index: ts, Scale: 1, Disp: 64})
		}
		for j := 0; j < 4; j++ {
			for i := 0; i < m; i++ {
				lookup(i, idx[i][j], 512*j)
			}
			segEnd(fmt.Sprintf("%s_nogroup%d", name, j))
		}
		for i := 0; i < m; i++ {
			ADDQ(U32(128), cps[i])
			ADDQ(U32(2048), tps[i])
		}
		SUBQ(U8(4), s)
	}
	JNZ(LabelRef(name + "_seg"))
	// A shorter last run: flush it.
	done := name + "_done"
	CMPQ(cnt, NewParamAddr("spg", 56))
	JE(LabelRef(done))
	flush()
	Label(done)
	ap = param("acc")
	for q := range accf {
		VMOVUPS(accf[q], Mem{Base: ap, Disp: 64 * q})
	}
	// Next block: codes, scales and acc move on.
	cbNextTile("codes", param("bstride"), 256, "nblk", name+"_block")
	VZEROUPPER()
	RET()
}

// cbPrefetchTiles is how many 32-row tiles ahead the scalar kernel
// prefetches codes.
const cbPrefetchTiles = 2

// cbPsumScalar emits CbPsumScalarB8M<m>Avx2: the Psumbook lookup for 8-bit
// codes with one scalar load per code instead of gathers (AVX2 gathers
// run at a fraction of the load ports' rate on Zen 4 and, with the
// gather-data-sampling mitigation, on Intel cores). Each code byte is
// taken from its word (AL, AH, a shift, AL, AH) and indexes a float32
// table entry that VADDSS adds to the row's running sum; sixteen rows
// are in flight, so sixteen independent sums hide the add latency. With
// everything in L1 the loop is bound alike by its floating-point adds and
// its table loads, one of each per lookup. The tables of one column tile
// are meant to stay in L1 while the kernel walks ntiles 32-row tiles of
// codes, which lie tstride apart: the kernel prefetches them
// cbPrefetchTiles tiles ahead, which the lookups from DRAM need.
func cbPsumScalar(m int) {
	name := fmt.Sprintf("CbPsumScalarB8M%dAvx2", m)
	TEXT(name, NOSPLIT, "func(words *uint32, tstride int, cbstride int, ntiles int, nw int, tab *float32, tabstride int, wpg int, scales *float32, sstride int, acc *float32)")
	Pragma("noescape")
	kernelDoc("Codebook kernels", fmt.Sprintf("%s accumulates float32 Psumbook lookups with scalar loads for 32-row tiles, 8-bit codes, M = %d codebooks, with AVX, prefetching the codes %d tiles ahead.", name, m, cbPrefetchTiles))
	// Sixteen rows, one running sum each in X0..X15 (VEX encodes no
	// more): sixteen independent add chains, and a group end that needs
	// no temporaries.
	const rows = 16
	gs := make([]VecVirtual, rows)
	for l := range gs {
		gs[l] = XMM()
		VXORPS(gs[l], gs[l], gs[l])
	}
	// The sums are zero here and after every group end, and a row
	// block's last word ends a group (wpg divides nw).
	Label(name + "_tile")
	{
		// Prefetch the codes of the tile cbPrefetchTiles ahead (the
		// tiles are tstride apart, so the hardware prefetchers miss them).
		pf := param("tstride")
		IMUL3Q(U32(cbPrefetchTiles), pf, pf)
		ADDQ(param("words"), pf)
		for i := 0; i < m; i++ {
			if i == 1 {
				ADDQ(param("cbstride"), pf)
			}
			q := param("nw")
			lbl := fmt.Sprintf("%s_pf%d", name, i)
			Label(lbl)
			PREFETCHT0(Mem{Base: pf})
			PREFETCHT0(Mem{Base: pf, Disp: 64})
			ADDQ(U32(128), pf)
			DECQ(q)
			JNZ(LabelRef(lbl))
			if i == 0 && m > 1 {
				// back to the tile's first word for the next codebook
				q2 := param("nw")
				SHLQ(U8(7), q2)
				SUBQ(q2, pf)
			}
		}
	}
	for h := 0; h < 32; h += rows {
		// p_i: codebook i's words of rows h..h+15; tp_i: its tables.
		ps, tps := cbStreams(m)
		if h > 0 {
			for _, p := range ps {
				ADDQ(U32(4*h), p)
			}
		}
		sp := param("scales")
		if h > 0 {
			ADDQ(U32(4*h), sp)
		}
		cnt := param("wpg")
		q := param("nw")
		loop := fmt.Sprintf("%s_h%d_word", name, h)
		Label(loop)
		for i := 0; i < m; i++ {
			for l := 0; l < rows; l++ {
				// The word goes to EAX so that bytes 1 and 3 can be read
				// from AH: five ALU instructions for four codes, against
				// eight with shifts and zero extensions alone. A MOVBLZX
				// from AH cannot take a REX prefix, so its destinations
				// are ESI and EDI.
				MOVL(Mem{Base: ps[i], Disp: 4 * l}, EAX)
				c0, c2 := GP32(), GP32()
				MOVBLZX(AL, c0)
				MOVBLZX(AH, ESI)
				SHRL(U8(16), EAX)
				MOVBLZX(AL, c2)
				MOVBLZX(AH, EDI)
				for k, c := range []Register{c0.As64(), RSI, c2.As64(), RDI} {
					VADDSS(Mem{Base: tps[i], Index: c, Scale: 4, Disp: 1024 * k}, gs[l], gs[l])
				}
			}
		}
		for i := 0; i < m; i++ {
			ADDQ(U32(128), ps[i])
			ADDQ(U32(4096), tps[i])
		}
		// Group end: acc[r] += scale[r] * sum (a product and a sum,
		// each rounded), eight rows at a time: the sums (lane 0 of
		// each register, the other lanes zero) are gathered into one
		// vector with unpacks. Then the sums are cleared.
		skip := fmt.Sprintf("%s_h%d_nogroup", name, h)
		DECQ(cnt)
		JNZ(LabelRef(skip))
		ap := param("acc")
		for l := 0; l < rows; l += 8 {
			g := gs[l : l+8]
			for j := 0; j < 8; j += 2 {
				VUNPCKLPS(g[j+1], g[j], g[j])
			}
			VMOVLHPS(g[2], g[0], g[0])
			VMOVLHPS(g[6], g[4], g[4])
			VINSERTF128(U8(1), g[4], g[0].AsY(), g[0].AsY())
			VMULPS(Mem{Base: sp, Disp: 4 * l}, g[0].AsY(), g[0].AsY())
			VADDPS(Mem{Base: ap, Disp: 4 * (h + l)}, g[0].AsY(), g[0].AsY())
			VMOVUPS(g[0].AsY(), Mem{Base: ap, Disp: 4 * (h + l)})
		}
		for _, g := range gs {
			VXORPS(g, g, g)
		}
		ADDQ(param("sstride"), sp)
		Load(Param("wpg"), cnt)
		Label(skip)
		DECQ(q)
		JNZ(LabelRef(loop))
	}
	// Next tile: words, scales and acc move on.
	cbNextTile("words", param("tstride"), 128, "ntiles", name+"_tile")
	VZEROUPPER()
	RET()
}
