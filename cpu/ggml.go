package cpu

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ggml"
)

// GGMLMatrix is a layout/ggml matrix (llama.cpp's block types, as stored)
// bound to a CPU backend. Every multiply walks each row's blocks once and
// uses each decoded block for every vector of the batch. Float
// activations multiply float32 weights (the Go kernel: the reference
// weights, eight partial sums per block; SIMD: d*sc*u + offset in
// registers, FMA); int8 activations compute layout/ggml's exact
// definition (integer sub-block sums, then its float order). The SIMD
// kernels of the backend's kernel set run where it has them for the type,
// else Go.
type GGMLMatrix struct {
	b     *Backend
	m     *ggml.Matrix // a snapshot of the loaded matrix (Data may be a copy: huge pages, or kern.repack's order)
	block *hugemem.Block
	kern  *ggmlKernel // SIMD kernels for this type and kernel set, or nil
	goA8  bool        // A8 runs the Go kernel: kern.a8 is inexact for these codes (ggmlKernel.minCode)
	// mu is read-held by every multiply and write-held by Close, so that
	// Close waits for the multiplies in flight before it frees the
	// huge-page block they read.
	mu     sync.RWMutex
	closed bool
}

// ggmlKernel is one type's SIMD kernels on one kernel set: a8 computes
// rows [r0, r1) of every vector from activations prepared by prep (nil:
// the plain QuantizeA8 bytes).
type ggmlKernel struct {
	isa ISA
	a8  func(mx *GGMLMatrix, c *ggmlCall, r0, r1 int)
	// minCode: a8 is exact (for every int8 activation) only if no code
	// is -128: the AVX2 kernels of Q8_0 multiply |x| by the code with the
	// activation's sign, and -128 with a negative sign does not fit int8.
	// llama.cpp's quantizer writes codes in [-127, 127]; LoadGGML binds a
	// matrix holding a -128 to the Go A8 kernel.
	minCode bool
	// prep lays out vector v's activations (c.xq, c.xs) for a8 once per
	// call, before the rows are split.
	prep func(mx *GGMLMatrix, c *ggmlCall)
	// repack, if set, reorders the codes of a private copy of the
	// matrix's blocks at load for these kernels (which then are the only
	// ones to read it: a8 and f32 must both be set); order gives the
	// columns of each 256 in the order f32 takes them (nil: in order).
	repack func(data []byte)
	order  *[256]uint8
	// f32 computes rows [r0, r1) of every vector with float activations
	// xt laid out by ggmlUnitMajor (nil: the Go kernel).
	f32 func(mx *GGMLMatrix, dst, xt []float32, batch, r0, r1 int)
}

// ggmlR4L1 makes the four-row kernels prefetch the next rows into L1
// where the architecture's kernels offer that (ggml_amd64.go sets it for
// the CPU; tests set it to run both).
var ggmlR4L1 bool

// ggmlR4Lead makes the L1 variants prefetch a fixed distance ahead in
// each of the four rows rather than the next four rows (ggml_amd64.go;
// tests set it too).
var ggmlR4Lead bool

// ggmlKernels holds the SIMD kernels by type; architecture files fill
// it in init with a function of the backend's kernel set.
var ggmlKernels = map[ggml.Type]func(isa ISA) *ggmlKernel{}

// ggmlCall is one A8 multiply's inputs.
type ggmlCall struct {
	mx    *GGMLMatrix
	batch int
	dst   []float32
	xf    []float32 // float activations: the kernels' unit-major layout, or padded
	xq    []int8    // batch*PCols
	xs    []float32 // batch*PCols/128
	act8  []int8    // prep's activation layout, if any
	sums  []int16   // prep's per-sub-block activation sums, if any
	pairs []int32   // the batch kernels' transposed pair sums
	xsT   []float32 // the batch kernels' transposed scales
	slots int       // the rows-in-lanes kernel's vector slots, set by ggmlPrep (0: none)
	sc    *scratch  // the call's pooled buffers
}

func init() {
	loaders.Register(layout.FormatGGML, mat.Typed("cpu", func(b *Backend, m *ggml.Matrix) (Mat, error) {
		return mat.Bind(b.LoadGGML(m))
	}))
}

