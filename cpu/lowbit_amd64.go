//go:build !noasm && !purego

package cpu

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
)

// bitsA8Kernels are the AVX-512 W(n)A8 kernels for Bits, by width, group
// geometry (sub = 128-column blocks split in 1, 2 or 4 groups) and
// metadata width, and the features they need (checked against their
// Requires lines by TestRequiresCoverKernels).
var bitsA8Kernels = struct {
	kernels  map[bitsA8Key]bitsA8Func
	requires []string
}{
	kernels: map[bitsA8Key]bitsA8Func{
		{8, 1, false}: asm.Bits8A8Avx512, {4, 1, false}: asm.Bits4A8Avx512, {2, 1, false}: asm.Bits2A8Avx512, {1, 1, false}: asm.Bits1A8Avx512,
		{3, 1, false}: asm.Bits3A8Avx512, // its own geometry: newBits3SIMD
		{8, 2, false}: asm.Bits8A8G64Avx512, {4, 2, false}: asm.Bits4A8G64Avx512, {2, 2, false}: asm.Bits2A8G64Avx512, {1, 2, false}: asm.Bits1A8G64Avx512,
		{3, 2, false}: asm.Bits3A8G64Avx512,
		{8, 4, false}: asm.Bits8A8G32Avx512, {4, 4, false}: asm.Bits4A8G32Avx512, {2, 4, false}: asm.Bits2A8G32Avx512,
		{8, 1, true}: asm.Bits8A8Meta16Avx512, {4, 1, true}: asm.Bits4A8Meta16Avx512, {2, 1, true}: asm.Bits2A8Meta16Avx512, {1, 1, true}: asm.Bits1A8Meta16Avx512,
		{8, 2, true}: asm.Bits8A8G64Meta16Avx512, {4, 2, true}: asm.Bits4A8G64Meta16Avx512, {2, 2, true}: asm.Bits2A8G64Meta16Avx512, {1, 2, true}: asm.Bits1A8G64Meta16Avx512,
		{8, 4, true}: asm.Bits8A8G32Meta16Avx512, {4, 4, true}: asm.Bits4A8G32Meta16Avx512, {2, 4, true}: asm.Bits2A8G32Meta16Avx512,
	},
	requires: []string{"AVX", "AVX512F", "AVX512VNNI", "AVX512VBMI"},
}

// bitsA8PfL1Kernels and bitsA8PfNtaKernels are variants of the 4-bit
// kernels that prefetch the next tile into L1 (PREFETCHT0) or
// non-temporally (PREFETCHNTA) instead of into L2, run where
// bitsA8PrefetchL1 says.
var (
	bitsA8PfL1Kernels = map[bitsA8Key]bitsA8Func{
		{4, 1, false}: asm.Bits4A8PfL1Avx512, {4, 1, true}: asm.Bits4A8Meta16PfL1Avx512,
	}
	bitsA8PfNtaKernels = map[bitsA8Key]bitsA8Func{
		{4, 1, false}: asm.Bits4A8PfNtaAvx512, {4, 1, true}: asm.Bits4A8Meta16PfNtaAvx512,
	}
	bitsA8PfLeadKernels = map[bitsA8Key]bitsA8Func{
		{8, 1, false}: asm.Bits8A8PfLeadAvx512, {8, 1, true}: asm.Bits8A8Meta16PfLeadAvx512,
		{4, 1, false}: asm.Bits4A8PfLeadAvx512, {4, 1, true}: asm.Bits4A8Meta16PfLeadAvx512,
		{2, 1, false}: asm.Bits2A8PfLeadAvx512, {2, 1, true}: asm.Bits2A8Meta16PfLeadAvx512,
		{8, 4, false}: asm.Bits8A8G32PfLeadAvx512, {8, 4, true}: asm.Bits8A8G32Meta16PfLeadAvx512,
	}
)

// bitsA8Lead makes the backends that take bitsA8PfL1Kernels or
// bitsA8PfNtaKernels take bitsA8PfLeadKernels instead, which prefetch 2
// KiB (at most half a row) ahead in each of a tile's eight rows where the
// others prefetch the next tile in order, up to two tiles (115 KB for
// 4096x14336) in flight against a 48 KiB L1. On Zen 5, alternated call
// by call on the same matrices from DRAM (TestBitsPrefetchAB), Bits4G128
// 4096x14336, 14336x4096 and 1024x4096 took 0.80-0.85x the NTA variants'
// time on two threads and 0.78-0.81x the L1 variants' on one; Bits8G128
// 4096x14336 and 14336x4096 0.79x and 0.88x (two threads), 0.85x and
// 0.87x (one) the L2 kernels', Bits2G128 4096x14336 0.89x and 0.92x the
// L1 kernels' (where leadFits); Bits8G32 0.92-0.96x the L2 kernels'.
var bitsA8Lead = l1PrefetchCPU()

// bitsA8PrefetchL1 (l1PrefetchCPU) picks bitsA8PfL1Kernels on backends
// of one thread and bitsA8PfNtaKernels on more. On Zen 5 the L1 variant
// took 0.93-0.95x the L2 one's time with one thread (Bits4G128 4096x14336
// and the GPTQ decode step, three alternating rounds) and the FFN block
// 0.89x with two; with two threads the NTA variant raised the GPTQ decode
// step from 85.0-87.2% to 86.7-87.9% of the read meter (seven alternating
// rounds, each in NTA's favour), with one it took 1.02-1.04x the L1
// variant's time.
var bitsA8PrefetchL1 = l1PrefetchCPU()

// bitsA8Key selects an AVX-512 A8 kernel: width n, sub groups per
// 128-column block, and meta16 for binary16 scales with int16 zeros (64
// bytes per tile and chunk) instead of float32 scales with int32 zeros
// (128 bytes).
type bitsA8Key struct {
	n, sub int
	meta16 bool
}

// meta16Zeros reports whether b's A8 metadata fits the Meta16 kernels:
// binary16 scales (widened exactly) and every true row's zero point in
// int16.
func meta16Zeros(b *layout.Bits) bool {
	if b.FP32Meta {
		return false
	}
	for g := 0; g < b.Groups(); g++ {
		for r := 0; r < b.Rows; r++ {
			if z := b.Zero(r, g); z < -32768 || z > 32767 {
				return false
			}
		}
	}
	return true
}

