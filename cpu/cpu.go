// Package cpu is qgemv's CPU backend: it picks a kernel set for the CPU's
// features, prepares activations once per call (padding, per-group sums,
// int8 quantization, reordering for the SIMD kernels), splits rows across
// goroutines and runs the kernels over row ranges.
//
// A pure-Go generic kernel set is always compiled and is the oracle for the
// assembly; the build tags noasm and purego force it.
package cpu

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
)

// MaxBatch is the largest batch (number of activation vectors per call).
const MaxBatch = maxBatch

const maxBatch = 16

// ISA names a kernel set.
type ISA string

// Generic is the pure-Go kernel set, available everywhere.
const Generic ISA = "generic"

// kernelSet is one ISA's kernels for Q4G128.
type kernelSet struct {
	isa ISA
	// requires lists the CPU features (as cpuid names them) every
	// instruction of the set needs, OS support included.
	requires []string
	// prep8 and prep32, if set, lay out groups [g0, g1) of the call's
	// activations for the kernels, once per multiply, before the rows are
	// split (in parallel over groups).
	prep8, prep32 func(c *call, g0, g1 int)
	// alloc8 and alloc32, if set, size the buffers prep8 and prep32 fill.
	alloc8, alloc32 func(c *call)
	// a8 and a32 compute rows [r0, r1) of every vector of the call; r0 is
	// a multiple of 16.
	a8, a32 func(c *call, r0, r1 int)
	// kernels lists the assembly functions a8 and a32 may call (for the
	// test that checks requires covers their "// Requires:" lines).
	kernels []any
	// amx, if set, is this set with AMX kernels for batches, which New
	// picks where the CPU has AMX, the OS lets the process use its tiles
	// and EnvDisable does not name "amx". label names such a variant in
	// kernel names (the isa otherwise).
	amx   *kernelSet
	label string
	// metaRows, if set, returns the super-tile rows in which Load keeps a
	// matrix's scales and zeros too (q4Meta) on a backend of threads
	// threads, for the batch-1 W4A8 kernel; 0: none.
	metaRows func(threads int) int
	// tiles marks the AMX variant: Bits batches run on AMX tiles too
	// (bitsAmxKernels).
	tiles bool
}

// name is the set's name in kernel names: its label, else its ISA.
func (k *kernelSet) name() string {
	if k.label != "" {
		return k.label
	}
	return string(k.isa)
}

// call is one multiply's prepared inputs (part of its pooled scratch,
// so that a multiply allocates nothing).
type call struct {
	m     *layout.Q4G128
	tm    *q4Meta // the matrix's metadata in super-tile order, or nil
	set   *kernelSet
	batch int
	dst   []float32
	sc    *scratch
	x     []float32 // A32: batch*PCols, zero padded
	xsum  []float32 // A32: batch*Groups
	xq    []int8    // A8: batch*PCols
	xs    []float32 // A8: batch*Groups
	isum  []int32   // A8: batch*Groups
	in    []float32 // the caller's float activations (batch*Cols), or nil (MulI8)
}

// The steps of a multiply as rangeJobs on its call: preparing groups of
// activations, and computing rows.
type (
	prepF32Job struct{ c *call }
	prepI8Job  struct{ c *call }
	rowsF32Job struct{ c *call }
	rowsI8Job  struct{ c *call }
)

func (j prepF32Job) do(g0, g1 int) error {
	c := j.c
	prepareF32(c, c.in, g0, g1)
	if c.set.prep32 != nil {
		c.set.prep32(c, g0, g1)
	}
	return nil
}

func (j prepI8Job) do(g0, g1 int) error {
	c := j.c
	if c.in != nil {
		if err := quantizeA8(c, c.in, g0, g1); err != nil {
			return err
		}
	}
	prepareI8(c, g0, g1)
	if c.set.prep8 != nil {
		c.set.prep8(c, g0, g1)
	}
	return nil
}

func (j rowsF32Job) do(r0, r1 int) error { j.c.set.a32(j.c, r0, r1); return nil }
func (j rowsI8Job) do(r0, r1 int) error  { j.c.set.a8(j.c, r0, r1); return nil }

