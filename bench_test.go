package qgemv_test

// Benchmarks of every format on every backend this machine runs, named
//
//	BenchmarkGEMV/<format>/<activation>/<R>x<C>/<backend>[-1thread]
//	BenchmarkGEMVBatch/<format>/<activation>/b<M>/<R>x<C>/<backend>
//	BenchmarkReadBandwidth/threads=<n>
//
// b.SetBytes is the bytes one multiply streams (weights, scales, zeros,
// activations in, results out), so the MB/s column compares directly with
// BenchmarkReadBandwidth from the same run. CPU benchmarks beyond the
// last-level cache also report read-GB/s, the read bandwidth measured
// with the same thread count just before and after their timed loop, and
// %read, their MB/s as a percentage of it; GPU benchmarks report
// kernel-us, the multiply kernels' own time over the same matrices, and
// over-us, what a call takes beyond it. Shapes without a suffix rotate
// over enough distinct matrices to exceed the last-level cache (weights
// stream from DRAM); shapes suffixed "-cached" reuse one small matrix.
// Matrices are loaded WithHugePages(true) and the roofline buffer is
// huge-page memory too, so both see the same paging.

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/cpu"
	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
	"github.com/qgemv/qgemv/layout/codebook"
)

type benchShape struct {
	rows, cols int
	cached     bool
}

func (s benchShape) String() string {
	if s.cached {
		return fmt.Sprintf("%dx%d-cached", s.rows, s.cols)
	}
	return fmt.Sprintf("%dx%d", s.rows, s.cols)
}

var benchShapes = []benchShape{{4096, 14336, false}, {14336, 4096, false}, {1024, 4096, true}}

type matKey struct {
	format string
	shape  benchShape
}

var matCache = map[matKey][]layout.Matrix{}

var q4 = layout.FormatSpec{Format: layout.FormatQ4G128, N: 4, G: 128}

// benchAct is a benchmark's activation type: Mul with A8 or A32, or
// MulFP16.
type benchAct string

const (
	a8  benchAct = "A8"
	a16 benchAct = "A16"
	a32 benchAct = "A32"
	// a16f is A16 from float32 activations, Mul rounding them (on a GPU
	// backend, on the device); a16 passes binary16 ones to MulFP16.
	a16f benchAct = "A16f"
)

// workingSet is synth.WorkingSet, taken once.
var workingSet = sync.OnceValues(synth.WorkingSet)

// benchWorkingSet returns the bytes a benchmark rotates over, failing b
// on a bad synth.WorkingSetEnv.
func benchWorkingSet(b *testing.B) int64 {
	ws, err := workingSet()
	if err != nil {
		b.Fatal(err)
	}
	return ws
}

// benchMatrices returns the distinct matrices a benchmark rotates over.
func benchMatrices(b *testing.B, spec layout.FormatSpec, s benchShape) []layout.Matrix {
	key := matKey{spec.String(), s}
	if ms, ok := matCache[key]; ok {
		return ms
	}
	clear(matCache) // keep one format's matrices in memory at a time
	first, err := synth.Matrix(spec, s.rows, s.cols, 1)
	if err != nil {
		b.Fatal(err)
	}
	n := 1
	if !s.cached {
		n = synth.Rotation(first.StreamBytes(), benchWorkingSet(b))
	}
	ms := []layout.Matrix{first}
	for i := 1; i < n; i++ {
		m, err := synth.Matrix(spec, s.rows, s.cols, uint64(i+1))
		if err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
	}
	matCache[key] = ms
	return ms
}

// benchBackends lists the available backends' names.
func benchBackends() []string {
	var out []string
	for _, c := range qgemv.Probe().Candidates {
		if c.Available {
			out = append(out, c.Name)
		}
	}
	return out
}

