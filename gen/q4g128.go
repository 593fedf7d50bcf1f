package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Q4G128 kernels (asm/q4g128_amd64.s): W4A8 and W4A32 with AVX-512,
// AVX-VNNI and AVX2.
//
// Every Q4G128 kernel works on "super tiles" of L consecutive rows (L is the
// number of 32-bit lanes of its result vector: 16 for AVX-512 W4A8, 8 for
// AVX-512 W4A32 and AVX2 W4A8, 4 for AVX2 W4A32) and a batch of M vectors
// (M a power of two, M <= L). A super tile is computed as M sub-tiles of
// R = L/M rows; the result lane k of a sub-tile is row k/M, vector k%M.
// Rows outside [0, PRows) are never touched, and the Go caller (package cpu)
// owns tails, threading and the scatter of results. q4t16.go has the
// kernels with rows in the lanes (batch 8 and 16).

// q4g128Kernels emits the Q4G128 family: W4A8 with AVX-512 VNNI (batch
// 1, 2, 4 in columns, batch 1 also on the CPU backend's super-tile order
// of the metadata; 8, 16 with rows in the lanes), AVX-VNNI and AVX2
// (batch 1..8), and W4A32 with AVX-512F (batch 1..8) and AVX2 (1..4).
func q4g128Kernels() {
	for _, m := range []int{1, 2, 4} {
		a8AVX512(m, false, metaBlocks)
	}
	a8AVX512(1, true, metaBlocks)
	a8AVX512(1, false, metaTiles)
	a8AVX512(1, true, metaTiles)
	a8TAVX512(8)
	a8TAVX512(16)
	for _, m := range []int{1, 2, 4, 8, 16} {
		a8AMX(m)
	}
	for _, m := range []int{1, 2, 4, 8} {
		a32(m, true)
	}
	for _, m := range []int{1, 2, 4, 8} {
		a8YMM(m, modeAVXVNNI, metaBlocks)
		a8YMM(m, modeAVX2, metaBlocks)
	}
	a8YMM(1, modeAVXVNNI, metaTiles)
	a8YMM(1, modeAVX2, metaTiles)
	a8YMMLead()
	for _, m := range []int{1, 2, 4} {
		a32(m, false)
	}
}

const kernelSig = "func(w *byte, stride int, sc *float32, z *byte, groups int, act *byte, idx *int32, out *float32, nst int)"

// q4Meta is the order of the scales and zeros a Q4G128 kernel walks.
type q4Meta int

const (
	// metaBlocks: the format's own (layout.Q4G128): per 128-row block
	// and group, the block's 128 scales (512 bytes) and zeros (64
	// bytes), so a 16-row super tile reads 64 bytes every 512 and 8
	// every 64.
	metaBlocks q4Meta = iota
	// metaTiles: per super tile (16 or 8 rows, the kernel's lanes) and
	// group, its scales and zero nibbles, one sequential stream (the CPU
	// backend's copy, cpu.q4Meta).
	metaTiles
)

// tileLoops emits the super-tile and sub-tile loops every Q4G128 kernel
// shares. sub emits one sub-tile (rows u*R .. u*R+R-1 of the super tile,
// u in register u) and must store its L results at the "out" argument.
func tileLoops(name string, lanes, m int, meta q4Meta, sub func(u GPVirtual)) {
	Label(name + "_st")
	u := GP64()
	XORQ(u, u)
	Label(name + "_sub")
	sub(u)
	bump("out", U32(4*lanes))
	INCQ(u)
	CMPQ(u, U32(m))
	JB(LabelRef(name + "_sub"))
	nextSuperTile(name, lanes, meta)
}

