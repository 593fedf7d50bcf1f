package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ggmlSuperA8M16AVX2 emits the AVX2 batch kernels of a super-block type,
// full (Ggml<t>...A8M16Full...) and not: two vectors per accumulator, one
// per 128-bit lane; the full kernel runs all 16 vector lanes whatever
// nvec is (the caller zeroes the unused vectors' activations), the other
// stops after the pairs that hold nvec vectors. Per row and super-block
// the codes are unpacked once and stored; each pair of vectors then
// takes, per chunk of 16 codes (in both lanes, VBROADCASTI128 from the
// stored codes), VPMADDUBSW or signedDot with the activations and, per
// group of chunks with the same scale words, VPMADDWD with those words
// (the sub-block scales applied before any sum leaves its sub-block) and
// VPADDD. Two levels of interleave-and-add leave the 16 sums S in the
// lane order of cpu.ggmlM16Lanes in two registers, the sums term M of all
// 16 is VPMADDWD of the transposed activation sums with the broadcast
// mins (or scales), and the float steps of the definition run on 16
// vectors at once in its order, into out. The signature is ggmlSigM16
// with these activations: super-block k at act + 4096k, half h, pair j
// and chunk c at 2048h + 256j + 32c, 16 bytes of vector 2j then 16 of
// vector 2j+1.
//
// With pairOrder (a type in pair order, see gen/ggml_pairs.go) it emits
// Ggml<t>PA8M16FullAvx2 and Ggml<t>PA8M16Avx2: chunk c of
// half h is lane h of code register c, and its activations come in the
// same order. Every chunk of a half has the half's eight scale words, so
// per pair the chunks' VPMADDUBSW pairs add up in int16 (all eight, at
// most 8*2*15*128; Q5_K four, Q6_K two: pairGroup) and take one VPMADDWD
// with those words per group, a group's codes held in registers while the
// pairs run through it where there are several. IQ4_XS's signed KValues
// take signedDot per chunk (|x| times the code with x's sign, at most
// 2*128*127 per pair, so one chunk per group), and there is no sums term.
//
// Otherwise c is IQ4_XS in column order for the avxvnni set
// (GgmlIQ4XSA8M16[Full]AvxVnni), columns 16c .. 16c+15 of the half in
// chunk c: its codes as KValues + 128, per sub-block and pair two VEX
// VPDPBUSD into int32, one VPMULLD by the sub-block scale, VPADDD, and
// the sums term subtracts 128*sum(sc*sx).
func ggmlSuperA8M16AVX2(c ggmlSuper, full, pairOrder bool) {
	vnni := !pairOrder
	t := c.t
	isa, _ := ymmISA(vnni)
	tn := t
	if pairOrder {
		if _, ok := pairTypes[t]; !ok {
			panic("gen: no pair-order batch kernel for " + t)
		}
		tn = t + "P"
	}
	name := "Ggml" + tn + "A8M16Full" + isa
	what := "for 16 vector lanes (nvec is ignored: the activations of unused lanes must be zero)"
	if !full {
		name = "Ggml" + tn + "A8M16" + isa
		what = "for 2..16 vectors (the pairs that hold the batch; the second vector of an odd batch's last pair must have zero activations)"
	}
	TEXT(name, 0, ggmlSigM16) // not NOSPLIT: frames of up to 432 bytes
	Pragma("noescape")
	base := "Ggml" + t + "A8Avx2"
	if pairOrder {
		base = fmt.Sprintf("the exact A8 product of %s rows in pair order (see Ggml%sPA8R4Avx2)", ggmlTypeName(t), t)
	}
	kernelDoc("GGML block kernels", fmt.Sprintf("%s is %s %s, two vectors per accumulator and the vectors in the lanes of the float steps.", name, base, what))
	var nib, nibw VecVirtual
	// the code masks of the 16-column pair types for the whole kernel; the
	// 32-column ones load theirs per super-block, as Q5_K's group loop
	// needs every register but two
	var pk pairCodeConsts
	if pairOrder {
		nibw = pairNibw(pairTypes[t])
		if c.sub == 16 {
			pk = newPairCodeConsts(pairTypes[t], false)
		}
	} else {
		if !c.dword {
			panic("gen: no column-order AVX2 batch kernel for " + t)
		}
		nib = nibbleMask(YMM())
	}
	var kv VecVirtual
	shift := c.shift
	if pairOrder && pairTypes[t].kv {
		shift = 0 // signed codes: no recentring
	}
	if !pairOrder {
		kv = ggmlKValuesYMM(true) // KValues + 128 for VPDPBUSD
	}
	// frame: the scale words of the eight code registers (8 x 32 bytes;
	// pairOrder: the eight code registers), the sums term's words (32
	// bytes), one half's four code registers (4 x 32; pairOrder: the 16
	// scale words), d and dmin as float32
	sv := AllocLocal(8*32 + 32)
	mw := sv.Offset(8 * 32)
	nch := 4
	if pairOrder {
		nch = 1
	}
	chunks := AllocLocal(nch * 32)
	dd := AllocLocal(16)
	// pairChunk is the 16 codes of chunk c of half h in pair order (lane h
	// of code register c), pairScale half h's eight scale words, for
	// VBROADCASTI128
	pairChunk := func(h, c int) Mem { return sv.Offset(32*c + 16*h) }
	pairScale := func(h int) Mem { return chunks.Offset(16 * h) }
	// chunkCodes is the 16 codes of chunk ch of the half (not pairOrder:
	// the half's code registers are stored in order, and VBROADCASTI128
	// puts a chunk in both lanes with a load alone)
	chunkCodes := func(ch int) Mem { return chunks.Offset(16 * ch) }
	// chunkScale is the 16 bytes of scale words of chunk ch of half h
	// (not pairOrder), for VBROADCASTI128: chunk 2i+l of the super-block
	// (code register i, lane l) takes lane l of sv's register i, whose
	// lanes are the same for 32-column sub-blocks
	chunkScale := func(h, ch int) Mem { return sv.Offset(16 * (8*h + ch)) }

	Label(name + "_row")
	{
		wp := param("w")
		ak, sk, xk := param("act"), param("sums"), param("xs")
		nk := param("nsb")
		Label(name + "_sb")
		{
			ggmlM16Prefetch(c, wp, param("stride"))
			if pairOrder {
				// the scale words and code registers as they are
				// (pairScale, pairChunk)
				pt := pairTypes[t]
				sw, m := pairWords(pt, Mem{Base: wp}, nibw)
				VMOVDQU(m, mw)
				VMOVDQU(sw, pairScale(0))
				if c.sub == 32 {
					pk = newPairCodeConsts(pt, false)
				}
				pairCodes(pt, Mem{Base: wp}, pk, func(v int, r VecVirtual) {
					VMOVDQU(r, pairChunk(0, v))
				})
			} else {
				ggmlScalesAVX2(c, Mem{Base: wp}, sv, mw)
			}
			VMOVDQU(ggmlDMinAVX2(t, Mem{Base: wp}), dd)
			for h := 0; h < 2; h++ {
				if !pairOrder {
					cr := iq4xsHalfCodesAVX2(Mem{Base: wp}, h, nib)
					for i, r := range cr { // chunk 2i+l is lane l of r
						VPSHUFB(r, kv, r)
						VMOVDQU(r, chunks.Offset(32*i))
					}
				}
				acc := make([]VecVirtual, 8)
				// pairs emits body(j) for each pair of vectors; the kernel
				// for 2..16 vectors stops after the pairs that hold the
				// batch, (nvec+1)/2 (the others stay zero), at label.
				pairs := func(label string, body func(j int)) {
					var n GPVirtual
					if !full {
						n = param("nvec")
						INCQ(n)
						SHRQ(U8(1), n)
					}
					for j := range acc {
						body(j)
						if !full && j < len(acc)-1 {
							DECQ(n)
							JZ(LabelRef(label))
						}
					}
					if !full {
						Label(label)
					}
				}
				if !pairOrder {
					for j := range acc {
						acc[j] = YMM()
						VPXOR(acc[j], acc[j], acc[j])
					}
				}
				switch {
				case pairOrder && pairGroup(pairTypes[t]) < 8:
					// per group of chunks (the codes in registers) and
					// pair: int16 sums over the group, one VPMADDWD, VPADDD
					g := pairGroup(pairTypes[t])
					// dot sets its last argument to the int16 pair sums of
					// the chunk's codes times the activations at x
					dot := func(x Mem, r, p VecVirtual) { VPMADDUBSW(x, r, p) }
					if pairTypes[t].kv {
						dot = func(x Mem, r, p VecVirtual) { signedDot(r, x, nil, p) }
					}
					sc := YMM()
					VBROADCASTI128(pairScale(h), sc)
					for j := range acc {
						acc[j] = YMM()
						if !full {
							VPXOR(acc[j], acc[j], acc[j])
						}
					}
					for gi := 0; gi < 8/g; gi++ {
						cw := make([]VecVirtual, g)
						for k := range cw {
							cw[k] = YMM()
							VBROADCASTI128(pairChunk(h, g*gi+k), cw[k])
						}
						body := func(j int) {
							a := YMM()
							for k, r := range cw {
								x := Mem{Base: ak, Disp: 2048*h + 256*j + 32*(g*gi+k)}
								if k == 0 {
									dot(x, r, a)
									continue
								}
								p := YMM()
								dot(x, r, p)
								VPADDW(p, a, a)
							}
							if full && gi == 0 {
								VPMADDWD(sc, a, acc[j])
								return
							}
							VPMADDWD(sc, a, a)
							VPADDD(a, acc[j], acc[j])
						}
						pairs(fmt.Sprintf("%s_h%d_g%d_done", name, h, gi), body)
					}
				case pairOrder: // int16 sums over the half's chunks, one VPMADDWD
					a16 := make([]VecVirtual, len(acc))
					if !full {
						for j := range a16 {
							a16[j] = YMM()
							VPXOR(a16[j], a16[j], a16[j])
						}
					}
					for ch := 0; ch < 8; ch++ {
						cw := YMM()
						VBROADCASTI128(pairChunk(h, ch), cw)
						body := func(j int) {
							if full && ch == 0 {
								a16[j] = YMM()
								VPMADDUBSW(Mem{Base: ak, Disp: 2048*h + 256*j + 32*ch}, cw, a16[j])
								return
							}
							pr := YMM()
							VPMADDUBSW(Mem{Base: ak, Disp: 2048*h + 256*j + 32*ch}, cw, pr)
							VPADDW(pr, a16[j], a16[j])
						}
						pairs(fmt.Sprintf("%s_h%d_c%d_done", name, h, ch), body)
					}
					sc := YMM()
					VBROADCASTI128(pairScale(h), sc)
					for j := range acc {
						acc[j] = YMM()
						VPMADDWD(sc, a16[j], acc[j])
					}
				default:
					for sb := 0; sb < 4; sb++ { // sub-block 4h+sb: chunks 2sb, 2sb+1
						cw0, cw1, sc := YMM(), YMM(), YMM()
						VBROADCASTI128(chunkCodes(2*sb), cw0)
						VBROADCASTI128(chunkCodes(2*sb+1), cw1)
						VBROADCASTI128(chunkScale(h, 2*sb), sc)
						VPSRAD(U8(16), sc, sc) // the scale word pairs as dwords
						pairs(fmt.Sprintf("%s_h%d_s%d_done", name, h, sb), func(j int) {
							d := YMM()
							VPXOR(d, d, d)
							for k, cw := range []VecVirtual{cw0, cw1} {
								x := YMM()
								VMOVDQU(Mem{Base: ak, Disp: 2048*h + 256*j + 32*(2*sb+k)}, x)
								vpdpbusdY(x, cw, d)
							}
							VPMULLD(sc, d, d)
							VPADDD(d, acc[j], acc[j])
						})
					}
				}
				// per lane: [sum of acc 4i+0..3 over that lane]; lanes
				// 0..7, 8..15
				S := ggmlPairLevel(ggmlPairLevel(acc, false, YMM), true, YMM)
				op := param("out")
				for r, s := range S {
					// the sums term: pairs of sub-blocks 4h..4h+3 (16
					// columns) or 2h, 2h+1 (32 columns)
					var M VecVirtual
					if c.mins || shift > 0 {
						M = YMM()
						np := 256 / c.sub / 4
						for i := 0; i < np; i++ {
							pr := h*np + i
							b := YMM()
							VPBROADCASTD(mw.Offset(4*pr), b)
							if i == 0 {
								VPMADDWD(Mem{Base: sk, Disp: 64*pr + 32*r}, b, M)
							} else {
								p := YMM()
								VPMADDWD(Mem{Base: sk, Disp: 64*pr + 32*r}, b, p)
								VPADDD(p, M, M)
							}
						}
					}
					if shift > 0 {
						sh := YMM()
						VPSLLD(U8(shift), M, sh)
						VPSUBD(sh, s, s)
					}
					xz, coef, f := YMM(), YMM(), YMM()
					VMOVUPS(Mem{Base: xk, Disp: 64*h + 32*r}, xz)
					VBROADCASTSS(dd, coef)
					VMULPS(xz, coef, coef)
					VCVTDQ2PS(s, f)
					VMULPS(coef, f, f)
					a := YMM()
					VMOVUPS(Mem{Base: op, Disp: 32 * r}, a)
					VADDPS(f, a, a)
					if c.mins {
						coef2, f2 := YMM(), YMM()
						VBROADCASTSS(dd.Offset(4), coef2)
						VMULPS(xz, coef2, coef2)
						VCVTDQ2PS(M, f2)
						VMULPS(coef2, f2, f2)
						VSUBPS(f2, a, a)
					}
					VMOVUPS(a, Mem{Base: op, Disp: 32 * r})
				}
			}
			ADDQ(U32(c.bytes), wp)
			ADDQ(U32(16*256), ak)
			ADDQ(U32(256/c.sub/2*64), sk)
			ADDQ(U32(128), xk)
			DECQ(nk)
			JNZ(LabelRef(name + "_sb"))
		}
		bump("out", U32(64))
		bump("w", param("stride"))
		r := param("rows")
		DECQ(r)
		Store(r, Param("rows"))
		JNZ(LabelRef(name + "_row"))
	}
	VZEROUPPER()
	RET()
}
