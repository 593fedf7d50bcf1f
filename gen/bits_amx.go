package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// bitsAmxPrefetch is how many chunks ahead the Bits AMX kernels prefetch
// each row's weights into L1.
const bitsAmxPrefetch = 4

// bitsAmxPerm is the column order of a 4-byte K group in the Bits AMX
// kernels' A tiles: byte p of dword t of tile a (rows' words 16a..16a+15
// of the chunk) holds the code of column 32*perm[p] + 16a + t of its
// 128-column block. With n = 8 that is the word's own byte order (byte p
// is plane 3-p); with n = 4 each dword is regrouped from the low and high
// nibbles so that it holds one block's planes only (see bitsUnpack4).
// cpu.bitsAmxPerm is the same table.
func bitsAmxPerm(n int) [4]int {
	if n == 8 {
		return [4]int{3, 2, 1, 0}
	}
	return [4]int{3, 1, 2, 0}
}

// bitsA8AMX emits Bits<n>A8Amx[Meta16]T<M>, the M-vector W(n)A8 kernel of
// Bits matrices (n = 8 or 4, groups of at least 128 columns) on AMX
// tiles. Per tile of 16 rows, chunk and 128-column block, two TDPBUSD
// compute the 16xM int32 dots (A: the 16 rows' codes, 64 bytes a row;
// B: the caller's activations, 4 bytes per vector and K group); the dots
// go through memory to 16 ZMM (one per row, vectors in the lanes), where
// the zero points and scales are applied in block order as
// layout.(*Bits).DotA8Exact defines. With n = 8 the A tiles load straight
// from the weights; with n = 4 each chunk is unpacked to two blocks' A
// tiles in a scratch buffer one chunk ahead of the multiplies.
func bitsA8AMX(n, M int, meta16 bool) {
	bpc := 8 / n
	m16 := map[bool]string{true: "Meta16"}[meta16]
	name := fmt.Sprintf("Bits%dA8Amx%sT%d", n, m16, M)
	TEXT(name, 0, bitsKernelSig) // not NOSPLIT: the scratch frame
	Pragma("noescape")
	metaBlock := map[bool]int{false: 128, true: 64}[meta16]
	block := 128*M + 128 // activation bytes per block
	kernelDoc("Bits int8 kernels", fmt.Sprintf("%s computes W%dA8 dot products of Bits matrices with AMX-INT8 (TDPBUSD) for tiles of 16 rows and a batch of M = %d, out row-major.", name, n, M))

	// Scratch: the C tile (16 rows of 64 bytes), the rows' scales and
	// zeros, and with n = 4 two chunks' A tiles (4 tiles of 1 KiB each).
	scrSize := 1024 + 128
	if n == 4 {
		scrSize += 2 * 4096
	}
	scr := alignedScratch(scrSize)
	scrC, scrS, scrZ := scr, scr.Offset(1024), scr.Offset(1088)
	cfg := AllocLocal(64)
	const (
		tC, tA0, tA1, tB0, tB1 = 0, 1, 2, 3, 4
	)
	tileConfig(cfg, []int{16, 16, 16, 16, 16}, []int{4 * M, 64, 64, 4 * M, 4 * M})
	LEAQ(cfg, RDX)
	LDTILECFG(RDX)

	var u *bitsUnpacker
	if n == 4 {
		u = newBitsUnpacker()
	}

	Label(name + "_tile")
	// M = 1: one accumulator, rows in the lanes; else one per row,
	// vectors in the lanes.
	nacc := 16
	if M == 1 {
		nacc = 1
	}
	acc := make([]VecVirtual, nacc)
	for i := range acc {
		acc[i] = ZMM()
		VPXORD(acc[i], acc[i], acc[i])
	}
	wp, mp, ap, k := param("w"), param("meta"), param("act"), param("chunks")
	var pa, pb GPVirtual
	if n == 4 {
		pa, pb = GP64(), GP64()
		LEAQ(scr.Offset(1152), pa)
		LEAQ(scr.Offset(1152+4096), pb)
		u.unpack(wp, pa)
	}

	Label(name + "_chunk")
	for b := 0; b < bpc; b++ {
		if n == 8 {
			MOVQ(param("stride"), RDI)
			MOVQ(wp, RSI)
			TILELOADD(tA0, RSI, RDI)
			LEAQ(Mem{Base: wp, Disp: 64}, RSI)
			TILELOADD(tA1, RSI, RDI)
		} else {
			MOVQ(U32(64), RDI)
			LEAQ(Mem{Base: pa, Disp: 2048 * b}, RSI)
			TILELOADD(tA0, RSI, RDI)
			LEAQ(Mem{Base: pa, Disp: 2048*b + 1024}, RSI)
			TILELOADD(tA1, RSI, RDI)
		}
		MOVQ(U32(4*M), RDI)
		LEAQ(Mem{Base: ap, Disp: block * b}, RSI)
		TILELOADD(tB0, RSI, RDI)
		LEAQ(Mem{Base: ap, Disp: block*b + 64*M}, RSI)
		TILELOADD(tB1, RSI, RDI)
		TILEZERO(tC)
		TDPBUSD(tC, tA0, tB0)
		TDPBUSD(tC, tA1, tB1)
		cStride := 64 // C rows 64 bytes apart (one ZMM each), or for M = 1
		if M == 1 {   // 4 bytes apart: one ZMM of the 16 rows' dots
			cStride = 4
		}
		MOVQ(U32(cStride), RDI)
		LEAQ(scrC, RSI)
		TILESTORED(tC, RSI, RDI)

		// Between the C tile's store and its reload: the next chunk's
		// unpacking (n = 4; going from vector stores to a tile load or
		// from a tile store to vector loads back to back is not
		// forwarded) or the rows' prefetches (n = 8).
		if n == 4 && b == 0 {
			CMPQ(k, U8(1))
			JE(LabelRef(name + "_last"))
			next := GP64()
			LEAQ(Mem{Base: wp, Disp: 128}, next)
			u.unpack(next, pb)
			Label(name + "_last")
		}
		if n == 8 {
			bitsRowPrefetch(wp)
		}

		// The 16 rows' scales and zeros of block b: as vectors s and z
		// (M = 1), else where the rows' broadcasts read them.
		sMem := func(i int) Mem { return scrS.Offset(4 * i) }
		zMem := func(i int) Mem { return scrZ.Offset(4 * i) }
		s, z := ZMM(), ZMM()
		switch {
		case n == 8 && !meta16: // float32 scales and int32 zeros in row order
			sMem = func(i int) Mem { return Mem{Base: mp, Disp: 4 * i} }
			zMem = func(i int) Mem { return Mem{Base: mp, Disp: 64 + 4*i} }
			if M == 1 {
				VMOVUPS(sMem(0), s)
				VMOVDQU32(zMem(0), z)
			}
		case n == 8: // binary16 scales and int16 zeros in row order
			VCVTPH2PS(Mem{Base: mp}, s)
			VPMOVSXWD(Mem{Base: mp, Disp: 32}, z)
		default: // two meta tiles of 8 rows (the second chunks*metaBlock on), lane 2i+b
			mq := GP64()
			MOVQ(param("chunks"), mq)
			IMUL3Q(U32(metaBlock), mq, mq)
			ADDQ(mp, mq)
			if meta16 {
				idx := rodata(fmt.Sprintf("bitsAmxIdxW%d", b), 16, 2, func(i int) uint64 { return uint64(bitsAmxLane(i, b)) })
				sy, zy, t := YMM(), YMM(), YMM()
				VMOVDQU16(idx, sy)
				VMOVDQU16(sy, zy)
				VMOVDQU16(Mem{Base: mp}, t)
				VPERMI2W(Mem{Base: mq}, t, sy)
				VMOVDQU16(Mem{Base: mp, Disp: 32}, t)
				VPERMI2W(Mem{Base: mq, Disp: 32}, t, zy)
				VCVTPH2PS(sy, s)
				VPMOVSXWD(zy, z)
			} else {
				idx := rodata(fmt.Sprintf("bitsAmxIdxD%d", b), 16, 4, func(i int) uint64 { return uint64(bitsAmxLane(i, b)) })
				t := ZMM()
				VMOVDQU32(idx, s)
				VMOVDQU32(s, z)
				VMOVDQU32(Mem{Base: mp}, t)
				VPERMI2D(Mem{Base: mq}, t, s)
				VMOVDQU32(Mem{Base: mp, Disp: 64}, t)
				VPERMI2D(Mem{Base: mq, Disp: 64}, t, z)
			}
		}
		if M == 1 {
			// acc lane i += float(dot_i - z_i*isum) * (s_i * xs).
			c := ZMM()
			VPMULLD_BCST(Mem{Base: ap, Disp: block*b + 128 + 64}, z, z)
			VMOVDQU32(scrC, c)
			VPSUBD(z, c, c)
			VCVTDQ2PS(c, c)
			VMULPS_BCST(Mem{Base: ap, Disp: block*b + 128}, s, s)
			VMULPS(c, s, s)
			VADDPS(s, acc[0], acc[0])
			continue
		}
		if n != 8 || meta16 {
			VMOVUPS(s, scrS)
			VMOVDQU32(z, scrZ)
		}

		// acc[i] lane v += float(dot - z_i*isum_v) * (s_i * xs_v).
		xs, isum := ZMM(), ZMM()
		VMOVUPS(Mem{Base: ap, Disp: block*b + 128*M}, xs)
		VMOVDQU32(Mem{Base: ap, Disp: block*b + 128*M + 64}, isum)
		for i := 0; i < 16; i++ {
			c, t, f := ZMM(), ZMM(), ZMM()
			VPMULLD_BCST(zMem(i), isum, t)
			VMOVDQU32(scrC.Offset(64*i), c)
			VPSUBD(t, c, c)
			VCVTDQ2PS(c, c)
			VMULPS_BCST(sMem(i), xs, f)
			VMULPS(c, f, f)
			VADDPS(f, acc[i], acc[i])
		}
	}
	ADDQ(U32(128), wp)
	ADDQ(U32(metaBlock), mp)
	ADDQ(U32(bpc*block), ap)
	if n == 4 {
		XCHGQ(pa, pb)
	}
	DECQ(k)
	JNZ(LabelRef(name + "_chunk"))

	op := param("out")
	for i := range acc {
		VMOVUPS(acc[i], Mem{Base: op, Disp: 64 * i})
	}
	bump("out", U32(64*nacc))
	t := param("stride")
	SHLQ(U8(4), t)
	bump("w", t)
	mt := param("chunks")
	IMUL3Q(U32(bpc*metaBlock), mt, mt)
	bump("meta", mt)
	nt := param("ntiles")
	DECQ(nt)
	Store(nt, Param("ntiles"))
	JNZ(LabelRef(name + "_tile"))
	TILERELEASE()
	VZEROUPPER()
	RET()
}

