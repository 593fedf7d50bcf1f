//go:build cuda

package cuda

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/qgemv/qgemv/internal/gpuhost"
)

// ptxFS holds the PTX of every CUDA source, gzip-compressed, for each
// capability whose PTX differs (go run ./gen writes cuda/ptx).
//
//go:embed ptx/*.ptx.gz
var ptxFS embed.FS

// Device describes one CUDA device.
type Device struct {
	Ordinal      int
	Name         string
	Major, Minor int   // compute capability
	Memory       int64 // bytes of device memory
	SMs          int   // streaming multiprocessors
	L2           int   // bytes of L2 cache
	// mapsHost: the device shares one address space with the host and
	// can address pinned host memory (kernels then read activations
	// straight from the staging memory; pinned.go)
	mapsHost bool
}

// String formats the device for people.
func (d Device) String() string {
	return fmt.Sprintf("%s (sm_%d%d, %d SMs, %d MiB, L2 %d MiB)", d.Name, d.Major, d.Minor, d.SMs, d.Memory>>20, d.L2>>20)
}

// Devices lists the CUDA devices. The cu package initialised the driver
// when the program started (a binary built with the cuda tag needs the
// NVIDIA driver's libcuda.so.1); a failed initialisation (no visible
// device, say) is an error that names the driver's result.
func Devices() ([]Device, error) {
	if err := initErr(); err != nil {
		return nil, err
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	out := make([]Device, 0, n)
	for i := 0; i < n; i++ {
		d, err := describe(i)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func describe(i int) (Device, error) {
	dev, err := cu.GetDevice(i)
	if err != nil {
		return Device{}, fmt.Errorf("cuda: device %d: %w", i, err)
	}
	d := Device{Ordinal: i}
	if d.Name, err = dev.Name(); err != nil {
		return d, fmt.Errorf("cuda: device %d name: %w", i, err)
	}
	if d.Major, d.Minor, err = dev.ComputeCapability(); err != nil {
		return d, fmt.Errorf("cuda: device %d compute capability: %w", i, err)
	}
	if d.Memory, err = dev.TotalMem(); err != nil {
		return d, fmt.Errorf("cuda: device %d memory: %w", i, err)
	}
	if d.SMs, err = dev.Attribute(cu.MultiprocessorCount); err != nil {
		return d, fmt.Errorf("cuda: device %d SM count: %w", i, err)
	}
	if d.L2, err = dev.Attribute(cu.L2CacheSize); err != nil {
		return d, fmt.Errorf("cuda: device %d L2 size: %w", i, err)
	}
	ua, err1 := dev.Attribute(cu.UnifiedAddressing)
	mh, err2 := dev.Attribute(cu.CanMapHostMemory)
	d.mapsHost = err1 == nil && err2 == nil && ua == 1 && mh == 1 && os.Getenv(EnvHostMap) != "0"
	return d, nil
}

// ptxModule is the PTX of one CUDA source.
type ptxModule struct {
	arch int    // capability it targets
	from string // "embedded" or the $QGEMV_CUDA_PTX directory
	text string
}

// ptxFiles sorts the <source>_sm_<cc>.ptx (or .ptx.gz) files in names by
// source: each source's capabilities in descending order, and the file of
// each "<source>_sm_<cc>". A name without a source, or without a number
// after _sm_, is an error.
func ptxFiles(names []string, what string) (map[string][]int, map[string]string, error) {
	archs, file := map[string][]int{}, map[string]string{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimSuffix(path.Base(n), ".gz"), ".ptx")
		i := strings.LastIndex(base, "_sm_")
		a, err := strconv.Atoi(base[i+4:])
		if err != nil || a <= 0 || i == 0 {
			return nil, nil, fmt.Errorf("cuda: PTX %s is not named <kernels>_sm_<number>.ptx[.gz]: %s", what, n)
		}
		src := base[:i]
		key := fmt.Sprintf("%s_sm_%d", src, a)
		if prev, dup := file[key]; dup {
			return nil, nil, fmt.Errorf("cuda: PTX %s holds two sm_%d files of %s: %s and %s", what, a, src, prev, n)
		}
		file[key] = n
		archs[src] = append(archs[src], a)
	}
	for _, as := range archs {
		sort.Sort(sort.Reverse(sort.IntSlice(as)))
	}
	return archs, file, nil
}

// readPTX reads a PTX file, gunzipping a .ptx.gz one.
func readPTX(fsys fs.FS, name string) (string, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil || !strings.HasSuffix(name, ".gz") {
		return string(b), err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return "", fmt.Errorf("cuda: %s: %w", name, err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		return "", fmt.Errorf("cuda: %s: %w", name, err)
	}
	return string(text), nil
}

// ptxFor returns the PTX modules to load on a device of capability
// major.minor, one per CUDA source: each source's highest PTX target not
// above the device's (PTX is forward compatible: the driver compiles it
// for the device; a target is embedded only where its PTX differs from
// the next lower one's), and the highest target among them.
//
// With $QGEMV_CUDA_PTX set to a directory, its <source>_sm_<cc>.ptx (or
// .ptx.gz) files replace the embedded PTX of their sources (kernel
// development: variants of the CUDA sources compiled elsewhere, timed
// without rebuilding the binary); sources it has no file for keep the
// embedded PTX.
func ptxFor(major, minor int) (map[string]ptxModule, int, error) {
	type origin struct {
		fsys  fs.FS
		what  string
		from  string
		archs map[string][]int
		file  map[string]string
	}
	names, err := fs.Glob(ptxFS, "ptx/*_sm_*.ptx.gz")
	if err != nil || len(names) == 0 {
		return nil, 0, fmt.Errorf("cuda: no PTX embedded in this binary")
	}
	emb := origin{fsys: ptxFS, what: "embedded in this binary", from: "embedded"}
	if emb.archs, emb.file, err = ptxFiles(names, emb.what); err != nil {
		return nil, 0, err
	}
	origins := []origin{emb}
	if dir := os.Getenv(EnvPTX); dir != "" {
		o := origin{fsys: os.DirFS(dir), what: "in $" + EnvPTX + " (" + dir + ")", from: dir}
		plain, err := fs.Glob(o.fsys, "*_sm_*.ptx")
		if err != nil {
			return nil, 0, err
		}
		gz, err := fs.Glob(o.fsys, "*_sm_*.ptx.gz")
		if err != nil {
			return nil, 0, err
		}
		if len(plain)+len(gz) == 0 {
			return nil, 0, fmt.Errorf("cuda: no PTX %s (<kernels>_sm_<number>.ptx files)", o.what)
		}
		if o.archs, o.file, err = ptxFiles(append(plain, gz...), o.what); err != nil {
			return nil, 0, err
		}
		origins = append(origins, o)
	}
	byName := map[string]origin{} // source -> where its PTX comes from (the last origin that has it)
	for _, o := range origins {
		for src := range o.archs {
			byName[src] = o
		}
	}
	want := 10*major + minor
	mods, top := map[string]ptxModule{}, 0
	for src, o := range byName {
		i := sort.Search(len(o.archs[src]), func(i int) bool { return o.archs[src][i] <= want })
		if i == len(o.archs[src]) {
			return nil, 0, fmt.Errorf("cuda: device compute capability %d.%d is below every PTX target of %s %s (lowest sm_%d)",
				major, minor, src, o.what, o.archs[src][len(o.archs[src])-1])
		}
		a := o.archs[src][i]
		text, err := readPTX(o.fsys, o.file[fmt.Sprintf("%s_sm_%d", src, a)])
		if err != nil {
			return nil, 0, err
		}
		mods[src] = ptxModule{arch: a, from: o.from, text: text}
		top = max(top, a)
	}
	return mods, top, nil
}

// SplitMode selects how SplitK partial sums are reduced.
type SplitMode int

const (
	// Deterministic writes each split's partial sums to a workspace and
	// adds them in split order in a second kernel: the same bits every run.
	Deterministic SplitMode = iota
	// Atomic adds the partial sums into the zeroed output with atomics:
	// one kernel, but the order (and so the last bits) may vary by run.
	Atomic
)

// Options configures Open.
type Options struct {
	// Split is the number of K splits of the float kernels: 0 chooses one
	// per matrix and batch (enough blocks to fill the device), 1 is the
	// data-parallel decomposition. The environment variable
	// QGEMV_CUDA_SPLITK overrides it.
	Split int
	// Mode reduces SplitK partials; QGEMV_CUDA_SPLITK_MODE=atomic or
	// deterministic overrides it.
	Mode SplitMode
}

// EnvSplit and EnvSplitMode name the SplitK environment overrides;
// EnvPTX names a directory of PTX modules loaded instead of the embedded
// ones (kernel development).
const (
	EnvSplit     = "QGEMV_CUDA_SPLITK"
	EnvSplitMode = "QGEMV_CUDA_SPLITK_MODE"
	EnvPTX       = "QGEMV_CUDA_PTX"
	// EnvA8Blocks caps the blocks of the int8 tensor-core launches (a
	// positive integer; testing: with fewer blocks than row tiles each
	// block pipelines several tiles, as on matrices larger than the
	// device holds at once).
	EnvA8Blocks = "QGEMV_CUDA_A8_BLOCKS"
	// EnvA8Steps chooses the int8 tensor-core kernels in registers for
	// twice the resident blocks (_s: Q4G128 with one step per warp and
	// round, Bits8 up to 8 vectors) for launches of one row tile per
	// block: "1" whenever the tiles fit their blocks, "2" never; unset,
	// where the tiles fill at least three quarters of those blocks
	// (a8Single).
	EnvA8Steps = "QGEMV_CUDA_A8_STEPS"
)

// Backend is an open CUDA device: a context and the loaded kernels. It is
// safe for concurrent use; its calls run one at a time, each on its
// caller's OS thread with the context pushed for the call.
type Backend struct {
	dev  Device
	arch int // highest PTX target loaded (kernels.cu's: sm_80 and up have its tensor-core kernels)
	opts Options
	// noMMA keeps binary16 multiplies off the tensor cores
	// (QGEMV_CUDA_MMA=0), to compare the two kernels.
	noMMA bool
	// a8p maps each int8 tensor-core kernel to its _p variant and the
	// blocks the device runs at once (resident blocks per SM times SMs, or
	// EnvA8Blocks): launches with more row tiles than that take the _p
	// kernel on that many blocks.
	a8p map[string]a8Persist
	// a8s maps int8 tensor-core kernels to their _s variants (EnvA8Steps)
	// and the blocks the device runs of those at once; a8steps is
	// EnvA8Steps.
	a8s     map[string]a8Persist
	a8steps string

	// used in backend calls only (send, under exec)
	ctx     cu.CUContext
	mods    []cu.Module
	fns     map[string]cu.Function
	pdl     map[string]bool // kernels launched with programmatic dependent launch (pdl.go)
	cargs   launchArgs      // C memory for launchPDL's parameters
	scratch map[string]*buffer
	pinned  map[string]*pinned
	stageIn map[string]*pinned // stagedPut's staging, by scratch buffer name
	wsZero  int64              // leading words of the "ws" scratch known to be zero (matrix.go)
	wsUsed  bool               // a SplitK launch was queued since Capture cleared it (graph.go)
	capTags int                // ANS status tags used since Capture cleared it: the tags are 0..capTags-1
	// stream orders all the backend's work: created with default flags,
	// it also synchronizes with the legacy default stream the driver's
	// synchronous copies and memsets use, and it can be captured as a
	// graph (graph.go), which the legacy stream cannot.
	stream cu.Stream
	// scratchGen counts reallocations of scratch buffers, pinGen those
	// of pinned staging buffers, freeGen the frees of buffers and
	// matrices (Close): a graph captured before one may address freed
	// memory (graph.go).
	scratchGen, pinGen, freeGen uint64
	// hostGraphs: host-slice multiplies captured as graphs (graph.go),
	// unless hostGraphOff (EnvHostGraph).
	hostGraphs   map[hostGraphKey]*hostGraph
	hostGraphOff bool
	// hostQuant: the fewest columns from which a host-slice MulA8
	// quantizes on the host (EnvHostQuant; 0 never).
	hostQuant     int
	hostQuantRuns int // calls mulA8Host ran (for the tests)
	// statusQueued: a buffer kernel that may set the status word was
	// queued since takeStatus last read it (buffers.go).
	statusQueued bool
	// statusFetched: statusValue is the status word, copied back with
	// the last buffer read after every kernel queued (stagedGet).
	statusFetched bool
	statusValue   uint32
	// bufinQueued: a buffer write's copy from the "bufin" staging memory
	// may still be queued (stagedPutAt waits before reusing it).
	bufinQueued bool
	// ansQueued holds the int8 matrices whose multiplies on buffers were
	// queued since takeStatus last read the ANS status, by tag.
	ansQueued []ChainMat
	// memo: the last activation preparations of buffer multiplies, which
	// the next multiply reading the same input skips (memo.go).
	memo [nPrep]prepKey
	// capturing: a Capture is in progress; swiPend: a SwiGLU deferred in
	// it, which the next request queues first unless it is a multiply of
	// its output that computes it in its activation preparation
	// (buffers.go, takeSwiGLU).
	capturing bool
	swiPend   swiglu

	// exec serializes the backend's work (send): every use of the
	// context and of the fields above holds it. closed is written with
	// exec and mu held and read with either.
	exec   sync.Mutex
	mu     sync.Mutex
	closed bool
}

// kernelNames lists every kernel the modules must export (each .cu file
// adds its kernels with addKernels in an init function of its Go file).
var kernelNames = func() []string {
	names := []string{"selftest", "read_bw", "split_reduce", "q4g128_a8", "sparse12_a8", "q4g128_mma_n8", "q4g128_mma_n16"}
	for _, f := range []string{"q4g128", "bits8", "bits4", "bits3", "bits2", "bits1", "sparse12"} {
		for _, act := range []string{"f32", "f16"} {
			for _, nb := range []int{1, 4, 16} {
				names = append(names, fmt.Sprintf("%s_%s_b%d", f, act, nb))
			}
		}
	}
	for _, n := range []int{8, 4, 3, 2, 1} {
		names = append(names, fmt.Sprintf("bits%d_a8", n))
	}
	for _, f := range []string{"bits8", "bits4", "bits2"} {
		names = append(names, f+"_mma_n8", f+"_mma_n16")
	}
	names = append(names, "q4g128_a8mma_n8_s", "q4g128_a8mma_n16_s", "bits8_a8mma_n8_s") // a8s
	for _, f := range []string{"q4g128", "bits8", "bits4", "bits2"} {
		names = append(names, f+"_a8mma_n8", f+"_a8mma_n16")
		if f != "bits8" { // the persistent variants (a8p)
			names = append(names, f+"_a8mma_n8_p", f+"_a8mma_n16_p")
		}
	}
	return names
}()

// addKernels adds names to kernelNames; called from init functions.
func addKernels(names ...string) { kernelNames = append(kernelNames, names...) }

// ErrClosed is returned by operations on a closed backend or matrix (the
// same value as qgemv.ErrClosed).
var ErrClosed = gpuhost.ErrClosed

// ErrBatch is wrapped by the error of a multiply whose batch is outside
// 1..16 (the same value as opencl.ErrBatch, so errors.Is matches either).
var ErrBatch = gpuhost.ErrBatch

// Open opens CUDA device ordinal: creates a context, loads the highest embedded PTX the device supports (the driver
// compiles it; a failure, e.g. a driver too old for the PTX version, is
// an error that says so), and runs a self-test kernel.
func Open(ordinal int, opts Options) (*Backend, error) {
	if s := os.Getenv(EnvSplit); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 64 {
			return nil, fmt.Errorf("cuda: %s=%q: want a number of splits 0..64", EnvSplit, s)
		}
		opts.Split = n
	}
	switch m := os.Getenv(EnvSplitMode); m {
	case "":
	case "atomic":
		opts.Mode = Atomic
	case "deterministic":
		opts.Mode = Deterministic
	default:
		return nil, fmt.Errorf("cuda: %s=%q: want atomic or deterministic", EnvSplitMode, m)
	}
	if opts.Split < 0 || opts.Split > 64 {
		return nil, fmt.Errorf("cuda: Options.Split %d: want a number of splits 0..64", opts.Split)
	}
	if opts.Mode != Deterministic && opts.Mode != Atomic {
		return nil, fmt.Errorf("cuda: Options.Mode %d: want Deterministic or Atomic", opts.Mode)
	}
	if err := initErr(); err != nil {
		return nil, err
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d CUDA devices)", ordinal, n)
	}
	d, err := describe(ordinal)
	if err != nil {
		return nil, err
	}
	ptx, arch, err := ptxFor(d.Major, d.Minor)
	if err != nil {
		return nil, err
	}
	b := &Backend{dev: d, arch: arch, opts: opts, noMMA: os.Getenv("QGEMV_CUDA_MMA") == "0",
		fns: map[string]cu.Function{}, scratch: map[string]*buffer{}, pinned: map[string]*pinned{},
		stageIn: map[string]*pinned{}, hostGraphs: map[hostGraphKey]*hostGraph{},
		hostGraphOff: os.Getenv(EnvHostGraph) == "0", hostQuant: hostQuantCols}
	if v := os.Getenv(EnvHostQuant); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("cuda: %s=%q: want a column count (0: never)", EnvHostQuant, v)
		}
		b.hostQuant = n
	}
	if err := b.start(ptx); err != nil {
		return nil, err
	}
	return b, nil
}

