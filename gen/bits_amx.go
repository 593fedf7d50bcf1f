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

// bitsA8AMX emits Bits<n>A8Amx[G<U>][Meta16]T<M>, the M-vector W(n)A8
// kernel of Bits matrices (n = 8 or 4; groups of at least 128 columns,
// or with sub = 2 or 4 of U = 128/sub) on AMX tiles. Per tile of 16 rows,
// chunk and 128-column block, two TDPBUSD compute the 16xM int32 dots
// (A: the 16 rows' codes, 64 bytes a row; B: the caller's activations, 4
// bytes per vector and K group); with groups of U columns the block's A
// tiles are multiplied sub times, by B tiles that hold only the
// activations of one group's columns (zero elsewhere), so each sum stays
// inside its group. The dots go through memory to ZMM (one per row,
// vectors in the lanes; for M = 1 one ZMM of the 16 rows), where the zero
// points and scales are applied in group order as
// layout.(*Bits).DotA8Exact defines. With n = 8 the A tiles load straight
// from the weights; with n = 4 each chunk is unpacked to two blocks' A
// tiles in a scratch buffer one chunk ahead of the multiplies.
//
// Neither a tile store followed by vector loads of it nor vector stores
// followed by a tile load are forwarded, so the loop is software
// pipelined over chunks: iteration k multiplies chunk k (its C tiles
// stored to one of two buffers, alternating between two C registers),
// unpacks chunk k+1 (n = 4) and only then applies the scales of chunk
// k-1, whose dots were stored an iteration earlier.
func bitsA8AMX(n, sub, M int, meta16 bool) {
	bpc := 8 / n
	L := bpc * sub // groups per chunk: the AVX-512 kernel's lanes per row
	R := 16 / L    // rows per metadata tile
	m16 := map[bool]string{true: "Meta16"}[meta16]
	geo := ""
	if sub > 1 {
		geo = fmt.Sprintf("G%d", 128/sub)
	}
	name := fmt.Sprintf("Bits%dA8Amx%s%sT%d", n, geo, m16, M)
	TEXT(name, 0, bitsKernelSig) // not NOSPLIT: the scratch frame
	Pragma("noescape")
	metaBlock := map[bool]int{false: 128, true: 64}[meta16]
	block := 128*M + 128 // activation bytes per group
	kernelDoc("Bits int8 kernels", fmt.Sprintf("%s computes W%dA8 dot products of Bits matrices with AMX-INT8 (TDPBUSD) for tiles of 16 rows and a batch of M = %d, %s, out row-major.", name, n, M, map[int]string{1: "groups of at least 128 columns", 2: "groups of 64 columns", 4: "groups of 32 columns"}[sub]))

	// Scratch: the rows' scales and zeros (128 bytes), then two buffers,
	// each (n = 4) a chunk's A tiles (4 tiles of 1 KiB) and a chunk's C
	// tiles (L of 1 KiB).
	aBytes := 0
	if n == 4 {
		aBytes = 4096
	}
	buf := aBytes + 1024*L
	scr := alignedScratch(128 + 2*buf)
	scrS, scrZ := scr, scr.Offset(64)
	cfg := AllocLocal(64)
	const (
		tC0, tA0, tA1, tB0, tB1, tC1 = 0, 1, 2, 3, 4, 5
	)
	tileConfig(cfg, []int{16, 16, 16, 16, 16, 16}, []int{4 * M, 64, 64, 4 * M, 4 * M, 4 * M})
	LEAQ(cfg, RDX)
	LDTILECFG(RDX)

	var u *bitsUnpacker
	if n == 4 {
		u = newBitsUnpacker()
	}
	// With several metadata tiles per 16 rows (R < 16) and groups below
	// 128 columns the rows' scales and zeros are gathered: row i's value
	// of group j is at (i/R)*chunks*metaBlock + w*((i%R)*L + j) from the
	// tile's first metadata block (w = 4, or 2 with Meta16).
	var gidx VecVirtual
	w := 4
	if meta16 {
		w = 2
	}
	if sub > 1 {
		gidx = ZMM()
		t := GP64()
		MOVQ(param("chunks"), t)
		IMUL3Q(U32(metaBlock), t, t)
		VPBROADCASTD(t.As32(), gidx)
		VPMULLD(rodata(fmt.Sprintf("bitsAmxTileR%d", R), 16, 4, func(i int) uint64 { return uint64(i / R) }), gidx, gidx)
		VPADDD(rodata(fmt.Sprintf("bitsAmxLaneR%dL%dW%d", R, L, w), 16, 4, func(i int) uint64 { return uint64(w * (i % R) * L) }), gidx, gidx)
	}

	// The epilogue's registers, shared by every group (fresh ones per
	// group and row leave avo's allocator short of ZMM registers).
	ep := bitsAmxRegs{s: ZMM(), z: ZMM(), xs: ZMM(), isum: ZMM(), c: ZMM(), t: ZMM(), f: ZMM()}

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
	// pa: this iteration's buffer (its A tiles unpacked the iteration
	// before, its C tiles written now); pb: the other one.
	pa, pb := GP64(), GP64()
	LEAQ(scr.Offset(128), pa)
	LEAQ(scr.Offset(128+buf), pb)
	if n == 4 {
		u.unpack(wp, pa)
	}

	// multiply computes chunk k's dots into pa's C tiles; then, while
	// they are stored, the next chunk is unpacked (or prefetched).
	multiply := func(label string) {
		for b := 0; b < bpc; b++ {
			if n == 8 {
				tileLoadPair(tA0, tA1, Mem{Base: wp}, 64, param("stride"))
			} else {
				tileLoadPair(tA0, tA1, Mem{Base: pa, Disp: 2048 * b}, 1024, U32(64))
			}
			for sg := 0; sg < sub; sg++ {
				j := b*sub + sg // the group in the chunk
				amxDots([]int{tC0, tC1}[j%2], tA0, tA1, tB0, tB1, M, Mem{Base: ap, Disp: block * j}, Mem{Base: pa, Disp: aBytes + 1024*j})
			}
		}
		if n == 4 {
			CMPQ(k, U8(1))
			JE(LabelRef(label))
			next := GP64()
			LEAQ(Mem{Base: wp, Disp: 128}, next)
			u.unpack(next, pb)
			Label(label)
		} else {
			bitsRowPrefetch(wp)
		}
	}
	// epilogue applies the scales of the chunk before (its dots in pb's
	// C tiles, its metadata at mp, its activations L groups before ap).
	epilogue := func() {
		for j := 0; j < L; j++ {
			ab := block * (j - L) // the group's activations
			cMem := Mem{Base: pb, Disp: aBytes + 1024*j}
			s, z := bitsAmxMeta(n, sub, j, meta16, mp, gidx, ep)
			// The 16 rows' scales and zeros of group j: as vectors s and z
			// (M = 1), else where the rows' broadcasts read them.
			sMem := func(i int) Mem { return scrS.Offset(4 * i) }
			zMem := func(i int) Mem { return scrZ.Offset(4 * i) }
			if s == nil { // float32 scales and int32 zeros in row order
				sMem = func(i int) Mem { return Mem{Base: mp, Disp: 4 * i} }
				zMem = func(i int) Mem { return Mem{Base: mp, Disp: 64 + 4*i} }
				if M == 1 {
					s, z = ep.s, ep.z
					VMOVUPS(sMem(0), s)
					VMOVDQU32(zMem(0), z)
				}
			}
			if M == 1 {
				// acc lane i += float(dot_i - z_i*isum) * (s_i * xs).
				c := ep.c
				VPMULLD_BCST(Mem{Base: ap, Disp: ab + 128 + 64}, z, z)
				VMOVDQU32(cMem, c)
				VPSUBD(z, c, c)
				VCVTDQ2PS(c, c)
				VMULPS_BCST(Mem{Base: ap, Disp: ab + 128}, s, s)
				VMULPS(c, s, s)
				VADDPS(s, acc[0], acc[0])
				continue
			}
			if s != nil {
				VMOVUPS(s, scrS)
				VMOVDQU32(z, scrZ)
			}
			// acc[i] lane v += float(dot - z_i*isum_v) * (s_i * xs_v).
			xs, isum := ep.xs, ep.isum
			VMOVUPS(Mem{Base: ap, Disp: ab + 128*M}, xs)
			VMOVDQU32(Mem{Base: ap, Disp: ab + 128*M + 64}, isum)
			for i := 0; i < 16; i++ {
				c, t, f := ep.c, ep.t, ep.f
				VPMULLD_BCST(zMem(i), isum, t)
				VMOVDQU32(cMem.Offset(64*i), c)
				VPSUBD(t, c, c)
				VCVTDQ2PS(c, c)
				VMULPS_BCST(sMem(i), xs, f)
				VMULPS(c, f, f)
				VADDPS(f, acc[i], acc[i])
			}
		}
	}
	next := func() {
		ADDQ(U32(128), wp)
		ADDQ(U32(L*block), ap)
		XCHGQ(pa, pb)
		DECQ(k)
	}

	multiply(name + "_u0")
	next()
	JZ(LabelRef(name + "_last"))
	Label(name + "_chunk")
	multiply(name + "_u1")
	epilogue()
	ADDQ(U32(metaBlock), mp)
	next()
	JNZ(LabelRef(name + "_chunk"))
	Label(name + "_last")
	epilogue()

	op := param("out")
	for i := range acc {
		VMOVUPS(acc[i], Mem{Base: op, Disp: 64 * i})
	}
	bitsNextTile(name, 64*nacc, 16/R, metaBlock, TILERELEASE)
}

