//go:build opencl

package opencl

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/codebook"
)

// Matrix is a matrix loaded onto an OpenCL device. Multiplies are safe
// for concurrent use (the backend serializes launches), also with Close:
// a multiply checks the matrix under the backend's lock, which Close
// takes to free it, and returns ErrClosed after it.
type Matrix struct {
	handle
	m      layout.Matrix
	geo    gpuhost.Geometry
	perm   []int32    // act-order gather (Bits), or nil
	a8err  error      // why int8 activations are refused, or nil
	kf, k8 string     // float and int8 kernel names
	w      *buffer    // weights
	sp, zp *buffer    // scales, zeros (or offsets)
	prows  int        // metadata stride (Bits, Sparse12)
	lg     int32      // log2 of the group, -1 for whole-row groups
	meta16 int32      // 1: binary16 metadata
	offs   int32      // 1: Bits with offsets
	tiled  int        // tiledQ4 or tiledBits4: the tiled kernels (gemv.cl) run it
	km     string     // tensor-core float kernel (q4_mma, bits<n>_mma; _8 or _16 appended) or ""
	k8m    string     // tensor-core int8 kernel (bits4_a8m; _8 or _16 appended) or ""
	kn     int        // code width for gpuhost.MMAOrder (0: Q4G128)
	cb     *cbMatrix  // codebook matrices (codebook.go), or nil
	coded  *ANSMatrix // an entropy-coded Bits matrix's words (ansbits.go), or nil
	nat    *buffer    // device buffers: stored column -> source column (-1: padding)
	order  *buffer    // and the tiled kernels' int8 order (buffers.go), or nil
	order8 []int32    // the tiled kernels' int8 order on the host (a8Order; b.mu)
}

// handle is what every device matrix (Matrix, ANSMatrix, Int8Matrix)
// carries: its backend and the mark Close sets.
type handle struct {
	b      *Backend
	closed atomic.Bool
}

func (h *handle) backend() *Backend { return h.b }
func (h *handle) isClosed() bool    { return h.closed.Load() }

// close marks the matrix closed, drops obj's finalizer (obj is the
// matrix) and frees its buffers under b.mu; closing twice is harmless.
func (h *handle) close(obj any, free func()) error {
	if h.closed.Swap(true) {
		return nil
	}
	runtime.SetFinalizer(obj, nil)
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	free()
	return nil
}

func ptr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(s))
}

func bytesOf[T any](s []T) int {
	var z T
	return len(s) * int(unsafe.Sizeof(z))
}

