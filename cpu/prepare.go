package cpu

import (
	"sync"

	"github.com/qgemv/qgemv/layout"
)

// scratch holds the per-call activation buffers; pooled so a steady
// stream of multiplies does not allocate.
type scratch struct {
	xf   []float32
	sumf []float32
	xq   []int8
	xs   []float32
	sumi []int32
	act  []byte    // A8 activations in the assembly kernels' layout
	actf []float32 // A32 activations in the assembly kernels' layout
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

// prepareF32 pads each vector to PCols with zeros and computes the sum of
// every 128-input group: the zero-point correction term z*sum(x).
func (s *scratch) prepareF32(m *layout.Q4G128, x []float32, batch int) (xp, xsum []float32) {
	pc, g := m.PCols, m.Groups()
	s.xf = grow(s.xf, batch*pc)
	s.sumf = grow(s.sumf, batch*g)
	for b := 0; b < batch; b++ {
		dst := s.xf[b*pc : (b+1)*pc]
		n := copy(dst, x[b*m.Cols:(b+1)*m.Cols])
		clear(dst[n:])
		for j := 0; j < g; j++ {
			var acc float32
			for _, v := range dst[j*128 : j*128+128] {
				acc += v
			}
			s.sumf[b*g+j] = acc
		}
	}
	return s.xf, s.sumf
}

// int8Bufs returns buffers for batch quantized vectors of pc inputs.
func (s *scratch) int8Bufs(pc, batch int) ([]int8, []float32) {
	s.xq = grow(s.xq, batch*pc)
	s.xs = grow(s.xs, batch*(pc/128))
	return s.xq, s.xs
}

// prepareI8 computes the per-group sums of the quantized activations.
func (s *scratch) prepareI8(m *layout.Q4G128, xq []int8, batch int) []int32 {
	g := m.Groups()
	s.sumi = grow(s.sumi, batch*g)
	for i := range s.sumi {
		var acc int32
		for _, v := range xq[i*128 : i*128+128] {
			acc += int32(v)
		}
		s.sumi[i] = acc
	}
	return s.sumi
}