// bitsAmxMeta returns the 16 rows' scales (float32) and zero points
// (int32) of group j of the chunk whose first metadata block is at mp, or
// nils where the kernel broadcasts them from the metadata itself (n = 8,
// groups of at least 128, float32 metadata: one tile, row order).
// gidx holds the gather offsets (sub > 1).
func bitsAmxMeta(n, sub, j int, meta16 bool, mp GPVirtual, gidx VecVirtual, ep bitsAmxRegs) (s, z VecVirtual) {
	metaBlock := map[bool]int{false: 128, true: 64}[meta16]
	s, z = ep.s, ep.z
	switch {
	case n == 8 && sub == 1 && !meta16:
		return nil, nil
	case n == 8 && sub == 1: // binary16 scales and int16 zeros in row order
		VCVTPH2PS(Mem{Base: mp}, s)
		VPMOVSXWD(Mem{Base: mp, Disp: 32}, z)
	case sub == 1: // two meta tiles of 8 rows (the second chunks*metaBlock on), lane 2i+j
		mq := GP64()
		MOVQ(param("chunks"), mq)
		IMUL3Q(U32(metaBlock), mq, mq)
		ADDQ(mp, mq)
		if meta16 {
			idx := rodata(fmt.Sprintf("bitsAmxIdxW%d", j), 16, 2, func(i int) uint64 { return uint64(bitsAmxLane(i, j)) })
			sy, zy, t := ep.c.AsY(), ep.f.AsY(), ep.t.AsY()
			VMOVDQU16(idx, sy)
			VMOVDQU16(sy, zy)
			VMOVDQU16(Mem{Base: mp}, t)
			VPERMI2W(Mem{Base: mq}, t, sy)
			VMOVDQU16(Mem{Base: mp, Disp: 32}, t)
			VPERMI2W(Mem{Base: mq, Disp: 32}, t, zy)
			VCVTPH2PS(sy, s)
			VPMOVSXWD(zy, z)
		} else {
			idx := rodata(fmt.Sprintf("bitsAmxIdxD%d", j), 16, 4, func(i int) uint64 { return uint64(bitsAmxLane(i, j)) })
			t := ep.t
			VMOVDQU32(idx, s)
			VMOVDQU32(s, z)
			VMOVDQU32(Mem{Base: mp}, t)
			VPERMI2D(Mem{Base: mq}, t, s)
			VMOVDQU32(Mem{Base: mp, Disp: 64}, t)
			VPERMI2D(Mem{Base: mq, Disp: 64}, t, z)
		}
	default: // gathered: row i's value at gidx[i] + w*j
		gather := func(disp int, dst VecVirtual) {
			gatherDwords(Mem{Base: mp, Index: gidx, Scale: 1, Disp: disp}, dst)
		}
		if meta16 {
			// A dword at scale 2j holds the binary16 scale in its low half
			// (the block's zeros follow, so it never reads past it); the
			// zero is the high half of the dword 2 bytes before it.
			gather(2*j, s)
			sy := ep.c.AsY()
			VPMOVDW(s, sy)
			VCVTPH2PS(sy, s)
			gather(32+2*j-2, z)
			VPSRAD(U8(16), z, z)
		} else {
			gather(4*j, s)
			gather(64+4*j, z)
		}
	}
	return s, z
}

