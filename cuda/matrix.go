//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
)

// Launch geometry; it must match WARPS, WARPS_A8 and the FLOAT_KERNEL
// instances in kernels.cu.
const (
	warps   = 8 // warps per block of the float and Q4G128/Sparse12 A8 kernels
	warpsA8 = 4 // warps per block of the Bits A8 kernels
	unroll  = 2 // 16-byte units in flight per lane and row (float kernels)
)

// bucket returns the float kernel instance for a batch: the vectors it
// computes (NB; the activations are padded to NB vectors with zeros) and
// its rows per warp.
func bucket(batch int) (nb, rows int) {
	switch {
	case batch == 1:
		return 1, 4
	case batch <= 4:
		return 4, 2
	}
	return 16, 2
}

type format int

const (
	fmtQ4 format = iota
	fmtBits
	fmtSparse
)

// Matrix is a matrix resident in device memory.
type Matrix struct {
	handle
	f     format
	name  string
	geo   gpuhost.Geometry
	prows int
	n, g  int     // Bits width; group size (Bits, Sparse12)
	lg    int64   // log2 of the group size; 62 for whole-row groups
	perm  []int32 // act-order permutation (host-side gather)
	a8err error   // why int8 activations are refused (nil: allowed)
	bytes int64   // bytes a GEMV streams from the matrix

	w, s, z, m, zi *buffer // weights; scales; Q4G128 zeros; w = q*s - m; integer zeros

	coded *ANSMatrix // an entropy-coded Bits matrix's words (ansbits.go), or nil

	nat, mma *buffer // device gather tables (buffers.go colTables), made on first use
	a8t      *buffer // the Bits A8 tensor-core kernels' fragment order (a8Table), made on first use
}

// Mat is a matrix loaded onto the device, whatever its format: *Matrix
// for Q4G128, Bits and Sparse12, other types for the formats other files
// of this package implement. A multiply the format does not take is an
// error wrapping errs.ErrFormatNotImplemented.
type Mat = mat.Matrix

// loaders holds the kernel files' loaders by format (filled by their
// init functions).
var loaders = mat.NewLoaders[Backend]("cuda")

func init() {
	basic := func(b *Backend, m layout.Matrix) (Mat, error) { return mat.Bind(b.loadBasic(m)) }
	for _, id := range []layout.FormatID{layout.FormatQ4G128, layout.FormatBits, layout.FormatSparse12} {
		loaders.Register(id, basic)
	}
}

// Formats returns the formats this backend has kernels for.
func Formats() []layout.FormatID {
	return loaders.Formats()
}

// Load validates m and copies it to the device in the form its kernels
// read, with the kernels its format registered. A format without CUDA
// kernels is an error wrapping errs.ErrFormatNotImplemented.
func (b *Backend) Load(m layout.Matrix) (Mat, error) {
	if m == nil {
		return nil, errors.New("cuda: load: matrix is nil")
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("cuda: load: %w", err)
	}
	l, ok := loaders.Get(m.Spec().Format)
	if !ok {
		return nil, fmt.Errorf("cuda: load %s: %w", m.Name(), errs.ErrFormatNotImplemented)
	}
	return l(b, m)
}

// MulI32 returns an error: these formats have scales.
func (mx *Matrix) MulI32([]int32, []int8, int) error {
	return fmt.Errorf("cuda: %s: exact int32 products are for the int8 formats (Int8, ANS): %w", mx.name, errs.ErrFormatNotImplemented)
}

// loadBasic loads Q4G128, Bits and Sparse12 (m validated).
func (b *Backend) loadBasic(m layout.Matrix) (*Matrix, error) {
	return b.loadWith(m, nil)
}

