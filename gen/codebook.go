package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Codebook (layout/codebook) kernels. Codes live in lane bit streams of
// 32-row tiles: word w of rows t..t+15 (t = 0 or 16) is 16 consecutive
// uint32 at words + w*128 (+ 4*t), code j at bits j*B.. of the lane's
// stream, possibly straddling into word w+1.

// cbVec is one vector width: 16 lanes (AVX-512) or 8 (AVX2).
type cbVec struct {
	avx512 bool
}

func (v cbVec) lanes() int { return map[bool]int{true: 16, false: 8}[v.avx512] }
func (v cbVec) suffix() string {
	if v.avx512 {
		return "Avx512"
	}
	return "Avx2"
}
func (v cbVec) vec() VecVirtual {
	if v.avx512 {
		return ZMM()
	}
	return YMM()
}
func (v cbVec) requires() string {
	if v.avx512 {
		return "AVX-512F"
	}
	return "AVX2 and FMA"
}

// cbTable emits CbTableV<v><isa>: the Psumbook of one codebook for nseg
// segments of vector length v, out[s*k + q] = sum_e ct[e*k + q] * x[s*v + e].
// Per segment the v activations are broadcast once, then each vector of
// entries takes one multiply (e = 0, the same value as a multiply-add
// into zero) and v-1 multiply-adds in e order from the v rows of ct.
// Consecutive vectors of entries are independent, so out-of-order
// execution overlaps their chains. (One loop for every v, which
// broadcast each activation again for every vector of entries behind a
// loop per element, took about 4x as long.)
func cbTable(f cbVec, v int) {
	name := fmt.Sprintf("CbTableV%d%s", v, f.suffix())
	TEXT(name, NOSPLIT, "func(ct *float32, x *float32, out *float32, nseg int, k int)")
	Pragma("noescape")
	Doc(
		name+" builds the Psumbook of one codebook of "+fmt.Sprint(v)+"-vectors with "+f.requires()+": for",
		"s < nseg, q < k, out[s*k+q] = sum_{e<"+fmt.Sprint(v)+"} ct[e*k+q] * x[s*"+fmt.Sprint(v)+"+e] (ct: the centroids",
		"transposed, "+fmt.Sprint(v)+" rows of k float32), the products accumulated in e order",
		"with fused multiply-adds (the first a multiply: the same value).",
		"",
		fmt.Sprintf("Preconditions: nseg >= 1, k a multiple of %d.", f.lanes()),
	)
	kb, rows := ctRows(v)
	x, out, nseg := param("x"), param("out"), param("nseg")
	Label(name + "_seg")
	bx := make([]VecVirtual, v)
	for e := range bx {
		bx[e] = f.vec()
		VBROADCASTSS(Mem{Base: x, Disp: 4 * e}, bx[e])
	}
	q := GP64()
	XORQ(q, q)
	Label(name + "_q")
	acc := f.vec()
	VMULPS(Mem{Base: rows[0], Index: q, Scale: 1}, bx[0], acc)
	for e := 1; e < v; e++ {
		VFMADD231PS(Mem{Base: rows[e], Index: q, Scale: 1}, bx[e], acc)
	}
	VMOVUPS(acc, Mem{Base: out, Index: q, Scale: 1})
	ADDQ(U32(4*f.lanes()), q)
	CMPQ(q, kb)
	JB(LabelRef(name + "_q"))
	ADDQ(kb, out)
	ADDQ(U32(4*v), x)
	DECQ(nseg)
	JNZ(LabelRef(name + "_seg"))
	if !f.avx512 {
		VZEROUPPER()
	}
	RET()
}

