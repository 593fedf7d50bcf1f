//go:build opencl

package opencl

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

// EnvRequire turns "no OpenCL platform" from a skip into a failure (CI).
const envRequire = "QGEMV_REQUIRE_OPENCL"

var (
	shared     *Backend
	sharedErr  error
	sharedOnce sync.Once
	cacheDir   string
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "qgemv-opencl-test")
	if err != nil {
		panic(err)
	}
	cacheDir = d
	if os.Getenv(EnvCache) == "" {
		// keep the user's cache: tests use their own, shared across the
		// run (each NB program is built once).
		if c, err := os.UserCacheDir(); err == nil {
			cacheDir = filepath.Join(c, "qgemv", "opencl-test")
		}
	} else {
		cacheDir = os.Getenv(EnvCache)
	}
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.RemoveAll(d)
	os.Exit(code)
}

// backend returns the shared backend of device 0 or skips (fails with
// QGEMV_REQUIRE_OPENCL=1) when there is none.
func backend(t testing.TB) *Backend {
	t.Helper()
	sharedOnce.Do(func() {
		dev := 0
		if s := os.Getenv("QGEMV_OPENCL_DEVICE"); s != "" {
			fmt.Sscan(s, &dev)
		}
		shared, sharedErr = Open(Options{Device: dev, CacheDir: cacheDir})
	})
	if sharedErr != nil {
		if os.Getenv(envRequire) == "1" {
			t.Fatalf("OpenCL required (%s=1) but unavailable: %v", envRequire, sharedErr)
		}
		t.Skipf("no usable OpenCL device (set %s=1 to fail instead): %v", envRequire, sharedErr)
	}
	return shared
}

func randW(rng *rand.Rand, n int) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	return w
}

// testCase is one matrix to check.
type testCase struct {
	name string
	m    layout.Matrix
	a8   bool // int8 activations supported
	perm bool
}

func cases(t *testing.T, rng *rand.Rand, rows, cols int, all bool) []testCase {
	var out []testCase
	w := randW(rng, rows*cols)
	q, err := layout.QuantizeQ4G128(w, rows, cols, layout.MinMax)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, testCase{name: "Q4G128", m: q, a8: true})
	groups := []int{128}
	widths := []int{4}
	if all {
		groups = layout.BitsGroups
		widths = layout.BitWidths
	}
	for _, n := range widths {
		for gi, g := range groups {
			fp32 := gi%2 == 1
			b, err := layout.QuantizeBits(w, rows, cols, n, g, layout.QuantOptions{Method: layout.MinMax, IntegerZero: true, FP32Meta: fp32})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, testCase{name: fmt.Sprintf("%s/fp32meta=%v", b.Name(), fp32), m: b, a8: true})
		}
	}
	for _, g := range groups {
		s, _, err := layout.QuantizeSparse12(w, rows, cols, g, layout.QuantOptions{Method: layout.MinMax, IntegerZero: true, FP32Meta: g == 64})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, testCase{name: s.Name(), m: s, a8: true})
	}
	// fractional zeros, offsets and act-order
	b, err := layout.QuantizeBits(w, rows, cols, 3, 64, layout.QuantOptions{Method: layout.MinMax})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, testCase{name: "Bits3G64/fraczero", m: b, a8: b.IntegerZeros() == nil})
	o, err := layout.QuantizeBits(w, rows, cols, 4, 32, layout.QuantOptions{Method: layout.MinMax, IntegerZero: true})
	if err != nil {
		t.Fatal(err)
	}
	o.Offsets = true
	for i := range o.Zeros16 {
		o.Zeros16[i] = layout.ToFP16(float32(rng.NormFloat64()))
	}
	out = append(out, testCase{name: "Bits4G32/offsets", m: o})
	p, err := layout.QuantizeBits(w, rows, cols, 4, 128, layout.QuantOptions{Method: layout.MinMax, IntegerZero: true})
	if err != nil {
		t.Fatal(err)
	}
	p.Perm = make([]int32, cols)
	for i, v := range rng.Perm(cols) {
		p.Perm[i] = int32(v)
	}
	out = append(out, testCase{name: "Bits4G128/actorder", m: p, a8: true, perm: true})
	return out
}

