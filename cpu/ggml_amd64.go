//go:build !noasm && !purego

package cpu

import (
	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout/ggml"
)

// The GGML block kernels on AVX-512 (asm/ggml_amd64.s): the super-block
// types with int8 activations. Each call covers a range of rows and every
// vector of the batch; prep lays out each vector's activations once per
// call (ggmlActOrder: the column order of the kernel's code bytes) and
// the int16 sum of each sub-block's activations.

type ggmlA8Func func(w *byte, stride int, rows int, nsb int, act *int8, astride int, sums *int16, sstride int, xs *float32, xstride int, nvec int, out *float32, ostride int)

// ggmlA8Requires is every feature the kernels' instructions need.
var ggmlA8Requires = []string{"AVX", "AVX2", "AVX512F", "AVX512BW", "AVX512VL", "AVX512VNNI", "BMI2", "F16C"}

var ggmlA8Funcs = map[ggml.Type]ggmlA8Func{
	ggml.Q2_K:   asm.GgmlQ2KA8Avx512,
	ggml.Q3_K:   asm.GgmlQ3KA8Avx512,
	ggml.Q4_K:   asm.GgmlQ4KA8Avx512,
	ggml.Q5_K:   asm.GgmlQ5KA8Avx512,
	ggml.Q6_K:   asm.GgmlQ6KA8Avx512,
	ggml.IQ4_XS: asm.GgmlIQ4XSA8Avx512,
	ggml.Q4_0:   asm.GgmlQ40A8Avx512,
	ggml.Q4_1:   asm.GgmlQ41A8Avx512,
	ggml.Q5_0:   asm.GgmlQ50A8Avx512,
	ggml.Q5_1:   asm.GgmlQ51A8Avx512,
	ggml.Q8_0:   asm.GgmlQ80A8Avx512,
	ggml.IQ4_NL: asm.GgmlIQ4NLA8Avx512,
}

// ggmlActOrder gives, for each type whose kernel reads the activations of
// every 128 columns in another order, the source offsets of its 16-byte
// runs (nil: column order).
var ggmlActOrder = map[ggml.Type][8]int{
	ggml.Q4_K:   {0, 16, 64, 80, 32, 48, 96, 112},
	ggml.Q5_K:   {0, 16, 64, 80, 32, 48, 96, 112},
	ggml.IQ4_XS: {0, 32, 64, 96, 16, 48, 80, 112},
}

func init() {
	for t, fn := range ggmlA8Funcs {
		ggmlKernels[t] = func(isa ISA) *ggmlKernel {
			if isa != AVX512VNNI || !hasAll(ggmlA8Requires) {
				return nil
			}
			return &ggmlKernel{isa: isa, prep: ggmlPrep, a8: func(mx *GGMLMatrix, c *ggmlCall, r0, r1 int) {
				m := mx.m
				pc := m.PCols
				if r1 <= r0 {
					return
				}
				sub := m.Type.SubLen()
				// nsb: super-blocks, or groups of four 32-element blocks
				fn(&m.Data[r0*m.RowBytes()], m.RowBytes(), r1-r0, pc/max(m.Type.BlockElems(), 128),
					&c.act8[0], pc, &c.sums[0], 2*pc/sub, &c.xs[0], 4*pc/128,
					c.batch, &c.dst[r0], 4*m.Rows)
			}}
		}
	}
}

// ggmlPrep lays out the activations for a type's kernel: c.act8 (the
// reordered int8 values, or xq itself) and c.sums (one int16 per
// sub-block, or per 32-element block).
func ggmlPrep(mx *GGMLMatrix, c *ggmlCall) {
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
	order, ok := ggmlActOrder[m.Type]
	if !ok {
		c.act8 = c.xq
		return
	}
	c.act8 = growAct(c, c.batch*pc)
	for g := 0; g < c.batch*pc; g += 128 {
		src, dst := c.xq[g:g+128], c.act8[g:g+128]
		for i, o := range order {
			copy(dst[16*i:16*i+16], src[o:o+16])
		}
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
