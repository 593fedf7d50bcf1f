package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Bits4 with int8 activations, AVX-512 VNNI + VBMI, batch 1, one row at
// a time (asm/bits_a8_amd64.s).
//
// The tile kernels (bitsA8AVX512) read the 8 rows of a tile chunk by
// chunk, 8 interleaved streams; a thread reading its rows as one sequence
// streams faster (cpu.BenchmarkReadPatterns). These kernels walk the same
// tiles, metadata and activations row after row: per row, steps of 8
// chunks (1 KiB, 16 blocks of 128 columns) go into 16 accumulators, one
// per block, so one reduce16 yields the step's 16 block sums in column
// order; the block terms are then added to the row's float32 sum one by
// one, in column order, as DotA8Exact does. A row's metadata (2 lanes in
// each chunk's 64 or 128 bytes) and its blocks' activation scales and sums
// (2 lanes in each chunk's act block) are gathered.

// bitsRowPf is where a row kernel prefetches, and how far ahead of the
// step it reads (bytes; 0: no software prefetch).
type bitsRowPf struct {
	mode pfMode
	dist int
}

func (p bitsRowPf) suffix() string {
	if p.dist == 0 {
		return ""
	}
	return fmt.Sprintf("Pf%s%d", map[pfMode]string{pfL2: "L2", pfL1: "L1", pfNTA: "Nta"}[p.mode], p.dist)
}

// bitsRowSteps is the chunks of one step of the row kernels: 16 blocks
// of 128 columns at two blocks per 4-bit chunk.
const bitsRowSteps = 8

