// Package qgemv multiplies quantized matrices by vectors (GEMV, and skinny
// GEMM for batch 1..16) as fast as the memory system allows, on the CPU
// (AVX-512 VNNI, AVX-VNNI, AVX2 assembly, or generic Go), and with the
// build tags opencl and cuda on GPUs.
//
// The flow is: quantize (or load a .qgv file, or import a model's
// tensors), open an engine, load the matrix onto it, multiply, close:
//
//	m, err := qgemv.Quantize(weights, rows, cols, layout.MinMax)
//	eng, err := qgemv.Open()            // best backend, or QGEMV_BACKEND
//	defer eng.Close()
//	mat, err := eng.Load(m)
//	err = mat.Mul(y, x, 1, qgemv.A32)   // y = W x
//
// Every format registered in package layout (and its subpackages
// layout/codebook and layout/ans) loads with Engine.Load and multiplies
// with the same calls on every backend that has kernels for it; a backend
// without them answers with an error wrapping ErrFormatNotImplemented.
//
// # Models
//
// OpenModel memory-maps a GGUF or safetensors file (GPTQ, AWQ, HQQ, or
// float tensors quantized on load) and lists its weight matrices;
// Model.Load imports and loads them onto an engine, tensor by tensor,
// releasing the file's pages as it goes; Weights.Stages orders them for
// a decode step. SharedInput (and Engine.MulShared) multiplies the
// matrices that read one input, q/k/v or gate/up, with one activation
// quantization:
//
//	md, err := qgemv.OpenModel("model.gguf")
//	w, err := md.Load(eng)             // w.Failed() lists what did not load, and why
//	md.Close()                         // the loaded weights do not alias the file
//	for _, st := range w.Stages() {    // layer by layer: q/k/v, o, gate/up, down
//		in, err := eng.NewSharedInput(st.Matrices()...)
//		err = in.Set(x, 1, qgemv.A8)   // quantized once
//		err = in.Mul(i, y)             // each matrix i of the stage
//	}
//
// # Errors
//
// Every entry point validates its arguments and returns an error naming
// the problem; nothing panics on bad input. The sentinel errors below are
// the ones every backend wraps: test for them with errors.Is.
//
// # Concurrency
//
// Engines are independent: each owns its backend, and on the CPU its own
// worker goroutines (one per thread it may use, started on the first
// multiply that fans out, parked when idle), which Engine.Close stops.
// Engine and Matrix methods are safe for concurrent use. A multiply
// holds its engine's workers for the whole call; a multiply that finds
// them busy (another goroutine multiplying on the same engine) runs on
// fresh goroutines instead, so concurrent multiplies proceed concurrently
// rather than queue. Close waits for the multiplies in progress, then
// releases every matrix still loaded; later calls return ErrClosed. On
// GPU backends each engine has one stream (CUDA) or queue (OpenCL):
// multiplies from several goroutines are serialized on it. A Buffer's
// values are like a slice's: Buffer and buffer operations may run on
// several goroutines, but one that writes a buffer (Write, or a multiply
// or element-wise operation into it) must not run concurrently with
// another operation on that buffer; the caller orders those.
package qgemv

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/qgemv/qgemv/dispatch"
	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/layout"

	_ "github.com/qgemv/qgemv/layout/ans"      // registers the entropy-coded formats
	_ "github.com/qgemv/qgemv/layout/codebook" // registers the codebook format
)

// Activation selects the activation type of Mul.
type Activation int

const (
	// A32 multiplies float32 activations; the result is within the
	// format's named bound of the float64 reference
	// (layout.Matrix.Tolerance: layout.A32Tolerance for Q4G128,
	// layout.BitsTolerance for Bits and Sparse12, codebook.ToleranceF16
	// for codebooks).
	A32 Activation = iota
	// A8 quantizes the float32 activations to int8 per 128 inputs and
	// accumulates in int32; the result is bit-exact across backends and
	// kernel sets (layout.A8Matrix.DotA8Exact).
	A8
	// A16 rounds the float32 activations to binary16 (to nearest, ties
	// to even) and multiplies those, as MulFP16 does: the GPUs' fastest
	// float path (tensor cores), within the float bound.
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
const MaxBatch = errs.MaxBatch

// The sentinel errors every backend wraps.
var (
	// ErrClosed is returned by any operation on a closed engine or matrix.
	ErrClosed = errs.ErrClosed
	// ErrBatch is wrapped by the error of a multiply whose batch is
	// outside 1..MaxBatch.
	ErrBatch = errs.ErrBatch
	// ErrOverlap is wrapped by the error of a multiply whose output
	// shares memory with an input it reads (dst with x, or with
	// MulInt8's scales; QuantizeA8's scales with x): the kernels read the
	// inputs while they write the output, so an in-place multiply would
	// silently compute garbage.
	ErrOverlap = errs.ErrOverlap
	// ErrFormatNotImplemented is wrapped by Load's error when the engine's
	// backend has no kernels for the matrix's format, and by a multiply
	// with an activation type the format does not take (int8 activations
	// on a codebook, float activations on an int8 matrix).
	ErrFormatNotImplemented = errs.ErrFormatNotImplemented
	// ErrUnknownBackend is wrapped by Open's error for a backend name no
	// backend answers to.
	ErrUnknownBackend = errs.ErrUnknownBackend
	// ErrInvalid is returned by the methods of a nil or zero-value
	// Engine, Matrix, Buffer, Model, Weights, SharedInput or Sequence:
	// they are made by Open, Engine.Load, Engine.NewBuffer, OpenModel,
	// Model.Load, Engine.NewSharedInput and Engine.Record.
	ErrInvalid = errors.New("qgemv: nil or zero-value engine object (make it with Open, Load, NewBuffer, OpenModel, NewSharedInput or Record)")
)

// Quantize quantizes the rows x cols row-major float32 matrix w to Q4G128.
// For other formats use layout.FormatSpec.Quantize or the format's own
// quantizer (layout.QuantizeBits, codebook.Quantize, ...).
func Quantize(w []float32, rows, cols int, method layout.QuantMethod) (*layout.Q4G128, error) {
	return layout.QuantizeQ4G128(w, rows, cols, method)
}

// checkBatch returns an error wrapping ErrBatch for a batch outside
// 1..MaxBatch; op names the method.
func checkBatch(op string, batch int) error {
	if batch < 1 || batch > MaxBatch {
		return fmt.Errorf("qgemv: %s: %w (got %d)", op, ErrBatch, batch)
	}
	return nil
}

// overlap reports whether the memory of a and b intersects.
func overlap[A, B any](a []A, b []B) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b))*unsafe.Sizeof(b[0]) && b0 < a0+uintptr(len(a))*unsafe.Sizeof(a[0])
}