var genericSet = &kernelSet{
	isa: Generic,
	a32: func(c *call, r0, r1 int) { a32Generic(c.m, c.x, c.xsum, c.dst, c.batch, r0, r1) },
	a8:  func(c *call, r0, r1 int) { a8Generic(c.m, c.xq, c.xs, c.isum, c.dst, c.batch, r0, r1) },
}

// kernelSets lists every compiled kernel set, best first; the generic set
// is last. Architecture files prepend to it in init.
var kernelSets = []*kernelSet{genericSet}

// ISAs returns the kernel sets compiled into this binary, best first,
// whether or not this CPU supports them.
func ISAs() []ISA {
	out := make([]ISA, len(kernelSets))
	for i, k := range kernelSets {
		out[i] = k.isa
	}
	return out
}

// Supported reports whether this CPU (and OS) can run the kernel set isa.
func Supported(isa ISA) bool {
	k := findSet(isa)
	return k != nil && hasAll(k.requires)
}

// Requires returns the CPU features the kernel set isa needs.
func Requires(isa ISA) []string {
	if k := findSet(isa); k != nil {
		return append([]string(nil), k.requires...)
	}
	return nil
}

// EnvDisable names the environment variable that lists kernel sets Best
// skips: comma separated, in any case, with or without the "cpu-" prefix
// (e.g. "avx512vnni" or "CPU-AVX512VNNI,avx2"). Its value at start-up
// also chooses the assembly helpers (activation quantizer, SwiGLU,
// weight encoders, the codebook k-means assignment): none on AVX-512
// where it names avx512vnni, Go's where it leaves only the generic set.
const EnvDisable = "QGEMV_CPU_DISABLE"

// Best returns the best kernel set this CPU supports, skipping the sets
// that EnvDisable names.
func Best() ISA {
	disabled, _ := Disabled()
	for _, k := range kernelSets {
		if hasAll(k.requires) && !slices.Contains(disabled, k.isa) {
			return k.isa
		}
	}
	return Generic
}

// Disabled returns the kernel sets EnvDisable names, and the names in it
// that are no kernel set Best can skip (so that a typo can be reported
// instead of silently disabling nothing): generic, the fallback, cannot
// be disabled. "amx" is no set: it turns off the AMX kernels (AMXDisabled).
func Disabled() (sets []ISA, unknown []string) {
	sets, unknown, _ = disabled()
	return sets, unknown
}

// AMXDisabled reports whether EnvDisable names "amx": backends then run
// the AVX-512 kernels at every batch where AMX kernels would run.
func AMXDisabled() bool {
	_, _, amx := disabled()
	return amx
}

// disabled parses EnvDisable: the kernel sets it names, the names that
// are none, and whether it names "amx".
func disabled() (sets []ISA, unknown []string, amx bool) {
	for _, v := range strings.Split(os.Getenv(EnvDisable), ",") {
		name := strings.ToLower(strings.TrimSpace(v))
		switch k := findSet(ISA(strings.TrimPrefix(name, "cpu-"))); {
		case name == "":
		case name == "amx":
			amx = true
		case k != nil && k.isa != Generic:
			sets = append(sets, k.isa)
		default:
			unknown = append(unknown, strings.TrimSpace(v))
		}
	}
	return sets, unknown, amx
}

func findSet(isa ISA) *kernelSet {
	for _, k := range kernelSets {
		if k.isa == isa {
			return k
		}
	}
	return nil
}

// Config configures a CPU backend.
type Config struct {
	// ISA forces a kernel set; empty selects Best().
	ISA ISA
	// Threads is the number of goroutines a multiply may use; 0 means
	// runtime.GOMAXPROCS(0).
	Threads int
	// HugePages makes Load copy each matrix into memory backed by
	// transparent huge pages (Linux; ordinary memory elsewhere) instead
	// of using it in place: weights then stream without a TLB miss every
	// 4 KiB. The copy is freed by Matrix.Close.
	HugePages bool
}

// Backend runs multiplies on the CPU with one kernel set, on its own
// worker goroutines (see team), which Close stops.
type Backend struct {
	set     *kernelSet
	threads int
	huge    bool
	team    *team
	closed  atomic.Bool
}

