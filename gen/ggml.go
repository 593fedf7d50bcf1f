package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// llama.cpp block types with int8 activations (asm/ggml_amd64.s): the
// exact A8 definition of layout/ggml, AVX-512 VNNI, a row at a time, each
// block unpacked once for every vector of the batch.

// ggmlKernels emits the GGML block family.
func ggmlKernels() {
	for _, c := range ggmlSupers {
		ggmlSuperA8(c)
		for _, pf := range []r4Prefetch{r4PfL2, r4PfL1, r4PfLead} {
			if pf == r4PfLead && (c.t == "Q2K" || c.t == "Q3K") {
				continue // compute-bound (about 18 GB/s per core): r4PfLead
			}
			ggmlSuperA8R4(c, pf)
		}
		for _, M := range []int{4, 8, 16} { // rows in the lanes, M vector slots
			switch c.t {
			case "Q4K", "Q5K":
				ggmlSuperA8T16(c, M)
			case "Q6K":
				ggmlSuperA8T16Q6(c, M)
			case "Q2K", "Q3K":
				ggmlSuperA8T16Low(c, M)
			case "IQ4XS":
				ggmlSuperA8T16IQ4(c, M)
			default:
				panic("ggml: no rows-in-lanes kernel for " + c.t)
			}
		}
	}
	for _, c := range ggmlSmalls {
		ggmlBlockA8(c)
		for _, pf := range []r4Prefetch{r4PfL2, r4PfL1, r4PfLead} {
			ggmlBlockA8R4(c, pf)
		}
		if ggmlT32Types[c.t] {
			for _, M := range []int{4, 8, 16} {
				ggmlBlockA8T(c, M)
			}
		}
	}
	for _, c := range ggmlSupers {
		ggmlSuperF32(c)
	}
	// IQ4_XS in column order for the avxvnni set (VPDPBUSD batch kernels;
	// the avx2 set reads it in pair order, below)
	iq4xs := pairTypes["IQ4XS"].c
	ggmlSuperA8AVX2(iq4xs)
	ggmlSuperA8M16AVX2(iq4xs, false, false)
	ggmlSuperA8M16AVX2(iq4xs, true, false)
	ggmlSuperA8R4AVX2(iq4xs)
	ggmlSuperF32AVX2(iq4xs, false)
	for _, t := range []string{"Q2K", "Q3K", "Q4K", "Q5K", "Q6K", "IQ4XS"} { // AVX2: pair order
		pt := pairTypes[t]
		if pt.c.t != t {
			panic("gen: pairTypes[" + t + "] holds " + pt.c.t)
		}
		pairsA8R4AVX2(pt)
		ggmlSuperF32AVX2(pt.c, true)
		ggmlSuperA8M16AVX2(pt.c, false, true)
		ggmlSuperA8M16AVX2(pt.c, true, true)
	}
	for _, c := range ggmlSmalls {
		if ggmlT32AVX2Types[c.t] {
			for _, M := range []int{4, 8, 16} {
				ggmlBlockA8TAVX2(c, M, false)
				ggmlBlockA8TAVX2(c, M, true)
			}
		}
		ggmlBlockF32(c)
		ggmlBlockA8AVX2(c, false)
		ggmlBlockA8R4AVX2(c, false)
		if c.kv { // the unsigned types and Q8_0 measured even with VPDPBUSD
			ggmlBlockA8AVX2(c, true)
		}
		if ggmlSplit(c) { // the paired four-row kernels gain from VPDPBUSD (cpu.ggmlA8R4AVXVNNIFuncs)
			ggmlBlockA8R4AVX2(c, true)
		}
		ggmlBlockF32AVX2(c)
	}
}

// ggmlSig is the signature of every GGML A8 kernel (cpu/ggml_amd64.go
// calls them): rows rows from w (stride bytes apart) of nsb super-blocks
// each; for nvec vectors v, act+v*astride (the activations as prepared
// for the type), sums+v*sstride (the int16 activation sums of each
// sub-block), xs+v*xstride (the float32 activation scales); row r of
// vector v is written to out[v*ostride + r] (byte strides).
const ggmlSig = "func(w *byte, stride int, rows int, nsb int, act *int8, astride int, sums *int16, sstride int, xs *float32, xstride int, nvec int, out *float32, ostride int)"

// ggmlSuper describes a 256-element super-block type for ggmlSuperA8.
type ggmlSuper struct {
	t     string // name part: Q4K, ...
	bytes int    // block bytes
	sub   int    // sub-block elements (16 or 32)
	mins  bool   // an M term (mins times activation sums) subtracted with dmin
	shift int    // codes stored as q + 2^shift: S -= 2^shift * sum sc*sx (0: none)
	dword bool   // IQ4_XS: VPDPBUSD per 128-bit lane (one sub-block) times dword scales
	runs  []int  // the source columns of the 16-byte runs of the parts (nil: column order); cpu.ggmlActOrder
	doc   string
}

var ggmlSupers = []ggmlSuper{
	{t: "Q2K", bytes: 84, sub: 16, mins: true,
		doc: "part p of half h holds columns 64p..64p+63 of the half (bits 4p+2i of the 32 code bytes), the activations in column order, the sums one int16 per 16 columns"},
	{t: "Q3K", bytes: 110, sub: 16, shift: 2,
		doc: "as Q2_K, the codes q+4 (the hmask bit added as 4), S - 4*sum(sc*sx)"},
	{t: "Q4K", bytes: 144, sub: 32, mins: true, runs: []int{0, 16, 64, 80, 32, 48, 96, 112},
		doc: "part 0 of half h holds sub-blocks 4h and 4h+2 (the low nibbles of the half's 64 code bytes), part 1 sub-blocks 4h+1 and 4h+3 (the high nibbles): the activations of each 128 columns come as [0:32] [64:96] [32:64] [96:128], the sums one int16 per 32 columns"},
	{t: "Q5K", bytes: 176, sub: 32, mins: true, runs: []int{0, 16, 64, 80, 32, 48, 96, 112},
		doc: "as Q4_K, the qh bit of each code added as 16"},
	{t: "Q6K", bytes: 210, sub: 16, shift: 5,
		doc: "part 0 of half h holds columns 0..63 of the half (the low nibbles of ql and two bits of qh each), part 1 columns 64..127: the activations in column order, the sums one int16 per 16 columns, S - 32*sum(sc*sx)"},
	{t: "IQ4XS", bytes: 136, sub: 32, shift: 7, dword: true, runs: []int{0, 32, 64, 96, 16, 48, 80, 112},
		doc: "128-bit lane k of part 0 (part 1) of half h holds columns 32k..32k+15 (32k+16..32k+31) of the half as KValues+128 (VPSHUFB), so the activations of each 128 columns come as [0:16] [32:48] [64:80] [96:112] [16:32] [48:64] [80:96] [112:128]; VPDPBUSD per lane, times the sub-block scales as dwords (VPMULLD), S - 128*sum(sc*sx), the sums one int16 per 32 columns"},
}

// ggmlSuperA8 emits Ggml<t>A8Avx512 for a 256-element super-block type:
// per row and super-block, the codes unpacked to unsigned bytes (four ZMM:
// two per 128-column half, "parts"), the sub-block scales widened to
// int16 and spread over the word lanes of each part (VPERMW); then per
// vector VPMADDUBSW (codes x activations, int16 pairs) and VPMADDWD /
// VPDPWSSD (times the scales, int32), both halves reduced to S0, S1 and
// the sums term (mins x activation sums, or the recentring sum sc*sx) to
// M0, M1 together, and the float steps of the definition in scalar SSE,
// one rounding each, in the definition's order.
func ggmlSuperA8(c ggmlSuper) {
	t := c.t
	name := "Ggml" + t + "A8Avx512"
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s computes the exact A8 product of layout/ggml %s rows with AVX-512 VNNI and BW: %s.", name, ggmlTypeName(t), c.doc))
	sumBytes := 2 * 256 / c.sub

	kc, idxTab := ggmlConstTables(c, true)
	idx := ggmlScaleIdx(c, idxTab)

	wp, ak, sk, xk, nk := ggmlRowStart(name)
	{
		Label(name + "_sb")
		{
			q := ggmlSuperCodes(c, wp, kc)
			scw, sumw := ggmlSuperScales(c, Mem{Base: wp})
			var sc [2][2]VecVirtual
			for h := 0; h < 2; h++ {
				for p := 0; p < 2; p++ {
					if c.dword && p == 1 {
						sc[h][1] = sc[h][0]
						continue
					}
					sc[h][p] = ZMM()
					if c.dword {
						VPERMD(scw.AsZ(), idx[h][p], sc[h][p])
					} else {
						VPERMW(scw.AsZ(), idx[h][p], sc[h][p])
					}
				}
			}
			// d (and dmin) as float32: [d, d, dmin, dmin], or [d, d, d, d]
			dd := XMM()
			switch t {
			case "Q4K", "Q5K":
				VCVTPH2PS(Mem{Base: wp}, dd)
				VPERMILPS(U8(0x50), dd, dd)
			case "Q2K":
				h2 := XMM()
				VPBROADCASTD(Mem{Base: wp, Disp: 80}, h2)
				VCVTPH2PS(h2, dd)
				VPERMILPS(U8(0x50), dd, dd)
			default:
				off := map[string]int{"Q3K": 108, "Q6K": 208, "IQ4XS": 0}[t]
				h16 := XMM()
				VPBROADCASTW(Mem{Base: wp, Disp: off}, h16)
				VCVTPH2PS(h16, dd)
			}

			// every vector
			av, sv, xv := GP64(), GP64(), GP64()
			MOVQ(ak, av)
			MOVQ(sk, sv)
			MOVQ(xk, xv)
			ov := param("out")
			vc := param("nvec")
			Label(name + "_vec")
			{
				var x4 [2]VecVirtual
				for h := 0; h < 2; h++ {
					acc := ZMM()
					if c.dword {
						VPXORD(acc, acc, acc)
						for p := 0; p < 2; p++ {
							VPDPBUSD(Mem{Base: av, Disp: 128*h + 64*p}, q[h][p], acc)
						}
						VPMULLD(sc[h][0], acc, acc)
					} else {
						for p := 0; p < 2; p++ {
							pr := ZMM()
							VPMADDUBSW(Mem{Base: av, Disp: 128*h + 64*p}, q[h][p], pr)
							if p == 0 {
								VPMADDWD(sc[h][p], pr, acc)
							} else {
								VPDPWSSD(sc[h][p], pr, acc)
							}
						}
					}
					y := YMM()
					VEXTRACTI64X4(U8(1), acc, y)
					VPADDD(y, acc.AsY(), y)
					x := XMM()
					VEXTRACTI32X4(U8(1), y, x)
					VPADDD(x, y.AsX(), x)
					x4[h] = x
				}
				hs := XMM()
				phaddd(x4[1], x4[0], hs) // [S0a, S0b, S1a, S1b]
				mm := XMM()              // the sums term in pairs: [M0a, M0b, M1a, M1b]
				if sumBytes == 32 {
					m8 := YMM()
					VPMADDWD(Mem{Base: sv}, sumw, m8)
					hi := XMM()
					VEXTRACTI32X4(U8(1), m8, hi)
					phaddd(hi, m8.AsX(), mm)
				} else {
					VPMADDWD(Mem{Base: sv}, sumw, mm)
				}
				g := XMM()
				phaddd(mm, hs, g) // [S0, S1, M0, M1]
				if c.shift > 0 {  // S = S - 2^shift * C
					cc := XMM()
					VPSHUFD(U8(0xee), g, cc)
					VPSLLD(U8(c.shift), cc, cc)
					VPSUBD(cc, g, g)
				}
				f := XMM()
				VCVTDQ2PS(g, f)
				coef := XMM()
				VMOVDDUP(Mem{Base: xv}, coef) // [xs0, xs1, xs0, xs1]
				VMULPS(dd, coef, coef)
				VMULPS(coef, f, f) // [t0, t1, u0, u1]
				acc := XMM()
				VMOVSS(Mem{Base: ov}, acc)
				if !c.mins {
					VADDSS(f, acc, acc)
					t1 := XMM()
					VMOVSHDUP(f, t1)
					VADDSS(t1, acc, acc)
				} else {
					u := XMM()
					VMOVHLPS(f, f, u)
					VADDSS(f, acc, acc)
					VSUBSS(u, acc, acc)
					t1 := XMM()
					VMOVSHDUP(f, t1)
					VADDSS(t1, acc, acc)
					VMOVSHDUP(u, u)
					VSUBSS(u, acc, acc)
				}
				VMOVSS(acc, Mem{Base: ov})
				nextVec(name+"_vec", av, sv, xv, ov, vc)
			}
			ADDQ(U32(c.bytes), wp)
			ADDQ(U32(256), ak)
			ADDQ(U32(sumBytes), sk)
			ADDQ(U32(8), xk)
			DECQ(nk)
			JNZ(LabelRef(name + "_sb"))
		}
		nextRow(name)
	}
	VZEROUPPER()
	RET()
}

