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
	mu      sync.Mutex // held for a whole run; guards workers, closed and cur
	workers []*worker
	closed  bool
	exited  sync.WaitGroup // one count per worker goroutine
	cur     teamRun        // the state of the run holding mu (reused: a run allocates nothing)
}

// teamJob is a run's work: part(p) for p in [0, parts), part 0 on the
// calling goroutine. Jobs are pointers to state the caller keeps (pooled
// on the hot paths), so that handing one to the workers allocates
// nothing.
type teamJob interface{ part(p int) }

// funcsJob runs fns[p] as part p.
type funcsJob []func()

func (f funcsJob) part(p int) { f[p]() }

type worker struct {
	gen atomic.Uint64 // last job generation published to this worker
	// claim is the last generation taken: by the worker, which then runs
	// its part, or by the caller of a balanced job, which cancels a part
	// that has not started once the job's work is all claimed. Each side
	// moves it from gen-1 to gen, so exactly one of them takes a part.
	claim atomic.Uint64
	job   teamJob  // the job of generation gen (written before gen)
	p     int      // the part it runs (written before gen)
	run   *teamRun // the run the job belongs to (written before gen)
	// yield: the run had more parts than Go has Ps (written before gen),
	// so a worker polling for the next job yields now and then.
	yield  bool
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

// call runs part p of job, recording a panic instead of letting it go:
// every part of a run that started returns, whatever happens, before run
// returns or re-panics, so no worker is left writing into what the
// caller hands back to its pools.
func (r *teamRun) call(job teamJob, p int) {
	defer func() {
		if v := recover(); v != nil {
			r.mu.Lock()
			if !r.panicked {
				r.panic, r.panicked = v, true
			}
			r.mu.Unlock()
		}
	}()
	job.part(p)
}

// spinFor is how long an idle worker polls for the next job before parking.
var spinFor = 50 * time.Microsecond

// yieldEvery is how often a polling worker of an oversubscribed run lets
// other goroutines run.
const yieldEvery = 8 * time.Microsecond

// run calls job.part(0) on the calling goroutine and parts 1..parts-1 on
// team workers (or fresh goroutines, see team), and returns when all have
// returned, except that the parts of a balancedJob that have not started
// when part 0 returns are cancelled (they never run), unless the run has
// more parts than Go has Ps. A part that panics does not stop the others:
// run waits for them all, then raises the first panic on the calling
// goroutine (where it can be recovered; on a worker it would end the
// process). A run on the team's workers allocates nothing once they
// exist.
func (t *team) run(parts int, job teamJob) {
	if parts == 1 {
		job.part(0)
		return
	}
	if !t.mu.TryLock() {
		runFresh(parts, job)
		return
	}
	defer t.mu.Unlock()
	if t.closed {
		runFresh(parts, job)
		return
	}
	for len(t.workers) < parts-1 {
		w := &worker{wake: make(chan struct{}, 1)}
		t.workers = append(t.workers, w)
		t.exited.Add(1)
		go func() {
			defer t.exited.Done()
			w.loop()
		}()
	}
	r := &t.cur
	r.panic, r.panicked = nil, false
	r.pending.Store(int64(parts - 1))
	yield := parts > runtime.GOMAXPROCS(0)
	for i := 1; i < parts; i++ {
		w := t.workers[i-1]
		w.job, w.p, w.run, w.yield = job, i, r, yield
		w.gen.Add(1)
		if w.parked.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	r.call(job, 0)
	if _, ok := job.(balancedJob); ok && !yield {
		// Part 0 returned with every piece claimed: parts that have
		// not started (a worker descheduled, or still waking) would find
		// nothing left, so they are cancelled rather than waited for.
		// Not when the run has more parts than Go has Ps: a worker
		// would then run only when the scheduler happened to let it,
		// take pieces at random, and allocate the per-P scratch
		// (sync.Pool) dropped while it sat out; waiting (and yielding)
		// keeps such runs as they were.
		for i := 1; i < parts; i++ {
			w := t.workers[i-1]
			if g := w.gen.Load(); w.claim.CompareAndSwap(g-1, g) {
				cancelledParts.Add(1)
				r.pending.Add(-1)
			}
		}
	}
	// Wait by polling (the workers finish within one piece of each
	// other).
	spinUntilZero(&r.pending)
	r.raise()
}

// cancelledParts counts the parts runs have cancelled (for tests).
var cancelledParts atomic.Int64

// balancedJob is a teamJob whose parts each return only when none of the
// job's work is left unclaimed (chunkRun: the parts steal each other's
// pieces), so a part that has not started when part 0 returns is not
// needed.
type balancedJob interface {
	teamJob
	balanced()
}

// runFuncs runs fns[0] on the calling goroutine and the rest on workers
// (run with a funcsJob).
func (t *team) runFuncs(fns []func()) { t.run(len(fns), funcsJob(fns)) }

// runFresh is run on new goroutines, for a run that cannot have the team.
func runFresh(parts int, job teamJob) {
	r := &teamRun{}
	var wg sync.WaitGroup
	for i := 1; i < parts; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.call(job, i)
		}()
	}
	r.call(job, 0)
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
	yield := false // the last job's w.yield, read after its gen was seen
	for {
		// Poll for spinFor, then park (which frees the P). While polling
		// the worker keeps its P, unless its last run had more parts
		// than Go has Ps (a part may then be waiting for this P): it
		// yields every yieldEvery. runtime.Gosched takes the scheduler's
		// global lock: 15 workers yielding every 8 us between the
		// multiplies of a 16-thread FFN block spent about 10% of its CPU
		// time there, and the block took 1.27x as long (Xeon).
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
			} else if yield && now.Sub(lastYield) > yieldEvery {
				runtime.Gosched()
				lastYield = now
			}
		}
		seen = w.gen.Load()
		if !w.claim.CompareAndSwap(seen-1, seen) {
			continue // cancelled: the caller found the work done
		}
		r := w.run
		yield = w.yield
		r.call(w.job, w.p)
		r.pending.Add(-1)
	}
}