func benchGEMV(b *testing.B, backend string, threads int, spec layout.FormatSpec, s benchShape, act benchAct, batch int, wrap ...func(layout.Matrix) layout.Matrix) {
	eng, err := qgemv.Open(qgemv.WithBackend(backend), qgemv.WithThreads(threads), qgemv.WithHugePages(true))
	if err != nil {
		b.Skip(err)
	}
	defer eng.Close()
	var mats []*qgemv.Matrix
	var streamed int64
	for _, m := range benchMatrices(b, spec, s) {
		if len(wrap) > 0 {
			m = wrap[0](m)
		}
		mx, err := eng.Load(m)
		if err != nil {
			b.Fatal(err)
		}
		mats = append(mats, mx)
		streamed = m.StreamBytes()
	}
	x := synth.Vector(batch*s.cols, 3)
	xh := make([]layout.FP16, len(x))
	for i, v := range x {
		xh[i] = layout.ToFP16(v)
	}
	y := make([]float32, batch*s.rows)
	actBytes := int64(4) // float32 activations (A8 too: Mul quantizes them)
	if act == a16 {
		actBytes = 2
	}
	streamed += int64(batch) * (int64(s.cols)*actBytes + int64(s.rows)*4)
	mul := func(mx *qgemv.Matrix) error {
		switch act {
		case a16:
			return mx.MulFP16(y, xh, batch)
		case a16f:
			return mx.Mul(y, x, batch, qgemv.A16)
		case a8:
			return mx.Mul(y, x, batch, qgemv.A8)
		}
		return mx.Mul(y, x, batch, qgemv.A32)
	}
	for _, mx := range mats { // warm up: page in every matrix
		if err := mul(mx); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(streamed)
	b.ReportAllocs()
	roof := !s.cached && strings.HasPrefix(backend, "cpu")
	var reads []float64
	if roof {
		reads = readGBs(reads, threads)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := mul(mats[i%len(mats)]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(2*s.rows*s.cols*batch)*float64(b.N)/sec/1e9, "GFLOPS")
	if roof {
		reads = readGBs(reads, threads)
		slices.Sort(reads)
		read := reads[len(reads)/2]
		b.ReportMetric(read, "read-GB/s")
		b.ReportMetric(100*float64(streamed)*float64(b.N)/sec/1e9/read, "%read")
	}
	// GPU backends: the multiply kernels' own time over the same matrices
	// (Engine.KernelTime, activations uploaded once), and what a call costs
	// beyond it: the host round trip the API adds.
	if !strings.HasPrefix(backend, "cpu") {
		ka := map[benchAct]qgemv.Activation{a8: qgemv.A8, a16: qgemv.A16, a16f: qgemv.A16, a32: qgemv.A32}[act]
		if kt, err := eng.KernelTime(mats, ka, batch, 200); err == nil {
			us := kt.Seconds() * 1e6
			b.ReportMetric(us, "kernel-us")
			b.ReportMetric(sec*1e6/float64(b.N)-us, "over-us")
		}
	}
}

// readGBs appends three read-bandwidth measurements (GB/s of
// qgemv.ReadBandwidth, the best read loop shape, over a synth.WorkingSet
// huge-page buffer, with threads threads, 0 meaning GOMAXPROCS) to r.
// benchGEMV takes them just before and just after its timed loop and
// reports the multiply's GB/s as a percentage of their median (%read):
// on a shared host whose bandwidth drifts by tens of percent within
// minutes, BenchmarkReadBandwidth run once at the end of a long run is no
// roofline for the early benchmarks.
func readGBs(r []float64, threads int) []float64 {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	buf := roofBuf()
	for i := 0; i < 3; i++ {
		bw, _ := qgemv.ReadBandwidth(buf, threads)
		r = append(r, bw/1e9)
	}
	return r
}

// roofBuf is the read-bandwidth buffer, huge-page memory as the matrices
// (WithHugePages), allocated and paged in once.
var roofBuf = sync.OnceValue(func() []uint64 {
	ws, err := workingSet() // its callers have checked err (benchWorkingSet)
	if err != nil {
		ws = synth.BeyondLLC
	}
	blk := hugemem.Alloc(int(ws))
	buf := unsafe.Slice((*uint64)(unsafe.Pointer(&blk.Bytes[0])), ws/8)
	for i := range buf {
		buf[i] = uint64(i)
	}
	return buf
})

func BenchmarkGEMV(b *testing.B) {
	for _, act := range []benchAct{a8, a16, a16f, a32} {
		for _, s := range benchShapes {
			for _, be := range benchBackends() {
				if act == a16f && strings.HasPrefix(be, "cpu") { // rounded on the host as by MulFP16's caller
					continue
				}
				b.Run(fmt.Sprintf("Q4G128/%v/%v/%s", act, s, be), func(b *testing.B) {
					benchGEMV(b, be, 0, q4, s, act, 1)
				})
				b.Run(fmt.Sprintf("Q4G128/%v/%v/%s-1thread", act, s, be), func(b *testing.B) {
					benchGEMV(b, be, 1, q4, s, act, 1)
				})
			}
		}
	}
	// Codebooks: the Psumbook kernel, the dequantize-then-multiply baseline
	// (suffix -dequant) on every CPU kernel set; compare with
	// Q4G128/A32/4096x14336/<backend> above.
	baseline := func(m layout.Matrix) layout.Matrix { return codebook.Baseline{Codebook: m.(*codebook.Codebook)} }
	for _, be := range benchBackends() {
		if be == "cpu-generic" && len(benchBackends()) > 1 {
			continue
		}
		for _, name := range []string{"cb-m1v4b8g128", "cb-m2v8b8g128"} {
			spec, err := layout.ParseFormatSpec(name)
			if err != nil {
				b.Fatal(err)
			}
			s := benchShapes[0]
			b.Run(fmt.Sprintf("%s/A32/%v/%s", formatName(spec), s, be), func(b *testing.B) {
				benchGEMV(b, be, 0, spec, s, a32, 1)
			})
			b.Run(fmt.Sprintf("%s-dequant/A32/%v/%s", formatName(spec), s, be), func(b *testing.B) {
				benchGEMV(b, be, 0, spec, s, a32, 1, baseline)
			})
		}
	}
	// The low-bit family on the best CPU backend; the last name level is
	// the kernel sets it runs (Matrix.Kernel).
	for _, name := range []string{"bits8g128", "bits4g128", "bits3g128", "bits2g128", "bits1g128", "sparse12g128"} {
		spec, err := layout.ParseFormatSpec(name)
		if err != nil {
			b.Fatal(err)
		}
		kernel := lowKernel(b, spec)
		// 4096x14336 streams from DRAM; 1024x4096-cached measures the
		// kernels' compute rate (run it with -test.cpu 1 for one core).
		for _, s := range []benchShape{benchShapes[0], benchShapes[2]} {
			for _, act := range []benchAct{a8, a16, a32} {
				b.Run(fmt.Sprintf("%s/%v/%v/%s", formatName(spec), act, s, kernel), func(b *testing.B) {
					benchGEMV(b, "cpu", 0, spec, s, act, 1)
				})
			}
		}
	}
}

// lowKernel names the kernel sets the best CPU backend runs for a low-bit
// format (Matrix.Kernel: e.g. "cpu-avx512vnni-a8+generic" when only the A8
// path has assembly).
func lowKernel(b *testing.B, spec layout.FormatSpec) string {
	eng, err := qgemv.Open(qgemv.WithBackend("cpu"))
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	m, err := synth.Matrix(spec, 16, 1024, 1)
	if err != nil {
		b.Fatal(err)
	}
	mat, err := eng.Load(m)
	if err != nil {
		b.Fatal(err)
	}
	return mat.Kernel()
}

// formatName is the format's benchmark name, e.g. "Bits4G128".
func formatName(spec layout.FormatSpec) string {
	m, err := synth.Matrix(spec, 1, 1, 0)
	if err != nil {
		return spec.String()
	}
	return m.Name()
}

func BenchmarkGEMVBatch(b *testing.B) {
	s := benchShapes[0]
	for _, act := range []benchAct{a8, a32} {
		for _, batch := range []int{1, 2, 4, 8, 16} {
			for _, be := range benchBackends() {
				b.Run(fmt.Sprintf("Q4G128/%v/b%d/%v/%s", act, batch, s, be), func(b *testing.B) {
					benchGEMV(b, be, 0, q4, s, act, batch)
				})
			}
		}
	}
	// Bits8 and Bits4 with int8 activations (on AMX tiles where the CPU
	// has them), groups of 128, 64 and 32 (Q8_0's and Q4_0's shape), on
	// the best CPU backend.
	for _, name := range []string{"bits8g128", "bits4g128", "bits4g64", "bits8g32", "bits4g32"} {
		spec, err := layout.ParseFormatSpec(name)
		if err != nil {
			b.Fatal(err)
		}
		kernel := lowKernel(b, spec)
		for _, batch := range []int{1, 2, 4, 8, 16} {
			b.Run(fmt.Sprintf("%s/A8/b%d/%v/%s", formatName(spec), batch, s, kernel), func(b *testing.B) {
				benchGEMV(b, "cpu", 0, spec, s, a8, batch)
			})
		}
	}
	// Bits4 (one-row float kernels) and Bits2 (table kernels) with float
	// activations on the best CPU backend.
	for _, name := range []string{"bits4g128", "bits2g128"} {
		spec, err := layout.ParseFormatSpec(name)
		if err != nil {
			b.Fatal(err)
		}
		kernel := lowKernel(b, spec)
		for _, batch := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/A32/b%d/%v/%s", formatName(spec), batch, s, kernel), func(b *testing.B) {
				benchGEMV(b, "cpu", 0, spec, s, a32, batch)
			})
		}
	}
}