// ggmlTypeName spells a kernel name part as ggml does (Q4K: Q4_K).
func ggmlTypeName(t string) string {
	if t == "IQ4XS" {
		return "IQ4_XS"
	}
	return t[:2] + "_K"
}

// ggmlConsts are the constants the code unpacking uses: registers, or
// read-only memory (bit, cnt) where registers are short.
type ggmlConsts struct {
	nib, three, kv VecVirtual
	bit            [2][2]Op // Q5_K, Q3_K, Q6_K: GF2P8AFFINEQB matrices moving each (half, part)'s high bits into place
	cnt            [2]Op    // Q2_K, Q3_K: the 2-bit field's shift of each part per word
}

// ggmlSuperCodes unpacks the super-block's codes at wp into unsigned
// bytes, q[h][p] for half h and part p (see each type's doc).
func ggmlSuperCodes(c ggmlSuper, wp GPVirtual, k ggmlConsts) (q [2][2]VecVirtual) {
	for h := 0; h < 2; h++ {
		q[h] = ggmlHalfCodes(c, wp, h, k)
	}
	return q
}

// ggmlHalfCodes unpacks half h of the super-block at wp.
func ggmlHalfCodes(c ggmlSuper, wp GPVirtual, h int, k ggmlConsts) (q [2]VecVirtual) {
	return ggmlHalfCodesInto(c, Mem{Base: wp}, h, k, [2]VecVirtual{ZMM(), ZMM()})
}

// ggmlHalfCodesInto is ggmlHalfCodes into the registers q.
func ggmlHalfCodesInto(c ggmlSuper, base Mem, h int, k ggmlConsts, q [2]VecVirtual) [2]VecVirtual {
	// Q5_K, Q3_K and Q6_K: the high bits of each code (Q5_K's as 16,
	// Q3_K's as 4, Q6_K's two as 16 and 32) first, picked from the
	// broadcast qh/hmask bytes by one GF2P8AFFINEQB per part (k.bit: per
	// qword, the matrix that moves that lane's bits there); the
	// VPTERNLOGD that masks the low bits merges them in. On one Zen 4
	// core, a VPTESTMB mask and a masked VPADDB per part (Q5_K, Q3_K;
	// VPTESTMB competes with both the multiplies and the shuffles there)
	// took 1.05-1.1x the time, and a shift, mask, shift and OR per part
	// for Q6_K's two bits 1.2x.
	var hbit [2]VecVirtual
	switch c.t {
	case "Q5K", "Q3K", "Q6K":
		off := map[string]int{"Q5K": 16, "Q3K": 0, "Q6K": 128 + 32*h}[c.t]
		hb := ZMM()
		VBROADCASTI64X4(base.Offset(off), hb)
		for p := range hbit {
			hbit[p] = q[p]
			if c.t == "Q3K" {
				hbit[p] = ZMM()
			}
			VGF2P8AFFINEQB(U8(0), k.bit[h][p], hb, hbit[p])
		}
	}
	const (
		dstOrAnd = 0xf8 // dst | (src2 & src3)
		andOrSrc = 0xea // (dst & src2) | src3
	)
	switch c.t {
	case "Q4K", "Q5K", "Q6K", "IQ4XS":
		off := map[string]int{"Q4K": 16, "Q5K": 48, "Q6K": 0, "IQ4XS": 8}[c.t] + 64*h
		lo, hi := q[0], q[1]
		if c.t == "Q5K" || c.t == "Q6K" { // lo, hi hold the high bits
			t := ZMM()
			VPSRLW(U8(4), base.Offset(off), t)
			VPTERNLOGD(U8(dstOrAnd), base.Offset(off), k.nib, lo)
			VPTERNLOGD(U8(dstOrAnd), t, k.nib, hi)
			break
		}
		VPSRLW(U8(4), base.Offset(off), hi)
		VPANDD(base.Offset(off), k.nib, lo)
		VPANDD(hi, k.nib, hi)
	case "Q2K", "Q3K":
		off := map[string]int{"Q2K": 16, "Q3K": 32}[c.t] + 32*h
		qs := ZMM()
		VBROADCASTI64X4(base.Offset(off), qs)
		for p := 0; p < 2; p++ {
			VPSRLVW(k.cnt[p], qs, q[p])
			if c.t == "Q3K" {
				VPTERNLOGD(U8(andOrSrc), hbit[p], k.three, q[p])
			} else {
				VPANDD(q[p], k.three, q[p])
			}
		}
	}
	switch c.t {
	case "IQ4XS": // KValues + 128
		for _, v := range q {
			VPSHUFB(v, k.kv, v)
		}
	}
	return q
}

// ggmlScaleIdx loads ggmlConstTables' scale-spreading index vectors into
// registers, per half and part (IQ4_XS's dword scales: part 1 shares
// part 0's).
func ggmlScaleIdx(c ggmlSuper, idxTab [2][2]Mem) (idx [2][2]VecVirtual) {
	for h := 0; h < 2; h++ {
		for p := 0; p < 2; p++ {
			if c.dword && p == 1 {
				idx[h][1] = idx[h][0]
				continue
			}
			idx[h][p] = ZMM()
			VMOVDQU64(idxTab[h][p], idx[h][p])
		}
	}
	return idx
}

// ggmlConstTables returns the type's constants: registers (nib, three,
// kv) and, with inRegs, the high-bit matrices and shift tables in
// registers too, else as memory operands; idx are the VPERMW/VPERMD index tables.
func ggmlConstTables(c ggmlSuper, inRegs bool) (k ggmlConsts, idx [2][2]Mem) {
	t := c.t
	av512 := fvec{avx512: true}
	for h := 0; h < 2; h++ {
		for p := 0; p < 2; p++ {
			h, p := h, p
			switch {
			case c.dword: // dword i of half h: sub-block 4h + i/4
				idx[h][p] = rodata(fmt.Sprintf("ggmlDIdx%d", h), 16, 4, func(i int) uint64 { return uint64(4*h + i/4) })
			case c.sub == 16: // word w covers columns 2w, 2w+1 of the part: sub-block 8h + 4p + w/8
				idx[h][p] = rodata(fmt.Sprintf("ggmlWIdx16_%d%d", h, p), 32, 2, func(w int) uint64 { return uint64(8*h + 4*p + w/8) })
			default: // words 0..15: sub-block 4h+p, 16..31: 4h+p+2
				idx[h][p] = rodata(fmt.Sprintf("ggmlWIdx32_%d%d", h, p), 32, 2, func(w int) uint64 { return uint64(4*h + p + 2*(w/16)) })
			}
		}
	}
	k.nib = nibbleMask(ZMM())
	switch t {
	case "Q5K", "Q3K", "Q6K":
		for h := 0; h < 2; h++ {
			for p := 0; p < 2; p++ {
				h, p := h, p
				// GF2P8AFFINEQB matrices, one per qword: output bit o is
				// input bit b (matrix byte 7-o selects the input bits of
				// output bit o), b the bit of that qword's codes: Q5_K's
				// to bit 4, Q3_K's to bit 2, Q6_K's b and b+1 to bits 4
				// and 5 (the same in both halves)
				name := fmt.Sprintf("ggml%sHighBits%d%d", t, h, p)
				if t == "Q6K" {
					name = fmt.Sprintf("ggmlQ6KHighBits%d", p)
				}
				tab := rodata(name, 8, 8, func(l int) uint64 {
					switch t {
					case "Q5K":
						return 1 << (4*h + p + 2*(l/4)) << (8 * (7 - 4))
					case "Q3K":
						return 1 << (4*h + 2*p + l/4) << (8 * (7 - 2))
					}
					b := 4*p + 2*(l/4)
					return 1<<b<<(8*(7-4)) | 1<<(b+1)<<(8*(7-5))
				})
				k.bit[h][p] = tab
				if inRegs {
					r := ZMM()
					VMOVDQU64(tab, r)
					k.bit[h][p] = r
				}
			}
		}
	}
	switch t {
	case "Q2K", "Q3K":
		for p := 0; p < 2; p++ {
			p := p
			tab := rodata(fmt.Sprintf("ggmlShift%d", p), 32, 2, func(w int) uint64 { return uint64(4*p + 2*(w/16)) })
			k.cnt[p] = tab
			if inRegs {
				r := ZMM()
				VMOVDQU64(tab, r)
				k.cnt[p] = r
			}
		}
		k.three = av512.broadcast(0x03030303)
	case "IQ4XS":
		tab := ggmlKValues128()
		k.kv = ZMM()
		VBROADCASTI32X4(tab, k.kv)
	}
	return k, idx
}