// loadWith is loadBasic; a Bits header h (no words: an entropy-coded
// matrix m, whose words a decoder writes into scratch before each
// multiply) gets a one-word placeholder for them.
func (b *Backend) loadWith(m layout.Matrix, h *layout.Bits) (*Matrix, error) {
	mx := &Matrix{handle: handle{b: b}, name: m.Name(), geo: gpuhost.GeometryOf(m), bytes: m.StreamBytes(), perm: gpuhost.Perm(m), a8err: gpuhost.CheckA8(m)}
	var meta *gpuhost.Meta
	var words any
	switch t := m.(type) {
	case *layout.Q4G128:
		mx.f, mx.prows = fmtQ4, t.PRows
	case *layout.Bits:
		mx.f, mx.prows, mx.n, mx.g, words = fmtBits, t.PRows, t.N, t.G, t.Words
		mx.lg = groupShift(t.G, t.WholeRow)
	case *layout.Sparse12:
		mx.f, mx.prows, mx.g, words = fmtSparse, t.PRows, t.G, t.Words
		mx.lg = groupShift(t.G, t.WholeRow)
	default:
		if h == nil {
			return nil, fmt.Errorf("cuda: load %s: %w", m.Name(), errs.ErrFormatNotImplemented)
		}
		mx.f, mx.prows, mx.n, mx.g, words = fmtBits, h.PRows, h.N, h.G, []uint32{0}
		mx.lg = groupShift(h.G, h.WholeRow)
	}
	if mx.f != fmtQ4 {
		var err error
		if meta, err = gpuhost.FlattenMeta(m); err != nil {
			return nil, fmt.Errorf("cuda: load: %w", err)
		}
	}
	err := b.do(func() error {
		if t, ok := m.(*layout.Q4G128); ok {
			return uploadAll(into(&mx.w, t.Weights), into(&mx.s, t.Scales), into(&mx.z, t.Zeros))
		}
		ups := []hostSlice{into(&mx.w, words.([]uint32)), into(&mx.s, meta.S), into(&mx.m, meta.M)}
		if meta.Z != nil {
			ups = append(ups, into(&mx.zi, meta.Z))
		}
		return uploadAll(ups...)
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: load %s: %w", m.Name(), err)
	}
	return mx, nil
}

// groupShift returns log2(g) for the power-of-two group sizes and 62 for
// whole-row groups (column >> 62 is group 0).
func groupShift(g int, wholeRow bool) int64 {
	if wholeRow {
		return 62
	}
	lg := int64(0)
	for 1<<lg < g {
		lg++
	}
	return lg
}

// Close frees the device memory; later multiplies return ErrClosed, and
// so does a second Close.
func (mx *Matrix) Close() error {
	if mx == nil || mx.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	return mx.close(func() {
		freeAll(mx.w, mx.s, mx.z, mx.m, mx.zi, mx.nat, mx.mma, mx.a8t)
		mx.b.dropHostGraphs(mx)
		if mx.coded != nil {
			mx.coded.free()
		}
	})
}

// Kernel names the kernels running the matrix, e.g. "cuda-sm90".
func (mx *Matrix) Kernel() string {
	if mx.coded != nil {
		return fmt.Sprintf("cuda-sm%d-ans-decode", mx.b.arch)
	}
	return fmt.Sprintf("cuda-sm%d", mx.b.arch)
}

// StreamBytes returns the bytes one GEMV reads from the matrix.
func (mx *Matrix) StreamBytes() int64 { return mx.bytes }

// MulF32 computes dst = W x for batch float32 vectors (x: batch*Cols,
// dst: batch*Rows).
func (mx *Matrix) MulF32(dst, x []float32, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	nb, _ := bucket(batch)
	pc := mx.geo.PCols
	r := newReq()
	defer r.free()
	r.host.F = gpuhost.Grow(r.host.F, nb*pc)
	xp := r.host.F
	clear(xp[batch*pc:]) // the bucket's padding vectors
	if err := gpuhost.PadF32(xp[:batch*pc], x, batch, mx.geo.Cols, pc, mx.perm); err != nil {
		return err
	}
	r.mx, r.dst, r.x, r.batch = mx, dst, xp, batch
	return gpuhost.MulScaled(dst, xp, batch, pc, mx.geo.Rows, func() error { // activations far from 1
		return mx.doReq(mulF32Req, r)
	})
}

// mulF32Req is MulF32's work (in a backend call): on tensor cores where the
// matrix runs there and the activations are finite, else with the
// CUDA-core float32 kernels.
func mulF32Req(r *mulReq) error {
	mx := r.mx
	if mx.useMMA() {
		if done, err := mx.mulF32MMA(r); done {
			return err
		}
	}
	return mx.runFloat(r.dst, r.batch, func(b *Backend) (string, error) {
		_, err := putScratch(b, "x", r.x, true)
		return mx.floatKernel("f32", r.batch), err
	})
}

// mulF32MMA multiplies float32 activations (r.x: padded and gathered)
// on tensor cores, 8 vectors per launch: each split into binary16 hi and
// lo vectors (gpuhost.SplitHiLo, slots 2v and 2v+1 of the launch), so
// that y_v = (y_hi + y_lo) * inv[v] in float32 (in a backend call). done is
// false when a vector holds NaN or an infinity: the CUDA-core kernels
// then compute every result (they propagate those as the reference
// does).
func (mx *Matrix) mulF32MMA(r *mulReq) (done bool, err error) {
	rows := mx.geo.Rows
	for v0 := 0; v0 < r.batch; v0 += 8 {
		n := min(8, r.batch-v0)
		name, xsum, ok := mx.prepF32Part(r, r.x, v0, n)
		if !ok {
			return false, nil
		}
		r.y = gpuhost.Grow(r.y, 2*n*rows)
		y := r.y
		if err := mx.runFloat(y, 2*n, func(b *Backend) (string, error) { return name, b.putF16(r.xr, xsum, true) }); err != nil {
			return true, err
		}
		for v := 0; v < n; v++ {
			hi, lo := y[2*v*rows:(2*v+1)*rows], y[(2*v+1)*rows:(2*v+2)*rows]
			out := r.dst[(v0+v)*rows : (v0+v+1)*rows]
			for i := range out {
				out[i] = (hi[i] + lo[i]) * r.inv[v]
			}
		}
	}
	return true, nil
}

// prepF32Part prepares vectors v0..v0+n-1 (n <= 8) of the padded float32
// activations x for one tensor-core launch, into r's memory: each vector
// split into binary16 hi and lo (gpuhost.SplitHiLo, slots 2v and 2v+1;
// r.inv its scale back), in fragment order (r.xr) with the Bits block sums
// (xsum, nil for Q4G128). ok is false when a vector is not finite or out
// of the split's range.
func (mx *Matrix) prepF32Part(r *mulReq, x []float32, v0, n int) (name string, xsum []float32, ok bool) {
	pc := mx.geo.PCols
	nv := mmaSlots(2 * n)
	r.hl, r.inv = gpuhost.Grow(r.hl, nv*pc), gpuhost.Grow(r.inv, n)
	if !gpuhost.SplitHiLoInto(r.hl, r.inv, x[v0*pc:(v0+n)*pc], n, pc, nv) {
		return "", nil, false
	}
	name, k := mx.mmaKernel(nv)
	r.xr = gpuhost.Grow(r.xr, nv*pc)
	if k != 0 {
		r.xsum = gpuhost.Grow(r.xsum, nv*(pc/128))
		xsum = r.xsum
	}
	if err := gpuhost.MMAOrderInto(r.xr, xsum, k, r.hl, 2*n, pc, nv); err != nil {
		return "", nil, false
	}
	return name, xsum, true
}

// MulF16 multiplies binary16 activations; the kernels widen them exactly
// (or, for Q4G128 and Bits 8/4/2 with groups of at least 128 on sm_80 and
// later, multiply them exactly on tensor cores with float32 accumulation).
// The activations go to the device as they are, in one copy; the device
// gathers them into the kernel's order (mulF16Dev).
func (mx *Matrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	r := newReq()
	defer r.free()
	r.mx, r.dst, r.xh, r.batch = mx, dst, x, batch
	return mx.doReq(mulF16Req, r)
}

// MulRoundedF16 multiplies float32 activations rounded to binary16 (to
// nearest even): MulF16 of the rounded values, bit for bit. Where the
// device reads pinned host memory and package cpu installed its F16C
// rounding (layout.HasF16Kernel), the host rounds them into that memory:
// half the bytes to copy and to cross the bus. Otherwise the float32
// values go to the device in one copy and the device rounds them.
func (mx *Matrix) MulRoundedF16(dst, x []float32, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	r := newReq()
	defer r.free()
	r.mx, r.dst, r.x, r.batch = mx, dst, x, batch
	return mx.doReq(mulRoundedReq, r)
}

// mulRoundedReq is MulRoundedF16's work (in a backend call).
func mulRoundedReq(r *mulReq) error {
	mx, b := r.mx, r.mx.b
	if !b.readsPinned(2*int64(len(r.x))) || !layout.HasF16Kernel() {
		return hostGather(r, r.x, false)
	}
	var xp cu.DevicePtr
	put := func() error {
		h, err := b.staging("xin", 2*len(r.x))
		if err != nil {
			return err
		}
		layout.ToFP16s(unsafe.Slice((*layout.FP16)(h.p), len(r.x)), r.x)
		xp = cu.DevicePtr(uintptr(h.p))
		return nil
	}
	return mx.hostCall(r.dst, hostF16, r.batch, false, put, func(y, _ cu.DevicePtr) error { return mx.mulF16Dev(y, xp, true, r.batch, swiIn{}) })
}

// mulF16Req is MulF16's work (in a backend call).
func mulF16Req(r *mulReq) error { return hostGather(r, r.xh, true) }

// hostGather multiplies host activations x (binary16 with half, else
// float32 the gather rounds) through mulF16Dev: one host call (one
// backend call). The gather kernels alone read x, so it may stay in pinned
// memory (pinnedIn).
func hostGather[T any](r *mulReq, x []T, half bool) error {
	mx := r.mx
	var xp cu.DevicePtr
	put := func() (err error) { xp, err = pinnedIn(mx.b, "xin", x); return err }
	op := hostRounded
	if half {
		op = hostF16
	}
	return mx.hostCall(r.dst, op, r.batch, false, put, func(y, _ cu.DevicePtr) error { return mx.mulF16Dev(y, xp, half, r.batch, swiIn{}) })
}

// putF16 puts f16Inputs' activations into the "x" scratch buffer and
// their block sums (when not nil) into "xsum" (in a backend call), through
// pinned staging when staged.
func (b *Backend) putF16(xp []layout.FP16, xsum []float32, staged bool) error {
	return b.putF16As("", xp, xsum, staged)
}

// putF16As is putF16 into the scratch buffers "x"+sfx and "xsum"+sfx.
func (b *Backend) putF16As(sfx string, xp []layout.FP16, xsum []float32, staged bool) error {
	if xsum != nil {
		if _, err := putScratch(b, "xsum"+sfx, xsum, staged); err != nil {
			return err
		}
	}
	_, err := putScratch(b, "x"+sfx, xp, staged)
	return err
}

// useMMA reports whether binary16 multiplies of this matrix run on tensor
// cores (sm_80 and later, unless QGEMV_CUDA_MMA=0): Q4G128, and Bits with
// 8, 4 or 2 bits and groups of at least 128 columns.
func (mx *Matrix) useMMA() bool {
	if mx.b.arch < 80 || mx.b.noMMA {
		return false
	}
	switch mx.f {
	case fmtQ4:
		return true
	case fmtBits:
		return (mx.n == 8 || mx.n == 4 || mx.n == 2) && mx.g >= 128
	}
	return false
}

// f16Inputs returns the kernel for binary16 activations and the
// activations as it reads them: padded (and gathered) vectors; for the
// tensor-core kernels permuted to the order the lanes consume them and
// padded to 8 or 16 vectors, with (Bits) the float32 sums of each
// vector's 128-column blocks.
func (mx *Matrix) f16Inputs(x []layout.FP16, batch int) (string, []layout.FP16, []float32, error) {
	pc, cols := mx.geo.PCols, mx.geo.Cols
	nb, _ := bucket(batch)
	mma := mx.useMMA()
	nv := nb
	if mma {
		nv = mmaSlots(batch)
	}
	xp := make([]layout.FP16, nv*pc)
	if err := gpuhost.Pad(xp[:batch*pc], x, batch, cols, pc, mx.perm); err != nil {
		return "", nil, nil, err
	}
	if !mma {
		return mx.floatKernel("f16", batch), xp, nil, nil
	}
	return mx.mmaInputs(xp, batch, nv)
}

// mmaInputs returns the tensor-core kernel for nv (8 or 16) vector slots
// and its activations: xp (nv padded and gathered vectors, the first batch
// of them used) in the order a warp's fragment loads read them
// (gpuhost.MMAOrder), with the Bits block sums.
func (mx *Matrix) mmaInputs(xp []layout.FP16, batch, nv int) (string, []layout.FP16, []float32, error) {
	name, n := mx.mmaKernel(nv)
	xr, xsum, err := gpuhost.MMAOrder(n, xp, batch, mx.geo.PCols, nv)
	if err != nil {
		return "", nil, nil, err
	}
	return name, xr, xsum, nil
}

// mmaKernel names the tensor-core kernel for nv (8 or 16) vector slots
// and returns the code width gpuhost.MMAOrder takes (0 for Q4G128).
func (mx *Matrix) mmaKernel(nv int) (string, int) {
	kind, n := kMMA8, 0
	if nv == 16 {
		kind = kMMA16
	}
	if mx.f == fmtBits {
		n = mx.n
	}
	return mx.kernelName(kind, 1), n
}

// floatKernel names the float kernel instance for act ("f32", "f16").
func (mx *Matrix) floatKernel(act string, batch int) string {
	nb, _ := bucket(batch)
	if act == "f16" {
		return mx.kernelName(kF16, nb)
	}
	return mx.kernelName(kF32, nb)
}

// Kernel variants of kernels.cu (kernelName).
const (
	kF32 = iota
	kF16
	kA8
	kMMA8
	kMMA16
	kA8MMA8
	kA8MMA16
	nKinds
)

// kernelTab names kernels.cu's kernels by format, Bits width (0 for the
// other formats), variant and batch bucket (1, 4, 16), made once so that
// a multiply formats no name.
var kernelTab = func() (t [3][9][nKinds][3]string) {
	for f, base := range [3]string{fmtQ4: "q4g128", fmtBits: "bits%d", fmtSparse: "sparse12"} {
		for n := range 9 {
			if (format(f) == fmtBits) != (n > 0) {
				continue
			}
			b := base
			if n > 0 {
				b = fmt.Sprintf(base, n)
			}
			for i, nb := range [3]int{1, 4, 16} {
				t[f][n][kF32][i] = fmt.Sprintf("%s_f32_b%d", b, nb)
				t[f][n][kF16][i] = fmt.Sprintf("%s_f16_b%d", b, nb)
				t[f][n][kA8][i] = b + "_a8"
				t[f][n][kMMA8][i] = b + "_mma_n8"
				t[f][n][kMMA16][i] = b + "_mma_n16"
				t[f][n][kA8MMA8][i] = b + "_a8mma_n8"
				t[f][n][kA8MMA16][i] = b + "_a8mma_n16"
			}
		}
	}
	return t
}()

// kernelName returns the matrix's kernel of a variant for a batch
// bucket nb (1, 4 or 16).
func (mx *Matrix) kernelName(kind, nb int) string {
	n, i := 0, 2
	if mx.f == fmtBits {
		n = mx.n
	}
	switch nb {
	case 1:
		i = 0
	case 4:
		i = 1
	}
	return kernelTab[mx.f][n][kind][i]
}

// MulA8 quantizes x to int8 per 128 inputs exactly as layout.QuantizeA8
// does and multiplies with int32 accumulation: bit-exact with every
// backend. The float32 activations go to the device in one copy; the
// device quantizes them (mulA8Dev). A NaN or infinity is an error.
func (mx *Matrix) MulA8(dst, x []float32, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	if mx.a8err != nil {
		return fmt.Errorf("cuda: %w", mx.a8err)
	}
	r := newReq()
	r.mx, r.dst, r.x, r.batch = mx, dst, x, batch
	err := mx.doReq(mulA8Req, r)
	r.free()
	if errors.Is(err, errNonFinite) { // name it, as the host quantizer does
		for i, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("cuda: activation %d (vector %d) is %v", i, i/mx.geo.Cols, v)
			}
		}
	}
	return err
}