// Load validates m and copies it to the device. Q4G128, Bits, Sparse12
// and codebook matrices (*codebook.Codebook: the Psumbook kernels;
// codebook.Baseline: dequantize-then-multiply) are supported; other
// formats are an error naming them.
func (b *Backend) Load(m layout.Matrix) (*Matrix, error) {
	if m == nil {
		return nil, fmt.Errorf("opencl: Load: nil matrix")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return b.load(m, false)
}

// load copies a validated matrix to the device; with noWords (the header
// of an entropy-coded Bits matrix, whose words a decoder writes into a
// scratch buffer before each multiply) it allocates a placeholder for
// the words instead.
func (b *Backend) load(m layout.Matrix, noWords bool) (*Matrix, error) {
	var err error
	mx := &Matrix{handle: handle{b: b}, m: m, geo: gpuhost.GeometryOf(m), perm: gpuhost.Perm(m), a8err: gpuhost.CheckA8(m), lg: -1}
	var parts [3]struct {
		p unsafe.Pointer
		n int
	}
	setMeta := func(g layout.GroupMeta, group int, whole bool) {
		if g.FP32Meta {
			parts[1].p, parts[1].n = ptr(g.Scales32), bytesOf(g.Scales32)
			parts[2].p, parts[2].n = ptr(g.Zeros32), bytesOf(g.Zeros32)
		} else {
			mx.meta16 = 1
			parts[1].p, parts[1].n = ptr(g.Scales16), bytesOf(g.Scales16)
			parts[2].p, parts[2].n = ptr(g.Zeros16), bytesOf(g.Zeros16)
		}
		if !whole {
			mx.lg = int32(bits.TrailingZeros(uint(group)))
		}
	}
	switch m := m.(type) {
	case *layout.Q4G128:
		mx.kf, mx.k8 = "q4_f32t", "q4_a8t"
		mx.tiled = tiledQ4
		mx.km = "q4_mma"
		parts[0].p, parts[0].n = ptr(m.Weights), len(m.Weights)
		parts[1].p, parts[1].n = ptr(m.Scales), bytesOf(m.Scales)
		parts[2].p, parts[2].n = ptr(m.Zeros), len(m.Zeros)
		if b.q4tiles {
			// written in 16-row tiles below (writeQ4)
			parts[0].p, parts[1].p, parts[2].p = nil, nil, nil
		}
	case *layout.Bits:
		mx.kf, mx.k8 = fmt.Sprintf("bits%d_f32", m.N), fmt.Sprintf("bits%d_a8", m.N)
		parts[0].p, parts[0].n = ptr(m.Words), bytesOf(m.Words)
		if noWords {
			parts[0].p, parts[0].n = nil, 4
		}
		setMeta(m.GroupMeta, m.G, m.WholeRow)
		mx.prows = m.PRows
		if m.Offsets {
			mx.offs = 1
		}
		if m.N == 4 && (m.WholeRow || m.G >= layout.GroupSize) {
			mx.kf, mx.k8 = "bits4_f32t", "bits4_a8t"
			mx.tiled = tiledBits4
		}
		if (m.N == 8 || m.N == 4 || m.N == 2) && (m.WholeRow || m.G >= layout.GroupSize) {
			mx.km, mx.kn = fmt.Sprintf("bits%d_mma", m.N), m.N
		}
		if m.N == 4 && (m.WholeRow || m.G >= layout.GroupSize) {
			mx.k8m = "bits4_a8m"
		}
	case *layout.Sparse12:
		mx.kf, mx.k8 = "sp12_f32", "sp12_a8"
		parts[0].p, parts[0].n = ptr(m.Words), bytesOf(m.Words)
		setMeta(m.GroupMeta, m.G, m.WholeRow)
		mx.prows = m.PRows
	case *codebook.Codebook, codebook.Baseline:
		c, dequant := cbOf(m)
		if mx.cb, err = newCBMatrix(c, dequant); err != nil {
			return nil, err
		}
		words, cent, scales := cbParts(c)
		parts[0].p, parts[0].n = ptr(words), bytesOf(words)
		parts[1].p, parts[1].n = ptr(cent), bytesOf(cent)
		parts[2].p, parts[2].n = ptr(scales), bytesOf(scales)
	default:
		return nil, fmt.Errorf("opencl: format %s: %w", m.Name(), errs.ErrFormatNotImplemented)
	}
	// The kernels index their buffers with 32-bit ints (Q4G128's weights
	// by nibble): a buffer past that is an error, not wrapped indices.
	for i, p := range parts {
		n := int64(p.n)
		if _, q4 := m.(*layout.Q4G128); q4 && i == 0 {
			n *= 2
		}
		if n > math.MaxInt32 {
			return nil, fmt.Errorf("opencl: loading %s: buffer %d holds %d bytes, past the kernels' 32-bit indices (2 GiB, 1 GiB of Q4G128 weights)", m.Name(), i, p.n)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	bufs := []**buffer{&mx.w, &mx.sp, &mx.zp}
	release := func(n int) {
		for _, q := range bufs[:n] {
			(*q).release()
		}
	}
	for i, p := range parts {
		buf, err := b.x.newBuffer(p.n, true, b.x.dev.info.Unified)
		if err == nil && p.p != nil {
			err = b.x.write(buf, 0, p.p, p.n)
		}
		if err != nil {
			buf.release()
			release(i)
			return nil, fmt.Errorf("opencl: loading %s: %w", m.Name(), err)
		}
		*bufs[i] = buf
	}
	if q, ok := m.(*layout.Q4G128); ok && b.q4tiles {
		if err := mx.writeQ4(q); err != nil {
			release(len(bufs))
			return nil, fmt.Errorf("opencl: loading %s: %w", m.Name(), err)
		}
	}
	runtime.SetFinalizer(mx, (*Matrix).Close) // backstop; Close is the API
	return mx, nil
}

// writeQ4 writes m to mx's buffers in 16-row tiles (Q4Tiles; gemv.cl,
// "Q4G128"), one 128-row stripe at a time; a stripe keeps its canonical
// byte range. b.mu is held.
func (mx *Matrix) writeQ4(m *layout.Q4G128) error {
	x := mx.b.x
	ng := m.PCols / layout.GroupSize
	w := make([]byte, 64*m.PCols)
	sc := make([]float32, 128*ng)
	zp := make([]byte, 64*ng)
	for r0 := 0; r0 < m.PRows; r0 += 128 {
		q4Stripe(m, r0, w, sc, zp)
		if err := x.write(mx.w, r0*m.PCols/2, ptr(w), len(w)); err != nil {
			return err
		}
		if err := x.write(mx.sp, 4*r0*ng, ptr(sc), bytesOf(sc)); err != nil {
			return err
		}
		if err := x.write(mx.zp, r0*ng/2, ptr(zp), len(zp)); err != nil {
			return err
		}
	}
	return nil
}

// q4Stripe rearranges rows r0..r0+127 of m into 16-row tiles (gemv.cl,
// "Q4G128"): w gets 64*PCols bytes, sc 128*ng scales and zp 64*ng bytes of
// zeros, indexed from the stripe's start.
func q4Stripe(m *layout.Q4G128, r0 int, w []byte, sc []float32, zp []byte) {
	ng := m.PCols / layout.GroupSize
	clear(zp)
	for i := 0; i < 128; i++ {
		r := r0 + i
		row := m.Weights[r*m.PCols/2 : (r+1)*m.PCols/2]
		for g := 0; g < ng; g++ {
			d := (i/16*ng+g)*16 + i%16 // device index in the stripe
			copy(w[64*d:64*d+64], row[64*g:])
			sc[d] = m.Scale(r, g)
			zp[d/2] |= m.Zero(r, g) << (4 * (d % 2))
		}
	}
}

// Close releases the matrix's device buffers. Multiplies afterwards
// return ErrClosed; closing twice is harmless.
func (mx *Matrix) Close() error {
	if mx == nil || mx.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	return mx.close(mx, func() {
		for _, p := range []*buffer{mx.w, mx.sp, mx.zp, mx.nat, mx.order} {
			p.release()
		}
		if mx.coded != nil {
			mx.coded.free()
		}
	})
}

// Kernel names the kernel set, e.g. "opencl-nvidia-h200" (codebook
// matrices: with "-psumbook", "-psumbook-global" or "-dequant").
func (mx *Matrix) Kernel() string {
	if mx.cb != nil {
		return mx.cbKernelName()
	}
	if mx.coded != nil {
		return "opencl-" + mx.b.ShortName() + "-ans-decode"
	}
	return "opencl-" + mx.b.ShortName()
}

// Format returns the loaded matrix.
func (mx *Matrix) Format() layout.Matrix { return mx.m }

const prefix = "opencl"

func (mx *Matrix) checkOpen() error {
	if mx.isClosed() {
		return ErrClosed
	}
	return nil
}

// MulF32 computes dst[v*Rows+r] = sum_c W[r,c] x[v*Cols+c] for v < batch
// with float32 activations (within the format's float tolerance).
func (mx *Matrix) MulF32(dst, x []float32, batch int) error {
	if err := mx.checkOpen(); err != nil {
		return err
	}
	return mulFloat(mx, mx.geo, mx.perm, dst, x, batch, gpuhost.PadF32)
}

// MulF16 multiplies with binary16 activations, widened exactly to
// float32 on the host.
func (mx *Matrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	if err := mx.checkOpen(); err != nil {
		return err
	}
	if !mx.b.x.dev.info.Unified && mx.cb == nil && mx.coded == nil {
		// discrete GPUs: the device path (mulF16Device) instead of
		// preparing the activations on the host
		if err := mx.geo.CheckF32(prefix, len(dst), len(x), batch); err != nil {
			return err
		}
		b := mx.b
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed || mx.isClosed() {
			return ErrClosed
		}
		return mx.mulF16Device(dst, x, batch)
	}
	return mulFloat(mx, mx.geo, mx.perm, dst, x, batch, gpuhost.PadF16)
}

// mulFloat checks a float multiply's lengths, pads (and gathers through
// perm) x to float32 with pad in pooled host memory and runs the float
// kernels of mx (a Matrix or a GGMLMatrix).
func mulFloat[T any](mx floatRunner, geo gpuhost.Geometry, perm []int32, dst []float32, x []T, batch int, pad func(dst []float32, x []T, batch, cols, pcols int, perm []int32) error) error {
	if err := geo.CheckF32(prefix, len(dst), len(x), batch); err != nil {
		return err
	}
	h := hostPool.Get().(*gpuhost.Host)
	defer hostPool.Put(h)
	h.F = gpuhost.Grow(h.F, batch*geo.PCols)
	xp := h.F
	if err := pad(xp, x, batch, geo.Cols, geo.PCols, perm); err != nil {
		return err
	}
	return gpuhost.MulScaled(dst, xp, batch, geo.PCols, geo.Rows, func() error { // activations far from 1
		return mx.run(dst, xp, nil, nil, batch)
	})
}

// floatRunner is a matrix whose run uploads prepared activations,
// multiplies and reads the results.
type floatRunner interface {
	run(dst, xf []float32, xq []int8, xs []float32, batch int) error
}

// hostPool holds the host memory of the activations a multiply prepares
// before it takes the backend's lock.
var hostPool = sync.Pool{New: func() any { return new(gpuhost.Host) }}

// MulA8 quantizes x on the host exactly as layout.QuantizeA8 (per vector,
// after the act-order gather) and multiplies bit-exactly. Non-finite
// activations are an error.
func (mx *Matrix) MulA8(dst, x []float32, batch int) error {
	if err := mx.checkOpen(); err != nil {
		return err
	}
	if err := mx.geo.CheckF32(prefix, len(dst), len(x), batch); err != nil {
		return err
	}
	if mx.cb != nil {
		return ErrCodebookA8
	}
	if mx.a8err != nil {
		return fmt.Errorf("opencl: %w", mx.a8err)
	}
	if !mx.b.x.dev.info.Unified && mx.devA8() {
		if done, err := mx.mulA8OnDevice(dst, x, batch); done {
			return err
		}
	}
	h := hostPool.Get().(*gpuhost.Host)
	defer hostPool.Put(h)
	xq, xs, err := h.QuantizeA8("opencl", x, batch, mx.geo.Cols, mx.geo.PCols, mx.perm)
	if err != nil {
		return err
	}
	return mx.run(dst, nil, xq, xs, batch)
}

// mulA8OnDevice runs mulA8Device under the backend's lock.
func (mx *Matrix) mulA8OnDevice(dst, x []float32, batch int) (bool, error) {
	b := mx.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || mx.isClosed() {
		return true, ErrClosed
	}
	return mx.mulA8Device(dst, x, batch)
}

// MulI8 multiplies int8 activations quantized by layout.QuantizeA8
// (batch*PCols values in stored column order, batch*PCols/128 scales).
func (mx *Matrix) MulI8(dst []float32, xq []int8, xs []float32, batch int) error {
	if err := mx.checkOpen(); err != nil {
		return err
	}
	if err := mx.geo.CheckI8(prefix, len(dst), xq, xs, batch); err != nil {
		return err
	}
	if mx.cb != nil {
		return ErrCodebookA8
	}
	if mx.a8err != nil {
		return fmt.Errorf("opencl: %w", mx.a8err)
	}
	return mx.run(dst, nil, xq, xs, batch)
}

// run uploads the prepared activations (xf for the float kernels, or xq
// and xs), launches and reads batch*Rows results into dst.
func (mx *Matrix) run(dst, xf []float32, xq []int8, xs []float32, batch int) error {
	b := mx.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if mx.isClosed() {
		return ErrClosed
	}
	if mx.cb != nil {
		return mx.runCB(dst, xf, batch)
	}
	if mx.coded != nil {
		w, err := mx.decodeWords()
		if err != nil {
			return err
		}
		saved := mx.w
		mx.w = w // the kernels read the decoded words; Close keeps freeing the placeholder
		defer func() { mx.w = saved }()
	}
	float, err := mx.prepare(xf, xq, xs, batch)
	if err != nil {
		return err
	}
	if _, err := mx.launch(b.scratch(), float, batch, false); err != nil {
		return err
	}
	return b.x.read(b.y, 0, ptr(dst), 4*batch*mx.geo.Rows)
}

// prepare puts the activations (xf for the float kernels, or xq and xs)
// where the kernels read them, in their order (b.mu held), sizes the
// result scratch, and reports whether the float kernels run.
func (mx *Matrix) prepare(xf []float32, xq []int8, xs []float32, batch int) (float bool, err error) {
	b := mx.b
	b.xmma, b.x8mma = false, false
	if xq != nil && mx.k8m != "" {
		if err := mx.a8MMAInputs(xq, xs, batch); err != nil {
			return false, err
		}
		if b.x8mma {
			xq = nil
		}
	}
	if xf != nil && mx.km != "" {
		ok, err := mx.mmaInputs(xf, batch)
		if err != nil {
			return false, err
		}
		if ok {
			xf = nil
		}
	}
	if mx.tiled != 0 && !b.xmma && !b.x8mma {
		if xf, xq, err = mx.reorder(xf, xq, xs, batch); err != nil {
			return false, err
		}
	}
	if b.xmma || b.x8mma {
		// activations are on the device (mmaInputs, a8MMAInputs)
	} else if xf != nil {
		if err := put(b, &b.xf, xf); err != nil {
			return false, err
		}
	} else {
		if err := put(b, &b.xq, xq); err != nil {
			return false, err
		}
		if err := put(b, &b.xs, xs); err != nil {
			return false, err
		}
	}
	if _, err := b.ensure(&b.y, 4*batch*mx.geo.Rows, false); err != nil {
		return false, err
	}
	return xf != nil || b.xmma, nil
}

// operands are the device buffers a multiply reads its activations from
// (xf and xsum for the float kernels; xq, xs and sx for the int8 ones)
// and writes its results to (y): the backend's scratch for host-slice
// calls (scratch), the caller's device buffers and the backend's layout
// buffers for buffer calls.
type operands struct {
	xf, xq, xs, sx, xsum, y *buffer
	// scratch: the tensor-core kernels may run, on the activations prepare
	// laid out for them (b.xmma, b.x8mma), which only the scratch holds
	scratch bool
}

// scratch returns the backend's scratch buffers as operands (b.mu held).
func (b *Backend) scratch() operands {
	return operands{xf: b.xf, xq: b.xq, xs: b.xs, sx: b.sx, xsum: b.xsum, y: b.y, scratch: true}
}

// launch sets the arguments and enqueues one multiply on o (b.mu held),
// optionally returning a profiling event.
func (mx *Matrix) launch(o operands, float bool, batch int, ev bool) (*event, error) {
	b := mx.b
	name := mx.k8
	if float {
		name = mx.kf
	}
	if o.scratch && float && b.xmma && mx.km != "" {
		return mx.launchMMA(batch, ev)
	}
	if o.scratch && !float && b.x8mma && mx.k8m != "" {
		return mx.launchA8MMA(batch, ev)
	}
	k, wg, err := b.kernel(name, batch)
	if err != nil {
		return nil, err
	}
	if b.wgOverride > 0 {
		wg = b.wgOverride
	}
	nb := nbBucket(batch)
	rows, pcols, bt, prows := int32(mx.geo.Rows), int32(mx.geo.PCols), int32(batch), int32(mx.prows)
	loc := localBytes(4 * nb * wg)
	_, isQ4 := mx.m.(*layout.Q4G128)
	if mx.tiled != 0 {
		t := b.tiling(batch)
		if q, ok := mx.m.(*layout.Q4G128); ok {
			prows = int32(q.PRows)
		}
		nu := mx.geo.PCols / 32
		var rt int
		if float {
			ks := t.splitK(nu, t.unf)
			rt = t.wg / 32 / ks * t.rpw
			red := localBytes(4 * t.wg / 32 * t.rpw * 33)
			if isQ4 {
				err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(o.xf), mem(o.xsum), mem(o.y), i32(rows), i32(prows), i32(pcols), i32(bt), i32(ks), red)
			} else {
				err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(o.xf), mem(o.xsum), mem(o.y), i32(rows), i32(prows), i32(pcols), i32(bt), i32(mx.lg), i32(mx.meta16), i32(mx.offs), i32(ks), red)
			}
		} else if b.warpA8() {
			// the program is built (b.kernel above): b.ptx is final
			if k, _, err = b.kernel(strings.TrimSuffix(name, "t")+"w", batch); err != nil {
				return nil, err
			}
			rt = t.wg / 32 * t.rwa
			if isQ4 {
				err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(o.xq), mem(o.xs), mem(o.sx), mem(o.y), i32(rows), i32(prows), i32(pcols), i32(bt))
			} else {
				err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(o.xq), mem(o.xs), mem(o.sx), mem(o.y), i32(rows), i32(prows), i32(pcols), i32(bt), i32(mx.lg), i32(mx.meta16))
			}
		} else {
			if ta := b.a8Tiling(batch, mx.geo.Rows, isQ4); ta != t {
				if k, _, err = b.kernelWith(name, batch, ta); err != nil {
					return nil, err
				}
				t = ta
			}
			ks := t.a8SplitK(nu, mx.geo.Rows, b.x.dev.info.ComputeUnits, isQ4)
			rt = t.wg / 32 / ks * t.rpa
			tu := ks * 32 * t.una
			ps := tu + 1
			if !isQ4 {
				ps = 2*tu + 1
			}
			part, terms := localBytes(4*nb*rt*ps), localBytes(4*nb*rt*(tu/4+1))
			if isQ4 {
				err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(o.xq), mem(o.xs), mem(o.sx), mem(o.y), i32(rows), i32(prows), i32(pcols), i32(bt), i32(ks), part, terms)
			} else {
				err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(o.xq), mem(o.xs), mem(o.sx), mem(o.y), i32(rows), i32(prows), i32(pcols), i32(bt), i32(mx.lg), i32(mx.meta16), i32(ks), part, terms)
			}
		}
		if err != nil {
			return nil, err
		}
		groups := (mx.geo.Rows + rt - 1) / rt
		return b.x.launch(k, groups*t.wg, t.wg, ev)
	}
	switch { // Bits and Sparse12 (Q4G128 always runs the tiled kernels)
	case float && name == "sp12_f32":
		err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(o.xf), mem(o.y), i32(rows), i32(prows), i32(pcols), i32(bt), i32(mx.lg), i32(mx.meta16), loc)
	case float:
		err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(o.xf), mem(o.y), i32(rows), i32(prows), i32(pcols), i32(bt), i32(mx.lg), i32(mx.meta16), i32(mx.offs), loc)
	default:
		err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(o.xq), mem(o.xs), mem(o.y), i32(rows), i32(prows), i32(pcols), i32(bt), i32(mx.lg), i32(mx.meta16), loc)
	}
	if err != nil {
		return nil, err
	}
	return b.x.launch(k, mx.geo.Rows*wg, wg, ev)
}

