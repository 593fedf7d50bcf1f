//go:build !noasm && !purego

package cpu

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/qgemv/qgemv/asm"
)

// bitsAmxKernels are the AMX W(n)A8 kernels of Bits (n = 8 or 4, groups
// of 32, 64 or at least 128 columns), by width, groups per 128 columns
// and metadata (the keys of bitsA8Kernels whose AVX-512 kernel they share
// metadata with), then by batch width M. The kernel set with AMX runs them for batches of 2 and
// more; batch 1 keeps the AVX-512 kernel, which streams the weights as
// fast.
var bitsAmxKernels = map[bitsA8Key]map[int]bitsA8Func{
	{8, 1, false}: {1: asm.Bits8A8AmxT1, 2: asm.Bits8A8AmxT2, 4: asm.Bits8A8AmxT4, 8: asm.Bits8A8AmxT8, 16: asm.Bits8A8AmxT16},
	{8, 2, false}: {1: asm.Bits8A8AmxG64T1, 2: asm.Bits8A8AmxG64T2, 4: asm.Bits8A8AmxG64T4, 8: asm.Bits8A8AmxG64T8, 16: asm.Bits8A8AmxG64T16},
	{8, 4, false}: {1: asm.Bits8A8AmxG32T1, 2: asm.Bits8A8AmxG32T2, 4: asm.Bits8A8AmxG32T4, 8: asm.Bits8A8AmxG32T8, 16: asm.Bits8A8AmxG32T16},
	{4, 1, false}: {1: asm.Bits4A8AmxT1, 2: asm.Bits4A8AmxT2, 4: asm.Bits4A8AmxT4, 8: asm.Bits4A8AmxT8, 16: asm.Bits4A8AmxT16},
	{4, 2, false}: {1: asm.Bits4A8AmxG64T1, 2: asm.Bits4A8AmxG64T2, 4: asm.Bits4A8AmxG64T4, 8: asm.Bits4A8AmxG64T8, 16: asm.Bits4A8AmxG64T16},
	{4, 4, false}: {1: asm.Bits4A8AmxG32T1, 2: asm.Bits4A8AmxG32T2, 4: asm.Bits4A8AmxG32T4, 8: asm.Bits4A8AmxG32T8, 16: asm.Bits4A8AmxG32T16},
	{8, 1, true}:  {1: asm.Bits8A8AmxMeta16T1, 2: asm.Bits8A8AmxMeta16T2, 4: asm.Bits8A8AmxMeta16T4, 8: asm.Bits8A8AmxMeta16T8, 16: asm.Bits8A8AmxMeta16T16},
	{8, 2, true}:  {1: asm.Bits8A8AmxG64Meta16T1, 2: asm.Bits8A8AmxG64Meta16T2, 4: asm.Bits8A8AmxG64Meta16T4, 8: asm.Bits8A8AmxG64Meta16T8, 16: asm.Bits8A8AmxG64Meta16T16},
	{8, 4, true}:  {1: asm.Bits8A8AmxG32Meta16T1, 2: asm.Bits8A8AmxG32Meta16T2, 4: asm.Bits8A8AmxG32Meta16T4, 8: asm.Bits8A8AmxG32Meta16T8, 16: asm.Bits8A8AmxG32Meta16T16},
	{4, 1, true}:  {1: asm.Bits4A8AmxMeta16T1, 2: asm.Bits4A8AmxMeta16T2, 4: asm.Bits4A8AmxMeta16T4, 8: asm.Bits4A8AmxMeta16T8, 16: asm.Bits4A8AmxMeta16T16},
	{4, 2, true}:  {1: asm.Bits4A8AmxG64Meta16T1, 2: asm.Bits4A8AmxG64Meta16T2, 4: asm.Bits4A8AmxG64Meta16T4, 8: asm.Bits4A8AmxG64Meta16T8, 16: asm.Bits4A8AmxG64Meta16T16},
	{4, 4, true}:  {1: asm.Bits4A8AmxG32Meta16T1, 2: asm.Bits4A8AmxG32Meta16T2, 4: asm.Bits4A8AmxG32Meta16T4, 8: asm.Bits4A8AmxG32Meta16T8, 16: asm.Bits4A8AmxG32Meta16T16},
}

// bitsAmxPerm is the column order of a 4-byte K group in the Bits AMX
// kernels' A tiles (gen/bits_amx.go lays them out): byte p of dword t of
// tile a (rows' words 16a..16a+15 of a chunk) holds the code of column
// 32*perm[p] + 16a + t of its 128-column block. With n = 8 that is the
// word's own byte order (byte p is plane 3-p); with n = 4 each dword is
// regrouped from the low and high nibbles so that it holds one block's
// planes only (gen's bitsUnpacker).
func bitsAmxPerm(n int) [4]int {
	if n == 8 {
		return [4]int{3, 2, 1, 0}
	}
	return [4]int{3, 1, 2, 0}
}

