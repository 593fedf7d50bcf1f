package cpu

import (
	"slices"
	"sync"
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

// TestRowsJobChunks: rowsJob's chunks cover the rows once, in multiples
// of 16 rows, give every goroutine at least 64 KB of weights, and hold at
// least 128 KB each unless that would leave a goroutine fewer than four
// chunks (then as many rows as four chunks per goroutine allow), and no
// more rows than about 16 chunks per goroutine need.
func TestRowsJobChunks(t *testing.T) {
	for _, c := range []struct{ rows, rowBytes, threads int }{
		{14336, 2048, 16}, {4096, 7168, 16}, {4096, 2048, 16}, {1024, 2304, 16}, {1024, 2048, 2},
		{14336, 2048, 2}, {64, 2048, 16}, {300, 512, 4}, {10000, 64, 3}, {17, 9000, 16},
	} {
		be, err := New(Config{Threads: c.threads})
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		var mu sync.Mutex
		var got [][2]int
		err = be.rowsJob(c.rows, c.rowBytes, chunksPerThread, rangeFunc(func(r0, r1 int) error {
			mu.Lock()
			got = append(got, [2]int{r0, r1})
			mu.Unlock()
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b [2]int) int { return a[0] - b[0] })
		n := be.rowsWorkers(c.rows, c.rowBytes)
		if want := min(c.threads, max(1, c.rows*c.rowBytes/(64<<10)), c.rows); n != want {
			t.Fatalf("%+v: %d goroutines, want %d (64 KB of weights each at least)", c, n, want)
		}
		per := got[0][1] - got[0][0]
		for i, g := range got {
			if g[0] != i*per || (g[1]-g[0] != per && g[1] != c.rows) {
				t.Fatalf("%+v: chunk %d is rows %d..%d, want %d rows from %d", c, i, g[0], g[1], per, i*per)
			}
		}
		if got[len(got)-1][1] != c.rows {
			t.Fatalf("%+v: chunks end at row %d", c, got[len(got)-1][1])
		}
		if n == 1 {
			if len(got) != 1 {
				t.Fatalf("%+v: %d chunks for one goroutine", c, len(got))
			}
			continue
		}
		if per%16 != 0 {
			t.Fatalf("%+v: chunks of %d rows, not a multiple of 16", c, per)
		}
		up := func(r int) int { return (r + 15) / 16 * 16 }
		ceil := func(a, b int) int { return (a + b - 1) / b }
		lower := min(up(ceil(minChunkBytes, c.rowBytes)), up(ceil(c.rows, minChunks*n)))
		upper := max(up(ceil(c.rows, chunksPerThread*n)), lower)
		if per < lower || per > upper {
			t.Fatalf("%+v: chunks of %d rows (%d bytes), want %d to %d rows", c, per, per*c.rowBytes, lower, upper)
		}
	}
}

// TestChunkRunOrder: a part claims its own contiguous share of the chunks
// in order, then the other parts' remaining chunks share by share, and
// every chunk runs once. A part alone (the others never start) runs them
// that are left: 10 chunks in 3 shares (0..2, 3..5, 6..9), part 2 has
// taken 6 and 7, part 1 runs 3..5, then 8 and 9, then 0..2.
func TestChunkRunOrder(t *testing.T) {
	var got []int
	r := &chunkRun{n: 95, per: 10, chunks: 10, parts: 3, cur: make([]chunkCursor, 3), errs: make([]error, 10)}
	r.j = rangeFunc(func(i0, i1 int) error {
		if i1 != min(i0+10, 95) {
			t.Fatalf("chunk [%d, %d)", i0, i1)
		}
		got = append(got, i0/10)
		return nil
	})
	r.cur[2].next.Store(2)
	r.part(1)
	if want := []int{3, 4, 5, 8, 9, 0, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("part 1 ran chunks %v, want %v", got, want)
	}
}