// LoadGGML validates m and binds it to the backend: used in place, or
// copied (into huge pages if the backend has HugePages) where the kernel
// set reads the type in an order of its own (the K types, Q5_0 and Q5_1
// on the avx2 and avxvnni sets, IQ4_XS on the avx2 set).
func (b *Backend) LoadGGML(m *ggml.Matrix) (*GGMLMatrix, error) {
	return b.loadGGML(m, nil)
}

// loadGGML is LoadGGML; with own (the huge-page block m.Data lies in,
// handed over by LoadOwned) the matrix keeps the blocks in place (and
// repacks them there) and frees own on Close, and own is freed here on
// an error.
func (b *Backend) loadGGML(m *ggml.Matrix, own *hugemem.Block) (*GGMLMatrix, error) {
	if err := m.ValidateShape(); err != nil {
		if own != nil {
			own.Free()
		}
		return nil, err
	}
	c := *m
	mx := &GGMLMatrix{b: b, m: &c}
	if f := ggmlKernels[c.Type]; f != nil {
		mx.kern = f(b.set.isa)
	}
	repack := mx.kern != nil && mx.kern.repack != nil
	if own != nil {
		if err := m.CheckFinite(0, len(m.Data)); err != nil {
			own.Free()
			return nil, err
		}
		mx.block = own
		runtime.SetFinalizer(mx, (*GGMLMatrix).Close)
	} else if b.huge || repack {
		blk := hugemem.Alloc(len(c.Data))
		if err := m.CopyChecked(blk.Bytes); err != nil { // the scales checked as they are copied
			blk.Free()
			return nil, err
		}
		mx.block = blk
		c.Data = mx.block.Bytes[:len(c.Data):len(c.Data)]
		runtime.SetFinalizer(mx, (*GGMLMatrix).Close)
	} else if err := m.CheckFinite(0, len(m.Data)); err != nil {
		return nil, err
	}
	if repack {
		mx.kern.repack(c.Data)
	}
	mx.goA8 = mx.kern != nil && mx.kern.minCode && ggmlHasMinCode(&c)
	return mx, nil
}

// Kernel names the kernels, e.g. "cpu-avx512vnni-q6_k" or
// "cpu-generic-q6_k"; a Q8_0 matrix whose codes of -128 the kernel set
// cannot multiply exactly says that its A8 runs in Go.
func (mx *GGMLMatrix) Kernel() string {
	isa := Generic
	if mx.kern != nil {
		isa = mx.kern.isa
	}
	name := "cpu-" + string(isa) + "-" + mx.m.Type.SpecName()
	if mx.goA8 {
		name += " (A8 in Go: codes of -128)"
	}
	return name
}

// Close releases the matrix, after the multiplies in flight return;
// later multiplies return ErrClosed.
func (mx *GGMLMatrix) Close() error {
	mx.mu.Lock()
	defer mx.mu.Unlock()
	if mx.closed {
		return ErrClosed
	}
	mx.closed = true
	if mx.block != nil {
		runtime.SetFinalizer(mx, nil)
		mx.block.Free()
	}
	return nil
}

// MulI32 returns an error: GGML blocks have scales.
func (mx *GGMLMatrix) MulI32([]int32, []int8, int) error { return noInt32(mx.m.Name()) }

// check checks a multiply's arguments and that mx is open (mx.mu
// read-held).
func (mx *GGMLMatrix) check(dstLen, xLen, batch, xPer int) error {
	if mx.closed {
		return ErrClosed
	}
	if batch < 1 || batch > maxBatch {
		return fmt.Errorf("cpu: %w (got %d)", ErrBatch, batch)
	}
	if err := checkLen("x", xLen, batch, xPer); err != nil {
		return err
	}
	return checkLen("dst", dstLen, batch, mx.m.Rows)
}

// MulF32 multiplies float32 activations.
func (mx *GGMLMatrix) MulF32(dst, x []float32, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	return mx.mulF32(dst, x, batch)
}

