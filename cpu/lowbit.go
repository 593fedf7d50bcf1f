package cpu

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
)

// LowMatrix is a Bits or Sparse12 matrix bound to a CPU backend. Its
// kernels are the generic Go ones (the oracle for future assembly): each
// row is decoded once and used for every vector of the batch.
type LowMatrix struct {
	b      *Backend
	bits   *layout.Bits
	sp     *layout.Sparse12
	rows   int
	cols   int
	pcols  int
	g      int // group size
	groups int
	closed bool
	mu     sync.RWMutex
	simd   *bitsSIMD // the assembly A8 kernel's state, if it applies
	a32    *bitsA32  // the assembly A32/A16 kernel's state, if it applies
	sa32   *sparseA32
	intErr error // why A8 is impossible (fractional zeros), checked at load
	block  *hugemem.Block
	code   *ans.Bits // entropy-coded words (bits is its header), or nil
	// ansKern is code's SIMD decoder, or nil (the generic one).
	ansKern *ansBitsDecoder
}

// hugeWords copies words into huge-page memory (HugePages backends).
func hugeWords(words []uint32) ([]uint32, *hugemem.Block) {
	if len(words) == 0 {
		return words, hugemem.Alloc(0)
	}
	c, blk := newWords(len(words), true)
	copy(c, words)
	return c, blk
}

// newWords returns n > 0 zeroed words: in huge-page memory, with its
// block, when huge; else on the Go heap (nil block).
func newWords(n int, huge bool) ([]uint32, *hugemem.Block) {
	if !huge {
		return make([]uint32, n), nil
	}
	blk := hugemem.Alloc(4 * n)
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(blk.Bytes))), n), blk
}

func init() {
	registerLoader(layout.FormatBits, func(b *Backend, m layout.Matrix) (Mat, error) {
		return bind(b.LoadBits(m.(*layout.Bits)))
	})
	registerLoader(layout.FormatSparse12, func(b *Backend, m layout.Matrix) (Mat, error) {
		return bind(b.LoadSparse12(m.(*layout.Sparse12)))
	})
}

// MulI32 returns an error: Bits and Sparse12 have scales.
func (mx *LowMatrix) MulI32([]int32, []int8, int) error { return noInt32("Bits/Sparse12") }

// LoadBits validates m and binds it to the backend (used in place, or its
// weights copied into huge-page memory with HugePages).
func (b *Backend) LoadBits(m *layout.Bits) (*LowMatrix, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	var blk *hugemem.Block
	c := *m // a snapshot of the fields, as Load takes
	if b.huge {
		c.Words, blk = hugeWords(m.Words)
	}
	m = &c
	return &LowMatrix{block: blk, b: b, bits: m, rows: m.Rows, cols: m.Cols, pcols: m.PCols, g: m.G, groups: m.Groups(),
		simd: newBitsSIMD(b, m), a32: newBitsA32(b, m), intErr: m.IntegerZeros()}, nil
}

// LoadSparse12 validates m and binds it to the backend (used in place, or
// its weights copied into huge-page memory with HugePages).
func (b *Backend) LoadSparse12(m *layout.Sparse12) (*LowMatrix, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	var blk *hugemem.Block
	c := *m // a snapshot of the fields, as Load takes
	if b.huge {
		c.Words, blk = hugeWords(m.Words)
	}
	m = &c
	return &LowMatrix{block: blk, b: b, sp: m, rows: m.Rows, cols: m.Cols, pcols: m.PCols, g: m.G, groups: m.Groups(),
		simd: newSparseSIMD(b, m), sa32: newSparseA32(b, m), intErr: m.IntegerZeros()}, nil
}

// Kernel names the kernels the matrix runs: generic Go, and for Bits with
// 8/4/2/1 bits and Sparse12, groups of at least 128 columns, the AVX-512
// kernels for int8 activations ("cpu-avx512vnni-a8+generic").
func (mx *LowMatrix) Kernel() string {
	float := mx.a32 != nil || mx.sa32 != nil
	var k string
	switch {
	case mx.simd != nil && float:
		k = "cpu-" + string(mx.b.set.isa)
	case mx.simd != nil:
		k = mx.simd.kernelName()
	case float:
		k = "cpu-" + string(mx.b.set.isa) + "-a32+generic"
	default:
		k = "cpu-" + string(Generic)
	}
	if mx.code != nil {
		return mx.codedKernel(k)
	}
	return k
}

// Close releases the matrix; later multiplies return ErrClosed.
func (mx *LowMatrix) Close() error {
	mx.mu.Lock()
	defer mx.mu.Unlock()
	if mx.closed {
		return ErrClosed
	}
	mx.closed = true
	if mx.block != nil {
		mx.block.Free()
	}
	mx.freeKernels()
	return nil
}

