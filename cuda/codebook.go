//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"os"

	"gorgonia.org/cu"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/codebook"
)

// Codebook kernels (cuda/codebook.cu). Launch geometry: cbWarps warps per
// block, one 32-row tile per warp; the Psumbook of a block's chunk of
// segments lives in at most cbShared bytes of shared memory (the limit a
// kernel gets without opting in to more, so up to four blocks share an
// SM); a split of K covers at least cbMinSegs segments.
const (
	cbWarps   = 8
	cbShared  = 48 << 10
	cbMinSegs = 32
	cbMaxSplt = 32

	cbGlobalTable = 256 << 20
)

// EnvPsumbook selects where the codebook kernels keep the Psumbook:
// "shared" (built per block and chunk of columns in shared memory) or
// "global" (built once per call by a first kernel in global memory, then
// gathered through L1/L2). Unset: shared for batch 1 with at most 256
// table entries per segment (one 8-bit codebook), global otherwise (at
// batch 16 a 48 KiB block holds only 2-3 segments of 16 tables), the
// faster of the two in each case on an H200 (docs/KERNELS.md).
const EnvPsumbook = "QGEMV_CUDA_PSUMBOOK"

// ErrCodebookA8 is returned by the int8 multiplies of codebook matrices:
// codebooks have no exact int8 definition (as on the CPU).
var ErrCodebookA8 = fmt.Errorf("cuda: codebook matrices multiply float activations (A32, A16), not int8: %w", errs.ErrFormatNotImplemented)

func init() {
	loaders.Register(layout.FormatCodebook, func(b *Backend, m layout.Matrix) (Mat, error) {
		switch t := m.(type) {
		case *codebook.Codebook:
			return mat.Bind(b.loadCodebook(t, false))
		case codebook.Baseline:
			return mat.Bind(b.loadCodebook(t.Codebook, true))
		}
		return nil, fmt.Errorf("cuda: load: %T is not a codebook matrix", m)
	})
	var names []string
	for _, k := range []string{"cb_psum", "cb_psumg", "cb_deqs", "cb_deqg", "cb_table"} {
		for _, nb := range []int{1, 4, 16} {
			names = append(names, fmt.Sprintf("%s_b%d", k, nb))
		}
	}
	addKernels(names...)
}

// CBMatrix is a codebook matrix (layout/codebook) resident on the device:
// the code words as stored, the centroids and scales widened to float32.
// Its float multiplies run the Psumbook kernels (or, loaded as
// codebook.Baseline, the dequantize-then-multiply kernels), within
// codebook.Tolerance of the float64 reference: float32 tables and
// accumulation.
type CBMatrix struct {
	handle
	name     string
	geo      gpuhost.Geometry
	prows    int
	m, v, nb int // codebooks, vector length, bits per code
	spg      int // segments (vectors of V columns) per scale group
	dequant  bool
	table    string // EnvPsumbook: "shared", "global" or "" (measured choice)
	bytes    int64

	w, cent, s *buffer
}

// loadCodebook validates c and uploads it; dequant selects the baseline.
func (b *Backend) loadCodebook(c *codebook.Codebook, dequant bool) (*CBMatrix, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("cuda: load: %w", err)
	}
	mode := os.Getenv(EnvPsumbook)
	if mode != "" && mode != "shared" && mode != "global" {
		return nil, fmt.Errorf("cuda: %s=%q: want shared or global", EnvPsumbook, mode)
	}
	name := c.Name()
	if dequant {
		name = codebook.Baseline{Codebook: c}.Name()
	}
	mx := &CBMatrix{handle: handle{b: b}, name: name, geo: gpuhost.GeometryOf(c), prows: c.PRows, m: c.M, v: c.V, nb: c.B,
		spg: c.G / c.V, dequant: dequant, table: mode, bytes: c.StreamBytes()}
	k := 1 << c.B
	cent := make([]float32, c.M*k*c.V)
	for i := 0; i < c.M; i++ {
		for q := 0; q < k; q++ {
			for e := 0; e < c.V; e++ {
				cent[(i*k+q)*c.V+e] = c.Centroid(i, uint32(q), e)
			}
		}
	}
	scales := make([]float32, c.Groups()*c.PRows)
	for g := 0; g < c.Groups(); g++ {
		for r := 0; r < c.PRows; r++ {
			scales[g*c.PRows+r] = c.Scale(r, g)
		}
	}
	err := b.do(func() error {
		return uploadAll(into(&mx.w, c.Words), into(&mx.cent, cent), into(&mx.s, scales))
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: load %s: %w", name, err)
	}
	return mx, nil
}

// Close frees the device memory; later multiplies return ErrClosed, and
// so does a second Close.
func (mx *CBMatrix) Close() error {
	if mx == nil || mx.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	return mx.close(func() { freeAll(mx.w, mx.cent, mx.s) })
}