// New returns a CPU backend. A forced ISA that is unknown or that this CPU
// cannot run is an error.
func New(cfg Config) (*Backend, error) {
	isa := cfg.ISA
	if isa == "" {
		isa = Best()
	}
	k := findSet(isa)
	if k == nil {
		return nil, fmt.Errorf("cpu: unknown kernel set %q (compiled: %v)", isa, ISAs())
	}
	if !hasAll(k.requires) {
		return nil, fmt.Errorf("cpu: kernel set %q needs CPU features %v; this CPU lacks %v", isa, k.requires, missing(k.requires))
	}
	if cfg.Threads < 0 {
		return nil, fmt.Errorf("cpu: Threads = %d, must be >= 0", cfg.Threads)
	}
	t := cfg.Threads
	if t == 0 {
		t = runtime.GOMAXPROCS(0)
	}
	if k.amx != nil && !AMXDisabled() && hasAll(k.amx.requires) && amxPermitted() {
		k = k.amx
	}
	b := &Backend{set: k, threads: t, huge: cfg.HugePages, team: &team{}}
	// A backstop for a backend never closed: its parked workers do not
	// keep it reachable, so the cleanup stops them once it is collected.
	runtime.AddCleanup(b, func(t *team) { t.close() }, b.team)
	return b, nil
}

// Close stops the backend's worker goroutines. Matrices loaded on it
// still multiply afterwards, on goroutines started per call (the qgemv
// API closes them first); a second Close returns ErrClosed.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return ErrClosed
	}
	b.team.close()
	return nil
}

// ISA returns the backend's kernel set.
func (b *Backend) ISA() ISA { return b.set.isa }

// Threads returns the number of goroutines a multiply may use.
func (b *Backend) Threads() int { return b.threads }

// Matrix is a Q4G128 matrix bound to a CPU backend. Multiplies are safe
// for concurrent use, also with Close, which waits for them. The matrix
// must not be modified while loaded.
type Matrix struct {
	b     *Backend
	m     *layout.Q4G128
	tm    *q4Meta        // set where the backend's batch-1 W4A8 kernel reads it
	block *hugemem.Block // the huge-page copy, if any
	// mu is read-held by every multiply and write-held by Close, so that
	// Close waits for the multiplies in flight before it unmaps the
	// huge-page copy they read.
	mu     sync.RWMutex
	closed bool
}

// q4Meta is a Q4G128 matrix's scales and zeros in super-tile order: per
// rows rows (a W4A8 kernel's result lanes, 16 or 8) and group, the rows'
// scales and zero nibbles, so that the batch-1 W4A8 kernels read them as
// one sequential stream. In the format's order a 16-row super tile reads
// 64 bytes of every 512 of scales: on a Zen 5 VM, two threads, the FFN
// block of 14336x4096 and 4096x14336 matrices streamed at 81-84% of the
// read meter that way and at 93-101% with metadata the kernel read in
// order (scaled wrongly, to measure). The copy costs 4.5 bytes per row
// and group (64 weight bytes), 7% of the matrix, besides the format's own.
type q4Meta struct {
	rows   int
	scales []float32 // [super tile][group][rows]
	zeros  []byte    // [super tile][group][rows/2]
}

// newQ4Meta copies m's scales and zeros into super tiles of rows rows (a
// divisor of 128; all PRows rows: the kernels read whole super tiles).
func newQ4Meta(m *layout.Q4G128, rows int) *q4Meta {
	groups := m.Groups()
	tiles := m.PRows / rows
	t := &q4Meta{rows: rows, scales: make([]float32, tiles*groups*rows), zeros: make([]byte, tiles*groups*rows/2)}
	for st := 0; st < tiles; st++ {
		for g := 0; g < groups; g++ {
			mi := m.MetaIndex(st*rows, g) // even: the zero nibbles start a byte
			o := (st*groups + g) * rows
			copy(t.scales[o:o+rows], m.Scales[mi:mi+rows])
			copy(t.zeros[o/2:o/2+rows/2], m.Zeros[mi/2:mi/2+rows/2])
		}
	}
	return t
}

// ErrClosed is returned by a multiply on a closed matrix or backend
// (the same value as qgemv.ErrClosed).
var ErrClosed = errs.ErrClosed