// MulI8 multiplies activations already quantized with layout.QuantizeA8
// (in stored column order): xq batch*PCols values, xs batch*PCols/128.
// They go to the device as they are; the device prepares the kernel's
// inputs (mulI8Dev).
func (mx *Matrix) MulI8(dst []float32, xq []int8, xs []float32, batch int) error {
	if err := mx.geo.CheckI8("cuda", len(dst), xq, xs, batch); err != nil {
		return err
	}
	if mx.a8err != nil {
		return fmt.Errorf("cuda: %w", mx.a8err)
	}
	r := newReq()
	defer r.free()
	r.mx, r.dst, r.xq, r.xs, r.batch = mx, dst, xq, xs, batch
	return mx.doReq(mulI8Req, r)
}

// mulA8Req is MulA8's work (in a backend call).
func mulA8Req(r *mulReq) error {
	mx := r.mx
	if done, err := mx.mulA8Host(r); done {
		return err
	}
	var xp cu.DevicePtr // read by the quantization kernel only (pinnedIn)
	put := func() (err error) { xp, err = pinnedIn(mx.b, "xin", r.x); return err }
	return mx.hostCall(r.dst, hostA8, r.batch, true, put, func(y, st cu.DevicePtr) error { return mx.mulA8Dev(y, xp, st, r.batch, swiIn{}) })
}