// start creates the context and loads the modules on the calling
// goroutine's OS thread, leaving that thread's context stack as it found
// it: the backend's work later runs on its callers' threads with the
// context pushed for each call (send).
func (b *Backend) start(ptx map[string]ptxModule) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.init(ptx); err != nil {
		b.release() // destroying the context pops it
		return err
	}
	popCtx()
	return nil
}

func (b *Backend) init(ptx map[string]ptxModule) error {
	var err error
	if b.ctx, err = cu.Device(b.dev.Ordinal).MakeContext(cu.SchedAuto); err != nil {
		return fmt.Errorf("cuda: creating a context on %s: %w", b.dev.Name, err)
	}
	if b.stream, err = cu.MakeStream(cu.DefaultStream); err != nil {
		return fmt.Errorf("cuda: creating a stream on %s: %w", b.dev.Name, err)
	}
	srcs := make([]string, 0, len(ptx))
	for src := range ptx {
		srcs = append(srcs, src)
	}
	sort.Strings(srcs)
	var pdlSets []map[string]bool // per module: its kernels that open with the PDL wait
	for _, src := range srcs {
		logBuf := make([]byte, 8192)
		m := ptx[src]
		mod, err := cu.LoadDataEx(m.text, &cu.JITErrorLogBuffer{Buffer: logBuf})
		if err != nil {
			log := strings.TrimRight(string(logBuf), "\x00")
			return fmt.Errorf("cuda: the driver could not load the sm_%d PTX of %s.cu (%s) on %s (sm_%d%d; driver %d): %w: %s",
				m.arch, src, m.from, b.dev.Name, b.dev.Major, b.dev.Minor, cu.Version(), err, log)
		}
		b.mods = append(b.mods, mod)
		var entries map[string]bool
		if m.arch >= 90 && pdlAllowed() {
			entries = pdlEntries(m.text)
		}
		pdlSets = append(pdlSets, entries)
	}
	b.pdl = map[string]bool{}
	for _, name := range kernelNames {
		for i, mod := range b.mods {
			if f, err := mod.Function(name); err == nil {
				b.fns[name] = f
				b.pdl[name] = pdlSets[i][name]
				break
			}
		}
		if _, ok := b.fns[name]; !ok {
			return fmt.Errorf("cuda: kernel %s missing from the PTX modules (%s)", name, ptxSummary(ptx))
		}
	}
	if err := b.a8Persistent(); err != nil {
		return err
	}
	return b.selfTest()
}

