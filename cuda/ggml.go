//go:build cuda

package cuda

import (
	"fmt"

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
	m   *ggml.Matrix
	geo gpuhost.Geometry
	w   *buffer
}

// ggmlThreads is the block size of ggml.cu's kernels.
const ggmlThreads = 64

func init() {
	loaders.Register(layout.FormatGGML, func(b *Backend, m layout.Matrix) (Mat, error) {
		return mat.Bind(b.LoadGGML(m.(*ggml.Matrix)))
	})
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
	mx := &GGMLMatrix{handle: handle{b: b}, m: &c, geo: gpuhost.GeometryOf(&c)}
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
func (mx *GGMLMatrix) Close() error { return mx.close(mx.w.free) }

// MulI32 returns an error: GGML blocks have scales.
func (mx *GGMLMatrix) MulI32([]int32, []int8, int) error {
	return fmt.Errorf("cuda: %s: exact int32 products are for the int8 formats: %w", mx.m.Name(), errs.ErrFormatNotImplemented)
}

// MulF32 multiplies float32 activations.
func (mx *GGMLMatrix) MulF32(dst, x []float32, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	xp := make([]float32, batch*mx.geo.PCols)
	if err := gpuhost.PadF32(xp, x, batch, mx.geo.Cols, mx.geo.PCols, nil); err != nil {
		return err
	}
	return mx.mulFloat(dst, xp, batch)
}

// MulF16 multiplies binary16 activations, widened exactly on the host.
func (mx *GGMLMatrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	xp := make([]float32, batch*mx.geo.PCols)
	if err := gpuhost.PadF16(xp, x, batch, mx.geo.Cols, mx.geo.PCols, nil); err != nil {
		return err
	}
	return mx.mulFloat(dst, xp, batch)
}

func (mx *GGMLMatrix) mulFloat(dst, xp []float32, batch int) error {
	return gpuhost.MulScaled(dst, xp, batch, mx.geo.PCols, mx.geo.Rows, func() error {
		return mx.run(dst, batch, func(b *Backend) ([]any, error) {
			xb, err := putScratch(b, "x", xp, true)
			if err != nil {
				return nil, err
			}
			return []any{xb.ptr}, nil
		}, "ggml_f32_")
	})
}

// MulA8 quantizes x on the host (layout.QuantizeA8) and multiplies
// bit-exactly.
func (mx *GGMLMatrix) MulA8(dst, x []float32, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	xq, xs, err := gpuhost.QuantizeA8("cuda", x, batch, mx.geo.Cols, mx.geo.PCols, nil)
	if err != nil {
		return err
	}
	return mx.mulI8(dst, xq, xs, batch)
}

// MulI8 multiplies activations quantized by layout.QuantizeA8.
func (mx *GGMLMatrix) MulI8(dst []float32, xq []int8, xs []float32, batch int) error {
	if err := mx.geo.CheckI8("cuda", len(dst), xq, xs, batch); err != nil {
		return err
	}
	return mx.mulI8(dst, xq, xs, batch)
}

func (mx *GGMLMatrix) mulI8(dst []float32, xq []int8, xs []float32, batch int) error {
	return mx.run(dst, batch, func(b *Backend) ([]any, error) {
		qb, err := putScratch(b, "xq", xq, true)
		if err != nil {
			return nil, err
		}
		sb, err := putScratch(b, "xs", xs, true)
		if err != nil {
			return nil, err
		}
		return []any{qb.ptr, sb.ptr}, nil
	}, "ggml_a8_")
}

// run uploads the activations (prep, CUDA thread), launches one block per
// row and downloads the results.
func (mx *GGMLMatrix) run(dst []float32, batch int, prep func(*Backend) ([]any, error), kernel string) error {
	return mx.do(func() error {
		b := mx.b
		if mx.closed.Load() {
			return ErrClosed
		}
		args, err := prep(b)
		if err != nil {
			return err
		}
		yb, err := b.scratchBuf("y", 4*int64(len(dst)))
		if err != nil {
			return err
		}
		args = append([]any{mx.w.ptr}, args...)
		args = append(args, yb.ptr, int64(mx.geo.Rows), int64(mx.geo.PCols), int64(batch))
		if err := b.launch(kernel+mx.m.Type.SpecName(), mx.geo.Rows, 1, ggmlThreads, 0, args...); err != nil {
			return err
		}
		return b.stagedDownload(yb, dst)
	})
}
