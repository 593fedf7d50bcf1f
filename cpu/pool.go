package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// team is a backend's set of persistent worker goroutines. A multiply
// that fans out to many goroutines per call pays Go's sequential wake-up of
// idle Ps each time (tens of microseconds at 16 threads, as much as the
// multiply itself for a 30 MB matrix on a server); team workers instead
// spin for a short while after each job, so back-to-back multiplies find
// them awake, and park on a channel when idle longer. Each Backend owns
// one, created empty and grown on demand; close stops its workers.
//
// One run holds the team at a time. A run that finds it held (another
// goroutine multiplying on the same backend, or a job that itself runs
// jobs) or closed runs its jobs on fresh goroutines instead, so
// concurrent multiplies proceed concurrently and never deadlock.
type team struct {
	mu      sync.Mutex // held for a whole run; guards workers and closed
	workers []*worker
	closed  bool
	exited  sync.WaitGroup // one count per worker goroutine
}

type worker struct {
	gen    atomic.Uint64 // last job generation published to this worker
	job    func()        // the job of generation gen (written before gen)
	run    *teamRun      // the run the job belongs to (written before gen)
	parked atomic.Bool
	stop   atomic.Bool // set by close: exit instead of waiting for a job
	wake   chan struct{}
}

// teamRun is one call of run: the worker jobs still running, and the
// first panic any job raised.
type teamRun struct {
	pending  atomic.Int64
	mu       sync.Mutex
	panic    any
	panicked bool
}

// call runs job, recording a panic instead of letting it go: every job of
// a run returns, whatever happens, before run returns or re-panics, so no
// worker is left writing into what the caller hands back to its pools.
func (r *teamRun) call(job func()) {
	defer func() {
		if p := recover(); p != nil {
			r.mu.Lock()
			if !r.panicked {
				r.panic, r.panicked = p, true
			}
			r.mu.Unlock()
		}
	}()
	job()
}

// spinFor is how long an idle worker polls for the next job before parking.
var spinFor = 50 * time.Microsecond

// yieldEvery is how often a polling worker lets other goroutines run.
const yieldEvery = 8 * time.Microsecond

// run calls fns[0] on the calling goroutine and fns[1:] on team workers
// (or fresh goroutines, see team), and returns when all have returned. A
// job that panics does not stop the others: run waits for them all, then
// raises the first panic on the calling goroutine (where it can be
// recovered; on a worker it would end the process).
func (t *team) run(fns []func()) {
	if len(fns) == 1 {
		fns[0]()
		return
	}
	if !t.mu.TryLock() {
		runFresh(fns)
		return
	}
	defer t.mu.Unlock()
	if t.closed {
		runFresh(fns)
		return
	}
	for len(t.workers) < len(fns)-1 {
		w := &worker{wake: make(chan struct{}, 1)}
		t.workers = append(t.workers, w)
		t.exited.Add(1)
		go func() {
			defer t.exited.Done()
			w.loop()
		}()
	}
	r := &teamRun{}
	r.pending.Store(int64(len(fns) - 1))
	for i, fn := range fns[1:] {
		w := t.workers[i]
		w.job, w.run = fn, r
		w.gen.Add(1)
		if w.parked.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	r.call(fns[0])
	// Wait by polling (the workers finish within one chunk of each
	// other).
	spinUntilZero(&r.pending)
	r.raise()
}

// runFresh is run on new goroutines, for a run that cannot have the team.
func runFresh(fns []func()) {
	r := &teamRun{}
	var wg sync.WaitGroup
	for _, fn := range fns[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.call(fn)
		}()
	}
	r.call(fns[0])
	wg.Wait()
	r.raise()
}

// raise re-panics with the run's first panic, if a job raised one.
func (r *teamRun) raise() {
	r.mu.Lock()
	p, ok := r.panic, r.panicked
	r.mu.Unlock()
	if ok {
		panic(p)
	}
}

// close stops the workers and waits until their goroutines have exited;
// later runs use fresh goroutines. A second close does nothing.
func (t *team) close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	for _, w := range t.workers {
		w.stop.Store(true)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	t.workers = nil
	t.mu.Unlock()
	t.exited.Wait()
}

// spinUntilZero polls n until it is zero, yielding now and then in case
// the goroutine that will decrement it needs this P.
func spinUntilZero(n *atomic.Int64) {
	for spins := 0; n.Load() > 0; spins++ {
		if spins&1023 == 1023 {
			runtime.Gosched()
		}
	}
}

func (w *worker) loop() {
	var seen uint64
	for {
		// Poll, yielding the P at most every yieldEvery: a woken goroutine
		// needs a P, but runtime.Gosched takes the scheduler's global
		// lock, and 15 workers yielding every few hundred nanoseconds
		// spent two thirds of a 16-thread multiply's CPU time in it.
		start := time.Now()
		lastYield := start
		for spins := 0; w.gen.Load() == seen; spins++ {
			if spins&255 != 255 {
				continue
			}
			if w.stop.Load() {
				return
			}
			now := time.Now()
			if now.Sub(start) > spinFor {
				w.parked.Store(true)
				if w.gen.Load() == seen && !w.stop.Load() { // re-check after publishing parked
					<-w.wake
				}
				w.parked.Store(false)
				start, lastYield = time.Now(), time.Now()
			} else if now.Sub(lastYield) > yieldEvery {
				runtime.Gosched()
				lastYield = now
			}
		}
		seen = w.gen.Load()
		r := w.run
		r.call(w.job)
		r.pending.Add(-1)
	}
}
