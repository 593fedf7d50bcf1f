package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// a8AMX emits Q4A8AmxT<M>, the M-vector W4A8 kernel on AMX tiles. Per
// super tile of 16 rows and group of 128 columns it unpacks the rows'
// low nibbles (even columns) and high nibbles (odd columns) into two
// 16x64-byte A tiles, takes the activations as two B tiles already laid
// out by the caller (row k of the even tile holds the four even columns
// 4k..4k+3 of each vector in turn), and lets two TDPBUSD compute the
// 16xM int32 dots a VNNI kernel needs 32*M VPDPBUSD for. The dots go
// through memory to 16 ZMM (one per row, vectors in the lanes), where the
// zero points and scales are applied as in every W4A8 kernel; the row
// sums leave the kernel row-major (out[row*16 + vector]).
func a8AMX(M int) {
	const L = 16
	name := fmt.Sprintf("Q4A8AmxT%d", M)
	TEXT(name, 0, kernelSig) // not NOSPLIT: the 5 KiB scratch frame
	Pragma("noescape")
	kernelDoc("Q4G128 kernels", fmt.Sprintf("%s computes W4A8 dot products of a Q4G128 matrix with AMX-INT8 (TDPBUSD) for super tiles of 16 rows and a batch of M = %d, out row-major.", name, M))
	scrA := AllocLocal(2 * 2 * 16 * 64) // two groups' A tiles: low nibbles, then high
	scrC := AllocLocal(16 * 64)         // the C tile, one row per 64 bytes
	scrZ := AllocLocal(64)              // the 16 rows' zero points, int32
	cfg := AllocLocal(64)
	const (
		tC, tAe, tAo, tBe, tBo = 0, 1, 2, 3, 4
	)
	tileConfig(cfg, []int{16, 16, 16, 16, 16}, []int{4 * M, 64, 64, 4 * M, 4 * M})
	LEAQ(cfg, RDX)
	LDTILECFG(RDX)
	mask := nibbleMask(ZMM())
	gfShr4 := ZMM()
	{
		t := GP64()
		MOVQ(U64(0x1020408000000000), t)
		VPBROADCASTQ(t, gfShr4)
	}

	Label(name + "_st")
	// M = 1: one accumulator, rows in the lanes; else one per row,
	// vectors in the lanes.
	nacc := L
	if M == 1 {
		nacc = 1
	}
	acc := make([]VecVirtual, nacc)
	op := param("out")
	for i := range acc {
		acc[i] = ZMM()
		VMOVUPS(Mem{Base: op, Disp: 64 * i}, acc[i]) // continue the caller's sums
	}
	wp, scp, zp, ap, g := param("w"), param("sc"), param("z"), param("act"), param("groups")
	stride := param("stride")
	stride3 := GP64()
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)

	// Software pipelined: the tiles of group k are loaded from weights
	// unpacked in the iteration before, and the vector stores of the next
	// group's unpacking come between the C tile's store and its reload.
	// Going through memory from vector registers to tiles and back is
	// not forwarded; with the steps of one group back to back the
	// 16-vector kernel took 1.4x this time on one core.
	pa, pb := GP64(), GP64()
	LEAQ(scrA, pa)
	LEAQ(scrA.Offset(2048), pb)
	unpackRows(wp, stride, stride3, pa, mask, gfShr4)

	Label(name + "_group")
	tileLoadPair(tAe, tAo, Mem{Base: pa}, 1024, U32(64))
	amxDots(tC, tAe, tAo, tBe, tBo, M, Mem{Base: ap}, scrC)

	CMPQ(g, U8(1))
	JE(LabelRef(name + "_last"))
	next := GP64()
	LEAQ(Mem{Base: wp, Disp: 64}, next)
	unpackRows(next, stride, stride3, pb, mask, gfShr4)
	Label(name + "_last")

	zl := ZMM()
	zeroLanes(Mem{Base: zp}, L, mask, zl, GP64(), true)
	if M == 1 {
		// acc lane i += float(dot_i - z_i*isum) * (s_i * xs).
		c, f := ZMM(), ZMM()
		VPMULLD_BCST(Mem{Base: ap, Disp: 128 + 64}, zl, zl)
		VMOVDQU32(scrC, c)
		VPSUBD(zl, c, c)
		VCVTDQ2PS(c, c)
		VMOVUPS(Mem{Base: scp}, f)
		VMULPS_BCST(Mem{Base: ap, Disp: 128}, f, f)
		VMULPS(c, f, f)
		VADDPS(f, acc[0], acc[0])
	} else {
		// acc[i] lane v += float(dot - z_i*isum_v) * (s_i * xs_v).
		VMOVDQU32(zl, scrZ)
		xs, isum := ZMM(), ZMM()
		VMOVUPS(Mem{Base: ap, Disp: 128 * M}, xs)
		VMOVDQU32(Mem{Base: ap, Disp: 128*M + 64}, isum)
		for i := 0; i < L; i++ {
			c, t, f := ZMM(), ZMM(), ZMM()
			VPMULLD_BCST(scrZ.Offset(4*i), isum, t)
			VMOVDQU32(scrC.Offset(64*i), c)
			VPSUBD(t, c, c)
			VCVTDQ2PS(c, c)
			VMULPS_BCST(Mem{Base: scp, Disp: 4 * i}, xs, f)
			VMULPS(c, f, f)
			VADDPS(f, acc[i], acc[i])
		}
	}
	XCHGQ(pa, pb)
	nextGroup(name, wp, scp, zp, ap, g, 128*M+128, L, metaBlocks)

	op = param("out")
	for i := range acc {
		VMOVUPS(acc[i], Mem{Base: op, Disp: 64 * i})
	}
	bump("out", U32(64*nacc))
	nextSuperTile(name, L, metaBlocks, TILERELEASE)
}

// unpackRows writes the 16 rows' 64 packed bytes at wp (rows stride
// apart) as two 16x64-byte A tiles at dst: the low nibbles (even
// columns), then the high ones, prefetching t16Prefetch groups ahead.
func unpackRows(wp, stride, stride3, dst GPVirtual, mask, gfShr4 VecVirtual) {
	row := GP64()
	MOVQ(wp, row)
	for i := 0; i < 16; i++ {
		src := []Mem{{Base: row}, {Base: row, Index: stride, Scale: 1},
			{Base: row, Index: stride, Scale: 2}, {Base: row, Index: stride3, Scale: 1}}[i%4]
		pm := src
		pm.Disp += 64 * t16Prefetch
		PREFETCHT0(pm)
		w, hi := ZMM(), ZMM()
		VMOVDQU64(src, w)
		VGF2P8AFFINEQB(U8(0), gfShr4, w, hi) // hi = w >> 4 per byte
		VPANDD(w, mask, w)
		VMOVDQU64(w, Mem{Base: dst, Disp: 64 * i})
		VMOVDQU64(hi, Mem{Base: dst, Disp: 1024 + 64*i})
		if i%4 == 3 && i != 15 {
			LEAQ(Mem{Base: row, Index: stride, Scale: 4}, row)
		}
	}
}
