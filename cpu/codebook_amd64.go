//go:build !noasm && !purego

package cpu

import (
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/klauspost/cpuid/v2"
	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/layout/codebook"
)

// cbScalarFunc is CbPsumScalarB8M<m>Avx2 (asm).
type cbScalarFunc func(words *uint32, tstride int, cbstride int, ntiles int, nw int, tab *float32, tabstride int, wpg int, scales *float32, sstride int, acc *float32)

type cbLookupFunc func(words *uint32, cbstride int, nper int, tab *float32, tabstride int, segbytes int, x *float32, v int, spg int, scales *float32, sstride int, acc *float32)

// cbKernels are a kernel set's codebook kernels: the Psumbook builder and
// the lookup (psum) and dequantize kernels by codebook count.
type cbKernels struct {
	lanes   int
	psum16  map[[2]int]func(words *uint32, cbstride int, nper int, tab *uint16, tabstride int, spg int, scales *float32, sstride int, acc *float32, pf int) // binary16 tables, 32 rows
	table16 map[int]func(ct *float32, x *float32, out *uint16, nseg int, k int, inv float32)                                                                // by v
	req16   []string                                                                                                                                        // what the binary16-table kernels need beyond requires
	tableFn map[int]func(ct *float32, x *float32, out *float32, nseg int, k int)                                                                            // by v
	// 8-bit codes, 64 rows per lookup, int16 tables summed in int32, over
	// the transposed code copy (CBMatrix.i16st): by codebooks.
	psumI16  [3]func(codes *uint8, bstride int, cbstride int, nblk int, nseg int, tab *uint8, tabstride int, spg int, scales *float32, sstride int, acc *float32, pf int)
	psumI16P [3]func(codes *uint8, bstride int, cbstride int, nblk int, nseg int, tab *uint8, tabstride int, spg int, scales *float32, sstride int, acc *float32, pf int) // packed words in place
	tableI16 map[int]func(ct *float32, x *float32, out *uint8, nseg int, k int, inv float32)
	reqI16   []string // what the int16 kernels need beyond requires
	// 8-bit codes, one scalar load per code (no gathers), by codebooks.
	scalar   [3]cbScalarFunc
	psum     map[[2]int]cbLookupFunc // by (bits, codebooks)
	dequant  map[[2]int]cbLookupFunc
	requires []string
}

// cbSets maps a backend's kernel set to its codebook kernels (checked
// against their Requires lines by TestRequiresCoverKernels).
var cbSets = map[ISA]*cbKernels{
	AVX512VNNI: {lanes: 16, tableFn: map[int]func(ct *float32, x *float32, out *float32, nseg int, k int){2: asm.CbTableV2Avx512, 4: asm.CbTableV4Avx512, 8: asm.CbTableV8Avx512},
		psum:     map[[2]int]cbLookupFunc{{4, 1}: asm.CbPsumB4M1Avx512, {6, 1}: asm.CbPsumB6M1Avx512, {8, 1}: asm.CbPsumB8M1Avx512, {10, 1}: asm.CbPsumB10M1Avx512, {12, 1}: asm.CbPsumB12M1Avx512, {4, 2}: asm.CbPsumB4M2Avx512, {6, 2}: asm.CbPsumB6M2Avx512, {8, 2}: asm.CbPsumB8M2Avx512, {10, 2}: asm.CbPsumB10M2Avx512, {12, 2}: asm.CbPsumB12M2Avx512},
		dequant:  map[[2]int]cbLookupFunc{{4, 1}: asm.CbDequantB4M1Avx512, {6, 1}: asm.CbDequantB6M1Avx512, {8, 1}: asm.CbDequantB8M1Avx512, {10, 1}: asm.CbDequantB10M1Avx512, {12, 1}: asm.CbDequantB12M1Avx512, {4, 2}: asm.CbDequantB4M2Avx512, {6, 2}: asm.CbDequantB6M2Avx512, {8, 2}: asm.CbDequantB8M2Avx512, {10, 2}: asm.CbDequantB10M2Avx512, {12, 2}: asm.CbDequantB12M2Avx512},
		requires: []string{"AVX", "AVX512F", "FMA3"},
		req16:    []string{"AVX2", "AVX512BW", "AVX512VL", "AVX512VBMI"},
		table16:  map[int]func(ct *float32, x *float32, out *uint16, nseg int, k int, inv float32){2: asm.CbTableF16V2Avx512, 4: asm.CbTableF16V4Avx512, 8: asm.CbTableF16V8Avx512},
		psumI16: [3]func(codes *uint8, bstride int, cbstride int, nblk int, nseg int, tab *uint8, tabstride int, spg int, scales *float32, sstride int, acc *float32, pf int){
			1: asm.CbPsumI16B8M1Avx512, 2: asm.CbPsumI16B8M2Avx512},
		psumI16P: [3]func(codes *uint8, bstride int, cbstride int, nblk int, nseg int, tab *uint8, tabstride int, spg int, scales *float32, sstride int, acc *float32, pf int){
			1: asm.CbPsumI16PB8M1Avx512, 2: asm.CbPsumI16PB8M2Avx512},
		tableI16: map[int]func(ct *float32, x *float32, out *uint8, nseg int, k int, inv float32){2: asm.CbTableI16V2Avx512, 4: asm.CbTableI16V4Avx512, 8: asm.CbTableI16V8Avx512},
		reqI16:   []string{"AVX2", "AVX512BW", "AVX512VL", "AVX512VBMI", "AVX512VNNI"},
		psum16: map[[2]int]func(words *uint32, cbstride int, nper int, tab *uint16, tabstride int, spg int, scales *float32, sstride int, acc *float32, pf int){
			{4, 1}: asm.CbPsumF16B4M1Avx512, {6, 1}: asm.CbPsumF16B6M1Avx512, {8, 1}: asm.CbPsumF16B8M1Avx512,
			{4, 2}: asm.CbPsumF16B4M2Avx512, {6, 2}: asm.CbPsumF16B6M2Avx512, {8, 2}: asm.CbPsumF16B8M2Avx512,
		}},
}

