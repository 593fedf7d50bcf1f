package gpuhost

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/qgemv/qgemv/layout"
)

// MMA activation order. The tensor-core kernels (cuda/kernels.cu q4mma
// and bitsmma; opencl/gemv.cl q4_mma and bits_mma) multiply 16 rows by
// 8 (or 16) binary16 activation columns with mma.m16n8k16. Each lane
// turns its own weight bytes into A fragments, so the K order of a
// fragment is a permutation of the columns, and the activations are
// stored in the order the lanes read their B fragments (256 contiguous
// bytes per fragment load):
//
//   - Q4G128: for group gg, k-step s (word s/2 of the lane's 16 bytes,
//     byte pair s%2), column v < nv and lane column t < 4, the four
//     binary16 values at ((gg*8 + s)*nv + v)*4 + t (in units of four)
//     are columns c, c+4, c+1, c+5 (s even) or c+2, c+6, c+3, c+7 (s odd)
//     of vector v, c = gg*128 + 32t + 8(s/2).
//   - Bits(n, g), n in {8, 4, 2}, g >= 128: for chunk k (E = 1024/n
//     columns), word jj < 8, 128-column block q < E/128, column v and
//     lane column t, the four values at (((k*8 + jj)*E/128 + q)*nv + v)*4
//   - t are the columns of the k-step's two code pairs in word 8t+jj
//     (planes 4q+3, 4q+1, 4q+2, 4q for n = 4 and 2; 3, 2, 1, 0 for n = 8).
//
// MMAOrder returns the activations xp (nv vectors of pc padded columns,
// the first batch of them used; the rest must be zero) in that order.
// n is 0 for Q4G128, else the Bits width. For Bits it also returns the
// float32 sums of each vector's 128-column blocks (nv*pc/128 values),
// which the kernels need for the zero points; for Q4G128 the zeros are
// subtracted inside the fragments and xsum is nil.
func MMAOrder(n int, xp []layout.FP16, batch, pc, nv int) (xr []layout.FP16, xsum []float32, err error) {
	xr = make([]layout.FP16, len(xp))
	if n != 0 && pc%128 == 0 {
		xsum = make([]float32, nv*(pc/128))
	}
	if err := MMAOrderInto(xr, xsum, n, xp, batch, pc, nv); err != nil {
		return nil, nil, err
	}
	return xr, xsum, nil
}

// MMAOrderInto is MMAOrder into xr (nv*pc values) and, for Bits, xsum
// (nv*pc/128 values; nil for Q4G128), which it overwrites.
func MMAOrderInto(xr []layout.FP16, xsum []float32, n int, xp []layout.FP16, batch, pc, nv int) error {
	if pc%128 != 0 || batch > nv || len(xp) != nv*pc || len(xr) != nv*pc || n != 0 && len(xsum) != nv*(pc/128) {
		return fmt.Errorf("gpuhost: MMAOrder: %d columns, batch %d, %d vectors, %d values into %d and %d: want PCols a multiple of the chunk and nv*PCols values",
			pc, batch, nv, len(xp), len(xr), len(xsum))
	}
	idx, err := mmaIndex(n, pc)
	if err != nil {
		return err
	}
	clear(xr)
	for v := 0; v < batch; v++ {
		src := xp[v*pc : (v+1)*pc]
		for u := 0; u < pc/16; u++ {
			d, s := xr[(u*nv+v)*16:][:16], idx[u*16:][:16]
			for k, c := range s {
				d[k] = src[c]
			}
		}
	}
	if n == 0 {
		return nil
	}
	for v := 0; v < batch; v++ {
		src := xp[v*pc : (v+1)*pc]
		for b := range pc / 128 {
			sum := float32(0)
			for _, h := range src[b*128:][:128] {
				f, ok := fastF32(h)
				if !ok {
					f = h.Float32()
				}
				sum += f
			}
			xsum[v*(pc/128)+b] = sum
		}
	}
	clear(xsum[batch*(pc/128):])
	return nil
}

