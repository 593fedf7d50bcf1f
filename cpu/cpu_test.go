package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

const guard = 19

var sentinel = math.Float32frombits(0x7fc0dead)

// guarded returns a slice of n elements with guard elements filled with a
// sentinel on both sides inside its backing array.
func guarded(n int) (full, inner []float32) {
	full = make([]float32, n+2*guard)
	for i := range full {
		full[i] = sentinel
	}
	return full, full[guard : guard+n]
}

func checkGuards(t *testing.T, full []float32, n int) {
	t.Helper()
	for i := range guard {
		if math.Float32bits(full[i]) != math.Float32bits(sentinel) || math.Float32bits(full[guard+n+i]) != math.Float32bits(sentinel) {
			t.Fatalf("guard band overwritten at offset %d", i)
		}
	}
}

// randMatrix quantizes a random Gaussian matrix; some groups get large
// offsets so zero points vary.
func randMatrix(t testing.TB, rng *rand.Rand, rows, cols int) *layout.Q4G128 {
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
		if (i/128)%3 == 1 {
			w[i] += 2
		}
	}
	m, err := layout.QuantizeQ4G128(w, rows, cols, layout.MinMax)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func randVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// openSets opens a backend of threads threads on every kernel set this
// CPU can run; the test's cleanup closes them.
func openSets(t testing.TB, threads int) []*Backend {
	var out []*Backend
	for _, isa := range supportedSets() {
		be, err := New(Config{ISA: isa, Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close() })
		out = append(out, be)
	}
	return out
}

// supportedSets returns every kernel set this CPU can run.
func supportedSets() []ISA {
	var out []ISA
	for _, isa := range ISAs() {
		if Supported(isa) {
			out = append(out, isa)
		}
	}
	return out
}

var tailDims = []int{1, 127, 128, 129, 300}
var tailCols = []int{1, 127, 128, 129, 300, 4095}

var allBatches = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

func TestKernelsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rowsList, colsList, threadsList := tailDims, tailCols, []int{1, 3}
	if testing.Short() { // -race runs: every code path, fewer shapes
		rowsList, colsList, threadsList = []int{1, 129, 300}, []int{127, 129, 300}, []int{3}
	}
	for _, isa := range supportedSets() {
		for _, threads := range threadsList {
			be, err := New(Config{ISA: isa, Threads: threads})
			if err != nil {
				t.Fatal(err)
			}
			for _, rows := range rowsList {
				for _, cols := range colsList {
					m := randMatrix(t, rng, rows, cols)
					mx, err := be.Load(m)
					if err != nil {
						t.Fatal(err)
					}
					batches := []int{1, 3, 4, 16}
					if rows == 129 && cols == 300 {
						batches = allBatches
					}
					for _, batch := range batches {
						name := fmt.Sprintf("%s/t%d/%dx%d/b%d", isa, threads, rows, cols, batch)
						checkA32(t, name, mx, rng, batch)
						checkA8(t, name, mx, rng, batch)
					}
				}
			}
		}
	}
}

func checkA32(t *testing.T, name string, mx *Matrix, rng *rand.Rand, batch int) {
	m := mx.m
	x := randVec(rng, batch*m.Cols)
	x0 := slices.Clone(x)
	full, dst := guarded(batch * m.Rows)
	if err := mx.MulF32(dst, x, batch); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	checkGuards(t, full, batch*m.Rows)
	if !slices.Equal(x, x0) {
		t.Fatalf("%s: MulF32 modified its input", name)
	}
	ref := make([]float64, m.Rows)
	mag := make([]float64, m.Rows)
	for b := 0; b < batch; b++ {
		xb := x[b*m.Cols : (b+1)*m.Cols]
		_ = m.DotRef(ref, xb)
		_ = m.DotRefMag(mag, xb)
		for r := range ref {
			got := float64(dst[b*m.Rows+r])
			if math.Abs(got-ref[r]) > layout.A32Tolerance*mag[r] || math.IsNaN(got) {
				t.Fatalf("%s A32: vector %d row %d: got %v, want %v (bound %v)", name, b, r, got, ref[r], layout.A32Tolerance*mag[r])
			}
		}
	}
}