// EnvHostQuant sets the fewest columns from which a host-slice MulA8
// quantizes its activations on the host (0: never).
const EnvHostQuant = "QGEMV_CUDA_HOSTQUANT"

// hostQuantCols is EnvHostQuant's default. A host-slice MulA8 sends the
// caller's float32 activations over the bus to the quantization kernel;
// quantized on the host (layout.QuantizeA8, an assembly kernel) they
// are a quarter of the bytes, which pays for the host's work on long
// rows only (BENCHMARKS.md, "CUDA through the API").
const hostQuantCols = 8192

// mulA8Host runs r as MulI8 of the activations quantized on the host
// into pinned memory, which the device's preparation reads in place
// (mulI8Dev), and reports whether it did: where the matrix has at least
// b.hostQuant columns, no act-order permutation or padding, int8
// tensor-core kernels and an assembly quantizer. A NaN or infinity
// leaves the call to the device path, which flags it.
func (mx *Matrix) mulA8Host(r *mulReq) (bool, error) {
	b, pc := mx.b, mx.geo.PCols
	n := r.batch * pc
	if b.hostQuant == 0 || pc < b.hostQuant || pc != mx.geo.Cols || mx.perm != nil || !mx.useA8MMA() ||
		!b.readsPinned(int64(n)) || !layout.HasA8Kernel() {
		return false, nil
	}
	hq, err := b.staging("xq8", n)
	if err != nil {
		return true, err
	}
	hs, err := b.staging("xs8", 4*n/layout.GroupSize)
	if err != nil {
		return true, err
	}
	if layout.QuantizeA8(unsafe.Slice((*int8)(hq.p), n), unsafe.Slice((*float32)(hs.p), n/layout.GroupSize), r.x) != nil {
		return false, nil
	}
	b.hostQuantRuns++
	xq, xs := cu.DevicePtr(uintptr(hq.p)), cu.DevicePtr(uintptr(hs.p))
	return true, mx.hostCall(r.dst, hostI8, r.batch, false, func() error { return nil }, func(y, _ cu.DevicePtr) error { return mx.mulI8Dev(y, xq, xs, r.batch) })
}

