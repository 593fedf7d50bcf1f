package cpu

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/qgemv/qgemv/layout"
)

// scratch holds the per-call activation buffers; pooled so a steady
// stream of multiplies does not allocate.
type scratch struct {
	xf     []float32
	sumf   []float32
	xq     []int8
	xs     []float32
	sumi   []int32
	act    []byte    // A8 activations in the assembly kernels' layout
	actf   []float32 // A32 activations in the assembly kernels' layout
	act8   []int8    // GGML A8 activations in the assembly kernels' layout
	perm   []int8    // GGML A8 activations in pair order, for the batch kernels' layout
	sums16 []int16   // GGML A8 per-sub-block activation sums
	pairs  []int32   // GGML A8 batch kernels' transposed pair sums
	xsT    []float32 // GGML A8 batch kernels' transposed activation scales
	call   call      // the multiply's state (Q4G128), reused
	ggml   ggmlCall  // the multiply's state (GGML types), reused
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch  { return scratchPool.Get().(*scratch) }
func putScratch(s *scratch) { scratchPool.Put(s) }

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// f32Bufs returns the padded activations and per-group sums of a float32
// multiply.
func (s *scratch) f32Bufs(m *layout.Q4G128, batch int) (xp, xsum []float32) {
	s.xf = grow(s.xf, batch*m.PCols)
	s.sumf = grow(s.sumf, batch*m.Groups())
	return s.xf, s.sumf
}

// int8Bufs returns buffers for batch quantized vectors of pc inputs.
func (s *scratch) int8Bufs(pc, batch int) ([]int8, []float32) {
	s.xq = grow(s.xq, batch*pc)
	s.xs = grow(s.xs, batch*(pc/128))
	return s.xq, s.xs
}

// int32Buf returns the per-group int32 sums buffer.
func (s *scratch) int32Buf(n int) []int32 {
	s.sumi = grow(s.sumi, n)
	return s.sumi
}

// prepareF32 copies groups [g0, g1) of every vector of x into the padded
// c.x (zeros past Cols) and sums each group: the zero-point correction
// term z*sum(x).
func prepareF32(c *call, x []float32, g0, g1 int) {
	m := c.m
	pc, cols, g := m.PCols, m.Cols, m.Groups()
	for b := 0; b < c.batch; b++ {
		xb := x[b*cols : (b+1)*cols]
		for j := g0; j < g1; j++ {
			dst := c.x[b*pc+j*128 : b*pc+j*128+128]
			n := 0
			if j*128 < cols {
				n = copy(dst, xb[j*128:min(cols, j*128+128)])
			}
			clear(dst[n:])
			var acc float32
			for _, v := range dst {
				acc += v
			}
			c.xsum[b*g+j] = acc
		}
	}
}

// quantizeA8 quantizes groups [g0, g1) of every vector of x into c.xq,
// c.xs (layout.QuantizeA8, group by group).
func quantizeA8(c *call, x []float32, g0, g1 int) error {
	m := c.m
	pc, cols, g := m.PCols, m.Cols, m.Groups()
	for b := 0; b < c.batch; b++ {
		lo, hi := min(cols, g0*128), min(cols, g1*128)
		err := QuantizeA8(c.xq[b*pc+g0*128:b*pc+g1*128], c.xs[b*g+g0:b*g+g1], x[b*cols+lo:b*cols+hi])
		if err != nil {
			return fmt.Errorf("cpu: vector %d, from input %d: %w", b, lo, err)
		}
	}
	return nil
}

// prepareI8 sums groups [g0, g1) of the quantized activations.
func prepareI8(c *call, g0, g1 int) {
	g := c.m.Groups()
	for b := 0; b < c.batch; b++ {
		for j := g0; j < g1; j++ {
			i := b*g + j
			c.isum[i] = sumInt8(c.xq[i*128 : i*128+128])
		}
	}
}

// sumInt8 returns the sum of x (len(x) a multiple of 8, at most 1024)
// eight bytes at a time: each byte biased by 128 to unsigned, pairs added
// into four 16-bit lanes (at most 128 words: 510*128 < 2^16).
func sumInt8(x []int8) int32 {
	const lo = 0x00ff00ff00ff00ff
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
	var acc uint64
	for i := 0; i+8 <= len(b); i += 8 {
		u := binary.LittleEndian.Uint64(b[i:]) ^ 0x8080808080808080
		acc += u&lo + (u>>8)&lo
	}
	s := int32(acc&0xffff + acc>>16&0xffff + acc>>32&0xffff + acc>>48)
	return s - 128*int32(len(b)&^7)
}

// splitEvenOdd writes the even bytes of src (64 of them) to even and the
// odd ones to odd, eight source bytes at a time.
func splitEvenOdd(even, odd []byte, src []int8) {
	const lo = 0x00ff00ff00ff00ff
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), 128)
	even, odd = even[:64], odd[:64]
	for i := 0; i < 16; i++ {
		u := binary.LittleEndian.Uint64(b[8*i:])
		binary.LittleEndian.PutUint32(even[4*i:], pack4(u&lo))
		binary.LittleEndian.PutUint32(odd[4*i:], pack4(u>>8&lo))
	}
}

// pack4 packs the low bytes of u's four 16-bit lanes into 32 bits.
func pack4(u uint64) uint32 {
	u = (u | u>>8) & 0x0000ffff0000ffff
	return uint32(u | u>>16)
}
