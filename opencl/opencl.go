//go:build opencl

package opencl

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ggml"
)

//go:embed gemv.cl
var gemvSource string

// EnvCache overrides the directory of the program cache; "off" (or "-")
// disables the cache.
const EnvCache = "QGEMV_OPENCL_CACHE"

// ErrClosed is returned by a multiply on a closed matrix or backend (the
// same value as qgemv.ErrClosed).
var ErrClosed = gpuhost.ErrClosed

// ErrBatch is wrapped by the error of a multiply whose batch is outside
// 1..16 (the same value as cuda.ErrBatch, so errors.Is matches either).
var ErrBatch = gpuhost.ErrBatch

// Options configures Open.
type Options struct {
	// Device is the index in Devices() of the device to open.
	Device int
	// CacheDir is the program cache; "" means $QGEMV_OPENCL_CACHE or
	// os.UserCacheDir()/qgemv/opencl. "-" disables the cache.
	CacheDir string
	// NoSubgroups forces the portable local-memory reductions even where
	// the device has sub-groups.
	NoSubgroups bool
	// Q4Layout chooses how Q4G128 matrices are arranged on the device
	// (gemv.cl, "Q4G128"); the zero value picks per device.
	Q4Layout Q4Layout
}

// Q4Layout is the device arrangement of Q4G128 matrices. Results are the
// same in both; only speed differs.
type Q4Layout int

const (
	// Q4Auto uses Q4Tiles where the tensor-core kernels run (NVIDIA
	// sm_80+), Q4RowMajor elsewhere.
	Q4Auto Q4Layout = iota
	// Q4RowMajor keeps the canonical row-major bytes.
	Q4RowMajor
	// Q4Tiles stores 16-row tiles: each 16 rows x 128 columns (1 KB of
	// codes) and their metadata contiguous.
	Q4Tiles
)

// Devices lists the OpenCL devices of every platform, in the order Open's
// Options.Device indexes them. With no platform installed it returns an
// error saying so.
func Devices() ([]DeviceInfo, error) {
	ds, err := listDevices()
	if err != nil {
		return nil, err
	}
	out := make([]DeviceInfo, len(ds))
	for i, d := range ds {
		out[i] = d.info
	}
	return out, nil
}

// Backend is one OpenCL device with its context, queue and built
// programs. Its methods are safe for concurrent use; launches are
// serialized.
type Backend struct {
	mu     sync.Mutex
	x      *ctx
	opts   Options
	std    string              // -cl-std option and sub-group defines
	progs  map[string]*progSet // by build options
	closed bool

	// the gemv programs and tilings by what they are built from, so that
	// a multiply formats and parses no option string (b.mu held)
	progByKey map[progKey]*progSet
	ggmlProgs map[ggml.Type]*progSet
	reo       gpuhost.Host // host memory of the tiled kernels' reordered activations
	reoSums   []int32

	// device buffers (buffers.go): the buffer program, the fault status
	// word, and the scratch of on-device quantization and ordering
	bufProg            *progSet
	status, devQ, devS *buffer
	// the host-slice multiplies' activations and results on the device
	// path (mulA8Device)
	hsX, hsY, hsH *buffer
	devOrd, devSx *buffer
	devF, devFsum *buffer      // float activations and unit sums (MulF16Buf)
	statusWord    *int32       // Wait's copy of status (its own object: cgo checks all of one passed to C)
	bufQuant      bool         // the buffer program quantizes exactly
	quantWG       int          // the largest work-group quant_a8 runs with (0: not asked yet)
	pending       []*ANSMatrix // ANS multiplies on buffers whose status Wait checks
	mmaHost       struct {     // host memory of the tensor-core kernels' inputs
		xp, xr    []layout.FP16
		xsum, inv []float32
		q         []int8
		sx        []int32
	}
	tilings struct {
		opts string
		t    map[int]tile
	}

	// scratch buffers of the multiplies (grown on demand)
	xf, xq, xs, y *buffer
	xsum, sx      *buffer // per-unit float sums, per-group int8 sums (tiled kernels)
	cbTab, cbWS   *buffer // global Psumbook, split partials (codebook kernels)
	ansV, ansY    *buffer // int8 vector and int32 results (ANS and int8 multiplies)
	ansSt         *buffer // per-unit status of the ANS kernel
	ansBitsW      *buffer // the decoded words of an entropy-coded Bits matrix (ansbits.go)

	ptx      bool    // NVIDIA inline PTX (dp4a) in the build options
	ptxErr   error   // why the inline-PTX build failed, if it did
	mma      bool    // tensor-core kernels (inline-PTX mma.sync, sm_80+) in the build options
	mmaErr   error   // why the tensor-core build failed, if it did
	xmma     bool    // the float scratch holds tensor-core activations (b.xh, b.xinv)
	x8mma    bool    // the int8 scratch holds tensor-core activations (a8MMAInputs)
	xh, xinv *buffer // binary16 hi/lo activations and 1/sigma per vector (tensor-core kernels)
	tileOpts string  // tile defines forced by benchmarks ("" : tileDefines)
	q4tiles  bool    // Q4G128 matrices are stored in 16-row tiles (-DQ4TILES in b.std)

	cacheHits, cacheMisses, cacheBad int // program cache statistics

	wgOverride int // work-group size forced by benchmarks (0: default)
}

