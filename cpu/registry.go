package cpu

import (
	"fmt"
	"unsafe"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ggml"
)

// Mat is a matrix loaded onto a CPU backend, whatever its format. A
// multiply the format does not take (float activations on an int8
// matrix, MulI32 on a quantized one, A8 on a codebook) is an error
// wrapping errs.ErrFormatNotImplemented.
type Mat = mat.Matrix

// loaders holds the kernel files' loaders by format (filled by their
// init functions).
var loaders = mat.NewLoaders[Backend]("cpu")

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
	l, ok := loaders.Get(m.Spec().Format)
	if !ok {
		return nil, fmt.Errorf("cpu: load %s: %w", m.Name(), errs.ErrFormatNotImplemented)
	}
	return l(b, m)
}

// LoadOwned is LoadMatrix of a Bits or layout/ggml matrix whose codes
// (the Bits words, the ggml blocks) are the memory of own, a block from
// hugemem.Alloc handed over with it: the matrix uses them in place (no
// copy, with or without HugePages; ggml blocks a kernel set reads in an
// order of its own are reordered there) and frees own on Close. own is
// freed here if the load fails; the caller must not use it after the
// call either way.
func (b *Backend) LoadOwned(m layout.Matrix, own *hugemem.Block) (Mat, error) {
	if own == nil {
		return nil, fmt.Errorf("cpu: load owned: no block")
	}
	var p unsafe.Pointer // the codes' first byte
	var n int
	name := fmt.Sprintf("%T", m)
	switch m := m.(type) {
	case *layout.Bits:
		if m != nil && len(m.Words) > 0 {
			p, n, name = unsafe.Pointer(&m.Words[0]), 4*len(m.Words), m.Name()
		}
	case *ggml.Matrix:
		if m != nil && len(m.Data) > 0 {
			p, n, name = unsafe.Pointer(&m.Data[0]), len(m.Data), m.Name()
		}
	default:
		own.Free()
		return nil, fmt.Errorf("cpu: load owned: %T is neither a Bits nor a ggml matrix", m)
	}
	switch {
	case b.closed.Load():
		own.Free()
		return nil, ErrClosed
	case p == nil || n > len(own.Bytes) || p != unsafe.Pointer(&own.Bytes[0]):
		own.Free()
		return nil, fmt.Errorf("cpu: load owned %s: its codes are not the block's memory", name)
	}
	if g, ok := m.(*ggml.Matrix); ok {
		return mat.Bind(b.loadGGML(g, own))
	}
	return mat.Bind(b.loadBits(m.(*layout.Bits), own))
}

// Formats returns the formats this package has kernels for.
func Formats() []layout.FormatID {
	return loaders.Formats()
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