// ggmlSuperScales returns the block's sub-block scales (int16 words, or
// int32 dwords for IQ4_XS) for VPERMW/VPERMD, and the words the sums term
// multiplies the activation sums by (the mins, or the scales).
func ggmlSuperScales(c ggmlSuper, base Mem) (scw, sumw VecVirtual) {
	switch c.t {
	case "Q4K", "Q5K":
		scw, sumw = q4kScaleWords(base, true)
	case "Q2K": // low nibbles the scales, high nibbles the mins
		x, hx := XMM(), XMM()
		VMOVDQU64(base, x)
		VPSRLW(U8(4), x, hx)
		VPANDD(ggmlNibMem(), x, x)
		VPANDD(ggmlNibMem(), hx, hx)
		scw, sumw = YMM(), YMM()
		VPMOVZXBW(x, scw)
		VPMOVZXBW(hx, sumw)
	case "Q3K":
		// 16 signed 6-bit scales: low 4 bits from bytes 96..103 (j%8,
		// nibble j/8), high 2 bits from bytes 104..107 (j%4, bits 2*(j/4))
		lo64, hi64 := q3kScaleBytes(base)
		x, xh := XMM(), XMM()
		VMOVQ(lo64, x)
		VMOVQ(hi64, xh)
		VPUNPCKLQDQ(xh, x, x)
		m := XMM()
		t := GP32()
		MOVL(U32(0x20202020), t)
		VPBROADCASTD(t, m)
		VPSUBB(m, x, x)
		scw = YMM()
		VPMOVSXBW(x, scw)
		sumw = scw
	case "Q6K":
		scw = YMM()
		VPMOVSXBW(base.Offset(192), scw)
		sumw = scw
	case "IQ4XS":
		// ls_j = (sl[j/2] >> 4*(j%2) & 15) | ((sh >> 2j) & 3) << 4, minus 32
		lo := iq4xsScaleBytes(base)
		x := XMM()
		VMOVQ(lo, x)
		m := XMM()
		t := GP32()
		MOVL(U32(0x20202020), t)
		VPBROADCASTD(t, m)
		VPSUBB(m, x, x)
		scw = YMM()
		VPMOVSXBD(x, scw)
		sumw = XMM()
		VPMOVSXBW(x, sumw)
	}
	return scw, sumw
}

// ggmlNibMem is the low-nibble mask as a memory operand for the scale
// unpacking (built in a register it cost three instructions per row and
// super-block). 64 bytes, though its users read 16: data symbols of 64
// bytes or more keep the 64-byte tables after them at their alignment.
func ggmlNibMem() Mem {
	return rodata("ggmlNib64", 16, 4, func(int) uint64 { return 0x0f0f0f0f })
}

// phaddd is VPHADDD(b, a, dst), dst = [a0+a1, a2+a3, b0+b1, b2+b3], in
// EVEX instructions (VPHADDD has no EVEX form, and avo may allocate
// X16..X31).
func phaddd(b, a, dst Op) {
	t, u := XMM(), XMM()
	VSHUFPS(U8(0x88), b, a, t) // [a0, a2, b0, b2]
	VSHUFPS(U8(0xdd), b, a, u) // [a1, a3, b1, b3]
	VPADDD(u, t, dst)
}

// ggmlPrefetch is how far ahead in a row the 32-element kernels prefetch.
const ggmlPrefetch = 1024

// ggmlSmall describes a 32-element block type for ggmlBlockA8.
type ggmlSmall struct {
	t     string // name part: Q4_0 -> Q40, ...
	name  string // ggml's name
	bytes int
	qs    int  // offset of the codes
	qh    int  // Q5_x: offset of the 32 high bits (0: none)
	m     bool // Q4_1, Q5_1: an offset m (M term added)
	shift int  // codes stored as q + 2^shift: S -= 2^shift * sum(x) (0: none)
	nib   bool // 4-bit codes in 16 bytes (else 32 int8 codes)
	kv    bool // IQ4_NL: codes index KValues
}

var ggmlSmalls = []ggmlSmall{
	{t: "Q40", name: "Q4_0", bytes: 18, qs: 2, shift: 3, nib: true},
	{t: "Q41", name: "Q4_1", bytes: 20, qs: 4, m: true, nib: true},
	{t: "Q50", name: "Q5_0", bytes: 22, qs: 6, qh: 2, shift: 4, nib: true},
	{t: "Q51", name: "Q5_1", bytes: 24, qs: 8, qh: 4, m: true, nib: true},
	{t: "Q80", name: "Q8_0", bytes: 34, qs: 2, shift: 7},
	{t: "IQ4NL", name: "IQ4_NL", bytes: 18, qs: 2, shift: 7, nib: true, kv: true},
}

// ggmlBlockA8 emits Ggml<t>A8Avx512 for a 32-element block type: per row
// and group of four blocks (128 columns, one activation group), the codes
// of two blocks per ZMM as unsigned bytes in column order (nibbles: low
// then high; Q5_x: the qh bits as a byte mask adding 16; Q8_0 and IQ4_NL:
// plus 128), then per vector two VPDPBUSD, the four block sums reduced
// together (VSHUFI64X2, VPSHUFD), the codes' offset times the block's
// activation sum subtracted, and the definition's float steps in scalar
// SSE in order (d*xs times S, then for Q4_1/Q5_1 m*xs times the sum).
// nsb counts groups of four blocks; the sums are one int16 per block.
func ggmlBlockA8(c ggmlSmall) {
	name := "Ggml" + c.t + "A8Avx512"
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s computes the exact A8 product of layout/ggml %s rows with AVX-512 VNNI and BW: groups of four blocks (nsb counts groups), activations in column order, the sums one int16 per 32 columns.", name, c.name))
	nib, kv, flip, sixteen := ggmlSmallConsts(c)
	lane0 := ZMM() // dword 0 of each 128-bit lane
	VMOVDQU64(rodata("ggmlLane0", 16, 4, func(i int) uint64 { return uint64(4 * (i % 4)) }), lane0)

	ggmlBlockRows(name, c, func(wp GPVirtual) func(av, sv, xv GPVirtual) (f, u VecVirtual) {
		PREFETCHT0(Mem{Base: wp, Disp: ggmlPrefetch})
		PREFETCHT0(Mem{Base: wp, Disp: ggmlPrefetch + 64})
		z := ggmlBlockCodes(c, wp, nib, kv, flip, sixteen)
		// d (and m) of the four blocks as float32
		dh := XMM()
		VPXORD(dh, dh, dh)
		mh := XMM()
		if c.m {
			VPXORD(mh, mh, mh)
		}
		for b := 0; b < 4; b++ {
			VPINSRW(U8(b), Mem{Base: wp, Disp: b * c.bytes}, dh, dh)
			if c.m {
				VPINSRW(U8(b), Mem{Base: wp, Disp: b*c.bytes + 2}, mh, mh)
			}
		}
		d4 := XMM()
		VCVTPH2PS(dh, d4)
		m4 := XMM()
		if c.m {
			VCVTPH2PS(mh, m4)
		}
		return func(av, sv, xv GPVirtual) (f, u VecVirtual) {
			s4 := ggmlBlockDots(z, av, lane0)
			sx := XMM()
			VPMOVSXWD(Mem{Base: sv}, sx)
			if c.shift > 0 {
				off := XMM()
				VPSLLD(U8(c.shift), sx, off)
				VPSUBD(off, s4.AsX(), s4.AsX())
			}
			f = XMM()
			VCVTDQ2PS(s4.AsX(), f)
			xb := XMM()
			VBROADCASTSS(Mem{Base: xv}, xb)
			coef := XMM()
			VMULPS(d4, xb, coef)
			VMULPS(coef, f, f) // [t0 t1 t2 t3]
			if c.m {
				fm := XMM()
				VCVTDQ2PS(sx, fm)
				cm := XMM()
				VMULPS(m4, xb, cm)
				VMULPS(cm, fm, fm) // [u0 u1 u2 u3]
				u = fm
			}
			return f, u
		}
	})
}

// ggmlBlockRows emits the row, group and vector loops of the one-row
// kernels of the 32-element block types (ggmlBlockA8, ggmlBlockA8AVX2):
// per row the outputs out[v*ostride] zeroed; per group of four blocks
// (nsb counts groups) group(wp) with wp at the group's bytes, which emits
// what stays live across the vectors (codes, scales) and returns vec;
// per vector vec(av, sp, xv) with the vector's activations, block sums
// and scale, which returns the four block terms f and, for the types with
// mins, the four min terms u (else nil). The terms are added to the
// vector's output in block order, each block's f then u: the
// definition's float steps.
func ggmlBlockRows(name string, c ggmlSmall, group func(wp GPVirtual) func(av, sp, xv GPVirtual) (f, u VecVirtual)) {
	wp, ak, sk, xk, nk := ggmlRowStart(name)
	{
		Label(name + "_grp")
		{
			vec := group(wp)
			av, sp, xv := GP64(), GP64(), GP64()
			MOVQ(ak, av)
			MOVQ(sk, sp)
			MOVQ(xk, xv)
			ov, vc := param("out"), param("nvec")
			Label(name + "_vec")
			{
				f, u := vec(av, sp, xv)
				a := XMM()
				VMOVSS(Mem{Base: ov}, a)
				for b := 0; b < 4; b++ {
					for _, src := range []VecVirtual{f, u} {
						if src == nil {
							continue
						}
						e := src
						if b > 0 {
							e = XMM()
							VPERMILPS(U8(b), src, e)
						}
						VADDSS(e, a, a)
					}
				}
				VMOVSS(a, Mem{Base: ov})
				nextVec(name+"_vec", av, sp, xv, ov, vc)
			}
			ADDQ(U32(4*c.bytes), wp)
			ADDQ(U32(128), ak)
			ADDQ(U32(8), sk)
			ADDQ(U32(4), xk)
			DECQ(nk)
			JNZ(LabelRef(name + "_grp"))
		}
		nextRow(name)
	}
	VZEROUPPER()
	RET()
}

// ggmlSmallConsts loads the constants of the AVX-512 kernels of a
// 32-element block type: the nibble mask, IQ4_NL's KValues plus 128
// (nil otherwise), Q8_0's byte flip (its int8 codes plus 128; nil for
// the nibble types) and Q5_x's high-bit value 16 (nil otherwise).
func ggmlSmallConsts(c ggmlSmall) (nib, kv, flip, sixteen VecVirtual) {
	av512 := fvec{avx512: true}
	nib = nibbleMask(YMM())
	if c.kv {
		tab := ggmlKValues128()
		kv = YMM()
		VBROADCASTI32X4(tab, kv)
	}
	if !c.nib {
		flip = av512.broadcast(0x80808080)
	}
	if c.qh != 0 {
		sixteen = av512.broadcast(0x10101010)
	}
	return nib, kv, flip, sixteen
}

