//go:build cuda

package cuda

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
//
// static CUresult qgPushCtx(CUcontext c) { return cuCtxPushCurrent(c); }
// static void qgPopCtx(void) { CUcontext c; cuCtxPopCurrent(&c); }
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/qgemv/qgemv/internal/devbuf"
	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/layout"
)

// The backend's work runs on its callers' goroutines, one at a time: a
// call takes the backend's lock, locks the goroutine to its OS thread,
// pushes the context for the call and pops it after, so the thread's
// context stack is as the caller had it. (An empty call costs 0.1 us on
// an H200's host; handing each call to a dedicated CUDA thread and back
// cost 0.9-1.3 us, which a host-slice multiply paid once and an FFN block
// through buffers three times.) The host
// memory a multiply needs lives in a pooled request (mulReq), so that a
// multiply allocates nothing after warm-up.

// call is one piece of the backend's work: f, or fn(r); h, when set, is
// checked for closure first, under the backend's lock.
type call struct {
	f  func() error
	fn func(*mulReq) error
	r  *mulReq
	h  *handle
}

// send runs c with the backend's context current, after the work of
// other callers (b.exec), and returns its error.
func (b *Backend) send(c call) error {
	b.exec.Lock()
	defer b.exec.Unlock()
	if b.closed {
		return ErrClosed
	}
	if c.h != nil && c.h.closed.Load() {
		return ErrClosed
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.pushCtx(); err != nil {
		return err
	}
	defer popCtx()
	if b.swiPend.n > 0 && (c.r == nil || !c.r.takesSwiGLU) {
		p := b.swiPend // deferred in a capture: queued before any other work
		b.swiPend = swiglu{}
		if err := b.queueSwiGLU(p); err != nil {
			return err
		}
	}
	if c.r == nil || !c.r.keepMemo {
		b.memoForget()
	}
	if c.fn != nil {
		return c.fn(c.r)
	}
	return c.f()
}

// pushCtx makes the backend's context current on this OS thread (the
// goroutine locked to it), above the thread's own.
func (b *Backend) pushCtx() error {
	c := *(*C.CUcontext)(unsafe.Pointer(&b.ctx)) // cu.CUContext holds just the CUcontext
	if r := C.qgPushCtx(c); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: making the context current: CUresult %d", int(r))
	}
	return nil
}

// popCtx undoes pushCtx (or the push of creating the context).
func popCtx() { C.qgPopCtx() }

// mulReq is a host-slice multiply: its arguments, and host memory for
// activations prepared before the backend call (padded or quantized) or
// in it (the float32 tensor-core split), reused across calls.
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

	// Graph.Launch and IOGraph.Run: the graph, an IOGraph's copies and
	// output (data: its input), and whether it ran
	gr  *Graph
	gio *ioCopies
	out []byte
	ok  bool

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
	// takesSwiGLU: a multiply on buffers, which may compute a SwiGLU
	// deferred in a capture (Backend.swiPend) in its activation
	// preparation (takeSwiGLU)
	takesSwiGLU bool

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
	r.gr, r.gio, r.out, r.ok = nil, nil, nil, false
	r.keepMemo, r.takesSwiGLU = false, false
	reqPool.Put(r)
}

// doReq runs fn(r) with the backend's context current.
func (b *Backend) doReq(fn func(*mulReq) error, r *mulReq) error {
	return b.send(call{fn: fn, r: r})
}

// doReq runs fn(r) with the backend's context current unless the handle
// is (by then) closed.
func (h *handle) doReq(fn func(*mulReq) error, r *mulReq) error {
	return h.b.send(call{fn: fn, r: r, h: h})
}