// mmaBatch is the largest batch one launch of the tensor-core float
// kernels takes (two binary16 fragment columns per vector, 8 columns);
// larger batches up to mmaMaxBatch run one launch per group of mmaBatch
// vectors (each streams the matrix again: on the H200 still 3-5x faster
// at batch 16 than the CUDA-core kernels, which are compute-bound there).
const (
	mmaBatch    = 4
	mmaMaxBatch = 16
)

// mmaInputs prepares float32 activations for the tensor-core kernel
// (b.mu held): when the device runs it (b.mmaOn), the batch fits and the
// activations are finite, it splits each group of mmaBatch vectors into
// hi/lo binary16 columns (gpuhost.SplitHiLo), orders them for the
// fragments (gpuhost.MMAOrder), uploads them with their block sums and
// scales (per group: 8*PCols binary16 values, 8*PCols/128 sums, mmaBatch
// scales), sets b.xmma and returns true. Otherwise the float kernels run.
func (mx *Matrix) mmaInputs(xf []float32, batch int) (bool, error) {
	b := mx.b
	if batch > mmaMaxBatch || !b.tcBuilt(mx.km, batch) {
		return false, nil
	}
	pc := mx.geo.PCols
	groups := (batch + mmaBatch - 1) / mmaBatch
	h := &b.mmaHost
	h.xp = gpuhost.Grow(h.xp, 8*pc)
	h.xr = gpuhost.Grow(h.xr, groups*8*pc)
	h.inv = gpuhost.Grow(h.inv, groups*mmaBatch)
	clear(h.inv)
	xr, inv := h.xr, h.inv
	var xsum []float32
	if mx.kn != 0 {
		h.xsum = gpuhost.Grow(h.xsum, groups*8*pc/128)
		xsum = h.xsum
	} else {
		h.xsum = gpuhost.Grow(h.xsum, 1)
		h.xsum[0] = 0
	}
	for g := 0; g < groups; g++ {
		nb := min(mmaBatch, batch-g*mmaBatch)
		if !gpuhost.SplitHiLoInto(h.xp, inv[g*mmaBatch:], xf[g*mmaBatch*pc:], nb, pc, 8) {
			return false, nil
		}
		var sums []float32
		if xsum != nil {
			sums = xsum[g*8*pc/128 : (g+1)*8*pc/128]
		}
		if err := gpuhost.MMAOrderInto(xr[g*8*pc:(g+1)*8*pc], sums, mx.kn, h.xp, 2*nb, pc, 8); err != nil {
			return false, err
		}
	}
	if xsum == nil {
		xsum = h.xsum
	}
	if err := put(b, &b.xh, xr); err != nil {
		return false, err
	}
	if err := put(b, &b.xsum, xsum); err != nil {
		return false, err
	}
	if err := put(b, &b.xinv, inv); err != nil {
		return false, err
	}
	b.xmma = true
	return true, nil
}

