//go:build !noasm && !purego

package cpu

import (
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

// bitsAmxPerm is gen's table of the same name: byte p of an A tile's
// dword t (words 16a..16a+15 of a chunk) holds the code of column
// 32*perm[p] + 16a + t of its 128-column block.
func bitsAmxPerm(n int) [4]int {
	if n == 8 {
		return [4]int{3, 2, 1, 0}
	}
	return [4]int{3, 1, 2, 0}
}

// amxBatch splits batch vectors into runs of at most 16, each padded to
// the next power of two (a kernel's M).
func amxBatch(batch int) (per, mpad, n int) {
	n = (batch + 15) / 16
	per = (batch + n - 1) / n
	return per, nextPow2(per), n
}

// amxBlockBytes is the activation bytes of one group (of a 128-column
// block, or the whole block) for M vectors: two B tiles of 16 rows of 4*M
// bytes, then 16 float32 lane scales and 16 int32 lane sums.
func amxBlockBytes(M int) int { return 128*M + 128 }

// mulI8AMX runs the AMX kernels: the activations laid out once per call
// as B tiles (in parallel over chunks), then the rows.
func (c *lowCall) mulI8AMX() error {
	s := c.mx.simd
	_, mpad, n := amxBatch(c.batch)
	c.act = grow(c.act, n*s.chunks*s.bpc*s.sub*amxBlockBytes(mpad))
	_ = c.mx.b.forJob(s.chunks, 4, amxPrepJob{c})
	c.kind = lowI8AMX
	return c.mx.rowWords(s.stride*c.batch, c)
}

// amxPrepJob lays out chunks [k0, k1) of every vector run's activations
// as the AMX kernels' B tiles (asm package doc, "Bits int8 kernels"): per
// chunk and group, the group's columns (zero for the block's other
// groups' columns), its vectors' scales and sums.
type amxPrepJob struct{ c *lowCall }

func (j amxPrepJob) do(k0, k1 int) error {
	c := j.c
	s, pc := c.mx.simd, c.mx.pcols
	per, mpad, n := amxBatch(c.batch)
	perm := bitsAmxPerm(s.n)
	blk := amxBlockBytes(mpad)
	L := s.bpc * s.sub // groups per chunk
	E := s.bpc * 128   // columns per chunk
	U := 128 / s.sub   // columns per group
	for ch := 0; ch < n; ch++ {
		nv := min(per, c.batch-ch*per)
		base := c.act[ch*s.chunks*L*blk:]
		for k := k0; k < k1; k++ {
			for g := 0; g < L; g++ {
				b, sg := g/s.sub, g%s.sub // block of the chunk, group of the block
				dst := base[(k*L+g)*blk : (k*L+g+1)*blk]
				c0 := k*E + b*128
				var xs [16]float32
				var sums [16]int32
				for v := 0; v < mpad; v++ {
					if v >= nv {
						for r := 0; r < 32; r++ {
							clear(dst[r*4*mpad+4*v : r*4*mpad+4*v+4])
						}
						continue
					}
					vec := ch*per + v
					x := c.xq[vec*pc+c0 : vec*pc+c0+128]
					for a := 0; a < 2; a++ {
						for t := 0; t < 16; t++ {
							d := dst[(16*a+t)*4*mpad+4*v:]
							for p, q := range perm {
								d[p] = 0 // planes of the block's other groups
								if 32*q/U == sg {
									d[p] = byte(x[32*q+16*a+t])
								}
							}
						}
					}
					xs[v] = c.xs[vec*pc/128+c0/128]
					sums[v] = sumInt8(x[sg*U : (sg+1)*U])
				}
				lanes := dst[128*mpad:]
				copy(lanes[:64], unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), 64))
				copy(lanes[64:], unsafe.Slice((*byte)(unsafe.Pointer(&sums[0])), 64))
			}
		}
	}
	return nil
}

// amxRows runs the AMX kernel on rows [r0, r1) (r0 a multiple of 16) for
// every vector run: the kernel writes 16 vector lanes per row (for M = 1
// one result per row), which are scattered into dst.
func (c *lowCall) amxRows(r0, r1 int, words []uint32) {
	mx, s, dst := c.mx, c.mx.simd, c.dst
	per, mpad, n := amxBatch(c.batch)
	kern := s.amx[mpad]
	lanes := 16
	if mpad == 1 {
		lanes = 1
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
					d[i] = out[lanes*i+v]
				}
			}
		}
	}
}

// bitsAmxFrom is the smallest batch the AMX kernels run, by groups per
// 128 columns: where they measured faster than the AVX-512 kernels on the
// 16-core Xeon (16 threads, 4096x14336; docs/KERNELS.md). Batch 1 streams
// the weights as fast on AVX-512; with groups of 64 and 32 each group's
// own multiplies and scales cost more than AVX-512 spends below 4 and 8
// vectors.
var bitsAmxFrom = map[int]int{1: 2, 2: 4, 4: 8}