// nextSuperTile ends a Q4G128 kernel's super-tile loop (label name+"_st"):
// w moves lanes rows down, sc and zp to those rows' scales and zeros, and
// the kernel returns after nst super tiles (running exit first, if any).
func nextSuperTile(name string, lanes int, meta q4Meta, exit ...func()) {
	t := param("stride")
	SHLQ(U8(log2(lanes)), t)
	bump("w", t)
	if meta == metaTiles { // past the super tile's groups: groups*lanes/2 bytes of zeros, 8 times that of scales
		g := param("groups")
		SHLQ(U8(log2(lanes/2)), g)
		bump("z", g)
		SHLQ(U8(3), g)
		bump("sc", g)
	} else {
		bump("sc", U32(4*lanes))
		bump("z", U32(lanes/2))
	}
	n := param("nst")
	DECQ(n)
	Store(n, Param("nst"))
	JNZ(LabelRef(name + "_st"))
	for _, f := range exit {
		f()
	}
	VZEROUPPER()
	RET()
}

// subTilePtrs returns the pointers a sub-tile's group loop walks: the first
// row's weights (w + u*R*stride), the super tile's scales and zeros, the
// activations, and the group counter.
func subTilePtrs(u GPVirtual, r int) (wp, scp, zp, ap, g GPVirtual) {
	wp = GP64()
	MOVQ(u, wp)
	IMULQ(param("stride"), wp)
	if r > 1 {
		IMUL3Q(U32(r), wp, wp)
	}
	ADDQ(param("w"), wp)
	return wp, param("sc"), param("z"), param("act"), param("groups")
}

// nextGroup ends a Q4G128 kernel's group loop (label name+"_group"): the
// weights, scales and zeros move on one 128-column group, the activations
// actBlock bytes, and the loop repeats while the group count g lasts.
func nextGroup(name string, wp, scp, zp, ap, g GPVirtual, actBlock, lanes int, meta q4Meta) {
	ADDQ(U32(64), wp)
	if meta == metaTiles { // the super tile's lanes scales and zero nibbles
		ADDQ(U32(4*lanes), scp)
		ADDQ(U32(lanes/2), zp)
	} else {
		ADDQ(U32(512), scp)
		ADDQ(U32(64), zp)
	}
	ADDQ(U32(actBlock), ap)
	DECQ(g)
	JNZ(LabelRef(name + "_group"))
}

// nextTile returns a pointer to the sub-tile's rows in the next super tile
// (wp + lanes*stride). Those rows are one contiguous block, so prefetching
// it 64 bytes per weight line processed (PREFETCHT1, into L2) turns the
// tile's many short row streams into one sequential stream for DRAM and
// the prefetchers; a sub-tile of R rows over all groups covers exactly its
// R rows of the next tile. Prefetches past the matrix never fault.
func nextTile(wp GPVirtual, lanes int) GPVirtual {
	pf := GP64()
	MOVQ(param("stride"), pf)
	SHLQ(U8(log2(lanes)), pf)
	ADDQ(wp, pf)
	return pf
}

// loadPerm loads permutation vector u (lanes int32) into dst; evex for
// kernels whose registers may be X16..X31.
func loadPerm(u GPVirtual, lanes int, dst VecVirtual, evex bool) {
	t := GP64()
	MOVQ(u, t)
	SHLQ(U8(log2(4*lanes)), t)
	ADDQ(param("idx"), t)
	if evex {
		VMOVDQU32(Mem{Base: t}, dst)
	} else {
		VMOVDQU(Mem{Base: t}, dst)
	}
}

// q4Doc writes the doc comment of an M-vector Q4G128 kernel: kind (W4A8
// or W4A32) with isa, super tiles of lanes rows, batch m.
func q4Doc(name, kind, isa string, lanes, m int) {
	kernelDoc("Q4G128 kernels", fmt.Sprintf("%s computes %s dot products of a Q4G128 matrix with %s for super tiles of L = %d rows and a batch of M = %d (sub-tiles of R = %d rows).",
		name, kind, isa, lanes, m, lanes/m))
}

