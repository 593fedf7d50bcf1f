package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Sparse12 (1:2 sparsity, 7-bit values) kernels (asm/sparse12_amd64.s):
// int8 activations with AVX-512 VNNI + VBMI + BW, float32 activations one
// row at a time; sparse12_avx2.go has the YMM int8 kernels.

// sparse12Kernels emits the Sparse12 family: int8 activations with
// AVX-512 VNNI, AVX2 and AVX-VNNI, then the one-row float32 kernels.
func sparse12Kernels() {
	sparseA8AVX512(1)
	sparseA8AVX512(2)
	for _, u := range []int{128, 64, 32} {
		sparseA8YMM(u, modeAVX2)
		sparseA8YMM(u, modeAVXVNNI)
	}
	for _, f := range []fvec{{true}, {false}} {
		for _, meta16 := range []bool{false, true} {
			for _, seg := range []int{1, 2, 4} {
				sparseA32(seg, f, meta16)
			}
		}
	}
}

// sparseA8AVX512 emits the W(1:2, 7-bit)A8 kernel for Sparse12 with groups
// of at least 128 columns. A chunk (32 words) holds 128 pairs = 256
// columns = 2 blocks; planes 0,1 (bytes 3,2 of each word) are block 0 and
// planes 2,3 block 1. Per row and block, VPERMT2B gathers the block's 64
// pair bytes from the chunk's two halves; the position bits (VPMOVB2M)
// select each pair's activation (VPBLENDMB of the even- and odd-column
// activations, biased by 128 to u8); the 7-bit value minus the row's zero
// point is a signed byte, so VPDPBUSD(x+128, q-z) accumulates
// sum (q-z)*x + 128*sum (q-z), and the load-time correction 128*sum(q-z)
// per (row, block) leaves the exact isum. Tiles are 8 rows x 2 blocks.
//
// With sub = 2 (groups of 64 columns) each block's two planes are its two
// 64-column sub-blocks: each gets its own zero point and correction, and
// the activations of the other plane's bytes are masked to zero.
func sparseA8AVX512(sub int) {
	const bpc = 2
	L := bpc * sub // lanes per row and chunk
	R := 16 / L
	const metaBlock = 192 // per (tile, chunk): 16 f32 scales, 16 i32 corrections, 16 zero bytes (+pad)
	const actChunk = bpc*128 + 64
	name := "Sparse12A8Avx512"
	if sub == 2 {
		name = "Sparse12A8G64Avx512"
	}
	TEXT(name, NOSPLIT, bitsKernelSig)
	Pragma("noescape")
	kernelDoc("Sparse12 kernels", fmt.Sprintf("%s computes the exact W(1:2, 7-bit)A8 dot products of Sparse12 matrices with AVX-512 VNNI, VBMI and BW, blocks of %d columns (groups of %s): tiles of R = %d rows, L = %d lanes per row and chunk.",
		name, 128/sub, map[int]string{1: "at least 128", 2: "64"}[sub], R, L))
	mask7f := ZMM()
	{
		t := GP32()
		MOVL(U32(0x7f7f7f7f), t)
		VPBROADCASTD(t, mask7f)
	}
	var planeMask [2]VecVirtual // sub = 2: bytes of plane 0 / plane 1 of a block
	if sub == 2 {
		for sb, v := range []uint32{0x00ff00ff, 0xff00ff00} {
			planeMask[sb] = ZMM()
			t := GP32()
			MOVL(U32(v), t)
			VPBROADCASTD(t, planeMask[sb])
		}
	}
	cp := param("ctrl")
	tables := [bpc]VecVirtual{ZMM(), ZMM()}
	for b := 0; b < bpc; b++ {
		VMOVDQU64(Mem{Base: cp, Disp: 64 * b}, tables[b])
	}

	lowA8Loops(name, R, L, actChunk, metaBlock, 16, pfL2,
		func(i int, wp, ap, mp GPVirtual, acc []VecVirtual) {
			for b := 0; b < bpc; b++ {
				pairs := ZMM()
				VMOVDQU64(Mem{Base: wp}, pairs)
				VPERMT2B(Mem{Base: wp, Disp: 64}, tables[b], pairs)
				pos := K()
				VPMOVB2M(pairs, pos)
				x := ZMM()
				VMOVDQU64(Mem{Base: ap, Disp: b * 128}, x)
				VPBLENDMB(Mem{Base: ap, Disp: b*128 + 64}, x, pos, x)
				VPANDD(pairs, mask7f, pairs)
				for sb := 0; sb < sub; sb++ {
					j := b*sub + sb
					zb, qz := ZMM(), pairs
					VPBROADCASTB(Mem{Base: mp, Disp: 128 + i*L + j}, zb)
					xs := x
					if sub == 2 {
						qz, xs = ZMM(), ZMM()
						VPANDD(x, planeMask[sb], xs)
					}
					VPSUBB(zb, pairs, qz)
					VPDPBUSD(qz, xs, acc[i*L+j])
				}
			}
		}, nil,
		func(isum VecVirtual, ap, mp GPVirtual) VecVirtual {
			VPSUBD(Mem{Base: mp, Disp: 64}, isum, isum) // 128*sum(q-z)
			f := ZMM()
			VMOVUPS(Mem{Base: mp}, f)
			VMULPS(Mem{Base: ap, Disp: bpc * 128}, f, f)
			return f
		})
}

