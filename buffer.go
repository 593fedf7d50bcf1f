package qgemv

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/qgemv/qgemv/cpu"
	"github.com/qgemv/qgemv/dispatch"
	"github.com/qgemv/qgemv/layout"
)

// ElemType is the element type of a Buffer.
type ElemType int

// The element types.
const (
	Float32 ElemType = iota // activations and results of the float and A8 multiplies
	Int8                    // int8 vectors (MulInt32Buffer inputs, Requantize outputs, quantized activations)
	Int32                   // exact int8 products (MulInt32Buffer outputs)
)

func (t ElemType) String() string {
	switch t {
	case Float32:
		return "Float32"
	case Int8:
		return "Int8"
	case Int32:
		return "Int32"
	}
	return fmt.Sprintf("ElemType(%d)", int(t))
}

// Buffer is a vector (or a batch of vectors, one after another) that
// lives where its engine computes, so that a layer's multiplies and the
// operations between them (SwiGLU, Add, Scale, Requantize) pass their
// results on without copies to and from the caller's memory. On the CPU
// backend a buffer is host memory and every operation runs when called;
// on CUDA and OpenCL it is device memory and operations are queued on
// the device in call order and return at once (those without a device
// kernel run on the host between a read and a write). The results are those of
// the host-slice calls (Mul, MulInt32) on the same values: bit-exact for
// the int8 paths, within the float bound otherwise.
//
// Operations on buffers are ordered: each sees the results of the
// operations called before it on the same engine. Read waits for them
// (Engine.Wait waits without reading) and returns the first fault the
// queued work met. A buffer belongs to its engine; Engine.Close releases
// it.
type Buffer struct {
	e   *Engine
	t   ElemType
	n   int
	dev dispatch.Buf // device memory (a dispatch.Device backend), or nil
	// The values (host buffers), or on a device the host copy that
	// operations without a device kernel run on (Engine.hostRun).
	f32    []float32
	i8     []int8
	i32    []int32
	mu     sync.RWMutex // read-held by every operation, write-held by Close
	closed bool
}

// maxBufferLen bounds a buffer's elements (2^31-1, so that every
// backend's indices, and int on 32-bit platforms, hold them).
const maxBufferLen = math.MaxInt32

// NewBuffer returns a buffer of n elements of type t, zeroed.
func (e *Engine) NewBuffer(n int, t ElemType) (*Buffer, error) {
	if e == nil || e.be == nil {
		return nil, ErrInvalid
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, ErrClosed
	}
	if n < 1 || n > maxBufferLen {
		return nil, fmt.Errorf("qgemv: new buffer: %d elements, want 1 to %d", n, maxBufferLen)
	}
	b := &Buffer{e: e, t: t, n: n}
	if t != Float32 && t != Int8 && t != Int32 {
		return nil, fmt.Errorf("qgemv: new buffer: unknown element type %v", t)
	}
	if int64(n)*int64(t.size()) > math.MaxInt { // 32-bit platforms
		return nil, fmt.Errorf("qgemv: new buffer: %d %v values are more bytes than an int holds here", n, t)
	}
	if e.dev != nil {
		d, err := e.dev.NewBuf(int64(n) * int64(t.size()))
		if err != nil {
			return nil, fmt.Errorf("qgemv: new buffer of %d %v values: %w", n, t, err)
		}
		b.dev = d
	} else {
		b.allocHost()
	}
	e.bufsMu.Lock()
	e.bufs[b] = struct{}{}
	e.bufsMu.Unlock()
	return b, nil
}

// size returns the bytes of one element.
func (t ElemType) size() int {
	switch t {
	case Int8:
		return 1
	}
	return 4
}

// allocHost allocates the host values (a device buffer's host copy on
// first use, under hostMu).
func (b *Buffer) allocHost() {
	if b.f32 != nil || b.i8 != nil || b.i32 != nil {
		return
	}
	switch b.t {
	case Float32:
		b.f32 = make([]float32, b.n)
	case Int8:
		b.i8 = make([]int8, b.n)
	case Int32:
		b.i32 = make([]int32, b.n)
	}
}

// Len returns the buffer's elements.
func (b *Buffer) Len() int {
	if b == nil || b.e == nil {
		return 0
	}
	return b.n
}