// zeroLanes loads the zero points of n consecutive rows (n/2 bytes at zp,
// n in {4, 8, 16}) and returns them as n int32 lanes of dst (an XMM for
// n = 4, YMM for 8, ZMM for 16). mask15 must hold 0x0f in every byte (its
// XMM part is used).
func zeroLanes(zp Mem, n int, mask15 VecVirtual, dst VecVirtual, gp GPVirtual, evex bool) {
	b, h := XMM(), XMM()
	switch n {
	case 16:
		VMOVQ(zp, b)
	case 8:
		VMOVD(zp, b)
	case 4:
		MOVWLZX(zp, gp.As32())
		VMOVD(gp.As32(), b)
	}
	VPSRLW(U8(4), b, h)
	VPUNPCKLBW(h, b, b)
	if evex { // AVX-512 kernel: registers may be X16..X31
		VPANDD(mask15.AsX(), b, b)
	} else {
		VPAND(mask15.AsX(), b, b)
	}
	VPMOVZXBD(b, dst)
}

// a8Epilogue folds one group's exact int32 dot products isum (lane k) into
// accF: isum -= z*sum(xq); accF = accF + float32(s*xs) * float32(isum),
// every operation rounded to float32 as layout.DotA8Exact defines.
func a8Epilogue(lanes, m int, isum, perm, accF, mask VecVirtual, scp, zp, ap GPVirtual, vec func() VecVirtual, evex bool) {
	zl := vec()
	zeroLanes(Mem{Base: zp}, lanes, mask, zl, GP64(), evex)
	VPERMD(zl, perm, zl)
	VPMULLD(Mem{Base: ap, Disp: 128*m + 64}, zl, zl)
	VPSUBD(zl, isum, isum)
	f := vec()
	VPERMPS(Mem{Base: scp}, perm, f)
	VMULPS(Mem{Base: ap, Disp: 128 * m}, f, f)
	VCVTDQ2PS(isum, isum)
	VMULPS(isum, f, f)
	VADDPS(f, accF, accF)
}

// a8AVX512 emits the AVX-512 VNNI W4A8 kernel for m vectors in columns.
// With metaTiles (named ...Tm) the batch-1 kernel reads the scales and
// zeros in the CPU backend's super-tile order and prefetches them four
// groups ahead in that stream; with metaBlocks it reads the format's
// order and prefetches the next super tile's scales. With nta
// (...M1PfNta...) the next super tile's weights are prefetched with
// PREFETCHNTA instead of PREFETCHT1 (the CPU picks: docs/KERNELS.md).
func a8AVX512(m int, nta bool, meta q4Meta) {
	const L = 16
	r := L / m
	name := fmt.Sprintf("Q4A8Avx512VnniM%d", m)
	if nta {
		name += "PfNta"
	}
	if meta == metaTiles {
		name += "Tm"
	}
	TEXT(name, NOSPLIT, kernelSig)
	Pragma("noescape")
	q4Doc(name, "W4A8", "AVX-512 VNNI (VPDPBUSD on ZMM)", L, m)
	mask := nibbleMask(ZMM())
	// GF2P8AFFINEQB with this bit matrix shifts each byte right by 4 (the
	// high nibble) in one instruction, where VPSRLW+VPANDD take two: +30%
	// cache-resident throughput on Zen 4.
	gfShr4 := ZMM()
	{
		t := GP64()
		MOVQ(U64(0x1020408000000000), t)
		VPBROADCASTQ(t, gfShr4)
	}
	tileLoops(name, L, m, meta, func(u GPVirtual) {
		perm := ZMM()
		loadPerm(u, L, perm, true)
		wp, scp, zp, ap, g := subTilePtrs(u, r)
		stride := param("stride")
		stride3 := GP64()
		LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)
		accF := ZMM()
		VMOVUPS(Mem{Base: param("out")}, accF) // continue the caller's sums
		pf := nextTile(wp, L)

		Label(name + "_group")
		// For small batches the activations of the group stay in registers
		// for all rows (one 512-bit load port on some cores makes memory
		// operands the bottleneck); larger batches read them from L1.
		xs := make([]Op, 2*m)
		for v := 0; v < m; v++ {
			xs[2*v], xs[2*v+1] = Mem{Base: ap, Disp: v * 128}, Mem{Base: ap, Disp: v*128 + 64}
		}
		if m <= 4 {
			for k := range xs {
				x := ZMM()
				VMOVDQU64(xs[k], x)
				xs[k] = x
			}
		}
		acc := make([]VecVirtual, L)
		for k := range acc {
			acc[k] = ZMM()
			VPXORD(acc[k], acc[k], acc[k])
		}
		row := GP64()
		MOVQ(wp, row)
		if m == 1 {
			if meta == metaTiles { // four groups on in the scales' stream, eight in the zeros'
				PREFETCHT0(Mem{Base: scp, Disp: 4 * 4 * L})
				PREFETCHT0(Mem{Base: zp, Disp: 8 * L / 2})
			} else {
				PREFETCHT0(Mem{Base: scp, Disp: 4 * L}) // the next super tile's scales of this group
			}
		}
		for i := 0; i < r; i++ {
			src := []Mem{{Base: row}, {Base: row, Index: stride, Scale: 1},
				{Base: row, Index: stride, Scale: 2}, {Base: row, Index: stride3, Scale: 1}}[i%4]
			lo, hi := ZMM(), ZMM()
			if nta {
				PREFETCHNTA(Mem{Base: pf, Disp: 64 * i})
			} else {
				PREFETCHT1(Mem{Base: pf, Disp: 64 * i})
			}
			VMOVDQU64(src, lo)
			VGF2P8AFFINEQB(U8(0), gfShr4, lo, hi) // hi = lo >> 4 per byte
			VPANDD(lo, mask, lo)
			for v := 0; v < m; v++ {
				VPDPBUSD(xs[2*v], lo, acc[i*m+v])
				VPDPBUSD(xs[2*v+1], hi, acc[i*m+v])
			}
			if i%4 == 3 && i != r-1 {
				LEAQ(Mem{Base: row, Index: stride, Scale: 4}, row)
			}
		}
		isum := reduce16(acc)
		a8Epilogue(L, m, isum, perm, accF, mask, scp, zp, ap, func() VecVirtual { return ZMM() }, true)

		ADDQ(U32(64*r), pf)
		nextGroup(name, wp, scp, zp, ap, g, 128*m+128, L, meta)
		VMOVUPS(accF, Mem{Base: param("out")})
	})
}