// Option configures Open.
type Option func(*options)

type options struct {
	backend   string
	threads   int
	hugePages bool
}

// WithBackend forces a backend by name: "cpu", "cpu-generic", "cpu-<isa>",
// "opencl[:i]", "cuda[:i]" (Probe lists them). It takes precedence over
// the environment variable EnvBackend.
func WithBackend(name string) Option { return func(o *options) { o.backend = name } }

// WithThreads bounds the CPU goroutines one multiply may use (0:
// GOMAXPROCS).
func WithThreads(n int) Option { return func(o *options) { o.threads = n } }

// WithHugePages makes Load copy each matrix into memory backed by
// transparent huge pages (Linux; CPU backend), freed by Matrix.Close:
// weights then stream without a TLB miss every 4 KiB. The cost is the
// copy at load time and its memory while the caller still holds the
// original. Codebook matrices with 8-bit codes get instead, at load, a
// copy of the codes laid out for the kernel. Model.Load converts the
// codes of exact imports into such memory on the CPU backend whatever
// this option says (docs/MODELS.md).
func WithHugePages(on bool) Option { return func(o *options) { o.hugePages = on } }

// EnvBackend is the environment variable that forces a backend when
// WithBackend is not given.
const EnvBackend = dispatch.EnvBackend

// Engine is an opened backend. It is safe for concurrent use (see the
// package doc).
type Engine struct {
	mu     sync.RWMutex // read-held by every call, write-held by Close and by a Sequence capturing
	be     dispatch.Backend
	report Report
	closed bool

	matsMu sync.Mutex
	mats   map[*Matrix]struct{} // loaded and not yet closed

	bufsMu sync.Mutex
	bufs   map[*Buffer]struct{} // allocated and not yet closed
	dev    dispatch.Device      // the backend's device memory, or nil (host buffers)
	hostMu sync.Mutex           // held by hostRun and by writes through host copies

	recMu sync.Mutex               // held by Record
	rec   atomic.Pointer[recorder] // the recording in progress, or nil

	// freeGen counts closes of buffers and matrices: a Sequence's graph
	// captured before one may address freed device memory. genMu orders
	// a graph's launch before the memory a close frees (freed).
	genMu   sync.Mutex
	freeGen uint64
}

// freed marks device memory about to be freed: graphs captured before
// are not launched again (Sequence.Run runs their operations instead).
func (e *Engine) freed() {
	e.genMu.Lock()
	e.freeGen++
	e.genMu.Unlock()
}

// Open probes the machine and opens the best backend (or the one forced by
// an option or by the environment variable EnvBackend).
func Open(opts ...Option) (*Engine, error) {
	var o options
	for _, f := range opts {
		if f != nil { // a nil option (a conditional one left unset) changes nothing
			f(&o)
		}
	}
	if o.threads < 0 { // every backend's CPU work uses it: checked before choosing one
		return nil, fmt.Errorf("qgemv: open: %d threads: want 0 (one per core) or more", o.threads)
	}
	be, r, err := dispatch.Open(dispatch.Options{Backend: o.backend, Threads: o.threads, HugePages: o.hugePages})
	if err != nil {
		return nil, fmt.Errorf("qgemv: open: %w", err)
	}
	e := &Engine{be: be, report: reportOf(r), mats: map[*Matrix]struct{}{}, bufs: map[*Buffer]struct{}{}}
	e.dev, _ = be.(dispatch.Device)
	return e, nil
}