func init() {
	loaders.Register(layout.FormatQ4G128, mat.Typed("cpu", func(b *Backend, m *layout.Q4G128) (Mat, error) {
		return mat.Bind(b.Load(m))
	}))
}

// Load validates m and binds it to the backend. The matrix's data is
// used in place, or copied into huge-page memory if the backend was
// configured with HugePages; its fields (shape, slice headers) are copied,
// so that a caller reassigning them after Load cannot send the kernels
// outside the validated slices (the data itself must not change).
func (b *Backend) Load(m *layout.Q4G128) (*Matrix, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c := *m // the kernels read this snapshot's slices and shape, not the caller's struct
	mx := &Matrix{b: b, m: &c}
	if b.huge {
		mx.m, mx.block = hugeCopy(&c)
		runtime.SetFinalizer(mx, (*Matrix).Close) // backstop; Close is the API
	}
	if b.set.metaRows != nil {
		if rows := b.set.metaRows(b.threads); rows > 0 {
			mx.tm = newQ4Meta(mx.m, rows)
		}
	}
	return mx, nil
}

// hugeCopy copies m's weights, scales and zeros into one huge-page block.
func hugeCopy(m *layout.Q4G128) (*layout.Q4G128, *hugemem.Block) {
	align := func(n int) int { return (n + 63) &^ 63 }
	nw, ns, nz := len(m.Weights), 4*len(m.Scales), len(m.Zeros)
	blk := hugemem.Alloc(align(nw) + align(ns) + nz)
	c := *m
	c.Weights = blk.Bytes[:nw:nw]
	copy(c.Weights, m.Weights)
	sb := blk.Bytes[align(nw) : align(nw)+ns]
	c.Scales = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(sb))), len(m.Scales))
	copy(c.Scales, m.Scales)
	c.Zeros = blk.Bytes[align(nw)+align(ns):][:nz:nz]
	copy(c.Zeros, m.Zeros)
	return &c, blk
}

// Close releases the matrix (and its huge-page copy), after the
// multiplies in flight return. Multiplies after Close return ErrClosed.
func (mx *Matrix) Close() error {
	mx.mu.Lock()
	defer mx.mu.Unlock()
	if mx.closed {
		return ErrClosed
	}
	mx.closed = true
	if mx.block != nil {
		runtime.SetFinalizer(mx, nil)
		mx.block.Free()
	}
	return nil
}

// Kernel names the kernel set the matrix runs, e.g. "cpu-avx512vnni".
func (mx *Matrix) Kernel() string { return "cpu-" + mx.b.set.name() }

// Q4G128 returns the loaded matrix. With HugePages it points into the
// matrix's huge-page copy, which Close (or the finalizer, once mx is
// unreachable) frees: use it only while mx is open and referenced.
func (mx *Matrix) Q4G128() *layout.Q4G128 { return mx.m }

// ErrBatch is wrapped by the error of a multiply whose batch is outside
// 1..MaxBatch (the same value as qgemv.ErrBatch).
var ErrBatch = errs.ErrBatch

// checkBatch checks batch and that mx is open (mx.mu read-held).
func (mx *Matrix) checkBatch(batch int) error {
	if mx.closed {
		return ErrClosed
	}
	if batch < 1 || batch > maxBatch {
		return fmt.Errorf("cpu: %w (got %d)", ErrBatch, batch)
	}
	return nil
}

func checkLen(what string, got, batch, per int) error {
	if got != batch*per {
		return fmt.Errorf("cpu: %s has %d elements, want batch %d x %d = %d", what, got, batch, per, batch*per)
	}
	return nil
}

// checkActScales rejects activation scales that are negative or not
// finite (MulI8 callers pass them in).
func checkActScales(xs []float32) error {
	for i, s := range xs {
		if s != s || s < 0 || s > 3.4e38 {
			return fmt.Errorf("cpu: activation scale %d is %v, want finite and >= 0", i, s)
		}
	}
	return nil
}