// mulI8Req is MulI8's work (in a backend call).
func mulI8Req(r *mulReq) error {
	mx := r.mx
	var qb, sb *buffer
	put := func() (err error) {
		if qb, err = putScratch(mx.b, "xin", r.xq, true); err != nil {
			return err
		}
		sb, err = putScratch(mx.b, "xsin", r.xs, true)
		return err
	}
	return mx.hostCall(r.dst, hostQueued, r.batch, false, put, func(y, _ cu.DevicePtr) error { return mx.mulI8Dev(y, qb.ptr, sb.ptr, r.batch) })
}

// a8Inputs returns the int8 activations rearranged for the format's A8
// kernel and their exact per-block sums (nil where the kernel forms them;
// for the tensor-core kernels the per-block words a8_prep writes).
func (mx *Matrix) a8Inputs(xq []int8, xs []float32, batch int) (act [][]int8, sx []int32) {
	if mx.useA8MMA() {
		return mx.a8MMAInputs(xq, xs, batch)
	}
	switch mx.f {
	case fmtQ4: // every 8 columns as (0,2,4,6,1,3,5,7); sums per group of 128
		tab, _ := gpuhost.A8FragOrder(0)
		return [][]int8{stepOrder(xq, tab)}, blockSums(xq, 128)
	case fmtBits: // natural order; sums per block of min(G, 128)
		return [][]int8{xq}, blockSums(xq, min(mx.g, 128))
	}
	// Sparse12: the even and odd column of each pair, in pair order
	e, o := make([]int8, len(xq)/2), make([]int8, len(xq)/2)
	for p := range e {
		e[p], o[p] = xq[2*p], xq[2*p+1]
	}
	return [][]int8{e, o}, nil
}

