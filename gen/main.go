// Command gen writes qgemv's generated files: with avo, the amd64 assembly
// kernels in asm/ and their Go declarations; with a CUDA compiler when one
// is found (nvcc on PATH, $QGEMV_NVCC, or `make cuda-toolkit`), the PTX of
// every cuda/*.cu in cuda/ptx (without one, it checks that the committed
// PTX was generated from the current source). Run it from the repository
// root:
//
//	go run ./gen
//
// It deletes every file it generates first, so each one provably comes from
// this program; CI regenerates and requires a clean diff.
//
// # Kernel shape
//
// Every Q4G128 kernel works on "super tiles" of L consecutive rows (L is the
// number of 32-bit lanes of its result vector: 16 for AVX-512 W4A8, 8 for
// AVX-512 W4A32 and AVX2 W4A8, 4 for AVX2 W4A32) and a batch of M vectors
// (M a power of two, M <= L). A super tile is computed as M sub-tiles of
// R = L/M rows; the result lane k of a sub-tile is row k/M, vector k%M.
// Rows outside [0, PRows) are never touched, and the Go caller (package cpu)
// owns tails, threading and the scatter of results.
package main

import (
	"bytes"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

const (
	asmFile  = "asm/q4_amd64.s"
	stubFile = "asm/q4_amd64.go"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("gen: ")
	if _, err := os.Stat("go.mod"); err != nil {
		log.Fatal("run from the repository root: go run ./gen")
	}
	// Remove every generated file first.
	old, _ := filepath.Glob("asm/*_amd64.*")
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			log.Fatal(err)
		}
	}

	ConstraintExpr("!noasm,!purego")
	for _, m := range []int{1, 2, 4} {
		a8AVX512(m)
	}
	a8TAVX512(8)
	a8TAVX512(16)
	for _, m := range []int{1, 2, 4, 8} {
		a32(m, true)
	}
	for _, m := range []int{1, 2, 4, 8} {
		a8YMM(m, modeAVXVNNI)
		a8YMM(m, modeAVX2)
	}
	for _, m := range []int{1, 2, 4} {
		a32(m, false)
	}
	for _, meta16 := range []bool{false, true} {
		for _, n := range []int{8, 4, 2, 1} {
			bitsA8AVX512(n, 1, meta16)
			bitsA8AVX512(n, 2, meta16)
			if n != 1 { // 1 bit, groups of 32: 32 lanes per row, more than a ZMM holds
				bitsA8AVX512(n, 4, meta16)
			}
		}
	}
	bits3A8AVX512(128)
	bits3A8AVX512(64)
	sparseA8AVX512(1)
	sparseA8AVX512(2)
	for _, n := range []int{8, 4, 2, 1} {
		for _, u := range []int{128, 64, 32} {
			if 128*(8/n)/u <= 8 { // units per chunk fit the 8 lanes of a YMM
				bitsA8YMM(n, u, modeAVX2)
				bitsA8YMM(n, u, modeAVXVNNI)
			}
		}
	}
	bits3A8YMM()
	for _, u := range []int{128, 64, 32} {
		sparseA8YMM(u, modeAVX2)
		sparseA8YMM(u, modeAVXVNNI)
	}
	for _, f := range []fvec{{true}, {false}} {
		for _, meta16 := range []bool{false, true} {
			for _, n := range []int{8, 4, 2, 1} {
				for seg := 1; seg <= 32/n; seg *= 2 {
					if f.avx512 && n <= 2 && seg*n >= 4 {
						continue // the table kernels (bitsLut) run these
					}
					bitsA32(n, seg, f, meta16)
				}
			}
			for _, seg := range []int{1, 2, 10} { // 3 bits: gcd(G/32, 10 planes)
				bitsA32(3, seg, f, meta16)
			}
		}
		for _, meta16 := range []bool{false, true} {
			for _, seg := range []int{1, 2, 4} {
				sparseA32(seg, f, meta16)
			}
		}
	}
	for _, n := range []int{1, 2} {
		bitsLutTables(n)
		for seg := 4 / n; seg <= 32/n; seg *= 2 { // segments of at least a nibble
			for _, f16 := range []bool{false, true} {
				bitsLut(n, seg, f16, false)
				bitsLut(n, seg, f16, true)
			}
		}
	}
	streamRead()
	widenF16()
	quantA8(true)
	quantA8(false)
	for _, v := range []int{2, 4, 8} {
		cbTableF16(v)
		cbTableI16(v)
	}
	for _, packed := range []bool{false, true} {
		cbPsumI16(1, packed)
		cbPsumI16(2, packed)
	}
	cbPsumScalar(1)
	cbPsumScalar(2)
	for _, f := range []cbVec{{avx512: true}, {avx512: false}} {
		for _, v := range []int{2, 4, 8} {
			nearest(f, v)
		}
	}
	int8Gemv()
	int8GemvAVX2()
	for _, mode := range []ansMode{ansMul, ansMadd, ansMaddQ} {
		for _, units := range []int{1, 2} {
			ansDot(false, units, mode)
			ansDot(true, units, mode)
		}
	}
	ansDotsAVX2()
	for _, b := range []int{4, 6, 8} {
		for _, m := range []int{1, 2} {
			cbPsumF16(b, m)
		}
	}
	for _, f := range []cbVec{{true}, {false}} {
		for _, v := range []int{2, 4, 8} {
			cbTable(f, v)
		}
		for _, b := range []int{4, 6, 8, 10, 12} {
			for _, m := range []int{1, 2} {
				cbLookup(f, b, m, false)
				cbLookup(f, b, m, true)
			}
		}
	}

	os.Args = []string{os.Args[0], "-out", asmFile, "-stubs", stubFile, "-pkg", "asm"}
	Generate()
	if err := insertVEXMacros(asmFile); err != nil {
		log.Fatal(err)
	}
	for _, f := range []string{asmFile, stubFile} {
		if err := fixHeader(f); err != nil {
			log.Fatal(err)
		}
	}
	if err := genPTX(); err != nil {
		log.Fatal(err)
	}
}

const kernelSig = "func(w *byte, stride int, sc *float32, z *byte, groups int, act *byte, idx *int32, out *float32, nst int)"

// param loads a kernel argument into a fresh register. Loop-invariant
// arguments stay in the argument frame and are reloaded where needed, so
// the hot loops keep enough general-purpose registers.
func param(name string) GPVirtual { return Load(Param(name), GP64()).(GPVirtual) }

// bump adds n to the pointer argument name in the argument frame.
func bump(name string, n Op) {
	r := param(name)
	ADDQ(n, r)
	Store(r, Param(name))
}

// tileLoops emits the super-tile and sub-tile loops every Q4G128 kernel
// shares. sub emits one sub-tile (rows u*R .. u*R+R-1 of the super tile,
// u in register u) and must store its L results at the "out" argument.
func tileLoops(name string, lanes, m int, sub func(u GPVirtual)) {
	Label(name + "_st")
	u := GP64()
	XORQ(u, u)
	Label(name + "_sub")
	sub(u)
	bump("out", U32(4*lanes))
	INCQ(u)
	CMPQ(u, U32(m))
	JB(LabelRef(name + "_sub"))
	nextSuperTile(name, lanes)
}