// MMAIndex returns the MMA order of one vector: position u*16 + k (16
// values per fragment load u) holds column MMAIndex[u*16+k]; with nv
// vectors, vector v's value of that position lies at (u*nv + v)*16 + k.
// n is 0 for Q4G128, else the Bits width (8, 4 or 2; pc whole chunks).
// The slice is the caller's.
func MMAIndex(n, pc int) ([]int32, error) {
	idx, err := mmaIndex(n, pc)
	return slices.Clone(idx), err
}

// mmaIndexes holds the orders made so far, by code width and columns:
// MMAOrder runs on every multiply of the host-prepared paths.
var (
	mmaIndexMu sync.RWMutex
	mmaIndexes = map[[2]int][]int32{}
)

// mmaIndex is MMAIndex, made once per width and column count and shared
// (read only).
func mmaIndex(n, pc int) ([]int32, error) {
	key := [2]int{n, pc}
	mmaIndexMu.RLock()
	idx, ok := mmaIndexes[key]
	mmaIndexMu.RUnlock()
	if ok {
		return idx, nil
	}
	idx, err := buildMMAIndex(n, pc)
	if err != nil {
		return nil, err
	}
	mmaIndexMu.Lock()
	mmaIndexes[key] = idx
	mmaIndexMu.Unlock()
	return idx, nil
}

// buildMMAIndex computes MMAIndex.
func buildMMAIndex(n, pc int) ([]int32, error) {
	if pc%128 != 0 {
		return nil, fmt.Errorf("gpuhost: MMAIndex: %d columns are not whole 128-column groups", pc)
	}
	idx := make([]int32, pc)
	put4 := func(u, t, c0 int, cols [4]int) {
		for i, c := range cols {
			idx[u*16+t*4+i] = int32(c0 + c)
		}
	}
	if n == 0 {
		for gg := 0; gg < pc/128; gg++ {
			for st := 0; st < 8; st++ {
				cols := [4]int{0, 4, 1, 5}
				if st%2 == 1 {
					cols = [4]int{2, 6, 3, 7}
				}
				for t := 0; t < 4; t++ {
					put4(gg*8+st, t, gg*128+32*t+8*(st/2), cols)
				}
			}
		}
		return idx, nil
	}
	if n != 8 && n != 4 && n != 2 {
		return nil, fmt.Errorf("gpuhost: MMAOrder: %d-bit codes have no tensor-core kernel", n)
	}
	e := 32 * (32 / n)
	if pc%e != 0 {
		return nil, fmt.Errorf("gpuhost: MMAOrder: %d columns are not whole %d-column chunks", pc, e)
	}
	gpc := e / 128
	for k := 0; k < pc/e; k++ {
		for jj := 0; jj < 8; jj++ {
			for q := 0; q < gpc; q++ {
				planes := [4]int{4*q + 3, 4*q + 1, 4*q + 2, 4 * q}
				if n == 8 {
					planes = [4]int{3, 2, 1, 0}
				}
				for t := 0; t < 4; t++ {
					put4((k*8+jj)*gpc+q, t, k*e+8*t+jj, [4]int{32 * planes[0], 32 * planes[1], 32 * planes[2], 32 * planes[3]})
				}
			}
		}
	}
	return idx, nil
}

// SplitHiLo splits float32 activations (batch vectors of pc values,
// already padded and gathered) into binary16 pairs for the tensor-core
// kernels: vector v becomes columns 2v (hi) and 2v+1 (lo) of the nv
// returned vectors, with sigma_v*x = hi + lo + d, sigma_v a power of two
// that puts max|x_v| in [2^14, 2^15) and |d| <= 2^-22 |sigma_v x| for
// every value whose lo part is a normal binary16 (smaller ones are off by
// at most 2^-25 absolute, i.e. 2^-39 of the vector's largest value). The
// products of 4-bit codes with hi and lo are exact, so a kernel that adds
// the two columns' float32 sums and scales by inv[v] = 1/sigma_v meets
// the float32 error bounds. ok is false when a vector holds NaN or an
// infinity, or its largest value is outside [2^-85, 2^115) (where the
// scaling would leave binary16's range; ScaleVectors brings such vectors
// back first): the caller then runs its float32 kernels, which propagate
// NaN and infinities as the reference does.
func SplitHiLo(x []float32, batch, pc, nv int) (xp []layout.FP16, inv []float32, ok bool) {
	if 2*batch > nv || len(x) < batch*pc {
		return nil, nil, false
	}
	xp, inv = make([]layout.FP16, nv*pc), make([]float32, batch)
	if !SplitHiLoInto(xp, inv, x, batch, pc, nv) {
		return nil, nil, false
	}
	return xp, inv, true
}