// mmaWarps returns the warps per work-group of the tensor-core kernel
// name for this matrix (a forced tiling's, else 16 for the float kernels
// when the matrix has fewer 16-row tiles than twice the compute units, so
// that each unit still gets enough warps, for the Q4G128 float kernel on
// 16-row tiles, and for the Bits float kernels when rows have at least
// bitsChunks16 chunks, else 8) and whether the matrix has that few row
// tiles. Each case takes the warp count that ran faster on an H200 (the
// int8 kernel k8m, run only on few row tiles, keeps 8).
func (mx *Matrix) mmaWarps(name string, batch int) (mw int, few bool) {
	few = (mx.geo.Rows+15)/16 < 2*mx.b.x.dev.info.ComputeUnits
	if mw = mx.b.tiling(batch).mw; mw == 8 || mw == 16 {
		return mw, few
	}
	q4Tiles := mx.kn == 0 && mx.b.q4tiles
	bitsLong := mx.kn != 0 && mx.geo.PCols*mx.kn/1024 >= bitsChunks16
	if few && name != mx.k8m || name == mx.km && (q4Tiles || bitsLong) {
		return 16, few
	}
	return 8, few
}

// bitsChunks16 is the chunk count per row (1024/N columns each) from
// which the Bits tensor-core float kernels run 16 warps, faster from there
// on an H200 (the 16-warp kernel holds 64 registers, the 8-warp one,
// loading metadata early, 70).
const bitsChunks16 = 16

