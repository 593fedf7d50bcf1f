package qgemv

import (
	"fmt"
	"sync"

	"github.com/qgemv/qgemv/dispatch"
	"github.com/qgemv/qgemv/layout"
)

// Matrix is a matrix loaded onto an engine.
type Matrix struct {
	e          *Engine
	m          dispatch.Matrix
	rows, cols int
	pcols      int
	spec       layout.FormatSpec
	format     string
	bytes      int64
	a8         bool         // takes int8 activations (layout.A8Matrix with integer zeros)
	perm       []int32      // act-order: stored column j holds source column perm[j], or nil
	mu         sync.RWMutex // read-held by every multiply, write-held by Close
	closed     bool
}

// Kernel names the kernel set running this matrix, e.g.
// "cpu-avx512vnni", "cpu-avx2" or "cuda-sm90".
func (m *Matrix) Kernel() string {
	if m == nil || m.e == nil {
		return ""
	}
	return m.m.Kernel()
}

// Format names the matrix's format, e.g. "Q4G128" or "Bits2G64".
func (m *Matrix) Format() string {
	if m == nil || m.e == nil {
		return ""
	}
	return m.format
}

// Spec returns the matrix's format and parameters.
func (m *Matrix) Spec() layout.FormatSpec {
	if m == nil || m.e == nil {
		return layout.FormatSpec{}
	}
	return m.spec
}

// StreamBytes returns the bytes one multiply reads from the matrix.
func (m *Matrix) StreamBytes() int64 {
	if m == nil || m.e == nil {
		return 0
	}
	return m.bytes
}

// PaddedCols returns the int8 activations per vector MulInt8 expects
// (Cols padded as the format stores it).
func (m *Matrix) PaddedCols() int {
	if m == nil || m.e == nil {
		return 0
	}
	return m.pcols
}

// TakesA8 reports whether the matrix multiplies int8 activations (Mul
// with A8, MulInt8, SharedInput with A8): its format implements
// layout.A8Matrix and its zero points are integers. Imported matrices
// with offsets (GGUF Q4_1, Q4_K) and codebooks take float activations
// only.
func (m *Matrix) TakesA8() bool {
	if m == nil || m.e == nil {
		return false
	}
	return m.a8
}

// Rows returns the number of outputs per vector.
func (m *Matrix) Rows() int {
	if m == nil || m.e == nil {
		return 0
	}
	return m.rows
}

// Cols returns the number of inputs per vector.
func (m *Matrix) Cols() int {
	if m == nil || m.e == nil {
		return 0
	}
	return m.cols
}

// lock read-locks the engine and the matrix for a call (unlock
// releases them): an error, with nothing held, if either is closed (or
// the matrix nil or a zero value: ErrInvalid).
func (m *Matrix) lock() error {
	if m == nil || m.e == nil {
		return ErrInvalid
	}
	m.e.mu.RLock()
	m.mu.RLock()
	if m.closed || m.e.closed {
		m.unlock()
		return ErrClosed
	}
	return nil
}

func (m *Matrix) unlock() { m.mu.RUnlock(); m.e.mu.RUnlock() }

// Mul computes dst[b*Rows+r] = sum_c W[r,c] * x[b*Cols+c] for each of the
// batch vectors (1..16), with the activation type act. dst must not share
// memory with x (ErrOverlap).
func (m *Matrix) Mul(dst, x []float32, batch int, act Activation) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.unlock()
	if err := checkBatch("mul", batch); err != nil {
		return err
	}
	if overlap(dst, x) {
		return fmt.Errorf("qgemv: mul: dst and x: %w", ErrOverlap)
	}
	var err error
	switch act {
	case A32:
		err = m.m.MulF32(dst, x, batch)
	case A8:
		err = m.m.MulA8(dst, x, batch)
	case A16:
		err = m.mulRounded(dst, x, batch)
	default:
		return fmt.Errorf("qgemv: mul: unknown activation %v (A32, A16 or A8)", act)
	}
	if err != nil {
		return fmt.Errorf("qgemv: mul: %w", err)
	}
	return nil
}

// fp16Pool holds binary16 copies of activations (mulRounded).
var fp16Pool sync.Pool

