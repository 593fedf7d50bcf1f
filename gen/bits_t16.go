package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// bitsA8TAVX512 emits Bits<n>A8[Meta16]T<M>Avx512, the M-vector W(n)A8
// kernel of Bits matrices (n = 8 or 4, groups of at least 128 columns)
// with rows in the lanes, for AVX-512 machines without AMX: the data flow
// of the AMX kernels (bitsA8AMX) with VPDPBUSD for TDPBUSD. Per tile of 16
// rows and chunk, the rows' 128 bytes are regrouped as the AMX A tiles are
// (n = 4: bitsUnpacker) and transposed (16x16 dwords per 64 bytes of the
// rows), so that dword t of 16 rows sits in one register; each VPDPBUSD
// then multiplies four codes of 16 rows by one vector's four activations,
// broadcast from memory, with no horizontal sums. One int32 accumulator
// per vector starts at -z*isum; the scales are applied per block into the
// float sums kept at out, in block order, as layout.(*Bits).DotA8Exact
// defines.
func bitsA8TAVX512(n, M int, meta16 bool) {
	bpc := 8 / n
	m16 := map[bool]string{true: "Meta16"}[meta16]
	name := fmt.Sprintf("Bits%dA8%sT%dAvx512", n, m16, M)
	TEXT(name, 0, bitsKernelSig) // not NOSPLIT: the scratch frame
	Pragma("noescape")
	metaBlock := map[bool]int{false: 128, true: 64}[meta16]
	block := 128*M + 128 // activation bytes per block
	kernelDoc("Bits int8 kernels", fmt.Sprintf("%s computes W%dA8 dot products of Bits matrices with AVX-512 VNNI for tiles of 16 rows (in the lanes) and a batch of M = %d, out vector-major.", name, n, M))

	// Scratch: the transposed codes, per block 32 vectors (dword t of the
	// rows' words 16h..16h+15 at 64*(16h+t)).
	scr := alignedScratch(bpc * 2048)
	var u *bitsUnpacker
	if n == 4 {
		u = newBitsUnpacker()
	}
	ep := bitsAmxRegs{s: ZMM(), z: ZMM(), xs: ZMM(), isum: ZMM(), c: ZMM(), t: ZMM(), f: ZMM()}

	Label(name + "_tile")
	op := param("out")
	{
		zero := ZMM()
		VPXORD(zero, zero, zero)
		for v := 0; v < M; v++ {
			VMOVUPS(zero, Mem{Base: op, Disp: 64 * v})
		}
	}
	wp, mp, ap, k := param("w"), param("meta"), param("act"), param("chunks")
	pf := nextTile(wp, 16) // the next tile's rows, one linear run

	Label(name + "_chunk")
	// The rows' chunk, 64 bytes of 16 rows at a time, transposed (and for
	// n = 4 regrouped into block 0's and block 1's planes, as the AMX
	// kernels' A tiles are: bitsUnpacker).
	for h := 0; h < 2; h++ {
		rs := make([]Register, 16)
		rows16(wp, func(i int, row Mem) {
			rs[i] = ZMM()
			VMOVDQU64(row.Offset(64*h), rs[i])
		})
		for t, r := range transpose16(rs) {
			d := 16*h + t
			if n == 8 {
				VMOVDQU64(r, scr.Offset(64*d))
				continue
			}
			x, y := u.regroup(r.(VecVirtual))
			VMOVDQU64(x, scr.Offset(64*d))
			VMOVDQU64(y, scr.Offset(2048+64*d))
		}
	}
	// The next tile's 16 rows are one contiguous run: 2 KiB of it per
	// chunk covers it by the tile's end, into L2, as the one-vector
	// kernels do (16 row streams from DRAM read slower).
	for i := 0; i < 32; i++ {
		PREFETCHT1(Mem{Base: pf, Disp: 64 * i})
	}
	ADDQ(U32(2048), pf)

	for b := 0; b < bpc; b++ {
		s, z := bitsAmxMeta(n, 1, b, meta16, mp, nil, ep)
		if s == nil { // float32 scales and int32 zeros in row order
			s, z = ep.s, ep.z
			VMOVUPS(Mem{Base: mp}, s)
			VMOVDQU32(Mem{Base: mp, Disp: 64}, z)
		}
		// acc[v] lane i: row i's dot with vector v over the block minus
		// z*isum_v, the zero-point term as the accumulator's start.
		{
			zero := ZMM()
			VPXORD(zero, zero, zero)
			VPSUBD(z, zero, z)
		}
		ab := block * b
		acc := make([]VecVirtual, M)
		for v := range acc {
			acc[v] = ZMM()
			VPMULLD_BCST(Mem{Base: ap, Disp: ab + 128*M + 64 + 4*v}, z, acc[v])
		}
		for d := 0; d < 32; d++ { // dword d = 16h + t of the rows' words
			w := ZMM()
			VMOVDQU64(scr.Offset(2048*b+64*d), w)
			for v := 0; v < M; v++ {
				VPDPBUSD_BCST(Mem{Base: ap, Disp: ab + 128*v + 4*d}, w, acc[v])
			}
		}
		// out[v] += float(acc) * (s * xs_v), per row lane.
		for v := 0; v < M; v++ {
			f := ZMM()
			VCVTDQ2PS(acc[v], acc[v])
			VMULPS_BCST(Mem{Base: ap, Disp: ab + 128*M + 4*v}, s, f)
			VMULPS(acc[v], f, f)
			VADDPS(Mem{Base: op, Disp: 64 * v}, f, f)
			VMOVUPS(f, Mem{Base: op, Disp: 64 * v})
		}
	}
	ADDQ(U32(128), wp)
	ADDQ(U32(metaBlock), mp)
	ADDQ(U32(bpc*block), ap)
	DECQ(k)
	JNZ(LabelRef(name + "_chunk"))

	bitsNextTile(name, 64*M, bpc, metaBlock)
}
