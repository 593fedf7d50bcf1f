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
	done   *sync.WaitGroup
	parked atomic.Bool
	wake   chan struct{}
}

var theTeam team

// spinFor is how long an idle worker polls for the next job before parking.
var spinFor = 50 * time.Microsecond

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
	var wg sync.WaitGroup
	wg.Add(len(fns) - 1)
	for i, fn := range fns[1:] {
		w := t.workers[i]
		w.job, w.done = fn, &wg
		w.gen.Add(1)
		if w.parked.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	fns[0]()
	wg.Wait()
}

func (w *worker) loop() {
	var seen uint64
	for {
		start := time.Now()
		for spins := 0; w.gen.Load() == seen; spins++ {
			if spins&63 == 63 {
				if time.Since(start) > spinFor {
					w.parked.Store(true)
					if w.gen.Load() == seen { // re-check after publishing parked
						<-w.wake
					}
					w.parked.Store(false)
					start = time.Now()
				} else {
					runtime.Gosched()
				}
			}
		}
		seen = w.gen.Load()
		w.job()
		w.done.Done()
	}
}