// progSet is the program built for one batch bound NB and its kernels.
type progSet struct {
	p  *program
	ks map[string]*kernel
	wg map[string]int
}

// Open opens device opts.Device, builds the batch-1 program (from the
// cache when possible) and runs a self-test kernel.
func Open(opts Options) (*Backend, error) {
	if opts.Q4Layout < Q4Auto || opts.Q4Layout > Q4Tiles {
		return nil, fmt.Errorf("opencl: Q4Layout %d: want Q4Auto, Q4RowMajor or Q4Tiles", opts.Q4Layout)
	}
	ds, err := listDevices()
	if err != nil {
		return nil, err
	}
	if opts.Device < 0 || opts.Device >= len(ds) {
		return nil, fmt.Errorf("opencl: device %d does not exist (%d devices)", opts.Device, len(ds))
	}
	d := ds[opts.Device]
	x, err := newCtx(d)
	if err != nil {
		return nil, err
	}
	b := &Backend{x: x, opts: opts, progs: map[string]*progSet{}}
	b.std = buildStd(&d.info, opts.NoSubgroups)
	b.ptx = strings.Contains(strings.ToUpper(d.info.Vendor+" "+d.info.Platform), "NVIDIA")
	b.mma = b.ptx && d.info.ComputeCap >= 80 && os.Getenv("QGEMV_OPENCL_MMA") != "0"
	// fixed for the backend's life: every program and Q4G128 matrix agree
	b.q4tiles = opts.Q4Layout == Q4Tiles || opts.Q4Layout == Q4Auto && b.mma
	if b.q4tiles {
		b.std += " -DQ4TILES"
	}
	if err := b.selfTest(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// buildStd chooses -cl-std and the sub-group defines for a device.
func buildStd(d *DeviceInfo, noSub bool) string {
	cv := clcVersion(d.CVersion)
	std := "-cl-std=CL1.2"
	if cv < 12 {
		std = "-cl-std=CL1.1"
	}
	switch {
	case noSub:
	case d.Has("cl_intel_subgroups"):
		std += " -DUSE_SUBGROUPS -DUSE_INTEL_SUBGROUPS"
	case d.Has("cl_khr_subgroups") && cv >= 20:
		std = "-cl-std=CL2.0 -DUSE_SUBGROUPS"
	}
	return std
}

// clcVersion parses "OpenCL C 1.2 ..." to 12.
func clcVersion(s string) int {
	f := strings.Fields(s)
	if len(f) < 3 {
		return 12
	}
	mj, mn, ok := strings.Cut(f[2], ".")
	a, err1 := strconv.Atoi(mj)
	b, err2 := strconv.Atoi(mn)
	if !ok || err1 != nil || err2 != nil {
		return 12
	}
	return 10*a + b
}

// Info describes the backend's device.
func (b *Backend) Info() DeviceInfo { return b.x.dev.info }

// BuildOptions returns the options the kernels are built with (besides
// -DNB).
func (b *Backend) BuildOptions() string { return b.std }

// UsesSubgroups reports whether the kernels use sub-group reductions.
func (b *Backend) UsesSubgroups() bool { return strings.Contains(b.std, "USE_SUBGROUPS") }

// ShortName is the device name as a kernel-set suffix, e.g.
// "nvidia-h200".
func (b *Backend) ShortName() string { return shortName(b.x.dev.info.Name) }

func shortName(n string) string {
	var sb strings.Builder
	dash := false
	for _, r := range strings.ToLower(n) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			sb.WriteRune(r)
			dash = false
		} else if !dash && sb.Len() > 0 {
			sb.WriteByte('-')
			dash = true
		}
		if sb.Len() >= 32 {
			break
		}
	}
	return strings.TrimRight(sb.String(), "-")
}