// launchMMA enqueues the tensor-core kernel on the activations mmaInputs
// put on the device (b.mu held).
func (mx *Matrix) launchMMA(batch int, ev bool) (*event, error) {
	b := mx.b
	k, mw, err := mx.tcKernel(mx.km, batch)
	if err != nil {
		return nil, err
	}
	red := localBytes(4 * mw * 4 * 32)
	rows, pcols := int32(mx.geo.Rows), int32(mx.geo.PCols)
	// one launch per group of mmaBatch vectors; with ev, the events are
	// chained so that the multiply is timed as a whole
	var first *event
	tail := &first
	for g := 0; g*mmaBatch < batch; g++ {
		nb, vg := int32(min(mmaBatch, batch-g*mmaBatch)), int32(g)
		if mx.kn == 0 {
			err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(b.xh), mem(b.xinv), mem(b.y), i32(rows), i32(pcols), i32(nb), i32(vg), red)
		} else {
			err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(b.xh), mem(b.xsum), mem(b.xinv), mem(b.y), i32(rows), i32(mx.prows), i32(pcols), i32(mx.lg), i32(mx.meta16), i32(mx.offs), i32(nb), i32(vg), red)
		}
		var e *event
		if err == nil {
			e, err = mx.tcLaunch(k, mw, ev)
		}
		if err != nil {
			if first != nil {
				releaseEvents([]*event{first})
			}
			return nil, err
		}
		if e != nil {
			*tail = e
			tail = &e.next
		}
	}
	return first, nil
}