// checkFloatArgs checks a multiply's batch and float32 slice lengths.
func (mx *Matrix) checkFloatArgs(dst, x []float32, batch int) error {
	if err := mx.checkBatch(batch); err != nil {
		return err
	}
	if err := checkLen("x", len(x), batch, mx.m.Cols); err != nil {
		return err
	}
	return checkLen("dst", len(dst), batch, mx.m.Rows)
}

// MulF32 computes dst[m*Rows+r] = sum_c W[r,c] * x[m*Cols+c] for m < batch
// with float32 activations (W4A32). Non-finite activations are not
// checked: they propagate as in any float computation.
func (mx *Matrix) MulF32(dst, x []float32, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	return mx.mulF32(dst, x, batch)
}

// mulF32 is MulF32 with mx.mu read-held.
func (mx *Matrix) mulF32(dst, x []float32, batch int) error {
	defer runtime.KeepAlive(mx) // the finalizer frees the huge-page weights the kernels read
	m := mx.m
	if err := mx.checkFloatArgs(dst, x, batch); err != nil {
		return err
	}
	sc := getScratch()
	defer putScratch(sc)
	c := &sc.call
	*c = call{m: m, tm: mx.tm, set: mx.b.set, batch: batch, dst: dst, sc: sc, in: x}
	c.x, c.xsum = sc.f32Bufs(m, batch)
	if c.set.alloc32 != nil {
		c.set.alloc32(c)
	}
	_ = mx.b.forJob(m.Groups(), groupGrain, prepF32Job{c})
	err := mx.b.rowsJob(m.Rows, m.PCols/2, chunksPerThread, rowsF32Job{c})
	*c = call{}
	return err
}

// widenPool holds MulF16's widened activations.
var widenPool = sync.Pool{New: func() any { return new([]float32) }}

// MulF16 multiplies binary16 activations, widened exactly to float32
// (W4A16); the result is that of MulF32 on the widened values.
func (mx *Matrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	if err := mx.checkBatch(batch); err != nil {
		return err
	}
	if err := checkLen("x", len(x), batch, mx.m.Cols); err != nil {
		return err
	}
	p := widenPool.Get().(*[]float32)
	*p = grow(*p, len(x))
	layout.FromFP16s(*p, x)
	err := mx.mulF32(dst, *p, batch)
	widenPool.Put(p)
	return err
}

// MulI32 returns an error: Q4G128 has scales (int32 products are for the
// int8 formats).
func (mx *Matrix) MulI32([]int32, []int8, int) error { return noInt32("Q4G128") }

// MulA8 quantizes x to int8 per 128 inputs (layout.QuantizeA8) and
// computes the W4A8 product into dst. The result is bit-exact across
// kernel sets and backends. Non-finite activations are an error.
func (mx *Matrix) MulA8(dst, x []float32, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	defer runtime.KeepAlive(mx) // see MulF32
	m := mx.m
	if err := mx.checkFloatArgs(dst, x, batch); err != nil {
		return err
	}
	sc := getScratch()
	defer putScratch(sc)
	c := &sc.call
	*c = call{m: m, tm: mx.tm, set: mx.b.set, batch: batch, dst: dst, sc: sc, in: x}
	c.xq, c.xs = sc.int8Bufs(m.PCols, batch)
	err := mx.mulI8(c)
	*c = call{}
	return err
}

// MulI8 computes the W4A8 product for activations already quantized with
// layout.QuantizeA8: xq holds batch*PCols int8 values, xs batch*PCols/128
// scales.
func (mx *Matrix) MulI8(dst []float32, xq []int8, xs []float32, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	defer runtime.KeepAlive(mx) // see MulF32
	m := mx.m
	if err := mx.checkBatch(batch); err != nil {
		return err
	}
	if err := checkLen("xq", len(xq), batch, m.PCols); err != nil {
		return err
	}
	if err := checkLen("xs", len(xs), batch, m.Groups()); err != nil {
		return err
	}
	if err := checkLen("dst", len(dst), batch, m.Rows); err != nil {
		return err
	}
	if err := checkActScales(xs); err != nil {
		return err
	}
	sc := getScratch()
	defer putScratch(sc)
	c := &sc.call
	*c = call{m: m, tm: mx.tm, set: mx.b.set, batch: batch, dst: dst, sc: sc, xq: xq, xs: xs}
	err := mx.mulI8(c)
	*c = call{}
	return err
}