// a8Persist is an int8 tensor-core kernel's persistent variant (a8p).
type a8Persist struct {
	name   string
	blocks int
}

// a8Persistent fills b.a8p (in a backend call, after the kernels are loaded).
func (b *Backend) a8Persistent() error {
	limit := 0 // "" (unset or empty): the device's resident blocks
	if v := os.Getenv(EnvA8Blocks); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("cuda: %s=%q: want a positive block count", EnvA8Blocks, v)
		}
		limit = n
	}
	switch b.a8steps = os.Getenv(EnvA8Steps); b.a8steps {
	case "", "1", "2":
	default:
		return fmt.Errorf("cuda: %s=%q: want 1 or 2", EnvA8Steps, b.a8steps)
	}
	b.a8p, b.a8s = map[string]a8Persist{}, map[string]a8Persist{}
	for _, name := range kernelNames {
		if !strings.Contains(name, "_a8mma_") || strings.HasSuffix(name, "_p") || strings.HasSuffix(name, "_s") {
			continue
		}
		if f, ok := b.fns[name+"_s"]; ok {
			s := name + "_s"
			per, err := f.MaxActiveBlocksPerMultiProcessor(32*warps, 0)
			if err != nil {
				return fmt.Errorf("cuda: occupancy of %s: %w", s, err)
			}
			b.a8s[name] = a8Persist{name: s, blocks: max(1, per) * b.dev.SMs}
		}
		p := a8Persist{name: name + "_p", blocks: limit}
		if _, ok := b.fns[p.name]; !ok {
			continue // Bits8: none
		}
		if limit == 0 {
			per, err := b.fns[p.name].MaxActiveBlocksPerMultiProcessor(32*warps, 0)
			if err != nil {
				return fmt.Errorf("cuda: occupancy of %s: %w", p.name, err)
			}
			p.blocks = max(1, per) * b.dev.SMs
		}
		b.a8p[name] = p
	}
	return nil
}

