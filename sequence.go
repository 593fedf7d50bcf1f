package qgemv

import (
	"errors"
	"fmt"
	"sync"
)

// Sequence is a recorded series of operations on buffers (multiplies,
// quantizations, SwiGLU, Add, Scale, Requantize) that Run queues again,
// in order, with the buffers' current contents: a decode step recorded
// once and replayed per token.
type Sequence struct {
	e      *Engine
	ops    []func() error
	mu     sync.Mutex
	closed bool
}

// recorder collects the operations of a Record call.
type recorder struct {
	mu  sync.Mutex
	ops []func() error
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
func (e *Engine) record(op func() error) bool {
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
	for i, op := range s.ops {
		if err := op(); err != nil {
			return fmt.Errorf("qgemv: sequence operation %d: %w", i, err)
		}
	}
	return nil
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
	return nil
}
