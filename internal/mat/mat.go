// Package mat holds what the backend packages (cpu, opencl, cuda)
// share without importing dispatch: the interface of a loaded matrix and
// the per-format registry of their loaders.
package mat

import (
	"fmt"
	"slices"

	"github.com/qgemv/qgemv/layout"
)

// Matrix is a matrix loaded onto a backend, whatever its format
// (dispatch.Matrix, cpu.Mat, opencl.Mat and cuda.Mat are this type). A
// multiply the format does not take is an error wrapping
// errs.ErrFormatNotImplemented.
type Matrix interface {
	// MulF32 multiplies float32 activations: x is batch*Cols values,
	// dst batch*Rows.
	MulF32(dst, x []float32, batch int) error
	// MulF16 multiplies binary16 activations.
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

// Loaders holds one backend's loaders (B: its backend type) by format,
// registered by the init functions of its kernel files.
type Loaders[B any] struct {
	backend string
	m       map[layout.FormatID]func(*B, layout.Matrix) (Matrix, error)
}

// NewLoaders returns an empty registry; backend names it in panics.
func NewLoaders[B any](backend string) *Loaders[B] {
	return &Loaders[B]{backend: backend, m: map[layout.FormatID]func(*B, layout.Matrix) (Matrix, error){}}
}

// Register adds the loader of a format; a second one for the same
// format panics (a programming error).
func (l *Loaders[B]) Register(id layout.FormatID, load func(*B, layout.Matrix) (Matrix, error)) {
	if _, dup := l.m[id]; dup {
		panic(fmt.Sprintf("%s: format %v registered twice", l.backend, id))
	}
	l.m[id] = load
}

// Get returns the loader of a format.
func (l *Loaders[B]) Get(id layout.FormatID) (func(*B, layout.Matrix) (Matrix, error), bool) {
	load, ok := l.m[id]
	return load, ok
}

// Formats returns the registered formats in order.
func (l *Loaders[B]) Formats() []layout.FormatID {
	out := make([]layout.FormatID, 0, len(l.m))
	for id := range l.m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Bind adapts a typed load result to (Matrix, error) without a typed nil.
func Bind[T Matrix](m T, err error) (Matrix, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Typed adapts a loader of one concrete layout type T: a matrix that
// reports T's format but is another type (a caller's type embedding a
// layout matrix, say) is an error naming both, not a failed type
// assertion.
func Typed[B any, T layout.Matrix](backend string, load func(*B, T) (Matrix, error)) func(*B, layout.Matrix) (Matrix, error) {
	return func(b *B, m layout.Matrix) (Matrix, error) {
		t, ok := m.(T)
		if !ok {
			var want T
			return nil, fmt.Errorf("%s: load: a matrix of format %v must be a %T, not a %T", backend, m.Spec().Format, want, m)
		}
		return load(b, t)
	}
}