// Type returns the buffer's element type.
func (b *Buffer) Type() ElemType {
	if b == nil || b.e == nil {
		return 0
	}
	return b.t
}

// Close releases the buffer; operations on it return ErrClosed.
func (b *Buffer) Close() error {
	if b == nil || b.e == nil {
		return ErrInvalid
	}
	return b.close(true)
}

// close frees the buffer; unregister: a caller's Close, which waits for
// a Sequence capturing (it holds the engine's write lock) so that no
// memory is freed in the middle of a capture (Engine.Close, which holds
// that lock, passes false).
func (b *Buffer) close(unregister bool) error {
	if unregister {
		b.e.mu.RLock()
		defer b.e.mu.RUnlock()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	b.closed = true
	b.f32, b.i8, b.i32 = nil, nil, nil
	if b.dev != nil {
		b.e.freed()
		_ = b.dev.Close() // after the backend closed, its memory is gone with it
		b.dev = nil
	}
	if unregister {
		b.e.bufsMu.Lock()
		delete(b.e.bufs, b)
		b.e.bufsMu.Unlock()
	}
	return nil
}

// held is the locks of an operation on buffers: the engine's read lock
// (unless seq: a Sequence capturing holds the engine's write lock) and
// each distinct buffer's (at most three), released by unlock.
type held struct {
	e    *Engine
	m    *Matrix // read-locked too (lockWith), or nil
	bufs [3]*Buffer
	n    int
	seq  bool
}

func (h *held) unlock() {
	if h.m != nil {
		h.m.mu.RUnlock()
	}
	for _, b := range h.bufs[:h.n] {
		b.mu.RUnlock()
	}
	h.runlockEngine(h.e)
}

// rlockEngine read-locks the engine unless the operation runs in a
// capturing Sequence, which holds its write lock.
func (h *held) rlockEngine(e *Engine) {
	if !h.seq {
		e.mu.RLock()
	}
}

func (h *held) runlockEngine(e *Engine) {
	if !h.seq {
		e.mu.RUnlock()
	}
}

// use read-locks the engine and the buffers of an operation (each
// distinct one once), and checks that they are open, belong to e and
// have the element types want (one per buffer; at most three). On error
// nothing stays locked.
func (e *Engine) use(op string, h *held, want []ElemType, bufs ...*Buffer) error {
	h.rlockEngine(e)
	*h = held{e: e, seq: h.seq}
	if e.closed {
		h.runlockEngine(e)
		return ErrClosed
	}
	for i, b := range bufs {
		if b == nil || b.e != e {
			h.runlockEngine(e)
			return fmt.Errorf("qgemv: %s: buffer %d is nil or belongs to another engine", op, i)
		}
		if !slices.Contains(h.bufs[:h.n], b) {
			h.bufs[h.n] = b
			h.n++
		}
	}
	// Lock in address order: two operations on the same buffers in other
	// orders, each racing a Close, cannot then wait on each other.
	slices.SortFunc(h.bufs[:h.n], func(x, y *Buffer) int {
		return cmp.Compare(uintptr(unsafe.Pointer(x)), uintptr(unsafe.Pointer(y)))
	})
	for _, b := range h.bufs[:h.n] {
		b.mu.RLock()
	}
	for i, b := range bufs {
		if b.closed {
			h.unlock()
			return fmt.Errorf("qgemv: %s: buffer %d: %w", op, i, ErrClosed)
		}
		if b.t != want[i] {
			h.unlock()
			return fmt.Errorf("qgemv: %s: buffer %d holds %v, want %v", op, i, b.t, want[i])
		}
	}
	return nil
}

var (
	wantQuant   = []ElemType{Int8, Float32, Float32}
	wantMulI8   = []ElemType{Float32, Int8, Float32}
	wantMulI32  = []ElemType{Int32, Int8}
	wantRequant = []ElemType{Int8, Int32}
	wantF32     = []ElemType{Float32}
	wantI8      = []ElemType{Int8}
	wantI32     = []ElemType{Int32}
	wantF32x3   = []ElemType{Float32, Float32, Float32}
)

// Write copies src into the buffer from element 0 (len(src) at most
// Len). src may be reused as soon as Write returns.
func (b *Buffer) Write(src []float32) error { return write(b, wantF32, src) }

// WriteInt8 copies src into an Int8 buffer.
func (b *Buffer) WriteInt8(src []int8) error { return write(b, wantI8, src) }

// WriteInt32 copies src into an Int32 buffer.
func (b *Buffer) WriteInt32(src []int32) error { return write(b, wantI32, src) }

// write copies src into b's first elements.
func write[T int8 | int32 | float32](b *Buffer, want []ElemType, src []T) error {
	if b == nil || b.e == nil {
		return ErrInvalid
	}
	var h held
	if err := b.e.use("buffer write", &h, want, b); err != nil {
		return err
	}
	defer h.unlock()
	if len(src) > b.n {
		return fmt.Errorf("qgemv: buffer write: %d values into %d", len(src), b.n)
	}
	if b.dev != nil {
		return devErr("buffer write", b.dev.Write(0, asBytes(src)))
	}
	copy(b.hostBytes(), asBytes(src))
	return nil
}

// WriteFP16 writes binary16 values, widened exactly, into a Float32
// buffer.
func (b *Buffer) WriteFP16(src []layout.FP16) error {
	if b == nil || b.e == nil {
		return ErrInvalid
	}
	var h held
	if err := b.e.use("buffer write", &h, wantF32, b); err != nil {
		return err
	}
	defer h.unlock()
	if len(src) > b.n {
		return fmt.Errorf("qgemv: buffer write: %d values into %d", len(src), b.n)
	}
	if b.dev != nil {
		b.e.hostMu.Lock()
		defer b.e.hostMu.Unlock()
		b.allocHost()
	}
	layout.FromFP16s(b.f32, src)
	if b.dev != nil {
		return devErr("buffer write", b.dev.Write(0, asBytes(b.f32[:len(src)])))
	}
	return nil
}

// Read waits for the operations queued before it and copies the
// buffer's first len(dst) elements (at most Len) into dst.
func (b *Buffer) Read(dst []float32) error { return read(b, wantF32, dst) }

// ReadInt8 is Read for an Int8 buffer.
func (b *Buffer) ReadInt8(dst []int8) error { return read(b, wantI8, dst) }

// ReadInt32 is Read for an Int32 buffer.
func (b *Buffer) ReadInt32(dst []int32) error { return read(b, wantI32, dst) }

func read[T int8 | int32 | float32](b *Buffer, want []ElemType, dst []T) error {
	if b == nil || b.e == nil {
		return ErrInvalid
	}
	var h held
	if err := b.e.use("buffer read", &h, want, b); err != nil {
		return err
	}
	defer h.unlock()
	if len(dst) > b.n {
		return fmt.Errorf("qgemv: buffer read: %d values from %d", len(dst), b.n)
	}
	if b.dev != nil {
		return devErr("buffer read", b.dev.Read(0, asBytes(dst)))
	}
	copy(asBytes(dst), b.hostBytes())
	return nil
}

// Wait waits for every operation queued on the engine's buffers and
// returns the first error one of them met after it was queued (a NaN
// reaching a quantization or a corrupted stream on a GPU), clearing it.
func (e *Engine) Wait() error {
	if e == nil || e.be == nil {
		return ErrInvalid
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	if e.dev != nil {
		return devErr("wait", e.dev.Wait())
	}
	return nil
}

// asBytes views a slice of fixed-size values as bytes.
func asBytes[T int8 | int32 | float32](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// hostBytes is b's host values as bytes.
func (b *Buffer) hostBytes() []byte {
	switch b.t {
	case Int8:
		return asBytes(b.i8)
	case Int32:
		return asBytes(b.i32)
	}
	return asBytes(b.f32)
}

// devErr wraps a device operation's error.
func devErr(op string, err error) error {
	if err != nil {
		return fmt.Errorf("qgemv: %s: %w", op, err)
	}
	return nil
}

// onDevice reports whether a device operation's result err settles the
// operation (done), and the error to return; ErrNoDevicePath leaves it
// to the host (Engine.hostRun).
func onDevice(op string, err error) (done bool, _ error) {
	if errors.Is(err, dispatch.ErrNoDevicePath) {
		return false, nil
	}
	return true, devErr(op, err)
}

// hostRun runs an operation that has no device kernel on the host
// copies of device buffers: it reads every buffer (waiting for the work
// queued before; the outputs too, as f may write only part of them),
// runs f and writes the outputs (the first nout buffers) back. Host runs
// are serialized: they share the buffers' host copies.
func (e *Engine) hostRun(op string, f func() error, nout int, bufs ...*Buffer) error {
	e.hostMu.Lock()
	defer e.hostMu.Unlock()
	for _, b := range bufs {
		b.allocHost()
		if err := b.dev.Fetch(0, b.hostBytes()); err != nil {
			return devErr(op, err)
		}
	}
	if err := f(); err != nil {
		return err
	}
	for _, b := range bufs[:nout] {
		if err := b.dev.Write(0, b.hostBytes()); err != nil {
			return devErr(op, err)
		}
	}
	return nil
}

// MulBuffer queues dst = W x for batch vectors with the activation type
// act (A32, A16 or A8): x holds batch*Cols values (at least: the first
// batch*Cols are read), dst receives batch*Rows. The results equal Mul's
// on the same values.
func (m *Matrix) MulBuffer(dst, x *Buffer, batch int, act Activation) error {
	if m == nil || m.e == nil {
		return ErrInvalid
	}
	return m.mulBuffer(false, dst, x, batch, act)
}

// mulBuffer is MulBuffer; seq: run by a Sequence that holds the engine's lock
// (Sequence.capture).
func (m *Matrix) mulBuffer(seq bool, dst, x *Buffer, batch int, act Activation) error {
	h := held{seq: seq}
	if err := m.lockWith("mul buffer", &h, wantF32x3[:2], dst, x); err != nil {
		return err
	}
	defer h.unlock()
	if err := checkBatch("mul buffer", batch); err != nil {
		return err
	}
	if dst == x {
		return fmt.Errorf("qgemv: mul buffer: dst and x: %w", ErrOverlap)
	}
	if err := bufLens("mul buffer", dst.n, x.n, batch*m.rows, batch*m.cols); err != nil {
		return err
	}
	if act != A32 && act != A16 && act != A8 {
		return fmt.Errorf("qgemv: mul buffer: unknown activation %v", act)
	}
	if !seq && m.e.rec.Load() != nil && m.e.record(func(seq bool) error { return m.mulBuffer(seq, dst, x, batch, act) }) {
		return nil
	}
	if m.e.dev != nil {
		err := dispatch.ErrNoDevicePath
		if dm, ok := m.m.(dispatch.DeviceMatrix); ok {
			switch act {
			case A16:
				err = dm.MulF16Buf(dst.dev, x.dev, batch)
			case A8:
				err = dm.MulA8Buf(dst.dev, x.dev, batch)
			}
		}
		if done, err := onDevice("mul buffer", err); done {
			return err
		}
		return m.e.hostRun("mul buffer", func() error { return m.mulHost(dst.f32, x.f32, batch, act) }, 1, dst, x)
	}
	return m.mulHost(dst.f32, x.f32, batch, act)
}

// mulHost is MulBuffer on host values.
func (m *Matrix) mulHost(dst, x []float32, batch int, act Activation) error {
	dst, x = dst[:batch*m.rows], x[:batch*m.cols]
	var err error
	switch act {
	case A32:
		err = m.m.MulF32(dst, x, batch)
	case A8:
		err = m.m.MulA8(dst, x, batch)
	default:
		err = m.mulRounded(dst, x, batch)
	}
	if err != nil {
		return fmt.Errorf("qgemv: mul buffer: %w", err)
	}
	return nil
}

// QuantizeBuffer queues the quantization of batch vectors of x (Cols of
// m values each, the gather of an act-order matrix applied) to int8 per
// 128 inputs as layout.QuantizeA8 specifies: xq receives
// batch*PaddedCols int8 values, xs batch*PaddedCols/128 scales. Every
// matrix with m's PaddedCols and column order (an FFN's gate and up
// projections) then multiplies them with MulInt8Buffer: one quantization
// for all of them.
func (m *Matrix) QuantizeBuffer(xq, xs, x *Buffer, batch int) error {
	if m == nil || m.e == nil {
		return ErrInvalid
	}
	return m.quantizeBuffer(false, xq, xs, x, batch)
}

// quantizeBuffer is QuantizeBuffer; seq: run by a Sequence that holds the engine's lock
// (Sequence.capture).
func (m *Matrix) quantizeBuffer(seq bool, xq, xs, x *Buffer, batch int) error {
	h := held{seq: seq}
	if err := m.lockWith("quantize buffer", &h, wantQuant, xq, xs, x); err != nil {
		return err
	}
	defer h.unlock()
	if err := checkBatch("quantize buffer", batch); err != nil {
		return err
	}
	if xs == x {
		return fmt.Errorf("qgemv: quantize buffer: xs and x: %w", ErrOverlap)
	}
	pc, g := m.pcols, m.pcols/layout.GroupSize
	if xq.n < batch*pc || xs.n < batch*g || x.n < batch*m.cols {
		return fmt.Errorf("qgemv: quantize buffer: xq %d, xs %d, x %d values for batch %d of %d columns padded to %d",
			xq.n, xs.n, x.n, batch, m.cols, pc)
	}
	if !seq && m.e.rec.Load() != nil && m.e.record(func(seq bool) error { return m.quantizeBuffer(seq, xq, xs, x, batch) }) {
		return nil
	}
	if m.e.dev != nil {
		err := dispatch.ErrNoDevicePath
		if dm, ok := m.m.(dispatch.DeviceMatrix); ok {
			err = dm.QuantizeBuf(xq.dev, xs.dev, x.dev, batch)
		}
		if done, err := onDevice("quantize buffer", err); done {
			return err
		}
		return m.e.hostRun("quantize buffer", func() error { return m.quantizeHost(xq, xs, x, batch) }, 2, xq, xs, x)
	}
	return m.quantizeHost(xq, xs, x, batch)
}

// quantizeHost is QuantizeBuffer on host values.
func (m *Matrix) quantizeHost(xq, xs, x *Buffer, batch int) error {
	pc, g := m.pcols, m.pcols/layout.GroupSize
	xv := x.f32[:batch*m.cols]
	if m.perm != nil {
		p := gatherPool.Get().(*[]float32)
		defer gatherPool.Put(p)
		xv = m.gathered(p, xv, batch)
	}
	for v := 0; v < batch; v++ {
		if err := m.e.be.QuantizeA8(xq.i8[v*pc:(v+1)*pc], xs.f32[v*g:(v+1)*g], xv[v*m.cols:(v+1)*m.cols]); err != nil {
			return fmt.Errorf("qgemv: quantize buffer: vector %d: %w", v, err)
		}
	}
	return nil
}

// MulInt8Buffer queues dst = W x for activations quantized by
// QuantizeBuffer (xq: batch*PaddedCols, xs: batch*PaddedCols/128).
func (m *Matrix) MulInt8Buffer(dst, xq, xs *Buffer, batch int) error {
	if m == nil || m.e == nil {
		return ErrInvalid
	}
	return m.mulInt8Buffer(false, dst, xq, xs, batch)
}

// mulInt8Buffer is MulInt8Buffer; seq: run by a Sequence that holds the engine's lock
// (Sequence.capture).
func (m *Matrix) mulInt8Buffer(seq bool, dst, xq, xs *Buffer, batch int) error {
	h := held{seq: seq}
	if err := m.lockWith("mul int8 buffer", &h, wantMulI8, dst, xq, xs); err != nil {
		return err
	}
	defer h.unlock()
	if err := checkBatch("mul int8 buffer", batch); err != nil {
		return err
	}
	if dst == xs {
		return fmt.Errorf("qgemv: mul int8 buffer: dst and xs: %w", ErrOverlap)
	}
	pc, g := m.pcols, m.pcols/layout.GroupSize
	if dst.n < batch*m.rows || xq.n < batch*pc || xs.n < batch*g {
		return fmt.Errorf("qgemv: mul int8 buffer: dst %d, xq %d, xs %d values for batch %d of %dx%d (padded columns %d)",
			dst.n, xq.n, xs.n, batch, m.rows, m.cols, pc)
	}
	if !seq && m.e.rec.Load() != nil && m.e.record(func(seq bool) error { return m.mulInt8Buffer(seq, dst, xq, xs, batch) }) {
		return nil
	}
	if m.e.dev != nil {
		err := dispatch.ErrNoDevicePath
		if dm, ok := m.m.(dispatch.DeviceMatrix); ok {
			err = dm.MulI8Buf(dst.dev, xq.dev, xs.dev, batch)
		}
		if done, err := onDevice("mul int8 buffer", err); done {
			return err
		}
		return m.e.hostRun("mul int8 buffer", func() error { return m.mulInt8Host(dst, xq, xs, batch) }, 1, dst, xq, xs)
	}
	return m.mulInt8Host(dst, xq, xs, batch)
}

// mulInt8Host is MulInt8Buffer on host values.
func (m *Matrix) mulInt8Host(dst, xq, xs *Buffer, batch int) error {
	pc, g := m.pcols, m.pcols/layout.GroupSize
	if err := m.m.MulI8(dst.f32[:batch*m.rows], xq.i8[:batch*pc], xs.f32[:batch*g], batch); err != nil {
		return fmt.Errorf("qgemv: mul int8 buffer: %w", err)
	}
	return nil
}

// MulInt32Buffer queues dst = W x exactly for the int8 formats: x is an
// Int8 buffer of batch*Cols values, dst an Int32 buffer of batch*Rows.
func (m *Matrix) MulInt32Buffer(dst, x *Buffer, batch int) error {
	if m == nil || m.e == nil {
		return ErrInvalid
	}
	return m.mulInt32Buffer(false, dst, x, batch)
}

// mulInt32Buffer is MulInt32Buffer; seq: run by a Sequence that holds the engine's lock
// (Sequence.capture).
func (m *Matrix) mulInt32Buffer(seq bool, dst, x *Buffer, batch int) error {
	h := held{seq: seq}
	if err := m.lockWith("mul int32 buffer", &h, wantMulI32, dst, x); err != nil {
		return err
	}
	defer h.unlock()
	if err := checkBatch("mul int32 buffer", batch); err != nil {
		return err
	}
	if err := bufLens("mul int32 buffer", dst.n, x.n, batch*m.rows, batch*m.cols); err != nil {
		return err
	}
	if !seq && m.e.rec.Load() != nil && m.e.record(func(seq bool) error { return m.mulInt32Buffer(seq, dst, x, batch) }) {
		return nil
	}
	if m.e.dev != nil {
		err := dispatch.ErrNoDevicePath
		if dm, ok := m.m.(dispatch.DeviceMatrix); ok {
			err = dm.MulI32Buf(dst.dev, x.dev, batch)
		}
		if done, err := onDevice("mul int32 buffer", err); done {
			return err
		}
		return m.e.hostRun("mul int32 buffer", func() error { return m.mulInt32Host(dst, x, batch) }, 1, dst, x)
	}
	return m.mulInt32Host(dst, x, batch)
}

// mulInt32Host is MulInt32Buffer on host values.
func (m *Matrix) mulInt32Host(dst, x *Buffer, batch int) error {
	if err := m.m.MulI32(dst.i32[:batch*m.rows], x.i8[:batch*m.cols], batch); err != nil {
		return fmt.Errorf("qgemv: mul int32 buffer: %w", err)
	}
	return nil
}

// bufLens checks that dst and x hold at least the values a multiply
// writes and reads.
func bufLens(op string, ndst, nx, wantDst, wantX int) error {
	if ndst < wantDst || nx < wantX {
		return fmt.Errorf("qgemv: %s: dst holds %d values, x %d; the multiply writes %d and reads %d", op, ndst, nx, wantDst, wantX)
	}
	return nil
}

// lockWith read-locks the engine, the buffers (Engine.use) and the
// matrix of a multiply on buffers.
func (m *Matrix) lockWith(op string, h *held, want []ElemType, bufs ...*Buffer) error {
	if err := m.e.use(op, h, want, bufs...); err != nil {
		return err
	}
	m.mu.RLock()
	h.m = m
	if m.closed {
		h.unlock()
		return ErrClosed
	}
	return nil
}

// elementwise checks an element-wise operation's buffers, dst and its one
// or two inputs: every buffer open (not nil), of this engine and type
// Float32, and the inputs at least as long as dst.
func (e *Engine) elementwise(op string, h *held, dst *Buffer, ins ...*Buffer) error {
	var all [3]*Buffer
	all[0] = dst
	bufs := all[:1+copy(all[1:], ins)]
	if err := e.use(op, h, wantF32x3[:len(bufs)], bufs...); err != nil {
		return err
	}
	for i, in := range bufs[1:] {
		if in.n < dst.n {
			h.unlock()
			return fmt.Errorf("qgemv: %s: input %d holds %d values, dst %d", op, i, in.n, dst.n)
		}
	}
	return nil
}

// SwiGLU queues dst[i] = silu(gate[i]) * up[i] = gate[i] / (1 +
// exp(-gate[i])) * up[i] over dst's length, the activation between an
// FFN's gate and up projections and its down projection (float32; each
// backend within a few ulps). dst may be gate or up.
func (e *Engine) SwiGLU(dst, gate, up *Buffer) error {
	if e == nil || e.be == nil {
		return ErrInvalid
	}
	return e.swiGLU(false, dst, gate, up)
}

// swiGLU is SwiGLU; seq: run by a Sequence that holds the engine's lock
// (Sequence.capture).
func (e *Engine) swiGLU(seq bool, dst, gate, up *Buffer) error {
	h := held{seq: seq}
	if err := e.elementwise("swiglu", &h, dst, gate, up); err != nil {
		return err
	}
	defer h.unlock()
	if !seq && e.rec.Load() != nil && e.record(func(seq bool) error { return e.swiGLU(seq, dst, gate, up) }) {
		return nil
	}
	if e.dev != nil {
		if done, err := onDevice("swiglu", e.dev.SwiGLU(dst.dev, gate.dev, up.dev, dst.n)); done {
			return err
		}
		return e.hostRun("swiglu", func() error { return cpu.SwiGLU(dst.f32, gate.f32, up.f32) }, 1, dst, gate, up)
	}
	return cpu.SwiGLU(dst.f32, gate.f32, up.f32)
}

// Add queues dst[i] = a[i] + b[i] over dst's length (the residual
// connection). dst may be a or b.
func (e *Engine) Add(dst, a, b *Buffer) error {
	if e == nil || e.be == nil {
		return ErrInvalid
	}
	return e.addBuffers(false, dst, a, b)
}

// addBuffers is Add; seq: run by a Sequence that holds the engine's lock
// (Sequence.capture).
func (e *Engine) addBuffers(seq bool, dst, a, b *Buffer) error {
	h := held{seq: seq}
	if err := e.elementwise("add", &h, dst, a, b); err != nil {
		return err
	}
	defer h.unlock()
	if !seq && e.rec.Load() != nil && e.record(func(seq bool) error { return e.addBuffers(seq, dst, a, b) }) {
		return nil
	}
	if e.dev != nil {
		if done, err := onDevice("add", e.dev.Add(dst.dev, a.dev, b.dev, dst.n)); done {
			return err
		}
		return e.hostRun("add", func() error { add(dst.f32, a.f32, b.f32); return nil }, 1, dst, a, b)
	}
	add(dst.f32, a.f32, b.f32)
	return nil
}

func add(d, x, y []float32) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		d[i] = x[i] + y[i]
	}
}

// Scale queues dst[i] = s * a[i] over dst's length. dst may be a. A NaN
// or infinite s is an error, as Requantize's and Chain's scales are.
func (e *Engine) Scale(dst, a *Buffer, s float32) error {
	if e == nil || e.be == nil {
		return ErrInvalid
	}
	if f := float64(s); math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("qgemv: scale: factor %v", s)
	}
	return e.scaleBuffer(false, dst, a, s)
}