// BenchmarkReadBandwidth streams a buffer far larger than the last-level
// cache with 1 and with all threads, in every loop shape of the CPU
// (cpu.ReadShapes): the best is the roofline for BenchmarkGEMV
// (qgemv.ReadBandwidth).
func BenchmarkReadBandwidth(b *testing.B) {
	benchWorkingSet(b)
	buf := roofBuf()
	for _, t := range []int{1, runtime.GOMAXPROCS(0)} {
		for _, shape := range cpu.ReadShapes() {
			b.Run(fmt.Sprintf("threads=%d/%s", t, shape), func(b *testing.B) {
				b.SetBytes(int64(len(buf)) * 8)
				for i := 0; i < b.N; i++ {
					if _, err := cpu.StreamReadShape(buf, t, shape); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkMatVANS times the MatVANS chain (10 matrices 4096x4096,
// sigma 4) through Engine.Chain on the best CPU backend, with plain int8
// matrices and entropy-coded in both ANS layouts, each chain checked
// against the reference. Setup (drawing and encoding 20 matrices) takes a
// few seconds.
func BenchmarkMatVANS(b *testing.B) {
	const d = 4096
	wl, err := matvans.New(d, 10, 4, 1)
	if err != nil {
		b.Fatal(err)
	}
	eng, err := qgemv.Open(qgemv.WithBackend("cpu"))
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	run := func(b *testing.B, ms []layout.Matrix) {
		var mats []*qgemv.Matrix
		var bytes int64
		for _, m := range ms {
			mx, err := eng.Load(m)
			if err != nil {
				b.Fatal(err)
			}
			defer mx.Close()
			mats, bytes = append(mats, mx), bytes+m.StreamBytes()
		}
		out := make([]int8, d)
		b.SetBytes(bytes)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := eng.Chain(out, mats, wl.Alpha, wl.V0); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if h, want := matvans.Hash(out), matvans.Hash(wl.Ref); h != want {
			b.Fatalf("chain hash %08x, reference %08x", h, want)
		}
	}
	var int8s []layout.Matrix
	for _, w := range wl.W {
		m, err := layout.NewInt8(w, d, d)
		if err != nil {
			b.Fatal(err)
		}
		int8s = append(int8s, m)
	}
	b.Run(fmt.Sprintf("int8/d=%d", d), func(b *testing.B) { run(b, int8s) })
	for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
		var ms []layout.Matrix
		for _, w := range wl.W {
			m, err := ans.Encode(w, d, d, l)
			if err != nil {
				b.Fatal(err)
			}
			ms = append(ms, m)
		}
		b.Run(fmt.Sprintf("%s/d=%d", l, d), func(b *testing.B) { run(b, ms) })
	}
}