func init() {
	avx2 := &cbKernels{lanes: 8, tableFn: map[int]func(ct *float32, x *float32, out *float32, nseg int, k int){2: asm.CbTableV2Avx2, 4: asm.CbTableV4Avx2, 8: asm.CbTableV8Avx2},
		psum:    map[[2]int]cbLookupFunc{{4, 1}: asm.CbPsumB4M1Avx2, {6, 1}: asm.CbPsumB6M1Avx2, {8, 1}: asm.CbPsumB8M1Avx2, {10, 1}: asm.CbPsumB10M1Avx2, {12, 1}: asm.CbPsumB12M1Avx2, {4, 2}: asm.CbPsumB4M2Avx2, {6, 2}: asm.CbPsumB6M2Avx2, {8, 2}: asm.CbPsumB8M2Avx2, {10, 2}: asm.CbPsumB10M2Avx2, {12, 2}: asm.CbPsumB12M2Avx2},
		dequant: map[[2]int]cbLookupFunc{{4, 1}: asm.CbDequantB4M1Avx2, {6, 1}: asm.CbDequantB6M1Avx2, {8, 1}: asm.CbDequantB8M1Avx2, {10, 1}: asm.CbDequantB10M1Avx2, {12, 1}: asm.CbDequantB12M1Avx2, {4, 2}: asm.CbDequantB4M2Avx2, {6, 2}: asm.CbDequantB6M2Avx2, {8, 2}: asm.CbDequantB8M2Avx2, {10, 2}: asm.CbDequantB10M2Avx2, {12, 2}: asm.CbDequantB12M2Avx2},
		scalar: [3]cbScalarFunc{
			1: asm.CbPsumScalarB8M1Avx2, 2: asm.CbPsumScalarB8M2Avx2},
		requires: []string{"AVX", "AVX2", "FMA3"}}
	cbSets[AVX2], cbSets[AVXVNNI] = avx2, avx2
}

// f16 reports whether the matrix runs the binary16-table kernel.
func (mx *CBMatrix) f16() bool {
	return mx.kern != nil && !mx.dequant && mx.kern.psum16[[2]int{mx.c.B, mx.c.M}] != nil && hasAll(mx.kern.req16)
}