// bitsSIMD is a Bits matrix's state for the assembly A8 kernel: metadata
// rearranged once at load into lane order, and the kernel's constants.
type bitsSIMD struct {
	n, bpc, r int
	sub       int // 64-column sub-blocks per 128-column block (groups of 64: 2)
	lanes     int // results per tile in out (the kernel's vector lanes: 16, or 8 on YMM)
	isa       ISA // the kernel set the kernel belongs to
	chunks    int
	metaBlock int    // meta bytes per (tile, chunk)
	meta      []byte // per tile, per chunk, in lane order (see the kernels)
	ctrl      []byte
	idx       []int32
	src       []int32                  // activation byte order of a chunk (gatherActs), where prep uses one
	gather    func(a []byte, x []int8) // gatherActs of src by Interleave4x16Avx (interleaveGather), or nil
	words     []uint32
	stride    int                                                   // bytes per row
	actChunk  int                                                   // activation bytes per chunk
	prep      func(act []byte, xq []int8, xs []float32, k0, k1 int) // chunks [k0, k1)
	kern      func(w *byte, stride int, meta *byte, act *byte, chunks int, out *float32, ntiles int, ctrl *byte, idx *int32)
	amx       map[int]bitsA8Func // AMX batch kernels by M (bitsAmxKernels), or nil
	t16       map[int]bitsA8Func // AVX-512 rows-in-lanes batch kernels by M (bitsT16Kernels), or nil
}

// laneIdx returns the bpc permutations gathering lane i*bpc+b into lane i.
func laneIdx(bpc int) []int32 {
	idx := make([]int32, bpc*16)
	for b := 0; b < bpc; b++ {
		for i := 0; i < 16/bpc; i++ {
			idx[b*16+i] = int32(i*bpc + b)
		}
	}
	return idx
}

// newBitsSIMD returns the assembly state for b, or nil where the kernel
// does not apply: groups below 32 columns (1-bit: below 64; 3-bit: below
// 128),
// fractional zeros, a CPU without the features, or a backend forced to a
// narrower kernel set than avx512vnni.
func newBitsSIMD(be *Backend, b *layout.Bits) *bitsSIMD {
	sub := map[int]int{64: 2, 32: 4}[b.G]
	if sub == 0 {
		sub = 1
	}
	if be.set.isa == AVX2 || be.set.isa == AVXVNNI {
		return newBitsYMM(be, b)
	}
	if b.G < 32 || be.set.isa != AVX512VNNI || !hasAll(bitsA8Kernels.requires) || b.IntegerZeros() != nil { // checked once, at load
		return nil
	}
	if b.N == 3 {
		kern, ok := bitsA8Kernels.kernels[bitsA8Key{3, sub, false}]
		if !ok {
			return nil
		}
		return newBits3SIMD(b, kern, min(b.G, 128))
	}
	m16 := meta16Zeros(b)
	kern, ok := bitsA8Kernels.kernels[bitsA8Key{b.N, sub, m16}]
	if !ok {
		return nil
	}
	if bitsA8PrefetchL1 {
		variants := bitsA8PfL1Kernels
		if be.threads > 1 {
			variants = bitsA8PfNtaKernels
		}
		if bitsA8Lead && leadFits(2*b.N/sub, 4*b.WordsPerRow(), 4096) { // tiles of 2n/sub rows
			variants = bitsA8PfLeadKernels
		}
		if k, ok := variants[bitsA8Key{b.N, sub, m16}]; ok {
			kern = k
		}
	}
	bpc := 8 / b.N
	L := bpc * sub // lanes per row and chunk: i*L + b*sub + s
	s := &bitsSIMD{n: b.N, bpc: bpc, sub: sub, r: 16 / L, lanes: 16, isa: AVX512VNNI, chunks: b.PCols / layout.BitsChunk(b.N), kern: kern,
		metaBlock: 128, words: b.Words, stride: 4 * b.WordsPerRow()}
	if m16 {
		s.metaBlock = 64
	}
	s.prep = s.prepAct
	if sub == 4 || sub == 2 && b.N != 1 { // the G32 and G64 kernels: one byte per column, transposed
		s.src = bitsG32Sources(b.N)
	} else {
		s.src = s.actSources()
	}
	s.actChunk = len(s.src) + 128 // the codes' activations, then 16 scales and 16 sums
	s.gather = interleaveGather(s.src, layout.BitsChunk(b.N))
	s.writeMeta(b, m16)
	s.ctrl = make([]byte, bpc*64)
	for bb := 0; bb < bpc; bb++ {
		for j := 0; j < 64; j++ {
			d, jj := (j%8)/4, j%4 // dword within the qword, byte within it
			plane := 4*bb + jj
			s.ctrl[bb*64+j] = byte(32*d + 32 - b.N*(plane+1))
		}
	}
	s.idx = laneIdx(L)
	if be.set.tiles { // New picks such a set only where the OS permits the tile data
		s.amx = bitsAmxKernels[bitsA8Key{b.N, sub, m16}]
	} else if hasAll(bitsT16Requires) {
		s.t16 = bitsT16Kernels[bitsA8Key{b.N, sub, m16}]
	}
	return s
}

// dropMeta releases the format's binary16 metadata of a matrix whose A8
// kernel holds the same values in lane order (plane kernels with Meta16
// metadata: scale and integer zero per row and group), so that a loaded
// matrix keeps one copy; restoreMeta rebuilds it, bit for bit up to the
// sign of zero zero points, before a path that reads the format's
// metadata (float multiplies) first runs.
func (mx *LowMatrix) dropMeta() {
	s, b := mx.simd, mx.bits
	half := s != nil && (s.isa == AVX512VNNI && s.metaBlock == 64 || s.lanes == 8 && s.metaBlock == 32)
	if b == nil || !half || s.n == 3 || mx.code != nil || b.FP32Meta || b.Offsets {
		return
	}
	b.Scales16, b.Zeros16 = nil, nil
	mx.restore = mx.restoreMeta
}

func (mx *LowMatrix) restoreMeta() {
	s, b := mx.simd, mx.bits
	n := b.Groups() * b.PRows
	b.Scales16, b.Zeros16 = make([]layout.FP16, n), make([]layout.FP16, n)
	s.metaLanes(b, func(blk []byte, lane, r, g int) {
		if r < b.Rows { // padding rows: s = z = 0
			b.Scales16[g*b.PRows+r] = layout.FP16(getU16(blk[2*lane:]))
			b.Zeros16[g*b.PRows+r] = layout.ToFP16(float32(int16(getU16(blk[s.metaBlock/2+2*lane:]))))
		}
	})
}

// metaLanes calls fn for each lane of each tile and chunk of the Bits A8
// kernels' metadata (AVX-512 and YMM), in their order (lane = row in the
// tile * L + unit, L = lanes / rows per tile units of chunk columns),
// with the tile and chunk's block of s.meta and the lane's row and
// group: writeMeta writes the metadata through it, restoreMeta reads it
// back. A block holds the lanes' scales, then at metaBlock/2 their zeros.
func (s *bitsSIMD) metaLanes(b *layout.Bits, fn func(blk []byte, lane, r, g int)) {
	L, chunkCols := s.lanes/s.r, 128*s.bpc // units per chunk, columns per chunk
	for t := 0; t < b.PRows/s.r; t++ {
		for k := 0; k < s.chunks; k++ {
			blk := s.meta[(t*s.chunks+k)*s.metaBlock:]
			for lane := 0; lane < s.lanes; lane++ {
				r, u := t*s.r+lane/L, lane%L
				fn(blk, lane, r, (k*chunkCols+u*chunkCols/L)/b.G)
			}
		}
	}
}