// Close releases the programs, buffers, queue and context. Matrices
// loaded from the backend fail their multiplies afterwards. Closing
// twice is harmless.
func (b *Backend) Close() error {
	if b == nil || b.x == nil { // a deferred Close after a failed Open or Load
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	for _, ps := range b.progs {
		for _, k := range ps.ks {
			k.release()
		}
		ps.p.release()
	}
	b.progs, b.progByKey, b.ggmlProgs, b.bufProg = nil, nil, nil, nil
	for _, p := range []**buffer{&b.xf, &b.xq, &b.xs, &b.y, &b.xsum, &b.sx, &b.xh, &b.xinv, &b.cbTab, &b.cbWS, &b.ansV, &b.ansY, &b.ansSt, &b.ansBitsW,
		&b.status, &b.devQ, &b.devS, &b.devOrd, &b.devSx, &b.devF, &b.devFsum, &b.hsX, &b.hsY, &b.hsH} {
		(*p).release()
		*p = nil
	}
	b.x.release()
	return nil
}

// nbBucket returns the batch bound of the program that runs batch.
func nbBucket(batch int) int {
	for _, nb := range []int{1, 2, 4, 8} {
		if batch <= nb {
			return nb
		}
	}
	return 16
}

// tile is the tiling of the tiled kernels (gemv.cl: TWG, RPW, UNF, RPA,
// UNA) for a batch bound; ks (0: chosen per matrix by splitK) forces the
// number of warps that split each row's columns.
// rwa and unw are the rows per warp and steps in flight of the
// warp-shuffle int8 kernels (gemv.cl, q4_a8w and bits4_a8w; NVIDIA).
// mw (8 or 16; 0: chosen per matrix) forces the warps of the
// tensor-core kernels' work-groups, which are not a build option (both
// sizes are in every program); tch (0: by batch) forces the term tile
// of the tensor-core int8 kernel (a kernel argument).
type tile struct{ wg, rpw, unf, rpa, una, ks, rwa, unw, mw, tch int }

// tileFor returns the default tiling: more rows per warp and more units
// in flight at small batches, less local memory at large ones.
func tileFor(nb int) tile {
	switch {
	case nb == 1:
		// H200 (NVIDIA OpenCL), batch 1: RPA=2, UNA=2 beat RPA=4, UNA=4
		// for int8
		return tile{128, 8, 1, 2, 2, 0, 1, 2, 0, 0}
	case nb <= 4:
		return tile{128, 2, 1, 2, 1, 0, 1, 2, 0, 0}
	default:
		return tile{128, 1, 1, 1, 1, 0, 1, 1, 0, 0}
	}
}

// tileOf parses the tile defines of a build option string (defaults
// from t for the missing ones).
func tileOf(opts string, t tile) tile {
	for _, f := range strings.Fields(opts) {
		k, v, ok := strings.Cut(strings.TrimPrefix(f, "-D"), "=")
		n, err := strconv.Atoi(v)
		if field := tileKeys[k]; ok && err == nil && field != nil {
			*field(&t) = n
		}
	}
	return t
}

// tileKeys maps the tile defines of option strings to their fields.
var tileKeys = map[string]func(*tile) *int{
	"TWG": func(t *tile) *int { return &t.wg },
	"RPW": func(t *tile) *int { return &t.rpw },
	"UNF": func(t *tile) *int { return &t.unf },
	"RPA": func(t *tile) *int { return &t.rpa },
	"UNA": func(t *tile) *int { return &t.una },
	"KS":  func(t *tile) *int { return &t.ks },
	"RWA": func(t *tile) *int { return &t.rwa },
	"UNW": func(t *tile) *int { return &t.unw },
	"MW":  func(t *tile) *int { return &t.mw },
	"TCH": func(t *tile) *int { return &t.tch },
}

func (t tile) defines() string {
	return fmt.Sprintf("-DTWG=%d -DRPW=%d -DUNF=%d -DRPA=%d -DUNA=%d -DRWA=%d -DUNW=%d", t.wg, t.rpw, t.unf, t.rpa, t.una, t.rwa, t.unw)
}

// extraDefines returns the defines of a benchmark option string that are
// not tile sizes (e.g. -DNOPTX, -DPF, -DNOWARP): they go into the build
// options (and so the program's key) unchanged.
func extraDefines(opts string) string {
	var out []string
	for _, f := range strings.Fields(opts) {
		k, _, _ := strings.Cut(strings.TrimPrefix(f, "-D"), "=")
		if tileKeys[k] == nil {
			out = append(out, f)
		}
	}
	return strings.Join(out, " ")
}

// warpA8 reports whether the int8 tiled formats run the warp-shuffle
// kernels (q4_a8w, bits4_a8w): only in the inline-PTX build (NVIDIA),
// and for now only when a benchmark variant asks for them (-DWARP):
// they become the default once validated and measured on the device.
// Valid once the program is built.
func (b *Backend) warpA8() bool {
	return b.ptx && strings.Contains(b.tileOpts, "-DWARP") && !strings.Contains(b.tileOpts, "-DNOPTX")
}

// mmaOn reports whether float multiplies may run the tensor-core kernels:
// the device is sm_80+ under NVIDIA's OpenCL, the inline-PTX program with
// them has not failed to build, and no benchmark variant asks for the
// portable build (-DNOPTX) or the CUDA-core kernels (-DNOMMA).
func (b *Backend) mmaOn() bool {
	return b.mma && !strings.Contains(b.tileOpts, "-DNOPTX") && !strings.Contains(b.tileOpts, "-DNOMMA")
}

// splitK returns how many warps of a work-group split each row's nu
// units (a power of two dividing the warp count): as many as keep every
// warp's slice at least one step (per units a lane takes per step), so
// that short-and-wide matrices still fill the device with work-groups.
func (t tile) splitK(nu, per int) int {
	if t.ks > 0 {
		return t.ks
	}
	ks := t.wg / 32
	for ks > 1 && ks*32*per > nu {
		ks /= 2
	}
	return ks
}

// a8SplitK returns how many warps split each row in the int8 tiled
// kernels (a forced KS wins): splitK's count, at most 2, and for Q4G128
// 1 when that still leaves at least 12 work-groups of rows per compute
// unit: on an H200 four warps per row were slower on every shape, and
// Q4G128 with many work-groups per compute unit gains nothing from a split.
func (t tile) a8SplitK(nu, rows, cus int, q4 bool) int {
	if t.ks > 0 {
		return t.ks
	}
	ks := min(2, t.splitK(nu, t.una))
	if q4 && ks > 1 && rows >= 12*cus*(t.wg/32*t.rpa) {
		ks = 1
	}
	return ks
}

// tiling returns the tiling the program for batch is built with (parsed
// once per tile option string and batch bound). b.mu is held.
func (b *Backend) tiling(batch int) tile {
	nb := nbBucket(batch)
	if b.tilings.opts != b.tileOpts || b.tilings.t == nil {
		b.tilings.opts, b.tilings.t = b.tileOpts, map[int]tile{}
	}
	t, ok := b.tilings.t[nb]
	if !ok {
		t = tileOf(b.tileOpts, tileFor(nb))
		b.tilings.t[nb] = t
	}
	return t
}

// a8Tiling returns the tiling of the int8 tiled kernels for a matrix of
// rows rows: the program's (tiling), except that at batch 1, with no
// tile forced, Q4G128 with at least 6 work-groups of 16 rows per compute
// unit takes 4 rows per warp and no column split (RPA=4, KS=1; a second
// program): on an H200 that beats the defaults (RPA=2, a8SplitK) where
// each compute unit has many work-groups, and is much slower where it has
// few.
func (b *Backend) a8Tiling(batch, rows int, q4 bool) tile {
	t := b.tiling(batch)
	if nb := nbBucket(batch); q4 && nb == 1 && t == tileFor(nb) && rows >= 6*b.x.dev.info.ComputeUnits*(t.wg/32*4) {
		t.rpa, t.ks = 4, 1
	}
	return t
}

// kernel returns kernel name of the program for batch (built or loaded
// from the cache on first use) and its work-group size. b.mu is held.
func (b *Backend) kernel(name string, batch int) (*kernel, int, error) {
	return b.kernelWith(name, batch, b.tiling(batch))
}

// progKey names a gemv program without formatting its build options.
type progKey struct {
	tileOpts string
	nb       int
	t        tile
}

// kernelWith is kernel for the program built with tiling t.
func (b *Backend) kernelWith(name string, batch int, t tile) (*kernel, int, error) {
	nb := nbBucket(batch)
	pk := progKey{b.tileOpts, nb, t}
	if ps := b.progByKey[pk]; ps != nil {
		return b.progKernel(ps, name, 128)
	}
	opts := fmt.Sprintf("%s -DNB=%d %s", b.std, nb, t.defines())
	if e := extraDefines(b.tileOpts); e != "" {
		opts += " " + e
	}
	key := opts
	ps := b.progs[key]
	if ps == nil {
		var p *program
		var err error
		if b.mma && !strings.Contains(b.tileOpts, "-DNOPTX") {
			// tensor cores and dp4a through inline PTX (sm_80+)
			if p, err = b.buildCached(gemvSource, opts+" -DUSE_PTX -DUSE_MMA"); err != nil {
				b.mma, b.mmaErr = false, err
			}
		}
		if p == nil && b.ptx && !strings.Contains(b.tileOpts, "-DNOPTX") {
			// inline PTX (dp4a) where the compiler takes it; the
			// portable build otherwise
			if p, err = b.buildCached(gemvSource, opts+" -DUSE_PTX"); err != nil {
				b.ptx, b.ptxErr = false, err
			}
		}
		if p == nil {
			if p, err = b.buildCached(gemvSource, opts); err != nil {
				return nil, 0, err
			}
		}
		ps = b.addProgram(key, p)
	}
	if b.progByKey == nil {
		b.progByKey = map[progKey]*progSet{}
	}
	b.progByKey[pk] = ps
	return b.progKernel(ps, name, 128)
}

// addProgram records the built program p under key. b.mu is held.
func (b *Backend) addProgram(key string, p *program) *progSet {
	ps := &progSet{p: p, ks: map[string]*kernel{}, wg: map[string]int{}}
	b.progs[key] = ps
	return ps
}

// progKernel returns kernel name of ps (created on first use) and its
// work-group size: the largest power of two up to want the device
// allows for it. b.mu is held.
func (b *Backend) progKernel(ps *progSet, name string, want int) (*kernel, int, error) {
	if k := ps.ks[name]; k != nil {
		return k, ps.wg[name], nil
	}
	k, err := ps.p.kernel(name)
	if err != nil {
		return nil, 0, err
	}
	mx, err := b.x.workGroupSize(k)
	if err != nil {
		k.release()
		return nil, 0, err
	}
	wg := want
	for wg > mx && wg > 1 {
		wg /= 2
	}
	ps.ks[name], ps.wg[name] = k, wg
	return k, wg, nil
}

// cacheDir returns the program cache directory, or "" if disabled.
func (b *Backend) cacheDir() string {
	if b.opts.CacheDir == "-" {
		return ""
	}
	if b.opts.CacheDir != "" {
		return b.opts.CacheDir
	}
	switch d := os.Getenv(EnvCache); d {
	case "":
	case "off", "-":
		return ""
	default:
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "qgemv", "opencl")
}

// cacheKey hashes everything a program binary depends on.
func (b *Backend) cacheKey(src, opts string) string {
	i := b.x.dev.info
	h := sha256.New()
	for _, s := range []string{src, opts, i.Name, i.Vendor, i.Version, i.Driver, i.Platform, i.PlatformVersion} {
		fmt.Fprintf(h, "%d:%s\n", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// cacheMagic starts every cache file; a SHA-256 of the binary follows.
const cacheMagic = "qgemv-opencl-program-v1\n"

// buildCached builds src with opts, from the disk cache when an intact
// entry exists; a missing, corrupt or rejected entry is rebuilt from
// source and rewritten (atomically: temporary file and rename).
func (b *Backend) buildCached(src, opts string) (*program, error) {
	dir := b.cacheDir()
	var path string
	if dir != "" {
		path = filepath.Join(dir, b.cacheKey(src, opts)+".bin")
		if data, err := os.ReadFile(path); err == nil {
			if bin, ok := unpackCache(data); ok {
				if p, err := b.x.buildBinary(bin, opts); err == nil {
					b.cacheHits++
					return p, nil
				}
			}
			b.cacheBad++
		}
	}
	b.cacheMisses++
	p, err := b.x.buildSource(src, opts)
	if err != nil {
		return nil, err
	}
	if path != "" {
		if bin, err := p.binary(); err == nil {
			writeCache(dir, path, bin) // best effort: a read-only cache only costs rebuilds
		}
	}
	return p, nil
}

func unpackCache(data []byte) ([]byte, bool) {
	if !bytes.HasPrefix(data, []byte(cacheMagic)) || len(data) < len(cacheMagic)+32 {
		return nil, false
	}
	sum, bin := data[len(cacheMagic):len(cacheMagic)+32], data[len(cacheMagic)+32:]
	want := sha256.Sum256(bin)
	if len(bin) == 0 || !bytes.Equal(sum, want[:]) {
		return nil, false
	}
	return bin, true
}

func writeCache(dir, path string, bin []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(bin)
	_, err = f.Write(append(append([]byte(cacheMagic), sum[:]...), bin...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// selfTest runs the selftest kernel of the batch-1 program.
func (b *Backend) selfTest() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	k, _, err := b.kernel("selftest", 1)
	if err != nil {
		return err
	}
	const n = 256
	buf, err := b.x.newBuffer(4*n, false, b.x.dev.info.Unified)
	if err != nil {
		return err
	}
	defer buf.release()
	if err := k.setArgs(mem(buf)); err != nil {
		return err
	}
	if _, err := b.x.launch(k, n, 64, false); err != nil {
		return err
	}
	got := make([]int32, n)
	if err := b.x.read(buf, 0, ptr(got), 4*n); err != nil {
		return err
	}
	for i, v := range got {
		if v != int32(3*i+1) {
			return fmt.Errorf("opencl: %s: self-test kernel wrote %d at %d, want %d", b.x.dev.info.Name, v, i, 3*i+1)
		}
	}
	return nil
}

// ensure returns *p grown to at least n bytes. b.mu is held.
func (b *Backend) ensure(p **buffer, n int, readOnly bool) (*buffer, error) {
	if *p != nil && (*p).size >= n {
		return *p, nil
	}
	(*p).release()
	*p = nil
	nb, err := b.x.newBuffer(max(n, 4096), readOnly, b.x.dev.info.Unified)
	if err != nil {
		return nil, err
	}
	*p = nb
	return nb, nil
}

// scratch is one of the backend's scratch buffers and the bytes a call
// needs of it.
type scratch struct {
	p *(*buffer)
	n int
}

// ensureScratch grows each scratch buffer to what the call needs (ensure,
// writable). b.mu is held.
func (b *Backend) ensureScratch(bufs ...scratch) error {
	for _, e := range bufs {
		if _, err := b.ensure(e.p, e.n, false); err != nil {
			return err
		}
	}
	return nil
}

// put queues a copy of s into the read-only scratch buffer *p (grown by
// ensure) through the staging memory: s may be reused at once, and the
// multiply's result read waits for it. b.mu is held.
func put[T any](b *Backend, p **buffer, s []T) error {
	buf, err := b.ensure(p, bytesOf(s), true)
	if err == nil {
		err = b.x.writeAsync(buf, 0, ptr(s), bytesOf(s))
	}
	return err
}

// ReadBandwidth streams a buffer of the given bytes (rounded to 16)
// iters times with the backend's read kernel, for each of several grid
// sizes (readPer), and returns the best GB/s (device time from
// profiling events).
func (b *Backend) ReadBandwidth(bytes, iters int) (float64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, ErrClosed
	}
	n := bytes / 16
	if n <= 0 || iters <= 0 || iters > gpuhost.MaxIters {
		return 0, fmt.Errorf("opencl: ReadBandwidth: %d bytes, %d iterations: want both positive, at most %d iterations", bytes, iters, gpuhost.MaxIters)
	}
	if n > math.MaxInt32 { // the read kernel counts 16-byte words in an int
		return 0, fmt.Errorf("opencl: ReadBandwidth: %d bytes, at most %d", bytes, int64(math.MaxInt32)*16)
	}
	src, err := b.readSource(n)
	if err != nil {
		return 0, err
	}
	defer src.release()
	return b.readSweep(n, []*buffer{src}, iters)
}

// readPer are the 16-byte words per work-item the read kernel is timed
// with (the grid is sized so that each work-item reads about that many):
// the roofline is the best of them, so that no launch shape of the read
// kernel flatters the kernels compared with it.
var readPer = []int{1, 2, 4, 8, 16, 64}

// readSweep times the read kernel over bufs (n 16-byte words each) for
// every readPer: one warm-up pass over the buffers, then iters launches
// back to back rotating over them, each timed by its profiling event.
// It returns the best of the settings' mean GB/s. b.mu is held.
func (b *Backend) readSweep(n int, bufs []*buffer, iters int) (float64, error) {
	best := 0.0
	for _, per := range readPer {
		k, wg, groups, out, err := b.readKernel(n, per)
		if err != nil {
			return 0, err
		}
		gbs, err := b.readTimed(k, wg, groups, out, n, bufs, iters)
		out.release()
		if err != nil {
			return 0, err
		}
		best = max(best, gbs)
	}
	return best, nil
}

func (b *Backend) readTimed(k *kernel, wg, groups int, out *buffer, n int, bufs []*buffer, iters int) (float64, error) {
	evs := make([]*event, 0, iters)
	for i := 0; i < len(bufs)+iters; i++ {
		if err := k.setArgs(mem(bufs[i%len(bufs)]), i32(n), mem(out)); err != nil {
			releaseEvents(evs)
			return 0, err
		}
		ev, err := b.x.launch(k, groups*wg, wg, i >= len(bufs))
		if err != nil {
			releaseEvents(evs)
			return 0, err
		}
		if ev != nil {
			evs = append(evs, ev)
		}
	}
	total, err := b.finishEvents(evs)
	if err != nil {
		return 0, err
	}
	return float64(16*n) * float64(len(evs)) / total / 1e9, nil
}

// finishEvents waits for the queue and returns the summed device seconds
// of events, releasing them all, also on error.
func (b *Backend) finishEvents(evs []*event) (float64, error) {
	if err := b.x.finish(); err != nil {
		releaseEvents(evs)
		return 0, err
	}
	return sumEvents(evs)
}

// sumEvents returns the summed device seconds of events (after the queue
// finished) and releases them all, also on error.
func sumEvents(evs []*event) (float64, error) {
	total := 0.0
	for i, ev := range evs {
		s, err := ev.seconds()
		if err != nil {
			releaseEvents(evs[i+1:])
			return 0, err
		}
		total += s
	}
	return total, nil
}

// releaseEvents releases events whose times are no longer wanted.
func releaseEvents(evs []*event) {
	for _, ev := range evs {
		ev.seconds() //nolint:errcheck // releasing only
	}
}

// readKernel returns the read kernel for n 16-byte elements, its
// work-group size, the work-groups to launch so that each work-item
// reads about per elements, and a small output buffer (the caller
// releases it). b.mu is held.
func (b *Backend) readKernel(n, per int) (k *kernel, wg, groups int, out *buffer, err error) {
	if k, wg, err = b.kernel("readbw", 1); err != nil {
		return nil, 0, 0, nil, err
	}
	groups = max(1, min((n+wg*per-1)/(wg*per), 1<<20))
	if out, err = b.x.newBuffer(16, false, false); err != nil {
		return nil, 0, 0, nil, err
	}
	return k, wg, groups, out, nil
}

// readSource returns a new read-only buffer of n 16-byte elements for
// the read kernel, byte i holding byte(7i). b.mu is held.
func (b *Backend) readSource(n int) (*buffer, error) {
	src, err := b.x.newBuffer(16*n, true, false)
	if err != nil {
		return nil, err
	}
	fill := make([]byte, min(16*n, 1<<20))
	for i := range fill {
		fill[i] = byte(i * 7)
	}
	for off := 0; off < 16*n; off += len(fill) {
		if err := b.x.write(src, off, ptr(fill), min(len(fill), 16*n-off)); err != nil {
			src.release()
			return nil, err
		}
	}
	return src, nil
}