// tcKernel returns the tensor-core kernel name_8 or name_16 for this
// matrix (mmaWarps) and its warp count. b.mu is held.
func (mx *Matrix) tcKernel(name string, batch int) (*kernel, int, error) {
	mw, _ := mx.mmaWarps(name, batch)
	k, _, err := mx.b.kernel(tcName(name, mw), batch)
	return k, mw, err
}

// tcNames holds the tensor-core kernels' instance names ("<name>_<mw>"),
// so that a multiply formats none.
var (
	tcNamesMu sync.RWMutex
	tcNames   = map[tcKey]string{}
)

type tcKey struct {
	name string
	mw   int
}

// tcName returns name + "_" + mw.
func tcName(name string, mw int) string {
	key := tcKey{name, mw}
	tcNamesMu.RLock()
	s, ok := tcNames[key]
	tcNamesMu.RUnlock()
	if !ok {
		s = fmt.Sprintf("%s_%d", name, mw)
		tcNamesMu.Lock()
		tcNames[key] = s
		tcNamesMu.Unlock()
	}
	return s
}

// tcLaunch enqueues a tensor-core kernel: one work-group of mw warps per
// 16 rows.
func (mx *Matrix) tcLaunch(k *kernel, mw int, ev bool) (*event, error) {
	groups := (mx.geo.Rows + 15) / 16
	return mx.b.x.launch(k, groups*32*mw, 32*mw, ev)
}