// writeMeta lays out b's metadata for the kernels in s.meta: float32
// scales and int32 zeros, or with half binary16 scales and int16 zeros
// (the Meta16 kernels).
func (s *bitsSIMD) writeMeta(b *layout.Bits, half bool) {
	s.meta = make([]byte, b.PRows/s.r*s.chunks*s.metaBlock)
	z := s.metaBlock / 2
	s.metaLanes(b, func(blk []byte, lane, r, g int) {
		switch {
		case !half:
			putF32(blk[4*lane:], b.Scale(r, g))
			putI32(blk[z+4*lane:], int32(b.Zero(r, g)))
		case r < b.Rows: // padding rows keep zeros: their results are dropped
			putU16(blk[2*lane:], uint16(b.Scales16[g*b.PRows+r]))
			putU16(blk[z+2*lane:], uint16(int16(b.Zero(r, g))))
		}
	})
}

// bits3Quads returns the VPDPBUSD steps of the AVX-512 3-bit kernels per
// period of two chunks (20 planes) for blocks of unit columns (128 or 64),
// by the rule of gen/bits_a8.go's bits3Quads: per block in order and per chunk
// its planes touch, one step {block, chunk, first}, whose control vector
// puts planes first..first+3 of the chunk (first = the block's first plane
// there, at most 6) in bytes 0..3 of each dword; and the distinct firsts
// in order of appearance (control vector j has firsts[j]).
func bits3Quads(unit int) (quads [][3]int, firsts []int) {
	P := unit / 32
	for b := 0; b < 20/P; b++ {
		p0 := b * P
		for c := p0 / 10; c <= (p0+P-1)/10; c++ {
			first := min(max(p0, 10*c)-10*c, 6)
			quads = append(quads, [3]int{b, c, first})
			if !slices.Contains(firsts, first) {
				firsts = append(firsts, first)
			}
		}
	}
	return quads, firsts
}

// newBits3SIMD returns the state of the AVX-512 3-bit kernels
// (newBits3State with tiles of 16 rows) and their activation layout: per
// period the quads' codes (bits3Quads), 2 halves of 64 bytes each, zero
// for planes outside the quad's block.
func newBits3SIMD(b *layout.Bits, kern bitsA8Func, unit int) *bitsSIMD {
	quads, firsts := bits3Quads(unit)
	nq, nb, P := len(quads), 640/unit, unit/32
	s := newBits3State(b, 16, unit, nq*128, kern, AVX512VNNI)
	s.ctrl = make([]byte, len(firsts)*64)
	for c, first := range firsts {
		for j := 0; j < 64; j++ {
			d, e := (j%8)/4, j%4 // dword within the qword, byte within it
			s.ctrl[c*64+j] = byte(32*d + 32 - 3*(first+e+1))
		}
	}
	// src[(2q+h)*64 + 4t + e]: the period column of quad q's byte, or -1
	// (zero) for a plane outside the quad's block.
	s.src = make([]int32, nq*128)
	for q, qd := range quads {
		for h := 0; h < 2; h++ {
			for t := 0; t < 16; t++ {
				for e := 0; e < 4; e++ {
					p := 10*qd[1] + qd[2] + e // plane in the period
					c := int32(-1)
					if p/P == qd[0] {
						c = int32(p*32 + 16*h + t)
					}
					s.src[(2*q+h)*64+4*t+e] = c
				}
			}
		}
	}
	s.prep = func(act []byte, xq []int8, xs []float32, k0, k1 int) {
		for k := k0; k < k1; k++ {
			a := act[k*s.actChunk : (k+1)*s.actChunk]
			gatherActs(a, xq[k*640:(k+1)*640], s.src)
			bits3LaneActs(a[nq*128:], xq, xs, k, nb, unit, 16)
		}
	}
	return s
}

// bits3LaneActs writes period k's per-block lane activation scales and
// sums for the 3-bit kernels: for each of the nb blocks of unit columns, r
// float32 copies of its scale, then r int32 copies of the sum of its xq.
func bits3LaneActs(a []byte, xq []int8, xs []float32, k, nb, unit, r int) {
	for j := 0; j < nb; j++ {
		c0 := k*640 + j*unit
		var sum int32
		for _, v := range xq[c0 : c0+unit] {
			sum += int32(v)
		}
		for lane := 0; lane < r; lane++ {
			putF32(a[j*8*r+4*lane:], xs[c0/128])
			putI32(a[j*8*r+4*r+4*lane:], sum)
		}
	}
}

// newBits3State returns the state the 3-bit kernels share: tiles of r rows
// (the kernel's lanes), "chunks" of two layout chunks (640 columns: PCols
// is a multiple; 640/unit blocks of unit columns), per tile, period and
// block r float32 scales and r int32 zeros in row order, and per period
// actCodes activation bytes followed by the blocks' r lane scales and r
// lane sums (bits3LaneActs). ctrl (64 bytes) and idx are placeholders
// for the kernels that read none.
func newBits3State(b *layout.Bits, r, unit, actCodes int, kern bitsA8Func, isa ISA) *bitsSIMD {
	nb := 640 / unit
	s := &bitsSIMD{n: 3, bpc: 1, sub: 1, r: r, lanes: r, isa: isa, chunks: b.PCols / (2 * layout.BitsChunk(3)), kern: kern,
		metaBlock: nb * 8 * r, words: b.Words, stride: 4 * b.WordsPerRow(), actChunk: actCodes + nb*8*r,
		ctrl: make([]byte, 64), idx: make([]int32, 16)}
	tiles := b.PRows / r
	s.meta = make([]byte, tiles*s.chunks*s.metaBlock)
	for t := 0; t < tiles; t++ {
		for k := 0; k < s.chunks; k++ {
			for j := 0; j < nb; j++ {
				blk := s.meta[(t*s.chunks+k)*s.metaBlock+j*8*r:]
				g := (k*640 + j*unit) / b.G
				for i := 0; i < r; i++ {
					putF32(blk[4*i:], b.Scale(t*r+i, g))
					putI32(blk[4*r+4*i:], int32(b.Zero(t*r+i, g)))
				}
			}
		}
	}
	return s
}

// sparseA8 is the Sparse12 A8 kernel and its features.
var sparseA8 = struct {
	fn, fnG64 func(w *byte, stride int, meta *byte, act *byte, chunks int, out *float32, ntiles int, ctrl *byte, idx *int32)
	requires  []string
}{asm.Sparse12A8Avx512, asm.Sparse12A8G64Avx512, []string{"AVX", "AVX512F", "AVX512BW", "AVX512VNNI", "AVX512VBMI"}}