// scaleBuffer is Scale; seq: run by a Sequence that holds the engine's lock
// (Sequence.capture).
func (e *Engine) scaleBuffer(seq bool, dst, a *Buffer, s float32) error {
	h := held{seq: seq}
	if err := e.elementwise("scale", &h, dst, a); err != nil {
		return err
	}
	defer h.unlock()
	if !seq && e.rec.Load() != nil && e.record(func(seq bool) error { return e.scaleBuffer(seq, dst, a, s) }) {
		return nil
	}
	if e.dev != nil {
		if done, err := onDevice("scale", e.dev.Scale(dst.dev, a.dev, s, dst.n)); done {
			return err
		}
		return e.hostRun("scale", func() error { scale(dst.f32, a.f32, s); return nil }, 1, dst, a)
	}
	scale(dst.f32, a.f32, s)
	return nil
}

func scale(d, x []float32, s float32) {
	x = x[:len(d)]
	for i := range d {
		d[i] = s * x[i]
	}
}

// Requantize queues dst = round_half_even(alpha * src) clamped to int8
// (layout.Requantize: the MatVANS chain's step) over dst's length: src
// an Int32 buffer, dst an Int8 one.
func (e *Engine) Requantize(dst, src *Buffer, alpha float32) error {
	if e == nil || e.be == nil {
		return ErrInvalid
	}
	return e.requantize(false, dst, src, alpha)
}

