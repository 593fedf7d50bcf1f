package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// a8TAVX512 emits Q4A8Avx512VnniT<M>, the M-vector (8 or 16) W4A8 kernel
// with rows in the lanes. The M-vector kernels keep columns in the lanes, so every
// (row, vector, group) dot ends in a horizontal sum: with 16 vectors one
// row's group costs 32 VPDPBUSD and a 16-accumulator reduction tree. Here
// the 16 rows' packed bytes are transposed instead (one 16x16 dword
// transpose, 64 shuffles shared by all 16 vectors; each transposed dword
// holds eight columns, its low nibbles the even four and its high nibbles
// the odd four, split by a mask and a GF2P8AFFINEQB shift) and each
// VPDPBUSD multiplies four columns of 16 rows by one vector's four
// activations, broadcast from memory: no reduction at all. Transposing
// the packed bytes once instead of the even and the odd nibbles apart
// halves the shuffles: 0.85x the time at batch 8 and 0.92x at 16 (one Zen
// 4 core, in cache).
func a8TAVX512(M int) {
	const L = 16
	name := fmt.Sprintf("Q4A8Avx512VnniT%d", M)
	TEXT(name, 0, kernelSig) // not NOSPLIT: the 1 KiB scratch frame
	Pragma("noescape")
	kernelDoc("Q4G128 kernels", fmt.Sprintf("%s computes W4A8 dot products of a Q4G128 matrix with AVX-512 VNNI (VPDPBUSD on ZMM, rows in the lanes) for super tiles of 16 rows and a batch of M = %d, out vector-major.", name, M))
	scratch := alignedScratch(16 * 64) // the transposed packed bytes
	mask := nibbleMask(ZMM())
	gfShr4 := ZMM() // GF2P8AFFINEQB matrix: each byte shifted right by 4
	{
		t := GP64()
		MOVQ(U64(0x1020408000000000), t)
		VPBROADCASTQ(t, gfShr4)
	}

	Label(name + "_st")
	wp, scp, zp, ap, g := param("w"), param("sc"), param("z"), param("act"), param("groups")
	stride := param("stride")
	stride3 := GP64()
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)

	Label(name + "_group")
	// The 16 rows' 64 packed bytes (register i holds row i), transposed
	// once: dword j of the group's row i, columns 8j..8j+7, lands in lane
	// i of result j; its low nibbles are the even columns 8j, 8j+2, 8j+4,
	// 8j+6 in byte order and its high nibbles the odd ones, as the
	// activations' even and odd halves are laid out.
	row := GP64()
	MOVQ(wp, row)
	rs := make([]Register, L)
	for i := range rs {
		src := []Mem{{Base: row}, {Base: row, Index: stride, Scale: 1},
			{Base: row, Index: stride, Scale: 2}, {Base: row, Index: stride3, Scale: 1}}[i%4]
		r := ZMM()
		VMOVDQU64(src, r)
		rs[i] = r
		if i%4 == 3 && i != L-1 {
			LEAQ(Mem{Base: row, Index: stride, Scale: 4}, row)
		}
	}
	for j, t := range transpose16(rs) {
		VMOVDQU64(t, scratch.Offset(64*j))
	}

	// acc[v] lane i: row i's dot with vector v over the group minus
	// z*isum (int32), the zero-point term as the accumulator's start:
	// one VPMULLD per vector and no zeroing or subtraction.
	zneg := ZMM()
	zeroLanes(Mem{Base: zp}, L, mask, zneg, GP64(), true)
	{
		zero := ZMM() // mask^mask: avo reads the zeroing idiom as a use
		VPXORD(mask, mask, zero)
		VPSUBD(zneg, zero, zneg)
	}
	acc := make([]VecVirtual, M)
	for v := range acc {
		acc[v] = ZMM()
		VPMULLD_BCST(Mem{Base: ap, Disp: 128*M + 64 + 4*v}, zneg, acc[v])
	}
	// The rows' group t16Prefetch on, a row per step: issued with the
	// loads, the 16 misses held the load-miss buffers the activations
	// need (as in the GGML rows-in-lanes kernels).
	pf := make([]GPVirtual, 4)
	for i := range pf {
		pf[i] = GP64()
		if i == 0 {
			LEAQ(Mem{Base: wp, Disp: 64 * t16Prefetch}, pf[0])
		} else {
			LEAQ(Mem{Base: pf[i-1], Index: stride, Scale: 4}, pf[i])
		}
	}
	for j := 0; j < 16; j++ { // eight columns: four even, four odd
		PREFETCHT0([]Mem{{Base: pf[j/4]}, {Base: pf[j/4], Index: stride, Scale: 1},
			{Base: pf[j/4], Index: stride, Scale: 2}, {Base: pf[j/4], Index: stride3, Scale: 1}}[j%4])
		t, even, odd := ZMM(), ZMM(), ZMM()
		VMOVDQU64(scratch.Offset(64*j), t)
		VPANDD(t, mask, even)
		VGF2P8AFFINEQB(U8(0), gfShr4, t, odd)
		for v := 0; v < M; v++ {
			VPDPBUSD_BCST(Mem{Base: ap, Disp: 128*v + 4*j}, even, acc[v])
		}
		for v := 0; v < M; v++ {
			VPDPBUSD_BCST(Mem{Base: ap, Disp: 128*v + 64 + 4*j}, odd, acc[v])
		}
	}
	// out[v] += float(acc) * (s * xs), per row lane.
	sl := ZMM()
	VMOVUPS(Mem{Base: scp}, sl)
	op := param("out")
	for v := 0; v < M; v++ {
		f := ZMM()
		VCVTDQ2PS(acc[v], acc[v])
		VMULPS_BCST(Mem{Base: ap, Disp: 128*M + 4*v}, sl, f)
		VMULPS(acc[v], f, f)
		VADDPS(Mem{Base: op, Disp: 64 * v}, f, f)
		VMOVUPS(f, Mem{Base: op, Disp: 64 * v})
	}

	nextGroup(name, wp, scp, zp, ap, g, 128*M+128, L, metaBlocks)

	bump("out", U32(4*L*M))
	nextSuperTile(name, L, metaBlocks)
}