// mulF16 builds binary16 Psumbooks scaled by inv = 2^k (every entry at
// most 2^15 in magnitude) and runs the register-table kernel over whole
// 32-row tiles; acc is scaled back by 1/inv.
func (mx *CBMatrix) mulF16(acc, xp []float32) {
	c, k := mx.c, mx.kern
	K, V, nv := 1<<c.B, c.V, c.NV()
	inv, _ := mx.tableScale(xp, 32768)
	buf := f16Pool.Get().(*[]uint16)
	defer f16Pool.Put(buf)
	*buf = grow(*buf, c.M*nv*K)
	tab := *buf
	build := k.table16[V]
	_ = mx.b.parallelFor(nv, max(1, 65536/K), func(j0, j1 int) error {
		for i := 0; i < c.M; i++ {
			out := tab[i*nv*K+j0*K : i*nv*K+j1*K]
			build(&mx.centT[i][0], &xp[j0*V], &out[0], j1-j0, K, inv)
		}
		return nil
	})
	spg := c.G / V
	P := codebook.CodesPerLane(c.B)
	T := cbTile(nv, spg, P, cbTableBudget/(2*K*c.M))
	wl := c.WL()
	fn := k.psum16[[2]int{c.B, c.M}]
	_ = mx.b.parallelFor(c.PRows/32, 1, func(t0, t1 int) error {
		for j0 := 0; j0 < nv; j0 += T {
			n := min(j0+T, nv) - j0
			sp := min(spg, n)
			for t := t0; t < t1; t++ {
				r := t * 32
				pf := c.M * wl * 128 // the next tile's words (the 32 zero words cover the last tile's reads)
				if t+1 == t1 {
					pf = 0
				}
				fn(&c.Words[t*c.M*wl*32+j0*c.B/32*32], wl*128, n/P, &tab[j0*K], 2*nv*K, sp, &mx.scales[(j0/spg)*c.PRows+r], 4*c.PRows, &acc[r], pf)
			}
		}
		return nil
	})
	alpha := 1 / inv
	for r := range acc {
		acc[r] *= alpha
	}
}

// tableScale returns the power of two inv = 2^k (k clamped to [-126, 127])
// that scales the Psumbook of xp so that no entry exceeds limit in
// magnitude (entries are bounded by cAbs * max|x|; inv is 1 when that
// bound is 0 or NaN), and whether every activation is finite and the
// bound below MaxFloat32, so that the float32 sums behind the tables
// cannot overflow.
func (mx *CBMatrix) tableScale(xp []float32, limit float64) (float32, bool) {
	// max |x| on the bit patterns (sign cleared): they order as the
	// magnitudes do, with NaNs above +Inf, as the float max would keep
	// them. Four running maxima: cheaper than a float max and math.Abs
	// per element.
	var m [4]uint32
	i := 0
	for ; i+4 <= len(xp); i += 4 {
		for k := range m {
			m[k] = max(m[k], math.Float32bits(xp[i+k])&0x7fffffff)
		}
	}
	for ; i < len(xp); i++ {
		m[0] = max(m[0], math.Float32bits(xp[i])&0x7fffffff)
	}
	xmax := math.Float32frombits(max(m[0], m[1], m[2], m[3]))
	inv := float32(1)
	bound := float64(mx.cAbs) * float64(xmax)
	if bound > 0 {
		e := math.Floor(math.Log2(limit / bound))
		inv = float32(math.Ldexp(1, int(max(-126, min(127, e)))))
	}
	return inv, xmax <= math.MaxFloat32 && bound < math.MaxFloat32
}

// f16Pool recycles the binary16 Psumbooks between multiplies.
var f16Pool = sync.Pool{New: func() any { return new([]uint16) }}

func cbKernelsFor(be *Backend) *cbKernels {
	k := cbSets[be.set.isa]
	if k == nil || !hasAll(k.requires) {
		return nil
	}
	return k
}

// table builds nseg segments of one codebook's Psumbook (v is one of
// layout.CodebookVs, which Validate checks).
func (k *cbKernels) table(ct, x, out []float32, nseg, K, v int) {
	_ = ct[v*K-1]
	_ = x[nseg*v-1]
	_ = out[nseg*K-1]
	k.tableFn[v](&ct[0], &x[0], &out[0], nseg, K)
}

// cbTile returns the segments per column tile for n segments when at
// most tmax segments' tables fit cbTableBudget: n if all fit, else whole
// groups of spg segments, or, when a group does not fit, a power of two
// dividing it; always a multiple of the kernel period P (spg and P are
// powers of two, except a whole-row spg, which is one group).
func cbTile(n, spg, P, tmax int) int {
	if tmax >= n {
		return n
	}
	T := 1
	if spg <= tmax {
		T = tmax / spg * spg
	} else {
		for T*2 <= tmax {
			T *= 2
		}
	}
	return max(P, T/P*P)
}

// cbTableBudget bounds the Psumbook bytes one column tile uses (all
// codebooks), so that the tile's tables stay in L2 while a thread's rows
// stream their codes.
const cbTableBudget = 256 << 10

