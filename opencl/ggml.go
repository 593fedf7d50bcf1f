//go:build opencl

package opencl

import (
	_ "embed"
	"fmt"
	"runtime"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ggml"
)

//go:embed ggml.cl
var ggmlSource string

// GGMLMatrix is a layout/ggml matrix (llama.cpp's block types, as
// stored) on an OpenCL device: the blocks are copied as they are, and
// one program per type (ggml.cl, -DGT=<type id>) multiplies them, one
// work-group per row: A8 exactly as layout/ggml defines it (the integer
// sums in parallel, the float steps in order by one work-item), float
// activations from the reference weights.
type GGMLMatrix struct {
	handle
	m   *ggml.Matrix
	geo gpuhost.Geometry
	w   *buffer
}

func init() {
	loaders.Register(layout.FormatGGML, mat.Typed("opencl", func(b *Backend, m *ggml.Matrix) (Mat, error) {
		return mat.Bind(b.LoadGGML(m))
	}))
}

// ggmlWG is the work-group size ggml.cl requires.
const ggmlWG = 64

// LoadGGML validates m and copies its blocks to the device.
func (b *Backend) LoadGGML(m *ggml.Matrix) (*GGMLMatrix, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("opencl: load: %w", err)
	}
	c := *m
	mx := &GGMLMatrix{handle: handle{b: b}, m: &c, geo: gpuhost.GeometryOf(&c)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if _, _, err := mx.kernel("ggml_a8"); err != nil { // build the type's program now: errors at Load
		return nil, err
	}
	buf, err := b.upload(c.Data)
	if err != nil {
		return nil, fmt.Errorf("opencl: load %s: %w", c.Name(), err)
	}
	mx.w = buf
	runtime.SetFinalizer(mx, (*GGMLMatrix).Close)
	return mx, nil
}

// kernel returns the type's kernel name (b.mu held).
func (mx *GGMLMatrix) kernel(name string) (*kernel, int, error) {
	b := mx.b
	ps := b.ggmlProgs[mx.m.Type]
	if ps == nil {
		opts := fmt.Sprintf("%s -DGT=%d", b.std, int(mx.m.Type))
		key := "ggml\x00" + opts
		if ps = b.progs[key]; ps == nil {
			p, err := b.buildCached(ggmlSource, opts)
			if err != nil {
				return nil, 0, err
			}
			ps = b.addProgram(key, p)
		}
		if b.ggmlProgs == nil {
			b.ggmlProgs = map[ggml.Type]*progSet{}
		}
		b.ggmlProgs[mx.m.Type] = ps
	}
	k, wg, err := b.progKernel(ps, name, ggmlWG)
	if err == nil && wg != ggmlWG {
		err = fmt.Errorf("opencl: %s: the device runs work-groups of %d, the kernels need %d", mx.m.Name(), wg, ggmlWG)
	}
	return k, wg, err
}

// Kernel names the kernels, e.g. "opencl-pocl-q6_k".
func (mx *GGMLMatrix) Kernel() string {
	return "opencl-" + mx.b.ShortName() + "-" + mx.m.Type.SpecName()
}

// Close releases the device buffer; later multiplies return ErrClosed.
func (mx *GGMLMatrix) Close() error {
	if mx == nil || mx.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	return mx.close(mx, mx.w.release)
}

// MulI32 returns an error: GGML blocks have scales.
func (mx *GGMLMatrix) MulI32([]int32, []int8, int) error {
	return fmt.Errorf("opencl: %s: exact int32 products are for the int8 formats: %w", mx.m.Name(), errs.ErrFormatNotImplemented)
}

// MulF32 multiplies float32 activations.
func (mx *GGMLMatrix) MulF32(dst, x []float32, batch int) error {
	if mx.isClosed() {
		return ErrClosed
	}
	return mulFloat(mx, mx.geo, nil, dst, x, batch, gpuhost.PadF32)
}

// MulF16 multiplies binary16 activations, widened exactly on the host.
func (mx *GGMLMatrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	if mx.isClosed() {
		return ErrClosed
	}
	return mulFloat(mx, mx.geo, nil, dst, x, batch, gpuhost.PadF16)
}

// MulA8 quantizes x on the host (layout.QuantizeA8) and multiplies
// bit-exactly.
func (mx *GGMLMatrix) MulA8(dst, x []float32, batch int) error {
	if mx.isClosed() {
		return ErrClosed
	}
	if err := mx.geo.CheckF32(prefix, len(dst), len(x), batch); err != nil {
		return err
	}
	h := hostPool.Get().(*gpuhost.Host)
	defer hostPool.Put(h)
	xq, xs, err := h.QuantizeA8("opencl", x, batch, mx.geo.Cols, mx.geo.PCols, nil)
	if err != nil {
		return err
	}
	return mx.run(dst, nil, xq, xs, batch)
}

// MulI8 multiplies activations quantized by layout.QuantizeA8.
func (mx *GGMLMatrix) MulI8(dst []float32, xq []int8, xs []float32, batch int) error {
	if mx.isClosed() {
		return ErrClosed
	}
	if err := mx.geo.CheckI8(prefix, len(dst), xq, xs, batch); err != nil {
		return err
	}
	return mx.run(dst, nil, xq, xs, batch)
}

// run uploads the activations, launches one work-group per row and reads
// the results.
func (mx *GGMLMatrix) run(dst, xf []float32, xq []int8, xs []float32, batch int) error {
	b := mx.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || mx.isClosed() {
		return ErrClosed
	}
	name := "ggml_a8"
	if xf != nil {
		name = "ggml_f32"
		if err := put(b, &b.xf, xf); err != nil {
			return err
		}
	} else {
		if err := put(b, &b.xq, xq); err != nil {
			return err
		}
		if err := put(b, &b.xs, xs); err != nil {
			return err
		}
	}
	y, err := b.ensure(&b.y, 4*batch*mx.geo.Rows, false)
	if err != nil {
		return err
	}
	k, wg, err := mx.kernel(name)
	if err != nil {
		return err
	}
	rows, pc := int32(mx.geo.Rows), int32(mx.geo.PCols)
	if xf != nil {
		err = k.setArgs(mem(mx.w), mem(b.xf), mem(y), i32(rows), i32(pc), i32(batch), localBytes(4*wg))
	} else {
		err = k.setArgs(mem(mx.w), mem(b.xq), mem(b.xs), mem(y), i32(rows), i32(pc), i32(batch), localBytes(8*wg))
	}
	if err != nil {
		return err
	}
	if _, err := b.x.launch(k, mx.geo.Rows*wg, wg, false); err != nil {
		return err
	}
	return b.x.read(y, 0, ptr(dst), 4*batch*mx.geo.Rows)
}
