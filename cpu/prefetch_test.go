package cpu

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/qgemv/qgemv/layout/ans"
)

// TestRowSpans: the rows jobs name exactly the stored codes of the rows
// asked, in place (the bytes a part prefetches while it waits for the
// preparation): Q4G128's 4-bit codes, Bits and Sparse12 words, and
// nothing for entropy-coded rows.
func TestRowSpans(t *testing.T) {
	be, err := New(Config{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	same := func(name string, got, want []byte) {
		t.Helper()
		if len(got) != len(want) || len(got) > 0 && unsafe.SliceData(got) != unsafe.SliceData(want) {
			t.Fatalf("%s: span of %d bytes at %p, want the %d stored bytes at %p", name, len(got), unsafe.SliceData(got), len(want), unsafe.SliceData(want))
		}
	}
	spans := [][2]int{{0, 0}, {0, 100}, {16, 48}, {99, 100}}
	mx, err := be.Load(randMatrix(t, rng, 100, 300))
	if err != nil {
		t.Fatal(err)
	}
	c := &call{m: mx.m}
	rb := mx.m.PCols / 2
	for _, s := range spans {
		want := mx.m.Weights[s[0]*rb : s[1]*rb]
		same("Q4G128 A8", rowsI8Job{c}.rowSpan(s[0], s[1]), want)
		same("Q4G128 A32", rowsF32Job{c}.rowSpan(s[0], s[1]), want)
	}
	for _, lc := range lowCases(t, rng, 100, 300, false, Best()) {
		lm := lc.mx
		r := &rowsRun{mx: lm, wpr: lm.wordsPerRow()}
		var words []uint32
		if lm.bits != nil {
			words = lm.bits.Words
		} else {
			words = lm.sp.Words
		}
		for _, s := range spans {
			w := words[s[0]*r.wpr : s[1]*r.wpr]
			var want []byte
			if len(w) > 0 {
				want = unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w))
			}
			same(lc.name, r.rowSpan(s[0], s[1]), want)
		}
	}
	m, err := ans.RandomBits(100, 3000, 4, 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	coded, err := be.LoadANSBits(m)
	if err != nil {
		t.Fatal(err)
	}
	if b := (&rowsRun{mx: coded, wpr: coded.wordsPerRow()}).rowSpan(0, 32); b != nil {
		t.Fatalf("entropy-coded rows: a span of %d bytes, want none", len(b))
	}
}

// spanRows is a rows job that records the spans asked of it.
type spanRows struct {
	mu    sync.Mutex
	spans [][2]int
	asked atomic.Bool
	buf   []byte
}

func (j *spanRows) do(r0, r1 int) error { return nil }

func (j *spanRows) rowSpan(r0, r1 int) []byte {
	j.mu.Lock()
	j.spans = append(j.spans, [2]int{r0, r1})
	j.mu.Unlock()
	j.asked.Store(true)
	return j.buf[r0*64 : r1*64]
}

// TestPrefetchWhileWaiting: a part that finds the preparation still
// running asks the rows job for the rows of its first piece (the start of
// its own share, at most one piece) and prefetches them; a preparation
// that waits until one has done so (or 10 s) makes that certain.
func TestPrefetchWhileWaiting(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	be, err := New(Config{Threads: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	const rows, rowBytes = 4096, 1024 // rows of 1 KiB for the split; the job names 64 bytes a row
	j := &spanRows{buf: make([]byte, rows*64)}
	slow := rangeFunc(func(i0, i1 int) error {
		for end := time.Now().Add(10 * time.Second); !j.asked.Load() && time.Now().Before(end); {
			time.Sleep(50 * time.Microsecond)
		}
		return nil
	})
	if err := be.rowsJobAfter(prep{1, 1, slow}, rows, rowBytes, chunksPerThread, rowTile, j); err != nil {
		t.Fatal(err)
	}
	if len(j.spans) == 0 {
		t.Fatal("no part prefetched while the preparation ran")
	}
	r := &chunkRun{n: rows, grain: rowTile}
	for _, s := range j.spans {
		ok := false
		for r.parts = 1; r.parts <= 4 && !ok; r.parts++ {
			for q := range r.parts {
				lo, _ := r.share(q)
				ok = ok || s[0] == lo
			}
		}
		if !ok || s[1] <= s[0] || s[1]-s[0] > rows/4 {
			t.Fatalf("prefetched rows %v: not the start of a share's first piece", s)
		}
	}
}
