package cpu

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/internal/mat"
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
	// unclosed frees block if the matrix is dropped without Close.
	unclosed runtime.Cleanup
	code     *ans.Bits // entropy-coded words (bits is its header), or nil
	// ansKern is code's SIMD decoder, or nil (the generic one).
	ansKern *ansBitsDecoder
	// restore, if set, rebuilds bits' metadata that dropMeta released
	// (run once, by metaOnce, before the first float multiply).
	restore  func()
	metaOnce sync.Once
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
	loaders.Register(layout.FormatBits, mat.Typed("cpu", func(b *Backend, m *layout.Bits) (Mat, error) {
		return mat.Bind(b.LoadBits(m))
	}))
	loaders.Register(layout.FormatSparse12, mat.Typed("cpu", func(b *Backend, m *layout.Sparse12) (Mat, error) {
		return mat.Bind(b.LoadSparse12(m))
	}))
}

// MulI32 returns an error: Bits and Sparse12 have scales.
func (mx *LowMatrix) MulI32([]int32, []int8, int) error { return noInt32("Bits/Sparse12") }

// LoadBits validates m and binds it to the backend (used in place, or its
// weights copied into huge-page memory with HugePages).
func (b *Backend) LoadBits(m *layout.Bits) (*LowMatrix, error) {
	return b.loadBits(m, nil)
}

// loadBits is LoadBits; with own (the huge-page block m.Words lies in,
// handed over by LoadOwned) the matrix keeps the words in place and frees
// own on Close, and own is freed here on an error.
func (b *Backend) loadBits(m *layout.Bits, own *hugemem.Block) (*LowMatrix, error) {
	if err := m.Validate(); err != nil {
		if own != nil {
			own.Free()
		}
		return nil, err
	}
	blk := own
	c := *m // a snapshot of the fields, as Load takes
	if b.huge && own == nil {
		c.Words, blk = hugeWords(m.Words)
	}
	m = &c
	mx := &LowMatrix{block: blk, b: b, bits: m, rows: m.Rows, cols: m.Cols, pcols: m.PCols, g: m.G, groups: m.Groups(),
		simd: newBitsSIMD(b, m), a32: newBitsA32(b, m), intErr: m.IntegerZeros()}
	mx.dropMeta()
	mx.freeWithBlock()
	return mx, nil
}

// freeWithBlock makes a matrix that holds huge-page memory free it when
// it is dropped without Close (a backstop; Close is the API). A cleanup,
// not a finalizer: the matrix's restore closure refers back to it, and a
// finalizer on a cycle need never run. Every multiply holds mx.mu until
// its kernels are done, which keeps mx reachable while they read the
// block.
func (mx *LowMatrix) freeWithBlock() {
	if mx.block != nil {
		mx.unclosed = runtime.AddCleanup(mx, (*hugemem.Block).Free, mx.block)
	}
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
	mx := &LowMatrix{block: blk, b: b, sp: m, rows: m.Rows, cols: m.Cols, pcols: m.PCols, g: m.G, groups: m.Groups(),
		simd: newSparseSIMD(b, m), sa32: newSparseA32(b, m), intErr: m.IntegerZeros()}
	mx.freeWithBlock()
	return mx, nil
}