// nextVec emits the end of a GGML row kernel's vector loop: the
// activations (av), their sums (sp) and scales (xv) and the output (ov)
// moved to the next vector, and back to label while vectors (vc)
// remain.
func nextVec(label string, av, sp, xv, ov, vc GPVirtual) {
	ADDQ(param("astride"), av)
	ADDQ(param("sstride"), sp)
	ADDQ(param("xstride"), xv)
	ADDQ(param("ostride"), ov)
	DECQ(vc)
	JNZ(LabelRef(label))
}

// nextRow emits the end of a GGML row kernel's row loop: the weights
// moved on by stride, the output by one float32, and back to name_row
// while rows remain.
func nextRow(name string) {
	bump("w", param("stride"))
	bump("out", U32(4))
	r := param("rows")
	DECQ(r)
	Store(r, Param("rows"))
	JNZ(LabelRef(name + "_row"))
}

// ggmlRowStart emits the start of a GGML row kernel's row loop (label
// name_row, the outputs zeroed) and loads the weights, activations,
// their sums and scales and the count of units of a row.
func ggmlRowStart(name string) (wp, ak, sk, xk, nk GPVirtual) {
	Label(name + "_row")
	zeroOutputs(name)
	wp = param("w")
	ak, sk, xk = param("act"), param("sums"), param("xs")
	nk = param("nsb")
	return wp, ak, sk, xk, nk
}

// zeroOutputs emits the loop that zeroes out[v*ostride] for the nvec
// vectors of a row (the GGML row kernels' accumulators).
func zeroOutputs(name string) {
	op, n, os := param("out"), param("nvec"), param("ostride")
	Label(name + "_zero")
	MOVL(U32(0), Mem{Base: op})
	ADDQ(os, op)
	DECQ(n)
	JNZ(LabelRef(name + "_zero"))
}

// ggmlSigM16 is the signature of the AVX2 GGML batch kernels
// (ggmlSuperA8M16AVX2, which describes their layout): as ggmlSig, but
// with the activations of the batch laid out for the kernel (astride is
// unused), sums and xs in the kernels' lanes (cpu.ggmlM16Lanes), and row
// r's results added to out[16r .. 16r+15] (zeroed by the caller before
// the first super-block).
const ggmlSigM16 = "func(w *byte, stride int, rows int, nsb int, act *int8, astride int, sums *int32, xs *float32, nvec int, out *float32)"

// ggmlPairLevel is one level of the batch kernels' pair tree (pairLevel,
// adding dwords) on vector registers.
func ggmlPairLevel(rs []VecVirtual, qwords bool, reg func() VecVirtual) []VecVirtual {
	in := make([]Register, len(rs))
	for i, r := range rs {
		in[i] = r
	}
	var out []VecVirtual
	for _, r := range pairLevel(in, qwords, func(a, b, c Op) { VPADDD(a, b, c) }, func() Register { return reg() }) {
		out = append(out, r.(VecVirtual))
	}
	return out
}

// ggmlM16Prefetch emits the batch kernels' prefetches for the row at wp.
// The caller runs the rows over one super-block at a time
// (cpu.ggmlColBlock), which the hardware prefetchers do not follow:
// prefetch this super-block four rows on (for this call) and the next one
// of this row (for the next call), every line each touches.
func ggmlM16Prefetch(c ggmlSuper, wp, stride GPVirtual) {
	nx := GP64()
	MOVQ(stride, nx)
	SHLQ(U8(2), nx)
	ADDQ(wp, nx)
	for _, m := range []Mem{{Base: nx}, {Base: wp, Disp: c.bytes}} {
		for o := 0; o < c.bytes; o += 64 {
			PREFETCHT0(m.Offset(o))
		}
		PREFETCHT0(m.Offset(c.bytes - 1))
	}
}

// ggmlBlockCodes unpacks four 32-element blocks at wp into unsigned bytes
// in column order, blocks 2i and 2i+1 in z[i] (see ggmlBlockA8).
func ggmlBlockCodes(c ggmlSmall, wp GPVirtual, nib, kv, flip, sixteen VecVirtual) (z [2]VecVirtual) {
	return ggmlBlockCodesAt(c, Mem{Base: wp}, nib, kv, flip, sixteen)
}

// ggmlVBMI holds the constants of the VBMI code unpacking of the 4-bit
// block types (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) in the AVX-512 four-row
// kernels, which read the activations split by nibble (per 128 columns
// the four blocks' columns 0..15, then 16..31: cpu.ggmlSplitOrder).
type ggmlVBMI struct {
	perm, gf, nib, kv, sixteen, dm VecVirtual
	blk                            VecVirtual    // dword 4b+i holds b: block b's value to the four rows' lanes
	tail                           Register      // k mask: the second load's bytes
	rowK                           [4]Register   // k masks: row i's d (and m) bytes
	dmBoth                         bool          // dm picks from both loads (Q5_x)
	qhPerm                         VecVirtual    // Q5_x: block b's qh into qwords 2b, 2b+1
	qhBits                         [2]VecVirtual // Q5_x: VPMULTISHIFTQB's controls of the low and high halves
}

// ggmlSplit reports whether a 32-element type's codes are a block's 16
// bytes of nibbles alone (Q4_0, Q4_1, IQ4_NL): the AVX2 and AVX-VNNI
// four-row kernels pair their rows (ggmlR4PairsAVX2).
func ggmlSplit(c ggmlSmall) bool { return c.nib && c.qh == 0 }

// newGGMLSplit loads the constants of the split kernels (ggmlVBMI):
// perm gathers a group's 64 code bytes (block b's at bytes 16b..16b+15)
// from its two loads, the first 64 bytes and the last two blocks (at
// 2*bytes); dm picks block b's d (and m) out of the loads (the first
// holds all four but Q5_x's last) into byte 8b+2i (m: 32+8b+2i) of row
// i, rowK[i] selecting row i's bytes; gf shifts a byte right by 4; for
// Q5_x, qhPerm and qhBits spread the high bits (groupSplit).
func newGGMLSplit(c ggmlSmall) *ggmlVBMI {
	v := &ggmlVBMI{perm: ZMM(), gf: ZMM(), nib: nibbleMask(ZMM()), dm: ZMM()}
	// table holds, per byte p, the index of group offset off(p) in the
	// two loads: offsets from 64 on come from the second load, at 2*bytes
	table := func(name string, off func(p int) int) Mem {
		return rodata(name+c.t, 64, 1, func(p int) uint64 {
			if src := off(p); src < 64 {
				return uint64(src)
			} else {
				return uint64(64 + src - 2*c.bytes)
			}
		})
	}
	VMOVDQU64(table("ggmlSplitPerm", func(p int) int { return (p/16)*c.bytes + c.qs + p%16 }), v.perm)
	dmOff := func(p int) int { return ((p/8)%4)*c.bytes + p%2 + 2*(p/32) }
	VMOVDQU64(table("ggmlSplitDM", dmOff), v.dm)
	for p := 0; p < 64; p++ { // Q5_x: the last block's d (and m) lie past the first load
		v.dmBoth = v.dmBoth || dmOff(p) >= 64
	}
	v.blk = ZMM()
	VMOVDQU64(rodata("ggmlLaneBlock", 16, 4, func(i int) uint64 { return uint64(i / 4) }), v.blk)
	t := GP64()
	MOVQ(U64(0x1020408000000000), t)
	VPBROADCASTQ(t, v.gf)
	v.tail = K()
	MOVQ(U64(1<<(2*c.bytes)-1), t)
	KMOVQ(t, v.tail)
	for i := range v.rowK {
		bits := uint64(0x03030303) << (2 * i)
		if c.m {
			bits |= bits << 32
		}
		v.rowK[i] = K()
		MOVQ(U64(bits), t)
		KMOVQ(t, v.rowK[i])
	}
	if c.kv {
		v.kv = ZMM()
		VBROADCASTI32X4(ggmlKValues128(), v.kv)
	}
	if c.qh != 0 {
		v.sixteen = fvec{avx512: true}.broadcast(0x10101010)
		v.qhPerm = ZMM()
		VMOVDQU64(table("ggmlSplitQh", func(p int) int { return (p/16)*c.bytes + c.qh + p%4 }), v.qhPerm)
		for h := range v.qhBits { // byte p of half h: bits from 16h + p%16 - 4 of its block's qh, so bit 4 is bit 16h + p%16
			v.qhBits[h] = ZMM()
			VMOVDQU64(rodata(fmt.Sprintf("ggmlSplitQhShift%d", h), 64, 1, func(p int) uint64 { return uint64((16*h + p%16 - 4) & 63) }), v.qhBits[h])
		}
	}
	return v
}

// ggmlBlockCodesAt is ggmlBlockCodes for the row at base.
func ggmlBlockCodesAt(c ggmlSmall, base Mem, nib, kv, flip, sixteen VecVirtual) (z [2]VecVirtual) {
	for i := 0; i < 2; i++ {
		var half [2]VecVirtual
		for j := 0; j < 2; j++ {
			off := (2*i+j)*c.bytes + c.qs
			y := YMM()
			if c.nib {
				x, hx := XMM(), XMM()
				VMOVDQU64(base.Offset(off), x)
				VPSRLW(U8(4), x, hx)
				VINSERTI32X4(U8(1), hx, x.AsY(), y)
				VPANDD(y, nib, y)
				if c.kv {
					VPSHUFB(y, kv, y)
				}
			} else {
				VMOVDQU64(base.Offset(off), y)
			}
			if c.qh != 0 {
				h := GP32()
				MOVL(base.Offset((2*i+j)*c.bytes+c.qh), h)
				k := K()
				KMOVD(h, k)
				VPADDB(sixteen.AsY(), y, k, y)
			}
			half[j] = y
		}
		z[i] = ZMM()
		VINSERTI64X4(U8(1), half[1], half[0].AsZ(), z[i])
		if !c.nib {
			VPXORD(flip, z[i], z[i])
		}
	}
	return z
}

// ggmlSigF32 is the signature of the GGML float kernels: rows rows from w
// (stride bytes apart) of nsb units (super-blocks, or groups of four
// 32-element blocks) each; the float32 activations of unit k of vector v
// at x + (k*nvec + v)*U*4 (U = 256 or 128 columns: the vectors of a unit
// side by side); tmp is 512 bytes and accs nvec*64 bytes of scratch; row
// r of vector v goes to out[v*ostride + r] (byte stride).
const ggmlSigF32 = "func(w *byte, stride int, rows int, nsb int, x *float32, nvec int, tmp *byte, accs *float32, out *float32, ostride int)"

// ggmlChunk is one 16-code lane of a unit's unpacked codes (in register
// order): the column it starts at and its sub-block (block).
type ggmlChunk struct{ col, j int }

