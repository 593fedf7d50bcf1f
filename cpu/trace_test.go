package cpu

import (
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// TestChunkTrace breaks the wall time of Q4G128 and Bits4G128 A8
// multiplies (batch 1, a decode step's shapes, weights rotated past the
// last-level cache) on GOMAXPROCS threads into where it goes, from each
// piece's start and end (traceChunk): lead (call start to the first row
// piece: activation quantization and layout; of it, the time to the
// preparation's first piece and the preparation's span, where it ran on
// the team), fork (the first piece of the last part to start, after the
// first), busy (the parts' piece time over parts x span), end spread
// (the first part done to the last), tail (the last piece's end to the
// call's return). It reports medians and p90 over the calls; it checks
// nothing about timing. Run it where the numbers are wanted:
// QGEMV_CHUNK_TRACE=1 go test -run ChunkTrace -v -cpu 16 ./cpu.
func TestChunkTrace(t *testing.T) {
	if os.Getenv("QGEMV_CHUNK_TRACE") == "" {
		t.Skip("set QGEMV_CHUNK_TRACE=1 to trace")
	}
	threads := runtime.GOMAXPROCS(0)
	be, err := New(Config{Threads: threads, HugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := synth.WorkingSet()
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ t0, t1 time.Time }
	var parts, prep [256][]span
	traceChunk = func(p int, a, b time.Time, rows bool) {
		if rows {
			parts[p] = append(parts[p], span{a, b})
		} else {
			prep[p] = append(prep[p], span{a, b})
		}
	}
	defer func() { traceChunk = nil }()
	const calls = 300
	type a8Matrix interface {
		MulA8(dst, x []float32, batch int) error
		Close() error
	}
	for _, sh := range []struct {
		format     string
		rows, cols int
	}{{"q4g128", 14336, 4096}, {"q4g128", 4096, 14336}, {"bits4g128", 14336, 4096}, {"bits4g128", 4096, 14336}, {"bits4g128", 4096, 4096}, {"bits4g128", 1024, 4096}} {
		rows, cols := sh.rows, sh.cols
		n := int(ws/int64(rows*cols/2)) + 1
		mats := make([]a8Matrix, n)
		for i := range mats {
			m, err := synth.Named(sh.format, rows, cols, uint64(i+1))
			if err != nil {
				t.Fatal(err)
			}
			switch m := m.(type) {
			case *layout.Q4G128:
				mats[i], err = be.Load(m)
			case *layout.Bits:
				mats[i], err = be.LoadBits(m)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rng := rand.New(rand.NewPCG(1, 2))
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		dst := make([]float32, rows)
		var wall, lead, fork, busy, spread, tail, nparts, pre, preSpan []float64
		for i := -20; i < calls; i++ {
			for p := range parts {
				parts[p], prep[p] = parts[p][:0], prep[p][:0]
			}
			start := time.Now()
			if err := mats[(i+20)%n].MulA8(dst, x, 1); err != nil {
				t.Fatal(err)
			}
			end := time.Now()
			if i < 0 {
				continue
			}
			var first, last time.Time
			var firsts, lasts []time.Time
			var sum time.Duration
			for _, ps := range parts {
				if len(ps) == 0 {
					continue
				}
				firsts = append(firsts, ps[0].t0)
				lasts = append(lasts, ps[len(ps)-1].t1)
				for _, s := range ps {
					sum += s.t1.Sub(s.t0)
				}
			}
			if len(firsts) == 0 {
				t.Fatalf("%dx%d: no chunks traced", rows, cols)
			}
			first, last = slices.MinFunc(firsts, time.Time.Compare), slices.MaxFunc(lasts, time.Time.Compare)
			// The preparation's pieces (when it ran on the team): from
			// the call's start to its first piece, and its first piece's
			// start to its last piece's end.
			var p0, p1 time.Time
			for _, ps := range prep {
				for _, s := range ps {
					if p0.IsZero() || s.t0.Before(p0) {
						p0 = s.t0
					}
					if s.t1.After(p1) {
						p1 = s.t1
					}
				}
			}
			us := func(d time.Duration) float64 { return float64(d) / 1e3 }
			wall = append(wall, us(end.Sub(start)))
			lead = append(lead, us(first.Sub(start)))
			fork = append(fork, us(slices.MaxFunc(firsts, time.Time.Compare).Sub(first)))
			busy = append(busy, float64(sum)/float64(time.Duration(len(firsts))*last.Sub(first)))
			spread = append(spread, us(last.Sub(slices.MinFunc(lasts, time.Time.Compare))))
			tail = append(tail, us(end.Sub(last)))
			nparts = append(nparts, float64(len(firsts)))
			if !p0.IsZero() {
				pre = append(pre, float64(p0.Sub(start))/1e3)
				preSpan = append(preSpan, float64(p1.Sub(p0))/1e3)
			}
		}
		q := func(v []float64, f float64) float64 {
			if len(v) == 0 {
				return 0
			}
			s := slices.Clone(v)
			slices.Sort(s)
			return s[int(f*float64(len(s)-1))]
		}
		mb := float64(rows*cols/2) / 1e6
		t.Logf("%s %dx%d, %d threads, %d matrices rotated, %d calls (median / p90): wall %.1f / %.1f us (%.1f GB/s at the median), lead %.1f / %.1f us, fork %.1f / %.1f us, busy %.3f / %.3f (p10 %.3f), end spread %.1f / %.1f us, tail %.1f / %.1f us, parts %.0f; the preparation (in %d calls on the team): from the start %.1f / %.1f us, its span %.1f / %.1f us",
			sh.format, rows, cols, threads, n, calls, q(wall, .5), q(wall, .9), mb/q(wall, .5)*1e3, q(lead, .5), q(lead, .9), q(fork, .5), q(fork, .9),
			q(busy, .5), q(busy, .9), q(busy, .1), q(spread, .5), q(spread, .9), q(tail, .5), q(tail, .9), q(nparts, .5), len(pre), q(pre, .5), q(pre, .9), q(preSpan, .5), q(preSpan, .9))
		for _, m := range mats {
			m.Close()
		}
	}
}
