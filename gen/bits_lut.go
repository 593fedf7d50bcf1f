package main

import (
	"fmt"
	"math"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ---------------------------------------------------------------------------
// Bits(1) with float32 activations, AVX-512F: lookup tables, 16 rows per
// vector
//
// The one-row float kernels spend a VPERMPS and an FMA on every 16
// weights whatever the width, so Bits1 ran no faster than Bits2 (35% of the
// read bandwidth). Here the vector lanes are 16 rows instead of 16
// columns: for every nibble of a word (4 one-bit codes) a 16-entry table
// holds the sum of the nibble's activations for each of the 16 code
// combinations (T-MAC's idea), so one VPERMPS (the table a memory operand)
// and one VADDPS handle 64 weights. The tables (16 floats per nibble
// column: 16 KiB per chunk of 32 words) are built once per call and
// vector, shared by all rows and threads; the rows' words come
// transposed at load (16 rows' word t in one vector), because transposing
// 16x16 blocks in registers costs a noticeable share of the compute.
//
// The kernels walk the words chunk-major: a chunk's tables stay in L1 for
// every row of the task, the next chunk's are prefetched meanwhile, and
// the words stream with nothing else through L2. Tiles of 64 rows taking
// each chunk in turn stream worse: they read the tables from L2 once per
// 64 rows (448 KiB for every 229 KiB of Bits2G128 words at 14336 columns).
//
// Bits2 runs the same way with two 2-bit codes per nibble (tables of
// q0*x0 + q1*x1): 32 weights per VPERMPS and VADDPS against 16 per VPERMPS
// and FMA in the one-row kernel. It beats the one-row kernel from DRAM
// only with all three of lutPack's order, the short prefetch and the
// packed words in huge pages.

// bitsLutKernels emits the table builders and the lookup-table float32
// kernels of Bits(1) and Bits(2).
func bitsLutKernels() {
	for _, n := range []int{1, 2} {
		bitsLutTables(n)
		for seg := 4 / n; seg <= 32/n; seg *= 2 { // segments of at least a nibble
			for _, f16 := range []bool{false, true} {
				bitsLut(n, seg, f16, false)
				bitsLut(n, seg, f16, true)
			}
		}
	}
}

const bitsLutSig = "func(w *byte, tab *float32, xsum *float32, out *float32, blocks int, chunks int, stride int)"

// lutFields returns, for nibble j of an n-bit word, the element (plane
// index i within the chunk) of each n-bit field u of the nibble's 4-bit
// index (field u at index bits n*u): the nibble is word bits 28-4j ..
// 31-4j, and element i sits at bits 32-n*(i+1).
func lutFields(n, j int) []int {
	m := 4 / n
	out := make([]int, m)
	for u := range out {
		out[u] = m*(j+1) - 1 - u
	}
	return out
}

// bitsLutTables emits BitsLutTables<n>Avx512, which builds the tables the
// BitsLut kernels read.
func bitsLutTables(n int) {
	name := fmt.Sprintf("BitsLutTables%dAvx512", n)
	step := 32 / n
	m := 4 / n
	TEXT(name, NOSPLIT, "func(tab *float32, sums *float32, x *float32, chunks int)")
	Pragma("noescape")
	kernelDoc("Bits lookup-table kernels", fmt.Sprintf("%s builds the lookup tables of the Bits%dLut kernels with AVX-512F, for chunks of %d float32 activations (%d fields per nibble).",
		name, n, 32*step, m))
	coef := make([]VecVirtual, m)
	for u := range coef {
		coef[u] = ZMM()
		VMOVUPS(rodata(fmt.Sprintf("lutField%d_%d", n, u), 16, 4, func(e int) uint64 {
			return uint64(math.Float32bits(float32(e >> (n * u) & (1<<n - 1))))
		}), coef[u])
	}
	tp, sp, xp := param("tab"), param("sums"), param("x")
	k := param("chunks")
	Label(name + "_chunk")
	acc := make([]VecVirtual, 8)
	for j := range acc {
		acc[j] = ZMM()
		VPXORD(acc[j], acc[j], acc[j])
	}
	xt := GP64()
	MOVQ(xp, xt)
	t := GP64()
	XORQ(t, t)
	Label(name + "_t")
	for j := 0; j < 8; j++ {
		tb := ZMM()
		for u, i := range lutFields(n, j) {
			xm := Mem{Base: xt, Disp: 128 * i}
			if u == 0 {
				VMULPS_BCST(xm, coef[u], tb)
			} else {
				VFMADD231PS_BCST(xm, coef[u], tb)
			}
		}
		VMOVUPS(tb, Mem{Base: tp, Disp: 64 * j})
		VADDPS(tb, acc[j], acc[j])
	}
	ADDQ(U32(4), xt)
	ADDQ(U32(8*64), tp)
	INCQ(t)
	CMPQ(t, U32(32))
	JB(LabelRef(name + "_t"))
	for j := range acc {
		VMOVUPS(acc[j], Mem{Base: sp, Disp: 64 * j})
	}
	ADDQ(U32(8*64), sp)
	ADDQ(U32(4*32*step), xp)
	DECQ(k)
	JNZ(LabelRef(name + "_chunk"))
	VZEROUPPER()
	RET()
}

// bitsLut emits Bits<n>LutA32S<seg>[F16]Avx512 (n = 1 or 2; segments of
// seg planes, at least one nibble: seg*n >= 4).
//
// The kernel walks the packed words chunk-major (cpu's lutPack): for each
// chunk, every 16-row block of the task in turn, so the chunk's tables
// (16 KiB) stay in L1 for all of the task's rows and the words stream
// with nothing else through L2. Each block's unit is its 32 words (16 rows
// each, transposed) followed by its metadata for the chunk's segments.
//
// With f16 the metadata is binary16: per segment 16 scales s, then 16
// zero points z, and m = s*z in float32 (as layout.(*Bits).Affine takes
// it): 4 bytes per row and segment instead of 8.
func bitsLut(n, seg int, f16, nta bool) {
	step := 32 / n
	nps := seg * n / 4 // nibbles per segment
	sps := step / seg  // segments per chunk
	name := fmt.Sprintf("Bits%dLutA32S%dAvx512", n, seg)
	if f16 {
		name = fmt.Sprintf("Bits%dLutA32S%dF16Avx512", n, seg)
	}
	prefetch, hint := PREFETCHT1, "PREFETCHT1"
	if nta {
		name = strings.TrimSuffix(name, "Avx512") + "NtaAvx512"
		prefetch, hint = PREFETCHNTA, "PREFETCHNTA"
	}
	unit := lutUnitBytes(n, seg, f16)
	lines := (unit - 2048) / 64 // metadata lines per unit
	TEXT(name, NOSPLIT, bitsLutSig)
	Pragma("noescape")
	kernelDoc("Bits lookup-table kernels", fmt.Sprintf("%s computes W%dA32 dot products of Bits matrices with AVX-512F and lookup tables for blocks of 16 rows, segments of %d planes (%d columns), %s metadata, units of %d bytes, prefetching w with %s %d units ahead.",
		name, n, seg, seg*32, map[bool]string{false: "float32", true: "binary16"}[f16], unit, hint, lutPrefetchUnits))
	jump, bLeft, kLeft := AllocLocal(8), AllocLocal(8), AllocLocal(8)
	// In the NTA (AMD) kernels VPMULTISHIFTQB brings nibble j of every
	// dword to its low bits (the bits VPERMPS reads), off the Zen 5
	// permute pipes VPSRLD would share with VPERMPS. The others shift with
	// VPSRLD: on Intel cores VPMULTISHIFTQB and VPERMPS both need port 5.
	var ctrl [7]VecVirtual
	if nta {
		for j := range ctrl {
			ctrl[j] = ZMM()
			sh := uint64(28 - 4*j)
			VMOVDQU64(rodata(fmt.Sprintf("lutNibble%d", j), 8, 8, func(int) uint64 { return sh | (sh+32)<<32 }), ctrl[j])
		}
	}
	{
		d := GP64() // the jump from one chunk's blocks to the next chunk's
		IMUL3Q(U32(unit), param("blocks"), d)
		NEGQ(d)
		ADDQ(param("stride"), d)
		MOVQ(d, jump)
	}
	MOVQ(param("chunks"), kLeft)
	rx, tp, xs := param("w"), param("tab"), param("xsum")
	Label(name + "_chunk")
	ox := param("out")
	nb := param("blocks")
	MOVQ(nb, bLeft)
	pf := GP64()
	LEAQ(Mem{Base: rx, Disp: lutPrefetchUnits * unit}, pf)
	// The next chunk's tables, 512 bytes per block, cyclically (into L1:
	// without it every task's first block of a chunk waited on 16 KiB
	// of tables from L2 or the other core).
	tpf := GP64()
	LEAQ(Mem{Base: tp, Disp: lutTableBytes}, tpf)
	CMPQ(nb, U8(lutPrefetchUnits))
	JA(LabelRef(name + "_block"))
	ADDQ(jump, pf)
	Label(name + "_block")
	acc := make([]VecVirtual, 8)
	for j := range acc {
		acc[j] = ZMM()
	}
	for t := 0; t < 32; t++ {
		vt := ZMM() // word t of the block's rows, lane i = row i
		VMOVDQU32(Mem{Base: rx, Disp: 64 * t}, vt)
		// One line of the unit ahead per word, its metadata lines spread
		// over the words (in bursts of 16 and 8 prefetches had cost
		// 10-30%).
		prefetch(Mem{Base: pf, Disp: 64 * t})
		if t%(32/lines) == 0 {
			prefetch(Mem{Base: pf, Disp: 2048 + 64*(t/(32/lines))})
		}
		if t%4 == 0 {
			PREFETCHT0(Mem{Base: tpf, Disp: 64 * (t / 4)})
		}
		for j := 0; j < 8; j++ {
			var idx Op = vt
			if j < 7 {
				idx = ZMM()
				if nta {
					VPMULTISHIFTQB(vt, ctrl[j], idx)
				} else {
					VPSRLD(U8(28-4*j), vt, idx)
				}
			}
			tm := Mem{Base: tp, Disp: 64 * (8*t + j)}
			if t == 0 {
				VPERMPS(tm, idx, acc[j])
				continue
			}
			c := ZMM()
			VPERMPS(tm, idx, c)
			VADDPS(c, acc[j], acc[j])
		}
	}
	res := ZMM()
	VMOVUPS(Mem{Base: ox}, res)
	for s := 0; s < sps; s++ {
		d := newChainsFrom(acc[s*nps : (s+1)*nps]).sum()
		mv := ZMM()
		if f16 {
			sv := ZMM()
			VCVTPH2PS(Mem{Base: rx, Disp: 2048 + 64*s}, sv)
			VCVTPH2PS(Mem{Base: rx, Disp: 2048 + 64*s + 32}, mv)
			VMULPS(sv, mv, mv)
			VFMADD231PS(sv, d, res)
		} else {
			VFMADD231PS(Mem{Base: rx, Disp: 2048 + 128*s}, d, res)
			VMOVUPS(Mem{Base: rx, Disp: 2048 + 128*s + 64}, mv)
		}
		VFNMADD231PS_BCST(Mem{Base: xs, Disp: 4 * s}, mv, res)
	}
	VMOVUPS(res, Mem{Base: ox})
	ADDQ(U32(unit), rx)
	ADDQ(U32(unit), pf)
	{
		ADDQ(U32(512), tpf)
		lim, wrap := GP64(), GP64()
		LEAQ(Mem{Base: tp, Disp: 2 * lutTableBytes}, lim)
		LEAQ(Mem{Base: tp, Disp: lutTableBytes}, wrap)
		CMPQ(tpf, lim)
		CMOVQCC(wrap, tpf)
	}
	ADDQ(U8(64), ox)
	DECQ(bLeft)
	JZ(LabelRef(name + "_next"))
	CMPQ(bLeft, U8(lutPrefetchUnits))
	JNE(LabelRef(name + "_block"))
	ADDQ(jump, pf) // the prefetches pass into the next chunk
	JMP(LabelRef(name + "_block"))
	Label(name + "_next")
	ADDQ(jump, rx)
	ADDQ(U32(lutTableBytes), tp)
	ADDQ(U8(4*sps), xs)
	DECQ(kLeft)
	JNZ(LabelRef(name + "_chunk"))
	VZEROUPPER()
	RET()
}

// lutUnitBytes is the bytes of one 16-row block's unit in a chunk of the
// table kernels' packed words: 32 words of 16 rows, then the metadata of
// the chunk's segments (16 scales and 16 m or z per segment, float32 or
// binary16).
func lutUnitBytes(n, seg int, f16 bool) int {
	segBytes := 128
	if f16 {
		segBytes = 64
	}
	return 2048 + segBytes*(32/n/seg)
}

// lutPrefetchUnits is how many units (one 16-row block's words and
// metadata for a chunk: 2.3 KiB for Bits2G128) ahead of the one being read
// the table kernels prefetch w, one line per word. The kernels come in
// two hints (cpu picks by vendor): PREFETCHNTA for AMD, PREFETCHT1 for
// the others, on which NTA lines skip L2 and are gone before use. Three
// units is the best distance found for NTA; without the software
// prefetches the hardware prefetchers do not keep up.
const lutPrefetchUnits = 3

// lutTableBytes is one chunk's tables: 32 words, 8 nibbles, 16 float32.
const lutTableBytes = 32 * 8 * 64