// newSparseSIMD returns the assembly state for m (the YMM kernels for the
// avx2 and avxvnni sets: newSparseYMM), or nil where the kernel does not
// apply (AVX-512: groups below 64 columns, zero points outside 0..127,
// a CPU without the features, a narrower forced kernel set).
func newSparseSIMD(be *Backend, m *layout.Sparse12) *bitsSIMD {
	if be.set.isa == AVX2 || be.set.isa == AVXVNNI {
		return newSparseYMM(be, m)
	}
	if m.G < 64 || be.set.isa != AVX512VNNI || !hasAll(sparseA8.requires) {
		return nil
	}
	for g := 0; g < m.Groups(); g++ {
		for r := 0; r < m.PRows; r++ {
			if z := m.Zero(r, g); z < 0 || z > 127 || z != float32(int32(z)) {
				return nil
			}
		}
	}
	const bpc = 2
	kern, sub := sparseA8.fn, 1
	if m.G == 64 { // each plane of a block is a 64-column group
		kern, sub = sparseA8.fnG64, 2
	}
	L := bpc * sub
	R := 16 / L
	s := &bitsSIMD{n: 8, bpc: bpc, sub: sub, r: R, lanes: 16, isa: AVX512VNNI, chunks: m.PCols / 256, kern: kern,
		metaBlock: 192, words: m.Words, stride: 4 * m.WordsPerRow(), actChunk: bpc*128 + 64}
	tiles := m.PRows / R
	s.meta = make([]byte, tiles*s.chunks*s.metaBlock)
	for t := 0; t < tiles; t++ {
		for k := 0; k < s.chunks; k++ {
			blk := s.meta[(t*s.chunks+k)*s.metaBlock:]
			for i := 0; i < R; i++ {
				r := t*R + i
				for j := 0; j < L; j++ { // sub-block j: planes j*2/sub.. of the chunk
					lane := i*L + j
					g := (k*256 + j*128/sub) / m.G
					z := int32(m.Zero(r, g))
					var sq int32
					p0 := (k*4 + j*2/sub) * 32
					for p := p0; p < p0+64/sub; p++ {
						_, q := m.Pair(r, p)
						sq += int32(q) - z
					}
					putF32(blk[4*lane:], m.Scale(r, g))
					putI32(blk[64+4*lane:], 128*sq)
					blk[128+lane] = byte(z)
				}
			}
		}
	}
	// VPERMT2B indexes: byte j of block b is plane 2b + j%2 of word j/2.
	s.ctrl = make([]byte, bpc*64)
	for b := 0; b < bpc; b++ {
		for j := 0; j < 64; j++ {
			w, plane := j/2, 2*b+j%2
			s.ctrl[b*64+j] = byte((w/16)*64 + (w%16)*4 + 3 - plane)
		}
	}
	s.idx = laneIdx(L)
	s.prep = func(act []byte, xq []int8, xs []float32, k0, k1 int) {
		for k := k0; k < k1; k++ {
			a := act[k*s.actChunk : (k+1)*s.actChunk]
			for b := 0; b < bpc; b++ {
				for j := 0; j < 64; j++ {
					w, plane := j/2, 2*b+j%2
					pair := (k*4+plane)*32 + w
					a[b*128+j] = byte(int(xq[2*pair]) + 128)
					a[b*128+64+j] = byte(int(xq[2*pair+1]) + 128)
				}
			}
			for lane := 0; lane < 16; lane++ { // lane i*L+j: block j/sub
				putF32(a[bpc*128+4*lane:], xs[k*bpc+(lane%L)/sub])
			}
		}
	}
	return s
}

func (s *bitsSIMD) kernelName() string { return "cpu-" + s.setName() + "-a8+generic" }

// setName names the kernel set the A8 kernels belong to, with "+amx"
// where batches run on AMX tiles.
func (s *bitsSIMD) setName() string {
	if s.amx != nil {
		return string(s.isa) + "+amx"
	}
	return string(s.isa)
}

// plane returns the plane whose code is byte j of a regrouped dword of
// block b (n = 8 keeps the word's bytes: byte j is plane 3-j).
func (s *bitsSIMD) plane(b, j int) int {
	if s.n == 8 {
		return 3 - j
	}
	return 4*b + j
}

// actSources returns the kernel's activation byte order for the plane
// kernels: entry (j*2+h)*64 + 4t + e is the chunk column whose int8
// activation goes there, or -1 (a zero byte) for planes outside the
// sub-block. With sub-blocks (groups of 64 or 32), sub-block sb of block b
// gets its own 128 bytes in which the other sub-blocks' planes are zero.
func (s *bitsSIMD) actSources() []int32 {
	L := s.bpc * s.sub
	src := make([]int32, L*128)
	for b := 0; b < s.bpc; b++ {
		for sb := 0; sb < s.sub; sb++ {
			j := b*s.sub + sb
			for h := 0; h < 2; h++ {
				for t := 0; t < 16; t++ {
					for e := 0; e < 4; e++ {
						p := s.plane(b, e)
						c := int32(-1)
						if (p%4)/(4/s.sub) == sb { // the plane's sub-block
							c = int32(p*32 + 16*h + t)
						}
						src[(j*2+h)*64+4*t+e] = c
					}
				}
			}
		}
	}
	return src
}

// bitsG32Sources returns the activation byte order of the G32 and G64 kernels
// (gen/bits_a8.go bitsA8G32AVX512) for n-bit codes: per 64-byte half r of
// a chunk's words and field fi of the code bytes, 64 bytes whose byte
// 8l + e multiplies the code of word 16r + 8(l/4) + e in field fi of byte
// l%4, plane 32/n - 8(l%4)/n - fi - 1 (column 32*plane + word).
func bitsG32Sources(n int) []int32 {
	f := 8 / n
	src := make([]int32, 2*f*64)
	for r := 0; r < 2; r++ {
		for fi := 0; fi < f; fi++ {
			for l := 0; l < 8; l++ {
				for e := 0; e < 8; e++ {
					w, b := 16*r+8*(l/4)+e, l%4
					p := 32/n - 8*b/n - fi - 1
					src[(r*f+fi)*64+8*l+e] = int32(32*p + w)
				}
			}
		}
	}
	return src
}

// gatherActs writes a[i] = x[src[i]], or 0 where src[i] < 0: one chunk's
// activation bytes in a kernel's order (src from actSources or the 3-bit
// quads), laid out per call, so it is a flat loop over a table built at
// load.
func gatherActs(a []byte, x []int8, src []int32) {
	a = a[:len(src)]
	for i, c := range src {
		v := byte(0)
		if c >= 0 {
			v = byte(x[c])
		}
		a[i] = v
	}
}