// mulI8 prepares the int8 activations group by group in parallel
// (quantizing c.in first when it is not nil), then runs the kernels.
func (mx *Matrix) mulI8(c *call) error {
	m := c.m
	c.isum = c.sc.int32Buf(c.batch * m.Groups())
	if c.set.alloc8 != nil {
		c.set.alloc8(c)
	}
	if err := mx.b.forJob(m.Groups(), groupGrain, prepI8Job{c}); err != nil {
		return err
	}
	return mx.b.rowsJob(m.Rows, m.PCols/2, chunksPerThread, rowsI8Job{c})
}

// QuantizeA8 is layout.QuantizeA8 (same bytes) split across the
// backend's goroutines by groups of 128 inputs. It allocates nothing.
func (b *Backend) QuantizeA8(xq []int8, xs []float32, x []float32) error {
	if len(xq)%128 != 0 || len(xs) != len(xq)/128 || len(x) > len(xq) {
		return layout.QuantizeA8(xq, xs, x) // reports the length error
	}
	j := quantJobs.Get().(*quantJob)
	j.xq, j.xs, j.x = xq, xs, x
	err := b.forJob(len(xs), groupGrain*4, j)
	*j = quantJob{}
	quantJobs.Put(j)
	return err
}

// quantJob quantizes groups [g0, g1) of x (Backend.QuantizeA8).
type quantJob struct {
	xq []int8
	xs []float32
	x  []float32
}

var quantJobs = sync.Pool{New: func() any { return new(quantJob) }}

func (j *quantJob) do(g0, g1 int) error {
	lo, hi := min(len(j.x), g0*128), min(len(j.x), g1*128)
	if err := QuantizeA8(j.xq[g0*128:g1*128], j.xs[g0:g1], j.x[lo:hi]); err != nil {
		return fmt.Errorf("cpu: inputs from %d: %w", lo, err)
	}
	return nil
}

// minBytesPerTask is the fewest weight bytes a multiply gives each
// goroutine: small multiplies stay on one. Low enough that a model's
// smallest matrices (LLaMA-3-8B's 1024x4096 k and v projections, 1-2 MB
// at 2-4 bits) still use 16 threads: with 256 KB they ran on eight, the
// other workers parked meanwhile, and the next multiply paid for waking
// them (a decode step on the 16-core Xeon took 1.11-1.15x the time).
const minBytesPerTask = 64 << 10

// groupGrain is the fewest 128-input groups one goroutine prepares.
const groupGrain = 8

// rangeJob is the work of a parallel step on the index range [i0, i1).
// The hot paths implement it with pooled structs, so that a multiply
// allocates nothing; rangeFunc adapts a closure for the others.
type rangeJob interface{ do(i0, i1 int) error }

// rangeFunc is a closure as a rangeJob.
type rangeFunc func(i0, i1 int) error

func (f rangeFunc) do(i0, i1 int) error { return f(i0, i1) }

// rowsFunc is a closure over rows, which cannot fail, as a rangeJob.
type rowsFunc func(r0, r1 int)

func (f rowsFunc) do(r0, r1 int) error { f(r0, r1); return nil }

// chunkRun is claimChunks' state: part p claims, in order, pieces of its
// own contiguous share of the items, then those left in the other parts'
// shares, until none is left. A part's pieces thus follow one another in
// memory, so a kernel's prefetch past the end of one piece fetches the
// next one it runs, not rows another thread has already read (as when
// parts took turns claiming). With tail set, pieces are per items
// except in the last 2*per of a share, which go in halving pieces, so
// that the parts finish within a small piece of each other rather than
// within a whole chunk (on the 16-core Xeon a chunk of 4096x14336 took
// about 30 us, and the parts' last ends were spread over 27 us of a
// 245 us multiply).
type chunkRun struct {
	j                    rangeJob
	n, per, grain, parts int
	tail                 bool          // halve the pieces at the end of a share
	cur                  []chunkCursor // per share: items claimed from its start
	mu                   sync.Mutex
	errAt                int // the lowest failed piece's first item, and its error
	err                  error
}

// chunkCursor is one share's claim counter, alone on its cache line.
type chunkCursor struct {
	next atomic.Int64
	_    [56]byte
}

