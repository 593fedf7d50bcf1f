package qgemv

import (
	"errors"
	"fmt"
	"sync"

	"github.com/qgemv/qgemv/dispatch"
)

// Sequence is a recorded series of operations on buffers (multiplies,
// quantizations, SwiGLU, Add, Scale, Requantize) that Run queues again,
// in order, with the buffers' current contents: a decode step recorded
// once and replayed per token.
//
// On a backend that captures graphs (CUDA), the first Run queues the
// operations and then captures them as one graph, and later Runs launch
// that graph with one driver call instead of one per kernel, while no
// buffer or matrix of the engine was closed since and the backend's
// scratch memory stayed in place (else Run queues the operations and
// captures them again). Operations that cannot be captured (host runs
// of operations without device kernels, entropy-coded matrices that wait
// for their decoder) keep the sequence on queued operations.
type Sequence struct {
	e      *Engine
	ops    []func(seq bool) error
	mu     sync.Mutex
	closed bool

	graph   dispatch.Graph // captured ops, or nil
	gen     uint64         // e.freeGen at the capture
	noGraph bool           // capturing failed: the ops run every time

	// io: the ops captured with RunIO's copies (ioIn, ioOut, nx and ny
	// values), or nil; ioGen is e.freeGen at that capture; noIO: that
	// capture failed, RunIO runs Write, Run and Read.
	io          dispatch.IOGraph
	ioIn, ioOut *Buffer
	ioNX, ioNY  int
	ioGen       uint64
	noIO        bool
}

// recorder collects the operations of a Record call.
type recorder struct {
	mu  sync.Mutex
	ops []func(seq bool) error
}

// Record calls fn and records the buffer operations it makes on the
// engine instead of running them; they are validated as they are
// recorded (a bad one is fn's error to return) and run by
// Sequence.Run. Operations from other goroutines while fn runs are
// recorded too: record from one goroutine at a time (a Record while
// another is in progress, fn's own included, is an error). Host reads
// and writes (Buffer.Read, Write) are not recorded: they run. If fn
// panics, the recording ends (the engine runs operations again) and the
// panic goes on.
func (e *Engine) Record(fn func() error) (*Sequence, error) {
	if e == nil || e.be == nil {
		return nil, ErrInvalid
	}
	if fn == nil {
		return nil, errors.New("qgemv: record: fn is nil")
	}
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return nil, ErrClosed
	}
	e.mu.RUnlock()
	if !e.recMu.TryLock() {
		return nil, errors.New("qgemv: record: another recording is in progress on this engine (Record is not reentrant)")
	}
	defer e.recMu.Unlock()
	r := &recorder{}
	e.rec.Store(r)
	defer e.rec.Store(nil)
	err := fn()
	e.rec.Store(nil)
	if err != nil {
		return nil, fmt.Errorf("qgemv: record: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ops) == 0 {
		return nil, errors.New("qgemv: record: no operation was recorded")
	}
	return &Sequence{e: e, ops: r.ops}, nil
}

// record appends op to the recording in progress and reports whether
// there was one (then the caller returns without running it).
func (e *Engine) record(op func(seq bool) error) bool {
	r := e.rec.Load()
	if r == nil {
		return false
	}
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
	return true
}

// errNoRecord is the error of a Sequence not made by Engine.Record.
var errNoRecord = errors.New("qgemv: sequence: not made by Engine.Record")

// Run queues the recorded operations in order. A buffer or matrix closed
// since recording makes Run fail with ErrClosed at that operation, the
// ones before it queued.
func (s *Sequence) Run() error {
	if s == nil {
		return ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.e == nil {
		return errNoRecord
	}
	return s.run()
}

// run is Run with s.mu held.
func (s *Sequence) run() error {
	if s.graph != nil {
		launched, err := s.launch()
		if launched {
			return nil
		}
		_ = s.graph.Close() // stale or failed: queue the operations, capture again
		s.graph = nil
		if err != nil {
			return err
		}
	}
	for i, op := range s.ops {
		if err := op(false); err != nil {
			return fmt.Errorf("qgemv: sequence operation %d: %w", i, err)
		}
	}
	s.capture()
	return nil
}

// launch launches the captured graph if nothing it uses was freed since
// the capture; false: run and capture the operations again.
func (s *Sequence) launch() (bool, error) {
	e := s.e
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return false, ErrClosed
	}
	e.genMu.Lock()
	defer e.genMu.Unlock()
	if e.freeGen != s.gen {
		return false, nil
	}
	ok, err := s.graph.Launch()
	if err != nil {
		return false, fmt.Errorf("qgemv: sequence: %w", err)
	}
	return ok, nil
}

