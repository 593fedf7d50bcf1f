// Package qgemv multiplies quantized matrices by vectors (GEMV, and skinny
// GEMM for batch 1..16) as fast as the memory system allows.
//
// The flow is: quantize (or load a .qgv file), open an engine, load the
// matrix onto it, multiply, close:
//
//	m, err := qgemv.Quantize(weights, rows, cols, layout.MinMax)
//	eng, err := qgemv.Open()            // best backend, or QGEMV_BACKEND
//	defer eng.Close()
//	mat, err := eng.Load(m)
//	err = mat.Mul(y, x, 1, qgemv.A32)   // y = W x
//
// Every entry point validates its arguments and returns an error naming
// the problem; nothing panics on bad input.
package qgemv

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/qgemv/qgemv/dispatch"
	"github.com/qgemv/qgemv/layout"
)

// Activation selects the activation type of a multiply.
type Activation int

const (
	// A32 multiplies with float32 activations (W4A32); the result is
	// within the format's named bound of the float64 reference
	// (layout.A32Tolerance for Q4G128, layout.BitsTolerance for Bits and
	// Sparse12, codebook.Tolerance, ToleranceF16 or ToleranceI16 for
	// codebooks, by the kernel's table).
	A32 Activation = iota
	// A8 quantizes the float32 activations to int8 per 128 inputs and
	// accumulates in int32 (W4A8); the result is bit-exact across
	// backends.
	A8
	// A16 names binary16 activations (Matrix.MulFP16); Mul rejects it.
	A16
)

// String returns "A32", "A8", "A16", or "Activation(n)" for other values.
func (a Activation) String() string {
	switch a {
	case A32:
		return "A32"
	case A8:
		return "A8"
	case A16:
		return "A16"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// MaxBatch is the largest number of activation vectors per multiply.
const MaxBatch = 16

// Quantize quantizes the rows x cols row-major float32 matrix w to Q4G128.
func Quantize(w []float32, rows, cols int, method layout.QuantMethod) (*layout.Q4G128, error) {
	return layout.QuantizeQ4G128(w, rows, cols, method)
}

// ErrClosed is returned by any operation on a closed engine or matrix.
var ErrClosed = errors.New("qgemv: engine or matrix is closed")

// ErrBatch is wrapped by the error of a multiply whose batch is outside
// 1..MaxBatch, whatever the backend.
var ErrBatch = errors.New("qgemv: batch must be between 1 and 16")

// checkBatch returns an error wrapping ErrBatch for a batch outside
// 1..MaxBatch; op names the method.
func checkBatch(op string, batch int) error {
	if batch < 1 || batch > MaxBatch {
		return fmt.Errorf("qgemv: %s: %w (got %d)", op, ErrBatch, batch)
	}
	return nil
}

// ErrOverlap is returned by a multiply whose output shares memory with an
// input it reads (dst with x, or with MulInt8's scales; QuantizeA8's
// scales with x): the kernels read the inputs while they write the
// output, so an in-place multiply would silently compute garbage.
var ErrOverlap = errors.New("output overlaps an input")

// overlap reports whether a and b share memory.
func overlap(a, b []float32) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b))*4 && b0 < a0+uintptr(len(a))*4
}

// Option configures Open.
type Option func(*dispatch.Options)

// WithBackend forces a backend by name: "cpu", "cpu-generic", "cpu-<isa>",
// "opencl", "cuda". It takes precedence over QGEMV_BACKEND.
func WithBackend(name string) Option { return func(o *dispatch.Options) { o.Backend = name } }

// WithThreads bounds the CPU goroutines one multiply may use.
func WithThreads(n int) Option { return func(o *dispatch.Options) { o.Threads = n } }

// WithHugePages makes Load copy each matrix into memory backed by
// transparent huge pages (Linux; CPU backend), freed by Matrix.Close.
// Streaming weights through 2 MiB pages measured about 10% faster on one
// core; the cost is the copy at load time and its memory while the
// caller still holds the original. Codebook matrices with 8-bit codes
// get instead, at load, a copy of the codes laid out for the kernel
// (transposed on AVX-512, tile-major on AVX2; see docs/KERNELS.md).
func WithHugePages(on bool) Option { return func(o *dispatch.Options) { o.HugePages = on } }

// Engine is an opened backend. It is safe for concurrent use.
type Engine struct {
	mu     sync.RWMutex
	be     dispatch.Backend
	report dispatch.Report
	closed bool

	matsMu sync.Mutex
	mats   map[*Matrix]struct{} // loaded and not yet closed
}

// Open probes the machine and opens the best backend (or the one forced by
// an option or by the environment variable QGEMV_BACKEND).
func Open(opts ...Option) (*Engine, error) {
	var o dispatch.Options
	for _, f := range opts {
		f(&o)
	}
	be, r, err := dispatch.Open(o)
	if err != nil {
		return nil, fmt.Errorf("qgemv: open: %w", err)
	}
	return &Engine{be: be, report: r, mats: map[*Matrix]struct{}{}}, nil
}

// Backend returns the name of the engine's backend, e.g. "cpu-generic".
func (e *Engine) Backend() string { return e.be.Name() }

// Report returns what the probe found and why the backend was chosen.
func (e *Engine) Report() dispatch.Report { return e.report }

