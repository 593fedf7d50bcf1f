package layout

import "github.com/qgemv/qgemv/internal/par"

// quantRows runs the rows [0, rows) of a quantizer in chunks of chunk
// rows (even, so that two rows whose metadata share a packed byte share a
// chunk) with par.Each, each goroutine with the function newWorker
// returns (its own scratch state); the error returned is the one a
// serial pass would return.
func quantRows(rows, chunk int, newWorker func() func(r0, r1 int) error) error {
	return par.Each((rows+chunk-1)/chunk, func() func(int) error {
		fn := newWorker()
		return func(c int) error { return fn(c*chunk, min(rows, (c+1)*chunk)) }
	})
}

// quantChunk is quantRows' chunk for the quantizers: 16 rows (even, and
// a few groups of work per claim).
const quantChunk = 16
