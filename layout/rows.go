package layout

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// quantRows runs the rows [0, rows) of a quantizer in chunks of chunk
// rows (even, so that two rows whose metadata share a packed byte share a
// chunk) on up to GOMAXPROCS goroutines, each with the function newWorker
// returns (its own scratch state). Chunks are claimed in row order and
// none is claimed after one fails, so the error returned, the first of
// the lowest failing chunk, is the one a serial pass would return.
func quantRows(rows, chunk int, newWorker func() func(r0, r1 int) error) error {
	n := (rows + chunk - 1) / chunk
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
				c := int(next.Add(1) - 1)
				if c >= n {
					return
				}
				if errs[c] = fn(c*chunk, min(rows, (c+1)*chunk)); errs[c] != nil {
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

// quantChunk is quantRows' chunk for the quantizers: 16 rows (even, and
// a few groups of work per claim).
const quantChunk = 16