// mulSIMD runs the assembly kernels: threads take contiguous ranges of
// 32-row tiles and walk the columns in tiles whose tables fit
// cbTableBudget, accumulating into acc (PRows values).
func (mx *CBMatrix) mulSIMD(acc, xp []float32, tab [][]float32) {
	if mx.i16() && mx.mulI16(acc, xp) {
		return
	}
	if mx.f16() {
		mx.mulF16(acc, xp)
		return
	}
	if mx.scalar() {
		mx.mulScalar(acc, xp)
		return
	}
	c, k := mx.c, mx.kern
	K, V, nv := 1<<c.B, c.V, c.NV()
	spg := c.G / V
	P := codebook.CodesPerLane(c.B) // segments per kernel period
	T := nv
	if !mx.dequant {
		T = cbTile(nv, spg, P, cbTableBudget/(4*K*c.M))
	}
	wl := c.WL()
	fn := k.psum[[2]int{c.B, c.M}]
	base, stride := mx.flatTables(tab)
	if mx.dequant {
		fn = k.dequant[[2]int{c.B, c.M}]
		base, stride = &mx.centFlat[0], 4*K*V
	}
	_ = mx.b.parallelFor(c.PRows/32, 1, func(t0, t1 int) error {
		for j0 := 0; j0 < nv; j0 += T {
			j1 := min(j0+T, nv)
			n := j1 - j0
			sp := min(spg, n) // a tile inside one group ends its partial group
			segBytes := 4 * K
			tp := unsafe.Add(unsafe.Pointer(base), 4*j0*K)
			if mx.dequant {
				segBytes, tp = 0, unsafe.Pointer(base)
			}
			for t := t0; t < t1; t++ {
				for h := 0; h < 32; h += k.lanes {
					r := t*32 + h
					fn(&c.Words[t*c.M*wl*32+j0*c.B/32*32+h], wl*128, n/P, (*float32)(tp), stride, segBytes,
						&xp[j0*V], V, sp, &mx.scales[(j0/spg)*c.PRows+r], 4*c.PRows, &acc[r])
				}
			}
		}
		return nil
	})
}

// scalar reports whether the matrix runs the scalar-lookup kernel: 8-bit
// codes on a kernel set that has it (AVX2, whose gathers are slower than
// scalar loads), with groups of whole words (4 segments) or
// one group per row.
func (mx *CBMatrix) scalar() bool {
	c := mx.c
	spg := c.G / c.V
	return mx.kern != nil && !mx.dequant && c.B == 8 && mx.kern.scalar[c.M] != nil && (spg%4 == 0 || spg >= c.NV())
}

// cbScalarBudget bounds the float32 Psumbook bytes of one column tile of
// the scalar kernel (all codebooks), so that they stay in L1 beside the
// codes streaming through it: the largest power of two at most 2/3 of the
// L1 data cache (32 KiB of a 48 KiB L1, 16 KiB of a 32 KiB one; 16 KiB
// when cpuid does not say). Each tile walks all rows, so smaller tiles
// read the codes in shorter runs; larger ones leave L1.
var cbScalarBudget = l1Budget(cpuid.CPU.Cache.L1D)

// mulScalar runs the scalar-lookup kernel. The columns go in tiles whose
// tables fit cbScalarBudget; threads claim chunks of tiles, build each
// tile's float32 tables just before its lookups (so they are in L1, and
// no call holds the whole Psumbook) and run every 32-row tile over them
// (one kernel call) into the chunk's partial sums, added in chunk order
// (deterministic for a given thread count). On HugePages backends the
// kernel reads a tile-major copy of the codes (see tileMajor).
func (mx *CBMatrix) mulScalar(acc, xp []float32) {
	c, k := mx.c, mx.kern
	K, V, nv := 1<<c.B, c.V, c.NV()
	spg := c.G / V
	const P = 4 // 8-bit codes per word
	T := mx.scalarTile()
	nt := (nv + T - 1) / T
	wl := c.WL()
	fn := k.scalar[c.M]
	tm := mx.tm // nil: the kernel reads the packed words in place
	nrt := c.PRows / 32
	// Each chunk builds its tiles' tables just before using them.
	mx.tileChunks(nt, c.PRows, func(scr []float32, t0, t1 int) {
		buf := f32Pool.Get().(*[]float32)
		defer f32Pool.Put(buf)
		*buf = grow(*buf, c.M*T*K)
		tab := *buf
		for tile := t0; tile < t1; tile++ {
			j0 := tile * T
			n := min(T, nv-j0)
			for i := 0; i < c.M; i++ {
				k.table(mx.centT[i], xp[j0*V:(j0+n)*V], tab[i*T*K:i*T*K+n*K], n, K, V)
			}
			sp := min(spg, n) // a tile inside one group ends its partial group
			w, tstride, cbstride := &c.Words[j0/P*32], c.M*wl*128, wl*128
			if tm != nil {
				w, tstride, cbstride = &tm[j0/P*32*nrt*c.M], c.M*n/P*128, n/P*128
			}
			fn(w, tstride, cbstride, nrt, n/P, &tab[0], 4*T*K, sp/P,
				&mx.scales[(j0/spg)*c.PRows], 4*c.PRows, &scr[0])
		}
	}, func(r int, sum float32) { acc[r] = sum })
}

