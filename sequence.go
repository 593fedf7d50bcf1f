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
// recorded too: record from one goroutine at a time. Host reads and
// writes (Buffer.Read, Write) are not recorded: they run.
func (e *Engine) Record(fn func() error) (*Sequence, error) {
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return nil, ErrClosed
	}
	e.mu.RUnlock()
	e.recMu.Lock()
	defer e.recMu.Unlock()
	r := &recorder{}
	e.rec.Store(r)
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

// Run queues the recorded operations in order. A buffer or matrix closed
// since recording makes Run fail with ErrClosed at that operation, the
// ones before it queued.
func (s *Sequence) Run() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
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
	g, err := c.Capture(func() error {
		for _, op := range s.ops {
			if err := op(true); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.noGraph = true
		return
	}
	s.graph, s.gen = g, gen
}

// Graphed reports whether Run launches a captured graph (CUDA) rather
// than queueing the operations one by one.
func (s *Sequence) Graphed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.graph != nil
}

// Len returns the operations recorded.
func (s *Sequence) Len() int { return len(s.ops) }

// Close releases the sequence.
func (s *Sequence) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	s.ops = nil
	if s.graph != nil {
		err := s.graph.Close()
		s.graph = nil
		return err
	}
	return nil
}
