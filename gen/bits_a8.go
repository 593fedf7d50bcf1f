package main

import (
	"fmt"
	"slices"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Bits(n, g) with int8 activations, AVX-512 VNNI + VBMI, batch 1
// (asm/bits_a8_amd64.s); bits_a8_avx2.go has the YMM kernels.

// bitsA8Kernels emits the Bits int8-activation family: AVX-512 VNNI +
// VBMI (float32 or binary16 metadata), then AVX2 and AVX-VNNI on YMM.
func bitsA8Kernels() {
	for _, meta16 := range []bool{false, true} {
		for _, n := range []int{8, 4, 2, 1} {
			bitsA8AVX512(n, 1, meta16, map[bool]pfMode{false: pfL2, true: pfL1}[n <= 2])
			if n == 4 {
				bitsA8AVX512(n, 1, meta16, pfL1)
				bitsA8AVX512(n, 1, meta16, pfNTA)
			}
			if n > 1 { // 1 bit: two 1.8 KB rows per tile of 4096x14336 leave too short a lead (cpu.leadFits)
				bitsA8AVX512(n, 1, meta16, pfLead)
			}
			if n == 1 { // 1 bit: no transposed kernels (groups of 32: 32 lanes per row, more than a ZMM holds)
				bitsA8AVX512(n, 2, meta16, pfL1)
			} else {
				bitsA8G32AVX512(n, 2, meta16, pfL2)
				bitsA8G32AVX512(n, 1, meta16, pfL2)
				if n == 8 { // four-row tiles; Bits4G32's two-row ones took 1.16-1.24x the time with it (cpu.leadFits)
					bitsA8G32AVX512(n, 1, meta16, pfLead)
				}
			}
		}
	}
	bits3A8AVX512(128)
	bits3A8AVX512(64)
	for _, n := range []int{8, 4, 2, 1} {
		for _, u := range []int{128, 64, 32} {
			if 128*(8/n)/u <= 8 { // units per chunk fit the 8 lanes of a YMM
				for _, meta16 := range []bool{false, true} {
					bitsA8YMM(n, u, modeAVX2, meta16)
					bitsA8YMM(n, u, modeAVXVNNI, meta16)
				}
			}
		}
	}
	bits3A8YMM()
	for _, meta16 := range []bool{false, true} {
		for _, n := range []int{8, 4} {
			for _, m := range []int{2, 4, 8, 16} {
				bitsA8TAVX512(n, m, meta16)
			}
		}
	}
	for _, meta16 := range []bool{false, true} {
		for _, n := range []int{8, 4} {
			for _, sub := range []int{1, 2, 4} {
				for _, m := range []int{1, 2, 4, 8, 16} {
					bitsA8AMX(n, sub, m, meta16)
				}
			}
		}
	}
}

// bitsA8AVX512 emits the W(n)A8 kernel for Bits with n in 8, 4, 2, 1 and
// groups of at least 128 columns. A chunk (32 words, 128 bytes) of a row
// holds bpc = 8/n blocks of 128 columns; a tile is R = 16/bpc rows, so the
// 16 accumulators are the (row, block) pairs of one chunk, lane i*bpc + b.
// VPMULTISHIFTQB regroups the codes so each dword lane holds the 4 codes of
// planes 4b..4b+3 of one block (n = 8 needs no regrouping: the word's bytes
// are planes 3..0), so every VPDPBUSD sums within one block.
//
// With sub = 2 or 4 (groups of 64 or 32 columns) each block is sub
// sub-blocks of 128/sub columns (planes): every regrouped vector is
// multiplied sub times, with the activations of the other sub-blocks
// zeroed, so each int32 sum stays inside one group; tiles are then
// 16/(sub*bpc) rows.
//
// With meta16 (kernels named ...Meta16...) the metadata per tile and chunk
// is 16 binary16 scales and 16 int16 zeros (64 bytes, the format's own 4
// bytes per row and group) instead of 16 float32 scales and 16 int32
// zeros (128 bytes): widening is exact, so the result is the same bits,
// and at 2 bits per weight the metadata read drops from 8/40 to 4/36 of
// the bytes.
//
// pf says where the kernel prefetches its next tile: L2, L1 or
// non-temporally (named ...PfL1... or ...PfNta... where the kernel also
// comes with L2).
func bitsA8AVX512(n, sub int, meta16 bool, pf pfMode) {
	bpc := 8 / n
	R := 16 / (bpc * sub)
	m16 := map[bool]string{true: "Meta16"}[meta16]
	if n > 2 || pf == pfLead { // the variants of a kernel that prefetches into L2 (or L1: 2 and 1 bits)
		m16 += map[pfMode]string{pfL1: "PfL1", pfNTA: "PfNta", pfLead: "PfLead"}[pf]
	}
	name := fmt.Sprintf("Bits%dA8%sAvx512", n, m16)
	if sub > 1 {
		name = fmt.Sprintf("Bits%dA8G%d%sAvx512", n, 128/sub, m16)
	}
	L := bpc * sub // lanes (blocks) per row and chunk
	TEXT(name, NOSPLIT, bitsKernelSig)
	Pragma("noescape")
	actChunk := L*128 + 128
	metaBlock := map[bool]int{false: 128, true: 64}[meta16]
	kernelDoc("Bits int8 kernels", fmt.Sprintf("%s computes W%dA8 dot products of Bits matrices with AVX-512 VNNI and VBMI, blocks of %d columns (groups of %s): tiles of R = %d rows, L = %d lanes per row and chunk, %s metadata (%d bytes per tile and chunk), %d act bytes per chunk.",
		name, n, 128/sub, map[int]string{1: "at least 128", 2: "64", 4: "32"}[sub], R, L, map[bool]string{false: "float32", true: "binary16"}[meta16], metaBlock, actChunk))
	mask := ZMM()
	{
		t := GP32()
		MOVL(U32(uint32(0x01010101)*uint32(1<<n-1)), t)
		VPBROADCASTD(t, mask)
	}
	ctrls := make([]VecVirtual, 0, bpc)
	if n != 8 {
		cp := param("ctrl")
		for b := 0; b < bpc; b++ {
			c := ZMM()
			VMOVDQU64(Mem{Base: cp, Disp: 64 * b}, c)
			ctrls = append(ctrls, c)
		}
	}

	// The 2- and 1-bit kernels prefetch their next tile into L1, not L2;
	// the 4-bit ones come in all three variants (the CPU picks:
	// docs/KERNELS.md).
	lowA8Loops(name, R, L, actChunk, metaBlock, 16, pf,
		func(i int, wp, ap, mp GPVirtual, acc []VecVirtual) {
			for h := 0; h < 2; h++ {
				data := ZMM()
				VMOVDQU64(Mem{Base: wp, Disp: 64 * h}, data)
				for b := 0; b < bpc; b++ {
					codes := data
					if n != 8 {
						codes = ZMM()
						VPMULTISHIFTQB(data, ctrls[b], codes)
						VPANDD(codes, mask, codes)
					}
					for sb := 0; sb < sub; sb++ {
						j := b*sub + sb
						VPDPBUSD(Mem{Base: ap, Disp: (j*2 + h) * 64}, codes, acc[i*L+j])
					}
				}
			}
		}, nil, bitsA8Epilogue(meta16, L*128))
}

// bitsA8Epilogue returns the lane float scales step of the Bits A8
// kernels (lowA8Loops' epilogue): isum -= zero*sum(x), then scale*xs per
// lane, with the activation scales and sums at act + data.
func bitsA8Epilogue(meta16 bool, data int) func(isum VecVirtual, ap, mp GPVirtual) VecVirtual {
	return func(isum VecVirtual, ap, mp GPVirtual) VecVirtual {
		zl, f := ZMM(), ZMM()
		if meta16 {
			VPMOVSXWD(Mem{Base: mp, Disp: 32}, zl)
			VCVTPH2PS(Mem{Base: mp}, f)
		} else {
			VMOVDQU32(Mem{Base: mp, Disp: 64}, zl)
			VMOVUPS(Mem{Base: mp}, f)
		}
		VPMULLD(Mem{Base: ap, Disp: data + 64}, zl, zl)
		VPSUBD(zl, isum, isum)
		VMULPS(Mem{Base: ap, Disp: data}, f, f)
		return f
	}
}

// bits3Quad is a VPDPBUSD step of the 3-bit A8 kernels: the block (unit
// of the exact sum) summed, the chunk of the period read, and the first
// of the four planes of that chunk its VPMULTISHIFTQB control vector puts
// in bytes 0..3 of each dword.
type bits3Quad struct{ block, chunk, first int }

// bits3Quads returns the steps of a period of two chunks (20 planes) for
// blocks of unit columns (128: 5 blocks, 64: 10), in order, and the
// distinct first planes in order of appearance (control vector j has
// firsts[j]). A block's planes in one chunk form one step, whose other
// planes meet zero activations. cpu/lowbit_amd64.go (bits3Quads) follows
// the same rule.
func bits3Quads(unit int) ([]bits3Quad, []int) {
	P := unit / 32 // planes per block
	var qs []bits3Quad
	var firsts []int
	for b := 0; b < 20/P; b++ {
		p0 := b * P
		for c := p0 / 10; c <= (p0+P-1)/10; c++ {
			first := min(max(p0, 10*c)-10*c, 6)
			qs = append(qs, bits3Quad{b, c, first})
			if !slices.Contains(firsts, first) {
				firsts = append(firsts, first)
			}
		}
	}
	return qs, firsts
}

// bits3A8AVX512 emits the W3A8 kernel for Bits(3, g) with blocks of unit
// = 128 (g >= 128) or 64 columns: ten 3-bit planes per word, so two chunks
// (256 bytes of a row) hold 640 columns and a 128-column block can
// straddle them. A tile is 16 rows; per period of two chunks and per
// block the 16 accumulators are the tile's rows (lane i = row i after
// reduce16).
func bits3A8AVX512(unit int) {
	name := "Bits3A8Avx512"
	if unit < 128 {
		name = fmt.Sprintf("Bits3A8G%dAvx512", unit)
	}
	quads, firsts := bits3Quads(unit)
	const R = 16
	nq, nb := len(quads), 640/unit
	actChunk, metaBlock := nq*128+nb*128, nb*128
	TEXT(name, NOSPLIT, bitsKernelSig)
	Pragma("noescape")
	kernelDoc("Bits int8 kernels", fmt.Sprintf("%s computes W3A8 dot products of Bits matrices with AVX-512 VNNI and VBMI, blocks of %d columns (groups of %s): tiles of 16 rows, periods of two chunks holding %d blocks and %d quads (act %d bytes per period, meta %d bytes per tile and period), %d ctrl vectors.",
		name, unit, map[int]string{128: "at least 128", 64: "64"}[unit], nb, nq, actChunk, metaBlock, len(firsts)))
	mask := fvec{avx512: true}.broadcast(0x07070707)
	tileChunks(name, R, metaBlock, 256, ZMM, func(a VecVirtual) { VPXORD(a, a, a) }, func(k, pf GPVirtual, accRow VecVirtual) {
		ap, mp, wp := chunkPtrs(k, actChunk, metaBlock, 256)
		stride := param("stride")
		// one set of registers for every block (avo's greedy allocator
		// fails with fresh ones per block)
		acc := make([]VecVirtual, R)
		for i := range acc {
			acc[i] = ZMM()
		}
		ctrls := make([]VecVirtual, len(firsts))
		for j := range ctrls {
			ctrls[j] = ZMM()
		}
		for b := 0; b < nb; b++ {
			// the block's control vectors (loaded per block: registers)
			cp := param("ctrl")
			loaded := map[int]bool{}
			for _, qd := range quads {
				if j := slices.Index(firsts, qd.first); qd.block == b && !loaded[j] {
					loaded[j] = true
					VMOVDQU64(Mem{Base: cp, Disp: 64 * j}, ctrls[j])
				}
			}
			for i := range acc {
				VPXORD(acc[i], acc[i], acc[i])
			}
			rp := GP64()
			MOVQ(wp, rp)
			for i := 0; i < R; i++ {
				if b < 4 { // the next tile's period, one line per row and block
					PREFETCHT1(Mem{Base: pf, Disp: 256*i + 64*b})
				}
				for q, qd := range quads {
					if qd.block != b {
						continue
					}
					for h := 0; h < 2; h++ {
						codes := ZMM()
						VPMULTISHIFTQB(Mem{Base: rp, Disp: 128*qd.chunk + 64*h}, ctrls[slices.Index(firsts, qd.first)], codes)
						VPANDD(codes, mask, codes)
						VPDPBUSD(Mem{Base: ap, Disp: (2*q + h) * 64}, codes, acc[i])
					}
				}
				if i != R-1 {
					ADDQ(stride, rp)
				}
			}
			blockTerm(fvec{avx512: true}, reduce16(acc), accRow, Mem{Base: mp, Disp: b * 128}, Mem{Base: ap, Disp: nq*128 + b*128})
		}
	})
}

// bitsA8G32AVX512 emits the W(n)A8 kernel for Bits with n in 8, 4, 2 and
// groups of 32 columns (pg = 1: each plane of a chunk is its own group) or
// 64 (pg = 2: two neighbouring planes). Instead of multiplying regrouped
// codes once per group with the other groups' activations zeroed
// (bitsA8AVX512 with sub = 4 or 2: four or two VPDPBUSD per code byte),
// VPERMB transposes each 64-byte half of a row's chunk so that qword l
// holds byte b = l%4 of 8 consecutive words (words 8(l/4)..+7 of the
// half); masks and dword shifts then take one n-bit field f of every
// byte, so every dword holds 4 codes of one plane (32/n - 8b/n - f - 1)
// and each VPDPBUSD sums inside one group: one multiply per code byte. The
// 4*pg accumulators of a tile (R = pg*n/2 rows times 8/n fields) keep each
// plane at the same four dword positions (l in {b, b+4}, both dwords).
// Two folding levels (VSHUFI64X2, then VSHUFPS pairs) leave one plane per
// lane; with pg = 1 a VPERMD, with pg = 2 two VPERMI2D (a group's two
// planes) and an add put row i's group j at lane i*L + j, the lane order,
// metadata and activation tail of the sub = 4 or 2 kernels. The
// activations of a chunk are one byte per column in the transposed order
// (cpu.bitsG32Sources).
func bitsA8G32AVX512(n, pg int, meta16 bool, pf pfMode) {
	f, R, E, L := 8/n, pg*n/2, 1024/n, 32/n/pg
	m16 := map[bool]string{true: "Meta16"}[meta16]
	if pf == pfLead {
		m16 += "PfLead"
	}
	name := fmt.Sprintf("Bits%dA8G%d%sAvx512", n, 32*pg, m16)
	TEXT(name, NOSPLIT, bitsKernelSig)
	Pragma("noescape")
	actChunk := E + 128
	metaBlock := map[bool]int{false: 128, true: 64}[meta16]
	kernelDoc("Bits int8 kernels", fmt.Sprintf("%s computes W%dA8 dot products of Bits matrices with AVX-512 VNNI and VBMI, groups of %d columns: tiles of R = %d rows, one VPDPBUSD per 64 code bytes after a VPERMB byte transpose, %s metadata (%d bytes per tile and chunk), %d act bytes per chunk.",
		name, n, 32*pg, R, map[bool]string{false: "float32", true: "binary16"}[meta16], metaBlock, actChunk))
	mask := ZMM()
	if n != 8 {
		t := GP32()
		MOVL(U32(uint32(0x01010101)*uint32(1<<n-1)), t)
		VPBROADCASTD(t, mask)
	}
	perm := ZMM()
	VMOVDQU64(rodata("bitsG32Transpose", 64, 1, func(j int) uint64 { return uint64(g32TransposeByte(j)) }), perm)
	lanes := g32FinalLanes(n, pg)
	var fin VecVirtual
	var pairIdx [2]Mem
	if pg == 1 {
		fin = ZMM()
		VMOVDQU32(rodata(fmt.Sprintf("bits%dG32Lanes", n), 16, 4, func(j int) uint64 { return uint64(lanes[0][j]) }), fin)
	} else {
		for h := range pairIdx {
			pairIdx[h] = rodata(fmt.Sprintf("bits%dG64Lanes%d", n, h), 16, 4, func(j int) uint64 { return uint64(lanes[h][j]) })
		}
	}
	// fold: lanes 0..7 = A[m] + A[m+8], lanes 8..15 the same of B
	fold := func(a, b VecVirtual) VecVirtual {
		t1, t2 := ZMM(), ZMM()
		VSHUFI64X2(U8(0x44), b, a, t1)
		VSHUFI64X2(U8(0xEE), b, a, t2)
		VPADDD(t2, t1, t1)
		return t1
	}
	// pairs: per 128-bit lane [x0+x1, x2+x3, y0+y1, y2+y3]
	pairs := func(x, y VecVirtual) VecVirtual {
		t1, t2 := ZMM(), ZMM()
		VSHUFPS(U8(0x88), y, x, t1)
		VSHUFPS(U8(0xDD), y, x, t2)
		VPADDD(t2, t1, t1)
		return t1
	}
	reduce := func(acc []VecVirtual) VecVirtual {
		isum := ZMM()
		if pg == 1 {
			VPERMD(pairs(fold(acc[0], acc[1]), fold(acc[2], acc[3])), fin, isum)
			return isum
		}
		y0 := pairs(fold(acc[0], acc[1]), fold(acc[2], acc[3]))
		y1 := pairs(fold(acc[4], acc[5]), fold(acc[6], acc[7]))
		odd := ZMM()
		VMOVDQU32(pairIdx[0], isum)
		VPERMI2D(y1, y0, isum)
		VMOVDQU32(pairIdx[1], odd)
		VPERMI2D(y1, y0, odd)
		VPADDD(odd, isum, isum)
		return isum
	}
	lowA8Loops(name, R, L, actChunk, metaBlock, 4*pg, pf,
		func(i int, wp, ap, mp GPVirtual, acc []VecVirtual) {
			for r := 0; r < 2; r++ {
				t := ZMM()
				VPERMB(Mem{Base: wp, Disp: 64 * r}, perm, t)
				for fi := 0; fi < f; fi++ {
					codes := t
					switch {
					case n == 8:
					case fi == 0:
						codes = ZMM()
						VPANDD(t, mask, codes)
					default:
						codes = ZMM()
						VPSRLD(U8(n*fi), t, codes) // bits crossing a byte are masked off
						VPANDD(codes, mask, codes)
					}
					VPDPBUSD(Mem{Base: ap, Disp: (r*f + fi) * 64}, codes, acc[i*f+fi])
				}
			}
		}, reduce, bitsA8Epilogue(meta16, E))
}

// g32TransposeByte is the VPERMB index of the G32 kernels: output byte
// 8l + e of a 64-byte half takes byte l%4 of word 8(l/4) + e.
func g32TransposeByte(j int) int {
	l, e := j/8, j%8
	return 4*(8*(l/4)+e) + l%4
}

// g32Plane returns the plane of field fi (bits n*fi of the byte) of byte
// b of a word: plane p sits at bit 32 - n(p+1).
func g32Plane(n, b, fi int) int { return 32/n - 8*b/n - fi - 1 }

// g32FinalLanes returns the final lane selection of the G32 (pg = 1) and
// G64 (pg = 2) kernels: lane i*L + j of the result takes, from the folded
// sums, the lane holding row i's group j: with pg = 1 one VPERMD index
// (in [0]), with pg = 2 two VPERMI2D indexes over the two folded vectors
// (lane 16 + m is lane m of the second), the group's first and second
// plane. The folding is simulated on sets of (accumulator, dword)
// contributions, and the generator stops if a lane mixes planes.
func g32FinalLanes(n, pg int) (idx [2][16]int) {
	f, P := 8/n, 32/n // fields per byte, planes per chunk
	type src struct{ a, pos int }
	type lanes [16][]src
	acc := make([]lanes, 4*pg)
	for a := range acc {
		for pos := range 16 {
			acc[a][pos] = []src{{a, pos}}
		}
	}
	fold := func(a, b lanes) (x lanes) {
		for m := range 8 {
			x[m] = append(slices.Clone(a[m]), a[m+8]...)
			x[8+m] = append(slices.Clone(b[m]), b[m+8]...)
		}
		return x
	}
	pairs := func(x, y lanes) (z lanes) { // VSHUFPS 0x88 + 0xDD, per 128-bit lane
		for q := range 4 {
			for j := range 4 {
				s, o := x, 4*q+2*(j%2)
				if j >= 2 {
					s = y
				}
				z[4*q+j] = append(slices.Clone(s[o]), s[o+1]...)
			}
		}
		return z
	}
	// where[(row, plane)] = lane of the folded vectors (16*vector + lane)
	where := map[[2]int]int{}
	for v := 0; v < pg; v++ {
		z := pairs(fold(acc[4*v], acc[4*v+1]), fold(acc[4*v+2], acc[4*v+3]))
		for zl, cs := range z {
			key := [2]int{-1, -1}
			for _, c := range cs {
				k := [2]int{c.a / f, g32Plane(n, (c.pos/2)%4, c.a%f)}
				if key[0] >= 0 && k != key || len(cs) != 4 {
					panic(fmt.Sprintf("bits%d G%d: folded lane %d mixes planes", n, 32*pg, zl))
				}
				key = k
			}
			where[key] = 16*v + zl
		}
	}
	for i := 0; i < pg*n/2; i++ {
		for j := 0; j < P/pg; j++ {
			for h := 0; h < pg; h++ {
				l, ok := where[[2]int{i, pg*j + h}]
				if !ok {
					panic(fmt.Sprintf("bits%d G%d: row %d plane %d has no lane", n, 32*pg, i, pg*j+h))
				}
				idx[h][i*(P/pg)+j] = l
			}
		}
	}
	return idx
}