// Backend returns the name of the engine's backend, e.g. "cpu-avx512vnni".
func (e *Engine) Backend() string {
	if e == nil || e.be == nil {
		return ""
	}
	return e.be.Name()
}

// Report returns what the probe found and why the backend was chosen.
func (e *Engine) Report() Report {
	if e == nil || e.be == nil {
		return Report{}
	}
	return e.report
}

// QuantizeA8 quantizes the activation vector x to int8 per 128 inputs,
// exactly as layout.QuantizeA8 specifies, in parallel: len(xq) is any
// multiple of 128 at least len(x) (the inputs past len(x) are zeros), and
// xs has one scale per 128. For MulInt8, len(xq) is the matrix's
// PaddedCols(), which some formats pad past the next multiple of 128
// (Bits3G128 at 4096 columns: 4480; Sparse12 to multiples of 256). Use it
// with MulInt8 when several matrices share one input (an FFN's gate and
// up projections). xs must not share memory with x (ErrOverlap).
func (e *Engine) QuantizeA8(xq []int8, xs []float32, x []float32) error {
	if e == nil || e.be == nil {
		return ErrInvalid
	}
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

// Close waits for the calls in progress, then releases the engine, its
// workers and every matrix and buffer still open on it; those return
// ErrClosed afterwards, and so does a second Close.
func (e *Engine) Close() error {
	if e == nil || e.be == nil {
		return ErrInvalid
	}
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
	e.bufsMu.Lock()
	bufs := e.bufs
	e.bufs = nil
	e.bufsMu.Unlock()
	for b := range bufs {
		_ = b.close(false) // ErrClosed: closed concurrently, closed either way
	}
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

// Load validates m (any registered format: *layout.Q4G128, *layout.Bits,
// *layout.Sparse12, *layout.Int8, *codebook.Codebook or
// codebook.Baseline, *ans.Matrix, *ans.Bits, ...) and loads it onto the
// engine. The CPU backend uses m's data in place unless WithHugePages is
// set or its kernels read the type in an order of their own (GGML Q2_K
// to Q6_K, IQ4_XS, Q5_0 and Q5_1 on the AVX2 kernel sets: a reordered
// copy): do not modify it while loaded. A format the backend has no
// kernels for is an error wrapping ErrFormatNotImplemented.
func (e *Engine) Load(m layout.Matrix) (*Matrix, error) {
	if e == nil || e.be == nil {
		return nil, ErrInvalid
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, ErrClosed
	}
	if v := reflect.ValueOf(m); m == nil || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return nil, errors.New("qgemv: load: matrix is nil")
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("qgemv: load: %w", err)
	}
	dm, err := e.be.Load(m)
	if err != nil {
		return nil, fmt.Errorf("qgemv: load: %w", err)
	}
	return e.bind(m, dm), nil
}

// ownedMemory returns, for an engine that can keep an imported matrix's
// codes where the import wrote them (the CPU backend), an allocator of n
// zero bytes of huge-page memory that keeps the block in *own, so that
// loadOwned can hand it over: the import is then the codes' only copy,
// in huge pages where the OS gives them, whatever WithHugePages says (the
// matrix is the engine's own: no caller holds an original that the
// option's copy would double). nil for every other engine.
func (e *Engine) ownedMemory(own **hugemem.Block) func(n int) []byte {
	if _, ok := e.be.(dispatch.OwnedLoader); !ok {
		return nil
	}
	return func(n int) []byte {
		if *own != nil {
			(*own).Free()
		}
		*own = hugemem.Alloc(n)
		return (*own).Bytes
	}
}

// loadOwned is Load of a matrix whose codes (Bits words, ggml blocks)
// are own's memory (from ownedMemory): the loaded matrix keeps them and
// frees own on Close; a failed load frees own at once.
func (e *Engine) loadOwned(m layout.Matrix, own *hugemem.Block) (*Matrix, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	ol, ok := e.be.(dispatch.OwnedLoader)
	switch {
	case e.closed:
		own.Free()
		return nil, ErrClosed
	case !ok:
		own.Free()
		return nil, errors.New("qgemv: load: the backend does not take huge-page memory")
	}
	dm, err := ol.LoadOwned(m, own) // validates m
	if err != nil {
		return nil, fmt.Errorf("qgemv: load: %w", err)
	}
	return e.bind(m, dm), nil
}

// bind wraps dm, m as loaded onto e, and registers it with e (e.mu held
// for reading).
func (e *Engine) bind(m layout.Matrix, dm dispatch.Matrix) *Matrix {
	rows, cols := m.Shape()
	mat := &Matrix{e: e, m: dm, rows: rows, cols: cols, pcols: m.PaddedCols(), spec: m.Spec(), format: m.Name(), bytes: m.StreamBytes()}
	if am, ok := m.(layout.A8Matrix); ok && am.IntegerZeros() == nil {
		mat.a8 = true
	}
	if p, ok := m.(layout.Permuted); ok && p.ColumnPerm() != nil {
		mat.perm = append([]int32(nil), p.ColumnPerm()...)
	}
	e.matsMu.Lock()
	e.mats[mat] = struct{}{}
	e.matsMu.Unlock()
	return mat
}