// interleaveRequires are the features of asm.Interleave4x16Avx.
var interleaveRequires = []string{"AVX"}

// interleaveRuns returns src (a gather table, gatherActs) as the run
// offsets of Interleave4x16Avx: src[64i + 4t + e] = offs[4i+e] + t, with
// zeroAt for the runs of zeros (src -1). It returns nil when src is not
// of that form.
func interleaveRuns(src []int32, zeroAt int32) []int32 {
	if len(src)%64 != 0 {
		return nil
	}
	offs := make([]int32, len(src)/16)
	for i := range offs {
		blk, e := i/4, i%4
		first := src[64*blk+e]
		for t := int32(0); t < 16; t++ {
			c := src[64*blk+4*int(t)+e]
			if first < 0 && c >= 0 || first >= 0 && c != first+t {
				return nil
			}
		}
		offs[i] = first
		if first < 0 {
			offs[i] = zeroAt
		}
	}
	return offs
}

// maxChunk is the most columns a Bits chunk holds (1 bit: 1024).
const maxChunk = 1024

// interleaveGather returns gatherActs of src for chunks of n activations
// done by the interleaving assembly, or nil where src is not four 16-byte
// runs per 64 bytes or the CPU lacks the assembly's features. Without
// runs of zeros the runs are read straight from the chunk; else through
// gatherRuns' copy (BenchmarkInterleaveGather, the AVX-512 Bits4 order
// with groups of 128 on a Zen 3 core: 44-50 ns a 256-column chunk through
// the copy, whose buffer is zeroed every call, 15-17 ns straight).
func interleaveGather(src []int32, n int) func(a []byte, x []int8) {
	if !hasAll(interleaveRequires) {
		return nil
	}
	runs := interleaveRuns(src, int32(n))
	if runs == nil {
		return nil
	}
	if slices.Max(runs)+16 > int32(n) {
		return func(a []byte, x []int8) { gatherRuns(a, x, runs) }
	}
	return func(a []byte, x []int8) {
		_, _ = a[16*len(runs)-1], x[n-1]
		asm.Interleave4x16Avx(&a[0], (*byte)(unsafe.Pointer(&x[0])), &runs[0], len(runs)/4)
	}
}

// gatherRuns is gatherActs for a table interleaveRuns took: one chunk x
// (at most maxChunk bytes) is copied with 16 zeros after it, and the
// assembly interleaves its runs.
func gatherRuns(a []byte, x []int8, runs []int32) {
	var tmp [maxChunk + 16]byte
	n := copy(tmp[:maxChunk], unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)))
	_ = a[16*len(runs)-1]
	_ = tmp[n+15]
	asm.Interleave4x16Avx(&a[0], &tmp[0], &runs[0], len(runs)/4)
}

// prepAct lays out chunks [k0, k1) of one vector's int8 activations for
// the kernel: the codes' activations in s.src order, then per lane the
// sub-block's activation scale and the sum of its activations.
func (s *bitsSIMD) prepAct(act []byte, xq []int8, xs []float32, k0, k1 int) {
	E := layout.BitsChunk(s.n)
	L := s.bpc * s.sub
	block, D := s.actChunk, len(s.src)
	cols := 128 / s.sub // columns per sub-block
	var sums [16]int32
	for k := k0; k < k1; k++ {
		a := act[k*block : (k+1)*block]
		x := xq[k*E : (k+1)*E]
		if s.gather != nil {
			s.gather(a, x)
		} else {
			gatherActs(a, x, s.src)
		}
		for j := 0; j < L; j++ {
			sums[j] = sumInt8(x[j*cols : (j+1)*cols])
		}
		for lane := 0; lane < 16; lane++ { // lane i*L+j: sub-block j of the chunk
			j := lane % L
			putF32(a[D+4*lane:], xs[(k*L+j)*cols/128])
			putI32(a[D+64+4*lane:], sums[j])
		}
	}
}

// mulI8SIMD runs the assembly kernel for each vector of the batch. With
// several vectors, rows go in chunks of simdRowChunk so that a chunk's
// weights stay in L2 while each vector's pass re-reads them.
func (c *lowCall) mulI8SIMD() error {
	s := c.mx.simd
	switch {
	case s.amx != nil && c.batch >= bitsAmxFrom[s.sub]:
		return c.mulI8Tiles(lowI8AMX)
	case s.t16 != nil && c.batch >= bitsT16From[s.n]:
		return c.mulI8Tiles(lowI8T16)
	}
	c.act = grow(c.act, c.batch*s.chunks*s.actChunk)
	_ = c.mx.b.forJob(s.chunks, 4, simdPrepJob{c})
	c.kind = lowI8SIMD
	return c.mx.rowWords(s.stride*c.batch, c)
}

// simdPrepJob lays out chunks [k0, k1) of every vector's activations for
// the A8 kernels.
type simdPrepJob struct{ c *lowCall }

func (j simdPrepJob) do(k0, k1 int) error {
	c := j.c
	s, pc, n := c.mx.simd, c.mx.pcols, s2(c)
	for v := 0; v < c.batch; v++ {
		s.prep(c.act[v*n:(v+1)*n], c.xq[v*pc:(v+1)*pc], c.xs[v*pc/128:(v+1)*pc/128], k0, k1)
	}
	return nil
}

// s2 is the bytes of one vector's A8 activation layout.
func s2(c *lowCall) int { return c.mx.simd.chunks * c.mx.simd.actChunk }

// simdRows runs a SIMD kernel (c.kind) on rows [r0, r1).
func (c *lowCall) simdRows(r0, r1 int, words []uint32) {
	switch c.kind {
	case lowI8SIMD:
		c.i8Rows(r0, r1, words)
	case lowI8AMX, lowI8T16:
		c.tileRows(r0, r1, words)
	case lowF32SIMD:
		c.f32Rows(r0, r1, words)
	case lowF32Sparse:
		c.sparseRows(r0, r1, words)
	}
}

// i8Rows runs the A8 kernel on rows [r0, r1) for every vector.
func (c *lowCall) i8Rows(r0, r1 int, words []uint32) {
	mx, s, batch, dst := c.mx, c.mx.simd, c.batch, c.dst
	n := s2(c)
	outp := tilePool.Get().(*[16 * 128]float32) // step/r tiles of s.lanes floats
	defer tilePool.Put(outp)
	out := outp[:]
	// Batch 1: one kernel call for the range, up to the pooled tile
	// buffer's 2048 floats (s.lanes per tile): each call ends the tile
	// pipeline (on a Zen 5 VM, two threads, Bits4G128 took 0.95-1.00x the
	// time of calls of 128 rows).
	step := min(r1-r0, len(out)/s.lanes*s.r)
	if batch > 1 {
		step = simdRowChunk
	}
	for a := r0; a < r1; a += step {
		b := min(r1, a+step)
		nt := (b - a + s.r - 1) / s.r
		w := (*byte)(unsafe.Pointer(&words[(a-r0)*s.stride/4]))
		for v := 0; v < batch; v++ {
			s.kern(w, s.stride, &s.meta[a/s.r*s.chunks*s.metaBlock], &c.act[v*n], s.chunks, &out[0], nt, &s.ctrl[0], &s.idx[0])
			for t := 0; t < nt; t++ {
				for i := 0; i < s.r; i++ {
					if r := a + t*s.r + i; r < b {
						dst[v*mx.rows+r] = out[s.lanes*t+i]
					}
				}
			}
		}
	}
}