// requantize is Requantize; seq: run by a Sequence that holds the engine's lock
// (Sequence.capture).
func (e *Engine) requantize(seq bool, dst, src *Buffer, alpha float32) error {
	h := held{seq: seq}
	if err := e.use("requantize", &h, wantRequant, dst, src); err != nil {
		return err
	}
	defer h.unlock()
	if src.n < dst.n {
		return fmt.Errorf("qgemv: requantize: src holds %d values, dst %d", src.n, dst.n)
	}
	if a := float64(alpha); math.IsNaN(a) || math.IsInf(a, 0) {
		return fmt.Errorf("qgemv: requantize: alpha is %v", alpha)
	}
	if !seq && e.rec.Load() != nil && e.record(func(seq bool) error { return e.requantize(seq, dst, src, alpha) }) {
		return nil
	}
	if e.dev != nil {
		if done, err := onDevice("requantize", e.dev.Requantize(dst.dev, src.dev, alpha, dst.n)); done {
			return err
		}
		return e.hostRun("requantize", func() error { return layout.Requantize(dst.i8, src.i32[:dst.n], alpha) }, 1, dst, src)
	}
	return layout.Requantize(dst.i8, src.i32[:dst.n], alpha)
}

// ReadTime returns the device time of the backend's read kernel over
// bytes (at least 1 MiB), buffers of that size rotated past the device's
// cache, iters reads back to back: what a multiply streaming that many
// bytes is measured against. Backends without a device read kernel (the
// CPU, OpenCL) return an error.
func (e *Engine) ReadTime(bytes int64, iters int) (time.Duration, error) {
	if e == nil || e.be == nil {
		return 0, ErrInvalid
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return 0, ErrClosed
	}
	if bytes < 1<<20 || iters < 1 {
		return 0, fmt.Errorf("qgemv: read time: %d bytes, %d iterations: want at least 1 MiB and one iteration", bytes, iters)
	}
	rt, ok := e.be.(dispatch.ReadTimer)
	if !ok {
		return 0, fmt.Errorf("qgemv: read time: backend %s does not time a read kernel", e.be.Name())
	}
	s, err := rt.ReadTime(bytes, iters)
	if err != nil {
		return 0, fmt.Errorf("qgemv: read time: %w", err)
	}
	return time.Duration(s * 1e9), nil
}

