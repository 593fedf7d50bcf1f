//go:build cuda

package cuda

import (
	"sync"

	"github.com/qgemv/qgemv/internal/devbuf"
	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/layout"
)

// Handing work to the CUDA thread without allocating: a call carries
// either a function (Backend.do: set-up, buffers, timing) or, for the
// host-slice multiplies, a top-level function and a pooled request
// holding the multiply's arguments and host memory, so that a multiply
// allocates nothing after warm-up (a closure capturing its arguments
// would, as it escapes to the CUDA thread).

// call is one piece of work for the CUDA thread; h, when set, is checked
// for closure on that thread first. Calls are pooled with their reply
// channel.
type call struct {
	f   func() error
	fn  func(*mulReq) error
	r   *mulReq
	h   *handle
	err chan error
}

var callPool = sync.Pool{New: func() any { return &call{err: make(chan error, 1)} }}

func newCall() *call { return callPool.Get().(*call) }

// run runs the call's work (CUDA thread).
func (c *call) run() error {
	if c.h != nil && c.h.closed.Load() {
		return ErrClosed
	}
	if c.fn != nil {
		return c.fn(c.r)
	}
	return c.f()
}

// send runs c on the CUDA thread, waits for its result and returns c to
// the pool.
func (b *Backend) send(c *call) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		*c = call{err: c.err}
		callPool.Put(c)
		return ErrClosed
	}
	b.work <- c
	b.mu.Unlock()
	err, _ := spinRecv(c.err)
	*c = call{err: c.err}
	callPool.Put(c)
	return err
}

// mulReq is a host-slice multiply: its arguments, and host memory for
// activations prepared on the caller's goroutine (padded or quantized) or on
// the CUDA thread (the float32 tensor-core split), reused across calls.
type mulReq struct {
	mx    *Matrix
	gm    *GGMLMatrix
	cm    ChainMat
	dst   []float32
	x     []float32
	xh    []layout.FP16
	xq    []int8
	xs    []float32
	batch int
	name  string // the kernel, where the caller chose it

	// buffer operations
	b     *Backend
	d     *DevBuf
	off   int64
	data  []byte
	bufs  [3]devbuf.Buf
	nbufs int
	names []string
	n     int
	arg   uint64
	// keepMemo: a buffer multiply or read, which leaves the memos of
	// earlier preparations standing (memo.go); every other request
	// forgets them.
	keepMemo bool

	host gpuhost.Host  // F: padded float32 activations; Q, S: int8 ones
	hl   []layout.FP16 // tensor-core float32 path: hi and lo halves
	xr   []layout.FP16 // ... in fragment order
	xsum []float32     // ... and their block sums (Bits)
	inv  []float32     // ... and each vector's scale
	y    []float32     // ... and the hi and lo results
}

var reqPool = sync.Pool{New: func() any { return new(mulReq) }}

func newReq() *mulReq { return reqPool.Get().(*mulReq) }

// free returns r to the pool, dropping its references to the caller's
// slices but keeping its host memory.
func (r *mulReq) free() {
	r.mx, r.gm, r.dst, r.x, r.xh, r.xq, r.xs, r.name = nil, nil, nil, nil, nil, nil, nil, ""
	r.b, r.d, r.data, r.bufs, r.names, r.cm = nil, nil, nil, [3]devbuf.Buf{}, nil, nil
	r.keepMemo = false
	reqPool.Put(r)
}

// doReq runs fn(r) on the CUDA thread.
func (b *Backend) doReq(fn func(*mulReq) error, r *mulReq) error {
	return b.send(newReqCall(fn, r, nil))
}

// doReq runs fn(r) on the CUDA thread unless the handle is (by then)
// closed.
func (h *handle) doReq(fn func(*mulReq) error, r *mulReq) error {
	return h.b.send(newReqCall(fn, r, h))
}

// newReqCall is a pooled call running fn(r), checking h (may be nil).
func newReqCall(fn func(*mulReq) error, r *mulReq, h *handle) *call {
	c := newCall()
	c.fn, c.r, c.h = fn, r, h
	return c
}