// simdRowChunk is the rows one pass covers when a batch re-reads them
// (a multiple of 16: every range then starts on a tile).
const simdRowChunk = 32

type bitsA32Func = func(w *byte, stride int, meta *float32, x *float32, xsum *float32, out *float32, rows int, chunks int)

// floatKernels is one ISA's one-row float kernels for the low-bit formats.
type floatKernels struct {
	bits     map[[2]int]bitsA32Func // by [n, seg]
	bits16   map[[2]int]bitsA32Func // by [n, seg]: binary16 metadata (Meta16)
	sparse   map[int]sparseA32Func  // by seg
	sparse16 map[int]sparseA32Func  // by seg: binary16 metadata (Meta16)
	requires []string
}

// floatSets maps a backend's kernel set to its float low-bit kernels.
var floatSets = map[ISA]*floatKernels{
	AVX512VNNI: {
		bits: map[[2]int]bitsA32Func{
			{8, 1}: asm.Bits8A32S1Avx512, {8, 2}: asm.Bits8A32S2Avx512, {8, 4}: asm.Bits8A32S4Avx512,
			{4, 1}: asm.Bits4A32S1Avx512, {4, 2}: asm.Bits4A32S2Avx512, {4, 4}: asm.Bits4A32S4Avx512, {4, 8}: asm.Bits4A32S8Avx512,
			{2, 1}: asm.Bits2A32S1Avx512, {1, 1}: asm.Bits1A32S1Avx512, {1, 2}: asm.Bits1A32S2Avx512, // wider: table kernels
			{3, 1}: asm.Bits3A32S1Avx512, {3, 2}: asm.Bits3A32S2Avx512, {3, 10}: asm.Bits3A32S10Avx512,
		},
		bits16: map[[2]int]bitsA32Func{
			{8, 1}: asm.Bits8A32S1Meta16Avx512, {8, 2}: asm.Bits8A32S2Meta16Avx512, {8, 4}: asm.Bits8A32S4Meta16Avx512,
			{4, 1}: asm.Bits4A32S1Meta16Avx512, {4, 2}: asm.Bits4A32S2Meta16Avx512, {4, 4}: asm.Bits4A32S4Meta16Avx512, {4, 8}: asm.Bits4A32S8Meta16Avx512,
			{2, 1}: asm.Bits2A32S1Meta16Avx512, {1, 2}: asm.Bits1A32S2Meta16Avx512,
			{3, 1}: asm.Bits3A32S1Meta16Avx512, {3, 2}: asm.Bits3A32S2Meta16Avx512, {3, 10}: asm.Bits3A32S10Meta16Avx512,
		},
		sparse:   map[int]sparseA32Func{1: asm.Sparse12A32S1Avx512, 2: asm.Sparse12A32S2Avx512, 4: asm.Sparse12A32S4Avx512},
		sparse16: map[int]sparseA32Func{1: asm.Sparse12A32S1Meta16Avx512, 2: asm.Sparse12A32S2Meta16Avx512, 4: asm.Sparse12A32S4Meta16Avx512},
		requires: []string{"AVX", "AVX512F", "AVX512VL", "FMA3", "F16C"},
	},
}

func init() {
	avx2 := &floatKernels{
		bits: map[[2]int]bitsA32Func{
			{8, 1}: asm.Bits8A32S1Avx2, {8, 2}: asm.Bits8A32S2Avx2, {8, 4}: asm.Bits8A32S4Avx2,
			{4, 1}: asm.Bits4A32S1Avx2, {4, 2}: asm.Bits4A32S2Avx2, {4, 4}: asm.Bits4A32S4Avx2, {4, 8}: asm.Bits4A32S8Avx2,
			{2, 1}: asm.Bits2A32S1Avx2, {2, 2}: asm.Bits2A32S2Avx2, {2, 4}: asm.Bits2A32S4Avx2, {2, 8}: asm.Bits2A32S8Avx2,
			{2, 16}: asm.Bits2A32S16Avx2,
			{1, 1}:  asm.Bits1A32S1Avx2, {1, 2}: asm.Bits1A32S2Avx2, {1, 4}: asm.Bits1A32S4Avx2, {1, 8}: asm.Bits1A32S8Avx2,
			{1, 16}: asm.Bits1A32S16Avx2, {1, 32}: asm.Bits1A32S32Avx2,
			{3, 1}: asm.Bits3A32S1Avx2, {3, 2}: asm.Bits3A32S2Avx2, {3, 10}: asm.Bits3A32S10Avx2,
		},
		bits16: map[[2]int]bitsA32Func{
			{8, 1}: asm.Bits8A32S1Meta16Avx2, {8, 2}: asm.Bits8A32S2Meta16Avx2, {8, 4}: asm.Bits8A32S4Meta16Avx2,
			{4, 1}: asm.Bits4A32S1Meta16Avx2, {4, 2}: asm.Bits4A32S2Meta16Avx2, {4, 4}: asm.Bits4A32S4Meta16Avx2, {4, 8}: asm.Bits4A32S8Meta16Avx2,
			{2, 2}: asm.Bits2A32S2Meta16Avx2, {2, 4}: asm.Bits2A32S4Meta16Avx2, {2, 8}: asm.Bits2A32S8Meta16Avx2,
			{2, 16}: asm.Bits2A32S16Meta16Avx2,
			{1, 4}:  asm.Bits1A32S4Meta16Avx2, {1, 8}: asm.Bits1A32S8Meta16Avx2,
			{1, 16}: asm.Bits1A32S16Meta16Avx2, {1, 32}: asm.Bits1A32S32Meta16Avx2,
			{3, 2}: asm.Bits3A32S2Meta16Avx2, {3, 10}: asm.Bits3A32S10Meta16Avx2,
		},
		sparse:   map[int]sparseA32Func{1: asm.Sparse12A32S1Avx2, 2: asm.Sparse12A32S2Avx2, 4: asm.Sparse12A32S4Avx2},
		sparse16: map[int]sparseA32Func{1: asm.Sparse12A32S1Meta16Avx2, 2: asm.Sparse12A32S2Meta16Avx2, 4: asm.Sparse12A32S4Meta16Avx2},
		requires: []string{"AVX", "AVX2", "FMA3", "F16C"},
	}
	floatSets[AVX2], floatSets[AVXVNNI] = avx2, avx2
}

