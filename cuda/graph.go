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

	"gorgonia.org/cu"

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
	b       *Backend
	g       C.CUgraph
	x       C.CUgraphExec
	gen     uint64 // b.scratchGen at capture
	pinGen  uint64 // b.pinGen at capture (IOGraph: its staging memory)
	freeGen uint64 // b.freeGen at capture
	status  bool   // a captured kernel may set the status word
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
func (b *Backend) Capture(fn func() error) (devbuf.Graph, error) {
	gr := &Graph{b: b}
	if err := b.capture(gr, fn, nil); err != nil {
		return nil, err
	}
	return gr, nil
}

// ioCopies are an IOGraph's input and output copies: nin bytes from the
// "ioin" staging memory to in first, nout bytes of out and then the
// status word to "ioout" last.
type ioCopies struct {
	in, out   cu.DevicePtr
	nin, nout int64
}

// outWord is the byte offset of the status word in "ioout".
func (c *ioCopies) outWord() int64 { return (c.nout + 3) &^ 3 }

// capture captures fn's operations, between io's copies where io is not
// nil, into gr. The host's bookkeeping of device state is set aside
// during the capture and restored after it, as nothing ran: the status
// flags, and the count of zeroed SplitK counters, which starts at zero
// so that the graph zeroes every counter it needs, whatever a launch
// finds.
func (b *Backend) capture(gr *Graph, fn func() error, io *ioCopies) error {
	if fn == nil {
		return errors.New("cuda: capture: fn is nil")
	}
	var savedStatus bool
	var savedWS int64
	var status cu.DevicePtr
	err := b.do(func() error {
		if io != nil { // staging and status word made before the capture
			sb, err := b.statusBuf()
			if err != nil {
				return err
			}
			status = sb.ptr
			if _, err := b.staging("ioin", int(io.nin)); err != nil {
				return err
			}
			if _, err := b.staging("ioout", int(io.outWord())+4); err != nil {
				return err
			}
		}
		savedStatus, savedWS = b.statusQueued, b.wsZero
		b.statusQueued, b.wsZero, b.wsUsed, b.capTags = false, 0, false, 0
		if r := C.qgBeginCapture(b.cstream()); r != C.CUDA_SUCCESS {
			b.statusQueued, b.wsZero = savedStatus, savedWS
			return fmt.Errorf("cuda: beginning a graph capture: CUresult %d", int(r))
		}
		gr.gen, gr.pinGen, gr.freeGen = b.scratchGen, b.pinGen, b.freeGen
		if io != nil && io.nin > 0 {
			if err := b.fromPinned(b.pinned["ioin"], io.in, io.nin); err != nil {
				C.qgEndCapture(b.cstream(), &gr.g, &gr.x) // ended, nothing kept
				C.qgGraphFree(gr.g, gr.x)
				gr.g, gr.x = nil, nil
				b.statusQueued, b.wsZero = savedStatus, savedWS
				return err
			}
		}
		b.capturing = true
		return nil
	})
	if err != nil {
		return err
	}
	// A panic in fn ends the capture (the stream would stay capturing,
	// the backend unusable) before it goes on.
	panicked := true
	defer func() {
		if panicked {
			_ = b.do(func() error {
				b.capturing = false
				C.qgEndCapture(b.cstream(), &gr.g, &gr.x)
				C.qgGraphFree(gr.g, gr.x)
				gr.g, gr.x = nil, nil
				b.statusQueued, b.wsZero = savedStatus, savedWS
				return nil
			})
		}
	}()
	fnErr := fn()
	panicked = false
	err = b.do(func() error { // send queued a deferred SwiGLU first
		b.capturing = false
		var ioErr error
		if io != nil && fnErr == nil {
			ioErr = b.toPinned(b.pinned["ioout"], io.out, io.nout, status, io.outWord())
		}
		r := C.qgEndCapture(b.cstream(), &gr.g, &gr.x)
		gr.status, gr.ws, gr.wsOut = b.statusQueued, b.wsUsed, b.wsZero
		b.statusQueued, b.wsZero = savedStatus, savedWS
		if ioErr != nil {
			C.qgGraphFree(gr.g, gr.x)
			gr.g, gr.x = nil, nil
			return ioErr
		}
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
		return fnErr
	}
	return err
}

// IOGraph is a Graph between a copy of the host's input into a buffer
// and a copy of a buffer and the status word to the host
// (devbuf.IOGraph): a step that writes its input, runs and reads its
// output in one launch and one wait, where Write, a graph launch and
// Read take three launches.
type IOGraph struct {
	Graph
	io ioCopies
}

var _ devbuf.IOCapturer = (*Backend)(nil)

// CaptureIO is Capture with the copies of nin bytes of host input into
// in (from its start) before fn's operations and of nout bytes of out
// after them; Run passes the host data.
func (b *Backend) CaptureIO(in devbuf.Buf, nin int64, out devbuf.Buf, nout int64, fn func() error) (devbuf.IOGraph, error) {
	if nin < 0 || nout < 0 || nin > stagingMax || nout > stagingMax {
		return nil, fmt.Errorf("%w: %d bytes in, %d out (staged copies take at most %d)", errNotCapturable, nin, nout, stagingMax)
	}
	ip, err := b.devPtr("input", in)
	if err != nil {
		return nil, err
	}
	op, err := b.devPtr("output", out)
	if err != nil {
		return nil, err
	}
	if nin > in.Size() || nout > out.Size() {
		return nil, fmt.Errorf("cuda: capture: %d bytes into a %d-byte buffer, %d from a %d-byte one", nin, in.Size(), nout, out.Size())
	}
	g := &IOGraph{Graph: Graph{b: b}, io: ioCopies{in: ip, out: op, nin: nin, nout: nout}}
	if err := b.capture(&g.Graph, fn, &g.io); err != nil {
		return nil, err
	}
	if len(g.ans) > 0 { // their status tags need the host between runs
		_ = g.Close()
		return nil, fmt.Errorf("%w: entropy-coded multiplies", errNotCapturable)
	}
	return g, nil
}

// Run copies src into the input, launches the graph, waits for it (and
// the work queued before it), copies the output into dst and returns the
// first fault the work met, as DevBuf.Read does. It returns false,
// having done nothing, when memory the graph uses moved since the
// capture, or when a buffer or matrix of the backend was closed since.
func (g *IOGraph) Run(src, dst []byte) (bool, error) {
	if int64(len(src)) != g.io.nin || int64(len(dst)) != g.io.nout {
		return false, fmt.Errorf("cuda: graph run with %d bytes in and %d out, captured with %d and %d", len(src), len(dst), g.io.nin, g.io.nout)
	}
	r := newReq()
	defer r.free()
	r.gr, r.gio, r.data, r.out = &g.Graph, &g.io, src, dst
	err := g.b.doReq(ioRunReq, r)
	return r.ok, err
}

func ioRunReq(r *mulReq) error {
	g, io, b := r.gr, r.gio, r.gr.b
	if g.closed {
		return ErrClosed
	}
	if g.stale() || g.pinGen != b.pinGen {
		return nil // r.ok stays false
	}
	hin, hout := b.pinned["ioin"], b.pinned["ioout"]
	copy(hin.bytes(len(r.data)), r.data)
	if rc := C.qgGraphLaunch(g.x, b.cstream()); rc != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: launching a graph: CUresult %d", int(rc))
	}
	r.ok = true
	if g.ws {
		b.wsZero = g.wsOut
	}
	if err := b.sync(); err != nil {
		return err
	}
	w := io.outWord()
	out := hout.bytes(int(w) + 4)
	copy(r.out, out[:io.nout])
	// the word the graph copied last holds every flag set before it
	b.statusQueued, b.statusFetched, b.statusValue = true, true, *(*uint32)(unsafe.Pointer(&out[w]))
	return b.takeStatus()
}