// ctRows loads the byte stride of the transposed centroids' rows (the
// argument k, in float32, times 4) and a pointer to each of their v rows
// (ct + e*stride).
func ctRows(v int) (kb GPVirtual, rows []GPVirtual) {
	kb = param("k")
	SHLQ(U8(2), kb)
	rows = make([]GPVirtual, v)
	rows[0] = param("ct")
	for e := 1; e < v; e++ {
		rows[e] = GP64()
		LEAQ(Mem{Base: rows[e-1], Index: kb, Scale: 1}, rows[e])
	}
	return kb, rows
}

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
	what := []string{"\t\tgroup's segments s and codebooks i of tab_i[s][c_i]", "", "(the Psumbook: tab_i = tab + i*tabstride bytes, segbytes bytes per segment)."}
	if dequant {
		what = []string{"\t\tgroup's segments s and codebooks i of sum_e C_i[c_i][e] * x[s*v+e]", "", "(dequantize and multiply: C_i = tab + i*tabstride bytes, v float32 per centroid)."}
	}
	Doc(append(append([]string{
		fmt.Sprintf("%s accumulates, for %d rows of a codebook tile (%d-bit codes, M = %d", name, L, b, m),
		fmt.Sprintf("codebooks) and nper periods of %d segments, with %s:", P, f.requires()),
		"",
		"\tfor each group g of spg segments: acc[l] += scales[g*sstride/4 + l] * sum over the"}, what...),
		fmt.Sprintf("c_i is the code of lane l < %d and segment s in the lane bit stream at", L),
		"words + i*cbstride (bytes; word w of the block's lanes at words + w*128),",
		fmt.Sprintf("segment s at bit s*%d. Lookups of a group are summed in segment then", b),
		"codebook order.",
		"",
		fmt.Sprintf("Preconditions: nper >= 1; spg >= 1 divides nper*%d or is a multiple of", P),
		fmt.Sprintf("%d; the word after every code's first word readable (layout/codebook", P),
		"keeps 32 zero words at the end).",
	)...)
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

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
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

// cbTableF16 emits CbTableF16V<v>Avx512: the Psumbook in binary16 for
// v-element centroids, scaled by inv (a power of two chosen by the caller
// so that every entry is finite).
func cbTableF16(v int) {
	name := fmt.Sprintf("CbTableF16V%dAvx512", v)
	TEXT(name, NOSPLIT, "func(ct *float32, x *float32, out *uint16, nseg int, k int, inv float32)")
	Pragma("noescape")
	Doc(
		name+" builds a binary16 Psumbook with AVX-512F: for s < nseg, q < k,",
		fmt.Sprintf("out[s*k+q] = binary16(inv * sum_{e<%d} ct[e*k+q] * x[s*%d+e]) (ct: the", v, v),
		"centroids transposed; products accumulated in e order with fused",
		"multiply-adds, the product by inv exact for a power of two, rounded to",
		"nearest even).",
		"",
		"Preconditions: nseg >= 1, k a multiple of 16.",
	)
	cbTable16Loop(name, v, 16, func(entries func(half int) VecVirtual, op, _ GPVirtual) {
		h := YMM()
		VCVTPS2PH(U8(0), entries(0), h)
		VMOVDQU(h, Mem{Base: op})
	})
}