// selfTest runs a tiny kernel and checks its result.
func (b *Backend) selfTest() error {
	const n = 1000
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i) * 0.5
	}
	dx, err := upload(x)
	if err != nil {
		return err
	}
	defer dx.free()
	dy, err := alloc(4 * n)
	if err != nil {
		return err
	}
	defer dy.free()
	if err := b.launch("selftest", (n+255)/256, 1, 256, 0, dx.ptr, dy.ptr, int64(n)); err != nil {
		return fmt.Errorf("cuda: self-test kernel: %w", err)
	}
	y := make([]float32, n)
	if err := download(dy, y); err != nil {
		return fmt.Errorf("cuda: self-test kernel: %w", err)
	}
	for i := range y {
		if y[i] != x[i]*2+float32(i) {
			return fmt.Errorf("cuda: self-test kernel on %s: y[%d] = %v, want %v", b.dev.Name, i, y[i], x[i]*2+float32(i))
		}
	}
	return nil
}

func (b *Backend) release() {
	b.dropHostGraphs(nil)
	for _, s := range b.scratch {
		s.free()
	}
	b.scratch = nil
	for _, h := range b.pinned {
		h.free()
	}
	for _, h := range b.stageIn {
		h.free()
	}
	b.pinned, b.stageIn = nil, nil
	if b.stream != (cu.Stream{}) {
		_ = b.stream.Destroy()
	}
	for _, mod := range b.mods {
		_ = mod.Unload()
	}
	b.cargs.free()
	if b.ctx != (cu.CUContext{}) {
		_ = b.ctx.Destroy()
	}
}

