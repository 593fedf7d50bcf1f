package layout

import "github.com/qgemv/qgemv/internal/par"

// quantRows runs the rows [0, rows) of a quantizer in chunks of
// quantChunk rows with par.Each, each goroutine with the function
// newWorker returns (its own scratch state); the error returned is the
// one a serial pass would return.
func quantRows(rows int, newWorker func() func(r0, r1 int) error) error {
	const chunk = quantChunk
	return par.Each((rows+chunk-1)/chunk, func() func(int) error {
		fn := newWorker()
		return func(c int) error { return fn(c*chunk, min(rows, (c+1)*chunk)) }
	})
}

// quantChunk is quantRows' chunk: 16 rows, even so that two rows whose
// metadata share a packed byte (Q4G128's zero points) share a chunk, and
// a few groups of work per claim.
const quantChunk = 16