// Launch queues the captured operations again. It returns false, having
// queued nothing, when the backend's scratch memory moved since the
// capture, when a buffer or matrix of the backend was closed since (it
// may be one the graph reads or writes: its memory is freed), or when
// entropy-coded matrices queued since the last Wait leave the captured
// status tags naming others (capture again).
func (g *Graph) Launch() (bool, error) {
	r := newReq()
	defer r.free()
	r.gr = g
	err := g.b.doReq(launchReq, r)
	return r.ok, err
}

func launchReq(r *mulReq) error {
	g, b := r.gr, r.gr.b
	if g.closed {
		return ErrClosed
	}
	if g.stale() {
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
	if rc := C.qgGraphLaunch(g.x, b.cstream()); rc != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: launching a graph: CUresult %d", int(rc))
	}
	if g.status {
		b.statusQueued = true
		b.statusFetched = false // the graph may set it again
	}
	if g.ws {
		b.wsZero = g.wsOut
	}
	r.ok = true
	return nil
}

// Close frees the graph (with the backend's context, once the backend
// closed).
func (g *Graph) Close() error {
	if g == nil || g.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
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

// Host-slice multiplies as graphs. A host-slice multiply queues the same
// kernels with the same arguments call after call (the activations and
// results pass through the same pinned and scratch memory), so from its
// second call with one matrix, operation and batch on, its kernels are
// captured once as a graph and launched with one driver call: on an
// H200 a call took 1-5 us less (BENCHMARKS.md; internal/cudafloor
// measures the same sequences without Go). The graph is captured again
// when a scratch or pinned buffer it addresses was reallocated.

// EnvHostGraph set to 0 queues host-slice multiplies kernel by kernel.
const EnvHostGraph = "QGEMV_CUDA_HOSTGRAPH"

// hostOp names the host-slice multiply a graph holds.
type hostOp uint8

const (
	hostQueued  hostOp = iota // never captured
	hostF16                   // binary16 activations (MulF16, MulRoundedF16 rounded on the host)
	hostRounded               // float32 activations the gather rounds
	hostA8                    // float32 activations the device quantizes
	hostI8                    // int8 activations quantized on the host (mulA8Host)
)

type hostGraphKey struct {
	mx    *Matrix
	op    hostOp
	batch int
}

// hostGraph is one host-slice multiply's graph; nil x before the second
// call or when it cannot be captured (queued: never try again).
type hostGraph struct {
	g           C.CUgraph
	x           C.CUgraphExec
	gen, pinGen uint64
	queued      bool
	// ws: the graph holds a SplitK launch, which needs the first wsIn
	// words of the "ws" scratch zero (the counters it does not clear
	// itself) and leaves the first wsOut zero (splitWorkspace).
	ws          bool
	wsIn, wsOut int64
}

// hostGraphMax bounds the graphs kept: past it all are dropped.
const hostGraphMax = 64

// runHost queues enqueue(y, st), a host-slice multiply's kernels (in a
// backend call): as a graph from the second call on (captured here when there
// is none or it is stale). Entropy-coded matrices, whose decoding carries
// status tags, are queued kernel by kernel; so is a SplitK multiply when
// counters its graph expects zero may not be.
func (mx *Matrix) runHost(op hostOp, batch int, enqueue func(y, st cu.DevicePtr) error, y, st cu.DevicePtr) error {
	b := mx.b
	if op == hostQueued || b.hostGraphOff || mx.coded != nil {
		return enqueue(y, st)
	}
	k := hostGraphKey{mx, op, batch}
	hg := b.hostGraphs[k]
	if hg == nil { // first call: queued, remembered
		if len(b.hostGraphs) >= hostGraphMax {
			b.dropHostGraphs(nil)
		}
		b.hostGraphs[k] = &hostGraph{}
		return enqueue(y, st)
	}
	if hg.queued || hg.ws && b.wsZero < hg.wsIn {
		return enqueue(y, st)
	}
	if hg.x != nil && (hg.gen != b.scratchGen || hg.pinGen != b.pinGen) {
		C.qgGraphFree(hg.g, hg.x)
		hg.g, hg.x = nil, nil
	}
	if hg.x == nil && !b.captureHost(hg, enqueue, y, st) {
		return enqueue(y, st) // the capture queued nothing
	}
	if r := C.qgGraphLaunch(hg.x, b.cstream()); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: launching a graph: CUresult %d", int(r))
	}
	if hg.ws {
		b.wsZero, b.wsUsed = hg.wsOut, true
	}
	return nil
}

