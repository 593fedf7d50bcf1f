// Package par runs the independent items of a job (a quantizer's row
// chunks, an encoder's units) on up to GOMAXPROCS goroutines with
// results that do not depend on the schedule.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Each calls, for i in [0, n), the item function of some worker (each
// goroutine gets its own from newWorker, for its scratch state). Items
// are claimed in increasing order and none is claimed after one fails,
// so the error returned, that of the least failing item, is the one a
// serial loop would return.
func Each(n int, newWorker func() func(i int) error) error {
	errs := make([]error, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn := newWorker()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if errs[i] = fn(i); errs[i] != nil {
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
