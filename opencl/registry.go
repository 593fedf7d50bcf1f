//go:build opencl

package opencl

import (
	"fmt"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
)

// Mat is a matrix loaded onto an OpenCL device, whatever its format. A
// multiply the format does not take is an error wrapping
// errs.ErrFormatNotImplemented.
type Mat = mat.Matrix

// loaders holds the kernel files' loaders by format (filled by their
// init functions).
var loaders = mat.NewLoaders[Backend]("opencl")

func init() {
	basic := func(b *Backend, m layout.Matrix) (Mat, error) { return mat.Bind(b.Load(m)) }
	for _, id := range []layout.FormatID{layout.FormatQ4G128, layout.FormatBits, layout.FormatSparse12, layout.FormatCodebook} {
		loaders.Register(id, basic)
	}
	loaders.Register(layout.FormatInt8, mat.Typed("opencl", func(b *Backend, m *layout.Int8) (Mat, error) {
		return mat.Bind(b.LoadInt8(m.W, m.Rows, m.Cols))
	}))
	loaders.Register(layout.FormatANS, mat.Typed("opencl", func(b *Backend, m *ans.Matrix) (Mat, error) {
		return mat.Bind(b.LoadANS(m))
	}))
}

// LoadMatrix validates m and copies it to the device with the kernels its
// format registered; a format without OpenCL kernels is an error wrapping
// errs.ErrFormatNotImplemented.
func (b *Backend) LoadMatrix(m layout.Matrix) (Mat, error) {
	if m == nil {
		return nil, fmt.Errorf("opencl: load: matrix is nil")
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("opencl: load: %w", err)
	}
	l, ok := loaders.Get(m.Spec().Format)
	if !ok {
		return nil, fmt.Errorf("opencl: load %s: %w", m.Name(), errs.ErrFormatNotImplemented)
	}
	return l(b, m)
}

// Formats returns the formats this backend has kernels for.
func Formats() []layout.FormatID {
	return loaders.Formats()
}

func notImplemented(format, call string) error {
	return fmt.Errorf("opencl: %s: %s: %w", format, call, errs.ErrFormatNotImplemented)
}

// int8Only answers the float and A8 multiplies of the int8 formats.
type int8Only struct{}

func (int8Only) MulF32([]float32, []float32, int) error {
	return notImplemented("int8 matrix", "float32 activations (MulI32 multiplies int8 vectors)")
}

func (int8Only) MulF16([]float32, []layout.FP16, int) error {
	return notImplemented("int8 matrix", "binary16 activations (MulI32 multiplies int8 vectors)")
}

func (int8Only) MulA8([]float32, []float32, int) error {
	return notImplemented("int8 matrix", "quantized activations (MulI32 multiplies int8 vectors)")
}

func (int8Only) MulI8([]float32, []int8, []float32, int) error {
	return notImplemented("int8 matrix", "quantized activations (MulI32 multiplies int8 vectors)")
}

// MulI32 computes dst = W x exactly for batch vectors.
func (mx *ANSMatrix) MulI32(dst []int32, x []int8, batch int) error {
	return mulI32(mx, dst, x, batch)
}

// MulI32 computes dst = W x exactly for batch vectors.
func (mx *Int8Matrix) MulI32(dst []int32, x []int8, batch int) error {
	return mulI32(mx, dst, x, batch)
}

// MulI32 returns an error: these formats have scales.
func (mx *Matrix) MulI32([]int32, []int8, int) error {
	return notImplemented(mx.m.Name(), "exact int32 products are for the int8 formats (Int8, ANS)")
}

// mulI32 checks a MulI32 call and multiplies vector by vector.
func mulI32(mx ChainMat, dst []int32, x []int8, batch int) error {
	if batch < 1 || batch > errs.MaxBatch {
		return fmt.Errorf("opencl: %w (got %d)", ErrBatch, batch)
	}
	rows, cols := mx.Rows(), mx.Cols()
	if len(x) != batch*cols || len(dst) != batch*rows {
		return fmt.Errorf("opencl: %s: x has %d values, dst %d, want batch %d x %d and %d x %d", mx.Kernel(), len(x), len(dst), batch, cols, batch, rows)
	}
	for v := 0; v < batch; v++ {
		if err := mulOne(mx, x[v*cols:(v+1)*cols], dst[v*rows:(v+1)*rows]); err != nil {
			return err
		}
	}
	return nil
}

var (
	_ Mat = (*Matrix)(nil)
	_ Mat = (*ANSMatrix)(nil)
	_ Mat = (*Int8Matrix)(nil)
)