// share returns share q's items [lo, hi): the grain units split evenly.
func (r *chunkRun) share(q int) (lo, hi int) {
	units := (r.n + r.grain - 1) / r.grain
	return min(r.n, q*units/r.parts*r.grain), min(r.n, (q+1)*units/r.parts*r.grain)
}

// piece returns the items of a share's next piece with rem left: per,
// or with tail, within the last 2*per, half of what is left, down to a
// quarter of per (multiples of grain, at least one grain).
func (r *chunkRun) piece(rem int) int {
	if !r.tail || rem > 2*r.per {
		return min(rem, r.per)
	}
	small := max(r.grain, r.per/4/r.grain*r.grain)
	return min(rem, max(small, roundUp(rem/2, r.grain)))
}

// traceChunk, when set (by tests, while no multiply runs), is called
// after each piece with the part that ran it, the piece's start and end,
// and whether its run has tail pieces (the row jobs; the activation
// preparation has none): the many-thread timing breakdown
// (TestChunkTrace).
var traceChunk func(part int, start, end time.Time, rows bool)

func (r *chunkRun) part(p int) {
	for k := range r.parts {
		q := (p + k) % r.parts
		lo, hi := r.share(q)
		for {
			cur := r.cur[q].next.Load()
			start := lo + int(cur)
			if start >= hi {
				break
			}
			size := r.piece(hi - start)
			if !r.cur[q].next.CompareAndSwap(cur, cur+int64(size)) {
				continue
			}
			var t0 time.Time
			if traceChunk != nil {
				t0 = time.Now()
			}
			err := r.j.do(start, start+size)
			if traceChunk != nil {
				traceChunk(p, t0, time.Now(), r.tail)
			}
			if err != nil {
				r.fail(start, err)
			}
		}
	}
}

// balanced marks chunkRun as a balancedJob: a part returns only when
// every piece is claimed.
func (r *chunkRun) balanced() {}

// fail records err for the piece starting at item i, keeping the lowest.
func (r *chunkRun) fail(i int, err error) {
	r.mu.Lock()
	if r.err == nil || i < r.errAt {
		r.errAt, r.err = i, err
	}
	r.mu.Unlock()
}

var chunkRuns = sync.Pool{New: func() any { return new(chunkRun) }}

// roundUp returns v rounded up to a multiple of m.
func roundUp(v, m int) int { return (v + m - 1) / m * m }

// parallelFor splits [0, n) into at most Threads contiguous ranges of at
// least grain items (but for the last) and runs fn on each, concurrently
// on the worker team: a goroutine that finishes its range takes a range
// no goroutine has started, and ranges nobody started when the others
// are done are not waited for. It returns the error of the lowest range
// that failed.
func (b *Backend) parallelFor(n, grain int, fn func(i0, i1 int) error) error {
	return b.forJob(n, grain, rangeFunc(fn))
}

// forJob is parallelFor for a rangeJob: it allocates nothing. The k
// ranges are claimChunks' shares, each one piece, so a descheduled
// worker does not hold up the call (on the 16-core Xeon host the
// activation preparation of a 14336-column multiply, 14 static ranges,
// took over 70 us in one call of ten).
func (b *Backend) forJob(n, grain int, j rangeJob) error {
	k := min(b.threads, max(1, n/grain))
	if k <= 1 {
		return j.do(0, n)
	}
	return b.claimChunks(k, n, n, grain, false, j)
}

// parallelChunks is parallelFor with the work split into chunks of a
// multiple of grain items, about chunksPerThread per goroutine, claimed
// dynamically by up to Threads goroutines of the worker team, so that a
// core that stalls (a noisy neighbour) delays the call by one chunk
// rather than by a whole share. It returns the error of the lowest
// chunk that failed; fn may run on any chunk after another failed.
func (b *Backend) parallelChunks(n, grain int, fn func(i0, i1 int) error) error {
	k := min(b.threads, max(1, n/grain))
	if k <= 1 {
		return fn(0, n)
	}
	per := roundUp(max(grain, (n+k*chunksPerThread-1)/(k*chunksPerThread)), grain)
	return b.claimChunks(min(k, (n+per-1)/per), n, per, grain, true, rangeFunc(fn))
}

