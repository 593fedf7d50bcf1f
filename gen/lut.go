package main

import (
	"fmt"
	"math"

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
// transposed at load (16 rows' word t in one vector). Transposing 16x16
// blocks in registers instead had cost 13-15% of the compute (one core,
// 1024x4096-cached: Bits2 50-51 against 43-44 us, Bits1 24-25 against
// 21-22; from DRAM, 2 threads, Bits2G128 0.46-0.55 against 0.43-0.52 ms,
// Bits1 unchanged). Tiles of 64 rows take each chunk in
// turn, so a chunk's tables come from L2 once per 64 rows and stay in L1
// for the other three blocks.
//
// Bits2 runs the same way with two 2-bit codes per nibble (tables of
// q0*x0 + q1*x1): 32 weights per VPERMPS and VADDPS against 16 per VPERMPS
// and FMA in the one-row kernel. It first measured slower than the
// one-row kernel (Bits2G128 A32 4096x14336, 2 threads, Zen 5: 0.93-1.28
// ms against 0.57-0.78), then, with lutPack's order and the short
// prefetch, 20% faster in cache (1024x4096, one core: 53 against 63-65
// us) but no faster from DRAM until the packed words went into huge pages
// too: three alternating rounds, A16 0.47-0.60 against 0.54-0.61 ms, A32
// 0.47-0.50 against 0.52-0.58.

const bitsLutSig = "func(w *byte, meta *byte, metaStride int, tab *float32, xsum *float32, out *float32, tiles int, chunks int)"

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
	Doc(
		name+" writes, for chunks chunks of "+fmt.Sprint(32*step)+" float32 activations at x (column",
		"(k*"+fmt.Sprint(step)+" + i)*32 + t of chunk k is element i of lane t), the lookup tables of",
		fmt.Sprintf("the Bits%dLut kernels: table (k, t, j) at tab + ((k*32 + t)*8 + j)*16 holds,", n),
		"for each 4-bit index e, the sum over the nibble's "+fmt.Sprint(m)+" fields u (index bits",
		fmt.Sprintf("%d*u ..) of field(e, u) times the activation of the field's element", n),
		"(word bits 28-4j .. 31-4j hold the nibble), accumulated field by field",
		"in order of u. sums + (k*8 + j)*16 receives the sum over t of the",
		"chunk's tables (k, t, j): its entry for the index with every field 1",
		"is the sum of the nibble column's activations. chunks >= 1.",
	)
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

// bitsLut emits Bits<n>LutA32S<seg>X<sub>Avx512 (n = 1 or 2; segments of
// seg planes, at least one nibble: seg*n >= 4; tiles of sub*16 rows).
//
// With f16 the metadata is binary16: per segment 16 scales s, then 16
// zero points z, and m = s*z in float32 (as layout.(*Bits).Affine takes
// it): 4 bytes per row and segment instead of 8.
func bitsLut(n, seg, sub int, f16 bool) {
	step := 32 / n
	nps := seg * n / 4 // nibbles per segment
	sps := step / seg  // segments per chunk
	name := fmt.Sprintf("Bits%dLutA32S%dX%dAvx512", n, seg, sub)
	segBytes := 128 // metadata bytes per block and segment
	if f16 {
		name = fmt.Sprintf("Bits%dLutA32S%dX%dF16Avx512", n, seg, sub)
		segBytes = 64
	}
	lines := segBytes * sps / 64 // metadata lines per block and chunk
	metaDoc := [2]string{"per segment 16 float32 scales s, then 16 float32 m (s*z, or -o with", "offsets), one per row."}
	if f16 {
		metaDoc = [2]string{"per segment 16 binary16 scales s, then 16 binary16 zero points z, one", "per row; m = s*z in float32."}
	}
	R := 16 * sub
	TEXT(name, NOSPLIT, bitsLutSig)
	Pragma("noescape")
	Doc(
		name+" computes W"+fmt.Sprint(n)+"A32 dot products of Bits matrices with AVX-512F and",
		"lookup tables, for tiles tiles of "+fmt.Sprint(R)+" rows of chunks chunks each, from w in the",
		"kernels' order (cpu's lutPack: the tiles one after the other, each chunk",
		"by chunk, each chunk's 16-row blocks in turn, each block word by word,",
		"a word as 16 dwords, row i's at dword i):",
		"",
		"\tout[16*T + i] = sum over segments j of s[j]*sum(q*x) - m[j]*xsum[j]",
		"",
		"for row i of 16-row block T, where a segment is "+fmt.Sprint(seg)+" planes ("+fmt.Sprint(seg*32)+" columns,",
		"inside one group). Block T's metadata starts at meta + T*metaStride bytes:",
		metaDoc[0],
		metaDoc[1]+" tab holds the chunks' tables (BitsLutTables"+fmt.Sprint(n)+"Avx512),",
		"xsum the activations' sum per segment. Per word t of a chunk, lane i",
		"of the block's vector is row i; nibble j's index then picks, per",
		"row, the sum of the activations its codes select",
		"from table (k, t, j). The blocks of a tile take each chunk in turn, so",
		"the chunk's tables (16 KiB) are read from L2 once per tile, and w is",
		"read as one stream; the next chunk's tables, w lutPrefetchBytes ahead",
		"and the next tile's metadata are prefetched meanwhile.",
		"Within layout.BitsTolerance of the float64 reference.",
		"Preconditions: tiles, chunks >= 1; pointers cover what is read or written.",
	)
	kLeft, xLeft := AllocLocal(8), AllocLocal(8)
	Label(name + "_tile")
	ox := param("out")
	{
		z := ZMM()
		VPXORD(z, z, z)
		for x := 0; x < sub; x++ {
			VMOVUPS(z, Mem{Base: ox, Disp: 64 * x})
		}
	}
	rx := param("w")
	mx, tp, xs := param("meta"), param("tab"), param("xsum")
	mlin := param("metaStride") // the next tile's metadata
	SHLQ(U8(log2(sub)), mlin)
	ADDQ(mx, mlin)
	{
		k := param("chunks")
		MOVQ(k, kLeft)
	}
	Label(name + "_chunk")
	tpf := GP64()
	LEAQ(Mem{Base: tp, Disp: lutTableBytes}, tpf)
	MOVQ(U32(sub), xLeft)
	Label(name + "_sub")
	acc := make([]VecVirtual, 8)
	for j := range acc {
		acc[j] = ZMM()
	}
	perT := 8 / sub // table lines of the next chunk to prefetch per word
	for hh := 0; hh < 2; hh++ {
		for tt := 0; tt < 16; tt++ {
			vt := ZMM() // word 16*hh+tt of the block's rows, lane i = row i
			VMOVDQU32(Mem{Base: rx, Disp: 1024*hh + 64*tt}, vt)
			t := 16*hh + tt
			for l := 0; l < perT; l++ {
				PREFETCHT0(Mem{Base: tpf, Disp: 64 * (perT*t + l)})
			}
			// One line of rows per word and the metadata lines spread
			// over the words: in bursts of 16 and 8 they had cost 10-30%.
			PREFETCHT1(Mem{Base: rx, Disp: lutPrefetchBytes + 1024*hh + 64*tt})
			if t%(32/lines) == 0 {
				PREFETCHT1(Mem{Base: mlin, Disp: 64 * (t / (32 / lines))})
			}
			for j := 0; j < 8; j++ {
				var idx Op = vt
				if sh := 28 - 4*j; sh != 0 {
					idx = ZMM()
					VPSRLD(U8(sh), vt, idx)
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
	}
	res := ZMM()
	VMOVUPS(Mem{Base: ox}, res)
	for s := 0; s < sps; s++ {
		d := newChainsFrom(acc[s*nps : (s+1)*nps]).sum()
		mv := ZMM()
		if f16 {
			sv := ZMM()
			VCVTPH2PS(Mem{Base: mx, Disp: 64 * s}, sv)
			VCVTPH2PS(Mem{Base: mx, Disp: 64*s + 32}, mv)
			VMULPS(sv, mv, mv)
			VFMADD231PS(sv, d, res)
		} else {
			VFMADD231PS(Mem{Base: mx, Disp: 128 * s}, d, res)
			VMOVUPS(Mem{Base: mx, Disp: 128*s + 64}, mv)
		}
		VFNMADD231PS_BCST(Mem{Base: xs, Disp: 4 * s}, mv, res)
	}
	VMOVUPS(res, Mem{Base: ox})
	ADDQ(U32(segBytes*sps), mlin)
	ADDQ(U32(2048), rx) // the next block: w is read in order
	if sub > 1 {
		ADDQ(U32(64), ox)
		ADDQ(param("metaStride"), mx)
		ADDQ(U32(64*32*perT), tpf)
		DECQ(xLeft)
		JNZ(LabelRef(name + "_sub"))
		// Back to the tile's first block, one chunk on (the rows are
		// already there: the tile's chunks follow each other).
		SUBQ(U32(64*sub), ox)
		back := param("metaStride")
		SHLQ(U8(log2(sub)), back)
		SUBQ(back, mx)
	}
	ADDQ(U32(segBytes*sps), mx)
	ADDQ(U32(4*sps), xs)
	ADDQ(U32(lutTableBytes), tp)
	DECQ(kLeft)
	JNZ(LabelRef(name + "_chunk"))
	bump("out", U32(64*sub))
	t := param("chunks")
	SHLQ(U8(log2(R*128)), t)
	bump("w", t)
	ms := param("metaStride")
	SHLQ(U8(log2(sub)), ms)
	bump("meta", ms)
	tilesLoop(name, "tiles")
}

// lutPrefetchBytes is how far ahead of the block being read the table
// kernels prefetch w (into L2, one line per word of the block). Measured
// on the 2-core Zen 5 VM, Bits1G128 A32 4096x14336, alternating binaries,
// 2 threads (1 thread): 4 KiB 0.30-0.37 ms (0.47-0.57), 6 KiB 0.28-0.31
// (0.41-0.42), 8 KiB 0.29-0.38 (0.43-0.47), 16 KiB 0.32-0.39 (0.45-0.62),
// 64 KiB 0.38-0.40 (0.49-0.50), two 112 KiB tiles (the distance that had
// been best before lutPack) 0.37-0.62 (0.52-0.69). Without the prefetches
// it took 0.73-0.79 (1.34): the hardware prefetchers do not keep up.
const lutPrefetchBytes = 6 << 10

// lutTableBytes is one chunk's tables: 32 words, 8 nibbles, 16 float32.
const lutTableBytes = 32 * 8 * 64

// newChainsFrom returns a chains whose accumulators are regs (each
// already holding a partial sum).
func newChainsFrom(regs []VecVirtual) *chains { return &chains{regs: regs} }