// mulRounded multiplies x rounded to binary16 (A16): MulF16 of the
// rounded values.
func (m *Matrix) mulRounded(dst, x []float32, batch int) error {
	n := batch * m.cols
	if len(x) != n {
		return fmt.Errorf("%d activations for batch %d of %d columns", len(x), batch, m.cols)
	}
	if r, ok := m.m.(dispatch.RoundingMatrix); ok { // rounded where it computes
		return r.MulRoundedF16(dst, x, batch)
	}
	p, _ := fp16Pool.Get().(*[]layout.FP16)
	if p == nil || cap(*p) < n {
		s := make([]layout.FP16, n)
		p = &s
	}
	h := (*p)[:n]
	layout.ToFP16s(h, x[:n])
	err := m.m.MulF16(dst, h, batch)
	fp16Pool.Put(p)
	return err
}

// MulFP16 multiplies binary16 activations (A16): x holds batch*Cols
// values, widened exactly to float32 (the float-path bound applies).
func (m *Matrix) MulFP16(dst []float32, x []layout.FP16, batch int) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.unlock()
	if err := checkBatch("mul fp16", batch); err != nil {
		return err
	}
	if overlap(dst, x) {
		return fmt.Errorf("qgemv: mul fp16: dst and x: %w", ErrOverlap)
	}
	if err := m.m.MulF16(dst, x, batch); err != nil {
		return fmt.Errorf("qgemv: mul fp16: %w", err)
	}
	return nil
}

// MulInt8 multiplies activations already quantized with
// layout.QuantizeA8 (or Engine.QuantizeA8): xq has batch*PaddedCols()
// values, xs batch*PaddedCols()/128 scales. For an act-order matrix
// (imported GPTQ, layout.Permuted) quantize the activations in stored
// column order (gathered by the permutation) first; Mul does that
// itself. Other int8 values, -128 included, give the definition's exact
// product too, on every backend. dst must not share memory with xs or xq
// (ErrOverlap).
func (m *Matrix) MulInt8(dst []float32, xq []int8, xs []float32, batch int) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.unlock()
	if err := checkBatch("mul int8", batch); err != nil {
		return err
	}
	if overlap(dst, xs) || overlap(dst, xq) {
		return fmt.Errorf("qgemv: mul int8: dst and xs or xq: %w", ErrOverlap)
	}
	if err := m.m.MulI8(dst, xq, xs, batch); err != nil {
		return fmt.Errorf("qgemv: mul int8: %w", err)
	}
	return nil
}

// MulInt32 computes dst = W x exactly in int32 for the int8 formats
// (layout.Int8, and its entropy-coded form ans.Matrix): x holds
// batch*Cols int8 values, dst batch*Rows. Other formats return an error
// wrapping ErrFormatNotImplemented.
func (m *Matrix) MulInt32(dst []int32, x []int8, batch int) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.unlock()
	if err := checkBatch("mul int32", batch); err != nil {
		return err
	}
	if overlap(dst, x) {
		return fmt.Errorf("qgemv: mul int32: dst and x: %w", ErrOverlap)
	}
	if err := m.m.MulI32(dst, x, batch); err != nil {
		return fmt.Errorf("qgemv: mul int32: %w", err)
	}
	return nil
}

// gathered returns batch vectors of x in stored column order (perm), in
// *p (grown as needed).
func (m *Matrix) gathered(p *[]float32, x []float32, batch int) []float32 {
	if cap(*p) < len(x) {
		*p = make([]float32, len(x))
	}
	g := (*p)[:len(x)]
	for v := 0; v < batch; v++ {
		gather(g[v*m.cols:(v+1)*m.cols], x[v*m.cols:(v+1)*m.cols], m.perm)
	}
	return g
}

// gatherPool holds the gathered activations of act-order matrices
// (Matrix.gathered), so that quantizing them allocates nothing.
var gatherPool = sync.Pool{New: func() any { return new([]float32) }}

// gather writes x in stored column order: dst[j] = x[perm[j]].
func gather(dst, x []float32, perm []int32) {
	for j, src := range perm {
		dst[j] = x[src]
	}
}

// Close releases the matrix and what the backend allocated for it.
func (m *Matrix) Close() error {
	if m == nil || m.e == nil {
		return ErrInvalid
	}
	return m.close(true)
}

// close frees the matrix; unregister: a caller's Close, which waits for
// a Sequence capturing, as Buffer.close does.
func (m *Matrix) close(unregister bool) error {
	if unregister {
		m.e.mu.RLock()
		defer m.e.mu.RUnlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.closed = true
	if unregister {
		m.e.matsMu.Lock()
		delete(m.e.mats, m)
		m.e.matsMu.Unlock()
	}
	m.e.freed()
	return m.m.Close()
}