// amxBatch splits batch vectors into runs of at most 16, each padded to
// the next power of two (a kernel's M).
func amxBatch(batch int) (per, mpad, n int) { return batchRuns(batch, 16) }

// amxBlockBytes is the activation bytes of one group (of a 128-column
// block, or the whole block) for M vectors: two B tiles of 16 rows of 4*M
// bytes, then 16 float32 lane scales and 16 int32 lane sums.
func amxBlockBytes(M int) int { return 128*M + 128 }

// mulI8Tiles runs the batch kernels that multiply 16 rows by a run of
// vectors, the AMX kernels (kind lowI8AMX) or the AVX-512 rows-in-lanes
// ones (lowI8T16): the activations laid out once per call (in parallel
// over chunks), then the rows.
func (c *lowCall) mulI8Tiles(kind lowKind) error {
	s := c.mx.simd
	_, mpad, n := amxBatch(c.batch)
	c.act = grow(c.act, n*s.chunks*s.bpc*s.sub*amxBlockBytes(mpad))
	c.kind = kind
	_ = c.mx.b.forJob(s.chunks, 4, amxPrepJob{c})
	return c.mx.rowWords(s.stride*c.batch, c)
}

// amxPrepJob lays out chunks [k0, k1) of every vector run's activations
// as the AMX kernels' B tiles, or vector-major for the rows-in-lanes
// kernels (asm package doc, "Bits int8 kernels"): per chunk and group, the
// group's columns (zero for the block's other groups' columns), its
// vectors' scales and sums.
type amxPrepJob struct{ c *lowCall }

func (j amxPrepJob) do(k0, k1 int) error {
	c := j.c
	s, pc := c.mx.simd, c.mx.pcols
	per, mpad, n := amxBatch(c.batch)
	runs := bitsT16Runs(s.n)
	blk := amxBlockBytes(mpad)
	L := s.bpc * s.sub // groups per chunk
	E := s.bpc * 128   // columns per chunk
	U := 128 / s.sub   // columns per group
	// keep[sg]: the bytes of a dword that hold group sg's columns.
	var keep [4]uint32
	for p, q := range bitsAmxPerm(s.n) {
		keep[32*q/U] |= 0xff << (8 * p)
	}
	var tmp [16][128]byte // the block of each vector, vector-major
	for ch := 0; ch < n; ch++ {
		nv := min(per, c.batch-ch*per)
		base := c.act[ch*s.chunks*L*blk:]
		for k := k0; k < k1; k++ {
			for b := 0; b < s.bpc; b++ {
				c0 := k*E + b*128
				// Byte 4d+p of a vector's block (d = 16a+t): column
				// 32*perm[p] + 16a + t; the rows-in-lanes kernels (one
				// group per block) read it as it is, in place.
				for v := 0; v < nv; v++ {
					vec := ch*per + v
					to := tmp[v][:]
					if c.kind == lowI8T16 {
						to = base[(k*L+b)*blk+128*v:]
					}
					_ = to[127]
					asm.Interleave4x16Avx(&to[0], (*byte)(unsafe.Pointer(&c.xq[vec*pc+c0])), &runs[0], 2)
				}
				for sg := 0; sg < s.sub; sg++ {
					g := b*s.sub + sg
					dst := base[(k*L+g)*blk : (k*L+g+1)*blk]
					var xs [16]float32
					var sums [16]int32
					for v := 0; v < nv; v++ {
						vec := ch*per + v
						xs[v] = c.xs[vec*pc/128+c0/128]
						sums[v] = sumInt8(c.xq[vec*pc+c0+sg*U : vec*pc+c0+(sg+1)*U])
					}
					if c.kind == lowI8T16 { // laid out above; the slots past the batch zero
						clear(dst[128*nv : 128*mpad])
					} else { // B tiles: dword d of every vector in turn, the group's bytes
						for d := 0; d < 32; d++ {
							row := dst[4*mpad*d : 4*mpad*(d+1)]
							for v := 0; v < mpad; v++ {
								var w uint32
								if v < nv {
									w = binary.LittleEndian.Uint32(tmp[v][4*d:]) & keep[sg]
								}
								binary.LittleEndian.PutUint32(row[4*v:], w)
							}
						}
					}
					lanes := dst[128*mpad:]
					copy(lanes[:64], unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), 64))
					copy(lanes[64:], unsafe.Slice((*byte)(unsafe.Pointer(&sums[0])), 64))
				}
			}
		}
	}
	return nil
}