// ggmlSuperChunks returns the lanes of a super-block type's four code
// registers (half h, part p, lane l: index 8h + 4p + l).
func ggmlSuperChunks(c ggmlSuper) []ggmlChunk {
	var out []ggmlChunk
	for h := 0; h < 2; h++ {
		for p := 0; p < 2; p++ {
			for l := 0; l < 4; l++ {
				var col int
				switch c.t {
				case "Q4K", "Q5K":
					col = 128*h + 64*(l/2) + 32*p + 16*(l%2)
				case "IQ4XS":
					col = 128*h + 32*l + 16*p
				default: // Q2K, Q3K, Q6K: part p holds columns 64p..64p+63 of the half
					col = 128*h + 64*p + 16*l
				}
				out = append(out, ggmlChunk{col, col / c.sub})
			}
		}
	}
	return out
}

// ggmlFloatUnit emits the float multiply of one unit whose codes (unsigned
// bytes, register order) are in z and whose per-sub-block scales D and
// offsets E (w = D*u + E) are at tmp+256 and tmp+384: it converts each
// 16-code lane to float32 weights in a register, then for every vector
// adds weights times activations into four partial sums and those into
// the vector's accumulator (accs + 64v).
func ggmlFloatUnit(name string, z []VecVirtual, chunks []ggmlChunk, unitCols int, tp, xk GPVirtual, w []VecVirtual) {
	for i, ch := range chunks {
		zr := z[i/4]
		if i%4 == 0 {
			VPMOVZXBD(zr.AsX(), w[i])
		} else {
			lane := XMM()
			VEXTRACTI32X4(U8(i%4), zr, lane)
			VPMOVZXBD(lane, w[i])
		}
		dj := ZMM()
		VBROADCASTSS(Mem{Base: tp, Disp: 256 + 4*ch.j}, dj)
		VCVTDQ2PS(w[i], w[i])
		VFMADD213PS_BCST(Mem{Base: tp, Disp: 384 + 4*ch.j}, dj, w[i])
	}
	xv := GP64()
	MOVQ(xk, xv)
	ap := param("accs")
	vc := param("nvec")
	Label(name)
	{
		p := []VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}
		for i, ch := range chunks {
			if i < 4 {
				VMULPS(Mem{Base: xv, Disp: 4 * ch.col}, w[i], p[i])
			} else {
				VFMADD231PS(Mem{Base: xv, Disp: 4 * ch.col}, w[i], p[i%4])
			}
		}
		VADDPS(p[1], p[0], p[0])
		VADDPS(p[3], p[2], p[2])
		VADDPS(p[2], p[0], p[0])
		VADDPS(Mem{Base: ap}, p[0], p[0])
		VMOVUPS(p[0], Mem{Base: ap})
		ADDQ(U32(4*unitCols), xv)
		ADDQ(U32(64), ap)
		DECQ(vc)
		JNZ(LabelRef(name))
	}
}

// ggmlF32Rows emits the row loop of a float kernel around unit, which
// unpacks and multiplies one unit at wp (tp: scratch, xk: the unit's
// activations).
func ggmlF32Rows(name string, unitBytes, unitCols int, unit func(wp, tp, xk GPVirtual)) {
	Label(name + "_row")
	{
		{ // zero the accumulators
			ap, n := param("accs"), param("nvec")
			z := ZMM()
			VPXORD(z, z, z)
			Label(name + "_zero")
			VMOVUPS(z, Mem{Base: ap})
			ADDQ(U32(64), ap)
			DECQ(n)
			JNZ(LabelRef(name + "_zero"))
		}
		wp, xk, nk := param("w"), param("x"), param("nsb")
		Label(name + "_unit")
		{
			tp := param("tmp")
			unit(wp, tp, xk)
			ADDQ(U32(unitBytes), wp)
			n := param("nvec")
			SHLQ(U8(log2(4*unitCols)), n)
			ADDQ(n, xk)
			DECQ(nk)
			JNZ(LabelRef(name + "_unit"))
		}
		{ // reduce each vector's accumulator into out[v*ostride]
			ap, op, n := param("accs"), param("out"), param("nvec")
			Label(name + "_out")
			a := ZMM()
			VMOVUPS(Mem{Base: ap}, a)
			y := YMM()
			VEXTRACTF64X4(U8(1), a, y)
			VADDPS(y, a.AsY(), y)
			x := XMM()
			VEXTRACTF32X4(U8(1), y, x)
			VADDPS(x, y.AsX(), x)
			t := XMM()
			VMOVHLPS(x, x, t)
			VADDPS(t, x, x)
			VMOVSHDUP(x, t)
			VADDSS(t, x, x)
			VMOVSS(x, Mem{Base: op})
			ADDQ(U32(64), ap)
			ADDQ(param("ostride"), op)
			DECQ(n)
			JNZ(LabelRef(name + "_out"))
		}
		nextRow(name)
	}
	VZEROUPPER()
	RET()
}

// ggmlSuperF32 emits Ggml<t>F32Avx512: float activations for a
// super-block type. Each super-block is dequantized to 16 registers of
// float32 weights, w = D_j*u + E_j from the unsigned codes u (D_j =
// d*sc_j; E_j = -dmin*m_j, or -c*D_j for the types stored as q + c), then
// multiplied by every vector's activations (FMA): within
// ggml.Tolerance of the reference, not bit-exact.
func ggmlSuperF32(c ggmlSuper) {
	t := c.t
	name := "Ggml" + t + "F32Avx512"
	TEXT(name, NOSPLIT, ggmlSigF32)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s multiplies layout/ggml %s rows by float32 activations with AVX-512: each super-block dequantized once to float32 weights in registers for every vector.", name, ggmlTypeName(t)))
	kc, _ := ggmlConstTables(c, false)
	chunks := ggmlSuperChunks(c)
	w := make([]VecVirtual, 16)
	for i := range w {
		w[i] = ZMM()
	}
	nsub := 256 / c.sub
	ggmlF32Rows(name, c.bytes, 256, func(wp, tp, xk GPVirtual) {
		q := ggmlSuperCodes(c, wp, kc)
		z := []VecVirtual{q[0][0], q[0][1], q[1][0], q[1][1]}
		// D and E of every sub-block at tp+256, tp+384
		scw, sumw := ggmlSuperScales(c, Mem{Base: wp})
		dz := ZMM()
		{
			off := map[string]int{"Q2K": 80, "Q3K": 108, "Q6K": 208}[t]
			h := YMM()
			VPBROADCASTW(Mem{Base: wp, Disp: off}, h)
			VCVTPH2PS(h, dz)
		}
		D, E := ZMM(), ZMM()
		switch {
		case c.dword: // 8 dwords
			VCVTDQ2PS(scw, D.AsY())
		case c.sub == 32: // 8 words
			VPMOVSXWD(scw, D.AsY())
			VCVTDQ2PS(D, D)
		default: // 16 words
			VPMOVSXWD(scw, D)
			VCVTDQ2PS(D, D)
		}
		VMULPS(dz, D, D)
		switch {
		case c.mins:
			off := 2
			if t == "Q2K" {
				off = 82
			}
			h := YMM()
			VPBROADCASTW(Mem{Base: wp, Disp: off}, h)
			dm := ZMM()
			VCVTPH2PS(h, dm)
			if c.sub == 32 {
				VPMOVSXWD(sumw, E.AsY())
			} else {
				VPMOVSXWD(sumw, E)
			}
			VCVTDQ2PS(E, E)
			VMULPS(dm, E, E)
			sign := fvec{avx512: true}.broadcast(0x80000000)
			VXORPS(sign, E, E) // -(dmin*m)
		default:
			cneg := fvec{avx512: true}.broadcast(math32bits(-float32(int(1) << c.shift)))
			VMULPS(cneg, D, E) // -c*D
		}
		_ = nsub
		VMOVUPS(D, Mem{Base: tp, Disp: 256})
		VMOVUPS(E, Mem{Base: tp, Disp: 384})
		ggmlFloatUnit(name+"_vec", z, chunks, 256, tp, xk, w)
	})
}

// ggmlBlockF32 emits Ggml<t>F32Avx512 for a 32-element block type: as
// ggmlSuperF32 per group of four blocks (D = d, E = m or -c*d).
func ggmlBlockF32(c ggmlSmall) {
	name := "Ggml" + c.t + "F32Avx512"
	TEXT(name, NOSPLIT, ggmlSigF32)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s multiplies layout/ggml %s rows by float32 activations with AVX-512: each group of four blocks dequantized once to float32 weights in registers for every vector.", name, c.name))
	nib, kv, flip, sixteen := ggmlSmallConsts(c)
	var chunks []ggmlChunk
	for i := 0; i < 8; i++ {
		chunks = append(chunks, ggmlChunk{16 * i, i / 2})
	}
	w := make([]VecVirtual, 8)
	for i := range w {
		w[i] = ZMM()
	}
	ggmlF32Rows(name, 4*c.bytes, 128, func(wp, tp, xk GPVirtual) {
		z := ggmlBlockCodes(c, wp, nib, kv, flip, sixteen)
		dh := XMM()
		VPXORD(dh, dh, dh)
		for b := 0; b < 4; b++ {
			VPINSRW(U8(b), Mem{Base: wp, Disp: b * c.bytes}, dh, dh)
		}
		D, E := XMM(), XMM()
		VCVTPH2PS(dh, D)
		if c.m {
			mh := XMM()
			VPXORD(mh, mh, mh)
			for b := 0; b < 4; b++ {
				VPINSRW(U8(b), Mem{Base: wp, Disp: b*c.bytes + 2}, mh, mh)
			}
			VCVTPH2PS(mh, E)
		} else {
			cneg := fvec{avx512: true}.broadcast(math32bits(-float32(int(1) << c.shift)))
			VMULPS(cneg.AsX(), D, E)
		}
		VMOVUPS(D, Mem{Base: tp, Disp: 256})
		VMOVUPS(E, Mem{Base: tp, Disp: 384})
		ggmlFloatUnit(name+"_vec", z[:], chunks, 128, tp, xk, w)
	})
}

func math32bits(f float32) uint32 { return math.Float32bits(f) }