func (mx *LowMatrix) check(dstLen, xLen, batch, xPer int) error {
	if mx.closed {
		return ErrClosed
	}
	if batch < 1 || batch > maxBatch {
		return fmt.Errorf("%w (got %d)", ErrBatch, batch)
	}
	if err := checkLen("x", xLen, batch, xPer); err != nil {
		return err
	}
	return checkLen("dst", dstLen, batch, mx.rows)
}

// rowCodes unpacks a row's words into q (PCols codes; for Sparse12 the
// dropped column of each pair gets code 0 and keep[c] false).
func (mx *LowMatrix) rowCodes(words []uint32, q []uint8, keep []bool) {
	if b := mx.bits; b != nil {
		// Plane by plane: element i of the 32 words of a chunk are 32
		// consecutive columns, so reads and writes are both sequential.
		n := uint(b.N)
		step := 32 / b.N
		mask := uint32(1)<<n - 1
		words = words[:b.WordsPerRow()]
		for k := 0; k < len(words)/32; k++ {
			chunk := words[k*32 : k*32+32]
			for i := 0; i < step; i++ {
				sh := 32 - n*uint(i+1)
				dst := q[(k*step+i)*32 : (k*step+i)*32+32]
				for t, w := range chunk {
					dst[t] = uint8(w >> sh & mask)
				}
			}
		}
		return
	}
	words = words[:mx.sp.WordsPerRow()]
	for wi, w := range words {
		k, t := wi/32, wi%32
		for i := 0; i < 4; i++ {
			p := (k*4+i)*32 + t
			by := w >> (24 - 8*uint(i)) & 255
			pos := int(by >> 7)
			q[2*p+pos], q[2*p+1-pos] = uint8(by&127), 0
			keep[2*p+pos], keep[2*p+1-pos] = true, false
		}
	}
}

// meta returns the scale and integer zero point of (r, g) (A8 paths).
func (mx *LowMatrix) meta(r, g int) (float32, float32) {
	if mx.bits != nil {
		return mx.bits.Scale(r, g), mx.bits.Zero(r, g)
	}
	return mx.sp.Scale(r, g), mx.sp.Zero(r, g)
}

// affine returns s and m with w = q*s - m (float paths).
func (mx *LowMatrix) affine(r, g int) (float32, float32) {
	if mx.bits != nil {
		return mx.bits.Affine(r, g)
	}
	return mx.sp.Affine(r, g)
}

// actOrder reports whether the matrix stores its columns permuted (an
// imported act-order matrix), so that gather permutes instead of copying.
func (mx *LowMatrix) actOrder() bool { return mx.bits != nil && mx.bits.Perm != nil }

// gather writes the Cols activations of x into dst in stored column order
// (the act-order permutation of an imported matrix, else a copy).
func (mx *LowMatrix) gather(dst, x []float32) {
	if mx.bits != nil {
		mx.bits.Gather(dst, x)
		return
	}
	copy(dst[:mx.cols], x[:mx.cols])
}

// lowScratch is one goroutine's decoded row.
type lowScratch struct {
	q    []uint8
	keep []bool
}

var lowPool = sync.Pool{New: func() any { return new(lowScratch) }}

func (mx *LowMatrix) rowsParallel(fn func(r0, r1 int, words []uint32, s *lowScratch)) error {
	rowBytes := int(mx.streamBytes() / int64(max(1, mx.rows)))
	return mx.rowWords(rowBytes, func(r0, r1 int, words []uint32) {
		s := lowPool.Get().(*lowScratch)
		s.q, s.keep = grow(s.q, mx.pcols), grow(s.keep, mx.pcols)
		for i := range s.keep {
			s.keep[i] = true
		}
		fn(r0, r1, words, s)
		lowPool.Put(s)
	})
}

// wordsPerRow returns the packed words of one row.
func (mx *LowMatrix) wordsPerRow() int {
	if mx.bits != nil {
		return mx.bits.WordsPerRow()
	}
	return mx.sp.WordsPerRow()
}