// a8MMAInputs is a8Inputs for the tensor-core kernels, on the host: the
// activations in fragment order, placed as a8_prep places them (a8XR),
// and, per 128-column block and vector slot, the scale's bits and the
// block's sum (as a8_prep writes them).
func (mx *Matrix) a8MMAInputs(xq []int8, xs []float32, batch int) ([][]int8, []int32) {
	pc := mx.geo.PCols
	tab, _ := gpuhost.A8FragOrder(0) // Q4G128: a8_q4order's arrangement
	if mx.f == fmtBits {
		tab, _ = gpuhost.A8FragOrder(mx.n) // useA8MMA: n is 8, 4 or 2
	}
	nv, nblk := mmaSlots(batch), pc/128
	sums := blockSums(xq, 128)
	xm := make([]int32, 2*nv*nblk)
	for v := 0; v < batch; v++ {
		for k := range nblk {
			xm[2*(k*nv+v)] = int32(math.Float32bits(xs[v*nblk+k]))
			xm[2*(k*nv+v)+1] = sums[v*nblk+k]
		}
	}
	f := stepOrder(xq, tab)
	xr := make([]int8, nv*pc)
	for i, c := range f {
		v, col := i/pc, i%pc
		xr[a8XR(col/128, v, col%128, nv)] = c
	}
	return [][]int8{xr}, xm
}

// a8XR is buffers.cu's a8XR: where byte p (in fragment order) of
// 128-column block blk of vector slot v < nv goes in the int8
// tensor-core kernels' activations.
func a8XR(blk, v, p, nv int) int {
	return blk*nv*128 + (v>>3)*1024 + ((p>>4)&1)*512 + (v&7)*64 + (p>>5)*16 + (p & 15)
}

// stepOrder returns xq rearranged within every step of len(tab) values:
// out[i] = xq[i - i%e + tab[i%e]], e = len(tab) (the order a8_q4order and
// a8_prep write on the device).
func stepOrder(xq []int8, tab []int32) []int8 {
	e := len(tab)
	r := make([]int8, len(xq))
	for i := range r {
		r[i] = xq[i-i%e+int(tab[i%e])]
	}
	return r
}

// blockSums returns the exact int32 sum of every blk consecutive values
// of xq.
func blockSums(xq []int8, blk int) []int32 {
	sx := make([]int32, len(xq)/blk)
	for i, v := range xq {
		sx[i/blk] += int32(v)
	}
	return sx
}

// mmaSlots returns the vector slots of the tensor-core kernels (binary16
// and int8) for batch vectors: 8 or 16.
func mmaSlots(batch int) int {
	if batch > 8 {
		return 16
	}
	return 8
}

// uploadA8 copies the int8 activations (as a8Inputs arranged them), their
// scales and block sums into scratch buffers (in a backend call).
func (b *Backend) uploadA8(act [][]int8, xs []float32, sx []int32) (ptrs []cu.DevicePtr, xsp, sxp cu.DevicePtr, err error) {
	for i, a := range act {
		buf, err := putScratch(b, fmt.Sprintf("xq%d", i), a, true)
		if err != nil {
			return nil, 0, 0, err
		}
		ptrs = append(ptrs, buf.ptr)
	}
	xsb, err := putScratch(b, "xs", xs, true)
	if err != nil {
		return nil, 0, 0, err
	}
	if sx != nil {
		sxb, err := putScratch(b, "sx", sx, true)
		if err != nil {
			return nil, 0, 0, err
		}
		sxp = sxb.ptr
	}
	return ptrs, xsb.ptr, sxp, nil
}

// a8Lead is an A8 kernel's leading arguments: the matrix's buffers and
// the activations' (a8Args).
type a8Lead [6]cu.DevicePtr

// a8Args returns the A8 kernel for batch vectors and its leading
// arguments.
func (mx *Matrix) a8Args(ptrs []cu.DevicePtr, xs, sx cu.DevicePtr, batch int) (string, a8Lead) {
	name := mx.kernelName(kA8, 1)
	if mx.useA8MMA() { // sx: a8_prep's words
		name = mx.kernelName(kA8MMA8, 1)
		if mmaSlots(batch) == 16 {
			name = mx.kernelName(kA8MMA16, 1)
		}
		z := mx.z // Q4G128's packed zero points, Bits' integer ones
		if mx.f == fmtBits {
			z = mx.zi
		}
		return name, a8Lead{mx.w.ptr, mx.s.ptr, z.ptr, ptrs[0], sx, 0}
	}
	switch mx.f {
	case fmtQ4:
		return name, a8Lead{mx.w.ptr, mx.s.ptr, mx.z.ptr, ptrs[0], xs, sx}
	case fmtBits:
		return name, a8Lead{mx.w.ptr, mx.s.ptr, mx.zi.ptr, ptrs[0], xs, sx}
	}
	return name, a8Lead{mx.w.ptr, mx.s.ptr, mx.zi.ptr, ptrs[0], ptrs[1], xs}
}