// SplitHiLoInto is SplitHiLo into xp (nv*pc values, overwritten) and inv
// (batch values).
func SplitHiLoInto(xp []layout.FP16, inv []float32, x []float32, batch, pc, nv int) (ok bool) {
	if 2*batch > nv || len(x) < batch*pc || len(xp) != nv*pc || len(inv) < batch {
		return false
	}
	clear(xp[2*batch*pc:])
	for v := 0; v < batch; v++ {
		src := x[v*pc : (v+1)*pc]
		mb := maxAbsBits(src)
		if mb >= 0x7f800000 { // NaN or an infinity
			return false
		}
		m := math.Float32frombits(mb)
		e := 0
		if m > 0 {
			_, e = math.Frexp(float64(m)) // m in [2^(e-1), 2^e)
		}
		sh := 15 - e
		if sh < -100 || sh > 100 {
			// Beyond what one power-of-two scaling handles here (max|x|
			// below about 2^-85 or from 2^116): the float32 kernels run.
			return false
		}
		sigma := float32(math.Ldexp(1, sh))
		inv[v] = float32(math.Ldexp(1, -sh))
		hi, lo := xp[2*v*pc:(2*v+1)*pc], xp[(2*v+1)*pc:(2*v+2)*pc]
		hi, lo = hi[:len(src)], lo[:len(src)]
		for c, f := range src {
			s := float32(f * sigma)
			h, ok := fastFP16(s)
			if !ok {
				h = layout.ToFP16(s)
			}
			hf, ok := fastF32(h)
			if !ok {
				hf = h.Float32()
			}
			l, ok := fastFP16(s - hf)
			if !ok {
				l = layout.ToFP16(s - hf)
			}
			hi[c], lo[c] = h, l
		}
	}
	return true
}

// fastFP16 is layout.ToFP16 for results in the normal binary16 range
// (ok), without branches on the data: adding 0xfff plus the kept lowest
// bit before the shift rounds to nearest even, carrying into the
// exponent up to infinity. A mispredicted rounding branch cost more than
// the whole conversion in the split.
func fastFP16(f float32) (h layout.FP16, ok bool) {
	b := math.Float32bits(f)
	m := b & 0x7fffffff
	return layout.FP16(uint32(b>>16)&0x8000 | ((m+0xfff+m>>13&1)>>13 - 112<<10)), m>>23-113 <= 142-113
}

// fastF32 is FP16.Float32 for normal values (ok).
func fastF32(h layout.FP16) (float32, bool) {
	return math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + 112<<23)), h>>10&0x1f-1 < 30
}

// maxAbsBits returns the largest magnitude's bits among x: for finite
// values the bits of |x| order as the values do, and NaN and infinities
// give at least 0x7f800000.
func maxAbsBits(x []float32) uint32 {
	m := uint32(0)
	for _, f := range x {
		m = max(m, math.Float32bits(f)&0x7fffffff)
	}
	return m
}

// ScaleVectors scales each of the batch vectors of n values in x (in
// place) by a power of two 2^-e_v when its largest magnitude m is outside
// [2^-60, 2^60]: up to [0.5, 1) when m is smaller, down to [2^59, 2^60)
// when it is larger (no further, so that the vector's small values stay
// normal floats), and returns the exponents e_v to scale the results
// back by (nil when no vector was scaled; 0 for those left alone). The
// float kernels scale activations further (by up to 2^-12 to meet packed
// codes, into binary16 for tensor cores), so activations far from 1 lost
// bits as subnormals or overflowed before; scaling by a power of two is
// exact, and so is undoing it on the results (barring their own
// overflow). Vectors holding NaN or an infinity are left alone.
func ScaleVectors(x []float32, batch, n int) []int {
	var back []int
	for v := 0; v < batch; v++ {
		src := x[v*n : (v+1)*n]
		mb := maxAbsBits(src)
		m := math.Float32frombits(mb)
		if mb >= 0x7f800000 { // NaN or an infinity: not scaled
			continue
		}
		if m == 0 || m >= 0x1p-60 && m <= 0x1p60 {
			continue
		}
		_, e := math.Frexp(float64(m)) // m in [2^(e-1), 2^e); e is 128 for m >= 2^127
		if m > 1 {
			e -= 60
		}
		if back == nil {
			back = make([]int, batch)
		}
		back[v] = e
		for i, f := range src {
			src[i] = float32(math.Ldexp(float64(f), -e))
		}
	}
	return back
}