// rowWords runs fn on ranges of the true rows in parallel (parallelRows,
// rowBytes bytes a row), with words the packed words of rows [r0, r1)
// and of the rest of r1's 16-row tile (words[0] is row r0's first): the
// stored words in place, or for an entropy-coded matrix those rows
// decoded into a scratch of codedTile rows, so that the kernels read
// them from L2. It returns the first decoding error (fn may still run on
// other ranges).
func (mx *LowMatrix) rowWords(rowBytes int, fn func(r0, r1 int, words []uint32)) error {
	wpr := mx.wordsPerRow()
	if mx.code == nil {
		var words []uint32
		if mx.bits != nil {
			words = mx.bits.Words
		} else {
			words = mx.sp.Words
		}
		mx.b.parallelRows(mx.rows, rowBytes, func(r0, r1 int) { fn(r0, r1, words[r0*wpr:]) })
		return nil
	}
	var mu sync.Mutex
	var first error
	mx.b.parallelRows(mx.rows, rowBytes, func(r0, r1 int) {
		p := codedPool.Get().(*[]uint32)
		defer codedPool.Put(p)
		*p = grow(*p, codedTile*wpr)
		for a := r0; a < r1; a += codedTile {
			if err := mx.decodeTile(a, *p); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
			fn(a, min(r1, a+codedTile), *p)
		}
	})
	return first
}

// codedTile is the rows an entropy-coded matrix is decoded by: two SIMD
// tiles, a multiple of every unit's rows (ans.Bits.RowsPerUnit, at most
// 16), so that a decoder call interleaves at least two units' state
// chains.
const codedTile = 32

var codedPool = sync.Pool{New: func() any { return new([]uint32) }}

func (mx *LowMatrix) streamBytes() int64 {
	if mx.bits != nil {
		return mx.bits.StreamBytes()
	}
	return mx.sp.StreamBytes()
}

// MulF32 multiplies float32 activations: dst[v*Rows+r] = sum_c W[r,c] *
// x[v*Cols+c], within layout.BitsTolerance of the float64 reference.
func (mx *LowMatrix) MulF32(dst, x []float32, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	if err := mx.check(len(dst), len(x), batch, mx.cols); err != nil {
		return err
	}
	xp := make([]float32, batch*mx.pcols)
	for v := 0; v < batch; v++ {
		mx.gather(xp[v*mx.pcols:], x[v*mx.cols:(v+1)*mx.cols])
	}
	return mx.mulF32(dst, xp, batch)
}

// MulF16 multiplies binary16 activations, widened exactly to float32.
func (mx *LowMatrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	if err := mx.check(len(dst), len(x), batch, mx.cols); err != nil {
		return err
	}
	xp := make([]float32, batch*mx.pcols)
	var wide []float32
	if mx.actOrder() {
		wide = make([]float32, mx.cols) // widen, then permute
	}
	for v := 0; v < batch; v++ {
		xv := x[v*mx.cols : (v+1)*mx.cols]
		if wide == nil {
			widenF16(xp[v*mx.pcols:], xv)
			continue
		}
		widenF16(wide, xv)
		mx.gather(xp[v*mx.pcols:], wide)
	}
	return mx.mulF32(dst, xp, batch)
}

// mulF32 runs the float kernel on padded activations: per group,
// s * sum q*x - m * sum x (m = s*z, or -o with Offsets) with the sums over
// the kept columns.
func (mx *LowMatrix) mulF32(dst, xp []float32, batch int) error {
	if mx.a32 != nil {
		return mx.mulF32SIMD(dst, xp, batch)
	}
	if mx.sa32 != nil {
		return mx.mulF32Sparse(dst, xp, batch)
	}
	pc, g, wpr := mx.pcols, mx.g, mx.wordsPerRow()
	return mx.rowsParallel(func(r0, r1 int, words []uint32, s *lowScratch) {
		var dot, sx, acc [maxBatch]float32
		for r := r0; r < r1; r++ {
			mx.rowCodes(words[(r-r0)*wpr:], s.q, s.keep)
			clear(acc[:batch])
			for gi := 0; gi < mx.groups; gi++ {
				clear(dot[:batch])
				clear(sx[:batch])
				switch {
				case mx.bits != nil && batch == 1:
					dot[0], sx[0] = dotF32Codes(s.q[gi*g:(gi+1)*g], xp[gi*g:(gi+1)*g])
				default:
					for c := gi * g; c < (gi+1)*g; c++ {
						if !s.keep[c] {
							continue
						}
						qf := float32(s.q[c])
						for v := 0; v < batch; v++ {
							xv := xp[v*pc+c]
							dot[v] += qf * xv
							sx[v] += xv
						}
					}
				}
				sc, m := mx.affine(r, gi)
				for v := 0; v < batch; v++ {
					acc[v] += sc*dot[v] - m*sx[v]
				}
			}
			for v := 0; v < batch; v++ {
				dst[v*mx.rows+r] = acc[v]
			}
		}
	})
}