func a8YMM(m int, mode a8Mode, meta q4Meta) { a8YMMPf(m, mode, meta, false) }

// a8YMMLead emits Q4A8Avx2M1TmPfLead: Q4A8Avx2M1Tm prefetching each of
// the super tile's rows ahead (rowLead: each group's line in every row)
// instead of the next super tile.
func a8YMMLead() { a8YMMPf(1, modeAVX2, metaTiles, true) }

func a8YMMPf(m int, mode a8Mode, meta q4Meta, lead bool) {
	const L = 8
	r := L / m
	var name, what string
	switch mode {
	case modeAVX2:
		name, what = fmt.Sprintf("Q4A8Avx2M%d", m), "AVX2 (VPMADDUBSW and VPMADDWD)"
	case modeAVXVNNI:
		name, what = fmt.Sprintf("Q4A8AvxVnniM%d", m), "AVX-VNNI (VEX-encoded VPDPBUSD on YMM)"
	}
	if meta == metaTiles {
		name += "Tm"
	}
	if lead {
		name += "PfLead"
	}
	TEXT(name, NOSPLIT, kernelSig)
	Pragma("noescape")
	q4Doc(name, "W4A8", what, L, m)
	// The AVX-VNNI macro needs physical registers: accumulators Y0..Y7,
	// weights Y8/Y9, activations Y10; everything else is allocated around
	// them. AVX2 uses virtual registers throughout. (An EVEX variant on YMM
	// with 32 registers measured slower than the ZMM kernel on Zen 4.)
	acc := make([]Register, L)
	var lo, hi, xt Register
	if mode == modeAVXVNNI {
		for k := range acc {
			acc[k] = []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}[k]
		}
		lo, hi, xt = Y8, Y9, Y10
	}
	mask := nibbleMask(YMM())
	// wide (below) needs all sixteen YMM registers in the group loop:
	// its kernels keep the permutation and the float sums in memory,
	// loaded once per group for the epilogue, and take their int16 ones
	// from memory too.
	wide := mode == modeAVX2 && m > 2
	var ones VecVirtual
	if mode == modeAVX2 && !wide {
		ones = YMM()
		t := GP32()
		MOVL(U32(0x00010001), t)
		VMOVD(t, ones.AsX())
		VPBROADCASTD(ones.AsX(), ones)
	}
	tileLoops(name, L, m, meta, func(u GPVirtual) {
		var perm, accF VecVirtual
		if !wide {
			perm = YMM()
			loadPerm(u, L, perm, false)
		}
		wp, scp, zp, ap, g := subTilePtrs(u, r)
		stride := param("stride")
		if !wide {
			accF = YMM()
			VMOVUPS(Mem{Base: param("out")}, accF) // continue the caller's sums
		}
		var pf GPVirtual
		var ql rowLead
		if lead {
			ql = newRowLead(GP64(), wp, wp, stride, L)
		} else {
			pf = nextTile(wp, L)
		}

		Label(name + "_group")
		var lr GPVirtual
		if lead {
			ql.wrap(name)
			lr = ql.walker()
		}
		// Activation operands: half h (32 bytes) of the even and odd
		// columns of vector v.
		xs := make([]Op, 4*m)
		for v := 0; v < m; v++ {
			for h := 0; h < 2; h++ {
				xs[4*v+2*h] = Mem{Base: ap, Disp: 128*v + 32*h}
				xs[4*v+2*h+1] = Mem{Base: ap, Disp: 128*v + 64 + 32*h}
			}
		}
		// The AVX2 kernel sums a row's four VPMADDUBSW products per
		// vector in int16 (each lane at most 4*2*15*128 = 15360 in
		// magnitude: exact) and widens them with one VPMADDWD. With at
		// most two vectors that defines the row's accumulator (no
		// zeroing, no VPADDD): 14 instructions per row and group instead
		// of 19. With more (wide), which would need more registers
		// than YMM has for the halves in turn, both halves' codes are
		// unpacked first and each vector then takes four VPMADDUBSW,
		// three VPADDW, one VPMADDWD (ones from memory) and one VPADDD:
		// five multiplies where two per VPMADDUBSW were.
		sum16 := mode == modeAVX2 && m <= 2
		for k := range acc {
			if mode != modeAVXVNNI {
				acc[k] = YMM()
			}
			if !sum16 {
				VPXOR(acc[k], acc[k], acc[k])
			}
		}
		row := GP64()
		MOVQ(wp, row)
		// Sixteen groups on in the scales' and the zeros' streams (8 KB of
		// weights ahead: four groups prefetched too late for one Zen 5
		// core, FFN block 2397-2519 against 2347-2445 us, seven
		// alternating rounds, each in favour of sixteen).
		if meta == metaTiles {
			PREFETCHT0(Mem{Base: scp, Disp: 16 * 4 * L})
			PREFETCHT0(Mem{Base: zp, Disp: 16 * L / 2})
		}
		for i := 0; i < r; i++ {
			if lead {
				ql.row(lr, i, 1)
			} else {
				PREFETCHT1(Mem{Base: pf, Disp: 64 * i})
			}
			if wide {
				var cl, chi [2]VecVirtual // half h's low and high nibbles
				for h := range cl {
					cl[h], chi[h] = YMM(), YMM()
					VMOVDQU(Mem{Base: row, Disp: 32 * h}, cl[h])
					VPSRLW(U8(4), cl[h], chi[h])
					VPAND(mask, cl[h], cl[h])
					VPAND(mask, chi[h], chi[h])
				}
				for v := 0; v < m; v++ {
					var t VecVirtual
					for h := range cl {
						addSum16(h, xs[4*v+2*h], xs[4*v+2*h+1], cl[h], chi[h], &t)
					}
					VPMADDWD(onesWords(), t, t)
					VPADDD(t, acc[i*m+v], acc[i*m+v])
				}
				if i != r-1 {
					ADDQ(stride, row)
				}
				continue
			}
			t16 := make([]VecVirtual, m) // sum16: vector v's int16 sums of the row
			for h := 0; h < 2; h++ {
				if mode != modeAVXVNNI {
					lo, hi = YMM(), YMM()
				}
				VMOVDQU(Mem{Base: row, Disp: 32 * h}, lo)
				VPSRLW(U8(4), lo, hi)
				VPAND(mask, lo, lo)
				VPAND(mask, hi, hi)
				for v := 0; v < m; v++ {
					a := acc[i*m+v]
					xe, xo := xs[4*v+2*h], xs[4*v+2*h+1]
					if mode == modeAVXVNNI {
						VMOVDQU(xe, xt)
						vpdpbusdY(xt, lo, a)
						VMOVDQU(xo, xt)
						vpdpbusdY(xt, hi, a)
						continue
					}
					addSum16(h, xe, xo, lo.(VecVirtual), hi.(VecVirtual), &t16[v]) // sum16
					if h == 1 {
						VPMADDWD(ones, t16[v], a)
					}
				}
			}
			if i != r-1 {
				ADDQ(stride, row)
			}
		}
		isum := reduce8Y(acc, func(a, b, c Op) { VPADDD(a, b, c) }, func() Register { return YMM() }, false).(VecVirtual)
		if wide {
			perm, accF = YMM(), YMM()
			loadPerm(u, L, perm, false)
			VMOVUPS(Mem{Base: param("out")}, accF)
		}
		a8Epilogue(L, m, isum, perm, accF, mask, scp, zp, ap, func() VecVirtual { return YMM() }, false)
		if wide {
			VMOVUPS(accF, Mem{Base: param("out")})
		}

		if lead {
			ADDQ(U32(64), ql.pf)
		} else {
			ADDQ(U32(64*r), pf)
		}
		nextGroup(name, wp, scp, zp, ap, g, 128*m+128, L, meta)
		if !wide {
			VMOVUPS(accF, Mem{Base: param("out")})
		}
	})
}