// runFloat uploads float activations (prep: it returns the kernel),
// launches the kernel and copies the result into dst (in a backend call).
func (mx *Matrix) runFloat(dst []float32, batch int, prep func(*Backend) (string, error)) error {
	b := mx.b
	if mx.coded != nil {
		w, err := mx.decodeWords()
		if err != nil {
			return err
		}
		saved := mx.w
		mx.w = w // prep and the kernels read the decoded words; Close keeps freeing the placeholder
		defer func() { mx.w = saved }()
	}
	name, err := prep(b)
	if err != nil {
		return err
	}
	yb, err := b.scratchBuf("y", 4*int64(len(dst)))
	if err != nil {
		return err
	}
	if err := mx.launch(name, nil, yb.ptr, batch); err != nil {
		_ = cu.Synchronize() // queued copies finish before their staging is reused
		return err
	}
	return b.stagedDownload(yb, dst)
}

// launch runs one multiply's kernels (in a backend call), the activations
// already in the scratch buffers: a float kernel, or with lead an A8
// one, writing y.
func (mx *Matrix) launch(name string, lead *a8Lead, y cu.DevicePtr, batch int) error {
	return mx.launchIn("", name, lead, y, batch)
}

// launchIn is launch with the float activations (and block sums) in the
// scratch buffers "x"+sfx ("xsum"+sfx).
func (mx *Matrix) launchIn(sfx, name string, lead *a8Lead, y cu.DevicePtr, batch int) error {
	b := mx.b
	rows, pc, nb := int64(mx.geo.Rows), int64(mx.geo.PCols), int64(batch)
	if l := lead; l != nil { // A8
		if strings.Contains(name, "_a8mma_") {
			gx := ceilDiv(mx.geo.Rows, 16) // row tiles
			if s, ok := b.a8s[name]; ok && b.a8Single(gx, s.blocks) {
				// about as many tiles as the _s kernel's resident blocks:
				// one tile each, twice the blocks of the others
				// (kernels.cu)
				name = s.name
			} else if p, ok := b.a8p[name]; ok && gx > p.blocks {
				// more tiles than resident blocks: the persistent kernel,
				// every block the same number of tiles (on an H200, batch 1
				// and 4, Q4G128, Bits4 and Bits2 took 0.91-0.94x the time on
				// 14336x4096 and 0.96x on 8192x8192; batch 16 0.95-0.96x
				// and 0.99-1.01x)
				name, gx = p.name, ceilDiv(gx, ceilDiv(gx, p.blocks))
			}
			return b.launch(name, gx, 1, 32*warps, 0, l[0], l[1], l[2], l[3], l[4], y, rows, int64(mx.prows), pc, mx.lg, nb)
		}
		switch mx.f {
		case fmtQ4:
			return b.launch(name, ceilDiv(mx.geo.Rows, warps), 1, 32*warps, 0, l[0], l[1], l[2], l[3], l[4], l[5], y, rows, pc, nb)
		case fmtBits:
			return b.launch(name, ceilDiv(mx.geo.Rows, warpsA8), 1, 32*warpsA8, 0, l[0], l[1], l[2], l[3], l[4], l[5], y, rows, int64(mx.prows), pc, mx.lg, nb)
		}
		return b.launch(name, ceilDiv(mx.geo.Rows, warps), 1, 32*warps, 0, l[0], l[1], l[2], l[3], l[4], l[5], y, rows, int64(mx.prows), pc, mx.lg, nb)
	}
	xb := b.scratch["x"+sfx]
	mma := strings.Contains(name, "_mma_")
	_, rt := bucket(batch)
	gx := ceilDiv(mx.geo.Rows, warps*rt)
	splits := mx.splits(gx)
	if mma {
		gx = ceilDiv(mx.geo.Rows, 16)
		splits = mx.splitsMMA(gx, strings.HasSuffix(name, "_n16"))
	}
	mode := int64(0)
	var ws cu.DevicePtr
	n := int64(batch * mx.geo.Rows)
	if splits > 1 {
		if b.opts.Mode == Atomic {
			mode = 1
			if err := cu.MemsetD32Async(y, 0, n, b.stream); err != nil {
				return fmt.Errorf("cuda: zeroing the output: %w", err)
			}
		} else {
			mode = 2
			wsb, err := b.splitWorkspace(gx, n*int64(splits))
			if err != nil {
				return err
			}
			ws = wsb.ptr
		}
	}
	switch {
	case mma && mx.f == fmtQ4:
		return b.launch(name, gx, splits, 32*warps, 0, mx.w.ptr, mx.s.ptr, mx.z.ptr, xb.ptr, y, ws, rows, pc, nb, mode)
	case mma:
		return b.launch(name, gx, splits, 32*warps, 0, mx.w.ptr, mx.s.ptr, mx.m.ptr, xb.ptr, b.scratch["xsum"+sfx].ptr, y, ws, rows, int64(mx.prows), pc, mx.lg, nb, mode)
	case mx.f == fmtQ4:
		return b.launch(name, gx, splits, 32*warps, 0, mx.w.ptr, mx.s.ptr, mx.z.ptr, pc, xb.ptr, y, ws, rows, nb, mode)
	}
	return b.launch(name, gx, splits, 32*warps, 0, mx.w.ptr, mx.s.ptr, mx.m.ptr, int64(mx.prows), pc, mx.lg, xb.ptr, y, ws, rows, nb, mode)
}