// Kernel names the kernel family, e.g. "cuda-sm90-psumbook" (Psumbook in
// shared or global memory, chosen per batch; shared when forced by
// EnvPsumbook), "cuda-sm90-psumbook-global" (forced) or
// "cuda-sm90-dequant".
func (mx *CBMatrix) Kernel() string {
	switch {
	case mx.dequant:
		return fmt.Sprintf("cuda-sm%d-dequant", mx.b.arch)
	case mx.table == "global":
		return fmt.Sprintf("cuda-sm%d-psumbook-global", mx.b.arch)
	}
	return fmt.Sprintf("cuda-sm%d-psumbook", mx.b.arch)
}

// StreamBytes returns the bytes one GEMV reads from the matrix.
func (mx *CBMatrix) StreamBytes() int64 { return mx.bytes }

// MulF32 computes dst = W x for batch float32 vectors (x: batch*Cols,
// dst: batch*Rows).
func (mx *CBMatrix) MulF32(dst, x []float32, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	xp, nb := mx.padded(batch)
	if err := gpuhost.PadF32(xp[:batch*mx.geo.PCols], x, batch, mx.geo.Cols, mx.geo.PCols, nil); err != nil {
		return err
	}
	return gpuhost.MulScaled(dst, xp, batch, mx.geo.PCols, mx.geo.Rows, func() error { // activations far from 1, as Matrix.MulF32
		return mx.run(dst, xp, batch, nb)
	})
}

// MulF16 multiplies binary16 activations, widened exactly to float32.
func (mx *CBMatrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	if err := mx.geo.CheckF32("cuda", len(dst), len(x), batch); err != nil {
		return err
	}
	xp, nb := mx.padded(batch)
	if err := gpuhost.PadF16(xp[:batch*mx.geo.PCols], x, batch, mx.geo.Cols, mx.geo.PCols, nil); err != nil {
		return err
	}
	return mx.run(dst, xp, batch, nb)
}

// MulA8 returns ErrCodebookA8.
func (mx *CBMatrix) MulA8([]float32, []float32, int) error { return ErrCodebookA8 }

// MulI32 returns an error: codebooks have scales.
func (mx *CBMatrix) MulI32([]int32, []int8, int) error {
	return fmt.Errorf("cuda: codebook: exact int32 products are for the int8 formats: %w", errs.ErrFormatNotImplemented)
}

// MulI8 returns ErrCodebookA8.
func (mx *CBMatrix) MulI8([]float32, []int8, []float32, int) error { return ErrCodebookA8 }

// globalTable reports whether a multiply of batch vectors builds the
// Psumbook in global memory (see EnvPsumbook for the rule).
func (mx *CBMatrix) globalTable(batch int) bool {
	switch mx.table {
	case "global":
		return true
	case "shared":
		return false
	}
	if int64(mx.nsegs()*mx.m)*(4<<mx.nb) > cbGlobalTable {
		// Even one vector's table is past the bound (12-bit codes on tens
		// of thousands of columns; 2^22 columns allocated 64 GiB): the
		// shared-memory kernel, whose one-segment table always fits at
		// one vector per launch.
		return false
	}
	return batch > 1 || mx.m<<mx.nb > 256
}

// group returns the vectors one launch computes (the kernel instance: 1,
// 4 or 16): the batch's bucket, made smaller while one segment's
// Psumbook (M codebooks x 2^B entries) for that many vectors would not fit
// the shared memory, or (global Psumbook) the whole row's would exceed
// cbGlobalTable bytes.
func (mx *CBMatrix) group(batch int) int {
	nb, _ := bucket(batch)
	switch {
	case mx.dequant:
	case mx.globalTable(batch): // the table of the whole row: at most cbGlobalTable bytes
		for nb > 1 && int64(nb*mx.nsegs()*mx.m)*(4<<mx.nb) > cbGlobalTable {
			nb /= 4
		}
	default:
		for nb > 1 && nb*(mx.m<<mx.nb+mx.v)*4 > cbShared {
			nb /= 4
		}
	}
	return nb
}

// padded returns a zeroed activation buffer for batch vectors, rounded up
// to whole launch groups, and the group size.
func (mx *CBMatrix) padded(batch int) ([]float32, int) {
	nb := mx.group(batch)
	return make([]float32, ceilDiv(batch, nb)*nb*mx.geo.PCols), nb
}

// run uploads the padded activations xp, launches the multiply in groups
// of nb vectors and copies the result into dst.
func (mx *CBMatrix) run(dst, xp []float32, batch, nb int) error {
	return mx.do(func() error {
		b := mx.b
		xb, err := putScratch(b, "cbx", xp, false)
		if err != nil {
			return err
		}
		yb, err := b.scratchBuf("cby", 4*int64(len(dst)))
		if err != nil {
			return err
		}
		if err := mx.launch(xb, yb, batch, nb); err != nil {
			return err
		}
		return download(yb, dst)
	})
}

// nsegs returns the segments (vectors of V columns) of a row.
func (mx *CBMatrix) nsegs() int { return mx.geo.PCols / mx.v }

// splits returns the K splits for gx row blocks: enough blocks for four
// per SM, each split at least cbMinSegs segments.
func (mx *CBMatrix) splits(gx int) int {
	return max(1, min(mx.b.fillSplits(0, gx, 4, cbMaxSplt), mx.nsegs()/cbMinSegs))
}