// do runs f with the backend's context current and returns its error.
func (b *Backend) do(f func() error) error { return b.send(call{f: f}) }

// Close releases the context and everything allocated on it, after the
// work already queued. Matrices still loaded become unusable (their
// multiplies return ErrClosed), and so does a second Close (the OpenCL
// backend's second Close returns nil).
func (b *Backend) Close() error {
	if b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	b.exec.Lock()
	defer b.exec.Unlock()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	b.closed = true
	b.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if b.pushCtx() != nil {
		return nil // the context is unusable: nothing left to free through it
	}
	b.release() // destroying the context pops it
	return nil
}

// isClosed reports whether Close was called.
func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Device returns the device the backend runs on.
func (b *Backend) Device() Device { return b.dev }

// PTXArch returns the highest compute capability among the PTX modules
// loaded (e.g. 80 on an sm_90 device: the driver compiled that PTX for
// the device).
func (b *Backend) PTXArch() int { return b.arch }

// ptxSummary names each module's source, target and origin.
func ptxSummary(ptx map[string]ptxModule) string {
	var s []string
	for src, m := range ptx {
		s = append(s, fmt.Sprintf("%s sm_%d %s", src, m.arch, m.from))
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// Name returns "cuda" for device 0 and "cuda:<i>" otherwise.
func (b *Backend) Name() string {
	if b.dev.Ordinal == 0 {
		return "cuda"
	}
	return fmt.Sprintf("cuda:%d", b.dev.Ordinal)
}

// buffer is device memory.
type buffer struct {
	ptr  cu.DevicePtr
	size int64
}

// alloc allocates size bytes of device memory (at least 16; in a
// backend call).
func alloc(size int64) (*buffer, error) {
	if size <= 0 {
		size = 16
	}
	p, err := cu.MemAlloc(size)
	if err != nil {
		return nil, fmt.Errorf("cuda: allocating %d bytes of device memory: %w", size, err)
	}
	return &buffer{ptr: p, size: size}, nil
}

// free releases the memory; freeing twice, or a nil buffer, is harmless.
func (bf *buffer) free() {
	if bf != nil && bf.ptr != 0 {
		_ = cu.MemFree(bf.ptr)
		bf.ptr = 0
	}
}

// bytesOf views a slice of fixed-size values as bytes.
func bytesOf[T any](s []T) (unsafe.Pointer, int64) {
	if len(s) == 0 {
		return nil, 0
	}
	return unsafe.Pointer(&s[0]), int64(len(s)) * int64(unsafe.Sizeof(s[0]))
}

func (bf *buffer) capacity() int64 { return bf.size }

// upload copies s into a new device buffer (in a backend call).
func upload[T any](s []T) (*buffer, error) {
	return uploadBytes(bytesOf(s))
}

// uploadBytes copies the n bytes at p into a new device buffer (in a
// backend call).
func uploadBytes(p unsafe.Pointer, n int64) (*buffer, error) {
	bf, err := alloc(n)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		if err := cu.MemcpyHtoD(bf.ptr, p, n); err != nil {
			bf.free()
			return nil, fmt.Errorf("cuda: copying %d bytes to the device: %w", n, err)
		}
	}
	return bf, nil
}

// put copies s into the buffer's start.
func put[T any](bf *buffer, s []T) error {
	p, n := bytesOf(s)
	if n == 0 {
		return nil
	}
	if n > bf.size {
		return fmt.Errorf("cuda: %d bytes do not fit a %d-byte buffer", n, bf.size)
	}
	if err := cu.MemcpyHtoD(bf.ptr, p, n); err != nil {
		return fmt.Errorf("cuda: copying %d bytes to the device: %w", n, err)
	}
	return nil
}

// download copies the start of bf into dst (in a backend call).
func download[T any](bf *buffer, dst []T) error {
	p, n := bytesOf(dst)
	if n > bf.size {
		return fmt.Errorf("cuda: reading %d bytes from a %d-byte buffer", n, bf.size)
	}
	if n == 0 {
		return nil
	}
	if err := cu.MemcpyDtoH(p, bf.ptr, n); err != nil {
		return fmt.Errorf("cuda: copying %d bytes from the device (a kernel may have failed): %w", n, err)
	}
	return nil
}

// scratchBuf returns the backend's scratch buffer of that name with at
// least size bytes (in a backend call).
func (b *Backend) scratchBuf(name string, size int64) (*buffer, error) {
	old := b.scratch[name]
	bf, err := grown(b.scratch, name, size, alloc)
	if old != nil && bf != old {
		b.scratchGen++
	}
	return bf, err
}

// maxKernelArgs bounds a kernel's arguments (the widest has 13).
const maxKernelArgs = 16

// launch runs kernel name on a grid of gx x gy blocks of bx threads.
// Every argument must be 64 bits wide (cu copies 8 bytes per argument):
// cu.DevicePtr, int64, uint64, or float64.
func (b *Backend) launch(name string, gx, gy, bx, shmem int, args ...any) error {
	f, ok := b.fns[name]
	if !ok {
		return fmt.Errorf("cuda: no kernel %s", name)
	}
	if len(args) > maxKernelArgs {
		return fmt.Errorf("cuda: kernel %s has %d arguments, at most %d", name, len(args), maxKernelArgs)
	}
	var vals [maxKernelArgs]uint64
	for i, a := range args {
		switch v := a.(type) {
		case cu.DevicePtr:
			vals[i] = uint64(v)
		case int64:
			vals[i] = uint64(v)
		case uint64:
			vals[i] = v
		default:
			return fmt.Errorf("cuda: kernel %s argument %d is not a DevicePtr, int64 or uint64", name, i)
		}
	}
	if b.pdl[name] { // parameters in C memory (launchPDL)
		return b.launchPDL(name, f, gx, gy, bx, shmem, vals[:len(args)])
	}
	var ptrs [maxKernelArgs]unsafe.Pointer
	for i := range args {
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	if err := f.Launch(gx, gy, 1, bx, 1, 1, shmem, b.stream, ptrs[:len(args)]); err != nil {
		return fmt.Errorf("cuda: launching %s (%dx%d blocks of %d): %w", name, gx, gy, bx, err)
	}
	return nil
}