// bitsA8RowAVX512 emits Bits4A8RowMeta16Avx512[Pf..]: the row-at-a-time
// W4A8 kernel for groups of at least 128 columns with binary16 metadata.
// Same signature, tiles (R = 8 rows, L = 2 lanes a row and chunk) and meta
// as Bits4A8Meta16Avx512, chunks a multiple of bitsRowSteps; act as that
// kernel's, followed per step by its 16 blocks' activation scales
// (float32, block order) and sums (int32). Each tile stores its 8 results
// as 8 consecutive float32 at out.
//
// The 16 block terms of a step are added to the row sum one at a time
// (a chain of 16 dependent adds); so that the chain runs beside the
// multiplies, each step's terms are added during the next step's
// multiplies, two after each chunk: a row's last terms during the next
// row's first step, which then stores that row's sum (the call's first
// step stores a zero to a stack slot), and the call's last row after
// its tiles.
func bitsA8RowAVX512(pf bitsRowPf) {
	const n, L, R, S = 4, 2, 8, bitsRowSteps
	const metaBlock, actChunk = 64, L*128 + 128
	name := fmt.Sprintf("Bits%dA8RowMeta16Avx512%s", n, pf.suffix())
	TEXT(name, NOSPLIT, bitsKernelSig)
	Pragma("noescape")
	kernelDoc("Bits int8 kernels", fmt.Sprintf("%s computes W%dA8 dot products of Bits matrices with AVX-512 VNNI and VBMI one row at a time, blocks of 128 columns: the tiles and binary16 metadata of Bits%dA8Meta16Avx512, steps of %d chunks, 8 results a tile.", name, n, n, S))
	mask := ZMM()
	{
		t := GP32()
		MOVL(U32(uint32(0x01010101)*uint32(1<<n-1)), t)
		VPBROADCASTD(t, mask)
	}
	cp := param("ctrl")
	ctrls := []VecVirtual{ZMM(), ZMM()}
	for b, c := range ctrls {
		VMOVDQU64(Mem{Base: cp, Disp: 64 * b}, c)
	}
	// The permutes that collect row i's metadata dwords of a step's 8
	// chunks (dword i: its two scales, dword 8+i: its two zeros, of each
	// chunk's 64 bytes) into scales in lanes 0..7 and zeros in lanes
	// 8..15: pairs of chunks (per row: i + {0, 16, 8, 24}), then pairs of
	// pairs, then halves.
	idx1 := ZMM()
	perm1 := rodata("bitsRowPerm1", 16, 4, func(j int) uint64 { return uint64([]int{0, 16, 8, 24}[j%4]) })
	perm2 := rodata("bitsRowPerm2", 16, 4, func(j int) uint64 { return uint64([]int{0, 1, 16, 17, 2, 3, 18, 19}[j%8]) })
	perm3 := rodata("bitsRowPerm3", 16, 4, func(j int) uint64 {
		return uint64([]int{0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23}[j])
	})

	acc := XMM() // the pending row's sum
	VXORPS(acc, acc, acc)
	terms := AllocLocal(64) // its terms not yet added
	slot := AllocLocal(8)   // 4 bytes used; frames are 8-byte aligned
	VPXORD(acc.AsZ(), acc.AsZ(), acc.AsZ())
	VMOVUPS(acc.AsZ(), terms)
	prevp := GP64() // where the pending row's sum goes
	LEAQ(slot, prevp)

	Label(name + "_tile")
	i := GP64()
	XORQ(i, i)
	Label(name + "_row")
	wp := GP64()
	MOVQ(i, wp)
	IMULQ(param("stride"), wp)
	ADDQ(param("w"), wp)
	VPBROADCASTD(i.As32(), idx1)
	VPADDD(perm1, idx1, idx1)
	mp := param("meta")
	ap := param("act")
	steps := param("chunks")
	sp := GP64() // the steps' activation scales and sums
	IMUL3Q(U32(actChunk), steps, sp)
	ADDQ(ap, sp)
	SHRQ(U8(log2(S)), steps)
	first := GP64()
	MOVQ(U32(1), first)

	// step emits one step: the multiplies with fprev's adds between the
	// chunks, then the step's terms in f.
	step := func() VecVirtual {
		accs := make([]VecVirtual, 16)
		for j := range accs {
			accs[j] = ZMM()
			VPXORD(accs[j], accs[j], accs[j])
		}
		if pf.dist != 0 {
			prefetch := map[pfMode]func(Op){pfL2: PREFETCHT1, pfL1: PREFETCHT0, pfNTA: PREFETCHNTA}[pf.mode]
			for o := 0; o < S*128; o += 64 {
				prefetch(Mem{Base: wp, Disp: pf.dist + o})
			}
		}
		for c := 0; c < S; c++ {
			for h := 0; h < 2; h++ {
				data := ZMM()
				VMOVDQU64(Mem{Base: wp, Disp: 128*c + 64*h}, data)
				for b := 0; b < 2; b++ {
					codes := ZMM()
					VPMULTISHIFTQB(data, ctrls[b], codes)
					VPANDD(codes, mask, codes)
					VPDPBUSD(Mem{Base: ap, Disp: c*actChunk + (b*2+h)*64}, codes, accs[c*L+b])
				}
			}
			for k := 2 * c; k < 2*c+2; k++ { // terms 2c, 2c+1 of the previous step
				VADDSS(terms.Offset(4*k), acc, acc)
			}
		}
		isum := reduce16(accs) // lane 2c+b: block b of chunk c, column order

		var q [4]VecVirtual
		for p := range q {
			q[p] = ZMM()
			VMOVDQU32(Mem{Base: mp, Disp: 2 * p * metaBlock}, q[p])
			VPERMT2D(Mem{Base: mp, Disp: (2*p + 1) * metaBlock}, idx1, q[p])
		}
		idx2, idx3 := ZMM(), ZMM()
		VMOVDQU32(perm2, idx2)
		VPERMT2D(q[1], idx2, q[0])
		VPERMT2D(q[3], idx2, q[2])
		VMOVDQU32(perm3, idx3)
		VPERMT2D(q[2], idx3, q[0])
		f, zl, zh := ZMM(), ZMM(), YMM()
		VCVTPH2PS(q[0].AsY(), f)
		VEXTRACTI64X4(U8(1), q[0], zh)
		VPMOVSXWD(zh, zl)
		VPMULLD(Mem{Base: sp, Disp: 64}, zl, zl)
		VPSUBD(zl, isum, isum)
		VMULPS(Mem{Base: sp}, f, f)
		VCVTDQ2PS(isum, isum)
		VMULPS(isum, f, f)

		ADDQ(U32(S*128), wp)
		ADDQ(U32(S*actChunk), ap)
		ADDQ(U32(S*metaBlock), mp)
		ADDQ(U32(8*S*L), sp)
		return f
	}

	Label(name + "_step")
	f := step()
	// The row's first step completes the previous row's sum.
	TESTQ(first, first)
	JZ(LabelRef(name + "_next"))
	VMOVSS(acc, Mem{Base: prevp})
	VXORPS(acc, acc, acc)
	LEAQ(Mem{Base: param("out"), Index: i, Scale: 4}, prevp)
	XORQ(first, first)
	Label(name + "_next")
	VMOVUPS(f, terms)
	DECQ(steps)
	JNZ(LabelRef(name + "_step"))
	INCQ(i)
	CMPQ(i, U8(R))
	JB(LabelRef(name + "_row"))

	bump("out", U32(4*R))
	t := param("stride")
	IMUL3Q(U32(R), t, t)
	bump("w", t)
	m := param("chunks")
	IMUL3Q(U32(metaBlock), m, m)
	bump("meta", m)
	nt := param("ntiles")
	DECQ(nt)
	Store(nt, Param("ntiles"))
	JNZ(LabelRef(name + "_tile"))

	// The last row's pending terms.
	for k := 0; k < 16; k++ {
		VADDSS(terms.Offset(4*k), acc, acc)
	}
	VMOVSS(acc, Mem{Base: prevp})
	VZEROUPPER()
	RET()
}