// ggmlSuperA8R4 emits Ggml<t>A8R4Avx512: the one-vector kernel of a
// super-block type for four rows at a time (rows a multiple of 4; nvec,
// astride, sstride, xstride and ostride ignored: out[r] of one vector).
// Each row's super-block is unpacked and multiplied as in ggmlSuperA8,
// but the eight half accumulators of the four rows are reduced together
// (lanes = rows) and the definition's float steps run on the four rows at
// once (VMULPS, VADDPS, VSUBPS: each lane one row's exact operations).
//
// pf picks the weights' prefetch (r4Prefetch).
func ggmlSuperA8R4(c ggmlSuper, pf r4Prefetch) {
	t := c.t
	name := "Ggml" + t + "A8R4" + pf.suffix() + "Avx512"
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s is Ggml%sA8Avx512 for one vector and four rows at a time (rows a multiple of 4), the reductions and float steps with the rows in the lanes.", name, t))
	// The bit and shift tables in registers: as 64-byte memory operands
	// they are split loads whenever the linker places them at 32 mod 64
	// (it aligns data to 32 bytes at most), which a 16-byte table added
	// elsewhere did: Q3_K took 1.1x the time.
	kc, idxTab := ggmlConstTables(c, true)
	idx := ggmlScaleIdx(c, idxTab)
	dOff := map[string]int{"Q2K": 80, "Q3K": 108, "Q6K": 208}[t]
	dmOff := 2
	if t == "Q2K" {
		dmOff = 82
	}
	// Q4_K and Q5_K unpack the four rows' scales and mins together, one
	// row per 128-bit lane (q4kScaleWords4); the odd rows' scale words
	// are the upper 16 of their pair's 32, hence idxOdd = idx + 16.
	batch := t == "Q4K" || t == "Q5K"
	var idxOdd [2][2]VecVirtual
	if batch {
		sixteen := fvec{avx512: true}.broadcast(0x00100010)
		for h := range idxOdd {
			for p := range idxOdd[h] {
				idxOdd[h][p] = ZMM()
				VPADDW(sixteen, idx[h][p], idxOdd[h][p])
			}
		}
	}
	fourRows(name, pf, c.bytes, 256, 2*256/c.sub, 8, func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual) {
		var acc [2][4]VecVirtual // half, row
		var mm [4]VecVirtual
		var words [2]VecVirtual // batch: rows 0, 1 and rows 2, 3's scale and min words
		var lo4, z4 VecVirtual
		dh, mh := XMM(), XMM() // d, dmin of the four rows (binary16)
		if batch {
			lo4, z4 = q4kScaleWords4(rows)
			// d and dmin, the first two words of each lane of z4
			ix, dm := ZMM(), ZMM()
			VMOVDQU64(rodata("q4kDmWords", 32, 2, func(w int) uint64 { return uint64(8*(w%4) + w/4%2) }), ix)
			VPERMW(z4, ix, dm) // [d0..d3, dmin0..dmin3]
			dh = dm.AsX().(VecVirtual)
			VPSRLDQ(U8(8), dh, mh)
			words[0], words[1] = ZMM(), ZMM()
			VPMOVZXBW(lo4.AsY(), words[0])
			hi := YMM()
			VEXTRACTI64X4(U8(1), lo4, hi)
			VPMOVZXBW(hi, words[1])
		} else {
			VPXORD(dh, dh, dh)
			if c.mins {
				VPXORD(mh, mh, mh)
			}
		}
		for i, rm := range rows {
			var scw, sumw VecVirtual
			if !batch {
				scw, sumw = ggmlSuperScales(c, rm)
				VPINSRW(U8(i), rm.Offset(dOff), dh, dh)
				if c.mins {
					VPINSRW(U8(i), rm.Offset(dmOff), mh, mh)
				}
			}
			for h := 0; h < 2; h++ {
				q := ggmlHalfCodesInto(c, rm, h, kc, [2]VecVirtual{ZMM(), ZMM()})
				a := ZMM()
				if c.dword {
					sc := ZMM()
					VPERMD(scw.AsZ(), idx[h][0], sc)
					VPXORD(a, a, a)
					for p := 0; p < 2; p++ {
						VPDPBUSD(Mem{Base: ak, Disp: 128*h + 64*p}, q[p], a)
					}
					VPMULLD(sc, a, a)
				} else {
					for p := 0; p < 2; p++ {
						sc, pr := ZMM(), ZMM()
						switch {
						case !batch:
							VPERMW(scw.AsZ(), idx[h][p], sc)
						case i%2 == 0:
							VPERMW(words[i/2], idx[h][p], sc)
						default:
							VPERMW(words[i/2], idxOdd[h][p], sc)
						}
						VPMADDUBSW(Mem{Base: ak, Disp: 128*h + 64*p}, q[p], pr)
						if p == 0 {
							VPMADDWD(sc, pr, a)
						} else {
							VPDPWSSD(sc, pr, a)
						}
					}
				}
				acc[h][i] = a
			}
			if batch {
				continue
			}
			m := XMM() // [M0a, M0b, M1a, M1b]
			if 256/c.sub == 16 {
				m8 := YMM()
				VPMADDWD(Mem{Base: sk}, sumw, m8)
				hi := XMM()
				VEXTRACTI32X4(U8(1), m8, hi)
				phaddd(hi, m8.AsX(), m)
			} else {
				VPMADDWD(Mem{Base: sk}, sumw, m)
			}
			mm[i] = m
		}
		// S[h] = [row 0..3]: reduce the eight accumulators together
		regs := make([]Register, 8)
		for h := 0; h < 2; h++ {
			for i := 0; i < 4; i++ {
				regs[4*h+i] = acc[h][i]
			}
		}
		addD := func(a, b, c Op) { VPADDD(a, b, c) }
		zmm := func() Register { return ZMM() }
		r2 := pairLevel(pairLevel(regs, false, addD, zmm), true, addD, zmm)
		var S [2]VecVirtual
		for h := 0; h < 2; h++ {
			z := r2[h].(VecVirtual)
			y := YMM()
			VEXTRACTI64X4(U8(1), z, y)
			VPADDD(y, z.AsY(), y)
			x := XMM()
			VEXTRACTI32X4(U8(1), y, x)
			VPADDD(x, y.AsX(), x)
			S[h] = x
		}
		// M[h] = [row 0..3]
		var M [2]VecVirtual
		if batch { // lane i of mz: row i's [M0a, M0b, M1a, M1b]
			mz, sums, t := ZMM(), ZMM(), ZMM()
			VPSHUFB(q4kLanes("q4kMinWordsZ", 4, 1, q4kMinWordsBytes), lo4, mz)
			VBROADCASTI32X4(Mem{Base: sk}, sums)
			VPMADDWD(sums, mz, mz)
			VPSHUFD(U8(0xb1), mz, t)
			VPADDD(t, mz, t) // lane i: [M0, M0, M1, M1]
			ix, pm := ZMM(), ZMM()
			VMOVDQU64(rodata("q4kMRows", 16, 4, func(j int) uint64 { return uint64(4*(j%4) + 2*(j/4%2)) }), ix)
			VPERMD(t, ix, pm) // [M0 of rows 0..3, M1 of rows 0..3, ...]
			M[0], M[1] = pm.AsX().(VecVirtual), XMM()
			VEXTRACTI32X4(U8(1), pm.AsY(), M[1])
		} else {
			p01, p23 := XMM(), XMM()
			phaddd(mm[1], mm[0], p01) // [r0h0 r0h1 r1h0 r1h1]
			phaddd(mm[3], mm[2], p23)
			M[0], M[1] = XMM(), XMM()
			VSHUFPS(U8(0x88), p23, p01, M[0])
			VSHUFPS(U8(0xdd), p23, p01, M[1])
		}
		superFloatSteps(c.mins, c.shift, S, M, dh, mh, xk, acc4)
	})
}

// ggmlBlockA8R4 emits Ggml<t>A8R4Avx512 for a 32-element block type: the
// one-vector kernel for four rows at a time (rows a multiple of 4; nvec
// and the strides ignored). The 4-bit types (Q4_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL) read the activations split by nibble (ggmlVBMI, groupSplit);
// Q8_0 computes each row's four block terms as in ggmlBlockA8, then
// transposes them so that the definition's sequential additions of the
// four rows are one VADDPS each (a row's additions are a dependency
// chain: about 17 cycles per 128 columns for one row). The next four rows
// are prefetched in memory order.
//
// pf picks the weights' prefetch (r4Prefetch).
func ggmlBlockA8R4(c ggmlSmall, pf r4Prefetch) {
	name := "Ggml" + c.t + "A8R4" + pf.suffix() + "Avx512"
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	if c.nib {
		feats := "VBMI and GFNI"
		kernelDoc("GGML block kernels", fmt.Sprintf("%s computes Ggml%sA8Avx512's products for one vector and four rows at a time (rows a multiple of 4), with %s; it reads the activations split by nibble (per 128 columns those of the blocks' low nibbles, then the high), the float steps with the rows in the lanes.", name, c.t, feats))
		vb := newGGMLSplit(c)
		fourRows(name, pf, 4*c.bytes, 128, 8, 4, func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual) {
			vb.groupSplit(c, rows, ak, sk, xk, acc4)
		})
		return
	}
	kernelDoc("GGML block kernels", fmt.Sprintf("%s is Ggml%sA8Avx512 for one vector and four rows at a time (rows a multiple of 4), the float steps with the rows in the lanes.", name, c.t))
	nib, kv, flip, sixteen := ggmlSmallConsts(c)
	lane0 := ZMM()
	VMOVDQU64(rodata("ggmlLane0", 16, 4, func(i int) uint64 { return uint64(4 * (i % 4)) }), lane0)
	fourRows(name, pf, 4*c.bytes, 128, 8, 4, func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual) {
		ggmlR4Group(c, rows, ak, sk, xk, acc4, nib, kv, flip, sixteen, lane0, transpose4)
	})
}

// ggmlBlockDots returns the int32 dots of a group's four blocks (codes
// z, two blocks per ZMM) with the activations at ap in dwords 0..3 of a
// ZMM: two VPDPBUSD, the two accumulators' 128-bit lanes paired
// (VSHUFI64X2) and each lane summed within (VPSHUFD), then VPERMD with
// lane0 (dword 4k) gathering block k's sum.
func ggmlBlockDots(z [2]VecVirtual, ap GPVirtual, lane0 VecVirtual) VecVirtual {
	var acc [2]VecVirtual
	for h := 0; h < 2; h++ {
		acc[h] = ZMM()
		VPXORD(acc[h], acc[h], acc[h])
		VPDPBUSD(Mem{Base: ap, Disp: 64 * h}, z[h], acc[h])
	}
	p, q := ZMM(), ZMM()
	VSHUFI64X2(U8(0x88), acc[1], acc[0], p)
	VSHUFI64X2(U8(0xdd), acc[1], acc[0], q)
	VPADDD(q, p, p)
	VPSHUFD(U8(0x4e), p, q)
	VPADDD(q, p, p)
	VPSHUFD(U8(0xb1), p, q)
	VPADDD(q, p, p)
	s4 := ZMM()
	VPERMD(p, lane0, s4) // dword k = block k's dot
	return s4
}

// r4Prefetch is how a four-row GGML kernel prefetches its weights
// (fourRows): the next four rows in memory order into L2 (r4PfL2, the
// kernels without a suffix) or L1 (PfL1), or each of the four rows
// leadBytes ahead into L1 (PfLead, rowLead).
type r4Prefetch int

const (
	r4PfL2 r4Prefetch = iota
	r4PfL1
	r4PfLead
)

func (p r4Prefetch) suffix() string { return [...]string{"", "PfL1", "PfLead"}[p] }