// MulScaled runs mul, a float multiply of the batch vectors of n values
// in x into the batch result vectors of rows values in dst, on vectors
// brought near 1 by ScaleVectors (in place: x is the caller's padded
// copy), and scales the results back with UnscaleResults; the GPU float
// paths take activations far from 1 this way.
func MulScaled(dst, x []float32, batch, n, rows int, mul func() error) error {
	back := ScaleVectors(x, batch, n)
	if err := mul(); err != nil {
		return err
	}
	UnscaleResults(dst, batch, rows, back)
	return nil
}

// UnscaleResults multiplies each of the batch result vectors of rows
// values in y by 2^e, e its exponent from ScaleVectors (nil: nothing to
// do), in float64, so that the factor itself (2^128 for the largest
// float32s) cannot overflow.
func UnscaleResults(y []float32, batch, rows int, back []int) {
	if back == nil {
		return
	}
	for v := 0; v < batch; v++ {
		if e := back[v]; e != 0 {
			for r, t := range y[v*rows : (v+1)*rows] {
				y[v*rows+r] = float32(math.Ldexp(float64(t), e))
			}
		}
	}
}

// A8FragOrder returns the int8 fragment order of the A8 tensor-core
// kernels (cuda/kernels.cu a8mma, mma.m16n8k32 with unsigned codes and
// signed activations) for one step of e columns: a 128-column group for
// Q4G128 (n = 0), a chunk of 1024/n columns for Bits(n, g) (n = 8, 4, 2,
// g >= 128). Position q*128 + 32t + 8s + b of a step holds the column
// (within the step) that byte b of lane column t's k-step s of block q
// multiplies: bytes 0..3 are the lane's first four codes of the k-step
// (a0), bytes 4..7 its second four (a2).
//
//   - Q4G128: word s of the lane's 16 bytes, low nibbles (even columns)
//     then high (odd): 32t + 8s + 2b (b < 4), 32t + 8s + 2(b-4) + 1.
//   - Bits8: word 8t + 2s + b/4, byte b%4 = plane 3 - b%4.
//   - Bits4: word 8t + 2s + b/4; the nibbles of the byte pairs give planes
//     3, 1, 2, 0 (q = 0) or 7, 5, 6, 4 (q = 1).
//   - Bits2: words 8t + 4(s/2) + b%4; 2-bit field f = 2(s%2) + b/4 of
//     their byte 3-q, plane 4q + 3 - f.
//
// Column of word w, plane i: 32i + w. The slice is the caller's.
func A8FragOrder(n int) ([]int32, error) {
	e := 128
	switch n {
	case 0:
	case 8, 4, 2:
		e = 1024 / n
	default:
		return nil, fmt.Errorf("gpuhost: A8FragOrder: no int8 tensor-core order for %d-bit codes (want 0 for Q4G128, 8, 4 or 2)", n)
	}
	idx := make([]int32, e)
	for q := range e / 128 {
		for t := range 4 {
			for s := range 4 {
				for b := range 8 {
					half, bb := b/4, b%4
					var c int
					switch n {
					case 0:
						c = 32*t + 8*s + 2*bb + half
					case 8:
						c = 32*(3-bb) + 8*t + 2*s + half
					case 4:
						plane := [2][4]int{{3, 1, 2, 0}, {7, 5, 6, 4}}[q][bb]
						c = 32*plane + 8*t + 2*s + half
					case 2:
						f := 2*(s%2) + half
						c = 32*(4*q+3-f) + 8*t + 4*(s/2) + bb
					}
					idx[q*128+32*t+8*s+b] = int32(c)
				}
			}
		}
	}
	return idx, nil
}