// kernel returns the gemv kernel for a group of nb vectors and its
// dynamic shared memory and chunk (segments per Psumbook build).
func (mx *CBMatrix) kernel(nb int, global bool) (name string, shmem, chunk int) {
	k := 1 << mx.nb
	switch {
	case mx.dequant && mx.m*k*mx.v*4 <= cbShared:
		return fmt.Sprintf("cb_deqs_b%d", nb), mx.m * k * mx.v * 4, 0
	case mx.dequant:
		return fmt.Sprintf("cb_deqg_b%d", nb), 0, 0
	case global:
		return fmt.Sprintf("cb_psumg_b%d", nb), 0, 0
	}
	row := nb * (mx.m*k + mx.v) * 4 // one segment's table and staged activations
	chunk = max(1, cbShared/row)
	return fmt.Sprintf("cb_psum_b%d", nb), chunk * row, chunk
}

// launch runs one multiply (in a backend call): per group of nb vectors, the
// global Psumbook build when used, the gemv kernel and, when K is split,
// the deterministic reduction of the partials.
func (mx *CBMatrix) launch(xb, yb *buffer, batch, nb int) error {
	b := mx.b
	rows, pc := mx.geo.Rows, mx.geo.PCols
	gx := ceilDiv(mx.prows/32, cbWarps)
	splits := mx.splits(gx)
	global := mx.globalTable(batch) && !mx.dequant
	name, shmem, chunk := mx.kernel(nb, global)
	k := 1 << mx.nb
	var tab, ws cu.DevicePtr
	if global {
		tb, err := b.scratchBuf("cbtab", 4*int64(mx.nsegs()*mx.m*k*nb))
		if err != nil {
			return err
		}
		tab = tb.ptr
	}
	if splits > 1 {
		wb, err := b.scratchBuf("cbws", 4*int64(splits*nb*rows))
		if err != nil {
			return err
		}
		ws = wb.ptr
	}
	for v0 := 0; v0 < batch; v0 += nb {
		cnt := min(nb, batch-v0)
		x := xb.ptr + cu.DevicePtr(4*v0*pc)
		y := yb.ptr + cu.DevicePtr(4*v0*rows)
		if tab != 0 {
			n := mx.nsegs() * mx.m * k
			if err := b.launch(fmt.Sprintf("cb_table_b%d", nb), ceilDiv(n, 256), 1, 256, 0,
				mx.cent.ptr, x, tab, int64(pc), int64(mx.m), int64(mx.v), int64(mx.nb)); err != nil {
				return err
			}
		}
		if err := b.launch(name, gx, splits, 32*cbWarps, shmem,
			mx.w.ptr, mx.cent.ptr, mx.s.ptr, x, tab, y, ws, int64(rows), int64(mx.prows), int64(pc),
			int64(mx.m), int64(mx.v), int64(mx.nb), int64(mx.spg), int64(cnt), int64(chunk)); err != nil {
			return err
		}
		if splits > 1 {
			n := cnt * rows
			if err := b.launch("split_reduce", ceilDiv(n, 256), 1, 256, 0, y, ws, int64(n), int64(splits)); err != nil {
				return err
			}
		}
	}
	return nil
}

// TimeCodebook times iters multiplies launched back to back, rotating over
// mats (one shape and format; give enough of them that their bytes exceed
// the L2 cache), with activation type act ("A32" or "A16": the kernels
// read float32 either way) and the given batch. The activations are
// random and uploaded once: the time is the kernels'. Bytes counts the
// matrix, the float32 activations and the results.
func TimeCodebook(mats []*CBMatrix, act string, batch, iters int) (Timing, error) {
	if act != "A32" && act != "A16" {
		return Timing{}, fmt.Errorf("cuda: TimeCodebook: activation %q (want A32 or A16)", act)
	}
	same := func(m, m0 *CBMatrix) bool {
		return m.b == m0.b && m.geo == m0.geo && m.name == m0.name && m.table == m0.table
	}
	if err := checkTimed("TimeCodebook", mats, iters, batch, same, "backend, shape, format or kernel"); err != nil {
		return Timing{}, err
	}
	m0 := mats[0]
	rng := rand.New(rand.NewPCG(1, 2))
	xp, nb := m0.padded(batch)
	pc, rows := m0.geo.PCols, m0.geo.Rows
	for v := 0; v < batch; v++ {
		for c := 0; c < m0.geo.Cols; c++ {
			f := float32(rng.NormFloat64())
			if act == "A16" {
				f = layout.ToFP16(f).Float32()
			}
			xp[v*pc+c] = f
		}
	}
	var xb, yb *buffer
	prep := func(b *Backend) (err error) {
		if xb, err = putScratch(b, "cbx", xp, false); err != nil {
			return err
		}
		yb, err = b.scratchBuf("cby", 4*int64(batch*rows))
		return err
	}
	bytes := m0.bytes + 4*int64(batch*pc) + 4*int64(batch*rows)
	return timeRotating(mats, iters, bytes, prep, func(m *CBMatrix) error { return m.launch(xb, yb, batch, nb) })
}