// scalarTile is the scalar kernel's column tile in segments: as many as
// cbScalarBudget holds (see cbTile).
func (mx *CBMatrix) scalarTile() int {
	c := mx.c
	K := 1 << c.B
	return cbTile(c.NV(), c.G/c.V, 4, cbScalarBudget/(4*K*c.M))
}

// tileMajor builds the scalar kernel's copy of the codes on HugePages
// backends (which copy matrices for speed), in huge pages: each column
// tile of T segments (n in the last) holds the packed words of every
// 32-row tile in turn, codebook after codebook, so that the kernel reads
// one sequential run per column tile instead of n/4 word columns (128
// bytes each) a whole row of words apart:
//
//	tm[(j0/4*R*M + (t*M + i)*n/4 + w)*32 + r%32] = c.Words[((t*M + i)*WL + j0/4 + w)*32 + r%32]
//
// for the column tile starting at segment j0, 32-row tile t < R = PRows/32,
// codebook i and word w < n/4 of the tile. It costs as many bytes as the
// packed codes.
func (mx *CBMatrix) tileMajor(T int) {
	c := mx.c
	const P = 4
	nv, wl, R := c.NV(), c.WL(), c.PRows/32
	blk := hugemem.Alloc(4 * len(c.Words))
	tm := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(blk.Bytes))), len(c.Words))
	// Row tile by row tile, so that the words are read in order (one
	// stream per thread; a loop over column tiles outside, reading every
	// row tile's run in turn, took twice as long on Zen 4).
	_ = mx.b.parallelFor(R, 1, func(t0, t1 int) error {
		for t := t0; t < t1; t++ {
			for i := 0; i < c.M; i++ {
				for j0 := 0; j0 < nv; j0 += T {
					nw := min(T, nv-j0) / P
					src := c.Words[((t*c.M+i)*wl+j0/P)*32:][:nw*32]
					copy(tm[(j0/P*R*c.M+(t*c.M+i)*nw)*32:], src)
				}
			}
		}
		return nil
	})
	mx.tm, mx.tmBlock = tm, blk
}

// tileChunks runs a multiply's nt column tiles in chunks of consecutive
// tiles, about cbChunksPerThread per thread (at most about cbMaxChunks in
// all), claimed dynamically (so that a slow core delays the multiply by
// one chunk). run(scr, t0, t1)
// accumulates tiles [t0, t1) into scr, the chunk's own zeroed partial sums
// (rb positions); the partial sums are then added in chunk order
// (deterministic for a given thread count) and store(P, sum) receives the
// total of position P.
//
// The same goroutines add the partial sums: once no chunk is left to
// claim, each waits for the running ones and then claims ranges of
// cbSumGrain positions. One fork and join instead of two: workers start
// late after a fork.
func (mx *CBMatrix) tileChunks(nt, rb int, run func(scr []float32, t0, t1 int), store func(P int, sum float32)) {
	workers := min(max(1, mx.b.threads), nt)
	per := max(1, nt/min(workers*cbChunksPerThread, cbMaxChunks))
	nch := (nt + per - 1) / per
	pbuf := f32Pool.Get().(*[]float32)
	defer f32Pool.Put(pbuf)
	*pbuf = grow(*pbuf, nch*rb)
	part := *pbuf
	var next, left, nextSum atomic.Int64
	left.Store(int64(nch))
	work := func() {
		for {
			ch := int(next.Add(1) - 1)
			if ch >= nch {
				break
			}
			scr := part[ch*rb : (ch+1)*rb]
			clear(scr)
			run(scr, ch*per, min(ch*per+per, nt))
			left.Add(-1)
		}
		spinUntilZero(&left) // the chunks still running
		// Chunk 0's partial sums take the others' in chunk order,
		// position by position: a sequential pass per chunk.
		for {
			p0 := int(nextSum.Add(1)-1) * cbSumGrain
			if p0 >= rb {
				return
			}
			p1 := min(p0+cbSumGrain, rb)
			sum := part[p0:p1]
			for ch := 1; ch < nch; ch++ {
				for i, v := range part[ch*rb+p0 : ch*rb+p1] {
					sum[i] += v
				}
			}
			for i, v := range sum {
				store(p0+i, v)
			}
		}
	}
	fns := make([]func(), min(workers, nch))
	for i := range fns {
		fns[i] = work
	}
	mx.b.team.runFuncs(fns)
}

