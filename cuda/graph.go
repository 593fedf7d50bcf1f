//go:build cuda

package cuda

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
//
// static CUresult qgBeginCapture(CUstream s) {
// 	return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
// }
//
// // qgEndCapture ends a capture and instantiates its graph; on failure
// // nothing is left allocated.
// static CUresult qgEndCapture(CUstream s, CUgraph *g, CUgraphExec *x) {
// 	*g = NULL;
// 	*x = NULL;
// 	CUresult r = cuStreamEndCapture(s, g);
// 	if (r != CUDA_SUCCESS) {
// 		if (*g) cuGraphDestroy(*g);
// 		*g = NULL;
// 		return r;
// 	}
// 	if (*g == NULL) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
// 	r = cuGraphInstantiateWithFlags(x, *g, 0);
// 	if (r != CUDA_SUCCESS) {
// 		cuGraphDestroy(*g);
// 		*g = NULL;
// 		*x = NULL;
// 	}
// 	return r;
// }
//
// static CUresult qgGraphLaunch(CUgraphExec x, CUstream s) { return cuGraphLaunch(x, s); }
//
// static void qgGraphFree(CUgraph g, CUgraphExec x) {
// 	if (x) cuGraphExecDestroy(x);
// 	if (g) cuGraphDestroy(g);
// }
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/qgemv/qgemv/internal/devbuf"
)

// Graphs: a sequence of operations on buffers, captured once from the
// backend's stream as a CUDA graph and launched again with one driver
// call, so a recorded decode step costs one launch instead of one per
// kernel. Capture queues nothing: the operations' kernels, copies and
// memsets become the graph's nodes, which read the buffers' and scratch
// memory's addresses of the capture. The scratch memory can move later
// (a multiply needing more of it reallocates it): a graph captured
// before that is stale and Launch reports it so, to capture again.

// Graph is a captured sequence of queued operations (devbuf.Graph).
type Graph struct {
	b      *Backend
	g      C.CUgraph
	x      C.CUgraphExec
	gen    uint64 // b.scratchGen at capture
	status bool   // a captured kernel may set the status word
	// ans: the entropy-coded matrices the captured launches' status tags
	// index (the start of b.ansQueued at the capture, up to the highest
	// tag used); a launch needs them queued in that order.
	ans []ChainMat
	// ws: the captured SplitK launches leave the first wsOut words of
	// the "ws" scratch zero (their counters), whatever they found.
	ws     bool
	wsOut  int64
	closed bool
}

var _ devbuf.Capturer = (*Backend)(nil)

// errNotCapturable is Capture's error for work that cannot be a graph
// node: a wait for the device (a host run of an operation without a
// device kernel, a scratch buffer growing).
var errNotCapturable = errors.New("cuda: the operations cannot be captured as a graph")

// Capture runs fn, whose operations on this backend are captured as one
// graph instead of running: the caller must keep other goroutines from
// queueing work on the backend meanwhile. An operation that cannot be
// captured (one that waits for the device) makes fn's error or Capture's.
//
// The host's bookkeeping of device state is set aside during the capture
// and restored after it, as nothing ran: the status flags, and the count
// of zeroed SplitK counters, which starts at zero so that the graph
// zeroes every counter it needs, whatever a launch finds.
func (b *Backend) Capture(fn func() error) (devbuf.Graph, error) {
	gr := &Graph{b: b}
	var savedStatus bool
	var savedWS int64
	err := b.do(func() error {
		savedStatus, savedWS = b.statusQueued, b.wsZero
		b.statusQueued, b.wsZero, b.wsUsed, b.capTags = false, 0, false, 0
		if r := C.qgBeginCapture(b.cstream()); r != C.CUDA_SUCCESS {
			b.statusQueued, b.wsZero = savedStatus, savedWS
			return fmt.Errorf("cuda: beginning a graph capture: CUresult %d", int(r))
		}
		gr.gen = b.scratchGen
		return nil
	})
	if err != nil {
		return nil, err
	}
	fnErr := fn()
	err = b.do(func() error {
		r := C.qgEndCapture(b.cstream(), &gr.g, &gr.x)
		gr.status, gr.ws, gr.wsOut = b.statusQueued, b.wsUsed, b.wsZero
		b.statusQueued, b.wsZero = savedStatus, savedWS
		if r != C.CUDA_SUCCESS {
			return fmt.Errorf("%w (CUresult %d)", errNotCapturable, int(r))
		}
		gr.ans = slices.Clone(b.ansQueued[:b.capTags])
		return nil
	})
	if err == nil && fnErr != nil {
		_ = gr.Close()
	}
	if fnErr != nil {
		return nil, fnErr
	}
	if err != nil {
		return nil, err
	}
	return gr, nil
}

// Launch queues the captured operations again. It returns false, having
// queued nothing, when the backend's scratch memory moved since the
// capture, or when entropy-coded matrices queued since the last Wait
// leave the captured status tags naming others (capture again).
func (g *Graph) Launch() (bool, error) {
	b := g.b
	ok := false
	err := b.do(func() error {
		if g.closed {
			return ErrClosed
		}
		if g.gen != b.scratchGen {
			return nil
		}
		if len(g.ans) > 0 { // the tags must name the same matrices
			switch {
			case len(b.ansQueued) == 0:
				b.ansQueued = append(b.ansQueued, g.ans...)
			case len(b.ansQueued) < len(g.ans) || !slices.Equal(b.ansQueued[:len(g.ans)], g.ans):
				return nil
			}
		}
		if r := C.qgGraphLaunch(g.x, b.cstream()); r != C.CUDA_SUCCESS {
			return fmt.Errorf("cuda: launching a graph: CUresult %d", int(r))
		}
		if g.status {
			b.statusQueued = true
			b.statusFetched = false // the graph may set it again
		}
		if g.ws {
			b.wsZero = g.wsOut
		}
		ok = true
		return nil
	})
	return ok, err
}

// Close frees the graph (with the backend's context, once the backend
// closed).
func (g *Graph) Close() error {
	err := g.b.do(func() error {
		if g.closed {
			return ErrClosed
		}
		g.closed = true
		C.qgGraphFree(g.g, g.x)
		return nil
	})
	if errors.Is(err, ErrClosed) && g.b.isClosed() {
		return nil
	}
	return err
}

// cstream returns the backend's stream as this package's C type.
func (b *Backend) cstream() C.CUstream {
	return C.CUstream(unsafe.Pointer(b.stream.C()))
}