func checkA8(t *testing.T, name string, mx *Matrix, rng *rand.Rand, batch int) {
	m := mx.m
	x := randVec(rng, batch*m.Cols)
	full, dst := guarded(batch * m.Rows)
	if err := mx.MulA8(dst, x, batch); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	checkGuards(t, full, batch*m.Rows)
	checkA8Exact(t, name+" A8", m.DotA8Exact, nil, dst, x, batch, m.Rows, m.Cols, m.PCols)
}

func TestBadInput(t *testing.T) {
	be, err := New(Config{ISA: Generic})
	if err != nil {
		t.Fatal(err)
	}
	m := randMatrix(t, rand.New(rand.NewPCG(3, 4)), 130, 200)
	mx, err := be.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 200)
	dst := make([]float32, 130)
	cases := []struct {
		name string
		err  error
	}{
		{"batch 0", mx.MulF32(dst, x, 0)},
		{"batch 17", mx.MulF32(make([]float32, 17*130), make([]float32, 17*200), 17)},
		{"short x", mx.MulF32(dst, x[:199], 1)},
		{"short dst", mx.MulF32(dst[:129], x, 1)},
		{"long dst", mx.MulA8(make([]float32, 131), x, 1)},
		{"x for batch 2", mx.MulA8(make([]float32, 260), x, 2)},
		{"NaN activation A8", mx.MulA8(dst, append(make([]float32, 199), float32(math.NaN())), 1)},
		{"Inf activation A8", mx.MulA8(dst, append(make([]float32, 199), float32(math.Inf(-1))), 1)},
		{"short xq", mx.MulI8(dst, make([]int8, 255), make([]float32, 2), 1)},
		{"short xs", mx.MulI8(dst, make([]int8, 256), make([]float32, 1), 1)},
		{"NaN xs", mx.MulI8(dst, make([]int8, 256), []float32{1, float32(math.NaN())}, 1)},
		{"MulI8 short dst", mx.MulI8(dst[:129], make([]int8, 256), make([]float32, 2), 1)},
		{"MulI8 long dst", mx.MulI8(make([]float32, 131), make([]int8, 256), make([]float32, 2), 1)},
		{"MulF16 short x", mx.MulF16(dst, make([]layout.FP16, 199), 1)},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if err := mx.MulF32(dst, x, 0); !errors.Is(err, ErrBatch) {
		t.Errorf("batch 0: %v is not ErrBatch", err)
	}
	bad := *m
	bad.Scales = bad.Scales[:len(bad.Scales)-1]
	if _, err := be.Load(&bad); err == nil {
		t.Error("Load accepted a matrix with short scales")
	}
	if _, err := New(Config{ISA: "no-such-isa"}); err == nil {
		t.Error("New accepted an unknown ISA")
	}
	if _, err := New(Config{Threads: -1}); err == nil {
		t.Error("New accepted Threads = -1")
	}
}

// TestQuantizeA8Parallel checks the parallel quantizer writes the same
// bytes as layout.QuantizeA8 and reports its errors.
func TestQuantizeA8Parallel(t *testing.T) {
	be, err := New(Config{Threads: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 127, 128, 129, 4095, 14336} {
		x := randVec(rand.New(rand.NewPCG(uint64(n), 1)), n)
		pc := layout.Pad128(n)
		q1, s1 := make([]int8, pc), make([]float32, pc/128)
		q2, s2 := make([]int8, pc), make([]float32, pc/128)
		if err := layout.QuantizeA8(q1, s1, x); err != nil {
			t.Fatal(err)
		}
		if err := be.QuantizeA8(q2, s2, x); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(q1, q2) || !slices.Equal(s1, s2) {
			t.Fatalf("n=%d: parallel quantization differs", n)
		}
		x[n-1] = float32(math.NaN())
		if err := be.QuantizeA8(q2, s2, x); err == nil {
			t.Fatalf("n=%d: NaN accepted", n)
		}
		if err := be.QuantizeA8(q2[:pc-1], s2, x); err == nil {
			t.Fatalf("n=%d: short xq accepted", n)
		}
	}
}

func TestStreamRead(t *testing.T) {
	if _, err := StreamReadShape(nil, 1, "no-such-shape"); err == nil {
		t.Error("an unknown read shape: no error")
	}
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 1000, 4099, 70001} {
		buf := streamTestBuf(n)
		var want uint64
		for _, v := range buf {
			want ^= v
		}
		for _, threads := range []int{1, 3} {
			if got := StreamRead(buf, threads); got != want {
				t.Errorf("n=%d threads=%d: checksum %x, want %x", n, threads, got, want)
			}
			for _, shape := range ReadShapes() {
				got, err := StreamReadShape(buf, threads, shape)
				if err != nil || got != want {
					t.Errorf("n=%d threads=%d shape %s: checksum %x (%v), want %x", n, threads, shape, got, err, want)
				}
			}
		}
	}
}