type reffer interface {
	DotRef(out []float64, x []float32) error
	DotRefMag(mag []float64, x []float32) error
	DotA8Exact(out []float32, xq []int8, xs []float32) error
}

func gather(m layout.Matrix, x []float32) []float32 {
	if b, ok := m.(*layout.Bits); ok && b.Perm != nil {
		g := make([]float32, len(x))
		b.Gather(g, x)
		return g
	}
	return x
}

const guard = -12345.5

func withGuards(n int) (full, inner []float32) {
	full = make([]float32, n+16)
	for i := range full {
		full[i] = guard
	}
	return full, full[8 : 8+n]
}

func checkGuards(t *testing.T, what string, full []float32, n int) {
	t.Helper()
	for i := 0; i < 8; i++ {
		if full[i] != guard || full[8+n+i] != guard {
			t.Fatalf("%s: guard value overwritten", what)
		}
	}
}

func checkFloat(t *testing.T, tc testCase, mx *Matrix, rng *rand.Rand, batch int, f16 bool) {
	rows, cols := tc.m.Shape()
	x := randW(rng, batch*cols)
	var xh []layout.FP16
	if f16 {
		xh = make([]layout.FP16, len(x))
		for i := range x {
			xh[i] = layout.ToFP16(x[i])
			x[i] = xh[i].Float32()
		}
	}
	full, y := withGuards(batch * rows)
	var err error
	if f16 {
		err = mx.MulF16(y, xh, batch)
	} else {
		err = mx.MulF32(y, x, batch)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkGuards(t, "dst", full, batch*rows)
	ref, mag := make([]float64, rows), make([]float64, rows)
	r := tc.m.(reffer)
	for b := 0; b < batch; b++ {
		xb := x[b*cols : (b+1)*cols]
		if err := r.DotRef(ref, xb); err != nil {
			t.Fatal(err)
		}
		if err := r.DotRefMag(mag, xb); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < rows; i++ {
			got := float64(y[b*rows+i])
			if d := math.Abs(got - ref[i]); !(d <= layout.BitsTolerance*mag[i]+1e-30) {
				t.Fatalf("vector %d row %d: %v, want %v (error %.3g of magnitude %.3g)", b, i, got, ref[i], d, mag[i])
			}
		}
	}
}

func checkA8(t *testing.T, tc testCase, mx *Matrix, rng *rand.Rand, batch int) {
	rows, cols := tc.m.Shape()
	pc := tc.m.PaddedCols()
	x := randW(rng, batch*cols)
	full, y := withGuards(batch * rows)
	err := mx.MulA8(y, x, batch)
	if !tc.a8 {
		if err == nil || !strings.Contains(err.Error(), "integer zero") {
			t.Fatalf("A8 on a matrix without integer zeros: %v, want an error", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	checkGuards(t, "dst", full, batch*rows)
	want := make([]float32, rows)
	xq, xs := make([]int8, batch*pc), make([]float32, batch*pc/128)
	for b := 0; b < batch; b++ {
		g := gather(tc.m, x[b*cols:(b+1)*cols])
		if err := layout.QuantizeA8(xq[b*pc:(b+1)*pc], xs[b*pc/128:(b+1)*pc/128], g); err != nil {
			t.Fatal(err)
		}
		if err := tc.m.(reffer).DotA8Exact(want, xq[b*pc:(b+1)*pc], xs[b*pc/128:(b+1)*pc/128]); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < rows; i++ {
			if math.Float32bits(y[b*rows+i]) != math.Float32bits(want[i]) {
				t.Fatalf("A8 vector %d row %d: %v, want %v exactly", b, i, y[b*rows+i], want[i])
			}
		}
	}
	// MulI8 with the same quantized activations gives the same bits.
	y2 := make([]float32, batch*rows)
	if err := mx.MulI8(y2, xq, xs, batch); err != nil {
		t.Fatal(err)
	}
	for i := range y2 {
		if math.Float32bits(y2[i]) != math.Float32bits(y[i]) {
			t.Fatalf("MulI8 %d: %v, MulA8 gave %v", i, y2[i], y[i])
		}
	}
}

func TestFormats(t *testing.T) { formats(t, backend(t), false) }

// TestFormatsDiscrete is TestFormats with buffers that are never mapped,
// as on a discrete GPU: the activations go up through the pinned staging
// memory without blocking, the results come back with blocking reads.
func TestFormatsDiscrete(t *testing.T) {
	be := discreteBackend(t)
	defer be.Close()
	formats(t, be, true)
	// A non-finite activation is named as on the host path, and the
	// backend keeps working.
	m, err := layout.RandomBits(8, 600, 4, 128, 3)
	if err != nil {
		t.Fatal(err)
	}
	mx, err := be.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	defer mx.Close()
	x := make([]float32, 2*600)
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	x[600+299] = float32(math.Inf(1))
	y := make([]float32, 2*8)
	if err := mx.MulA8(y, x, 2); err == nil || !strings.Contains(err.Error(), "vector 1: activation 299") {
		t.Fatalf("MulA8 with an infinite activation: %v", err)
	}
	x[600+299] = 1
	if err := mx.MulA8(y, x, 2); err != nil {
		t.Fatalf("MulA8 after the fault: %v", err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = mx.MulA8(y, x, 2) }); n != 0 && !raceEnabled {
		t.Errorf("MulA8 on the device path allocates %v times per call", n)
	}
	xh := make([]layout.FP16, len(x))
	if n := testing.AllocsPerRun(20, func() { _ = mx.MulF16(y, xh, 2) }); n != 0 && !raceEnabled {
		t.Errorf("MulF16 on the device path allocates %v times per call", n)
	}
}

// discreteBackend opens a backend of the test device whose buffers are
// never mapped, as on a discrete GPU (transfers through the staging
// memory; the host-slice int8 and binary16 multiplies on the device
// path). It skips without a device.
func discreteBackend(t *testing.T) *Backend {
	t.Helper()
	backend(t)
	be, err := Open(Options{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	d := *be.x.dev
	d.info.Unified = false
	be.x.dev = &d
	return be
}

func formats(t *testing.T, be *Backend, short bool) {
	rng := rand.New(rand.NewSource(7))
	shapes := [][2]int{{1, 1}, {33, 700}, {70, 2100}, {130, 300}}
	if testing.Short() || short {
		shapes = shapes[:2]
	}
	for si, sh := range shapes {
		for _, tc := range cases(t, rng, sh[0], sh[1], si == 1 || si == 3) {
			mx, err := be.Load(tc.m)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			for _, batch := range []int{1, 3, 16} {
				t.Run(fmt.Sprintf("%dx%d/%s/b%d", sh[0], sh[1], tc.name, batch), func(t *testing.T) {
					checkFloat(t, tc, mx, rng, batch, false)
					checkFloat(t, tc, mx, rng, batch, true)
					checkA8(t, tc, mx, rng, batch)
				})
			}
			if err := mx.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewSource(3))
	q, err := layout.QuantizeQ4G128(randW(rng, 20*300), 20, 300, layout.MinMax)
	if err != nil {
		t.Fatal(err)
	}
	mx, err := be.Load(q)
	if err != nil {
		t.Fatal(err)
	}
	x, y := randW(rng, 2*300), make([]float32, 2*20)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"batch 0", mx.MulF32(y[:0], x[:0], 0), "batch"},
		{"batch 17", mx.MulF32(y, x, 17), "batch"},
		{"short x", mx.MulF32(y, x[:599], 2), "x has 599"},
		{"short dst", mx.MulA8(y[:39], x, 2), "dst has 39"},
		{"f16 short", mx.MulF16(y, make([]layout.FP16, 5), 2), "x has 5"},
		{"xq short", mx.MulI8(y, make([]int8, 383), make([]float32, 6), 2), "xq has 383"},
		{"xs short", mx.MulI8(y, make([]int8, 768), make([]float32, 5), 2), "xs has 5"},
		{"xs NaN", mx.MulI8(y, make([]int8, 768), []float32{1, 1, 1, float32(math.NaN()), 1, 1}, 2), "activation scale 3"},
		{"xs negative", mx.MulI8(y, make([]int8, 768), []float32{1, 1, 1, -1, 1, 1}, 2), "activation scale 3"},
		{"A8 infinite", mx.MulA8(y, append(append([]float32{}, x[:599]...), float32(math.Inf(1))), 2), "activation 299"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, c.err, c.want)
		}
	}
	for _, b := range []int{0, 17} {
		if err := mx.MulF32(y, x, b); !errors.Is(err, ErrBatch) {
			t.Errorf("batch %d: %v, want ErrBatch", b, err)
		}
	}
	if _, err := be.Load(&layout.Q4G128{Rows: 3}); err == nil {
		t.Error("invalid matrix loaded")
	}
	if _, err := be.Load(nil); err == nil {
		t.Error("nil matrix loaded")
	}
	if err := mx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mx.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := mx.MulF32(y, x, 2); !errors.Is(err, ErrClosed) {
		t.Errorf("multiply after Close: %v, want ErrClosed", err)
	}
	if err := mx.MulI8(y, make([]int8, 768), make([]float32, 6), 2); !errors.Is(err, ErrClosed) {
		t.Errorf("MulI8 after Close: %v, want ErrClosed", err)
	}
}

func TestClosedBackend(t *testing.T) {
	backend(t)
	be, err := Open(Options{CacheDir: cacheDir, Device: shared.Info().Index})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(4))
	q, err := layout.QuantizeQ4G128(randW(rng, 4*128), 4, 128, layout.MinMax)
	if err != nil {
		t.Fatal(err)
	}
	mx, err := be.Load(q)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mx.MulF32(make([]float32, 4), make([]float32, 128), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("multiply on a closed backend: %v, want ErrClosed", err)
	}
	if _, err := be.Load(q); !errors.Is(err, ErrClosed) {
		t.Errorf("Load on a closed backend: %v, want ErrClosed", err)
	}
	if _, err := be.ReadBandwidth(1<<20, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadBandwidth on a closed backend: %v", err)
	}
	mx.Close()
}

func TestMissingDevice(t *testing.T) {
	backend(t)
	_, err := Open(Options{Device: 1000, CacheDir: "-"})
	if err == nil || !strings.Contains(err.Error(), "device 1000 does not exist") {
		t.Errorf("Open of a missing device: %v", err)
	}
	_, err = Open(Options{Device: -1, CacheDir: "-"})
	if err == nil {
		t.Error("Open of device -1 succeeded")
	}
}

func TestProgramCache(t *testing.T) {
	be := backend(t)
	dir := t.TempDir()
	open := func() *Backend {
		b, err := Open(Options{Device: be.Info().Index, CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b1 := open()
	if b1.cacheMisses != 1 || b1.cacheHits != 0 {
		t.Fatalf("empty cache: %d misses, %d hits, want 1, 0", b1.cacheMisses, b1.cacheHits)
	}
	b1.Close()
	b2 := open()
	if b2.cacheHits != 1 || b2.cacheMisses != 0 {
		t.Fatalf("warm cache: %d hits, %d misses, want 1, 0", b2.cacheHits, b2.cacheMisses)
	}
	b2.Close()
	files, err := filepath.Glob(filepath.Join(dir, "*.bin"))
	if err != nil || len(files) != 1 {
		t.Fatalf("cache files %v (%v), want one", files, err)
	}
	for i, corrupt := range []func([]byte) []byte{
		func(d []byte) []byte { d[len(d)-1] ^= 0xff; return d }, // payload changed
		func(d []byte) []byte { return d[:len(d)/2] },           // truncated
		func(d []byte) []byte { return []byte("garbage") },      // not ours
	} {
		data, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(files[0], corrupt(data), 0o644); err != nil {
			t.Fatal(err)
		}
		b3 := open()
		if b3.cacheBad != 1 || b3.cacheMisses != 1 {
			t.Fatalf("corruption %d: %d bad, %d misses, want 1, 1", i, b3.cacheBad, b3.cacheMisses)
		}
		b3.Close()
		b4 := open() // rewritten
		if b4.cacheHits != 1 {
			t.Fatalf("corruption %d: entry not rewritten (%d hits)", i, b4.cacheHits)
		}
		b4.Close()
	}
}

func TestBuildError(t *testing.T) {
	be := backend(t)
	be.mu.Lock()
	defer be.mu.Unlock()
	_, err := be.x.buildSource("__kernel void broken(__global int *p) { p[0] = undefined_name; }", be.std)
	if err == nil || !strings.Contains(err.Error(), "build log") || !strings.Contains(err.Error(), be.Info().Name) {
		t.Errorf("broken source: %v, want an error with the device's build log", err)
	}
}

func TestBindingHandles(t *testing.T) {
	be := backend(t)
	ds, err := listDevices()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if got := d.rawName(); strings.TrimSpace(got) != d.info.Name {
			t.Errorf("device name through cl %q, through the raw handle %q", got, d.info.Name)
		}
	}
	if be.Info().Type == "" || be.Info().LocalMem <= 0 {
		t.Errorf("device info incomplete: %+v", be.Info())
	}
	t.Logf("device %q type %s, %s, build %q, sub-groups %v %v, unified %v", be.Info().Name, be.Info().Type, be.Info().Version, be.std, be.UsesSubgroups(), be.Info().SubGroupSizes, be.Info().Unified)
}

// TestTilings checks the tiled kernels (Q4G128, Bits4) under other
// tilings and column splits than the defaults, with several tiles per
// row, partial tiles and padded rows.
func TestTilings(t *testing.T) {
	be := backend(t)
	t.Logf("inline PTX %v (%v), tensor cores %v (%v)", be.ptx, be.ptxErr, be.mma, be.mmaErr)
	rng := rand.New(rand.NewSource(11))
	// -DNOMMA keeps the tiled kernels running where tensor cores would
	// take over; the last two vary the tensor-core kernels' work-groups and
	// chunks in flight
	opts := []string{"-DRPA=4 -DKS=1 -DNOMMA", "-DKS=2 -DNOMMA", "-DKS=4 -DNOMMA", "-DTWG=256 -DKS=8 -DRPW=1 -DRPA=1 -DNOMMA", "-DTWG=64 -DUNF=2 -DUNA=2 -DRPW=4 -DKS=1 -DNOMMA"}
	if be.mma {
		// without tensor cores these would build the default kernels
		// again (TestFormats runs them), which costs PoCL minutes
		opts = append(opts, "-DMW=16 -DAMU16=2 -DBMU16=2 -DQMU16=2", "-DMW=8 -DTCH=2 -DAMU8=3 -DQMU8=4")
	}
	for _, to := range opts {
		for _, sh := range [][2]int{{70, 2100}, {33, 5000}} {
			for _, tc := range cases(t, rng, sh[0], sh[1], false) {
				mx, err := be.Load(tc.m)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if mx.tiled == 0 {
					mx.Close()
					continue
				}
				for _, batch := range []int{1, 3} {
					t.Run(fmt.Sprintf("%s/%dx%d/%s/b%d", to, sh[0], sh[1], tc.name, batch), func(t *testing.T) {
						be.mu.Lock()
						be.tileOpts = to
						be.mu.Unlock()
						defer func() {
							be.mu.Lock()
							be.tileOpts = ""
							be.mu.Unlock()
						}()
						checkFloat(t, tc, mx, rng, batch, false)
						checkA8(t, tc, mx, rng, batch)
					})
				}
				mx.Close()
			}
		}
	}
}

// TestQ4Layouts checks Q4G128 in the arrangement the shared backend does
// not use (16-row tiles on most devices, row-major where tensor cores
// run), on shapes with partial tiles, several 128-row stripes, and
// enough rows for the 4-rows-per-warp int8 tiling (a8Tiling) on small
// devices; and q4Stripe's placement of every code, scale and zero.
func TestQ4Layouts(t *testing.T) {
	sb := backend(t)
	other := Q4Tiles
	if sb.q4tiles {
		other = Q4RowMajor
	}
	be, err := Open(Options{Device: sb.opts.Device, CacheDir: cacheDir, Q4Layout: other})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if be.q4tiles == sb.q4tiles || strings.Contains(be.std, "-DQ4TILES") != be.q4tiles {
		t.Fatalf("Q4Layout %d: q4tiles %v, build %q", other, be.q4tiles, be.std)
	}
	cus := be.Info().ComputeUnits
	for _, c := range []struct {
		batch, rows int
		q4          bool
		rpa, ks     int
	}{{1, 96 * cus, true, 4, 1}, {1, 96*cus - 1, true, 2, 0}, {2, 96 * cus, true, 2, 0}, {1, 96 * cus, false, 2, 0}} {
		if tl := be.a8Tiling(c.batch, c.rows, c.q4); tl.rpa != c.rpa || tl.ks != c.ks {
			t.Errorf("a8Tiling(%d, %d, %v) with %d compute units: RPA=%d KS=%d, want %d %d", c.batch, c.rows, c.q4, cus, tl.rpa, tl.ks, c.rpa, c.ks)
		}
	}
	rng := rand.New(rand.NewSource(13))
	// 300 rows take a8Tiling's 4 rows per warp on up to 3 compute units
	shapes := [][2]int{{1, 1}, {70, 2100}, {300, 260}}
	if testing.Short() {
		shapes = shapes[1:2]
	}
	for _, sh := range shapes {
		q, err := layout.QuantizeQ4G128(randW(rng, sh[0]*sh[1]), sh[0], sh[1], layout.MinMax)
		if err != nil {
			t.Fatal(err)
		}
		tc := testCase{name: "Q4G128", m: q, a8: true}
		mx, err := be.Load(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, batch := range []int{1, 3, 16} {
			t.Run(fmt.Sprintf("tiles=%v/%dx%d/b%d", be.q4tiles, sh[0], sh[1], batch), func(t *testing.T) {
				checkFloat(t, tc, mx, rng, batch, false)
				checkA8(t, tc, mx, rng, batch)
			})
		}
		mx.Close()
	}

	// q4Stripe against the index formula of gemv.cl's tiles
	q, err := layout.QuantizeQ4G128(randW(rng, 200*300), 200, 300, layout.MinMax)
	if err != nil {
		t.Fatal(err)
	}
	ng := q.PCols / 128
	w, sc, zp := make([]byte, 64*q.PCols), make([]float32, 128*ng), make([]byte, 64*ng)
	for r0 := 0; r0 < q.PRows; r0 += 128 {
		for i := range w {
			w[i] = 0xAA // q4Stripe must write every byte
		}
		q4Stripe(q, r0, w, sc, zp)
		for r := r0; r < r0+128; r++ {
			for g := 0; g < ng; g++ {
				d := ((r/16)*ng+g)*16 + r%16 - r0*ng // device index, from the stripe's start
				for c := g * 128; c < g*128+128; c++ {
					b := w[64*d+(c%128)/2]
					if got := b >> (4 * (c % 2)) & 15; got != q.Q(r, c) {
						t.Fatalf("row %d col %d: code %d, want %d", r, c, got, q.Q(r, c))
					}
				}
				if z := zp[d/2] >> (4 * (d % 2)) & 15; sc[d] != q.Scale(r, g) || z != q.Zero(r, g) {
					t.Fatalf("row %d group %d: scale %v zero %d, want %v %d", r, g, sc[d], z, q.Scale(r, g), q.Zero(r, g))
				}
			}
		}
	}
}

// TestTileOptions checks that benchmark option strings split into tile
// fields (tileOf) and build defines (extraDefines) by one key table.
func TestTileOptions(t *testing.T) {
	const opts = "-DTWG=256 -DKS=8 -DNOMMA -DMW=16 -DTCH=2 -DPF -DRPW=x"
	if tl := tileOf(opts, tile{rpw: 3}); tl != (tile{wg: 256, ks: 8, mw: 16, tch: 2, rpw: 3}) {
		t.Errorf("tileOf: %+v", tl)
	}
	if e := extraDefines(opts); e != "-DNOMMA -DPF" {
		t.Errorf("extraDefines: %q", e)
	}
}

// TestFloatActivationsFarFromOne: float activations of magnitude near
// 2^-126 or 2^118 meet the float bounds (found by review: the tiled
// kernels' 16^-k nibble scaling made 1.2e-38 activations subnormal, 8x
// over A32Tolerance, and the generic kernels overflowed to +Inf at 2^118;
// the host now scales such vectors by a power of two and the results
// back).
func TestFloatActivationsFarFromOne(t *testing.T) {
	be := backend(t)
	rng := rand.New(rand.NewSource(81))
	// Weights 1 on the columns that meet the 16^-3 nibble scaling (c = 3
	// mod 4), 0 elsewhere: the terms that went subnormal are all there is.
	q4, err := layout.NewQ4G128(16, 512)
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 16; r++ {
		for c := 3; c < 512; c += 4 {
			i := r*q4.PCols + c
			q4.Weights[i/2] |= 1 << (4 * (i % 2))
		}
		for g := 0; g < q4.Groups(); g++ {
			q4.Scales[q4.MetaIndex(r, g)] = 1
		}
	}
	b8, err := layout.QuantizeBits(randW(rng, 64*512), 64, 512, 8, 0, layout.QuantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []layout.Matrix{q4, b8} {
		mx, err := be.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		rows, cols := m.Shape()
		for _, e := range []int{-126, -100, 0, 100, 118} {
			x := make([]float32, cols)
			for i := range x {
				x[i] = float32(math.Ldexp(1+rng.Float64(), e))
				if e == -126 { // one value: its rounding to the subnormal grid does not average out
					x[i] = 1.1758e-38
				}
			}
			ref, mag := make([]float64, rows), make([]float64, rows)
			switch m := m.(type) {
			case *layout.Q4G128:
				m.DotRef(ref, x)
				m.DotRefMag(mag, x)
			case *layout.Bits:
				m.DotRef(ref, x)
				m.DotRefMag(mag, x)
			}
			y := make([]float32, rows)
			if err := mx.MulF32(y, x, 1); err != nil {
				t.Fatal(err)
			}
			for r := range y {
				if d := math.Abs(float64(y[r]) - ref[r]); !(d <= layout.A32Tolerance*mag[r]) {
					t.Fatalf("%s, x ~ 2^%d: row %d = %g, want %g (|diff| %g, bound %g)", m.Name(), e, r, y[r], ref[r], d, layout.A32Tolerance*mag[r])
				}
			}
		}
		mx.Close()
	}
}

// TestLoadPast32BitIndices: a matrix whose buffer the kernels' 32-bit
// indices cannot cover is refused at Load (found by review: metadata
// indices g*prows + r wrapped negative for tens of GiB). The 1 GiB of
// weights is never touched, so it costs no memory.
func TestLoadPast32BitIndices(t *testing.T) {
	be := backend(t)
	m, err := layout.NewQ4G128(1<<15, 1<<16) // 2^31 nibbles
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.Load(m); err == nil || !strings.Contains(err.Error(), "32-bit indices") {
		t.Fatalf("Load of 2^31 weights: %v, want an error naming the 32-bit indices", err)
	}
}

// TestCacheDirEnv: QGEMV_OPENCL_CACHE names the program cache, "off" and
// "-" disable it, and Options.CacheDir overrides it.
func TestCacheDirEnv(t *testing.T) {
	for env, want := range map[string]string{"/tmp/qgemv-cl": "/tmp/qgemv-cl", "off": "", "-": ""} {
		t.Setenv(EnvCache, env)
		if got := (&Backend{}).cacheDir(); got != want {
			t.Errorf("%s=%q: cache %q, want %q", EnvCache, env, got, want)
		}
		if got := (&Backend{opts: Options{CacheDir: "/x"}}).cacheDir(); got != "/x" {
			t.Errorf("%s=%q, CacheDir /x: cache %q", EnvCache, env, got)
		}
	}
}