// cbMaxChunks caps tileChunks' chunks near 32: each chunk clears, fills
// and hands over one row-length vector of partial sums, which costs more
// than finer chunks gain in balance.
const cbMaxChunks = 32

// cbSumGrain is how many positions tileChunks' goroutines add up at a time.
const cbSumGrain = 128

// flatTables returns the first table and the byte stride between
// codebooks' tables (the tables are one allocation, see tables).
func (mx *CBMatrix) flatTables(tab [][]float32) (*float32, int) {
	if len(tab) == 0 {
		return nil, 0
	}
	if len(tab) == 1 {
		return &tab[0][0], 0
	}
	return &tab[0][0], int(uintptr(unsafe.Pointer(&tab[1][0])) - uintptr(unsafe.Pointer(&tab[0][0])))
}

// cbI16Budget bounds the int16 tables of one column tile of the int16
// kernel (all codebooks), so that they stay in L1 while every 64-row
// block streams its codes past them.
const cbI16Budget = 16 << 10

// cbChunksPerThread is how many chunks of column tiles each thread of the
// int16 and scalar codebook kernels gets on average (see tileChunks).
const cbChunksPerThread = 4

// cbI16 is the int16 64-row kernels' state. On HugePages backends (which
// copy matrices for speed) it holds a copy of the codes, transposed so
// that each lookup's 64 codes are one aligned load and a column tile's
// codes for every row block are one sequential run:
//
//	codes[i*NB*64*NV + tile*NB*64*T + b*64*n + s*64 + p] = code(64b + cbI16Row(p), i, tile*T + s)
//
// for codebook i, block b < NB of 64 rows (rows past Rows hold code 0),
// column tile of T segments (n of them: T, or fewer in the last tile) and
// segment s < n; it costs as many bytes as the packed codes. Otherwise
// the kernel reads layout/codebook's packed words in place (the packed
// kernel), with a copy of the last 32-row tile padded to a whole block
// when PRows is not a multiple of 64.
type cbI16 struct {
	codes  []uint8        // the transposed copy, or nil: the packed kernel
	tail   []uint32       // packed: the last 32-row tile's words, then as many zero words
	scales []float32      // Groups x NB*64, group-major, in kernel position order, zero past PRows
	row    [64]int        // the row (within its block) of each kernel position
	nb, t  int            // 64-row blocks, segments per column tile
	block  *hugemem.Block // codes' huge-page memory, or nil
}

// codeBlocks returns the huge-page memory of the int16 and the scalar
// kernels' code copies, if made.
func (mx *CBMatrix) codeBlocks() []*hugemem.Block {
	var bs []*hugemem.Block
	if mx.i16st != nil && mx.i16st.block != nil {
		bs = append(bs, mx.i16st.block)
	}
	if mx.tmBlock != nil {
		bs = append(bs, mx.tmBlock)
	}
	return bs
}

// cbI16Byte is the byte of a segment's 64 codes whose lookup the int16
// kernels add to position P of their accumulators: four vectors of 16
// dwords, the even and odd words of the low and the high byte unpacks.
func cbI16Byte(P int) int {
	q, j := P/16, P%16
	return 16*(j/4) + 2*(j%4) + q%2 + 8*(q/2)
}

// cbI16Row is the row (within a 64-row block) whose code the copy's
// kernel (CbPsumI16B8M1Avx512) reads at byte p of a segment's 64 codes:
// chosen so that position P holds row P.
func cbI16Row(p int) int {
	l, k := p/16, p%16
	base := 0
	if k >= 8 {
		base, k = 32, k-8
	}
	return base + (k%2)*16 + 4*l + k/2
}