// fourRows emits the row and unit loops of the four-row GGML A8 kernels
// (rows a multiple of 4): per four rows an XMM of their sums (acc4, lane
// = row), and per unit (a super-block, or a group of four 32-element
// blocks: unitBytes of each row) body on the four rows' units at rows.
// With r4PfL2 and r4PfL1, pf walks the next four rows (contiguous in
// memory) in order, 4*unitBytes per unit, so that they stream in order
// while this tile's four rows interleave, which the hardware prefetchers
// follow poorly on short rows. That keeps up to two tiles in flight, more
// than L1 holds for long rows (four rows of 4096x14336 Q6_K are 47 KB):
// with r4PfLead the prefetch runs leadBytes (at most half a row) ahead
// in each of the four rows instead, continuing into the next four rows'
// starts once it passes row 0's end. The activations, their sums and
// scales move on actStep, sumStep and xsStep bytes per unit.
func fourRows(name string, pf r4Prefetch, unitBytes, actStep, sumStep, xsStep int, body func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual)) {
	fourRowsFix(name, pf, unitBytes, actStep, sumStep, xsStep, body, nil)
}

// fourRowsFix is fourRows with fix, where not nil, called on the
// accumulator before each group of four rows is stored: it returns an XMM
// holding [row 0, 1, 2, 3] (for bodies that keep the rows elsewhere in
// the YMM form of acc4, whose upper half the VEX zeroing clears).
func fourRowsFix(name string, mode r4Prefetch, unitBytes, actStep, sumStep, xsStep int, body func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual), fix func(acc4 VecVirtual) VecVirtual) {
	Label(name + "_row")
	acc4 := XMM()
	VXORPS(acc4, acc4, acc4)
	wp, st := param("w"), param("stride")
	wp2 := GP64()
	LEAQ(Mem{Base: wp, Index: st, Scale: 2}, wp2)
	pf := GP64()
	var lead rowLead
	if mode == r4PfLead {
		lead = newRowLead(pf, wp, wp, st, 4)
	} else {
		LEAQ(Mem{Base: wp2, Index: st, Scale: 2}, pf)
	}
	ak, sk, xk := param("act"), param("sums"), param("xs")
	n := param("nsb")
	Label(name + "_unit")
	switch mode {
	case r4PfLead:
		lead.wrap(name)
		r := lead.walker()
		for i := 0; i < 4; i++ {
			lead.row(r, i, (unitBytes+63)/64)
		}
	default:
		prefetch := PREFETCHT1
		if mode == r4PfL1 {
			prefetch = PREFETCHT0
		}
		for off := 0; off < 4*unitBytes; off += 64 {
			prefetch(Mem{Base: pf, Disp: off})
		}
	}
	body([4]Mem{{Base: wp}, {Base: wp, Index: st, Scale: 1}, {Base: wp2}, {Base: wp2, Index: st, Scale: 1}}, ak, sk, xk, acc4)
	ADDQ(U32(unitBytes), wp)
	ADDQ(U32(unitBytes), wp2)
	if mode == r4PfLead {
		ADDQ(U32(unitBytes), pf)
	} else {
		ADDQ(U32(4*unitBytes), pf)
	}
	ADDQ(U32(actStep), ak)
	ADDQ(U32(sumStep), sk)
	ADDQ(U32(xsStep), xk)
	DECQ(n)
	JNZ(LabelRef(name + "_unit"))
	res := acc4
	if fix != nil {
		res = fix(acc4)
	}
	VMOVUPS(res, Mem{Base: param("out")})
	st4 := param("stride")
	SHLQ(U8(2), st4)
	bump("w", st4)
	bump("out", U32(16))
	r := param("rows")
	SUBQ(U8(4), r)
	Store(r, Param("rows"))
	JNZ(LabelRef(name + "_row"))
	VZEROUPPER()
	RET()
}

// transpose4 transposes four XMM of four float32: lane i of result b is
// lane b of f[i].
func transpose4(f [4]VecVirtual) [4]VecVirtual {
	t0, t1, t2, t3 := XMM(), XMM(), XMM(), XMM()
	VUNPCKLPS(f[1], f[0], t0) // [f0[0] f1[0] f0[1] f1[1]]
	VUNPCKHPS(f[1], f[0], t1) // [f0[2] f1[2] f0[3] f1[3]]
	VUNPCKLPS(f[3], f[2], t2)
	VUNPCKHPS(f[3], f[2], t3)
	var T [4]VecVirtual
	for b := range T {
		T[b] = XMM()
	}
	VMOVLHPS(t2, t0, T[0])
	VMOVHLPS(t0, t2, T[1])
	VMOVLHPS(t3, t1, T[2])
	VMOVHLPS(t1, t3, T[3])
	return T
}

// ggmlR4Group is one group of four blocks of the four rows of
// ggmlBlockA8R4 (Q8_0; the 4-bit types run groupSplit): each row's four block
// terms as in ggmlBlockA8, transposed so that the definition's sequential
// additions of the four rows are one VADDPS each.
func ggmlR4Group(c ggmlSmall, rows [4]Mem, ak, sk, xk GPVirtual, acc4, nib, kv, flip, sixteen, lane0 VecVirtual, transpose func([4]VecVirtual) [4]VecVirtual) {
	xb := XMM()
	VBROADCASTSS(Mem{Base: xk}, xb)
	sx := XMM()
	VPMOVSXWD(Mem{Base: sk}, sx)
	off := XMM()
	if c.shift > 0 {
		VPSLLD(U8(c.shift), sx, off)
	}
	var sxf VecVirtual
	if c.m {
		sxf = XMM()
		VCVTDQ2PS(sx, sxf)
	}
	var f, u [4]VecVirtual
	for i, rm := range rows {
		z := ggmlBlockCodesAt(c, rm, nib, kv, flip, sixteen)
		s4 := ggmlBlockDots(z, ak, lane0)
		if c.shift > 0 {
			VPSUBD(off, s4.AsX(), s4.AsX())
		}
		dh := XMM()
		VPXORD(dh, dh, dh)
		for b := 0; b < 4; b++ {
			VPINSRW(U8(b), rm.Offset(b*c.bytes), dh, dh)
		}
		d4, coef := XMM(), XMM()
		VCVTPH2PS(dh, d4)
		VMULPS(d4, xb, coef)
		f[i] = XMM()
		VCVTDQ2PS(s4.AsX(), f[i])
		VMULPS(coef, f[i], f[i])
		if c.m {
			mh := XMM()
			VPXORD(mh, mh, mh)
			for b := 0; b < 4; b++ {
				VPINSRW(U8(b), rm.Offset(b*c.bytes+2), mh, mh)
			}
			m4, cm := XMM(), XMM()
			VCVTPH2PS(mh, m4)
			VMULPS(m4, xb, cm)
			u[i] = XMM()
			VMULPS(cm, sxf, u[i])
		}
	}
	T := transpose(f)
	var U [4]VecVirtual
	if c.m {
		U = transpose(u)
	}
	for b := 0; b < 4; b++ {
		VADDPS(T[b], acc4, acc4)
		if c.m {
			VADDPS(U[b], acc4, acc4)
		}
	}
}

// groupSplit is one group of four blocks of the four rows of
// ggmlBlockA8R4 for the 4-bit types (ggmlVBMI): per row one
// VPERMT2B gathers the group's 64 code bytes, VPANDD and GF2P8AFFINEQB
// split them into the low nibbles (columns 0..15 of each block) and the
// high ones (16..31), each against its half of the activations, so both
// VPDPBUSD add into one accumulator whose 128-bit lane b is block b; a
// merge-masking VPERMB puts the row's d (and m) into dmAll. The four
// accumulators reduce in two interleave-and-add levels to lane 4b+i.
func (v *ggmlVBMI) groupSplit(c ggmlSmall, rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual) {
	var acc [4]Register
	dmAll := ZMM()
	for i, rm := range rows {
		a, a2 := ZMM(), ZMM()
		VMOVDQU64(rm, a)
		VMOVDQU8_Z(rm.Offset(2*c.bytes), v.tail, a2)
		switch {
		case v.dmBoth: // Q5_x: the last block's d (and m) lie past the first load
			t := ZMM()
			VMOVDQA64(v.dm, t)
			VPERMI2B_Z(a2, a, v.rowK[i], t)
			if i == 0 {
				dmAll = t
			} else {
				VPORQ(t, dmAll, dmAll)
			}
		case i == 0:
			VPERMB_Z(a, v.dm, v.rowK[i], dmAll)
		default:
			VPERMB(a, v.dm, v.rowK[i], dmAll)
		}
		var q VecVirtual
		if c.qh != 0 {
			q = ZMM()
			VMOVDQA64(v.qhPerm, q)
			VPERMI2B(a2, a, q) // qwords 2b and 2b+1: block b's qh
		}
		VPERMT2B(a2, v.perm, a) // a: the code bytes, block b at 16b
		lo, hi := ZMM(), ZMM()
		VPANDD(a, v.nib, lo)
		VGF2P8AFFINEQB(U8(0), v.gf, a, hi)
		if c.kv {
			VPSHUFB(lo, v.kv, lo)
			VPSHUFB(hi, v.kv, hi)
		}
		if c.qh != 0 { // 16 set where qh says: bits 0..15 of block b's to lo's bytes 16b.., bits 16..31 to hi's
			for h, z := range []VecVirtual{lo, hi} {
				x := ZMM()
				VPMULTISHIFTQB(q, v.qhBits[h], x)
				VPTERNLOGD(U8(0xf8), x, v.sixteen, z) // z | (16 & x)
			}
		}
		s := ZMM()
		VPXORD(s, s, s)
		VPDPBUSD(Mem{Base: ak}, lo, s)
		VPDPBUSD(Mem{Base: ak, Disp: 64}, hi, s)
		acc[i] = s
	}
	l := pairLevel(pairLevel(acc[:], false, func(a, b, c Op) { VPADDD(a, b, c) }, func() Register { return ZMM() }),
		true, func(a, b, c Op) { VPADDD(a, b, c) }, func() Register { return ZMM() })
	v.floats(c, l[0].(VecVirtual), dmAll, sk, xk, acc4)
}