// bitsAmxRegs are a Bits AMX kernel's epilogue registers.
type bitsAmxRegs struct{ s, z, xs, isum, c, t, f VecVirtual }

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
// planes 7, 5, 6, 4 (cpu.bitsAmxPerm). It prefetches bitsAmxPrefetch chunks
// ahead.
func (u *bitsUnpacker) unpack(wp, dst GPVirtual) {
	rows16(wp, func(i int, src Mem) {
		for h := 0; h < 2; h++ {
			PREFETCHT0(src.Offset(128*bitsAmxPrefetch + 64*h))
			w := ZMM()
			VMOVDQU64(src.Offset(64*h), w)
			x, y := u.regroup(w)
			VMOVDQU64(x, Mem{Base: dst, Disp: 1024*h + 64*i})
			VMOVDQU64(y, Mem{Base: dst, Disp: 2048 + 1024*h + 64*i})
		}
	})
}

// rows16 calls body for 16 rows in turn, stride bytes apart from wp,
// with an operand addressing each (four rows per base step).
func rows16(wp GPVirtual, body func(i int, row Mem)) {
	stride, stride3, row := GP64(), GP64(), GP64()
	MOVQ(param("stride"), stride)
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)
	MOVQ(wp, row)
	for i := 0; i < 16; i++ {
		body(i, []Mem{{Base: row}, {Base: row, Index: stride, Scale: 1},
			{Base: row, Index: stride, Scale: 2}, {Base: row, Index: stride3, Scale: 1}}[i%4])
		if i%4 == 3 && i != 15 {
			LEAQ(Mem{Base: row, Index: stride, Scale: 4}, row)
		}
	}
}