// transpose16 transposes 16 ZMM registers of 16 dwords: dword i of result
// j is dword j of rs[i]. The inputs are consumed.
func transpose16(rs []Register) []Register {
	// Stage 1 and 2: within each 128-bit lane c, s[q][d] holds dword 4c+d
	// of rows 4q..4q+3.
	var s [4][4]Register
	for q := 0; q < 4; q++ {
		r := rs[4*q : 4*q+4]
		var lo, hi [2]Register
		for p := 0; p < 2; p++ {
			lo[p], hi[p] = ZMM(), ZMM()
			VPUNPCKLDQ(r[2*p+1], r[2*p], lo[p]) // a0 b0 a1 b1
			VPUNPCKHDQ(r[2*p+1], r[2*p], hi[p]) // a2 b2 a3 b3
		}
		for d, pair := range [][2]Register{lo, lo, hi, hi} {
			s[q][d] = ZMM()
			if d%2 == 0 {
				VPUNPCKLQDQ(pair[1], pair[0], s[q][d])
			} else {
				VPUNPCKHQDQ(pair[1], pair[0], s[q][d])
			}
		}
	}
	// Stage 3 and 4: for each d, a 4x4 transpose of 128-bit lanes, so
	// lane q of result 4c+d is lane c of s[q][d].
	out := make([]Register, 16)
	for d := 0; d < 4; d++ {
		x01, y01, x23, y23 := ZMM(), ZMM(), ZMM(), ZMM()
		VSHUFI32X4(U8(0x88), s[1][d], s[0][d], x01) // s0.l0 s0.l2 s1.l0 s1.l2
		VSHUFI32X4(U8(0xdd), s[1][d], s[0][d], y01) // s0.l1 s0.l3 s1.l1 s1.l3
		VSHUFI32X4(U8(0x88), s[3][d], s[2][d], x23)
		VSHUFI32X4(U8(0xdd), s[3][d], s[2][d], y23)
		for c, src := range [][2]Register{{x23, x01}, {y23, y01}, {x23, x01}, {y23, y01}} {
			out[4*c+d] = ZMM()
			imm := U8(0x88)
			if c >= 2 {
				imm = U8(0xdd)
			}
			VSHUFI32X4(imm, src[0], src[1], out[4*c+d])
		}
	}
	return out
}

// t16Prefetch is how many groups ahead Q4A8Avx512VnniT16 prefetches each
// row. Its group is too long (some 900 instructions) for the out-of-order
// window to reach the next group's loads, and the next-tile prefetch of
// the M-vector kernels lands too early. Four groups is the best distance
// found from DRAM (docs/KERNELS.md).
const t16Prefetch = 4
