package cpu

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestTeamPanic: a job that panics, on the calling goroutine or on a
// worker, does not return run early or leave workers running into the
// next run: run waits for every job, then raises the panic on the caller,
// and the team works on. (Found by review: after a recovered panic in the
// caller's job, the next run returned before its own worker job ran, and
// the old job's worker decremented the new run's counter.)
func TestTeamPanic(t *testing.T) {
	var tm team
	tm.runFuncs([]func(){func() {}, func() {}}) // start a worker
	for _, onWorker := range []bool{false, true} {
		var slowDone atomic.Bool
		started := make(chan struct{})
		boom := func() {
			if !onWorker {
				<-started
			}
			panic("boom")
		}
		slow := func() {
			close(started)
			time.Sleep(50 * time.Millisecond)
			slowDone.Store(true)
		}
		jobs := []func(){boom, slow}
		if onWorker {
			jobs = []func(){slow, boom}
		}
		got := func() (p any) {
			defer func() { p = recover() }()
			tm.runFuncs(jobs)
			return nil
		}()
		if got != "boom" {
			t.Fatalf("worker %v: run raised %v, want boom", onWorker, got)
		}
		if !slowDone.Load() {
			t.Fatalf("worker %v: run returned while another job still ran", onWorker)
		}
		var ran atomic.Bool
		tm.runFuncs([]func(){func() {}, func() { time.Sleep(10 * time.Millisecond); ran.Store(true) }})
		if !ran.Load() {
			t.Fatalf("worker %v: the next run returned before its worker job ran", onWorker)
		}
	}
}