// cbI16PRow is the row (within a 64-row block) at position P of the
// packed kernel (CbPsumI16PB8M1Avx512), whose in-register transpose puts
// row 16*((p%16)/4) + 4*(p/16) + p%4 at byte p.
func cbI16PRow(P int) int {
	p := cbI16Byte(P)
	return 16*((p%16)/4) + 4*(p/16) + p%4
}

// i16 reports whether the matrix runs an int16 64-row kernel: 8-bit
// codes, at least 64 rows, a kernel set that has it.
func (mx *CBMatrix) i16() bool {
	c, k := mx.c, mx.kern
	return k != nil && !mx.dequant && c.B == 8 && c.PRows >= 64 && k.psumI16[c.M] != nil && hasAll(k.reqI16)
}

// prepareCodes builds at load what the matrix's kernel reads besides the
// packed codes: the int16 kernels' state (with the transposed copy on
// HugePages backends), or on HugePages backends the scalar kernel's
// tile-major copy. Built in the first multiply instead, they made it many
// times slower than the next; a matrix is loaded to be multiplied, so
// load pays instead (and the
// multiplies, which may run concurrently, only read the state). It
// builds what is missing, so a test that changes the kernel choice after
// load (dequant) calls it again.
func (mx *CBMatrix) prepareCodes() {
	switch {
	case mx.i16():
		if mx.i16st == nil {
			mx.prepareI16()
		}
	case mx.scalar() && mx.b.huge:
		if mx.tm == nil {
			mx.tileMajor(mx.scalarTile())
		}
	}
}

// prepareI16 builds the int16 kernels' state (see prepareCodes).
func (mx *CBMatrix) prepareI16() {
	c := mx.c
	K, nv, spg := 1<<c.B, c.NV(), c.G/c.V
	st := &cbI16{nb: (c.PRows + 63) / 64}
	wl := c.WL()
	if mx.b.huge {
		st.t = cbTile(nv, spg, 1, cbI16Budget/(2*K*c.M))
		for P := range st.row {
			st.row[P] = P
		}
		st.codes, st.block = mx.transposeI16(st)
	} else {
		st.t = cbTile(nv, spg, 4, cbI16Budget/(2*K*c.M))
		for P := range st.row {
			st.row[P] = cbI16PRow(P)
		}
		if c.PRows%64 != 0 {
			tile := c.M * wl * 32 // words per 32-row tile
			st.tail = make([]uint32, 2*tile)
			copy(st.tail, c.Words[(c.PRows/32-1)*tile:][:tile])
		}
	}
	rb := st.nb * 64
	st.scales = make([]float32, c.Groups()*rb)
	for g := 0; g < c.Groups(); g++ {
		for P := 0; P < rb; P++ {
			if r := P/64*64 + st.row[P%64]; r < c.PRows {
				st.scales[g*rb+P] = mx.scales[g*c.PRows+r]
			}
		}
	}
	mx.i16st = st
}

// transposeI16 returns the transposed code copy (see cbI16), in huge-page
// memory.
func (mx *CBMatrix) transposeI16(st *cbI16) ([]uint8, *hugemem.Block) {
	c := mx.c
	nv := c.NV()
	var pos [64]int
	for p := range pos {
		pos[cbI16Row(p)] = p
	}
	per := st.nb * 64 * nv // bytes per codebook
	blk := hugemem.Alloc(c.M * per)
	codes := blk.Bytes
	wl := c.WL()
	// 8-bit codes: code (r, i, j) is byte j%4 of word
	// ((r/32*M + i)*WL + j/4)*32 + r%32 (layout/codebook). Each block
	// is walked codebook by codebook and word column by word column, so
	// its two 32-row tiles' words are read in order (32 consecutive
	// words per column), and each word lands as up to 4 bytes of 64-byte
	// segment rows, rather than column tiles outside the blocks reading
	// each block's words in short runs a tile apart.
	tstride := c.M * wl * 32 // words from one 32-row tile to the next
	_ = mx.b.parallelFor(st.nb, 1, func(b0, b1 int) error {
		var src, dst [64]int // per row of the block: its word offset, its byte in a segment
		for b := b0; b < b1; b++ {
			nr := min(64, c.Rows-b*64)
			for r := 0; r < nr; r++ {
				src[r], dst[r] = (b*2+r/32)*tstride+r%32, pos[r]
			}
			for i := 0; i < c.M; i++ {
				for j0 := 0; j0 < nv; j0 += st.t {
					n := min(st.t, nv-j0)
					out := codes[i*per+j0*st.nb*64+b*64*n : i*per+j0*st.nb*64+(b+1)*64*n]
					for s0 := 0; s0 < n; {
						j := j0 + s0
						k0 := j % 4
						k1 := min(4, k0+n-s0) // the word's codes in this tile
						col := c.Words[i*wl*32+j/4*32:]
						seg := out[s0*64:]
						if k0 == 0 && k1 == 4 { // a whole word: four segments
							seg = seg[:256]
							for r := 0; r < nr; r++ {
								w := col[src[r]]
								o := seg[dst[r]:][:193]
								o[0], o[64], o[128], o[192] = uint8(w), uint8(w>>8), uint8(w>>16), uint8(w>>24)
							}
						} else {
							for r := 0; r < nr; r++ {
								w := col[src[r]] >> (8 * k0)
								o := seg[dst[r]:]
								for k := 0; k < k1-k0; k++ {
									o[k*64] = uint8(w)
									w >>= 8
								}
							}
						}
						s0 += k1 - k0
					}
				}
			}
		}
		return nil
	})
	return codes, blk
}