// minChunkBytes is the fewest weight bytes in a chunk, as long as each
// goroutine still gets minChunks of them: a chunk starts its streams
// cold (the kernels prefetch the next tile, which another goroutine may
// have claimed), so the 16-row chunks of short matrices with rows of a
// few KB streamed slower. 128 KB measured best on the 16-core Xeon
// (256 KB and more were slower there: fewer chunks to balance). The
// pieces at the end of a goroutine's share are smaller (chunkRun): they
// follow its previous piece in memory, so their streams are not cold.
const (
	minChunkBytes = 128 << 10
	minChunks     = 4
)

// chunksPerThread is how many row chunks each goroutine gets on average:
// goroutines claim chunks dynamically, so a slow core (a noisy neighbour,
// a busier memory channel) delays a multiply by one chunk, not by its
// whole share.
const chunksPerThread = 16

// parallelRows splits rows of rowBytes bytes into chunks (multiples of 16
// rows) claimed dynamically by up to Threads goroutines of the worker
// team, and runs fn on each.
func (b *Backend) parallelRows(rows, rowBytes int, fn func(r0, r1 int)) {
	_ = b.rowsJob(rows, rowBytes, chunksPerThread, rowsFunc(fn))
}

// parallelRowsPer is parallelRows with perThread chunks per goroutine on
// average.
func (b *Backend) parallelRowsPer(rows, rowBytes, perThread int, fn func(r0, r1 int)) {
	_ = b.rowsJob(rows, rowBytes, perThread, rowsFunc(fn))
}

// rowsJob splits rows of rowBytes bytes into chunks of a multiple of 16
// rows, about perThread per goroutine, claimed dynamically by up to
// Threads goroutines of the worker team, and runs j on each; it returns
// the error of the lowest chunk that failed. It allocates nothing.
func (b *Backend) rowsJob(rows, rowBytes, perThread int, j rangeJob) error {
	return b.rowsJobGrain(rows, rowBytes, perThread, rowTile, j)
}

// rowTile is the rows of the SIMD kernels' tiles: rowsJob's chunks are
// multiples of it.
const rowTile = 16

// rowsJobGrain is rowsJob with chunks (and the smaller pieces at the end
// of each goroutine's share) a multiple of tile rows.
func (b *Backend) rowsJobGrain(rows, rowBytes, perThread, tile int, j rangeJob) error {
	n := b.rowsWorkers(rows, rowBytes)
	if n <= 1 {
		return j.do(0, rows)
	}
	per := (rows + n*perThread - 1) / (n * perThread)
	per = max(per, min((minChunkBytes+rowBytes-1)/rowBytes, (rows+minChunks*n-1)/(minChunks*n)))
	per = roundUp(per, tile)
	return b.claimChunks(min(n, (rows+per-1)/per), rows, per, tile, true, j)
}

// rowsWorkers returns how many goroutines rowsJob runs rows of rowBytes
// bytes on: Threads, fewer where each would get under minBytesPerTask.
func (b *Backend) rowsWorkers(rows, rowBytes int) int {
	return min(b.threads, max(1, rows*rowBytes/minBytesPerTask), rows)
}

// claimChunks runs j on every item of [0, n) in pieces of at most per
// items (with tail, smaller ones at the end of each share; multiples of
// grain), in parts shares claimed dynamically by goroutines of the
// backend's team (parts at most the grain units of n), and returns the
// error of the lowest piece that failed.
func (b *Backend) claimChunks(parts, n, per, grain int, tail bool, j rangeJob) error {
	r := chunkRuns.Get().(*chunkRun)
	r.j, r.n, r.per, r.grain, r.tail = j, n, per, grain, tail
	r.parts = max(1, min(parts, (n+grain-1)/grain))
	if len(r.cur) < r.parts {
		r.cur = make([]chunkCursor, r.parts)
	}
	for i := range r.cur[:r.parts] {
		r.cur[i].next.Store(0)
	}
	r.err = nil
	b.team.run(r.parts, r)
	err := r.err
	r.j, r.err = nil, nil
	chunkRuns.Put(r)
	return err
}