// bitsA32 is a Bits matrix's state for the assembly float kernel: per row
// and segment (seg planes = seg*32 columns, inside one group) the float32
// pair (s, s*z), derived once at load; or, with slots > 0 (a Meta16
// kernel), per row and chunk the format's binary16 scales and zeros,
// slots of each (see gen/bits_a32.go's bitsA32).
type bitsA32 struct {
	seg, nseg, chunks int
	meta              []float32
	kern              bitsA32Func
	// slots is the binary16 scales (then zeros) per row and chunk of a
	// Meta16 kernel, the segments per chunk rounded up to a power of two;
	// 0 for float32 pairs. It is also the kernel's xsum slots per chunk.
	slots int
	// tc is the chunks per column tile (a32TileBytes of activations);
	// with more than one tile, meta is tile-major: tile t's metadata for
	// every row (its chunks only) starts at rows*(t*tc)*words, words the
	// float32 words per row and chunk (2*step/seg, or slots).
	tc int
	// lut, if set, runs instead (16-row table kernels; meta is then nil).
	lut *bitsLut
	// build fills meta; it runs once, on the first float multiply, so a
	// matrix used only with int8 activations holds one copy of its
	// metadata (the A8 kernel's).
	build func()
	once  sync.Once
}

// a32TileBytes bounds the float32 activations one call of the one-row
// float kernels reads: they stay in L1 while every row of the thread's
// range streams its weights past them. Reading a whole 14336-column row's
// activations (57 KB) per row took them from L2 for every weight.
const a32TileBytes = 16 << 10

// a32TileChunks returns the chunks (of chunkCols columns) per column
// tile: whole ones, at least one.
func a32TileChunks(chunkCols int) int { return max(1, a32TileBytes/(4*chunkCols)) }

// tileMajor reorders row-major (s, s*z) pairs (nseg per row, sp per
// chunk) into tile-major order for tiles of tc chunks.
func tileMajor(meta []float32, rows, nseg, sp, tc int) []float32 {
	if tc*sp >= nseg {
		return meta // one tile: row-major already
	}
	out := make([]float32, len(meta))
	o := 0
	for j0 := 0; j0 < nseg; j0 += tc * sp {
		n := min(tc*sp, nseg-j0)
		for r := 0; r < rows; r++ {
			o += copy(out[o:], meta[2*(r*nseg+j0):2*(r*nseg+j0+n)])
		}
	}
	return out
}

func newBitsA32(be *Backend, b *layout.Bits) *bitsA32 {
	step := 32 / b.N
	// Segments divide both the group and the chunk (3 bits: 10 planes).
	seg := gcd(b.G/32, step)
	fk := floatSets[be.set.isa]
	if fk == nil || !hasAll(fk.requires) {
		return nil
	}
	a := &bitsA32{seg: seg, nseg: b.PCols / (32 * seg), chunks: b.PCols / layout.BitsChunk(b.N)}
	if a.lut = newBitsLut(be, b, seg); a.lut != nil {
		return a // the one-row kernels for these are not built (gen/bits_a32.go)
	}
	var ok bool
	if a.kern, ok = fk.bits[[2]int{b.N, seg}]; !ok {
		return nil
	}
	a.tc = min(a.chunks, a32TileChunks(layout.BitsChunk(b.N)))
	if k16, ok := fk.bits16[[2]int{b.N, seg}]; ok && !b.FP32Meta && !b.Offsets {
		a.kern, a.slots = k16, pow2Ceil(step/seg)
		a.build = func() { a.meta = meta16Tiles(&b.GroupMeta, b.Rows, b.PRows, a.chunks, step/seg, 32*seg, b.G, a.tc) }
		return a
	}
	a.build = func() {
		a.meta = tileMajor(segmentMeta(b.Rows, a.nseg, 32*seg, b.G, b.Affine), b.Rows, a.nseg, step/seg, a.tc)
	}
	return a
}

// pow2Ceil returns the least power of two >= n (n >= 1).
func pow2Ceil(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// meta16Tiles returns a Meta16 float kernel's metadata from gm (binary16,
// rows true rows of prows, groups of g columns): per column tile of tc
// chunks, per row, per chunk, P binary16 scales then P binary16 zeros (P =
// pow2Ceil(sp), sp segments of segCols columns per chunk, zero past them),
// copied from the format as stored. Its float32 words are the kernels'
// meta unit.
func meta16Tiles(gm *layout.GroupMeta, rows, prows, chunks, sp, segCols, g, tc int) []float32 {
	P := pow2Ceil(sp)
	meta := make([]float32, rows*chunks*P)
	h := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(meta))), 2*len(meta))
	o := 0
	for k0 := 0; k0 < chunks; k0 += tc {
		for r := 0; r < rows; r++ {
			for k := k0; k < min(chunks, k0+tc); k++ {
				for j := 0; j < sp; j++ {
					i := (k*sp+j)*segCols/g*prows + r
					h[o+j] = uint16(gm.Scales16[i])
					h[o+P+j] = uint16(gm.Zeros16[i])
				}
				o += 2 * P
			}
		}
	}
	return meta
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// segmentMeta returns the float32 pairs (s, s*z) per row and segment of
// colsPerSeg columns (each inside one group of group columns), row-major:
// the float kernels' metadata, derived once at load.
func segmentMeta(rows, nseg, colsPerSeg, group int, affine func(r, g int) (float32, float32)) []float32 {
	meta := make([]float32, 2*rows*nseg)
	for r := 0; r < rows; r++ {
		for j := 0; j < nseg; j++ {
			g := j * colsPerSeg / group
			s, m := affine(r, g)
			meta[2*(r*nseg+j)] = s
			meta[2*(r*nseg+j)+1] = m
		}
	}
	return meta
}

// mulF32SIMD runs the float kernel on the padded activations c.xp.
func (c *lowCall) mulF32SIMD() error {
	mx := c.mx
	if mx.a32.lut != nil {
		mx.mulF32Lut(c.dst, c.xp, c.batch)
		return nil
	}
	a, b, batch, pc := mx.a32, mx.bits, c.batch, mx.pcols
	a.once.Do(a.build)
	// Segment sums in column order: segment j covers plane p = j*seg ..
	// of chunk, i.e. columns (k*step + i)*32 + t for its planes.
	step := 32 / b.N
	xslots := c.xslots()
	c.xsum = grow(c.xsum, batch*a.chunks*xslots)
	clear(c.xsum)
	for v := 0; v < batch; v++ {
		x := c.xp[v*pc : (v+1)*pc]
		for k := 0; k < a.chunks; k++ {
			for s0 := 0; s0 < step; s0 += a.seg {
				var acc float32
				for col := (k*step + s0) * 32; col < (k*step+s0+a.seg)*32; col++ {
					acc += x[col]
				}
				c.xsum[(v*a.chunks+k)*xslots+s0/a.seg] = acc
			}
		}
	}
	c.kind = lowF32SIMD
	return mx.rowWords(4*b.WordsPerRow()*batch, c)
}

