package cpu

import (
	"fmt"
	"sort"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/layout"
)

// Mat is a matrix loaded onto a CPU backend, whatever its format. A
// multiply the format does not take (float activations on an int8
// matrix, MulI32 on a quantized one, A8 on a codebook) is an error
// wrapping errs.ErrFormatNotImplemented.
type Mat interface {
	// MulF32 multiplies float32 activations: x is batch*Cols values,
	// dst batch*Rows.
	MulF32(dst, x []float32, batch int) error
	// MulF16 multiplies binary16 activations, widened exactly.
	MulF16(dst []float32, x []layout.FP16, batch int) error
	// MulA8 quantizes x to int8 per 128 inputs (layout.QuantizeA8) and
	// multiplies exactly.
	MulA8(dst, x []float32, batch int) error
	// MulI8 multiplies activations already quantized with
	// layout.QuantizeA8 (xq: batch*PaddedCols, xs: batch*PaddedCols/128).
	MulI8(dst []float32, xq []int8, xs []float32, batch int) error
	// MulI32 computes dst = W x exactly in int32 for the int8 formats
	// (layout.Int8, layout/ans): x is batch*Cols values, dst batch*Rows.
	MulI32(dst []int32, x []int8, batch int) error
	// Kernel names the kernels that run the matrix.
	Kernel() string
	// Close releases what Load allocated; later multiplies return
	// ErrClosed.
	Close() error
}

// loader binds a validated matrix of one format to a backend.
type loader func(b *Backend, m layout.Matrix) (Mat, error)

// loaders holds the kernel files' loaders by format (filled by their init
// functions).
var loaders = map[layout.FormatID]loader{}

// registerLoader registers the kernels of a format; called once per
// format from the init function of the file that implements it.
func registerLoader(id layout.FormatID, l loader) {
	if _, dup := loaders[id]; dup {
		panic(fmt.Sprintf("cpu: format %v registered twice", id))
	}
	loaders[id] = l
}

// bind adapts a typed load result to (Mat, error) without a typed nil.
func bind[T Mat](m T, err error) (Mat, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

// LoadMatrix validates m and binds it to the backend with the kernels its
// format registered. A format without CPU kernels is an error wrapping
// errs.ErrFormatNotImplemented.
func (b *Backend) LoadMatrix(m layout.Matrix) (Mat, error) {
	if m == nil {
		return nil, fmt.Errorf("cpu: load: matrix is nil")
	}
	if b.closed.Load() {
		return nil, ErrClosed
	}
	if err := m.Validate(); err != nil { // before Spec: a nil matrix says so here
		return nil, err
	}
	l, ok := loaders[m.Spec().Format]
	if !ok {
		return nil, fmt.Errorf("cpu: load %s: %w", m.Name(), errs.ErrFormatNotImplemented)
	}
	return l(b, m)
}

// Formats returns the formats this package has kernels for.
func Formats() []layout.FormatID {
	out := make([]layout.FormatID, 0, len(loaders))
	for id := range loaders {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// notImplemented returns the error of a multiply format does not take.
func notImplemented(format, call string) error {
	return fmt.Errorf("cpu: %s: %s: %w", format, call, errs.ErrFormatNotImplemented)
}

// int8Only answers the float and A8 multiplies of the int8 formats, which
// multiply int8 vectors into int32 (MulI32) and have no scales.
type int8Only struct{ format string }

func (o int8Only) MulF32([]float32, []float32, int) error {
	return notImplemented(o.format, "float32 activations (int8 matrices multiply int8 vectors: MulI32)")
}

func (o int8Only) MulF16([]float32, []layout.FP16, int) error {
	return notImplemented(o.format, "binary16 activations (int8 matrices multiply int8 vectors: MulI32)")
}

func (o int8Only) MulA8([]float32, []float32, int) error {
	return notImplemented(o.format, "quantized activations (int8 matrices multiply int8 vectors: MulI32)")
}

func (o int8Only) MulI8([]float32, []int8, []float32, int) error {
	return notImplemented(o.format, "quantized activations (int8 matrices multiply int8 vectors: MulI32)")
}

// noInt32 answers MulI32 for the quantized formats.
func noInt32(format string) error {
	return notImplemented(format, "exact int32 products are for the int8 formats (Int8, ANS)")
}

var (
	_ Mat = (*Matrix)(nil)
	_ Mat = (*LowMatrix)(nil)
	_ Mat = (*CBMatrix)(nil)
	_ Mat = (*Int8Matrix)(nil)
	_ Mat = (*ANSMatrix)(nil)
)