// floats is the float steps of the four-row VBMI kernels: s holds the
// group's int32 sums (lane 4b+i: block b of row i), dmAll the rows' d in
// the same order (binary16, m in the upper 256 bits); the codes' offset
// times the blocks' activation sums is subtracted, and the products are
// added to acc4 block by block as the definition orders them.
func (v *ggmlVBMI) floats(c ggmlSmall, s, dmAll VecVirtual, sk, xk GPVirtual, acc4 VecVirtual) {
	sx := ZMM()
	VPMOVSXWD(Mem{Base: sk}, sx.AsX())
	if c.shift > 0 {
		off := ZMM()
		VPSLLD(U8(c.shift), sx.AsX(), off.AsX())
		VPERMD(off, v.blk, off)
		VPSUBD(off, s, s)
	}
	xb := ZMM()
	VBROADCASTSS(Mem{Base: xk}, xb)
	d16, coef, f := ZMM(), ZMM(), ZMM()
	VCVTPH2PS(dmAll.AsY(), d16)
	VMULPS(d16, xb, coef)
	VCVTDQ2PS(s, f)
	VMULPS(coef, f, f)
	var u VecVirtual
	if c.m {
		mh, m16, cm, sxf := YMM(), ZMM(), ZMM(), ZMM()
		VEXTRACTI64X4(U8(1), dmAll, mh)
		VCVTPH2PS(mh, m16)
		VMULPS(m16, xb, cm)
		VCVTDQ2PS(sx.AsX(), sxf.AsX())
		VPERMPS(sxf, v.blk, sxf)
		u = ZMM()
		VMULPS(cm, sxf, u)
	}
	for b := 0; b < 4; b++ {
		for _, src := range []VecVirtual{f, u} {
			if src == nil {
				continue
			}
			t := src.AsX()
			if b > 0 {
				x := XMM()
				VEXTRACTF32X4(U8(b), src, x)
				t = x
			}
			VADDPS(t, acc4, acc4)
		}
	}
}

// q3kScaleBytes unpacks a Q3_K super-block's 16 6-bit scales (low 4 bits
// from bytes 96..103: j%8, nibble j/8; high 2 bits from bytes 104..107:
// j%4, bits 2*(j/4)) into 16 bytes, scales 0..7 in lo and 8..15 in hi,
// still offset by 32 (the AVX-512 and AVX2 kernels share it).
func q3kScaleBytes(base Mem) (lo64, hi64 GPVirtual) {
	a0, a1, tm := GP32(), GP32(), GP32()
	MOVL(base.Offset(96), a0)
	MOVL(base.Offset(100), a1)
	MOVL(base.Offset(104), tm)
	part := func(a GPVirtual, ashift, tshift int) GPVirtual {
		lo, hi := GP32(), GP32()
		MOVL(a, lo)
		if ashift > 0 {
			SHRL(U8(ashift), lo)
		}
		ANDL(U32(0x0f0f0f0f), lo)
		MOVL(tm, hi)
		if tshift > 0 {
			SHRL(U8(tshift), hi)
		}
		ANDL(U32(0x03030303), hi)
		SHLL(U8(4), hi)
		ORL(hi, lo)
		return lo
	}
	s0, s1, s2, s3 := part(a0, 0, 0), part(a1, 0, 2), part(a0, 4, 4), part(a1, 4, 6)
	lo64, hi64 = GP64(), GP64()
	MOVL(s1, lo64.As32())
	SHLQ(U8(32), lo64)
	ORQ(s0.As64(), lo64)
	MOVL(s3, hi64.As32())
	SHLQ(U8(32), hi64)
	ORQ(s2.As64(), hi64)
	return lo64, hi64
}

// q4kScaleWords unpacks a Q4_K/Q5_K super-block's packed 6-bit scales
// and mins (bytes 4..15) with vector operations: lane 0 of sc holds
// scale j as word j, m the mins the same way. With b the 12 packed bytes,
// scale j < 4 is b[j] & 63, scale j >= 4 is b[j+4] & 15 | (b[j-4] >> 6)
// << 4; min j < 4 is b[j+4] & 63, min j >= 4 is b[j+4] >> 4 | (b[j] >>
// 6) << 4 (ggml's get_scale_min_k4). evex: in EVEX forms, for kernels
// whose registers may be X16..X31.
func q4kScaleWords(base Mem, evex bool) (sc, m VecVirtual) {
	x := XMM()
	VMOVDQU(base, x)
	lo := q4kScaleBytes(x, 1, evex)
	sc, m = XMM(), XMM()
	VPMOVZXBW(lo, sc)
	VPSHUFB(q4kLanes("q4kMinWords", 1, 1, q4kMinWordsBytes), lo, m)
	return sc, m
}

// The constants of q4kScaleWords, one 128-bit lane each: the VPSHUFB
// controls gathering the scale bytes and spreading the mins to words,
// and the dword shifts and masks.
var (
	q4kScaleGatherBytes = []uint64{4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15}
	q4kMinWordsBytes    = []uint64{8, 0x80, 9, 0x80, 10, 0x80, 11, 0x80, 12, 0x80, 13, 0x80, 14, 0x80, 15, 0x80}
	q4kScaleShiftDwords = []uint64{0, 0, 0, 4}
	q4kScaleMaskDwords  = []uint64{0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f}
	q4kScaleTopDwords   = []uint64{0x30303030, 0x30303030, 0x30303030, 0x30303030}
)

// q4kScaleBytes unpacks the packed scales and mins of the super-block in
// each of the lanes 128-bit lanes of x (its first 16 bytes: d, dmin and
// the 12 packed bytes) to [sc0..7, m0..7] as bytes in that lane: XMM for
// one lane, ZMM for four. evex: in EVEX forms (always for ZMM).
func q4kScaleBytes(x VecVirtual, lanes int, evex bool) VecVirtual {
	reg, sfx := func() VecVirtual { return XMM() }, ""
	if lanes == 4 {
		reg, sfx = func() VecVirtual { return ZMM() }, "Z"
	}
	and, or := func(m, x, y Op) { VPAND(m, x, y) }, func(m, x, y Op) { VPOR(m, x, y) }
	if evex || lanes == 4 {
		and, or = func(m, x, y Op) { VPANDD(m, x, y) }, func(m, x, y Op) { VPORD(m, x, y) }
	}
	// a: [b0..3, b8..11, b4..7, b8..11] per lane
	a := reg()
	VPSHUFB(q4kLanes("q4kScaleGather"+sfx, lanes, 1, q4kScaleGatherBytes), x, a)
	lo := reg()
	VPSRLVD(q4kLanes("q4kScaleShift"+sfx, lanes, 4, q4kScaleShiftDwords), a, lo)
	and(q4kLanes("q4kScaleMask"+sfx, lanes, 4, q4kScaleMaskDwords), lo, lo)
	// the top two bits of b0..3 and b4..7, to bits 4-5 of dwords 1 and 3
	hi := reg()
	VPSLLQ(U8(32), a, hi)
	VPSRLW(U8(2), hi, hi)
	and(q4kLanes("q4kScaleTop"+sfx, lanes, 4, q4kScaleTopDwords), hi, hi)
	or(hi, lo, lo) // [sc0..7, m0..7] as bytes
	return lo
}

// q4kLanes returns a read-only table of lanes copies of lane (entries of
// width bytes): one per 128-bit lane of the registers that read it.
func q4kLanes(name string, lanes, width int, lane []uint64) Mem {
	return rodata(name, lanes*len(lane), width, func(i int) uint64 { return lane[i%len(lane)] })
}

// q4kScaleWords4 is q4kScaleWords for four Q4_K/Q5_K super-blocks at
// once, rows[i]'s in 128-bit lane i: lo holds lane i's [sc0..7, m0..7] as
// bytes (the same instructions on four lanes), z each super-block's
// first 16 bytes (d, dmin and the packed scales).
func q4kScaleWords4(rows [4]Mem) (lo, z VecVirtual) {
	z = ZMM()
	VBROADCASTI32X4(rows[0], z)
	for i := 1; i < 4; i++ {
		VINSERTI32X4(U8(i), rows[i], z, z)
	}
	return q4kScaleBytes(z, 4, true), z
}

// iq4xsScaleBytes unpacks an IQ4_XS super-block's 8 6-bit scales
// (ls_j = (sl[j/2] >> 4*(j%2) & 15) | ((sh >> 2j) & 3) << 4) into 8 bytes,
// still offset by 32 (the AVX-512 and AVX2 kernels share it).
func iq4xsScaleBytes(base Mem) GPVirtual {
	sl, sh := GP64(), GP64()
	MOVL(base.Offset(4), sl.As32())
	MOVWQZX(base.Offset(2), sh)
	lo, hi, mk := GP64(), GP64(), GP64()
	MOVQ(U64(0x0f0f0f0f0f0f0f0f), mk)
	PDEPQ(mk, sl, lo)
	MOVQ(U64(0x0303030303030303), mk)
	PDEPQ(mk, sh, hi)
	SHLQ(U8(4), hi)
	ORQ(hi, lo)
	return lo
}

// superFloatSteps folds the four rows' super-block half sums into acc4
// (rows in the lanes), in the definition's order: per half h, S[h] less
// M[h] << shift (the Q3_K/Q6_K offsets), then acc4 += d*x_h*S[h] and,
// with mins, acc4 -= dmin*x_h*M[h]; d and dmin are the rows' binary16
// values in dh and mh, x_h the half's activation scale at xk + 4h. The
// four-row kernels of both kernel sets share it.
func superFloatSteps(mins bool, shift int, S, M [2]VecVirtual, dh, mh VecVirtual, xk GPVirtual, acc4 VecVirtual) {
	d4 := XMM()
	VCVTPH2PS(dh, d4)
	var dm4 VecVirtual
	if mins {
		dm4 = XMM()
		VCVTPH2PS(mh, dm4)
	}
	for h := 0; h < 2; h++ {
		if shift > 0 {
			cc := XMM()
			VPSLLD(U8(shift), M[h], cc)
			VPSUBD(cc, S[h], S[h])
		}
		xb := XMM()
		VBROADCASTSS(Mem{Base: xk, Disp: 4 * h}, xb)
		coef, f := XMM(), XMM()
		VMULPS(d4, xb, coef)
		VCVTDQ2PS(S[h], f)
		VMULPS(coef, f, f)
		VADDPS(f, acc4, acc4)
		if mins {
			VMULPS(dm4, xb, coef)
			VCVTDQ2PS(M[h], f)
			VMULPS(coef, f, f)
			VSUBPS(f, acc4, acc4)
		}
	}
}

// iq4KValues are IQ4_NL's and IQ4_XS's code values.
var iq4KValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// ggmlKValues128 returns the read-only table of IQ4's KValues plus 128
// (unsigned bytes for VPSHUFB and VPDPBUSD).
func ggmlKValues128() Mem {
	return rodata("ggmlKValues128", 16, 1, func(i int) uint64 { return uint64(int(iq4KValues[i]) + 128) })
}

// ggmlKValuesYMM broadcasts IQ4's KValues into both lanes of a YMM: plus
// 128 where offset (unsigned codes for VPDPBUSD), else as int8 (the sign
// trick).
func ggmlKValuesYMM(offset bool) VecVirtual {
	tab := ggmlKValues()
	if offset {
		tab = ggmlKValues128()
	}
	kv := YMM()
	VBROADCASTI128(tab, kv)
	return kv
}

// ggmlKValues returns the read-only table of IQ4's KValues as int8, for
// the AVX2 kernels' signed products (signedDot).
func ggmlKValues() Mem {
	return rodata("ggmlKValues", 16, 1, func(i int) uint64 { return uint64(uint8(iq4KValues[i])) })
}