// KernelTime returns the device time of one multiply by mats' kernels
// alone: iters launches back to back, rotating over mats (matrices of
// one shape and format on this engine; give enough of them that they
// exceed the device's cache), with activation act and batch, the
// activations uploaded once. It is what the API's multiplies are
// measured against (qgemv bench prints both). Backends that do not time
// kernels alone (the CPU) return an error.
func (e *Engine) KernelTime(mats []*Matrix, act Activation, batch, iters int) (time.Duration, error) {
	if e == nil || e.be == nil {
		return 0, ErrInvalid
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return 0, ErrClosed
	}
	kt, ok := e.be.(dispatch.KernelTimer)
	if !ok {
		return 0, fmt.Errorf("qgemv: kernel time: backend %s does not time kernels alone", e.be.Name())
	}
	if len(mats) == 0 || iters < 1 {
		return 0, fmt.Errorf("qgemv: kernel time: %d matrices, %d iterations", len(mats), iters)
	}
	dm := make([]dispatch.Matrix, len(mats))
	for i, m := range mats {
		if m == nil || m.e != e {
			return 0, fmt.Errorf("qgemv: kernel time: matrix %d is nil or loaded on another engine", i)
		}
		dm[i] = m.m
	}
	s, err := kt.KernelTime(dm, act.String(), batch, iters)
	if err != nil {
		return 0, fmt.Errorf("qgemv: kernel time: %w", err)
	}
	return time.Duration(s * 1e9), nil
}