// nextSuperTile ends a Q4G128 kernel's super-tile loop (label name+"_st"):
// w moves lanes rows down, sc and zp to those rows' scales and zeros, and
// the kernel returns after nst super tiles.
func nextSuperTile(name string, lanes int) {
	t := param("stride")
	SHLQ(U8(log2(lanes)), t)
	bump("w", t)
	bump("sc", U32(4*lanes))
	bump("z", U32(lanes/2))
	n := param("nst")
	DECQ(n)
	Store(n, Param("nst"))
	JNZ(LabelRef(name + "_st"))
	VZEROUPPER()
	RET()
}

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
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
func nextGroup(name string, wp, scp, zp, ap, g GPVirtual, actBlock int) {
	ADDQ(U32(64), wp)
	ADDQ(U32(512), scp)
	ADDQ(U32(64), zp)
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

// nibbleFloats returns the read-only table float32{0, 1, ..., 15}.
func nibbleFloats() Mem { return codeTable(4, 0) }

// codeTable returns the read-only table float32{e >> (n*j) & (2^n-1) : e <
// 16}: the n-bit code at bits n*j of a 4-bit index.
func codeTable(n, j int) Mem {
	name := fmt.Sprintf("codeTable%d_%d", n, j)
	if n == 4 {
		name = "nibbleFloats"
	}
	return rodata(name, 16, 4, func(e int) uint64 {
		return uint64(math.Float32bits(float32(e >> (n * j) & (1<<n - 1))))
	})
}

// bitsRuns returns the elements per shift of the one-row float kernel for
// n bits and segments of seg planes, and its VPERMPS tables (nil: the
// n-bit codes do not fit the 4 (ZMM) or 3 (YMM) index bits; mask and
// convert instead). A run fits the index bits and divides both the 32/n
// elements of a word and the segment.
func bitsRuns(n, seg int, f fvec) (int, []VecVirtual) {
	bits := map[bool]int{true: 4, false: 3}[f.avx512]
	if n > bits {
		return 1, nil
	}
	per := bits / n
	for (32/n)%per != 0 || seg%per != 0 {
		per--
	}
	tables := make([]VecVirtual, per)
	for j := range tables {
		tables[j] = f.reg()
		f.load(codeTable(n, j), tables[j])
	}
	return per, tables
}

// nibbleMask returns a register of the given kind with 0x0f in every byte.
func nibbleMask(v VecVirtual) VecVirtual {
	t := GP32()
	MOVL(U32(0x0f0f0f0f), t)
	VMOVD(t, v.AsX())
	VPBROADCASTD(v.AsX(), v)
	return v
}

// kernelDoc writes the doc comment every Q4G128 kernel shares.
func kernelDoc(name, what string, lanes, m int, actLayout string) {
	r := lanes / m
	lines := []string{
		name + " computes " + what + " for nst super tiles of " + fmt.Sprint(lanes) + " rows of a",
		"Q4G128 matrix and a batch of " + fmt.Sprint(m) + " vector(s). It is the assembly form of this Go",
		"loop (see cpu.a8Generic and cpu.a32Generic for the reference):",
		"",
		"\tfor st := 0; st < nst; st++ {",
		"\t\tfor u := 0; u < " + fmt.Sprint(m) + "; u++ { // sub-tile of " + fmt.Sprint(r) + " rows",
		"\t\t\tfor k := 0; k < " + fmt.Sprint(lanes) + "; k++ {",
		"\t\t\t\trow, vec := st*" + fmt.Sprint(lanes) + "+u*" + fmt.Sprint(r) + "+k/" + fmt.Sprint(m) + ", k%" + fmt.Sprint(m),
		"\t\t\t\tout[(st*" + fmt.Sprint(m) + "+u)*" + fmt.Sprint(lanes) + "+k] += dot(row, vec)",
		"\t\t\t}",
		"\t\t}",
		"\t}",
		"",
		"with rows counted from w (stride bytes apart), scales from sc and zero",
		"points from z (block-contiguous: group g of a row is 128 scales further),",
		"idx the " + fmt.Sprint(m) + " permutation vectors of " + fmt.Sprint(lanes) + " int32 (vector u, lane k holds",
		"u*" + fmt.Sprint(r) + "+k/" + fmt.Sprint(m) + "), and act the activations prepared per group as:",
	}
	lines = append(lines, strings.Split(strings.ReplaceAll(actLayout, "M", fmt.Sprint(m)), "\n")...)
	lines = append(lines,
		"",
		"The kernel adds to out, so a caller can split the groups into column",
		"tiles (w, sc, z and act advanced to the tile's first group) and call it",
		"once per tile on the same out: the W4A8 kernels add each group's scaled",
		"dot to the running sum loaded from out, in group order, so the tiled",
		"result is the untiled one bit for bit.",
		"",
		"Preconditions: all rows lie inside one 128-row block of the matrix, the",
		"first row is a multiple of "+fmt.Sprint(lanes)+", groups >= 1, and every pointer covers what",
		"the loop reads or writes.",
	)
	Doc(lines...)
}

// ---------------------------------------------------------------------------
// Reductions

// reduce16 sums each of 16 ZMM int32 accumulators horizontally: lane k of
// the result holds the sum of acc[k]'s lanes. The accumulators are
// clobbered.
func reduce16(acc []VecVirtual) VecVirtual {
	regs := make([]Register, len(acc))
	for i, a := range acc {
		regs[i] = a
	}
	addD := func(a, b, c Op) { VPADDD(a, b, c) }
	zmm := func() Register { return ZMM() }
	// Level 1: pairs -> per 128-bit lane [a02 b02 a13 b13]. Level 2: per
	// 128-bit chunk q, [acc 4j+0..3 summed over chunk q].
	r2 := pairLevel(pairLevel(regs, false, addD, zmm), true, addD, zmm)
	l2 := []VecVirtual{r2[0].(VecVirtual), r2[1].(VecVirtual), r2[2].(VecVirtual), r2[3].(VecVirtual)}
	// Level 3 and 4: sum the four chunks, chunk j of the result = vector j.
	x01, x23 := ZMM(), ZMM()
	VSHUFI32X4(U8(0x88), l2[1], l2[0], x01)
	VSHUFI32X4(U8(0xdd), l2[1], l2[0], l2[0])
	VPADDD(l2[0], x01, x01)
	VSHUFI32X4(U8(0x88), l2[3], l2[2], x23)
	VSHUFI32X4(U8(0xdd), l2[3], l2[2], l2[2])
	VPADDD(l2[2], x23, x23)
	res := ZMM()
	VSHUFI32X4(U8(0x88), x23, x01, res)
	VSHUFI32X4(U8(0xdd), x23, x01, x01)
	VPADDD(x01, res, res)
	return res
}

// pairLevel is one level of the horizontal-sum trees: for each pair
// (a, b) of vs it interleaves and adds, per 128-bit lane, the 32-bit
// (qwords false) or 64-bit (qwords true) elements, so the result has half
// as many vectors, each holding partial sums of both inputs. The inputs are
// clobbered; tmp hands out scratch registers.
func pairLevel(vs []Register, qwords bool, add func(a, b, c Op), tmp func() Register) []Register {
	out := make([]Register, len(vs)/2)
	for j := range out {
		a, b := vs[2*j], vs[2*j+1]
		t := tmp()
		if qwords {
			VPUNPCKLQDQ(b, a, t)
			VPUNPCKHQDQ(b, a, a)
		} else {
			VPUNPCKLDQ(b, a, t)
			VPUNPCKHDQ(b, a, a)
		}
		add(t, a, a)
		out[j] = a
	}
	return out
}

// reduce8Y sums each of 8 YMM accumulators horizontally into lane k of the
// result, with add (VPADDD or VADDPS). The accumulators are clobbered; tmp
// hands out scratch registers. evex selects EVEX-encodable shuffles (for
// AVX-512 kernels, whose registers may be Y16..Y31).
func reduce8Y(acc []Register, add func(a, b, c Op), tmp func() Register, evex bool) Register {
	l2 := pairLevel(pairLevel(acc, false, add, tmp), true, add, tmp)
	res := tmp()
	if evex {
		VSHUFI64X2(U8(0), l2[1], l2[0], res)
		VSHUFI64X2(U8(3), l2[1], l2[0], l2[0])
	} else {
		VPERM2I128(U8(0x20), l2[1], l2[0], res)
		VPERM2I128(U8(0x31), l2[1], l2[0], l2[0])
	}
	add(l2[0], res, res)
	return res
}

// reduce4Y sums each of 4 YMM float accumulators into lane k of an XMM.
func reduce4Y(acc []VecVirtual) VecVirtual {
	regs := []Register{acc[0], acc[1], acc[2], acc[3]}
	addPS := func(a, b, c Op) { VADDPS(a, b, c) }
	ymm := func() Register { return YMM() }
	c := pairLevel(pairLevel(regs, false, addPS, ymm), true, addPS, ymm)[0].(VecVirtual)
	hi := XMM()
	VEXTRACTF128(U8(1), c, hi)
	VADDPS(hi, c.AsX(), hi)
	return hi
}

// ---------------------------------------------------------------------------
// Zero points

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

// ---------------------------------------------------------------------------
// AVX-512 VNNI, int8 activations

const a8ActLayout = "\tfor each group: M blocks of 128 int8 (the 64 even-column activations, then\n" +
	"\tthe 64 odd-column ones), then 16 float32 lane scales (xs of vector k%M)\n" +
	"\tand 16 int32 lane sums (the sum of the group's 128 int8 of vector k%M),\n" +
	"\tL of each used; the group's block is 128*M + 128 bytes"

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

func a8AVX512(m int) {
	const L = 16
	r := L / m
	name := fmt.Sprintf("Q4A8Avx512VnniM%d", m)
	TEXT(name, NOSPLIT, kernelSig)
	Pragma("noescape")
	kernelDoc(name, "W4A8 dot products with AVX-512 VNNI (VPDPBUSD on ZMM)", L, m, a8ActLayout)
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
	tileLoops(name, L, m, func(u GPVirtual) {
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
		for i := 0; i < r; i++ {
			src := []Mem{{Base: row}, {Base: row, Index: stride, Scale: 1},
				{Base: row, Index: stride, Scale: 2}, {Base: row, Index: stride3, Scale: 1}}[i%4]
			lo, hi := ZMM(), ZMM()
			PREFETCHT1(Mem{Base: pf, Disp: 64 * i})
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
		nextGroup(name, wp, scp, zp, ap, g, 128*m+128)
		VMOVUPS(accF, Mem{Base: param("out")})
	})
}

// ---------------------------------------------------------------------------
// AVX2 (VPMADDUBSW + VPMADDWD) and AVX-VNNI (VEX VPDPBUSD), int8 activations

// vexVNNI records the VEX-encoded VPDPBUSD forms used, for the macros.
var vexVNNI = map[string][3]int{}

// vpdpbusdVEX emits the AVX-VNNI "VPDPBUSD b, a, acc" (Go operand order:
// acc += u8(a) . s8(b), per 32-bit lane) on physical YMM registers, as a
// macro of BYTEs: the Go assembler only encodes the EVEX form, which needs
// AVX512VL.
func vpdpbusdVEX(b, a, acc VecPhysical) {
	name := fmt.Sprintf("VPDPBUSD_VEX_%s_%s_%s", b.Asm(), a.Asm(), acc.Asm())
	vexVNNI[name] = [3]int{int(b.PhysicalIndex()), int(a.PhysicalIndex()), int(acc.PhysicalIndex())}
	Instruction(&ir.Instruction{
		Opcode:  name,
		Inputs:  []Op{b, a, acc},
		Outputs: []Op{acc},
		ISA:     []string{"AVXVNNI"},
	})
}

// insertVEXMacros defines every VPDPBUSD_VEX_* macro used in the file
// right after its #include line.
// fixHeader names the real command in the "Code generated" line (avo
// writes the arguments this program passed to itself).
func fixHeader(path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := bytes.IndexByte(src, '\n')
	if i < 0 || !bytes.HasPrefix(src, []byte("// Code generated")) {
		return fmt.Errorf("%s: no generated-code header", path)
	}
	out := append([]byte("// Code generated by command: go run ./gen. DO NOT EDIT."), src[i:]...)
	return os.WriteFile(path, out, 0o644)
}

func insertVEXMacros(path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var defs bytes.Buffer
	names := make([]string, 0, len(vexVNNI))
	for n := range vexVNNI {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r := vexVNNI[n]
		bReg, aReg, dst := r[0], r[1], r[2]
		// VEX.256.66.0F38.W0 50 /r: C4 [~R ~X ~B 00010] [W ~vvvv L pp] 50 modrm
		b1 := 0x02 | 0x40
		if dst < 8 {
			b1 |= 0x80
		}
		if bReg < 8 {
			b1 |= 0x20
		}
		b2 := (^aReg&15)<<3 | 0x04 | 0x01
		modrm := 0xc0 | (dst&7)<<3 | bReg&7
		fmt.Fprintf(&defs, "// %s is VPDPBUSD ymm%d, ymm%d, ymm%d (Intel operand order), VEX-encoded (AVX-VNNI).\n", n, dst, aReg, bReg)
		fmt.Fprintf(&defs, "#define %s BYTE $0xc4; BYTE $0x%02x; BYTE $0x%02x; BYTE $0x50; BYTE $0x%02x\n\n", n, b1, b2, modrm)
	}
	out := bytes.Replace(src, []byte("#include \"textflag.h\"\n"), append([]byte("#include \"textflag.h\"\n\n"), defs.Bytes()...), 1)
	return os.WriteFile(path, out, 0o644)
}

// a8Mode selects the instruction set of a YMM W4A8 kernel.
type a8Mode int

const (
	modeAVX2    a8Mode = iota // VPMADDUBSW + VPMADDWD
	modeAVXVNNI               // VEX VPDPBUSD (AVX-VNNI)
)

func a8YMM(m int, mode a8Mode) {
	const L = 8
	r := L / m
	var name, what string
	switch mode {
	case modeAVX2:
		name, what = fmt.Sprintf("Q4A8Avx2M%d", m), "W4A8 dot products with AVX2 (VPMADDUBSW and VPMADDWD)"
	case modeAVXVNNI:
		name, what = fmt.Sprintf("Q4A8AvxVnniM%d", m), "W4A8 dot products with AVX-VNNI (VEX-encoded VPDPBUSD on YMM)"
	}
	TEXT(name, NOSPLIT, kernelSig)
	Pragma("noescape")
	kernelDoc(name, what, L, m, a8ActLayout)
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
	var ones VecVirtual
	if mode == modeAVX2 {
		ones = YMM()
		t := GP32()
		MOVL(U32(0x00010001), t)
		VMOVD(t, ones.AsX())
		VPBROADCASTD(ones.AsX(), ones)
	}
	tileLoops(name, L, m, func(u GPVirtual) {
		perm := YMM()
		loadPerm(u, L, perm, false)
		wp, scp, zp, ap, g := subTilePtrs(u, r)
		stride := param("stride")
		accF := YMM()
		VMOVUPS(Mem{Base: param("out")}, accF) // continue the caller's sums
		pf := nextTile(wp, L)

		Label(name + "_group")
		// Activation operands: half h (32 bytes) of the even and odd
		// columns of vector v.
		xs := make([]Op, 4*m)
		for v := 0; v < m; v++ {
			for h := 0; h < 2; h++ {
				xs[4*v+2*h] = Mem{Base: ap, Disp: 128*v + 32*h}
				xs[4*v+2*h+1] = Mem{Base: ap, Disp: 128*v + 64 + 32*h}
			}
		}
		for k := range acc {
			if mode != modeAVXVNNI {
				acc[k] = YMM()
			}
			VPXOR(acc[k], acc[k], acc[k])
		}
		row := GP64()
		MOVQ(wp, row)
		for i := 0; i < r; i++ {
			PREFETCHT1(Mem{Base: pf, Disp: 64 * i})
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
					switch mode {
					case modeAVXVNNI:
						VMOVDQU(xe, xt)
						vpdpbusdVEX(xt.(VecPhysical), lo.(VecPhysical), a.(VecPhysical))
						VMOVDQU(xo, xt)
						vpdpbusdVEX(xt.(VecPhysical), hi.(VecPhysical), a.(VecPhysical))
					case modeAVX2:
						// Two products of |15*127| per int16 lane never
						// saturate; widen to int32 before accumulating.
						t := YMM()
						VPMADDUBSW(xe, lo, t)
						VPMADDWD(ones, t, t)
						VPADDD(t, a, a)
						t = YMM()
						VPMADDUBSW(xo, hi, t)
						VPMADDWD(ones, t, t)
						VPADDD(t, a, a)
					}
				}
			}
			if i != r-1 {
				ADDQ(stride, row)
			}
		}
		isum := reduce8Y(acc, func(a, b, c Op) { VPADDD(a, b, c) }, func() Register { return YMM() }, false).(VecVirtual)
		a8Epilogue(L, m, isum, perm, accF, mask, scp, zp, ap, func() VecVirtual { return YMM() }, false)

		ADDQ(U32(64*r), pf)
		nextGroup(name, wp, scp, zp, ap, g, 128*m+128)
		VMOVUPS(accF, Mem{Base: param("out")})
	})
}

