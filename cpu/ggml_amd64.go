//go:build !noasm && !purego

package cpu

import (
	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout/ggml"
)

// The GGML block kernels on AVX-512 (asm/ggml_amd64.s): Q4_K, Q5_K and
// Q6_K with int8 activations. Each call covers a range of rows and every
// vector of the batch; prep lays out each vector's activations (Q4_K,
// Q5_K: per 128 columns [0:32] [64:96] [32:64] [96:128], the order the
// low and high nibbles of a half's code bytes hold) and the int16 sum of
// each sub-block's activations, once per call.

type ggmlA8Func func(w *byte, stride int, rows int, nsb int, act *int8, astride int, sums *int16, sstride int, xs *float32, xstride int, nvec int, out *float32, ostride int)

// ggmlA8Requires is every feature the kernels' instructions need.
var ggmlA8Requires = []string{"AVX", "AVX2", "AVX512F", "AVX512BW", "AVX512VL", "AVX512VNNI", "F16C"}

var ggmlA8Funcs = map[ggml.Type]ggmlA8Func{
	ggml.Q4_K: asm.GgmlQ4KA8Avx512,
	ggml.Q5_K: asm.GgmlQ5KA8Avx512,
	ggml.Q6_K: asm.GgmlQ6KA8Avx512,
}

func init() {
	for t, fn := range ggmlA8Funcs {
		ggmlKernels[t] = func(isa ISA) *ggmlKernel {
			if isa != AVX512VNNI || !hasAll(ggmlA8Requires) {
				return nil
			}
			return &ggmlKernel{isa: isa, prep: ggmlPrepSuper, a8: func(mx *GGMLMatrix, c *ggmlCall, r0, r1 int) {
				m := mx.m
				pc := m.PCols
				if r1 <= r0 {
					return
				}
				sub := m.Type.SubLen()
				fn(&m.Data[r0*m.RowBytes()], m.RowBytes(), r1-r0, m.Blocks(),
					&c.act8[0], pc, &c.sums[0], 2*pc/sub, &c.xs[0], 4*pc/128,
					c.batch, &c.dst[r0], 4*m.Rows)
			}}
		}
	}
}

// ggmlPrepSuper lays out the activations of a 256-element type for its
// kernel: c.act8 (the reordered int8 values, or xq itself) and c.sums
// (one int16 per sub-block).
func ggmlPrepSuper(mx *GGMLMatrix, c *ggmlCall) {
	m := mx.m
	pc, sub := m.PCols, m.Type.SubLen()
	c.sums = growSums(c, c.batch*pc/sub)
	for i := range c.sums {
		var s int16
		for _, v := range c.xq[i*sub : (i+1)*sub] {
			s += int16(v)
		}
		c.sums[i] = s
	}
	if m.Type == ggml.Q6_K {
		c.act8 = c.xq
		return
	}
	c.act8 = growAct(c, c.batch*pc)
	for g := 0; g < c.batch*pc; g += 128 {
		src, dst := c.xq[g:g+128], c.act8[g:g+128]
		copy(dst[0:32], src[0:32])
		copy(dst[32:64], src[64:96])
		copy(dst[64:96], src[32:64])
		copy(dst[96:128], src[96:128])
	}
}

func growSums(c *ggmlCall, n int) []int16 {
	if cap(c.sc.sums16) < n {
		c.sc.sums16 = make([]int16, n)
	}
	return c.sc.sums16[:n]
}

func growAct(c *ggmlCall, n int) []int8 {
	if cap(c.sc.act8) < n {
		c.sc.act8 = make([]int8, n)
	}
	return c.sc.act8[:n]
}