// tcBuilt reports whether the device runs the tensor-core kernel name
// (building the batch's program first: a build without tensor cores
// clears b.mma and records b.mmaErr). b.mu is held.
func (b *Backend) tcBuilt(name string, batch int) bool {
	if !b.mmaOn() {
		return false
	}
	_, _, err := b.kernel(tcName(name, 8), batch)
	return err == nil && b.mma
}

// a8MMABatch is the largest batch of the tensor-core int8 kernel (one
// fragment column per vector).
const a8MMABatch = 8

// a8MMATile returns the term tile of bits4_a8m: the chunks whose block
// terms sit in local memory at once (4*batch*16*(2*tch+1) bytes), 64 up to
// batch 4 (32 KiB; fewer barriers), 32 above; a forced tiling's TCH wins.
func (b *Backend) a8MMATile(batch int) int {
	if t := b.tiling(batch).tch; t > 0 {
		return t
	}
	if batch <= 4 {
		return 64
	}
	return 32
}

// a8MMAInputs prepares int8 activations (padded, batch*PCols, with
// their per-block scales xs) for the tensor-core int8 kernel when the
// device runs it and the batch fits (b.mu held): it uploads them in
// fragment order (a8MMAOrder) with the int32 block sums, and sets
// b.x8mma.
func (mx *Matrix) a8MMAInputs(xq []int8, xs []float32, batch int) error {
	b := mx.b
	if _, few := mx.mmaWarps(mx.k8m, batch); batch > a8MMABatch || !few && b.tiling(batch).mw == 0 || !b.tcBuilt(mx.k8m, batch) {
		// too large a batch, many row tiles (where the tiled kernel is
		// faster) or no tensor cores
		return nil
	}
	pc := mx.geo.PCols
	h := &b.mmaHost
	h.q = gpuhost.Grow(h.q, 8*pc)
	h.sx = gpuhost.Grow(h.sx, batch*pc/128)
	xr, sx := h.q, h.sx
	a8MMAOrder(xr, sx, xq, batch, pc)
	if err := put(b, &b.xq, xr); err != nil {
		return err
	}
	if err := put(b, &b.sx, sx); err != nil {
		return err
	}
	if err := put(b, &b.xs, xs); err != nil {
		return err
	}
	b.x8mma = true
	return nil
}

// a8MMAOrder puts int8 activations (batch vectors of pc values) in the
// order the lanes of bits4_a8m read their B fragments (see gemv.cl):
// 8 vectors (zero past the batch), for chunk k, step s, block b, vector
// v and lane column t eight bytes: the block's planes (3, 1, 2, 0 or
// 7, 5, 6, 4) at word columns 8t+2s, then 8t+2s+1. It also returns the
// int32 sum of every vector's 128-column blocks.
func a8MMAOrder(out []int8, sx []int32, xq []int8, batch, pc int) {
	planes := [2][4]int{{3, 1, 2, 0}, {7, 5, 6, 4}}
	nblk := pc / 128
	clear(out[:8*pc])
	clear(sx[:batch*nblk])
	for v := 0; v < batch; v++ {
		x := xq[v*pc : (v+1)*pc]
		for c, q := range x {
			sx[v*nblk+c/128] += int32(q)
		}
		for k := 0; k < pc/256; k++ {
			for st := 0; st < 4; st++ {
				for bk := 0; bk < 2; bk++ {
					for t := 0; t < 4; t++ {
						o := ((((k*4+st)*2+bk)*8+v)*4 + t) * 8
						for e, p := range planes[bk] {
							out[o+e] = x[k*256+32*p+8*t+2*st]
							out[o+4+e] = x[k*256+32*p+8*t+2*st+1]
						}
					}
				}
			}
		}
	}
}