// bitsAmxLane is the lane of the 8-row meta tile holding row i%8 of a
// 16-row AMX tile for block b of a 4-bit chunk (lane 2*row + b), plus 16
// for the second meta tile (rows 8..15): a VPERMI2 index.
func bitsAmxLane(i, b int) int {
	return 16*(i/8) + 2*(i%8) + b
}

// bitsUnpacker holds the constants of bitsUnpack4.
type bitsUnpacker struct {
	mask, gfShr4 VecVirtual
	odd          OpmaskVirtual
}

func newBitsUnpacker() *bitsUnpacker {
	u := &bitsUnpacker{mask: nibbleMask(ZMM()), gfShr4: ZMM(), odd: K()}
	t := GP64()
	MOVQ(U64(0x1020408000000000), t)
	VPBROADCASTQ(t, u.gfShr4)
	MOVL(U32(0xaaaaaaaa), t.As32())
	KMOVD(t.As32(), u.odd)
	return u
}

// unpack writes the 4-bit codes of one chunk of 16 rows (128 bytes a row
// at wp, rows stride apart) as four 16x64-byte A tiles at dst: block 0's
// two tiles (words 0..15, then 16..31), then block 1's. A word's low
// nibbles (lo) hold planes 7, 5, 3, 1 in bytes 0..3 and its high nibbles
// (hi) planes 6, 4, 2, 0, so the dword [lo.b2, lo.b3, hi.b2, hi.b3] holds
// block 0's planes 3, 1, 2, 0 and [lo.b0, lo.b1, hi.b0, hi.b1] block 1's
// planes 7, 5, 6, 4 (bitsAmxPerm). It prefetches bitsAmxPrefetch chunks
// ahead.
func (u *bitsUnpacker) unpack(wp, dst GPVirtual) {
	stride, stride3, row := GP64(), GP64(), GP64()
	MOVQ(param("stride"), stride)
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)
	MOVQ(wp, row)
	for i := 0; i < 16; i++ {
		src := []Mem{{Base: row}, {Base: row, Index: stride, Scale: 1},
			{Base: row, Index: stride, Scale: 2}, {Base: row, Index: stride3, Scale: 1}}[i%4]
		for h := 0; h < 2; h++ {
			pm := src
			pm.Disp += 128*bitsAmxPrefetch + 64*h
			PREFETCHT0(pm)
			w, lo, hi, x := ZMM(), ZMM(), ZMM(), ZMM()
			m := src
			m.Disp += 64 * h
			VMOVDQU64(m, w)
			VGF2P8AFFINEQB(U8(0), u.gfShr4, w, hi) // hi = w >> 4 per byte
			VPANDD(w, u.mask, lo)
			VPSRLD(U8(16), lo, x)
			VPBLENDMW(hi, x, u.odd, x) // [lo.b2, lo.b3, hi.b2, hi.b3]
			VMOVDQU64(x, Mem{Base: dst, Disp: 1024*h + 64*i})
			VPSLLD(U8(16), hi, hi)
			VPBLENDMW(hi, lo, u.odd, lo) // [lo.b0, lo.b1, hi.b0, hi.b1]
			VMOVDQU64(lo, Mem{Base: dst, Disp: 2048 + 1024*h + 64*i})
		}
		if i%4 == 3 && i != 15 {
			LEAQ(Mem{Base: row, Index: stride, Scale: 4}, row)
		}
	}
}

// bitsRowPrefetch prefetches the two lines of each of 16 rows' chunk
// bitsAmxPrefetch chunks past wp into L1.
func bitsRowPrefetch(wp GPVirtual) {
	stride, stride3, row := GP64(), GP64(), GP64()
	MOVQ(param("stride"), stride)
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)
	MOVQ(wp, row)
	for i := 0; i < 16; i++ {
		src := []Mem{{Base: row}, {Base: row, Index: stride, Scale: 1},
			{Base: row, Index: stride, Scale: 2}, {Base: row, Index: stride3, Scale: 1}}[i%4]
		for h := 0; h < 2; h++ {
			pm := src
			pm.Disp += 128*bitsAmxPrefetch + 64*h
			PREFETCHT0(pm)
		}
		if i%4 == 3 && i != 15 {
			LEAQ(Mem{Base: row, Index: stride, Scale: 4}, row)
		}
	}
}