// a8Single reports whether a launch of tiles row tiles, one per block,
// runs the _s kernel of which the device holds blocks at once
// (EnvA8Steps).
func (b *Backend) a8Single(tiles, blocks int) bool {
	switch b.a8steps {
	case "1":
		return tiles <= blocks
	case "2":
		return false
	}
	return tiles <= blocks && 4*tiles >= 3*blocks
}

// useA8MMA reports whether int8 activations run on the int8 tensor
// cores (a8mma in kernels.cu): where the binary16 ones do, but Sparse12.
func (mx *Matrix) useA8MMA() bool { return mx.f != fmtSparse && mx.useMMA() }

// splitWorkspace returns the workspace of a deterministic SplitK launch
// of gx row tiles with n partial results (in a backend call): one counter per
// tile (padded to 64 words), zero before the launch (the kernel's last
// block of a tile resets it), then the partials. b.wsZero tracks how many
// leading words are known to be zero (the counters of the last launch;
// partials of an earlier launch with fewer tiles may lie beyond them), so
// counters are cleared only when a launch needs more of them.
func (b *Backend) splitWorkspace(gx int, n int64) (*buffer, error) {
	cpad := int64(ceilDiv(gx, 64) * 64)
	old := b.scratch["ws"]
	wsb, err := b.scratchBuf("ws", 4*(cpad+n))
	if err != nil {
		return nil, err
	}
	if wsb != old {
		b.wsZero = 0
	}
	if cpad > b.wsZero {
		if err := cu.MemsetD32Async(wsb.ptr+cu.DevicePtr(4*b.wsZero), 0, cpad-b.wsZero, b.stream); err != nil {
			return nil, fmt.Errorf("cuda: zeroing the SplitK counters: %w", err)
		}
	}
	b.wsZero, b.wsUsed = cpad, true
	return wsb, nil
}

// units returns the 16-byte weight units per row the float kernels walk.
func (mx *Matrix) units() int {
	switch mx.f {
	case fmtBits:
		return mx.geo.PCols / (32 * 32 / mx.n) * 8
	}
	return mx.geo.PCols / 32
}

// splits returns the K splits for a grid of gx row blocks: the option,
// or enough to give every SM two blocks, each split at least one step
// of 32*unroll units.
func (mx *Matrix) splits(gx int) int {
	return max(1, min(mx.b.fillSplits(mx.b.opts.Split, gx, 2, 16), mx.units()/(32*unroll)))
}

// splitsMMA is splits for the tensor-core kernels, whose blocks of 8
// warps each take 16 rows and whose warps share out the steps (Q4G128: a
// 128-column group; Bits: a 128-byte chunk): each split keeps at least
// one step per warp. Splitting to reach two blocks per SM pays off for
// the kernels held to 64 registers (four blocks per SM): Q4G128, the
// 8-vector Bits 8/4 kernels and the 16-vector Bits8 kernel. The 16-vector
// Bits4/Bits2 kernels (80-177 registers) and the 8-vector Bits2 kernel
// (76) fill the device once and are not split: a split costs them more
// than it gains (docs/KERNELS.md).
func (mx *Matrix) splitsMMA(gx int, n16 bool) int {
	perSM := 2
	if mx.f == fmtBits && (mx.n == 2 || n16 && mx.n != 8) {
		perSM = 1
	}
	s := mx.b.fillSplits(mx.b.opts.Split, gx, perSM, 16)
	steps := mx.geo.PCols / 128
	if mx.f == fmtBits {
		steps = mx.geo.PCols / (32 * (32 / mx.n))
	}
	return max(1, min(s, steps/warps))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// fillSplits returns the K splits of a launch of gx row blocks before
// the kernel's own limit: opt when not 0 (the option), else enough to
// give every SM perSM blocks, at most most.
func (b *Backend) fillSplits(opt, gx, perSM, most int) int {
	if opt != 0 {
		return opt
	}
	s := 1
	if want := perSM * b.dev.SMs; gx < want {
		s = ceilDiv(want, gx)
	}
	return min(s, most)
}
