//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ggml"
)

// GGMLMatrix is a layout/ggml matrix (llama.cpp's block types, as
// stored) on a CUDA device (cuda/ggml.cu): the blocks copied as they are,
// one block of 64 threads per row; A8 exactly as layout/ggml defines it
// (the integer sums in parallel, the float steps in order by one thread,
// never contracted), float activations (binary16 widened on the host)
// from the reference weights.
type GGMLMatrix struct {
	handle
	m         *ggml.Matrix
	geo       gpuhost.Geometry
	w         *buffer
	kF32, kA8 string // its kernels
}

// ggmlThreads is the block size of ggml.cu's kernels.
const ggmlThreads = 64

func init() {
	loaders.Register(layout.FormatGGML, mat.Typed("cuda", func(b *Backend, m *ggml.Matrix) (Mat, error) {
		return mat.Bind(b.LoadGGML(m))
	}))
	for _, t := range ggml.Types {
		addKernels("ggml_a8_"+t.SpecName(), "ggml_f32_"+t.SpecName())
	}
}

// LoadGGML validates m and copies its blocks to the device.
func (b *Backend) LoadGGML(m *ggml.Matrix) (*GGMLMatrix, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("cuda: load: %w", err)
	}
	c := *m
	mx := &GGMLMatrix{handle: handle{b: b}, m: &c, geo: gpuhost.GeometryOf(&c),
		kF32: "ggml_f32_" + c.Type.SpecName(), kA8: "ggml_a8_" + c.Type.SpecName()}
	if err := b.do(func() error { return uploadAll(into(&mx.w, c.Data)) }); err != nil {
		return nil, fmt.Errorf("cuda: load %s: %w", c.Name(), err)
	}
	return mx, nil
}

// Kernel names the kernels, e.g. "cuda-sm90-q6_k".
func (mx *GGMLMatrix) Kernel() string {
	return fmt.Sprintf("cuda-sm%d-%s", mx.b.arch, mx.m.Type.SpecName())
}

// Close frees the device memory; later multiplies return ErrClosed.
func (mx *GGMLMatrix) Close() error {
	if mx == nil || mx.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	return mx.close(mx.w.free)
}

// MulI32 returns an error: GGML blocks have scales.
func (mx *GGMLMatrix) MulI32([]int32, []int8, int) error {
	return fmt.Errorf("cuda: %s: exact int32 products are for the int8 formats: %w", mx.m.Name(), errs.ErrFormatNotImplemented)
}

// MulF32 multiplies float32 activations.
func (mx *GGMLMatrix) MulF32(dst, x []float32, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	r := newReq()
	defer r.free()
	r.host.F = gpuhost.Grow(r.host.F, batch*mx.geo.PCols)
	if err := gpuhost.PadF32(r.host.F, x, batch, mx.geo.Cols, mx.geo.PCols, nil); err != nil {
		return err
	}
	return mx.mulFloat(r, dst, batch)
}

// MulF16 multiplies binary16 activations, widened exactly on the host.
func (mx *GGMLMatrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	r := newReq()
	defer r.free()
	r.host.F = gpuhost.Grow(r.host.F, batch*mx.geo.PCols)
	if err := gpuhost.PadF16(r.host.F, x, batch, mx.geo.Cols, mx.geo.PCols, nil); err != nil {
		return err
	}
	return mx.mulFloat(r, dst, batch)
}

// mulFloat multiplies the padded activations in r.host.F.
func (mx *GGMLMatrix) mulFloat(r *mulReq, dst []float32, batch int) error {
	r.gm, r.dst, r.x, r.batch = mx, dst, r.host.F, batch
	return gpuhost.MulScaled(dst, r.x, batch, mx.geo.PCols, mx.geo.Rows, func() error {
		return mx.doReq(ggmlFloatReq, r)
	})
}

// ggmlFloatReq is mulFloat's work (in a backend call).
func ggmlFloatReq(r *mulReq) error {
	mx, b := r.gm, r.gm.b
	xb, err := putScratch(b, "x", r.x, true)
	if err != nil {
		return err
	}
	return mx.rows(r, func(y cu.DevicePtr) error {
		return b.launch(mx.kF32, mx.geo.Rows, 1, ggmlThreads, 0, mx.w.ptr, xb.ptr, y,
			int64(mx.geo.Rows), int64(mx.geo.PCols), int64(r.batch))
	})
}

// rows queues launch, one block per row writing y (the "y" scratch), and
// downloads the results into r.dst (in a backend call).
func (mx *GGMLMatrix) rows(r *mulReq, launch func(y cu.DevicePtr) error) error {
	b := mx.b
	yb, err := b.scratchBuf("y", 4*int64(len(r.dst)))
	if err != nil {
		return err
	}
	if err := launch(yb.ptr); err != nil {
		_ = cu.Synchronize() // queued copies finish before their staging is reused
		return err
	}
	return b.stagedDownload(yb, r.dst)
}

// MulA8 quantizes x on the host (layout.QuantizeA8) and multiplies
// bit-exactly.
func (mx *GGMLMatrix) MulA8(dst, x []float32, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	r := newReq()
	defer r.free()
	xq, xs, err := r.host.QuantizeA8("cuda", x, batch, mx.geo.Cols, mx.geo.PCols, nil)
	if err != nil {
		return err
	}
	return mx.mulI8(r, dst, xq, xs, batch)
}

// MulI8 multiplies activations quantized by layout.QuantizeA8.
func (mx *GGMLMatrix) MulI8(dst []float32, xq []int8, xs []float32, batch int) error {
	if err := mx.geo.CheckI8("cuda", len(dst), xq, xs, batch); err != nil {
		return err
	}
	r := newReq()
	defer r.free()
	return mx.mulI8(r, dst, xq, xs, batch)
}

func (mx *GGMLMatrix) mulI8(r *mulReq, dst []float32, xq []int8, xs []float32, batch int) error {
	r.gm, r.dst, r.xq, r.xs, r.batch = mx, dst, xq, xs, batch
	return mx.doReq(ggmlI8Req, r)
}

// ggmlI8Req is mulI8's work (in a backend call): the activations uploaded, one
// block per row, the results downloaded.
func ggmlI8Req(r *mulReq) error {
	mx, b := r.gm, r.gm.b
	qb, err := putScratch(b, "xq", r.xq, true)
	if err != nil {
		return err
	}
	sb, err := putScratch(b, "xs", r.xs, true)
	if err != nil {
		return err
	}
	return mx.rows(r, func(y cu.DevicePtr) error {
		return b.launch(mx.kA8, mx.geo.Rows, 1, ggmlThreads, 0, mx.w.ptr, qb.ptr, sb.ptr, y,
			int64(mx.geo.Rows), int64(mx.geo.PCols), int64(r.batch))
	})
}