// bitsNextTile ends a Bits batch kernel's tile loop (label name+"_tile"):
// out moves outBytes on, w 16 rows down, meta metaTiles metadata tiles of
// the matrix on, and the kernel returns after ntiles tiles (running exit
// first, if any).
func bitsNextTile(name string, outBytes, metaTiles, metaBlock int, exit ...func()) {
	bump("out", U32(outBytes))
	t := param("stride")
	SHLQ(U8(4), t)
	bump("w", t)
	mt := param("chunks")
	IMUL3Q(U32(metaTiles*metaBlock), mt, mt)
	bump("meta", mt)
	nt := param("ntiles")
	DECQ(nt)
	Store(nt, Param("ntiles"))
	JNZ(LabelRef(name + "_tile"))
	for _, f := range exit {
		f()
	}
	VZEROUPPER()
	RET()
}

// regroup returns the dwords of w (4-bit words) regrouped as block 0's
// planes [lo.b2, lo.b3, hi.b2, hi.b3] and block 1's [lo.b0, lo.b1, hi.b0,
// hi.b1] (see unpack).
func (u *bitsUnpacker) regroup(w VecVirtual) (x, y VecVirtual) {
	lo, hi := ZMM(), ZMM()
	x, y = ZMM(), ZMM()
	VGF2P8AFFINEQB(U8(0), u.gfShr4, w, hi) // hi = w >> 4 per byte
	VPANDD(w, u.mask, lo)
	VPSRLD(U8(16), lo, x)
	VPBLENDMW(hi, x, u.odd, x)
	VPSLLD(U8(16), hi, y)
	VPBLENDMW(y, lo, u.odd, y)
	return x, y
}

// bitsRowPrefetch prefetches the two lines of each of 16 rows' chunk
// bitsAmxPrefetch chunks past wp into L1.
func bitsRowPrefetch(wp GPVirtual) {
	rows16(wp, func(_ int, src Mem) {
		for h := 0; h < 2; h++ {
			PREFETCHT0(src.Offset(128*bitsAmxPrefetch + 64*h))
		}
	})
}
