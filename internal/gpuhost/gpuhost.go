// Package gpuhost is the backend-neutral host side of qgemv's GPU
// backends (OpenCL, CUDA): argument checks with errors that name the
// problem, activation preparation (int8 quantization of a batch, binary16
// widening, act-order gathering, padding to the stored column count) and
// metadata flattening into the plain arrays GPU kernels index. It is pure
// Go (stdlib, layout and the shared sentinel errors only) and knows
// nothing of any GPU API or other backend. For
// entropy-coded int8 matrices (layout/ans) it packs the model's decode
// table, names the kernels' status codes and checks MatVANS chains.
package gpuhost

import (
	"fmt"
	"math"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/layout"
)

// MaxBatch is the largest batch (vectors per multiply) of every backend.
const MaxBatch = errs.MaxBatch

// ErrBatch is returned (wrapped) for a batch outside 1..MaxBatch
// (errs.ErrBatch, qgemv.ErrBatch).
var ErrBatch = errs.ErrBatch

// ErrClosed is returned (wrapped) by a multiply on a closed matrix or
// backend (errs.ErrClosed, qgemv.ErrClosed).
var ErrClosed = errs.ErrClosed

// CheckBatch returns an error wrapping ErrBatch if batch is not in
// 1..MaxBatch. prefix names the caller, e.g. "opencl".
func CheckBatch(prefix string, batch int) error {
	if batch < 1 || batch > MaxBatch {
		return fmt.Errorf("%s: %w (got %d)", prefix, ErrBatch, batch)
	}
	return nil
}

// CheckLen returns an error if got != batch*per, naming the slice (what).
func CheckLen(prefix, what string, got, batch, per int) error {
	if got != batch*per {
		return fmt.Errorf("%s: %s has %d elements, want batch %d x %d = %d", prefix, what, got, batch, per, batch*per)
	}
	return nil
}

// CheckActScales rejects int8 activation scales that are negative, NaN
// or infinite (MulI8 callers pass them in).
func CheckActScales(prefix string, xs []float32) error {
	for i, s := range xs {
		if s != s || s < 0 || s > 3.4028235e38 {
			return fmt.Errorf("%s: activation scale %d is %v, want finite and >= 0", prefix, i, s)
		}
	}
	return nil
}

// Geometry is what a multiply needs to know of a matrix's shape.
type Geometry struct {
	Rows, Cols int // true shape
	PCols      int // stored (padded) columns: int8 activations per vector
}

// GeometryOf returns m's geometry.
func GeometryOf(m layout.Matrix) Geometry {
	r, c := m.Shape()
	return Geometry{Rows: r, Cols: c, PCols: m.PaddedCols()}
}

// CheckF32 checks a float multiply's batch and slice lengths: x has
// batch*Cols values (nx), dst batch*Rows.
func (g Geometry) CheckF32(prefix string, ndst, nx, batch int) error {
	if err := CheckBatch(prefix, batch); err != nil {
		return err
	}
	if err := CheckLen(prefix, "x", nx, batch, g.Cols); err != nil {
		return err
	}
	return CheckLen(prefix, "dst", ndst, batch, g.Rows)
}

// CheckI8 checks a pre-quantized int8 multiply: xq has batch*PCols
// values, xs batch*PCols/128 finite non-negative scales, dst batch*Rows.
func (g Geometry) CheckI8(prefix string, ndst int, xq []int8, xs []float32, batch int) error {
	if err := CheckBatch(prefix, batch); err != nil {
		return err
	}
	if err := CheckLen(prefix, "xq", len(xq), batch, g.PCols); err != nil {
		return err
	}
	if err := CheckLen(prefix, "xs", len(xs), batch, g.PCols/layout.GroupSize); err != nil {
		return err
	}
	if err := CheckLen(prefix, "dst", ndst, batch, g.Rows); err != nil {
		return err
	}
	return CheckActScales(prefix, xs)
}

// QuantizeBatch quantizes batch vectors of cols float32 activations
// (x, batch*cols values) with layout.QuantizeA8, vector b into
// xq[b*pcols:(b+1)*pcols] and xs[b*pcols/128:(b+1)*pcols/128], the
// padding quantized as zeros. The bytes are exactly layout.QuantizeA8's.
// A non-finite activation is an error naming the vector and the input.
func QuantizeBatch(xq []int8, xs []float32, x []float32, batch, cols, pcols int) error {
	if pcols%layout.GroupSize != 0 || cols > pcols || cols < 0 {
		return fmt.Errorf("gpuhost: QuantizeBatch: %d columns padded to %d: want a multiple of 128, at least the columns", cols, pcols)
	}
	if len(x) != batch*cols || len(xq) != batch*pcols || len(xs) != batch*pcols/layout.GroupSize {
		return fmt.Errorf("gpuhost: QuantizeBatch: x %d, xq %d, xs %d values, want %d, %d, %d",
			len(x), len(xq), len(xs), batch*cols, batch*pcols, batch*pcols/layout.GroupSize)
	}
	ng := pcols / layout.GroupSize
	for b := 0; b < batch; b++ {
		if err := layout.QuantizeA8(xq[b*pcols:(b+1)*pcols], xs[b*ng:(b+1)*ng], x[b*cols:(b+1)*cols]); err != nil {
			return fmt.Errorf("gpuhost: vector %d: %w", b, err)
		}
	}
	return nil
}

