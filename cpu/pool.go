package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// team is a process-wide set of persistent worker goroutines. A multiply
// that fans out to many goroutines per call pays Go's sequential wake-up of
// idle Ps each time (tens of microseconds at 16 threads, as much as the
// multiply itself for a 30 MB matrix on a server); team workers instead
// spin for a short while after each job, so back-to-back multiplies find
// them awake, and park on a channel when idle longer.
type team struct {
	mu      sync.Mutex // serializes jobs and worker creation
	workers []*worker
}

type worker struct {
	gen    atomic.Uint64 // last job generation published to this worker
	job    func()        // the job of generation gen (written before gen)
	done   *atomic.Int64 // jobs of the current run still running
	parked atomic.Bool
	wake   chan struct{}
}

var theTeam team

// spinFor is how long an idle worker polls for the next job before parking.
var spinFor = 50 * time.Microsecond

// yieldEvery is how often a polling worker lets other goroutines run.
const yieldEvery = 8 * time.Microsecond

// run calls fns[0] on the calling goroutine and fns[1:] on team workers,
// and returns when all have returned.
func (t *team) run(fns []func()) {
	if len(fns) == 1 {
		fns[0]()
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.workers) < len(fns)-1 {
		w := &worker{wake: make(chan struct{}, 1)}
		t.workers = append(t.workers, w)
		go w.loop()
	}
	var pending atomic.Int64
	pending.Store(int64(len(fns) - 1))
	for i, fn := range fns[1:] {
		w := t.workers[i]
		w.job, w.done = fn, &pending
		w.gen.Add(1)
		if w.parked.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	fns[0]()
	// Wait by polling (the workers finish within one chunk of each
	// other).
	spinUntilZero(&pending)
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
			now := time.Now()
			if now.Sub(start) > spinFor {
				w.parked.Store(true)
				if w.gen.Load() == seen { // re-check after publishing parked
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
		w.job()
		w.done.Add(-1)
	}
}