// MulA8 quantizes x per 128 inputs (layout.QuantizeA8) and multiplies
// exactly (the result equals DotA8Exact bit for bit). The matrix needs
// integer zero points.
func (mx *LowMatrix) MulA8(dst, x []float32, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	if err := mx.check(len(dst), len(x), batch, mx.cols); err != nil {
		return err
	}
	if mx.intErr != nil {
		return mx.intErr
	}
	xq := make([]int8, batch*mx.pcols)
	xs := make([]float32, batch*mx.pcols/128)
	var xg []float32
	if mx.actOrder() {
		xg = make([]float32, mx.cols)
	}
	for v := 0; v < batch; v++ {
		xv := x[v*mx.cols : (v+1)*mx.cols]
		if xg != nil {
			mx.gather(xg, xv)
			xv = xg
		}
		if err := mx.b.QuantizeA8(xq[v*mx.pcols:(v+1)*mx.pcols], xs[v*mx.pcols/128:(v+1)*mx.pcols/128], xv); err != nil {
			return fmt.Errorf("cpu: vector %d: %w", v, err)
		}
	}
	return mx.mulI8(dst, xq, xs, batch)
}

// MulI8 multiplies activations quantized by layout.QuantizeA8 (PCols int8
// and PCols/128 scales per vector), in stored column order: an act-order
// matrix needs them quantized from the Gathered activations.
func (mx *LowMatrix) MulI8(dst []float32, xq []int8, xs []float32, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	if err := mx.check(len(dst), len(xq), batch, mx.pcols); err != nil {
		return err
	}
	if err := checkLen("xs", len(xs), batch, mx.pcols/128); err != nil {
		return err
	}
	if err := checkActScales(xs); err != nil {
		return err
	}
	return mx.mulI8(dst, xq, xs, batch)
}

func (mx *LowMatrix) mulI8(dst []float32, xq []int8, xs []float32, batch int) error {
	if mx.intErr != nil {
		return mx.intErr
	}
	if mx.simd != nil {
		return mx.mulI8SIMD(dst, xq, xs, batch)
	}
	pc, g, wpr := mx.pcols, mx.g, mx.wordsPerRow()
	blk := min(g, 128)
	return mx.rowsParallel(func(r0, r1 int, words []uint32, s *lowScratch) {
		var dot, sx [maxBatch]int32
		var acc [maxBatch]float32
		for r := r0; r < r1; r++ {
			mx.rowCodes(words[(r-r0)*wpr:], s.q, s.keep)
			clear(acc[:batch])
			for c0 := 0; c0 < pc; c0 += blk {
				clear(dot[:batch])
				clear(sx[:batch])
				switch {
				case mx.bits != nil && batch == 1:
					dot[0], sx[0] = dotI8Codes(s.q[c0:c0+blk], xq[c0:c0+blk])
				default:
					for c := c0; c < c0+blk; c++ {
						if !s.keep[c] {
							continue
						}
						qi := int32(s.q[c])
						for v := 0; v < batch; v++ {
							xv := int32(xq[v*pc+c])
							dot[v] += qi * xv
							sx[v] += xv
						}
					}
				}
				sc, z := mx.meta(r, c0/g)
				zi := int32(z)
				for v := 0; v < batch; v++ {
					f := float32(sc * xs[v*pc/128+c0/128])
					acc[v] = float32(acc[v] + float32(f*float32(dot[v]-zi*sx[v])))
				}
			}
			for v := 0; v < batch; v++ {
				dst[v*mx.rows+r] = acc[v]
			}
		}
	})
}

// dotI8Codes returns sum q*x and sum x over one block (batch 1, dense).
func dotI8Codes(q []uint8, x []int8) (dot, sum int32) {
	x = x[:len(q)]
	var d0, d1, s0, s1 int32
	i := 0
	for ; i+1 < len(q); i += 2 {
		a, b := int32(x[i]), int32(x[i+1])
		d0 += int32(q[i]) * a
		d1 += int32(q[i+1]) * b
		s0 += a
		s1 += b
	}
	for ; i < len(q); i++ {
		d0 += int32(q[i]) * int32(x[i])
		s0 += int32(x[i])
	}
	return d0 + d1, s0 + s1
}

// dotF32Codes returns sum q*x and sum x over one group (batch 1, dense).
func dotF32Codes(q []uint8, x []float32) (dot, sum float32) {
	x = x[:len(q)]
	var d0, d1, s0, s1 float32
	i := 0
	for ; i+1 < len(q); i += 2 {
		d0 += float32(q[i]) * x[i]
		d1 += float32(q[i+1]) * x[i+1]
		s0 += x[i]
		s1 += x[i+1]
	}
	for ; i < len(q); i++ {
		d0 += float32(q[i]) * x[i]
		s0 += x[i]
	}
	return d0 + d1, s0 + s1
}