// PadF32 copies batch vectors of cols activations (x) into dst, vector b
// at dst[b*pcols:], in stored column order: dst[b*pcols+j] = x[b*cols +
// perm[j]] (perm nil: the identity), and zeroes the padding columns
// cols..pcols-1. len(perm) must be cols when not nil.
func PadF32(dst, x []float32, batch, cols, pcols int, perm []int32) error {
	return Pad(dst, x, batch, cols, pcols, perm)
}

// Pad is PadF32 for activations of any type, copied unchanged (e.g.
// binary16 activations a kernel widens itself).
func Pad[T any](dst, x []T, batch, cols, pcols int, perm []int32) error {
	if err := checkPad(len(dst), len(x), batch, cols, pcols, perm); err != nil {
		return err
	}
	for b := 0; b < batch; b++ {
		d, s := dst[b*pcols:(b+1)*pcols], x[b*cols:(b+1)*cols]
		if perm == nil {
			copy(d, s)
		} else {
			for j, p := range perm {
				d[j] = s[p]
			}
		}
		clear(d[cols:])
	}
	return nil
}

// QuantizeA8 prepares the int8 activations of a MulA8: the batch
// vectors of cols activations x gathered in stored column order (perm,
// nil: the identity) and padded to pcols (PadF32), then quantized per
// vector exactly as layout.QuantizeA8 (QuantizeBatch). A non-finite
// activation is an error naming the vector, prefixed with prefix (e.g.
// "cuda").
func QuantizeA8(prefix string, x []float32, batch, cols, pcols int, perm []int32) (xq []int8, xs []float32, err error) {
	var h Host
	return h.QuantizeA8(prefix, x, batch, cols, pcols, perm)
}

// Host is reusable host memory for the activations of multiplies: the
// slices its methods return stay valid until its next use.
type Host struct {
	F  []float32
	Q  []int8
	S  []float32
	xp []float32
}

// QuantizeA8 is the package's QuantizeA8 into h's memory (h.Q and h.S).
func (h *Host) QuantizeA8(prefix string, x []float32, batch, cols, pcols int, perm []int32) (xq []int8, xs []float32, err error) {
	h.xp = Grow(h.xp, batch*pcols)
	if err := PadF32(h.xp, x, batch, cols, pcols, perm); err != nil {
		return nil, nil, err
	}
	h.Q, h.S = Grow(h.Q, batch*pcols), Grow(h.S, batch*pcols/layout.GroupSize)
	if err := QuantizeBatch(h.Q, h.S, h.xp, batch, pcols, pcols); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", prefix, err)
	}
	return h.Q, h.S, nil
}

// Grow returns s resized to n elements, reallocated only when its
// capacity is short (the contents are not kept).
func Grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// PadF16 is PadF32 for binary16 activations, widened exactly to float32.
func PadF16(dst []float32, x []layout.FP16, batch, cols, pcols int, perm []int32) error {
	if err := checkPad(len(dst), len(x), batch, cols, pcols, perm); err != nil {
		return err
	}
	for b := 0; b < batch; b++ {
		d, s := dst[b*pcols:(b+1)*pcols], x[b*cols:(b+1)*cols]
		if perm == nil {
			layout.FromFP16s(d, s)
		} else {
			for j, p := range perm {
				d[j] = s[p].Float32()
			}
		}
		clear(d[cols:])
	}
	return nil
}

func checkPad(ndst, nx, batch, cols, pcols int, perm []int32) error {
	if cols > pcols || cols < 0 || ndst != batch*pcols || nx != batch*cols {
		return fmt.Errorf("gpuhost: pad: dst %d, x %d values for batch %d, %d columns padded to %d", ndst, nx, batch, cols, pcols)
	}
	if perm != nil {
		if len(perm) != cols {
			return fmt.Errorf("gpuhost: pad: permutation has %d entries, want %d", len(perm), cols)
		}
		for j, p := range perm {
			if p < 0 || int(p) >= cols {
				return fmt.Errorf("gpuhost: pad: permutation entry %d is %d, out of 0..%d", j, p, cols-1)
			}
		}
	}
	return nil
}

// GatherIndex returns the device gather table of a matrix with cols
// columns padded to pcols: entry c is the source column of stored column
// c (perm[c], or c without a permutation), -1 for padding. The device
// kernels that prepare activations in buffers read it.
func GatherIndex(cols, pcols int, perm []int32) []int32 {
	idx := make([]int32, pcols)
	for c := range idx {
		switch {
		case c >= cols:
			idx[c] = -1
		case perm != nil:
			idx[c] = perm[c]
		default:
			idx[c] = int32(c)
		}
	}
	return idx
}