// captureHost captures enqueue(y, st) into hg and reports whether it
// could (in a backend call). It cannot when the capture fails or when the
// kernels would need the host's bookkeeping (a status word in device
// memory, ANS tags); hg is then marked queued. Memory reallocated during
// the capture (which fails it) leaves hg to be captured again. SplitK
// counters already zero are left out of the graph, as they are from a
// queued call (hg.wsIn).
func (b *Backend) captureHost(hg *hostGraph, enqueue func(y, st cu.DevicePtr) error, y, st cu.DevicePtr) bool {
	gen, pinGen := b.scratchGen, b.pinGen
	// Nothing runs during a capture: the bookkeeping it changes is put
	// back (the memo too, which the queued run after a failed capture
	// must not trust).
	savedStatus, savedWS, savedUsed, savedTags, savedMemo := b.statusQueued, b.wsZero, b.wsUsed, b.capTags, b.memo
	b.statusQueued, b.wsUsed, b.capTags = false, false, 0
	defer func() {
		b.statusQueued, b.wsZero, b.wsUsed, b.capTags, b.memo = savedStatus, savedWS, savedUsed, savedTags, savedMemo
		if b.scratchGen != gen { // a new "ws" may hold anything
			b.wsZero = 0
		}
	}()
	if C.qgBeginCapture(b.cstream()) != C.CUDA_SUCCESS {
		hg.queued = true
		return false
	}
	err := enqueue(y, st)
	r := C.qgEndCapture(b.cstream(), &hg.g, &hg.x)
	hg.ws, hg.wsIn, hg.wsOut = b.wsUsed, savedWS, b.wsZero
	if err != nil || r != C.CUDA_SUCCESS || b.statusQueued || b.capTags != 0 || b.scratchGen != gen || b.pinGen != pinGen {
		C.qgGraphFree(hg.g, hg.x)
		hg.g, hg.x = nil, nil
		// an error is reported by the queued run; moved memory is
		// captured again next call
		hg.queued = err == nil && b.scratchGen == gen && b.pinGen == pinGen
		return false
	}
	hg.gen, hg.pinGen = gen, pinGen
	return true
}

// dropHostGraphs frees the host-slice graphs of mx, or every one with mx
// nil (in a backend call).
func (b *Backend) dropHostGraphs(mx *Matrix) {
	for k, hg := range b.hostGraphs {
		if mx == nil || k.mx == mx {
			C.qgGraphFree(hg.g, hg.x)
			delete(b.hostGraphs, k)
		}
	}
}

// stale reports whether memory the graph may use was freed since its
// capture: scratch memory reallocated, or a buffer or matrix closed (in
// a backend call). A launch would read and write freed memory, or memory
// a later allocation reused.
func (g *Graph) stale() bool { return g.gen != g.b.scratchGen || g.freeGen != g.b.freeGen }
