package cpu

import (
	"fmt"
	"runtime"
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
// of 16 rows, give every goroutine at least 64 KB of weights, and the
// largest holds at least 128 KB unless that would leave a goroutine fewer than four
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
		per := 0
		for _, g := range got {
			per = max(per, g[1]-g[0])
		}
		end := 0
		for i, g := range got {
			if g[0] != end || g[0]%16 != 0 || (g[1]%16 != 0 && g[1] != c.rows) {
				t.Fatalf("%+v: chunk %d is rows %d..%d, want 16-row multiples from %d", c, i, g[0], g[1], end)
			}
			end = g[1]
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

// TestChunkRunOrder: a part claims pieces of its own contiguous share in
// order, then what is left of the other parts' shares share by share,
// and every item runs once; pieces are per items but for the last 2*per
// of a share, which go in halves down to a grain. 95 items, pieces of
// 10, grain 5, 3 shares ([0, 30), [30, 60), [60, 95)); part 2 has taken
// 20 of its share's items, and part 1, alone, runs the rest.
func TestChunkRunOrder(t *testing.T) {
	var got [][2]int
	r := &chunkRun{n: 95, per: 10, grain: 5, parts: 3, tail: true, cur: make([]chunkCursor, 3)}
	r.j = rangeFunc(func(i0, i1 int) error {
		got = append(got, [2]int{i0, i1})
		return nil
	})
	r.cur[2].next.Store(20)
	r.part(1)
	want := [][2]int{{30, 40}, {40, 50}, {50, 55}, {55, 60}, {80, 90}, {90, 95}, {0, 10}, {10, 20}, {20, 25}, {25, 30}}
	if !slices.Equal(got, want) {
		t.Fatalf("part 1 ran %v, want %v", got, want)
	}
}

// TestChunkRunPieces: for shares, piece sizes and grains of every kind
// the pieces are multiples of the grain (but for the last item of n),
// cover every item once, and the pieces of a share's tail shrink.
func TestChunkRunPieces(t *testing.T) {
	for _, c := range []struct{ n, per, grain, parts int }{
		{14336, 64, 16, 16}, {4096, 32, 16, 16}, {4096, 448, 16, 2}, {1000, 48, 8, 3}, {17, 16, 16, 2}, {5, 1, 1, 4}, {100000, 1000, 8, 7},
	} {
		r := &chunkRun{n: c.n, per: c.per, grain: c.grain, parts: c.parts, tail: true, cur: make([]chunkCursor, c.parts)}
		seen := make([]int, c.n)
		r.j = rangeFunc(func(i0, i1 int) error {
			if i0%c.grain != 0 || i1%c.grain != 0 && i1 != c.n || i1 <= i0 || i1-i0 > c.per {
				t.Fatalf("%+v: piece [%d, %d)", c, i0, i1)
			}
			for i := i0; i < i1; i++ {
				seen[i]++
			}
			return nil
		})
		r.part(c.parts - 1)
		for i, k := range seen {
			if k != 1 {
				t.Fatalf("%+v: item %d ran %d times", c, i, k)
			}
		}
		if c.per >= 4*c.grain {
			if p := r.piece(c.per); p > c.per/2+c.grain {
				t.Fatalf("%+v: the piece of the last %d items has %d", c, c.per, p)
			}
		}
	}
}

// TestClaimChunksLowestError: when several pieces fail, claimChunks
// returns the error of the one that starts lowest, however the parts
// raced.
func TestClaimChunksLowestError(t *testing.T) {
	be, err := New(Config{Threads: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for round := 0; round < 50; round++ {
		err := be.claimChunks(4, 1000, 40, 8, true, rangeFunc(func(i0, i1 int) error {
			if i0 >= 200 && i0%3 == 0 {
				return fmt.Errorf("piece %d", i0)
			}
			return nil
		}))
		if err == nil || err.Error() != "piece 240" {
			t.Fatalf("round %d: %v, want piece 240", round, err)
		}
	}
}

// TestTeamCancelsUnstartedParts: a balanced job (claimChunks, with and
// without tail pieces) returns once its work is done without waiting for
// parts that have not started, and the workers it cancelled still run
// every part of the runs that follow, balanced or not (runFuncs needs
// every part). With as many Ps as parts on a machine of fewer cores,
// workers often have not started when part 0 has claimed everything.
func TestTeamCancelsUnstartedParts(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(6))
	c0 := cancelledParts.Load()
	be, err := New(Config{Threads: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	var sum atomic.Int64
	for round := 0; round < 3000; round++ {
		sum.Store(0)
		if err := be.claimChunks(6, 960, 32, 16, round%2 == 0, rangeFunc(func(i0, i1 int) error {
			sum.Add(int64(i1 - i0))
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		if got := sum.Load(); got != 960 {
			t.Fatalf("round %d: balanced job ran %d of 960 items", round, got)
		}
		var parts [6]atomic.Int32
		fns := make([]func(), 6)
		for i := range fns {
			fns[i] = func() { parts[i].Add(1) }
		}
		be.team.runFuncs(fns)
		for i := range parts {
			if n := parts[i].Load(); n != 1 {
				t.Fatalf("round %d: runFuncs part %d ran %d times when it returned", round, i, n)
			}
		}
	}
	if runtime.NumCPU() < 6 && cancelledParts.Load() == c0 {
		t.Errorf("no part was cancelled in 3000 runs of 6 parts on %d CPUs", runtime.NumCPU())
	}
	t.Logf("%d parts cancelled", cancelledParts.Load()-c0)
}

// TestTeamWaitsWhenOversubscribed: a balanced run with more parts than
// Go has Ps cancels nothing (its caller waits and yields instead).
func TestTeamWaitsWhenOversubscribed(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	be, err := New(Config{Threads: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	c0 := cancelledParts.Load()
	for round := 0; round < 200; round++ {
		if err := be.claimChunks(4, 640, 32, 16, true, rangeFunc(func(i0, i1 int) error { return nil })); err != nil {
			t.Fatal(err)
		}
	}
	if n := cancelledParts.Load() - c0; n != 0 {
		t.Fatalf("%d parts cancelled on one P", n)
	}
}