// Kernel names the kernels the matrix runs: generic Go, and for Bits with
// 8/4/2/1 bits and Sparse12, groups of at least 128 columns, the AVX-512
// kernels for int8 activations ("cpu-avx512vnni-a8+generic").
func (mx *LowMatrix) Kernel() string {
	float := mx.a32 != nil || mx.sa32 != nil
	var k string
	switch {
	case mx.simd != nil && float:
		k = "cpu-" + mx.simd.setName()
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
		mx.unclosed.Stop()
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
		_ = mx.bits.Gather(dst, x) // the multiply checked the lengths, Validate the permutation
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

// getLowScratch returns a row scratch for PCols codes, every column kept.
func (mx *LowMatrix) getLowScratch() *lowScratch {
	s := lowPool.Get().(*lowScratch)
	s.q, s.keep = grow(s.q, mx.pcols), grow(s.keep, mx.pcols)
	for i := range s.keep {
		s.keep[i] = true
	}
	return s
}

// wordsPerRow returns the packed words of one row.
func (mx *LowMatrix) wordsPerRow() int {
	if mx.bits != nil {
		return mx.bits.WordsPerRow()
	}
	return mx.sp.WordsPerRow()
}

// wordsJob is the work of a multiply on rows [r0, r1), given their packed
// words (words[0] is row r0's first, and the words of the rest of r1's
// 16-row tile follow).
type wordsJob interface {
	rows(r0, r1 int, words []uint32)
}

// rowsRun is rowWords' state, pooled: it hands each chunk of rows to a
// wordsJob with their words, decoding them first for an entropy-coded
// matrix.
type rowsRun struct {
	mx  *LowMatrix
	j   wordsJob
	wpr int
}

var rowsRuns = sync.Pool{New: func() any { return new(rowsRun) }}

func (r *rowsRun) do(r0, r1 int) error {
	mx := r.mx
	if mx.code == nil {
		var words []uint32
		if mx.bits != nil {
			words = mx.bits.Words
		} else {
			words = mx.sp.Words
		}
		r.j.rows(r0, r1, words[r0*r.wpr:])
		return nil
	}
	p := codedPool.Get().(*[]uint32)
	defer codedPool.Put(p)
	*p = grow(*p, codedTile*r.wpr)
	for a := r0; a < r1; a += codedTile {
		if err := mx.decodeTile(a, *p); err != nil {
			return err
		}
		r.j.rows(a, min(r1, a+codedTile), *p)
	}
	return nil
}

// rowWords runs j on chunks of the true rows in parallel (rowsJob,
// rowBytes bytes a row) with their packed words: the stored words in
// place, or for an entropy-coded matrix those rows decoded into a scratch
// of codedTile rows, so that the kernels read them from L2. It returns
// the first decoding error (j may still run on other chunks). It
// allocates nothing.
func (mx *LowMatrix) rowWords(rowBytes int, j wordsJob) error {
	r := rowsRuns.Get().(*rowsRun)
	r.mx, r.j, r.wpr = mx, j, mx.wordsPerRow()
	grain := rowTile
	if mx.code != nil {
		grain = codedTile // the rows decoded at once: pieces of whole decoded tiles
	}
	err := mx.b.rowsJobGrain(mx.rows, rowBytes, chunksPerThread, grain, r)
	r.mx, r.j = nil, nil
	rowsRuns.Put(r)
	return err
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

// lowCall is one LowMatrix multiply's state, pooled (lowCalls), so that
// a multiply allocates nothing: the prepared activations, and which rows
// job runs (kind).
type lowCall struct {
	mx    *LowMatrix
	dst   []float32
	batch int
	kind  lowKind
	xp    []float32 // float: batch*PCols padded, gathered activations
	wide  []float32 // float: one widened binary16 vector (act-order)
	xq    []int8    // A8: batch*PCols
	xs    []float32 // A8: batch*PCols/128
	xg    []float32 // A8: one gathered vector (act-order)
	ownQ  []int8    // A8: MulA8's own quantized activations
	ownS  []float32
	act   []byte    // SIMD A8: batch activation layouts, s.chunks*s.actChunk bytes each
	xsum  []float32 // SIMD float: segment sums
	xe    []float32 // Sparse12 float: even and odd columns
	xo    []float32
}

// lowKind selects a lowCall's rows job.
type lowKind int

const (
	lowF32 lowKind = iota // generic float
	lowI8                 // generic A8
	lowI8SIMD
	lowI8AMX
	lowI8T16
	lowF32SIMD
	lowF32Sparse
)

var lowCalls = sync.Pool{New: func() any { return new(lowCall) }}

func (mx *LowMatrix) getCall(dst []float32, batch int) *lowCall {
	c := lowCalls.Get().(*lowCall)
	c.mx, c.dst, c.batch = mx, dst, batch
	return c
}

func putCall(c *lowCall) {
	c.mx, c.dst, c.xq, c.xs = nil, nil, nil, nil
	lowCalls.Put(c)
}

// rows runs the call's kind of kernel on rows [r0, r1).
func (c *lowCall) rows(r0, r1 int, words []uint32) {
	switch c.kind {
	case lowF32:
		c.genericF32(r0, r1, words)
	case lowI8:
		c.genericI8(r0, r1, words)
	default:
		c.simdRows(r0, r1, words)
	}
}

// MulF32 multiplies float32 activations: dst[v*Rows+r] = sum_c W[r,c] *
// x[v*Cols+c], within layout.BitsTolerance of the float64 reference.
func (mx *LowMatrix) MulF32(dst, x []float32, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	if err := mx.check(len(dst), len(x), batch, mx.cols); err != nil {
		return err
	}
	c := mx.getCall(dst, batch)
	defer putCall(c)
	c.xp = grow(c.xp, batch*mx.pcols)
	for v := 0; v < batch; v++ {
		mx.gather(c.xp[v*mx.pcols:], x[v*mx.cols:(v+1)*mx.cols])
		clear(c.xp[v*mx.pcols+mx.cols : (v+1)*mx.pcols])
	}
	return c.mulF32()
}

// MulF16 multiplies binary16 activations, widened exactly to float32.
func (mx *LowMatrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	if err := mx.check(len(dst), len(x), batch, mx.cols); err != nil {
		return err
	}
	c := mx.getCall(dst, batch)
	defer putCall(c)
	c.xp = grow(c.xp, batch*mx.pcols)
	if mx.actOrder() {
		c.wide = grow(c.wide, mx.cols) // widen, then permute
	}
	for v := 0; v < batch; v++ {
		xv := x[v*mx.cols : (v+1)*mx.cols]
		if !mx.actOrder() {
			layout.FromFP16s(c.xp[v*mx.pcols:], xv)
			clear(c.xp[v*mx.pcols+mx.cols : (v+1)*mx.pcols])
			continue
		}
		layout.FromFP16s(c.wide, xv)
		mx.gather(c.xp[v*mx.pcols:], c.wide)
		clear(c.xp[v*mx.pcols+mx.cols : (v+1)*mx.pcols])
	}
	return c.mulF32()
}

// mulF32 runs the float kernel on the padded activations c.xp: per
// group, s * sum q*x - m * sum x (m = s*z, or -o with Offsets) with the
// sums over the kept columns.
func (c *lowCall) mulF32() error {
	mx := c.mx
	if mx.restore != nil {
		mx.metaOnce.Do(mx.restore)
	}
	if mx.a32 != nil {
		return c.mulF32SIMD()
	}
	if mx.sa32 != nil {
		return c.mulF32Sparse()
	}
	c.kind = lowF32
	return mx.rowWords(int(mx.streamBytes()/int64(max(1, mx.rows))), c)
}

// genericF32 is the generic float kernel on rows [r0, r1).
func (c *lowCall) genericF32(r0, r1 int, words []uint32) {
	mx, batch, xp := c.mx, c.batch, c.xp
	pc, g, wpr := mx.pcols, mx.g, mx.wordsPerRow()
	s := mx.getLowScratch()
	defer lowPool.Put(s)
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
				for col := gi * g; col < (gi+1)*g; col++ {
					if !s.keep[col] {
						continue
					}
					qf := float32(s.q[col])
					for v := 0; v < batch; v++ {
						xv := xp[v*pc+col]
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
			c.dst[v*mx.rows+r] = acc[v]
		}
	}
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
	c := mx.getCall(dst, batch)
	defer putCall(c)
	c.ownQ, c.ownS = grow(c.ownQ, batch*mx.pcols), grow(c.ownS, batch*mx.pcols/128)
	c.xq, c.xs = c.ownQ, c.ownS
	if mx.actOrder() {
		c.xg = grow(c.xg, mx.cols)
	}
	for v := 0; v < batch; v++ {
		xv := x[v*mx.cols : (v+1)*mx.cols]
		if mx.actOrder() {
			mx.gather(c.xg, xv)
			xv = c.xg
		}
		if err := mx.b.QuantizeA8(c.xq[v*mx.pcols:(v+1)*mx.pcols], c.xs[v*mx.pcols/128:(v+1)*mx.pcols/128], xv); err != nil {
			return fmt.Errorf("cpu: vector %d: %w", v, err)
		}
	}
	return c.mulI8()
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
	if mx.intErr != nil {
		return mx.intErr
	}
	c := mx.getCall(dst, batch)
	defer putCall(c)
	c.xq, c.xs = xq, xs
	return c.mulI8()
}

// mulI8 runs the A8 kernels on c.xq and c.xs.
func (c *lowCall) mulI8() error {
	mx := c.mx
	if mx.simd != nil {
		return c.mulI8SIMD()
	}
	c.kind = lowI8
	return mx.rowWords(int(mx.streamBytes()/int64(max(1, mx.rows))), c)
}

// genericI8 is the generic A8 kernel on rows [r0, r1).
func (c *lowCall) genericI8(r0, r1 int, words []uint32) {
	mx, batch, xq, xs := c.mx, c.batch, c.xq, c.xs
	pc, g, wpr := mx.pcols, mx.g, mx.wordsPerRow()
	blk := min(g, 128)
	s := mx.getLowScratch()
	defer lowPool.Put(s)
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
				for col := c0; col < c0+blk; col++ {
					if !s.keep[col] {
						continue
					}
					qi := int32(s.q[col])
					for v := 0; v < batch; v++ {
						xv := int32(xq[v*pc+col])
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
			c.dst[v*mx.rows+r] = acc[v]
		}
	}
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