// streamTestBuf returns n distinct words for the streaming reads'
// checksums.
func streamTestBuf(n int) []uint64 {
	buf := make([]uint64, n)
	for i := range buf {
		buf[i] = uint64(i)*0x9e3779b97f4a7c15 + 1
	}
	return buf
}

// TestStreamReadTiles checks the tile read's checksum (the words of the
// buffer's whole tiles; with several claims, of each claim's whole
// tiles) and its argument errors.
func TestStreamReadTiles(t *testing.T) {
	if streamTiles == nil {
		if _, err := StreamReadTiles(make([]uint64, 1024), 1, 8, 2048); err == nil {
			t.Error("no tile read here, yet no error")
		}
		t.Skip("no AVX-512")
	}
	for _, bad := range [][2]int{{0, 2048}, {8, 0}, {8, 100}, {-1, 128}, {1 << 40, 1 << 20}, {8, 1 << 40}} {
		if _, err := StreamReadTiles(make([]uint64, 1024), 1, bad[0], bad[1]); err == nil {
			t.Errorf("%d rows of %d bytes: no error", bad[0], bad[1])
		}
	}
	for _, c := range []struct{ n, rows, rowBytes int }{{0, 8, 2048}, {2048, 8, 256}, {2047, 8, 256}, {100000, 4, 7168}, {70001, 16, 128}, {3 << 16, 8, 2048}} {
		buf := streamTestBuf(c.n)
		tw := c.rows * c.rowBytes / 8
		per := max(1, windowChunk/tw) * tw // a claim
		var want uint64
		for a := 0; a < len(buf); a += per {
			claim := buf[a:min(a+per, len(buf))]
			for _, v := range claim[:len(claim)/tw*tw] {
				want ^= v
			}
		}
		for _, threads := range []int{1, 3} {
			got, err := StreamReadTiles(buf, threads, c.rows, c.rowBytes)
			if err != nil || got != want {
				t.Errorf("%d words, %d rows of %d bytes, %d threads: checksum %x (%v), want %x", c.n, c.rows, c.rowBytes, threads, got, err, want)
			}
		}
	}
}

