//go:build opencl

package opencl

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/layout"
)

// Matrix is a matrix loaded onto an OpenCL device. Multiplies are safe
// for concurrent use (the backend serializes launches); Close must not
// run concurrently with them.
type Matrix struct {
	b      *Backend
	m      layout.Matrix
	geo    gpuhost.Geometry
	perm   []int32 // act-order gather (Bits), or nil
	a8err  error   // why int8 activations are refused, or nil
	kf, k8 string  // float and int8 kernel names
	w      *buffer // weights
	sp, zp *buffer // scales, zeros (or offsets)
	prows  int     // metadata stride (Bits, Sparse12)
	lg     int32   // log2 of the group, -1 for whole-row groups
	meta16 int32   // 1: binary16 metadata
	offs   int32   // 1: Bits with offsets
	closed atomic.Bool
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

// Load validates m and copies it to the device. Q4G128, Bits and
// Sparse12 are supported; other formats are an error naming them.
func (b *Backend) Load(m layout.Matrix) (*Matrix, error) {
	if m == nil {
		return nil, fmt.Errorf("opencl: Load: nil matrix")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	mx := &Matrix{b: b, m: m, geo: gpuhost.GeometryOf(m), perm: gpuhost.Perm(m), a8err: gpuhost.CheckA8(m), lg: -1}
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
		mx.kf, mx.k8 = "q4_f32", "q4_a8"
		parts[0].p, parts[0].n = ptr(m.Weights), len(m.Weights)
		parts[1].p, parts[1].n = ptr(m.Scales), bytesOf(m.Scales)
		parts[2].p, parts[2].n = ptr(m.Zeros), len(m.Zeros)
	case *layout.Bits:
		mx.kf, mx.k8 = fmt.Sprintf("bits%d_f32", m.N), fmt.Sprintf("bits%d_a8", m.N)
		parts[0].p, parts[0].n = ptr(m.Words), bytesOf(m.Words)
		setMeta(m.GroupMeta, m.G, m.WholeRow)
		mx.prows = m.PRows
		if m.Offsets {
			mx.offs = 1
		}
	case *layout.Sparse12:
		mx.kf, mx.k8 = "sp12_f32", "sp12_a8"
		parts[0].p, parts[0].n = ptr(m.Words), bytesOf(m.Words)
		setMeta(m.GroupMeta, m.G, m.WholeRow)
		mx.prows = m.PRows
	default:
		return nil, fmt.Errorf("opencl: format %s is not implemented by the OpenCL backend", m.Name())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	bufs := []**buffer{&mx.w, &mx.sp, &mx.zp}
	for i, p := range parts {
		buf, err := b.x.newBuffer(p.n, true, b.x.dev.info.Unified)
		if err == nil {
			err = b.x.write(buf, 0, p.p, p.n)
		}
		if err != nil {
			buf.release()
			for _, q := range bufs[:i] {
				(*q).release()
			}
			return nil, fmt.Errorf("opencl: loading %s: %w", m.Name(), err)
		}
		*bufs[i] = buf
	}
	runtime.SetFinalizer(mx, (*Matrix).Close) // backstop; Close is the API
	return mx, nil
}

// Close releases the matrix's device buffers. Multiplies afterwards
// return ErrClosed; closing twice is harmless.
func (mx *Matrix) Close() error {
	if mx.closed.Swap(true) {
		return nil
	}
	runtime.SetFinalizer(mx, nil)
	mx.b.mu.Lock()
	defer mx.b.mu.Unlock()
	for _, p := range []*buffer{mx.w, mx.sp, mx.zp} {
		p.release()
	}
	return nil
}

// Kernel names the kernel set, e.g. "opencl-nvidia-h200".
func (mx *Matrix) Kernel() string { return "opencl-" + mx.b.ShortName() }

// Format returns the loaded matrix.
func (mx *Matrix) Format() layout.Matrix { return mx.m }

const prefix = "opencl"

func (mx *Matrix) checkOpen() error {
	if mx.closed.Load() {
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
	if err := mx.geo.CheckF32(prefix, len(dst), len(x), batch); err != nil {
		return err
	}
	xp := make([]float32, batch*mx.geo.PCols)
	if err := gpuhost.PadF32(xp, x, batch, mx.geo.Cols, mx.geo.PCols, mx.perm); err != nil {
		return err
	}
	return mx.run(dst, xp, nil, nil, batch)
}

// MulF16 multiplies with binary16 activations, widened exactly to
// float32 on the host.
func (mx *Matrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	if err := mx.checkOpen(); err != nil {
		return err
	}
	if err := mx.geo.CheckF32(prefix, len(dst), len(x), batch); err != nil {
		return err
	}
	xp := make([]float32, batch*mx.geo.PCols)
	if err := gpuhost.PadF16(xp, x, batch, mx.geo.Cols, mx.geo.PCols, mx.perm); err != nil {
		return err
	}
	return mx.run(dst, xp, nil, nil, batch)
}

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
	if mx.a8err != nil {
		return fmt.Errorf("opencl: %w", mx.a8err)
	}
	pc := mx.geo.PCols
	xp := make([]float32, batch*pc)
	if err := gpuhost.PadF32(xp, x, batch, mx.geo.Cols, pc, mx.perm); err != nil {
		return err
	}
	xq, xs := make([]int8, batch*pc), make([]float32, batch*pc/layout.GroupSize)
	if err := gpuhost.QuantizeBatch(xq, xs, xp, batch, pc, pc); err != nil {
		return fmt.Errorf("opencl: %w", err)
	}
	return mx.run(dst, nil, xq, xs, batch)
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
	if mx.closed.Load() {
		return ErrClosed
	}
	if xf != nil {
		buf, err := b.ensure(&b.xf, bytesOf(xf), true)
		if err != nil {
			return err
		}
		if err := b.x.write(buf, 0, ptr(xf), bytesOf(xf)); err != nil {
			return err
		}
	} else {
		bq, err := b.ensure(&b.xq, len(xq), true)
		if err != nil {
			return err
		}
		bs, err := b.ensure(&b.xs, bytesOf(xs), true)
		if err != nil {
			return err
		}
		if err := b.x.write(bq, 0, ptr(xq), len(xq)); err != nil {
			return err
		}
		if err := b.x.write(bs, 0, ptr(xs), bytesOf(xs)); err != nil {
			return err
		}
	}
	if _, err := b.ensure(&b.y, 4*batch*mx.geo.Rows, false); err != nil {
		return err
	}
	if _, err := mx.launch(xf != nil, batch, false); err != nil {
		return err
	}
	return b.x.read(b.y, 0, ptr(dst), 4*batch*mx.geo.Rows)
}

// launch sets the arguments and enqueues one multiply on the scratch
// buffers (b.mu held), optionally returning a profiling event.
func (mx *Matrix) launch(float bool, batch int, ev bool) (*event, error) {
	b := mx.b
	name := mx.k8
	if float {
		name = mx.kf
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
	switch {
	case isQ4 && float:
		err = k.setArgs(mx.w, mx.sp, mx.zp, b.xf, b.y, rows, pcols, bt, loc)
	case isQ4:
		err = k.setArgs(mx.w, mx.sp, mx.zp, b.xq, b.xs, b.y, rows, pcols, bt, loc)
	case float && name == "sp12_f32":
		err = k.setArgs(mx.w, mx.sp, mx.zp, b.xf, b.y, rows, prows, pcols, bt, mx.lg, mx.meta16, loc)
	case float:
		err = k.setArgs(mx.w, mx.sp, mx.zp, b.xf, b.y, rows, prows, pcols, bt, mx.lg, mx.meta16, mx.offs, loc)
	default:
		err = k.setArgs(mx.w, mx.sp, mx.zp, b.xq, b.xs, b.y, rows, prows, pcols, bt, mx.lg, mx.meta16, loc)
	}
	if err != nil {
		return nil, err
	}
	return b.x.launch(k, mx.geo.Rows*wg, wg, ev)
}