// xslots returns the xsum slots per chunk of the Bits float kernel: one
// per segment, or a Meta16 kernel's slots (zero past the segments).
func (c *lowCall) xslots() int {
	a := c.mx.a32
	if a.slots > 0 {
		return a.slots
	}
	return 32 / c.mx.bits.N / a.seg
}

// f32Rows runs the Bits float kernel on rows [r0, r1) for every vector.
func (c *lowCall) f32Rows(r0, r1 int, ws []uint32) {
	mx := c.mx
	a, b, pc := mx.a32, mx.bits, mx.pcols
	xslots, words := c.xslots(), 2*(32/b.N/a.seg) // float32 words of metadata per row and chunk
	if a.slots > 0 {
		words = a.slots
	}
	stride := 4 * b.WordsPerRow()
	cc := layout.BitsChunk(b.N)
	pp := getPart(r1-r0, a.chunks, a.tc)
	defer putPart(pp)
	for v := 0; v < c.batch; v++ {
		tiledCall(c.dst[v*mx.rows+r0:v*mx.rows+r1], a.chunks, a.tc, *pp, func(k0, nc int, out *float32) {
			w := (*byte)(unsafe.Pointer(&ws[k0*32]))
			a.kern(w, stride, &a.meta[tileMeta(mx.rows, r0, k0, nc, words)], &c.xp[v*pc+k0*cc], &c.xsum[(v*a.chunks+k0)*xslots], out, r1-r0, nc)
		})
	}
}

// tiledCall runs a one-row float kernel over one vector's rows in column
// tiles of tc chunks: call(k0, nc, out) computes chunks k0..k0+nc-1 of
// every row into out. The first tile stores into dst, later ones into
// part (tilePart), added to dst in tile order.
func tiledCall(dst []float32, chunks, tc int, part []float32, call func(k0, nc int, out *float32)) {
	for k0 := 0; k0 < chunks; k0 += tc {
		nc := min(tc, chunks-k0)
		if k0 == 0 {
			call(0, nc, &dst[0])
			continue
		}
		call(k0, nc, &part[0])
		for i, p := range part {
			dst[i] += p
		}
	}
}

// getPart returns tiledCall's buffer for the partial sums of n rows
// (pooled; putPart returns it): *p nil when the chunks are one tile.
func getPart(n, chunks, tc int) *[]float32 {
	p := partPool.Get().(*[]float32)
	if tc >= chunks {
		*p = (*p)[:0]
		return p
	}
	*p = grow(*p, n)
	return p
}

// putPart returns a getPart buffer to the pool.
func putPart(p *[]float32) { partPool.Put(p) }

var partPool = sync.Pool{New: func() any { return new([]float32) }}

// tileMeta is the index in tile-major metadata (tileMajor or meta16Tiles;
// rows rows, words float32 words per row and chunk) of row r's first word
// in the tile of nc chunks starting at chunk k0.
func tileMeta(rows, r, k0, nc, words int) int { return (rows*k0 + r*nc) * words }

type sparseA32Func = func(w *byte, stride int, meta *float32, xe *float32, xo *float32, out *float32, rows int, chunks int)

// sparseA32 is a Sparse12 matrix's state for the float kernel: (s, s*z)
// per row and segment (seg planes = seg*64 columns), derived at load, or
// with meta16 the format's binary16 s and z per row and chunk
// (meta16Tiles).
type sparseA32 struct {
	seg, nseg, chunks int
	meta              []float32 // tile-major for tiles of tc chunks (see bitsA32)
	kern              sparseA32Func
	tc                int
	meta16            bool // meta is meta16Tiles' binary16 (a Meta16 kernel)
}

func newSparseA32(be *Backend, m *layout.Sparse12) *sparseA32 {
	seg := min(m.G/64, 4)
	fk := floatSets[be.set.isa]
	if fk == nil || !hasAll(fk.requires) {
		return nil
	}
	kern, ok := fk.sparse[seg]
	if !ok {
		return nil // groups of 32 columns split a plane: generic
	}
	a := &sparseA32{seg: seg, nseg: m.PCols / (64 * seg), chunks: m.PCols / 256, kern: kern}
	a.tc = min(a.chunks, a32TileChunks(256))
	if k16, ok := fk.sparse16[seg]; ok && !m.FP32Meta {
		a.kern, a.meta16 = k16, true
		a.meta = meta16Tiles(&m.GroupMeta, m.Rows, m.PRows, a.chunks, 4/seg, 64*seg, m.G, a.tc)
		return a
	}
	a.meta = segmentMeta(m.Rows, a.nseg, 64*seg, m.G, m.Affine)
	a.meta = tileMajor(a.meta, m.Rows, a.nseg, 4/seg, a.tc)
	return a
}

// mulF32Sparse runs the Sparse12 float kernel on the padded activations.
func (c *lowCall) mulF32Sparse() error {
	mx, pc := c.mx, c.mx.pcols
	c.xe, c.xo = grow(c.xe, c.batch*pc/2), grow(c.xo, c.batch*pc/2)
	for i := range c.xe {
		c.xe[i], c.xo[i] = c.xp[2*i], c.xp[2*i+1] // pc is even: pairs never straddle vectors
	}
	c.kind = lowF32Sparse
	return mx.rowWords(4*mx.sp.WordsPerRow()*c.batch, c)
}

// sparseRows runs the Sparse12 float kernel on rows [r0, r1) for every
// vector.
func (c *lowCall) sparseRows(r0, r1 int, ws []uint32) {
	mx := c.mx
	a, m, pc := mx.sa32, mx.sp, mx.pcols
	stride := 4 * m.WordsPerRow()
	sp := 4 / a.seg // segments per 256-column chunk
	words := 2 * sp // float32 words of metadata per row and chunk
	if a.meta16 {
		words = sp // sp binary16 scales and zeros (sp is a power of two)
	}
	pp := getPart(r1-r0, a.chunks, a.tc)
	defer putPart(pp)
	for v := 0; v < c.batch; v++ {
		tiledCall(c.dst[v*mx.rows+r0:v*mx.rows+r1], a.chunks, a.tc, *pp, func(k0, nc int, out *float32) {
			w := (*byte)(unsafe.Pointer(&ws[k0*32]))
			a.kern(w, stride, &a.meta[tileMeta(mx.rows, r0, k0, nc, words)], &c.xe[v*pc/2+k0*128], &c.xo[v*pc/2+k0*128], out, r1-r0, nc)
		})
	}
}