// launchA8MMA enqueues bits4_a8m on the activations a8MMAInputs put on
// the device (b.mu held).
func (mx *Matrix) launchA8MMA(batch int, ev bool) (*event, error) {
	b := mx.b
	k, mw, err := mx.tcKernel(mx.k8m, batch)
	if err != nil {
		return nil, err
	}
	tch := b.a8MMATile(batch)
	terms := localBytes(4 * batch * 16 * (2*tch + 1))
	err = k.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(b.xq), mem(b.xs), mem(b.sx), mem(b.y), i32(mx.geo.Rows), i32(mx.prows), i32(mx.geo.PCols), i32(mx.lg), i32(mx.meta16), i32(batch), i32(tch), terms)
	if err != nil {
		return nil, err
	}
	return mx.tcLaunch(k, mw, ev)
}

const (
	tiledQ4    = 1
	tiledBits4 = 2
)

// reorder rearranges the padded activations for the tiled kernels
// (gemv.cl, "tiled kernels") and uploads the per-unit float sums (float)
// or per-group int8 sums (int8) to b.xsum or b.sx. b.mu is held.
func (mx *Matrix) reorder(xf []float32, xq []int8, xs []float32, batch int) ([]float32, []int8, error) {
	b := mx.b
	pc := mx.geo.PCols
	nu := pc / 32
	q4 := mx.tiled == tiledQ4
	if xf != nil {
		nc := (nu + 31) / 32
		b.reo.F = gpuhost.Grow(b.reo.F, batch*nc*1024)
		out := b.reo.F
		clear(out)
		per := 1
		if !q4 {
			per = 2
		}
		b.reo.S = gpuhost.Grow(b.reo.S, batch*nu*per)
		sums := b.reo.S
		for v := 0; v < batch; v++ {
			x := xf[v*pc : (v+1)*pc]
			for u := 0; u < nu; u++ {
				base := ((v*nc+u/32)*8*32 + u%32) * 4
				var s [2]float64
				for j := 0; j < 8; j++ {
					o := base + j*32*4
					for e := 0; e < 4; e++ {
						var c int
						var sc float32
						if q4 {
							// nibble e of a half-word: column 32u + 4j + e
							c, sc = 32*u+4*j+e, nibScale[e]
						} else {
							// word e of the unit, nibble i = j: shift
							// 28-4j, position 3 - j%4 in its half-word
							c, sc = (u/8)*256+32*j+4*(u%8)+e, nibScale[3-j%4]
						}
						out[o+e] = x[c] * sc
						s[j/4] += float64(x[c])
					}
				}
				if q4 {
					sums[v*nu+u] = float32(s[0] + s[1])
				} else {
					sums[2*(v*nu+u)], sums[2*(v*nu+u)+1] = float32(s[0]), float32(s[1])
				}
			}
		}
		return out, nil, put(b, &b.xsum, sums)
	}
	ng := pc / layout.GroupSize
	b.reo.Q = gpuhost.Grow(b.reo.Q, batch*pc)
	out := b.reo.Q
	b.reoSums = gpuhost.Grow(b.reoSums, batch*ng)
	sx := b.reoSums
	clear(sx)
	for v := 0; v < batch; v++ {
		x, o := xq[v*pc:(v+1)*pc], out[v*pc:(v+1)*pc]
		for c, q := range x {
			sx[v*ng+c/layout.GroupSize] += int32(q)
		}
		for i, c := range mx.a8Order() {
			o[i] = x[c]
		}
	}
	return nil, out, put(b, &b.sx, sx)
}

// a8Order returns the tiled int8 kernels' activation order (made once):
// position i of a vector's reordered activations holds column order[i].
// Q4G128: per 8 columns 0, 2, 4, 6, 1, 3, 5, 7 (low nibbles, then high).
// Bits: unit u (chunk k, words t0..t0+3), for word t the even-block
// bytes (i2, i0, i3, i1) then the odd-block bytes (i7, i5, i6, i4), i the
// nibble index (column k*256 + 32i + t).
func (mx *Matrix) a8Order() []int32 {
	if mx.order8 != nil {
		return mx.order8
	}
	pc := mx.geo.PCols
	order := make([]int32, pc)
	if mx.tiled == tiledQ4 {
		for c0 := 0; c0 < pc; c0 += 8 {
			for i := 0; i < 4; i++ {
				order[c0+i], order[c0+4+i] = int32(c0+2*i), int32(c0+2*i+1)
			}
		}
	} else {
		ev, od := [4]int{2, 0, 3, 1}, [4]int{7, 5, 6, 4}
		for u := 0; u < pc/32; u++ {
			k, t0 := u/8, 4*(u%8)
			for e := 0; e < 4; e++ {
				for j := 0; j < 4; j++ {
					order[32*u+4*e+j] = int32(k*256 + 32*ev[j] + t0 + e)
					order[32*u+16+4*e+j] = int32(k*256 + 32*od[j] + t0 + e)
				}
			}
		}
	}
	mx.order8 = order
	return order
}

// nibScale[k] is 16^-k: activations meeting nibble k of a half-word.
var nibScale = [4]float32{1, 1.0 / 16, 1.0 / 256, 1.0 / 4096}