// BenchmarkReadPatterns reads synth.WorkingSet bytes of huge pages
// (beyond the last-level cache: twice its reported size, at least 256
// MiB) as one sequence per 128 KiB claim (the read meter's "win" shape)
// and in the batch-1 A8 kernels' order (StreamReadTiles): tiles of 4, 8
// and 16 rows of 2 KiB (4096 4-bit columns) and 8 rows of 7 KiB (14336),
// on one thread and on GOMAXPROCS. The MB/s of a tile pattern
// against seq's is what reading a row-major matrix that way costs.
func BenchmarkReadPatterns(b *testing.B) {
	if streamTiles == nil {
		b.Skip("no AVX-512")
	}
	ws, err := synth.WorkingSet()
	if err != nil {
		b.Fatal(err)
	}
	blk := hugemem.Alloc(int(ws))
	defer blk.Free()
	buf := unsafe.Slice((*uint64)(unsafe.Pointer(&blk.Bytes[0])), len(blk.Bytes)/8)
	for i := range buf {
		buf[i] = uint64(i)
	}
	for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
		for _, p := range []struct {
			name           string
			rows, rowBytes int
		}{{"seq", 0, 0}, {"tiles4x2KiB", 4, 2048}, {"tiles8x2KiB", 8, 2048}, {"tiles16x2KiB", 16, 2048}, {"tiles8x7KiB", 8, 7168}} {
			b.Run(fmt.Sprintf("%s/threads=%d", p.name, threads), func(b *testing.B) {
				b.SetBytes(int64(8 * len(buf)))
				for i := 0; i < b.N; i++ {
					var err error
					if p.rows == 0 {
						_, err = StreamReadShape(buf, threads, "win")
					} else {
						_, err = StreamReadTiles(buf, threads, p.rows, p.rowBytes)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestHugePagesFinalizerDuringMul: a HugePages matrix whose last reference
// is the multiply running on it is not finalized (its huge-page copy
// unmapped) until the multiply returns. The garbage collector runs
// continuously meanwhile; without the KeepAlive in the multiplies this
// faulted (SIGSEGV) on the first run.
func TestHugePagesFinalizerDuringMul(t *testing.T) {
	be, err := New(Config{HugePages: true, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(31, 32))
	m := randMatrix(t, rng, 2048, 4096)
	const batch = 16
	x := make([]float32, batch*m.Cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	dst := make([]float32, batch*m.Rows)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for i := 0; i < 20; i++ {
		if err := loadAndMul(be, m, dst, x, batch, i%2 == 0); err != nil {
			t.Fatal(err)
		}
	}
}

// loadAndMul loads m and multiplies once, dropping the matrix without
// Close: the finalizer is all that frees it.
//
//go:noinline
func loadAndMul(be *Backend, m *layout.Q4G128, dst, x []float32, batch int, a8 bool) error {
	mx, err := be.Load(m)
	if err != nil {
		return err
	}
	if a8 {
		return mx.MulA8(dst, x, batch)
	}
	return mx.MulF32(dst, x, batch)
}

// TestLoadSnapshotsFields: reassigning a loaded matrix's slices or shape
// (which the API forbids) cannot send the kernels outside what Load
// validated: every loader keeps its own copy of the fields, so the
// multiply still computes the loaded matrix. Before, the kernels read the
// caller's struct: a nil Weights faulted in the assembly.
func TestLoadSnapshotsFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, huge := range []bool{false, true} {
		be, err := New(Config{HugePages: huge})
		if err != nil {
			t.Fatal(err)
		}
		q := randMatrix(t, rng, 64, 256)
		x := make([]float32, q.Cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		mq, err := be.Load(q)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, q.Rows)
		if err := mq.MulF32(want, x, 1); err != nil {
			t.Fatal(err)
		}
		q.Weights, q.Scales, q.Zeros, q.Rows, q.Cols = nil, nil, nil, 1<<20, 1<<20
		got := make([]float32, len(want))
		if err := mq.MulF32(got, x, 1); err != nil || !slices.Equal(got, want) {
			t.Errorf("huge %v: Q4G128 after its fields changed: %v, results equal %v", huge, err, slices.Equal(got, want))
		}
		mq.Close()

		b, err := layout.QuantizeBits(randVec(rng, 64*256), 64, 256, 4, 128, layout.QuantOptions{Method: layout.MinMax})
		if err != nil {
			t.Fatal(err)
		}
		mb, err := be.LoadBits(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := mb.MulF32(want, x, 1); err != nil {
			t.Fatal(err)
		}
		b.Words, b.Rows, b.Cols, b.PCols = nil, 1<<20, 1<<20, 1<<20
		if err := mb.MulF32(got, x, 1); err != nil || !slices.Equal(got, want) {
			t.Errorf("huge %v: Bits after its fields changed: %v, results equal %v", huge, err, slices.Equal(got, want))
		}
		mb.Close()
	}
}

// TestA32WideRowBound: a row of 2^20 columns (8192 groups) built so that
// every float32 addition of a group's partial result rounds the same way
// stays within the documented bound for rows past layout.MaxBoundGroups
// on every kernel set (found by review: the constant A32Tolerance alone
// does not hold there).
func TestA32WideRowBound(t *testing.T) {
	const cols = 1 << 20
	m, err := layout.NewQ4G128(1, cols)
	if err != nil {
		t.Fatal(err)
	}
	for c := 0; c < cols; c += 2 {
		m.Weights[c/2] = 0x11 // q = 1, zero point 0
	}
	for g := 0; g < m.Groups(); g++ {
		m.Scales[m.MetaIndex(0, g)] = 1 + 3.0/16384
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = 1.0 / 128
	}
	ref, mag := make([]float64, 1), make([]float64, 1)
	if err := m.DotRef(ref, x); err != nil {
		t.Fatal(err)
	}
	if err := m.DotRefMag(mag, x); err != nil {
		t.Fatal(err)
	}
	bound := (layout.A32Tolerance + float64(m.Groups()-layout.MaxBoundGroups)*math.Ldexp(1, -24)) * mag[0]
	for _, isa := range ISAs() {
		be, err := New(Config{ISA: isa})
		if err != nil {
			continue // not supported here
		}
		mx, err := be.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		y := make([]float32, 1)
		if err := mx.MulF32(y, x, 1); err != nil {
			t.Fatal(err)
		}
		if e := math.Abs(float64(y[0]) - ref[0]); e > bound {
			t.Errorf("%s: |%v - %v| = %g, bound %g", isa, y[0], ref[0], e, bound)
		}
	}
}

// TestSumInt8: the word-at-a-time sum equals the plain one on extremes
// and random values, for every sub-block length the kernels use.
func TestSumInt8(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{8, 32, 64, 128, 256, 1024} {
		for _, fill := range []int{-128, -127, 0, 127, 1000} {
			x := make([]int8, n)
			var want int32
			for i := range x {
				v := fill
				if fill == 1000 {
					v = rng.IntN(256) - 128
				}
				x[i] = int8(v)
				want += int32(x[i])
			}
			if got := sumInt8(x); got != want {
				t.Fatalf("%d values of %d: sum %d, want %d", n, fill, got, want)
			}
		}
	}
}

// TestSplitEvenOdd: the word-at-a-time split equals the byte loop.
func TestSplitEvenOdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	src := make([]int8, 128)
	for i := range src {
		src[i] = int8(rng.IntN(256) - 128)
	}
	even, odd := make([]byte, 64), make([]byte, 64)
	splitEvenOdd(even, odd, src)
	for j := 0; j < 64; j++ {
		if even[j] != byte(src[2*j]) || odd[j] != byte(src[2*j+1]) {
			t.Fatalf("byte %d: even %d odd %d, want %d %d", j, even[j], odd[j], byte(src[2*j]), byte(src[2*j+1]))
		}
	}
}

// BenchmarkQ4G128Cached times one thread's W4A8 multiply of a matrix the
// last-level cache holds (2048x4096, 512x14336: 4 and 3.5 MiB) on every
// kernel set of this CPU, at batch 1 and 16: the kernels' compute rate,
// which must stay above one core's share of the DRAM bandwidth.
// QGEMV_CPU_DISABLE narrows the sets as for New.
func BenchmarkQ4G128Cached(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, isa := range ISAs() {
		if !Supported(isa) {
			continue
		}
		be, err := New(Config{ISA: isa, Threads: 1})
		if err != nil {
			continue // disabled
		}
		for _, sh := range [][2]int{{2048, 4096}, {512, 14336}} {
			m := randMatrix(b, rng, sh[0], sh[1])
			mx, err := be.Load(m)
			if err != nil {
				b.Fatal(err)
			}
			for _, batch := range []int{1, 16} {
				xq := make([]int8, batch*m.PCols)
				for i := range xq {
					xq[i] = int8(rng.IntN(255) - 127)
				}
				xs := make([]float32, batch*m.PCols/128)
				for i := range xs {
					xs[i] = 0.01
				}
				dst := make([]float32, batch*m.Rows)
				b.Run(fmt.Sprintf("b%d/%dx%d/%s", batch, sh[0], sh[1], mx.Kernel()), func(b *testing.B) {
					b.SetBytes(int64(m.Rows * m.PCols / 2))
					for i := 0; i < b.N; i++ {
						if err := mx.MulI8(dst, xq, xs, batch); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
		be.Close()
	}
}

// TestStreamReadThreads: absurd thread counts read the buffer with a
// bounded team (StreamRead(buf, math.MaxInt) panicked in make before)
// and give the same checksum.
func TestStreamReadThreads(t *testing.T) {
	buf := streamTestBuf(1000)
	want := StreamRead(buf, 1)
	for _, threads := range []int{-5, 0, 3, 1 << 20, math.MaxInt} {
		if got := StreamRead(buf, threads); got != want {
			t.Errorf("%d threads: checksum %x, want %x", threads, got, want)
		}
		for _, shape := range ReadShapes() {
			if got, err := StreamReadShape(buf, threads, shape); err != nil || got != want {
				t.Errorf("%s, %d threads: checksum %x (%v), want %x", shape, threads, got, err, want)
			}
		}
	}
}
