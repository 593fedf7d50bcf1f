package cpu

import "github.com/qgemv/qgemv/layout"

// The generic kernels: pure Go, always compiled, the oracle for the
// assembly. Each computes rows [r0, r1) for all batch vectors, loading
// every weight byte once for all of them.
//
// Inputs are the per-call prepared activations (see prepare.go):
//   - A32: x is batch*PCols float32 (zero padded), xsum is batch*Groups
//     with xsum[m*G+g] = sum of x over group g of vector m.
//   - A8: xq is batch*PCols int8, xs batch*Groups scales, isum
//     batch*Groups int32 sums of xq per group.
//
// dst is batch*Rows float32, vector m's output at dst[m*Rows:].

// a32Generic is the float32-activation kernel.
func a32Generic(m *layout.Q4G128, x, xsum, dst []float32, batch, r0, r1 int) {
	pc, groups, rows := m.PCols, m.Groups(), m.Rows
	var dot [maxBatch]float32
	var acc [maxBatch]float32
	for r := r0; r < r1; r++ {
		wrow := m.Weights[r*pc/2 : (r+1)*pc/2]
		clear(acc[:batch])
		for g := 0; g < groups; g++ {
			wg := wrow[g*64 : g*64+64]
			mi := m.MetaIndex(r, g)
			s := m.Scales[mi]
			z := float32(m.Zeros[mi>>1] >> (4 * (mi & 1)) & 15)
			if batch == 1 {
				dot[0] = dotF32(wg, x[g*128:g*128+128])
			} else {
				dotF32Batch(wg, x, g*128, pc, dot[:batch])
			}
			for b := 0; b < batch; b++ {
				acc[b] += s * (dot[b] - z*xsum[b*groups+g])
			}
		}
		for b := 0; b < batch; b++ {
			dst[b*rows+r] = acc[b]
		}
	}
}

// dotF32 returns sum_j q_j * x_j over one group of 128 columns.
func dotF32(w []byte, x []float32) float32 {
	w = w[:64]
	x = x[:128]
	var s0, s1, s2, s3 float32
	for j := 0; j < 64; j += 2 {
		b0, b1 := w[j], w[j+1]
		s0 += float32(b0&15) * x[2*j]
		s1 += float32(b0>>4) * x[2*j+1]
		s2 += float32(b1&15) * x[2*j+2]
		s3 += float32(b1>>4) * x[2*j+3]
	}
	return (s0 + s1) + (s2 + s3)
}

// dotF32Batch computes dot[b] = sum_j q_j * x[b*pc+off+j] for every vector.
func dotF32Batch(w []byte, x []float32, off, pc int, dot []float32) {
	w = w[:64]
	clear(dot)
	for j := 0; j < 64; j++ {
		lo, hi := float32(w[j]&15), float32(w[j]>>4)
		i := off + 2*j
		for b := range dot {
			xb := x[b*pc+i : b*pc+i+2]
			dot[b] += lo*xb[0] + hi*xb[1]
		}
	}
}

// a8Generic is the int8-activation kernel. Its result is bit-exact with
// layout.(*Q4G128).DotA8Exact.
func a8Generic(m *layout.Q4G128, xq []int8, xs []float32, isum []int32, dst []float32, batch, r0, r1 int) {
	pc, groups, rows := m.PCols, m.Groups(), m.Rows
	var dot [maxBatch]int32
	var acc [maxBatch]float32
	for r := r0; r < r1; r++ {
		wrow := m.Weights[r*pc/2 : (r+1)*pc/2]
		clear(acc[:batch])
		for g := 0; g < groups; g++ {
			wg := wrow[g*64 : g*64+64]
			mi := m.MetaIndex(r, g)
			s := m.Scales[mi]
			z := int32(m.Zeros[mi>>1] >> (4 * (mi & 1)) & 15)
			if batch == 1 {
				dot[0] = dotI8(wg, xq[g*128:g*128+128])
			} else {
				dotI8Batch(wg, xq, g*128, pc, dot[:batch])
			}
			for b := 0; b < batch; b++ {
				f := float32(s * xs[b*groups+g])
				acc[b] = float32(acc[b] + float32(f*float32(dot[b]-z*isum[b*groups+g])))
			}
		}
		for b := 0; b < batch; b++ {
			dst[b*rows+r] = acc[b]
		}
	}
}

// dotI8 returns sum_j q_j * xq_j over one group of 128 columns.
func dotI8(w []byte, x []int8) int32 {
	w = w[:64]
	x = x[:128]
	var s0, s1 int32
	for j := 0; j < 64; j += 2 {
		b0, b1 := w[j], w[j+1]
		s0 += int32(b0&15)*int32(x[2*j]) + int32(b0>>4)*int32(x[2*j+1])
		s1 += int32(b1&15)*int32(x[2*j+2]) + int32(b1>>4)*int32(x[2*j+3])
	}
	return s0 + s1
}

// dotI8Batch computes dot[b] = sum_j q_j * xq[b*pc+off+j] for every vector.
func dotI8Batch(w []byte, x []int8, off, pc int, dot []int32) {
	w = w[:64]
	clear(dot)
	for j := 0; j < 64; j++ {
		lo, hi := int32(w[j]&15), int32(w[j]>>4)
		i := off + 2*j
		for b := range dot {
			xb := x[b*pc+i : b*pc+i+2]
			dot[b] += lo*int32(xb[0]) + hi*int32(xb[1])
		}
	}
}