// a32 emits a W4A32 kernel. avx512 selects ZMM accumulators folded to YMM
// (L = 8); otherwise YMM accumulators (L = 4). The weights of a row are
// unpacked chunk by chunk (VPMOVZXBD), the nibbles split and converted to
// float32, and FMA'd with the even and odd activations; each group's dot is
// scaled into the row's accumulator, and the zero-point term
// sum_g s*z*sum(x) is subtracted per lane at the end.
func a32(m int, avx512 bool) {
	L, chunk, name, what := 4, 8, fmt.Sprintf("Q4A32Avx2M%d", m), "AVX2 and FMA"
	vec := func() VecVirtual { return YMM() }
	if avx512 {
		L, chunk, name, what = 8, 16, fmt.Sprintf("Q4A32Avx512M%d", m), "AVX-512F and FMA"
		vec = func() VecVirtual { return ZMM() }
	}
	r := L / m
	TEXT(name, NOSPLIT, kernelSig)
	Pragma("noescape")
	q4Doc(name, "W4A32", what, L, m)
	mask := nibbleMask(vec())
	var table VecVirtual
	if avx512 { // float32 0, 1, ..., 15
		table = ZMM()
		VMOVUPS(nibbleFloats(), table)
	}
	tileLoops(name, L, m, metaBlocks, func(u GPVirtual) {
		wp, scp, zp, ap, g := subTilePtrs(u, r)
		stride := param("stride")
		// scr: scale of sub-tile row 0 (scp + 4*u*R), for broadcasts.
		scr := GP64()
		MOVQ(u, scr)
		SHLQ(U8(2), scr)
		if r > 1 {
			IMUL3Q(U32(r), scr, scr)
		}
		ADDQ(scp, scr)
		var perm, corr VecVirtual
		if avx512 {
			perm, corr = YMM(), YMM()
		} else {
			perm, corr = XMM(), XMM()
		}
		loadPerm(u, L, perm, avx512)
		zero := VXORPS
		if avx512 {
			zero = VPXORD
		}
		zero(corr, corr, corr)
		acc := make([]VecVirtual, L)
		for k := range acc {
			acc[k] = vec()
			zero(acc[k], acc[k], acc[k])
		}

		pf := nextTile(wp, L)

		Label(name + "_group")
		row := GP64()
		MOVQ(wp, row)
		for i := 0; i < r; i++ {
			PREFETCHT1(Mem{Base: pf, Disp: 64 * i})
			dots := make([]VecVirtual, m)
			for v := range dots {
				dots[v] = vec()
			}
			for c := 0; c < 64/(chunk/2)/2; c++ {
				q, lo, hi := vec(), vec(), vec()
				VPMOVZXBD(Mem{Base: row, Disp: chunk * c}, q)
				VPSRLD(U8(4), q, hi)
				if avx512 {
					// VPERMPS reads the low 4 bits of each index: the
					// table lookup is float32(q & 15) in one instruction.
					VPERMPS(table, q, lo)
					VPERMPS(table, hi, hi)
				} else {
					VPAND(q, mask, lo)
					VCVTDQ2PS(lo, lo)
					VCVTDQ2PS(hi, hi)
				}
				for v := 0; v < m; v++ {
					xe := Mem{Base: ap, Disp: 512*v + 4*chunk*c}
					xo := Mem{Base: ap, Disp: 512*v + 256 + 4*chunk*c}
					if c == 0 {
						VMULPS(xe, lo, dots[v])
					} else {
						VFMADD231PS(xe, lo, dots[v])
					}
					VFMADD231PS(xo, hi, dots[v])
				}
			}
			for v := 0; v < m; v++ {
				if avx512 {
					VFMADD231PS_BCST(Mem{Base: scr, Disp: 4 * i}, dots[v], acc[i*m+v])
				} else {
					s := YMM()
					VBROADCASTSS(Mem{Base: scr, Disp: 4 * i}, s)
					VFMADD231PS(dots[v], s, acc[i*m+v])
				}
			}
			if i != r-1 {
				ADDQ(stride, row)
			}
		}
		// corr += s * z * sum(x), lane k = row u*R + k/M, vector k%M.
		zl, sl := XMM(), XMM()
		if avx512 {
			zl, sl = YMM(), YMM()
		}
		zeroLanes(Mem{Base: zp}, L, mask, zl, GP64(), avx512)
		if avx512 {
			VPERMD(zl, perm, zl)
			VPERMPS(Mem{Base: scp}, perm, sl)
		} else {
			VPERMILPS(perm, zl, zl)
			VMOVUPS(Mem{Base: scp}, sl)
			VPERMILPS(perm, sl, sl)
		}
		VCVTDQ2PS(zl, zl)
		VMULPS(sl, zl, zl)
		VFMADD231PS(Mem{Base: ap, Disp: 512 * m}, zl, corr)

		ADDQ(U32(64*r), pf)
		ADDQ(U32(512), scr)
		nextGroup(name, wp, scp, zp, ap, g, 512*m+64, L, metaBlocks)

		var res Register
		if avx512 {
			ys := make([]Register, L)
			for k := range acc {
				h := YMM()
				VEXTRACTF64X4(U8(1), acc[k], h)
				VADDPS(h, acc[k].AsY(), h)
				ys[k] = h
			}
			res = reduce8Y(ys, func(a, b, c Op) { VADDPS(a, b, c) }, func() Register { return YMM() }, true)
		} else {
			res = reduce4Y(acc)
		}
		VSUBPS(corr, res, res)
		VADDPS(Mem{Base: param("out")}, res, res)
		VMOVUPS(res, Mem{Base: param("out")})
	})
}

// addSum16 adds half h (32 bytes) of a row's W4A8 products into its
// int16 sums t (h = 0 defines t): VPMADDUBSW of the even and odd
// activations xe, xo with the low and high nibbles lo, hi, then VPADDW
// (a8YMM's sum16: exact, each lane at most 4*2*15*128 in magnitude).
func addSum16(h int, xe, xo Op, lo, hi VecVirtual, t *VecVirtual) {
	p := YMM()
	if h == 0 {
		*t = YMM()
		VPMADDUBSW(xe, lo, *t)
	} else {
		VPMADDUBSW(xe, lo, p)
		VPADDW(p, *t, *t)
	}
	p = YMM()
	VPMADDUBSW(xo, hi, p)
	VPADDW(p, *t, *t)
}