// mulF32 is MulF32 with mx.mu read-held.
func (mx *GGMLMatrix) mulF32(dst, x []float32, batch int) error {
	defer runtime.KeepAlive(mx)
	if err := mx.check(len(dst), len(x), batch, mx.m.Cols); err != nil {
		return err
	}
	m := mx.m
	sc := getScratch()
	defer putScratch(sc)
	c := &sc.ggml
	*c = ggmlCall{mx: mx, batch: batch, dst: dst, sc: sc}
	sc.xf = grow(sc.xf, batch*m.PCols)
	c.xf = sc.xf
	if k := mx.kern; k != nil && k.f32 != nil {
		ggmlUnitMajor(c.xf, m, x, batch, k.order)
	} else {
		clear(c.xf) // zero padded
		for v := 0; v < batch; v++ {
			copy(c.xf[v*m.PCols:], x[v*m.Cols:(v+1)*m.Cols])
		}
	}
	_ = mx.b.rowsJob(m.Rows, m.RowBytes(), chunksPerThread, ggmlF32Job{c})
	*c = ggmlCall{}
	return nil
}

// ggmlF32Job and ggmlA8Job compute rows of a GGML multiply (one pointer:
// as a rangeJob they allocate nothing).
type (
	ggmlF32Job struct{ c *ggmlCall }
	ggmlA8Job  struct{ c *ggmlCall }
)

func (j ggmlF32Job) do(r0, r1 int) error {
	c := j.c
	if k := c.mx.kern; k != nil && k.f32 != nil {
		k.f32(c.mx, c.dst, c.xf, c.batch, r0, r1)
	} else {
		ggmlF32Rows(c.mx.m, c.dst, c.xf, c.batch, r0, r1)
	}
	return nil
}

func (j ggmlA8Job) do(r0, r1 int) error {
	c := j.c
	if k := c.mx.kern; k != nil && !c.mx.goA8 {
		k.a8(c.mx, c, r0, r1)
	} else {
		ggmlA8Rows(c.mx.m, c, r0, r1)
	}
	return nil
}

// ggmlUnitMajor lays out batch vectors of x (Cols values each) for the
// float kernels: unit k (256 columns, or 128 for the 32-element types) of
// vector v at (k*batch + v)*U, zero padded to PCols; with order (256
// columns) position j of a unit holds its column order[j].
func ggmlUnitMajor(xt []float32, m *ggml.Matrix, x []float32, batch int, order *[256]uint8) {
	u := max(m.Type.BlockElems(), 128)
	xt = xt[:batch*m.PCols]
	clear(xt)
	for v := 0; v < batch; v++ {
		xv := x[v*m.Cols : (v+1)*m.Cols]
		for k := 0; k*u < m.Cols; k++ {
			d, s := xt[(k*batch+v)*u:(k*batch+v+1)*u], xv[k*u:min(len(xv), (k+1)*u)]
			if order == nil {
				copy(d, s)
				continue
			}
			for j, c := range order {
				if int(c) < len(s) {
					d[j] = s[c]
				}
			}
		}
	}
}

// MulF16 multiplies binary16 activations, widened exactly to float32.
func (mx *GGMLMatrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	if err := mx.check(len(dst), len(x), batch, mx.m.Cols); err != nil {
		return err
	}
	p := widenPool.Get().(*[]float32)
	*p = grow(*p, len(x))
	layout.FromFP16s(*p, x)
	err := mx.mulF32(dst, *p, batch)
	widenPool.Put(p)
	return err
}

// ggmlF32Rows computes rows [r0, r1) of every vector: per block, the
// reference weights times the activations in eight float32 partial sums,
// added to the row's sum block by block.
func ggmlF32Rows(m *ggml.Matrix, dst, xp []float32, batch, r0, r1 int) {
	t := m.Type
	n, pc := t.BlockElems(), m.PCols
	var w [256]float32
	var acc [maxBatch]float32
	for r := r0; r < r1; r++ {
		clear(acc[:batch])
		for k := 0; k < m.Blocks(); k++ {
			t.DequantizeBlock(w[:n], m.Block(r, k))
			for v := 0; v < batch; v++ {
				acc[v] += dotF32x8(w[:n], xp[v*pc+k*n:v*pc+k*n+n])
			}
		}
		for v := 0; v < batch; v++ {
			dst[v*m.Rows+r] = acc[v]
		}
	}
}