// QuantizeA8 quantizes the activation vector x to int8 per 128 inputs,
// exactly as layout.QuantizeA8 specifies, in parallel: len(xq) is any
// multiple of 128 at least len(x) (the inputs past len(x) are zeros), and
// xs has one scale per 128. For MulInt8, len(xq) is the matrix's
// PaddedCols(), which some formats pad past the next multiple of 128
// (Bits3G128 at 4096 columns: 4480; Sparse12 to multiples of 256). Use it
// with MulInt8 when several matrices share one input (an FFN's gate and
// up projections). xs must not share memory with x (ErrOverlap).
func (e *Engine) QuantizeA8(xq []int8, xs []float32, x []float32) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	if overlap(xs, x) {
		return fmt.Errorf("qgemv: quantize activations: xs and x: %w", ErrOverlap)
	}
	if err := e.be.QuantizeA8(xq, xs, x); err != nil {
		return fmt.Errorf("qgemv: quantize activations: %w", err)
	}
	return nil
}

// Close releases the engine and every matrix still loaded on it; those
// matrices return ErrClosed afterwards.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.closed = true
	e.matsMu.Lock()
	mats := e.mats
	e.mats = nil
	e.matsMu.Unlock()
	var first error
	for m := range mats {
		// ErrClosed: the caller closed m concurrently, after the snapshot
		// above; it is closed either way.
		if err := m.close(false); err != nil && !errors.Is(err, ErrClosed) && first == nil {
			first = err
		}
	}
	if err := e.be.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// Matrix is a quantized matrix loaded onto an engine.
type Matrix struct {
	e          *Engine
	m          dispatch.Matrix
	rows, cols int
	pcols      int
	format     string
	mu         sync.RWMutex
	closed     bool
}

// Load validates m (a *layout.Q4G128, *layout.Bits, *layout.Sparse12 or
// *codebook.Codebook; codebook.Baseline for the dequantizing baseline
// kernel) and loads it onto the engine. The CPU backend uses m in place unless
// WithHugePages is set: do not modify it while loaded.
func (e *Engine) Load(m layout.Matrix) (*Matrix, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, ErrClosed
	}
	if v := reflect.ValueOf(m); m == nil || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return nil, errors.New("qgemv: load: matrix is nil")
	}
	dm, err := e.be.Load(m)
	if err != nil {
		return nil, fmt.Errorf("qgemv: load: %w", err)
	}
	rows, cols := m.Shape()
	mat := &Matrix{e: e, m: dm, rows: rows, cols: cols, pcols: m.PaddedCols(), format: m.Name()}
	e.matsMu.Lock()
	e.mats[mat] = struct{}{}
	e.matsMu.Unlock()
	return mat, nil
}

// Kernel names the kernel set running this matrix, e.g.
// "cpu-avx512vnni", "cpu-avx2" or "cuda-sm90".
func (m *Matrix) Kernel() string { return m.m.Kernel() }

// Format names the matrix's format, e.g. "Q4G128" or "Bits2G64".
func (m *Matrix) Format() string { return m.format }

// PaddedCols returns the int8 activations per vector MulInt8 expects
// (Cols padded as the format stores it).
func (m *Matrix) PaddedCols() int { return m.pcols }

// Rows returns the number of outputs per vector.
func (m *Matrix) Rows() int { return m.rows }

// Cols returns the number of inputs per vector.
func (m *Matrix) Cols() int { return m.cols }

func (m *Matrix) lock() (func(), error) {
	m.e.mu.RLock()
	m.mu.RLock()
	unlock := func() { m.mu.RUnlock(); m.e.mu.RUnlock() }
	if m.closed || m.e.closed {
		unlock()
		return nil, ErrClosed
	}
	return unlock, nil
}

// Mul computes dst[b*Rows+r] = sum_c W[r,c] * x[b*Cols+c] for each of the
// batch vectors (1..16), with the activation type act. dst must not share
// memory with x (ErrOverlap).
func (m *Matrix) Mul(dst, x []float32, batch int, act Activation) error {
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := checkBatch("mul", batch); err != nil {
		return err
	}
	if overlap(dst, x) {
		return fmt.Errorf("qgemv: mul: dst and x: %w", ErrOverlap)
	}
	switch act {
	case A32:
		err = m.m.MulF32(dst, x, batch)
	case A8:
		err = m.m.MulA8(dst, x, batch)
	default:
		return fmt.Errorf("qgemv: mul: unsupported activation %v for %s (use MulFP16 for A16)", act, m.format)
	}
	if err != nil {
		return fmt.Errorf("qgemv: mul: %w", err)
	}
	return nil
}

// MulFP16 multiplies binary16 activations (A16): x holds batch*Cols
// values, widened exactly to float32 (the float-path bound applies).
func (m *Matrix) MulFP16(dst []float32, x []layout.FP16, batch int) error {
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := checkBatch("mul fp16", batch); err != nil {
		return err
	}
	if err := m.m.MulF16(dst, x, batch); err != nil {
		return fmt.Errorf("qgemv: mul fp16: %w", err)
	}
	return nil
}

// MulInt8 multiplies activations already quantized with
// layout.QuantizeA8: xq has batch*PaddedCols() values, xs
// batch*PaddedCols()/128 scales. For an act-order matrix (imported
// GPTQ, layout.Bits.Perm) quantize the activations in stored column order
// (layout.Bits.Gather first); Mul does that itself. dst must not share
// memory with xs (ErrOverlap).
func (m *Matrix) MulInt8(dst []float32, xq []int8, xs []float32, batch int) error {
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := checkBatch("mul int8", batch); err != nil {
		return err
	}
	if overlap(dst, xs) {
		return fmt.Errorf("qgemv: mul int8: dst and xs: %w", ErrOverlap)
	}
	if err := m.m.MulI8(dst, xq, xs, batch); err != nil {
		return fmt.Errorf("qgemv: mul int8: %w", err)
	}
	return nil
}

// Close releases the matrix and what the backend allocated for it.
func (m *Matrix) Close() error { return m.close(true) }

func (m *Matrix) close(unregister bool) error {
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
	return m.m.Close()
}