// tileRows runs the call's batch kernel on rows [r0, r1) (r0 a multiple
// of 16) for every vector run and scatters its results into dst: the AMX
// kernels write 16 vector lanes per row (for M = 1 one result per row),
// the rows-in-lanes ones 16 rows per vector and tile.
func (c *lowCall) tileRows(r0, r1 int, words []uint32) {
	mx, s, dst := c.mx, c.mx.simd, c.dst
	per, mpad, n := amxBatch(c.batch)
	kern := s.amx[mpad]
	at := func(i, v int) int { return 16*i + v } // row i of the call, vector v
	if mpad == 1 {
		at = func(i, _ int) int { return i }
	}
	if c.kind == lowI8T16 {
		kern = s.t16[mpad]
		at = func(i, v int) int { return (i/16*mpad+v)*16 + i%16 }
	}
	chunkBytes := s.chunks * s.bpc * s.sub * amxBlockBytes(mpad)
	step := 128 // the pooled tile buffer: 128 rows of 16 lanes
	if n > 1 {
		step = simdRowChunk
	}
	outp := tilePool.Get().(*[16 * 128]float32)
	defer tilePool.Put(outp)
	out := outp[:]
	for a := r0; a < r1; a += step {
		b := min(r1, a+step)
		nt := (b - a + 15) / 16
		w := (*byte)(unsafe.Pointer(&words[(a-r0)*s.stride/4]))
		for ch := 0; ch < n; ch++ {
			kern(w, s.stride, &s.meta[a/s.r*s.chunks*s.metaBlock], &c.act[ch*chunkBytes], s.chunks, &out[0], nt, &s.ctrl[0], &s.idx[0])
			nv := min(per, c.batch-ch*per)
			for v := 0; v < nv; v++ {
				d := dst[(ch*per+v)*mx.rows+a : (ch*per+v)*mx.rows+b]
				for i := range d {
					d[i] = out[at(i, v)]
				}
			}
		}
	}
}

// bitsT16Kernels are the AVX-512 rows-in-lanes W(n)A8 batch kernels of
// Bits (n = 8 or 4, groups of at least 128 columns), by width and
// metadata, then by batch width M, for backends without AMX; their
// features are bitsT16Requires.
var bitsT16Kernels = map[bitsA8Key]map[int]bitsA8Func{
	{8, 1, false}: {2: asm.Bits8A8T2Avx512, 4: asm.Bits8A8T4Avx512, 8: asm.Bits8A8T8Avx512, 16: asm.Bits8A8T16Avx512},
	{4, 1, false}: {2: asm.Bits4A8T2Avx512, 4: asm.Bits4A8T4Avx512, 8: asm.Bits4A8T8Avx512, 16: asm.Bits4A8T16Avx512},
	{8, 1, true}:  {2: asm.Bits8A8Meta16T2Avx512, 4: asm.Bits8A8Meta16T4Avx512, 8: asm.Bits8A8Meta16T8Avx512, 16: asm.Bits8A8Meta16T16Avx512},
	{4, 1, true}:  {2: asm.Bits4A8Meta16T2Avx512, 4: asm.Bits4A8Meta16T4Avx512, 8: asm.Bits4A8Meta16T8Avx512, 16: asm.Bits4A8Meta16T16Avx512},
}

var bitsT16Requires = append(slices.Clip(bitsA8Kernels.requires), "AVX512BW", "AVX512VL", "GFNI")

// bitsT16Runs returns the Interleave4x16Avx offsets that lay out one
// vector's 128-column block for the rows-in-lanes kernels: byte 4d+p
// (d = 16i+t) takes column 32*perm[p] + 16i + t.
func bitsT16Runs(n int) *[8]int32 {
	if n == 8 {
		return &t16Runs8
	}
	return &t16Runs4
}

var t16Runs8, t16Runs4 = t16RunsOf(8), t16RunsOf(4)

func t16RunsOf(n int) (r [8]int32) {
	for i := 0; i < 2; i++ {
		for p, q := range bitsAmxPerm(n) {
			r[4*i+p] = int32(32*q + 16*i)
		}
	}
	return r
}

// bitsT16From is the smallest batch the rows-in-lanes kernels run, by
// width: where they measured faster than a pass per vector on one Zen 4
// core (1024x4096 and 256x14336, in cache; docs/KERNELS.md). Their fixed
// cost per 16 rows and chunk (the transposes, for Bits4 the regrouping)
// is shared by the batch.
var bitsT16From = map[int]int{8: 3, 4: 4}

// bitsAmxFrom is the smallest batch the AMX kernels run, by groups per
// 128 columns: where they measured faster than the AVX-512 kernels on the
// 16-core Xeon (16 threads, 4096x14336; docs/KERNELS.md). Batch 1 streams
// the weights as fast on AVX-512; with groups of 64 and 32 each group's
// own multiplies and scales cost more than AVX-512 spends below 4 and 8
// vectors.
var bitsAmxFrom = map[int]int{1: 2, 2: 4, 4: 8}
