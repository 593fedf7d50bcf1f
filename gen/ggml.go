package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// llama.cpp block types with int8 activations (asm/ggml_amd64.s): the
// exact A8 definition of layout/ggml, AVX-512 VNNI, a row at a time, each
// super-block unpacked once for every vector of the batch.

// ggmlKernels emits the GGML block family.
func ggmlKernels() {
	for _, t := range []string{"Q4K", "Q5K", "Q6K"} {
		ggmlSuperA8(t)
	}
}

// ggmlSig is the signature of every GGML A8 kernel (cpu/ggml_amd64.go
// calls them): rows rows from w (stride bytes apart) of nsb super-blocks
// each; for nvec vectors v, act+v*astride (the activations as prepared
// for the type), sums+v*sstride (the int16 activation sums of each
// sub-block), xs+v*xstride (the float32 activation scales); row r of
// vector v is written to out[v*ostride + r] (byte strides).
const ggmlSig = "func(w *byte, stride int, rows int, nsb int, act *int8, astride int, sums *int16, sstride int, xs *float32, xstride int, nvec int, out *float32, ostride int)"

// ggmlSuperA8 emits Ggml<t>A8Avx512 for a 256-element super-block type:
// per row and super-block, the codes unpacked to unsigned bytes (four ZMM:
// two per 128-column half, "parts"), the sub-block scales widened to
// int16 and spread over the word lanes of each part (VPERMW); then per
// vector VPMADDUBSW (codes x activations, int16 pairs) and VPMADDWD /
// VPDPWSSD (times the scales, int32), both halves reduced to S0, S1 and
// the sums term (mins x activation sums, or Q6_K's 32*sum sc*sx) to M0,
// M1 with two VPHADDD, and the float steps of the definition in scalar
// SSE, one rounding each, in the definition's order.
func ggmlSuperA8(t string) {
	name := "Ggml" + t + "A8Avx512"
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	var doc string
	switch t {
	case "Q4K", "Q5K":
		doc = "part 0 of half h holds sub-blocks 4h and 4h+2 (the low nibbles of the half's 64 code bytes), part 1 sub-blocks 4h+1 and 4h+3 (the high nibbles): the activations of each 128 columns come as [0:32] [64:96] [32:64] [96:128], the sums one int16 per 32 columns"
	case "Q6K":
		doc = "part 0 of half h holds columns 0..63 of the half (the low nibbles of ql and two bits of qh each), part 1 columns 64..127: the activations in column order, the sums one int16 per 16 columns"
	}
	kernelDoc("GGML block kernels", fmt.Sprintf("%s computes the exact A8 product of layout/ggml %s_K rows with AVX-512 VNNI and BW: %s.", name, t[:2], doc))

	isQ6 := t == "Q6K"
	blockBytes := map[string]int{"Q4K": 144, "Q5K": 176, "Q6K": 210}[t]
	sumBytes := 16 // int16 sums per super-block: 8 (32-column sub-blocks) or 16
	if isQ6 {
		sumBytes = 32
	}

	// Constants: the VPERMW index of each (half, part) and the masks.
	var idx [2][2]VecVirtual
	for h := 0; h < 2; h++ {
		for p := 0; p < 2; p++ {
			h, p := h, p
			tab := rodata(fmt.Sprintf("ggml%sIdx%d%d", t, h, p), 32, 2, func(w int) uint64 {
				if isQ6 { // word w covers columns 2w, 2w+1 of the part: sub-block 8h + 4p + w/8
					return uint64(8*h + 4*p + w/8)
				}
				return uint64(4*h + p + 2*(w/16)) // words 0..15: sub-block 4h+p, 16..31: 4h+p+2
			})
			idx[h][p] = ZMM()
			VMOVDQU64(tab, idx[h][p])
		}
	}
	nib := nibbleMask(ZMM())
	var hbit [2][2]VecVirtual // Q5_K: the qh bit of each (half, part) per byte
	var q6cnt [2]VecVirtual   // Q6_K: the qh shift of each part per word
	var three VecVirtual
	switch t {
	case "Q5K":
		for h := 0; h < 2; h++ {
			for p := 0; p < 2; p++ {
				h, p := h, p
				tab := rodata(fmt.Sprintf("ggmlQ5KBit%d%d", h, p), 64, 1, func(b int) uint64 {
					return 1 << (4*h + p + 2*(b/32))
				})
				hbit[h][p] = ZMM()
				VMOVDQU64(tab, hbit[h][p])
			}
		}
	case "Q6K":
		for p := 0; p < 2; p++ {
			p := p
			tab := rodata(fmt.Sprintf("ggmlQ6KShift%d", p), 32, 2, func(w int) uint64 { return uint64(4*p + 2*(w/16)) })
			q6cnt[p] = ZMM()
			VMOVDQU64(tab, q6cnt[p])
		}
		three = fvec{avx512: true}.broadcast(0x03030303)
	}
	sixteen := ZMM()
	if t == "Q5K" {
		sixteen = fvec{avx512: true}.broadcast(0x10101010)
	}

	Label(name + "_row")
	{
		// zero the accumulators out[v*ostride] of this row
		{
			op, n, os := param("out"), param("nvec"), param("ostride")
			Label(name + "_zero")
			MOVL(U32(0), Mem{Base: op})
			ADDQ(os, op)
			DECQ(n)
			JNZ(LabelRef(name + "_zero"))
		}
		wp := param("w")
		ak, sk, xk := param("act"), param("sums"), param("xs")
		kc := param("nsb")
		Label(name + "_sb")
		{
			// unpack the super-block: codes q[h][p], scales sc[h][p]
			var q [2][2]VecVirtual
			for h := 0; h < 2; h++ {
				switch t {
				case "Q4K", "Q5K":
					off := 16 + 64*h
					if t == "Q5K" {
						off = 48 + 64*h
					}
					lo, hi := ZMM(), ZMM()
					VPSRLW(U8(4), Mem{Base: wp, Disp: off}, hi)
					VPANDD(Mem{Base: wp, Disp: off}, nib, lo)
					VPANDD(hi, nib, hi)
					if t == "Q5K" {
						qh := ZMM()
						VBROADCASTI64X4(Mem{Base: wp, Disp: 16}, qh)
						for p, v := range []VecVirtual{lo, hi} {
							k := K()
							VPTESTMB(hbit[h][p], qh, k)
							VPADDB(sixteen, v, k, v)
						}
					}
					q[h] = [2]VecVirtual{lo, hi}
				case "Q6K":
					lo, hi := ZMM(), ZMM()
					VPSRLW(U8(4), Mem{Base: wp, Disp: 64 * h}, hi)
					VPANDD(Mem{Base: wp, Disp: 64 * h}, nib, lo)
					VPANDD(hi, nib, hi)
					qh := ZMM()
					VBROADCASTI64X4(Mem{Base: wp, Disp: 128 + 32*h}, qh)
					for p, v := range []VecVirtual{lo, hi} {
						b := ZMM()
						VPSRLVW(q6cnt[p], qh, b)
						VPANDD(b, three, b)
						VPSLLW(U8(4), b, b)
						VPORD(b, v, v)
					}
					q[h] = [2]VecVirtual{lo, hi}
				}
			}
			var scw, mnw VecVirtual // the scales as int16 (XMM: 8, YMM: 16), the mins (XMM: 8)
			if isQ6 {
				scw = YMM()
				VPMOVSXBW(Mem{Base: wp, Disp: 192}, scw)
			} else {
				// ggml's get_scale_min_k4 on 32-bit words: bytes 4..15
				u0, u1, u2 := GP32(), GP32(), GP32()
				MOVL(Mem{Base: wp, Disp: 4}, u0)
				MOVL(Mem{Base: wp, Disp: 8}, u1)
				MOVL(Mem{Base: wp, Disp: 12}, u2)
				scLo, mLo, a, b := GP32(), GP32(), GP32(), GP32()
				MOVL(u0, scLo)
				ANDL(U32(0x3f3f3f3f), scLo)
				MOVL(u1, mLo)
				ANDL(U32(0x3f3f3f3f), mLo)
				// scHi = (u2 & 0x0f0f0f0f) | ((u0 >> 6) & 0x03030303) << 4
				MOVL(u2, a)
				ANDL(U32(0x0f0f0f0f), a)
				SHRL(U8(6), u0)
				ANDL(U32(0x03030303), u0)
				SHLL(U8(4), u0)
				ORL(u0, a)
				// mHi = ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 6) & 0x03030303) << 4
				SHRL(U8(4), u2)
				ANDL(U32(0x0f0f0f0f), u2)
				MOVL(u1, b)
				SHRL(U8(6), b)
				ANDL(U32(0x03030303), b)
				SHLL(U8(4), b)
				ORL(u2, b)
				s64, m64 := GP64(), GP64()
				MOVL(a, s64.As32())
				SHLQ(U8(32), s64)
				ORQ(scLo.As64(), s64)
				MOVL(b, m64.As32())
				SHLQ(U8(32), m64)
				ORQ(mLo.As64(), m64)
				sx, mx := XMM(), XMM()
				VMOVQ(s64, sx)
				VMOVQ(m64, mx)
				scw, mnw = XMM(), XMM()
				VPMOVZXBW(sx, scw)
				VPMOVZXBW(mx, mnw)
			}
			var sc [2][2]VecVirtual
			for h := 0; h < 2; h++ {
				for p := 0; p < 2; p++ {
					sc[h][p] = ZMM()
					VPERMW(scw.AsZ(), idx[h][p], sc[h][p])
				}
			}
			// d (and dmin) as float32: Q4_K/Q5_K [d, d, dmin, dmin], Q6_K [d, d, d, d]
			dd := XMM()
			if isQ6 {
				h16 := XMM()
				VPBROADCASTW(Mem{Base: wp, Disp: 208}, h16)
				VCVTPH2PS(h16, dd)
			} else {
				VCVTPH2PS(Mem{Base: wp}, dd)
				VPERMILPS(U8(0x50), dd, dd)
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
					for p := 0; p < 2; p++ {
						pr := ZMM()
						VPMADDUBSW(Mem{Base: av, Disp: 128*h + 64*p}, q[h][p], pr)
						if p == 0 {
							VPMADDWD(sc[h][p], pr, acc)
						} else {
							VPDPWSSD(sc[h][p], pr, acc)
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
				if isQ6 {
					m8 := YMM()
					VPMADDWD(Mem{Base: sv}, scw, m8)
					hi := XMM()
					VEXTRACTI32X4(U8(1), m8, hi)
					phaddd(hi, m8.AsX(), mm)
				} else {
					VPMADDWD(Mem{Base: sv}, mnw, mm)
				}
				g := XMM()
				phaddd(mm, hs, g) // [S0, S1, M0, M1]
				if isQ6 {         // S = S - 32*C
					c := XMM()
					VPSHUFD(U8(0xee), g, c)
					VPSLLD(U8(5), c, c)
					VPSUBD(c, g, g)
				}
				f := XMM()
				VCVTDQ2PS(g, f)
				coef := XMM()
				VMOVDDUP(Mem{Base: xv}, coef) // [xs0, xs1, xs0, xs1]
				VMULPS(dd, coef, coef)
				VMULPS(coef, f, f) // [t0, t1, u0, u1]
				acc := XMM()
				VMOVSS(Mem{Base: ov}, acc)
				if isQ6 {
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
				ADDQ(param("astride"), av)
				ADDQ(param("sstride"), sv)
				ADDQ(param("xstride"), xv)
				ADDQ(param("ostride"), ov)
				DECQ(vc)
				JNZ(LabelRef(name + "_vec"))
			}
			ADDQ(U32(blockBytes), wp)
			ADDQ(U32(256), ak)
			ADDQ(U32(sumBytes), sk)
			ADDQ(U32(8), xk)
			DECQ(kc)
			JNZ(LabelRef(name + "_sb"))
		}
		bump("w", param("stride"))
		bump("out", U32(4))
		r := param("rows")
		DECQ(r)
		Store(r, Param("rows"))
		JNZ(LabelRef(name + "_row"))
	}
	VZEROUPPER()
	RET()
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