// i16Pool recycles the int16 kernel's per-chunk tables.
var i16Pool = sync.Pool{New: func() any { return new([]uint8) }}

// mulI16 runs the int16 64-row kernel and reports whether it did: not
// when an activation is NaN or infinite, or so large that the float32
// sums behind the tables could overflow (an int16 table cannot hold the
// result; the binary16 kernel propagates it). Threads claim chunks of
// column tiles; per tile a thread builds the int16 tables of its
// segments (scaled by inv = 2^k so that every entry is at most 32767 in
// magnitude) and runs every 64-row block over them into the chunk's
// partial sum; the partial sums are added in chunk order (deterministic
// for a given thread count) and scaled back by 1/inv.
//
// It replaced a binary16 64-row kernel that gathered each lookup's codes
// with byte permutes and converted every lookup to float32. The packed
// kernel (no copy: backends without HugePages) transposes each word column
// in registers (4 VPSHUFB and 8 unpacks per 4 segments); the transposed
// copy's kernel, which skips that, is the faster of the two.
func (mx *CBMatrix) mulI16(acc, xp []float32) bool {
	c, k, st := mx.c, mx.kern, mx.i16st
	inv, ok := mx.tableScale(xp, 32767)
	if !ok {
		return false
	}
	K, V, nv := 1<<c.B, c.V, c.NV()
	spg := c.G / V
	T, rb := st.t, st.nb*64
	nt := (nv + T - 1) / T
	tabBytes := c.M * T * 2 * K
	cbBytes := rb * nv
	fn, build := k.psumI16[c.M], k.tableI16[V]
	wl := c.WL()
	tstride := c.M * wl * 128 // bytes per 32-row tile of packed words
	full := c.PRows / 64
	if st.codes == nil {
		fn = k.psumI16P[c.M]
	}
	alpha := 1 / inv
	mx.tileChunks(nt, rb, func(scr []float32, t0, t1 int) {
		buf := i16Pool.Get().(*[]uint8)
		defer i16Pool.Put(buf)
		*buf = grow(*buf, tabBytes)
		tab := *buf
		for tile := t0; tile < t1; tile++ {
			j0 := tile * T
			n := min(T, nv-j0)
			for i := 0; i < c.M; i++ {
				build(&mx.centT[i][0], &xp[j0*V], &tab[i*T*2*K], n, K, inv)
			}
			sc := st.scales[(j0/spg)*rb:]
			if st.codes != nil {
				fn(&st.codes[j0*rb], n*64, cbBytes, st.nb, n, &tab[0], T*2*K, min(spg, n), &sc[0], 4*rb, &scr[0], 1024)
				continue
			}
			w := (*uint8)(unsafe.Pointer(&c.Words[j0/4*32]))
			fn(w, 2*tstride, wl*128, full, n, &tab[0], T*2*K, min(spg, n), &sc[0], 4*rb, &scr[0], 2*tstride)
			if st.tail != nil {
				w := (*uint8)(unsafe.Pointer(&st.tail[j0/4*32]))
				fn(w, 2*tstride, wl*128, 1, n, &tab[0], T*2*K, min(spg, n), &sc[full*64], 4*rb, &scr[full*64], 0)
			}
		}
	}, func(P int, sum float32) {
		if r := P/64*64 + st.row[P%64]; r < len(acc) {
			acc[r] = sum * alpha
		}
	})
	return true
}