// capture captures the operations as a graph where the backend can,
// holding the engine's write lock so that no other goroutine queues work
// meanwhile (the operations run with seq set: without the read lock).
// Capturing queues nothing; a failure leaves the sequence on its
// operations for good.
func (s *Sequence) capture() {
	e := s.e
	c, ok := e.dev.(dispatch.Capturer)
	if !ok || s.noGraph {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.genMu.Lock()
	gen := e.freeGen
	e.genMu.Unlock()
	g, err := c.Capture(s.queueOps)
	if err != nil {
		s.noGraph = true
		return
	}
	s.graph, s.gen = g, gen
}

// RunIO writes x into in, runs the sequence and reads out's first len(y)
// values into y: what in.Write(x), Run and out.Read(y) do, errors
// included (a fault of the work is RunIO's error, as it is Read's). On a
// backend that captures graphs (CUDA) the first RunIO with these buffers
// and lengths does exactly that and then captures the copies with the
// operations, and later ones copy x to the device, run and copy y back
// with one launch and one wait instead of three launches: a decode step
// whose input and output cross to the host every token.
func (s *Sequence) RunIO(in *Buffer, x []float32, out *Buffer, y []float32) error {
	if s == nil {
		return ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.e == nil {
		return errNoRecord
	}
	if in == nil || out == nil || in.e != s.e || out.e != s.e {
		return errors.New("qgemv: sequence run: a buffer is nil or belongs to another engine")
	}
	if s.io != nil {
		if s.ioIn == in && s.ioOut == out && s.ioNX == len(x) && s.ioNY == len(y) {
			ran, err := s.runIO(x, y)
			if ran || err != nil {
				return err
			}
		}
		_ = s.io.Close() // stale or other buffers: run and capture again
		s.io = nil
	}
	if err := in.Write(x); err != nil {
		return err
	}
	if err := s.run(); err != nil {
		return err
	}
	if err := out.Read(y); err != nil {
		return err
	}
	s.captureIO(in, out, len(x), len(y))
	return nil
}

var wantF32x2 = []ElemType{Float32, Float32}

// runIO runs the graph of RunIO if nothing it uses was freed since the
// capture; false: run and capture again.
func (s *Sequence) runIO(x, y []float32) (bool, error) {
	e := s.e
	var h held
	if err := e.use("sequence run", &h, wantF32x2, s.ioIn, s.ioOut); err != nil {
		return false, err
	}
	defer h.unlock()
	e.genMu.Lock()
	defer e.genMu.Unlock()
	if e.freeGen != s.ioGen {
		return false, nil
	}
	ran, err := s.io.Run(asBytes(x), asBytes(y))
	if err != nil {
		return ran, fmt.Errorf("qgemv: sequence: %w", err)
	}
	return ran, nil
}

// captureIO captures the operations between the copies of nx values
// into in and ny values out of out where the backend can, as capture
// does; a failure leaves RunIO on Write, Run and Read for good.
func (s *Sequence) captureIO(in, out *Buffer, nx, ny int) {
	e := s.e
	c, ok := e.dev.(dispatch.IOCapturer)
	if !ok || s.noIO || s.noGraph {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || in.closed || out.closed || in.dev == nil || out.dev == nil {
		return
	}
	e.genMu.Lock()
	gen := e.freeGen
	e.genMu.Unlock()
	g, err := c.CaptureIO(in.dev, int64(4*nx), out.dev, int64(4*ny), s.queueOps)
	if err != nil {
		s.noIO = true
		return
	}
	s.io, s.ioIn, s.ioOut, s.ioNX, s.ioNY, s.ioGen = g, in, out, nx, ny, gen
}

// queueOps queues the operations for a capture (the engine's write lock
// held: they run without the read lock).
func (s *Sequence) queueOps() error {
	for _, op := range s.ops {
		if err := op(true); err != nil {
			return err
		}
	}
	return nil
}

// Graphed reports whether Run launches a captured graph (CUDA) rather
// than queueing the operations one by one.
func (s *Sequence) Graphed() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.graph != nil
}

// Len returns the operations recorded.
func (s *Sequence) Len() int {
	if s == nil {
		return 0
	}
	return len(s.ops)
}

// Close releases the sequence.
func (s *Sequence) Close() error {
	if s == nil {
		return ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	s.ops = nil
	var err error
	if s.io != nil {
		err = s.io.Close()
		s.io, s.ioIn, s.ioOut = nil, nil, nil
	}
	if s.graph != nil {
		if gerr := s.graph.Close(); err == nil {
			err = gerr
		}
		s.graph = nil
	}
	return err
}