// cbTable16Loop emits the segment and entry loops of the binary16 table
// kernels: per segment it broadcasts the v inputs, then per block of
// step entries (16 or 32) calls store with entries(half), the 16 scaled
// float32 entries of half 0 or 1 of the block, the output pointer of the
// block (2 bytes per entry from out) and k; out advances 2k bytes per
// segment.
func cbTable16Loop(name string, v, step int, store func(entries func(half int) VecVirtual, op, k GPVirtual)) {
	ct, x, out := param("ct"), param("x"), param("out")
	nseg := param("nseg")
	k := param("k")
	inv := ZMM()
	VBROADCASTSS(NewParamAddr("inv", 40), inv)
	kb := GP64() // row stride of ct in bytes
	MOVQ(k, kb)
	SHLQ(U8(2), kb)
	Label(name + "_seg")
	{
		bx := make([]VecVirtual, v)
		for e := range bx {
			bx[e] = ZMM()
			VBROADCASTSS(Mem{Base: x, Disp: 4 * e}, bx[e])
		}
		cp := GP64()
		MOVQ(ct, cp)
		op := GP64()
		MOVQ(out, op)
		q := GP64()
		MOVQ(k, q)
		Label(name + "_q")
		entries := func(half int) VecVirtual {
			acc := ZMM()
			VMULPS(Mem{Base: cp, Disp: 64 * half}, bx[0], acc)
			row := GP64()
			MOVQ(cp, row)
			for e := 1; e < v; e++ {
				ADDQ(kb, row)
				VFMADD231PS(Mem{Base: row, Disp: 64 * half}, bx[e], acc)
			}
			VMULPS(inv, acc, acc)
			return acc
		}
		store(entries, op, k)
		ADDQ(U32(4*step), cp)
		ADDQ(U32(step), op)
		if step == 16 { // binary16 entries: 2 bytes each
			ADDQ(U32(step), op)
		}
		SUBQ(U32(step), q)
		JNZ(LabelRef(name + "_q"))
		MOVQ(k, q)
		LEAQ(Mem{Base: out, Index: q, Scale: 2}, out)
		ADDQ(U32(4*v), x)
		DECQ(nseg)
		JNZ(LabelRef(name + "_seg"))
	}
	VZEROUPPER()
	RET()
}

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
	Doc(
		fmt.Sprintf("%s accumulates, for the 32 rows of a codebook tile (%d-bit codes, M = %d", name, b, m),
		fmt.Sprintf("codebooks) and nper periods of %d segments, with AVX-512F and BW:", P),
		"",
		"\tfor each group g of spg segments: acc[l] += scales[g*sstride/4 + l] * sum over the",
		"\t\tgroup's segments s and codebooks i of float32(tab_i[s][c_i])",
		"",
		fmt.Sprintf("for lanes l < 32 (tab_i = tab + i*tabstride bytes, %d binary16 entries per", 1<<b),
		"segment; c_i is the code of lane l and segment s in the lane bit stream at",
		fmt.Sprintf("words + i*cbstride, segment s at bit s*%d). Lookups of a group are summed", b),
		"in segment then codebook order, in float32.",
		"",
		fmt.Sprintf("Preconditions: nper >= 1; spg >= 1 divides nper*%d or is a multiple of %d;", P, P),
		"the word after every code's first word readable. The code words pf bytes",
		"ahead (the next tile's) are prefetched. Nothing past the tables is read.",
	)
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

// int8Gemv emits Int8GemvAvx512: exact int8 x int8 dot products, four rows
// at a time, for the MatVANS int8 baseline.
func int8Gemv() {
	name := "Int8GemvAvx512"
	TEXT(name, NOSPLIT, "func(w *int8, stride int, x *uint8, n64 int, quads int, out *int32)")
	Pragma("noescape")
	Doc(
		name+" computes, with AVX-512 VNNI, for quads groups of 4 rows (row r at",
		"w + r*stride), out[r] = sum_{c < 64*n64} int32(x[c]) * int32(w[r][c]) with x",
		"unsigned bytes and w signed (VPDPBUSD); callers pass x = v + 128 and",
		"subtract 128 * (row sum of w) to get the signed product.",
		"",
		"Preconditions: n64 >= 1, quads >= 1.",
	)
	int8Quads(name, "n64", ZMM, func(a VecVirtual) { VPXORD(a, a, a) },
		func(rows [4]GPVirtual, xp GPVirtual, acc [4]VecVirtual) {
			xv := ZMM()
			VMOVDQU8(Mem{Base: xp}, xv)
			for k := 0; k < 4; k++ {
				VPDPBUSD(Mem{Base: rows[k]}, xv, acc[k])
				ADDQ(U32(64), rows[k])
			}
		},
		func(acc [4]VecVirtual, op GPVirtual) {
			for k := 0; k < 4; k++ {
				y := YMM()
				VEXTRACTI64X4(U8(1), acc[k], y)
				VPADDD(y, acc[k].AsY(), y)
				xx := XMM()
				VEXTRACTI128(U8(1), y, xx)
				VPADDD(xx, y.AsX(), xx)
				t := XMM()
				VPSHUFD(U8(0x4e), xx, t)
				VPADDD(t, xx, xx)
				VPSHUFD(U8(0xb1), xx, t)
				VPADDD(t, xx, xx)
				VMOVD(xx, Mem{Base: op, Disp: 4 * k})
			}
		})
}