// Perm returns the act-order permutation of m (layout.Permuted), or nil.
func Perm(m layout.Matrix) []int32 {
	if p, ok := m.(layout.Permuted); ok {
		return p.ColumnPerm()
	}
	return nil
}

// CheckA8 returns an error if m cannot multiply int8 activations: a
// format without an exact int8 path (layout.A8Matrix), or one whose zero
// points are fractional or offsets.
func CheckA8(m layout.Matrix) error {
	a, ok := m.(layout.A8Matrix)
	if !ok {
		return fmt.Errorf("%s has no int8-activation path: %w", m.Name(), errs.ErrFormatNotImplemented)
	}
	return a.IntegerZeros()
}

// Meta is a matrix's group metadata flattened to float32 and int32
// arrays, group major: the entry of (row r, group g) is at g*PRows + r.
type Meta struct {
	Groups, PRows int       // groups per row, rows padded
	G             int       // columns per group
	S             []float32 // scale s
	M             []float32 // w = q*s - M: float32(s*z), or -o with Offsets
	Z             []int32   // integer zero points (A8); nil if not integers
}

// FlattenMeta returns m's metadata (layout.Grouped) as a Meta,
// rearranged to group major and widened to float32 where stored as
// binary16.
func FlattenMeta(m layout.Matrix) (*Meta, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	gm, ok := m.(layout.Grouped)
	if !ok {
		return nil, fmt.Errorf("gpuhost: FlattenMeta: format %s has no group metadata", m.Name())
	}
	mt := newMeta(gm.Groups(), gm.PaddedRows(), gm.GroupCols(), gm.IntegerZeros() == nil)
	fill(mt, gm.Affine, gm.ZeroPoint)
	return mt, nil
}

func newMeta(groups, prows, g int, ints bool) *Meta {
	n := groups * prows
	mt := &Meta{Groups: groups, PRows: prows, G: g, S: make([]float32, n), M: make([]float32, n)}
	if ints {
		mt.Z = make([]int32, n)
	}
	return mt
}

func fill(mt *Meta, affine func(r, g int) (float32, float32), zero func(r, g int) float32) {
	for g := 0; g < mt.Groups; g++ {
		for r := 0; r < mt.PRows; r++ {
			i := g*mt.PRows + r
			mt.S[i], mt.M[i] = affine(r, g)
			if mt.Z != nil {
				mt.Z[i] = int32(zero(r, g))
			}
		}
	}
}

// MaxIters bounds the iterations of the timing helpers (TimeGEMV,
// ReadBandwidth): more would run for hours, or size a slice of times past
// memory.
const MaxIters = 1 << 20

// Use is one device-buffer operand of a queued operation: its name, the
// bytes its buffer holds and the bytes the operation touches there.
type Use struct {
	What       string
	Have, Need int64
}

// CheckUses returns an error naming the backend, the operation and the
// first operand whose buffer is smaller than the operation needs: the
// kernels would read or write past it (device memory faults, or another
// buffer's bytes). It allocates only for the error.
func CheckUses(backend, op string, uses ...Use) error {
	for _, u := range uses {
		if u.Need < 0 || u.Have < u.Need {
			return fmt.Errorf("%s: %s: %s buffer holds %d bytes, the operation needs %d", backend, op, u.What, u.Have, u.Need)
		}
	}
	return nil
}

// CheckBufs checks a device multiply's batch (CheckBatch) and its
// operands' sizes (CheckUses).
func CheckBufs(backend, op string, batch int, uses ...Use) error {
	if err := CheckBatch(backend, batch); err != nil {
		return err
	}
	return CheckUses(backend, op, uses...)
}

// CheckElementwise checks an elementwise operation's count n (0 queues
// nothing): at most 2^31-1, the kernels' int range.
func CheckElementwise(backend, op string, n int) error {
	if n < 0 || n > math.MaxInt32 {
		return fmt.Errorf("%s: %s: %d elements (want 0 to %d)", backend, op, n, math.MaxInt32)
	}
	return nil
}

// CheckScalar checks an elementwise operation's scalar (a scale, a
// requantization factor): NaN or infinite is an error.
func CheckScalar(backend, op string, v float32) error {
	if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
		return fmt.Errorf("%s: %s by %v (want finite)", backend, op, v)
	}
	return nil
}

// OutBytes is the float32 (or int32) results of batch vectors.
func (g Geometry) OutBytes(batch int) int64 { return 4 * int64(batch) * int64(g.Rows) }

// InBytes is the input of batch vectors of elem bytes per value (4:
// float32, 2: binary16, 1: int8), Cols values each.
func (g Geometry) InBytes(batch, elem int) int64 { return int64(elem) * int64(batch) * int64(g.Cols) }

// QBytes is the int8 activations of batch vectors, PCols each.
func (g Geometry) QBytes(batch int) int64 { return int64(batch) * int64(g.PCols) }

// SBytes is their float32 scales, one per 128 stored columns.
func (g Geometry) SBytes(batch int) int64 { return 4 * int64(batch) * int64((g.PCols+127)/128) }