// dotF32x8 returns sum w[i]*x[i] (len a multiple of 8) in eight partial
// sums.
func dotF32x8(w, x []float32) float32 {
	var s [8]float32
	x = x[:len(w)]
	for i := 0; i+8 <= len(w); i += 8 {
		for j := 0; j < 8; j++ {
			s[j] += w[i+j] * x[i+j]
		}
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// MulA8 quantizes x per 128 inputs (layout.QuantizeA8) and multiplies
// exactly: the result equals ggml.Matrix.DotA8Exact bit for bit.
func (mx *GGMLMatrix) MulA8(dst, x []float32, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	defer runtime.KeepAlive(mx)
	if err := mx.check(len(dst), len(x), batch, mx.m.Cols); err != nil {
		return err
	}
	m := mx.m
	sc := getScratch()
	defer putScratch(sc)
	xq, xs := sc.int8Bufs(m.PCols, batch)
	for v := 0; v < batch; v++ {
		if err := mx.b.QuantizeA8(xq[v*m.PCols:(v+1)*m.PCols], xs[v*m.PCols/128:(v+1)*m.PCols/128], x[v*m.Cols:(v+1)*m.Cols]); err != nil {
			return fmt.Errorf("cpu: vector %d: %w", v, err)
		}
	}
	return mx.mulI8(sc, batch, dst, xq, xs)
}

// MulI8 multiplies activations quantized by layout.QuantizeA8 (PCols int8
// values and PCols/128 scales per vector). Other int8 values, -128
// included, give the exact product of the definition too.
func (mx *GGMLMatrix) MulI8(dst []float32, xq []int8, xs []float32, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	defer runtime.KeepAlive(mx)
	if err := mx.check(len(dst), len(xq), batch, mx.m.PCols); err != nil {
		return err
	}
	if err := checkLen("xs", len(xs), batch, mx.m.PCols/128); err != nil {
		return err
	}
	if err := checkActScales(xs); err != nil {
		return err
	}
	sc := getScratch()
	defer putScratch(sc)
	return mx.mulI8(sc, batch, dst, xq, xs)
}

// mulI8 runs the A8 multiply.
func (mx *GGMLMatrix) mulI8(sc *scratch, batch int, dst []float32, xq []int8, xs []float32) error {
	m := mx.m
	c := &sc.ggml
	*c = ggmlCall{mx: mx, batch: batch, dst: dst, xq: xq, xs: xs, sc: sc}
	if k := mx.kern; k != nil && k.prep != nil && !mx.goA8 {
		k.prep(mx, c)
	}
	_ = mx.b.rowsJob(m.Rows, m.RowBytes(), chunksPerThread, ggmlA8Job{c})
	*c = ggmlCall{}
	return nil
}

// ggmlHasMinCode reports whether a Q8_0 matrix holds a code of -128
// (other types: false): each block's 32 codes (after its binary16 d) as
// four words, a byte of 0x80 being a zero byte of the word xor 0x80...80
// ((w - 0x01...01) &^ w & 0x80...80 is nonzero exactly when w has a zero
// byte).
func ggmlHasMinCode(m *ggml.Matrix) bool {
	if m.Type != ggml.Q8_0 {
		return false
	}
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	n := m.Type.BlockBytes()
	var found uint64
	for b := m.Data; len(b) >= n; b = b[n:] {
		for o := 2; o < n; o += 8 {
			w := binary.LittleEndian.Uint64(b[o:]) ^ highs
			found |= (w - ones) &^ w & highs
		}
	}
	return found != 0
}

// ggmlA8Rows is the generic A8 kernel: each block decoded once
// (ggml.Ints), then layout/ggml's definition for every vector.
func ggmlA8Rows(m *ggml.Matrix, c *ggmlCall, r0, r1 int) {
	t := m.Type
	n, pc := t.BlockElems(), m.PCols
	var z ggml.Ints
	var acc [maxBatch]float32
	for r := r0; r < r1; r++ {
		clear(acc[:c.batch])
		for k := 0; k < m.Blocks(); k++ {
			t.Decode(&z, m.Block(r, k))
			for v := 0; v < c.batch; v++ {
				acc[v] = ggml.A8Block(t, &z, acc[v], c.xq[v*pc+k*n:], c.xs[(v*pc+k*n)/128:])
			}
		}
		for v := 0; v < c.batch; v++ {
			c.dst[v*m.Rows+r] = acc[v]
		}
	}
}

var _ Mat = (*GGMLMatrix)(nil)