// ---------------------------------------------------------------------------
// Float32 activations: AVX-512F + FMA and AVX2 + FMA

const a32ActLayout = "\tfor each group: M blocks of 128 float32 (the 64 even-column activations,\n" +
	"\tthen the 64 odd-column ones), then 16 float32 lane sums (the group's\n" +
	"\tsum of activations of vector k%M, L used); the group's block is\n" +
	"\t512*M + 64 bytes"

// a32 emits a W4A32 kernel. avx512 selects ZMM accumulators folded to YMM
// (L = 8); otherwise YMM accumulators (L = 4). The weights of a row are
// unpacked chunk by chunk (VPMOVZXBD), the nibbles split and converted to
// float32, and FMA'd with the even and odd activations; each group's dot is
// scaled into the row's accumulator, and the zero-point term
// sum_g s*z*sum(x) is subtracted per lane at the end.
func a32(m int, avx512 bool) {
	L, chunk, name, what := 4, 8, fmt.Sprintf("Q4A32Avx2M%d", m), "W4A32 dot products with AVX2 and FMA"
	vec := func() VecVirtual { return YMM() }
	if avx512 {
		L, chunk, name, what = 8, 16, fmt.Sprintf("Q4A32Avx512M%d", m), "W4A32 dot products with AVX-512F and FMA"
		vec = func() VecVirtual { return ZMM() }
	}
	r := L / m
	TEXT(name, NOSPLIT, kernelSig)
	Pragma("noescape")
	kernelDoc(name, what, L, m, a32ActLayout)
	mask := nibbleMask(vec())
	var table VecVirtual
	if avx512 { // float32 0, 1, ..., 15
		table = ZMM()
		VMOVUPS(nibbleFloats(), table)
	}
	tileLoops(name, L, m, func(u GPVirtual) {
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
		nextGroup(name, wp, scp, zp, ap, g, 512*m+64)

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

// ---------------------------------------------------------------------------
// Streaming read (the bandwidth roofline)

func streamRead() {
	for _, isa := range []string{"Avx512", "Avx2"} {
		name := "StreamRead" + isa
		TEXT(name, NOSPLIT, "func(b []uint64) uint64")
		Pragma("noescape")
		Doc(
			name+" xors every 64-byte line of b into a checksum with vector loads,",
			"the read-bandwidth roofline: it computes the same value as",
			"",
			"\tvar acc [8]uint64",
			"\tfor i, v := range b[:len(b)&^7] { acc[i%8] ^= v }",
			"\treturn acc[0] ^ acc[1] ^ ... ^ acc[7]",
			"",
			"and ignores the len(b)%8 trailing words (the caller xors those).",
		)
		base := Load(Param("b").Base(), GP64())
		n := Load(Param("b").Len(), GP64())
		SHRQ(U8(3), n)
		const unroll = 4
		var acc []VecVirtual
		for k := 0; k < unroll; k++ {
			if isa == "Avx512" {
				acc = append(acc, ZMM())
			} else {
				acc = append(acc, YMM(), YMM())
			}
		}
		for _, a := range acc {
			VPXOR(a.AsY(), a.AsY(), a.AsY())
		}
		Label(name + "_big")
		CMPQ(n, U32(unroll))
		JB(LabelRef(name + "_one"))
		for k := 0; k < unroll; k++ {
			if isa == "Avx512" {
				VPXORQ(Mem{Base: base, Disp: 64 * k}, acc[k], acc[k])
			} else {
				VPXOR(Mem{Base: base, Disp: 64 * k}, acc[2*k], acc[2*k])
				VPXOR(Mem{Base: base, Disp: 64*k + 32}, acc[2*k+1], acc[2*k+1])
			}
		}
		ADDQ(U32(64*unroll), base)
		SUBQ(U32(unroll), n)
		JMP(LabelRef(name + "_big"))
		Label(name + "_one")
		TESTQ(n, n)
		JZ(LabelRef(name + "_done"))
		if isa == "Avx512" {
			VPXORQ(Mem{Base: base}, acc[0], acc[0])
		} else {
			VPXOR(Mem{Base: base}, acc[0], acc[0])
			VPXOR(Mem{Base: base, Disp: 32}, acc[1], acc[1])
		}
		ADDQ(U32(64), base)
		DECQ(n)
		JMP(LabelRef(name + "_one"))
		Label(name + "_done")
		if isa == "Avx512" {
			for k := 1; k < len(acc); k++ {
				VPXORQ(acc[k], acc[0], acc[0])
			}
			h := YMM()
			VEXTRACTI64X4(U8(1), acc[0], h)
			VPXOR(h, acc[0].AsY(), h)
			acc = []VecVirtual{h}
		} else {
			for k := 1; k < len(acc); k++ {
				VPXOR(acc[k], acc[0], acc[0])
			}
		}
		// Fold 4 qwords to 1, lane by lane (any order: xor commutes).
		x := XMM()
		VEXTRACTI128(U8(1), acc[0], x)
		VPXOR(x, acc[0].AsX(), x)
		lo, hi := GP64(), GP64()
		VMOVQ(x, lo)
		VPEXTRQ(U8(1), x, hi)
		XORQ(hi, lo)
		Store(lo, ReturnIndex(0))
		VZEROUPPER()
		RET()
	}
}

// ---------------------------------------------------------------------------
// Bits(n, g) with int8 activations, AVX-512 VNNI + VBMI, batch 1

const bitsKernelSig = "func(w *byte, stride int, meta *byte, act *byte, chunks int, out *float32, ntiles int, ctrl *byte, idx *int32)"

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
func bitsA8AVX512(n, sub int, meta16 bool) {
	bpc := 8 / n
	R := 16 / (bpc * sub)
	m16 := map[bool]string{true: "Meta16"}[meta16]
	name := fmt.Sprintf("Bits%dA8%sAvx512", n, m16)
	if sub > 1 {
		name = fmt.Sprintf("Bits%dA8G%d%sAvx512", n, 128/sub, m16)
	}
	L := bpc * sub // lanes (blocks) per row and chunk
	TEXT(name, NOSPLIT, bitsKernelSig)
	Pragma("noescape")
	lowA8Doc([]string{
		name + " computes W" + fmt.Sprint(n) + "A8 dot products of Bits matrices (groups of " + map[int]string{1: "at least 128", 2: "64", 4: "32"}[sub],
		"columns) for ntiles tiles of " + fmt.Sprint(R) + " rows with AVX-512 VNNI and VBMI. For tile T,",
		"row i < " + fmt.Sprint(R) + " of the tile (row T*" + fmt.Sprint(R) + "+i from w, stride bytes apart), it computes",
	}, 128/sub, 16,
		"exactly as layout.(*Bits).DotA8Exact (blocks of "+fmt.Sprint(128/sub)+" columns). meta holds, per",
		"tile and chunk, 16 "+map[bool]string{false: "float32 scales and 16 int32", true: "binary16 scales and 16 int16"}[meta16]+" zeros in lane order (row",
		"i, block j of the chunk at lane i*"+fmt.Sprint(L)+"+j); act holds per chunk "+fmt.Sprint(L)+" blocks x 2",
		"halves of 64 activation bytes in the regrouped order (zero outside the",
		"block), then 16 float32 lane scales and 16 int32 lane sums; ctrl the",
		fmt.Sprint(bpc)+" VPMULTISHIFTQB control vectors; idx the "+fmt.Sprint(L)+" permutations gathering",
		"lane i*"+fmt.Sprint(L)+"+j into lane i.",
		"",
		"Preconditions: chunks >= 1, ntiles >= 1, all pointers cover what is read",
		"or written, zero points integers.",
	)
	actChunk := L*128 + 128
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

	metaBlock := map[bool]int{false: 128, true: 64}[meta16]
	lowA8Loops(name, R, L, actChunk, metaBlock,
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
		},
		func(isum VecVirtual, ap, mp GPVirtual) VecVirtual {
			zl, f := ZMM(), ZMM()
			if meta16 {
				VPMOVSXWD(Mem{Base: mp, Disp: 32}, zl)
				VCVTPH2PS(Mem{Base: mp}, f)
			} else {
				VMOVDQU32(Mem{Base: mp, Disp: 64}, zl)
				VMOVUPS(Mem{Base: mp}, f)
			}
			VPMULLD(Mem{Base: ap, Disp: L*128 + 64}, zl, zl)
			VPSUBD(zl, isum, isum)
			VMULPS(Mem{Base: ap, Disp: L * 128}, f, f)
			return f
		})
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
	lowA8Doc([]string{
		name + " computes W3A8 dot products of Bits matrices (groups of " + map[int]string{128: "at least 128", 64: "64"}[unit],
		"columns) for ntiles tiles of 16 rows with AVX-512 VNNI and VBMI. For tile T,",
		"row i < 16 of the tile (row T*16+i from w, stride bytes apart), it computes",
	}, unit, 16,
		"exactly as layout.(*Bits).DotA8Exact (blocks of "+fmt.Sprint(unit)+" columns). chunks counts",
		"periods of two chunks (640 columns, "+fmt.Sprint(nb)+" blocks). meta holds, per tile, period and",
		"block, 16 float32 scales and 16 int32 zeros in row order; act holds per",
		"period "+fmt.Sprint(nq)+" quads x 2 halves of 64 activation bytes (bits3Quads: dword t of",
		"half h holds the columns of the quad's four planes at word t+16h, zero",
		"outside the quad's block), then per block 16 float32 lane scales and 16",
		"int32 lane sums; ctrl the "+fmt.Sprint(len(firsts))+" VPMULTISHIFTQB control vectors; idx is unused.",
		"",
		"Preconditions: chunks >= 1, ntiles >= 1, all pointers cover what is read",
		"or written, zero points integers.",
	)
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

// lowA8Doc writes a low-bit A8 kernel's doc comment: head, the exact
// per-row loop over blocks of unit columns (results at out[T*lanes+i]),
// then tail.
func lowA8Doc(head []string, unit, lanes int, tail ...string) {
	loop := []string{
		"",
		"\tacc = 0",
		"\tfor each " + fmt.Sprint(unit) + "-column block B in column order:",
		"\t\tisum = sum q*xq - z*sum xq        (int32)",
		"\t\tacc = acc + float32(s*xs[B's 128 inputs]) * float32(isum)",
		"\tout[T*" + fmt.Sprint(lanes) + "+i] = acc",
		"",
	}
	Doc(slices.Concat(head, loop, tail)...)
}

// blockTerm adds one block's terms to the row accumulator, lane i = row i
// of a tile: isum (exact sums q*xq) minus zero*sum(xq), times s*xs, with
// meta the block's scales (zeros one vector on) and act its lane
// activation scales (lane sums one vector on); the products and the sum
// are rounded separately, as DotA8Exact does. isum is clobbered.
func blockTerm(v fvec, isum, accRow VecVirtual, meta, act Mem) {
	w := 4 * v.lanes()
	zl := v.reg()
	VMOVUPS(meta.Offset(w), zl)
	VPMULLD(act.Offset(w), zl, zl)
	VPSUBD(zl, isum, isum)
	f := v.reg()
	VMOVUPS(meta, f)
	VMULPS(act, f, f)
	VCVTDQ2PS(isum, isum)
	VMULPS(isum, f, f)
	VADDPS(f, accRow, accRow)
}

// lowA8Loops emits the tile and chunk loops the low-bit A8 kernels share:
// per tile of R rows, per chunk, it zeroes the 16 accumulators, points ap
// at the chunk's activations (act + k*actChunk), mp at the tile's metadata
// for the chunk (meta + k*metaBlock) and wp at the chunk of the tile's
// first row, calls row for each row (after prefetching the next tile's
// rows linearly into L2, as nextTile does for Q4G128), reduces, lets
// epilogue turn the exact isum into the float lane scales f (isum is then
// converted and multiplied in), and adds lane i*L+j of f into lane i of the
// row accumulator in block order.
func lowA8Loops(name string, R, L, actChunk, metaBlock int,
	row func(i int, wp, ap, mp GPVirtual, acc []VecVirtual),
	epilogue func(isum VecVirtual, ap, mp GPVirtual) VecVirtual) {
	tileChunks(name, R, metaBlock, 128, ZMM, func(a VecVirtual) { VPXORD(a, a, a) }, func(k, pf GPVirtual, accRow VecVirtual) {
		acc := make([]VecVirtual, 16)
		for i := range acc {
			acc[i] = ZMM()
			VPXORD(acc[i], acc[i], acc[i])
		}
		ap, mp, wp := chunkPtrs(k, actChunk, metaBlock, 128)
		stride := param("stride")
		for i := 0; i < R; i++ {
			PREFETCHT1(Mem{Base: pf, Disp: 128 * i})
			PREFETCHT1(Mem{Base: pf, Disp: 128*i + 64})
			row(i, wp, ap, mp, acc)
			if i != R-1 {
				ADDQ(stride, wp)
			}
		}
		isum := reduce16(acc)
		f := epilogue(isum, ap, mp)
		VCVTDQ2PS(isum, isum)
		VMULPS(isum, f, f)
		if L == 1 {
			VADDPS(f, accRow, accRow)
		} else {
			ip := param("idx")
			for j := 0; j < L; j++ {
				p, t := ZMM(), ZMM()
				VMOVDQU32(Mem{Base: ip, Disp: 64 * j}, p)
				VPERMPS(f, p, t)
				VADDPS(t, accRow, accRow)
			}
		}
	})
}

// chunkPtrs returns the addresses of chunk k of a kernel's activations
// (act + k*actChunk), block metadata (meta + k*metaBlock; none when
// metaBlock is 0) and weights (w + k*chunkBytes, a power of two).
func chunkPtrs(k GPVirtual, actChunk, metaBlock, chunkBytes int) (ap, mp, wp GPVirtual) {
	ap = GP64()
	IMUL3Q(U32(actChunk), k, ap)
	ADDQ(param("act"), ap)
	if metaBlock != 0 {
		mp = GP64()
		IMUL3Q(U32(metaBlock), k, mp)
		ADDQ(param("meta"), mp)
	}
	wp = GP64()
	MOVQ(k, wp)
	SHLQ(U8(log2(chunkBytes)), wp)
	ADDQ(param("w"), wp)
	return ap, mp, wp
}

// tileChunks emits the tile and chunk loops of the low-bit A8 kernels:
// per tile of R rows a row accumulator (newAcc, cleared by zero), pf at
// the next tile's rows (w + R*stride, for prefetching), and per chunk k
// (0 .. chunks-1) the body, after which pf moves one chunk (chunkBytes of
// each row) of R rows on; tileEnd stores the accumulator and loops over
// the tiles.
func tileChunks(name string, R, metaBlock, chunkBytes int, newAcc func() VecVirtual, zero func(VecVirtual), body func(k, pf GPVirtual, accRow VecVirtual)) {
	Label(name + "_tile")
	accRow := newAcc()
	zero(accRow)
	pf := param("stride")
	IMUL3Q(U32(R), pf, pf)
	ADDQ(param("w"), pf)
	k := GP64()
	XORQ(k, k)
	Label(name + "_chunk")
	body(k, pf, accRow)
	ADDQ(U32(chunkBytes*R), pf)
	INCQ(k)
	CMPQ(k, param("chunks"))
	JB(LabelRef(name + "_chunk"))
	tileEnd(name, accRow, R, metaBlock)
}

// ---------------------------------------------------------------------------
// Sparse12 with int8 activations, AVX-512 VNNI + VBMI + BW, batch 1

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
	Doc(
		name+" computes the exact W(1:2, 7-bit)A8 dot products of Sparse12 matrices",
		"(groups of at least 128 columns) for ntiles tiles of 8 rows with AVX-512",
		"VNNI, VBMI and BW, as layout.(*Sparse12).DotA8Exact: per row, over the",
		"128-column blocks in order, acc = acc + float32(s*xs[B]) * float32(isum).",
		"meta holds per tile and chunk 16 float32 scales, 16 int32 corrections",
		"128*sum(q-z) and 16 zero-point bytes, lane i*2+b (row i, block b), in 192",
		"bytes; act per chunk the two blocks' 64 even-column and 64 odd-column",
		"activations (+128, in the order ctrl gathers pairs), then 16 float32",
		"lane scales; ctrl the two VPERMT2B index vectors; idx the two lane",
		"permutations. Preconditions: chunks, ntiles >= 1; zero points in",
		"0..127; pointers cover what is read or written.",
	)
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

	lowA8Loops(name, R, L, actChunk, metaBlock,
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
		},
		func(isum VecVirtual, ap, mp GPVirtual) VecVirtual {
			VPSUBD(Mem{Base: mp, Disp: 64}, isum, isum) // 128*sum(q-z)
			f := ZMM()
			VMOVUPS(Mem{Base: mp}, f)
			VMULPS(Mem{Base: ap, Disp: bpc * 128}, f, f)
			return f
		})
}

// tileEnd ends a low-bit A8 kernel's tile: it stores accRow (a ZMM or
// YMM of results) at "out", moves w R rows down and meta past this tile's
// chunks (metaBlock bytes each), and loops while tiles remain.
func tileEnd(name string, accRow VecVirtual, R, metaBlock int) {
	VMOVUPS(accRow, Mem{Base: param("out")})
	bump("out", U32(accRow.Size()))
	t := param("stride")
	IMUL3Q(U32(R), t, t)
	bump("w", t)
	m := param("chunks")
	IMUL3Q(U32(metaBlock), m, m)
	bump("meta", m)
	tilesLoop(name, "ntiles")
}

// tilesLoop decrements the tile-count argument count and jumps back to
// name+"_tile" while tiles remain, else returns.
func tilesLoop(name, count string) {
	nt := param(count)
	DECQ(nt)
	Store(nt, Param(count))
	JNZ(LabelRef(name + "_tile"))
	VZEROUPPER()
	RET()
}

// ---------------------------------------------------------------------------
// Bits(n, g) with float32 activations, AVX-512F, one row at a time

const bitsA32Sig = "func(w *byte, stride int, meta *float32, x *float32, xsum *float32, out *float32, rows int, chunks int)"

// fvec is the vector shape of a one-row-at-a-time float kernel: ZMM with
// AVX-512 (16 lanes, EVEX-only forms allowed) or YMM with AVX2 (8 lanes).
type fvec struct{ avx512 bool }

func (f fvec) lanes() int { return map[bool]int{true: 16, false: 8}[f.avx512] }
func (f fvec) suffix() string {
	if f.avx512 {
		return "Avx512"
	}
	return "Avx2"
}
func (f fvec) reg() VecVirtual {
	if f.avx512 {
		return ZMM()
	}
	return YMM()
}
func (f fvec) zero(v VecVirtual) {
	if f.avx512 {
		VPXORD(v, v, v)
	} else {
		VPXOR(v, v, v)
	}
}
func (f fvec) and(a, b, dst Op) {
	if f.avx512 {
		VPANDD(a, b, dst)
	} else {
		VPAND(a, b, dst)
	}
}
func (f fvec) load(m Mem, dst VecVirtual) {
	if f.avx512 {
		VMOVDQU64(m, dst)
	} else {
		VMOVDQU(m, dst)
	}
}
func (f fvec) store(v VecVirtual, m Mem) {
	if f.avx512 {
		VMOVDQU64(v, m)
	} else {
		VMOVDQU(v, m)
	}
}

// broadcast returns a vector with v in every 32-bit lane.
func (f fvec) broadcast(v uint32) VecVirtual {
	r := f.reg()
	t := GP32()
	MOVL(U32(v), t)
	if f.avx512 {
		VPBROADCASTD(t, r)
	} else {
		VMOVD(t, r.AsX())
		VPBROADCASTD(r.AsX(), r)
	}
	return r
}

// fmaScale does acc += dot * (float32 at m).
func (f fvec) fmaScale(m Mem, dot, acc VecVirtual) {
	if f.avx512 {
		VFMADD231PS_BCST(m, dot, acc)
		return
	}
	t := YMM()
	VBROADCASTSS(m, t)
	VFMADD231PS(dot, t, acc)
}

// rowPrefetchRows is how many rows ahead the one-row float kernels
// prefetch: each chunk of a row prefetches the same chunk of the row
// rowPrefetchRows further on, so a column tile's row segments (2 KB of
// 4-bit weights in a 16 KiB tile, stride bytes apart) arrive before
// their row starts. Prefetching 1 KB ahead in the same row left every
// segment's first half to demand misses. Four rows is the best distance
// found (docs/KERNELS.md).
const rowPrefetchRows = 4

// rowPrefetchOffset returns rowPrefetchRows*stride in a register.
func rowPrefetchOffset() GPVirtual {
	o := param("stride")
	IMUL3Q(U32(rowPrefetchRows), o, o)
	return o
}

// rowPrefetch prefetches into L2 the 128 bytes at row + off.
func rowPrefetch(row, off GPVirtual) {
	PREFETCHT1(Mem{Base: row, Index: off, Scale: 1})
	PREFETCHT1(Mem{Base: row, Index: off, Scale: 1, Disp: 64})
}

// bitsA32 emits the W(n)A32 kernel for Bits with n in 8, 4, 3, 2, 1 and
// segments of seg planes (seg*32 columns, within one group).
//
// Without meta16 the metadata is the float32 pair (s, s*z) per row and
// segment (8 bytes). With meta16 (kernels named ...Meta16..., emitted for
// up to meta16MaxSlots(f) segments per chunk) it is the format's own 4
// bytes: per row and chunk P binary16 scales then P binary16 zeros, P the
// segments per chunk rounded up to a power of two (slots past them zero).
// One VCVTPH2PS per half widens them (exact); m = s*z is rounded to
// float32 as layout.(*Bits).Affine does and its correction m*xsum taken
// for the whole chunk in one FMA; the scales go through a stack slot so
// each segment's scaling stays one broadcast FMA. A single segment per
// chunk (P = 1) converts its pair in a register instead.
func bitsA32(n, seg int, f fvec, meta16 bool) {
	step := 32 / n
	W := f.lanes()
	sp := step / seg // segments per chunk
	P := 1
	for P < sp {
		P *= 2
	}
	if meta16 && P > meta16MaxSlots(f) {
		return
	}
	m16 := map[bool]string{true: "Meta16"}[meta16]
	name := fmt.Sprintf("Bits%dA32S%d%s%s", n, seg, m16, f.suffix())
	TEXT(name, NOSPLIT, bitsA32Sig)
	Pragma("noescape")
	metaDoc := []string{
		"per row and segment the float32 pair (s, s*z), x the zero-padded",
		"activations and xsum their sum per segment. The universal packing needs",
	}
	if meta16 {
		metaDoc = []string{
			"per row and chunk " + fmt.Sprint(P) + " binary16 scales s then " + fmt.Sprint(P) + " binary16 zeros z (slots",
			"past the chunk's " + fmt.Sprint(sp) + " segments zero; (s*z) rounded to float32), x the",
			"zero-padded activations and xsum their sum per segment, " + fmt.Sprint(P) + " slots per",
			"chunk (zero past its segments). The universal packing needs",
		}
	}
	Doc(slices.Concat([]string{
		name + " computes W" + fmt.Sprint(n) + "A32 dot products of Bits matrices, one row at a time",
		"(rows rows from w, stride bytes apart, chunks chunks each), with " + map[bool]string{true: "AVX-512F", false: "AVX2 and FMA"}[f.avx512] + map[bool]string{true: " (and F16C)"}[meta16] + ":",
		"",
		"\tout[r] = sum over segments j of s[j]*sum(q*x) - (s*z)[j]*xsum[j]",
		"",
		"where a segment is " + fmt.Sprint(seg) + " planes (" + fmt.Sprint(seg*32) + " columns, inside one group), meta holds",
	}, metaDoc, []string{
		"no activation reordering: plane i of " + fmt.Sprint(W) + " words is " + fmt.Sprint(W) + " consecutive columns.",
		"Within layout.BitsTolerance of the float64 reference. Preconditions:",
		"rows, chunks >= 1; pointers cover what is read or written.",
	})...)
	// VPERMPS reads only the low 4 (ZMM) or 3 (YMM) bits of each index, so
	// one shift brings a run of per elements into an index and a table per
	// element of the run (tables[j][e] = the code at bits n*j of e) turns
	// it into floats with no mask: per 16 weights a shift per run, a
	// VPERMPS and an FMA, where a mask and a shift per element cost more.
	per, tables := bitsRuns(n, seg, f)
	var mask VecVirtual
	if tables == nil {
		mask = f.broadcast(uint32(1)<<n - 1)
	}
	wp, mp := param("w"), param("meta")
	pfo := rowPrefetchOffset()
	var scales Mem // meta16, P > 1: the chunk's scales as float32
	if meta16 && P > 1 {
		scales = AllocLocal(4 * max(P, 4)) // slotVec(P) is at least an XMM: 16 bytes are stored
	}
	Label(name + "_row")
	acc := f.reg()
	f.zero(acc)
	slots := 1 // of the correction m*xsum
	if meta16 {
		slots = P
	}
	corr := slotVec(slots)
	f.zero(corr)
	xk, xs := param("x"), param("xsum")
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
	var sv VecVirtual // meta16: the chunk's scales (slot j: segment j)
	if meta16 {
		var mv VecVirtual
		sv, mv = meta16Chunk(Mem{Base: mp}, P)
		switch P {
		case 1:
			VFMADD231SS(Mem{Base: xs}, mv, corr)
		case 2:
			t := XMM()
			VMOVQ(Mem{Base: xs}, t)
			VFMADD231PS(t, mv, corr)
		default:
			VFMADD231PS(Mem{Base: xs}, mv, corr)
		}
		if P > 1 {
			VMOVUPS(sv, scales)
		}
		ADDQ(U32(4*P), mp)
		ADDQ(U32(4*P), xs)
	}
	for s0 := 0; s0 < step; s0 += seg {
		dots := newChains(f, seg*parts, chainsMax)
		for i0 := s0; i0 < s0+seg; i0 += per {
			for h := 0; h < parts; h++ {
				sh := 32 - n*(i0+per) // the run's last element to bit 0
				var idx VecVirtual
				switch {
				case tables == nil:
				case sh == 0:
					idx = data[h]
				default:
					idx = f.reg()
					VPSRLD(U8(sh), data[h], idx)
				}
				for j := 0; j < per; j++ {
					i := i0 + per - 1 - j // at bits n*j of idx
					c := f.reg()
					switch sh := 32 - n*(i+1); {
					case tables != nil:
						VPERMPS(tables[j], idx, c)
					case sh == 32-n: // the top element: the shift leaves n bits
						VPSRLD(U8(sh), data[h], c)
						VCVTDQ2PS(c, c)
					case sh != 0:
						VPSRLD(U8(sh), data[h], c)
						f.and(c, mask, c)
						VCVTDQ2PS(c, c)
					default:
						f.and(data[h], mask, c)
						VCVTDQ2PS(c, c)
					}
					xm := Mem{Base: xk, Disp: (i*32 + W*h) * 4}
					if d, first := dots.next(); first {
						VMULPS(xm, c, d)
					} else {
						VFMADD231PS(xm, c, d)
					}
				}
			}
		}
		switch {
		case !meta16:
			f.fmaScale(Mem{Base: mp}, dots.sum(), acc)
			sz := XMM()
			VMOVSS(Mem{Base: mp, Disp: 4}, sz)
			VFMADD231SS(Mem{Base: xs}, sz, corr)
			ADDQ(U32(8), mp)
			ADDQ(U32(4), xs)
		case P > 1:
			f.fmaScale(scales.Offset(4*(s0/seg)), dots.sum(), acc)
		default: // one segment per chunk: its scale stays in a register
			b := f.reg()
			VBROADCASTSS(sv, b)
			VFMADD231PS(dots.sum(), b, acc)
		}
	}
	ADDQ(U32(128), row)
	ADDQ(U32(step*128), xk)
	DECQ(k)
	JNZ(LabelRef(name + "_chunk"))
	rowEnd(name, acc, slotSum(corr, slots, f), wp, f)
}

// meta16MaxSlots is the most segments per chunk (P) a Meta16 float kernel
// widens at once: a ZMM of scales, or a YMM on AVX2.
func meta16MaxSlots(f fvec) int { return map[bool]int{true: 16, false: 8}[f.avx512] }

// slotVec returns a vector register holding P float32 slots (at least an
// XMM).
func slotVec(P int) VecVirtual {
	switch {
	case P > 8:
		return ZMM()
	case P > 4:
		return YMM()
	}
	return XMM()
}

// meta16Chunk widens a chunk's metadata at m (P binary16 scales, then P
// binary16 zeros) and returns s and m = s*z (rounded to float32 as
// layout's Affine takes it) in slots 0..P-1 of two vectors (slotVec(P);
// with P = 1 the pair shares one dword and only slot 0 counts).
func meta16Chunk(m Mem, P int) (sv, mv VecVirtual) {
	sv, mv = slotVec(P), slotVec(P)
	if P == 1 {
		VMOVD(m, sv)
		VCVTPH2PS(sv, sv) // (s, z)
		VMOVSHDUP(sv, mv)
		VMULSS(mv, sv, mv)
		return sv, mv
	}
	meta16Load(m, P, sv)
	meta16Load(m.Offset(2*P), P, mv)
	VMULPS(mv, sv, mv)
	return sv, mv
}

// meta16Load widens P binary16 values at m into the float32 slots of v
// (slotVec(P)), reading exactly 2*P bytes.
func meta16Load(m Mem, P int, v VecVirtual) {
	if P == 2 {
		VMOVD(m, v)
		VCVTPH2PS(v, v)
		return
	}
	VCVTPH2PS(m, v)
}

// slotSum returns an XMM whose lane 0 is the sum of v's P slots (v is
// clobbered).
func slotSum(v VecVirtual, P int, f fvec) VecVirtual {
	if P > 8 {
		h := YMM()
		VEXTRACTF64X4(U8(1), v, h)
		VADDPS(h, v.AsY(), h)
		v = h
	}
	if P > 4 {
		h := XMM()
		if f.avx512 {
			VEXTRACTF32X4(U8(1), v, h)
		} else {
			VEXTRACTF128(U8(1), v, h)
		}
		VADDPS(h, v.AsX(), h)
		v = h
	}
	x := v // an XMM from here on
	if P > 2 {
		t := XMM()
		VPERMILPS(U8(0x4e), x, t)
		VADDPS(t, x, x)
	}
	if P > 1 {
		t := XMM()
		VMOVSHDUP(x, t)
		VADDSS(t, x, x)
	}
	return x
}

// ---------------------------------------------------------------------------
// Sparse12 with float32 activations, AVX-512F, one row at a time

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
	metaDoc := "with (s, s*z) per row and segment in meta. Within layout.BitsTolerance"
	if meta16 {
		metaDoc = "with per row and chunk " + fmt.Sprint(P) + " binary16 s, then " + fmt.Sprint(P) + " binary16 z in meta (s*z rounded to float32). Within layout.BitsTolerance"
	}
	Doc(
		name+" computes W(1:2, 7-bit)A32 dot products of Sparse12 matrices one row",
		"at a time with "+map[bool]string{true: "AVX-512F", false: "AVX2 and FMA"}[f.avx512]+map[bool]string{true: " (and F16C)"}[meta16]+": for each pair byte (pos<<7 | q) the position",
		"bit selects xe[p] or xo[p] (the even- and odd-column activations of",
		"pair p), and per segment of "+fmt.Sprint(seg)+" planes ("+fmt.Sprint(seg*64)+" columns)",
		"",
		"\tacc += s*sum(q*x_sel) - (s*z)*sum(x_sel)",
		"",
		metaDoc,
		"of the float64 reference. Preconditions: rows, chunks >= 1; pointers",
		"cover what is read or written.",
	)
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

// chains spreads a sum of n terms over up to k (at most chainsMax)
// independent accumulators, added pairwise at the end: the one-row float kernels had
// been bound by the latency of one accumulator's FMA chain (4 cycles per
// 16 or 8 weights), not by throughput.
type chains struct {
	regs []VecVirtual
	i    int
}

// chainsMax is the most accumulators a chain spreads over.
const chainsMax = 4

func newChains(f fvec, n, k int) *chains {
	c := &chains{}
	for i := 0; i < min(n, k, chainsMax); i++ {
		c.regs = append(c.regs, f.reg())
	}
	return c
}

// next returns the accumulator of the next term, and whether it is that
// accumulator's first (to be written, not added to).
func (c *chains) next() (VecVirtual, bool) {
	r := c.regs[c.i%len(c.regs)]
	c.i++
	return r, c.i <= len(c.regs)
}

// sum adds the accumulators pairwise and returns the register holding the
// total.
func (c *chains) sum() VecVirtual {
	rs := c.regs
	for len(rs) > 1 {
		var next []VecVirtual
		for j := 0; j+1 < len(rs); j += 2 {
			VADDPS(rs[j+1], rs[j], rs[j])
			next = append(next, rs[j])
		}
		if len(rs)%2 == 1 {
			next = append(next, rs[len(rs)-1])
		}
		rs = next
	}
	return rs[0]
}

// rowEnd ends a one-row-at-a-time float kernel's row: it stores the
// horizontal sum of acc (minus corr's lane 0, if given) at "out", moves
// "out" and wp on, and loops while rows remain. With AVX-512 the shuffles
// are EVEX encodable (registers may be X16..X31).
func rowEnd(name string, acc, corr VecVirtual, wp GPVirtual, f fvec) {
	h := acc
	if f.avx512 {
		h = YMM()
		VEXTRACTF64X4(U8(1), acc, h)
		VADDPS(h, acc.AsY(), h)
	}
	res, t2 := XMM(), XMM()
	if f.avx512 {
		VEXTRACTF32X4(U8(1), h, res)
	} else {
		VEXTRACTF128(U8(1), h, res)
	}
	VADDPS(res, h.AsX(), res)
	VPERMILPS(U8(0x4e), res, t2)
	VADDPS(t2, res, res)
	VPERMILPS(U8(0xb1), res, t2)
	VADDPS(t2, res, res)
	if corr != nil {
		VSUBSS(corr, res, res)
	}
	op := param("out")
	VMOVSS(res, Mem{Base: op})
	ADDQ(U32(4), op)
	Store(op, Param("out"))
	ADDQ(param("stride"), wp)
	r := param("rows")
	DECQ(r)
	Store(r, Param("rows"))
	JNZ(LabelRef(name + "_row"))
	VZEROUPPER()
	RET()
}

// widenF16 emits the binary16 to float32 widening of activations.
func widenF16() {
	TEXT("WidenF16", NOSPLIT, "func(dst *float32, src *uint16, n int)")
	Pragma("noescape")
	Doc(
		"WidenF16 widens n binary16 values at src to float32 at dst with F16C",
		"(VCVTPH2PS on YMM), 32 per iteration: exact, with signaling NaNs",
		"quieted. Preconditions: n >= 32 and a multiple of 32.",
	)
	d, s, n := param("dst"), param("src"), param("n")
	SHRQ(U8(5), n)
	Label("WidenF16_loop")
	for i := 0; i < 4; i++ {
		y := YMM()
		VCVTPH2PS(Mem{Base: s, Disp: 16 * i}, y)
		VMOVUPS(y, Mem{Base: d, Disp: 32 * i})
	}
	ADDQ(U32(64), s)
	ADDQ(U32(128), d)
	DECQ(n)
	JNZ(LabelRef("WidenF16_loop"))
	VZEROUPPER()
	RET()
}