const sparseA32Sig = "func(w *byte, stride int, meta *float32, xe *float32, xo *float32, out *float32, rows int, chunks int)"

// sparseA32 emits the W(1:2)A32 kernel for Sparse12 with segments of seg
// planes (seg*64 columns, inside one group of at least 64).
//
// With meta16 (kernels named ...Meta16...) meta holds per row and chunk
// the format's P binary16 scales, then P binary16 zeros (P = 4/seg
// segments per chunk), widened once per chunk with m = s*z rounded to
// float32 as layout.(*Sparse12).Affine does; both go through stack slots
// for the segments' broadcast FMAs.
func sparseA32(seg int, f fvec, meta16 bool) {
	W := f.lanes()
	P := 4 / seg // segments per chunk
	m16 := map[bool]string{true: "Meta16"}[meta16]
	name := fmt.Sprintf("Sparse12A32S%d%s%s", seg, m16, f.suffix())
	TEXT(name, NOSPLIT, sparseA32Sig)
	Pragma("noescape")
	meta := "(s, s*z) float32 metadata"
	if meta16 {
		meta = fmt.Sprintf("binary16 metadata (P = %d per row and chunk)", P)
	}
	kernelDoc("Sparse12 kernels", fmt.Sprintf("%s computes W(1:2, 7-bit)A32 dot products of Sparse12 matrices one row at a time with %s%s, segments of %d planes (%d columns), %s.",
		name, map[bool]string{true: "AVX-512F", false: "AVX2 and FMA"}[f.avx512], map[bool]string{true: " (and F16C)"}[meta16], seg, seg*64, meta))
	var scales, ms Mem // meta16: the chunk's s and m as float32
	if meta16 {
		scales, ms = AllocLocal(4*max(P, 4)), AllocLocal(4*max(P, 4))
	}
	m7f, mff := f.broadcast(0x7f), f.broadcast(0xff)
	var m80 VecVirtual
	if f.avx512 {
		m80 = f.broadcast(0x80)
	}
	wp, mp := param("w"), param("meta")
	pfo := rowPrefetchOffset()
	Label(name + "_row")
	acc := f.reg()
	f.zero(acc)
	xe, xo := param("xe"), param("xo")
	row := GP64()
	MOVQ(wp, row)
	k := param("chunks")
	Label(name + "_chunk")
	rowPrefetch(row, pfo)
	parts := 32 / W
	data := make([]VecVirtual, parts)
	for h := range data {
		data[h] = f.reg()
		f.load(Mem{Base: row, Disp: 4 * W * h}, data[h])
	}
	if meta16 {
		sv, mv := meta16Chunk(Mem{Base: mp}, P)
		VMOVUPS(sv, scales)
		VMOVUPS(mv, ms)
		ADDQ(U32(4*P), mp)
	}
	for s0 := 0; s0 < 4; s0 += seg {
		// AVX2 has 16 registers (VEX cannot encode Y16..Y31): two chains each
		dn := map[bool]int{true: chainsMax, false: 2}[f.avx512]
		dots, sxs := newChains(f, seg*parts, dn), newChains(f, seg*parts, dn)
		for i := s0; i < s0+seg; i++ {
			for h := 0; h < parts; h++ {
				c := f.reg()
				if sh := 24 - 8*i; sh != 0 {
					VPSRLD(U8(sh), data[h], c)
					f.and(c, mff, c)
				} else {
					f.and(data[h], mff, c)
				}
				off := (i*32 + W*h) * 4
				x := f.reg()
				VMOVUPS(Mem{Base: xe, Disp: off}, x)
				if f.avx512 {
					pos := K()
					VPTESTMD(m80, c, pos)
					VBLENDMPS(Mem{Base: xo, Disp: off}, x, pos, x)
				} else { // the position bit moved to the sign selects
					sel := f.reg()
					VPSLLD(U8(24), c, sel)
					VBLENDVPS(sel, Mem{Base: xo, Disp: off}, x, x)
				}
				f.and(c, m7f, c)
				VCVTDQ2PS(c, c)
				if d, first := dots.next(); first {
					VMULPS(x, c, d)
				} else {
					VFMADD231PS(x, c, d)
				}
				if sx, first := sxs.next(); first {
					VMOVAPS(x, sx)
				} else {
					VADDPS(x, sx, sx)
				}
			}
		}
		sx := sxs.sum()
		sm, mm := Mem{Base: mp}, Mem{Base: mp, Disp: 4}
		if meta16 {
			sm, mm = scales.Offset(4*(s0/seg)), ms.Offset(4*(s0/seg))
		}
		f.fmaScale(sm, dots.sum(), acc)
		if f.avx512 {
			VFNMADD231PS_BCST(mm, sx, acc)
		} else {
			t := YMM()
			VBROADCASTSS(mm, t)
			VFNMADD231PS(sx, t, acc)
		}
		if !meta16 {
			ADDQ(U32(8), mp)
		}
	}
	ADDQ(U32(128), row)
	ADDQ(U32(128*4), xe) // 128 pairs per chunk
	ADDQ(U32(128*4), xo)
	DECQ(k)
	JNZ(LabelRef(name + "_chunk"))
	rowEnd(name, acc, nil, wp, f)
}