// int8Quads emits the loop both int8 GEMV kernels share: for each group
// of 4 rows (w, w+stride, ...), accumulators made by newAcc and cleared by
// zero, the n-parameter's count of column steps (step consumes 64 bytes
// of x and advances the row pointers), then store writes the 4 sums at
// out; w moves 4 rows down and out 16 bytes.
func int8Quads(name, nParam string, newAcc func() VecVirtual, zero func(VecVirtual),
	step func(rows [4]GPVirtual, xp GPVirtual, acc [4]VecVirtual), store func(acc [4]VecVirtual, op GPVirtual)) {
	wp, xp0 := param("w"), param("x")
	stride := param("stride")
	op := param("out")
	q := param("quads")
	Label(name + "_quad")
	{
		acc := [4]VecVirtual{newAcc(), newAcc(), newAcc(), newAcc()}
		for _, a := range acc {
			zero(a)
		}
		rows := [4]GPVirtual{GP64(), GP64(), GP64(), GP64()}
		MOVQ(wp, rows[0])
		for k := 1; k < 4; k++ {
			LEAQ(Mem{Base: rows[k-1], Index: stride, Scale: 1}, rows[k])
		}
		xp := GP64()
		MOVQ(xp0, xp)
		n := param(nParam)
		Label(name + "_c")
		step(rows, xp, acc)
		ADDQ(U32(64), xp)
		DECQ(n)
		JNZ(LabelRef(name + "_c"))
		store(acc, op)
		LEAQ(Mem{Base: wp, Index: stride, Scale: 4}, wp)
		ADDQ(U32(16), op)
		DECQ(q)
		JNZ(LabelRef(name + "_quad"))
	}
	VZEROUPPER()
	RET()
}

// cbNextPeriod advances the code pointers by stride bytes and loops back
// to the period label while the nper argument, decremented, is nonzero.
func cbNextPeriod(name string, wps []GPVirtual, stride int) {
	for _, w := range wps {
		ADDQ(U32(uint32(stride)), w)
	}
	bump("nper", I32(-1))
	nper := param("nper")
	TESTQ(nper, nper)
	JNZ(LabelRef(name + "_period"))
}

// cbStreams loads the code-word and table pointers of each of the m
// codebooks (words + i*cbstride, tab + i*tabstride), which the lookup
// kernels advance together.
func cbStreams(m int) (wps, tps []GPVirtual) {
	wps, tps = []GPVirtual{param("words")}, []GPVirtual{param("tab")}
	for i := 1; i < m; i++ {
		w, t := param("cbstride"), param("tabstride")
		ADDQ(wps[0], w)
		ADDQ(tps[0], t)
		wps, tps = append(wps, w), append(tps, t)
	}
	return wps, tps
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
	Doc(
		fmt.Sprintf("%s accumulates, for ntiles 32-row tiles of a codebook column tile", name),
		fmt.Sprintf("(8-bit codes, M = %d codebooks) of nw words (4 segments each) per row, with AVX:", m),
		"",
		"\tfor each tile t, row r < 32 and group g of wpg words (4*wpg segments):",
		"\t\tacc[32*t + r] += scales[32*t + r + g*sstride/4] * sum over the group's",
		"\t\tsegments s and codebooks i of tab_i[s][c_i]",
		"",
		"where tab_i = tab + i*tabstride bytes (256 float32 per segment, 1024 bytes)",
		"and c_i is byte s%4 of word s/4 of row r at words + t*tstride + i*cbstride",
		"(bytes; word w of the tile's rows at w*128 + 4*r). Per group, the lookups",
		"are summed in word, then codebook, then segment order, and the product with",
		"the scale is rounded before the add; scales advance 128 bytes per tile.",
		"",
		"Preconditions: ntiles >= 1; nw >= 1 and wpg >= 1 divides nw. The words",
		fmt.Sprintf("%d tiles ahead are prefetched (prefetches never fault).", cbPrefetchTiles),
	)
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

// cbNextTile advances the code pointer argument ptr by stride and the
// scales and acc arguments by step bytes, counts down the argument count
// and loops to label while it is not zero.
func cbNextTile(ptr string, stride Op, step uint32, count, label string) {
	bump(ptr, stride)
	bump("scales", U32(step))
	bump("acc", U32(step))
	bump(count, I32(-1))
	n := param(count)
	TESTQ(n, n)
	JNZ(LabelRef(label))
}

// cbTableI16 emits CbTableI16V<v>Avx512: the Psumbook as int16 fixed
// point (the scaled entries rounded to integers), each segment's entries
// split into low bytes then high bytes, for the int16 64-row kernel.
func cbTableI16(v int) {
	name := fmt.Sprintf("CbTableI16V%dAvx512", v)
	TEXT(name, NOSPLIT, "func(ct *float32, x *float32, out *uint8, nseg int, k int, inv float32)")
	Pragma("noescape")
	Doc(
		name+" builds an int16 Psumbook with AVX-512F and VBMI, stored as",
		"bytes: for s < nseg, q < k, with h = int16(round(inv * sum_{e<"+fmt.Sprint(v)+"} ct[e*k+q] *",
		"x[s*"+fmt.Sprint(v)+"+e])) (products accumulated in e order with fused multiply-adds, the",
		"product by inv exact for a power of two, rounded to nearest even, then",
		"truncated to 16 bits), out[s*2k+q] = low byte of h and out[s*2k+k+q] = its",
		"high byte. The caller picks inv so that every entry is at most 32767 in",
		"magnitude.",
		"",
		"Preconditions: nseg >= 1, k a multiple of 32.",
	)
	// VPERMT2B index over two vectors of 16 dwords: bytes 0 (low) of the
	// 32 dwords, then bytes 1 (high); the entries fit 16 bits, so these
	// are the int16's bytes.
	split := ZMM()
	VMOVDQU8(rodata("cbI16SplitBytes", 64, 1, func(i int) uint64 { return uint64(4*(i%32) + i/32) }), split)
	cbTable16Loop(name, v, 32, func(entries func(half int) VecVirtual, op, k GPVirtual) {
		var ds [2]VecVirtual
		for half := range ds {
			ds[half] = ZMM()
			VCVTPS2DQ(entries(half), ds[half])
		}
		w := ds[0]
		VPERMT2B(ds[1], split, w)
		VMOVDQU(w.AsY(), Mem{Base: op})
		hi := YMM()
		VEXTRACTI64X4(U8(1), w, hi)
		VMOVDQU(hi, Mem{Base: op, Index: k, Scale: 1})
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
	where := []string{
		"where g counts the block's runs, c is byte p of the 64 at codes + b*bstride +",
		"i*cbstride + 64*s with cpu.cbI16Row(p) = r, and lo_i/hi_i are the 256 low / high",
	}
	pre := "Preconditions: nblk >= 1, nseg >= 1, spg >= 1."
	if packed {
		where = []string{
			"where g counts the block's runs, position r of a block is row cpu.cbI16PRow(r)",
			"of its 64 (scales and acc are in position order), c is that row's code i of",
			"segment s: for rows 0-31 of block b, byte s%4 of word s/4 of a layout/codebook",
			"32-row tile whose codebook-i words start at codes + b*bstride + i*cbstride,",
			"for rows 32-63 the tile bstride/2 bytes further; lo_i/hi_i are the 256 low / high",
		}
		pre = "Preconditions: nblk >= 1, nseg >= 1 a multiple of 4, spg >= 1."
	}
	doc := []string{
		fmt.Sprintf("%s accumulates, for nblk blocks of 64 rows (8-bit codes, M = %d", name, m),
		"codebooks) and nseg segments, with AVX-512F, BW, VBMI and VNNI:",
		"",
		"\tfor each block b, position r < 64 and run of spg segments (the last may be shorter):",
		"\t\tacc[64b + r] += scales[64b + r + g*sstride/4] * float32(sum over the run's",
		"\t\tsegments s and codebooks i of int16(lo_i[s][c] | hi_i[s][c]<<8))",
		"",
	}
	doc = append(doc, where...)
	doc = append(doc,
		"bytes of segment s's table at tab + i*tabstride + 512*s. The int32 run sums",
		"are exact (nseg*M*32768 < 2^31); each is converted to float32 once. The",
		"codes pf bytes ahead are prefetched (prefetches never fault).",
		"",
		pre,
	)
	Doc(doc...)
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
