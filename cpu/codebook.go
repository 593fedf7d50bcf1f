package cpu

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/codebook"
)

// CBMatrix is a codebook matrix bound to a CPU backend. Its multiply
// builds, per vector, the Psumbook (every segment's inner product with
// every centroid, shared by all rows and threads) and then sums one table
// entry per code and codebook; or, for codebook.Baseline, decodes the
// weights from the centroids and multiplies (the baseline kernel).
type CBMatrix struct {
	b        *Backend
	c        *codebook.Codebook
	dequant  bool
	closed   bool
	mu       sync.RWMutex
	cent     [][]float32 // per codebook: 2^B x V float32 (slices of centFlat)
	centFlat []float32
	centT    [][]float32    // per codebook: V x 2^B float32 (table build)
	scales   []float32      // Groups x PRows float32, group-major
	kern     *cbKernels     // nil: generic Go
	cAbs     float32        // max over codebooks and centroids of sum_e |C[e]|
	i16st    *cbI16         // the int16 64-row kernels' state (see cbI16), built at load (prepareCodes)
	tm       []uint32       // the scalar kernel's tile-major code copy (see tileMajor), built at load on HugePages backends, or nil
	tmBlock  *hugemem.Block // tm's huge-page memory
	// unclosed free the code copies' huge-page memory if the matrix is
	// dropped without Close (as LowMatrix.freeWithBlock does).
	unclosed []runtime.Cleanup
}

// ErrCodebookA8 is returned by the int8 multiplies of codebook matrices;
// it wraps errs.ErrFormatNotImplemented.
var ErrCodebookA8 = fmt.Errorf("cpu: codebook matrices multiply float activations (A32, A16), not int8: %w", errs.ErrFormatNotImplemented)

func init() {
	loaders.Register(layout.FormatCodebook, func(b *Backend, m layout.Matrix) (Mat, error) {
		switch c := m.(type) {
		case codebook.Baseline:
			return mat.Bind(b.LoadCodebook(c.Codebook, true))
		case *codebook.Codebook:
			return mat.Bind(b.LoadCodebook(c, false))
		}
		return nil, fmt.Errorf("cpu: load: %T is not a codebook matrix", m)
	})
}

// MulI32 returns an error: codebook matrices have scales.
func (mx *CBMatrix) MulI32([]int32, []int8, int) error { return noInt32(mx.c.Name()) }

// LoadCodebook validates c and binds it to the backend, with the
// dequantize-then-multiply kernel when dequant is set.
func (b *Backend) LoadCodebook(c *codebook.Codebook, dequant bool) (*CBMatrix, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cc := *c // a snapshot of the fields, as Load takes
	c = &cc
	K, V := 1<<c.B, c.V
	// Building the Psumbook costs 2^B*V multiply-adds per segment and
	// saves one per row: with fewer rows than that (12-bit codes below
	// 16K rows at V = 4) the dequantizing kernel is the faster path, and
	// it needs no per-call tables (58 MB for 12-bit codes on 14336 inputs).
	dequant = dequant || K*V > c.Rows
	mx := &CBMatrix{b: b, c: c, dequant: dequant}
	mx.centFlat = make([]float32, c.M*K*V)
	for i := 0; i < c.M; i++ {
		ce, ct := mx.centFlat[i*K*V:(i+1)*K*V], make([]float32, K*V)
		for q := 0; q < K; q++ {
			var abs float32
			for e := 0; e < V; e++ {
				v := c.Centroid(i, uint32(q), e)
				ce[q*V+e], ct[e*K+q] = v, v
				abs += max(v, -v)
			}
			mx.cAbs = max(mx.cAbs, abs)
		}
		mx.cent, mx.centT = append(mx.cent, ce), append(mx.centT, ct)
	}
	// The scales keep the layout's group-major order (Scale(r, g) is
	// element g*PRows + r); binary16 ones are widened with F16C where the
	// CPU has it (Validate has checked their count and that they are
	// finite).
	mx.scales = make([]float32, c.Groups()*c.PRows)
	if c.FP32 {
		copy(mx.scales, c.Scales32)
	} else {
		layout.FromFP16s(mx.scales, c.Scales16[:len(mx.scales)])
	}
	mx.kern = cbKernelsFor(b)
	mx.prepareCodes()
	for _, blk := range mx.codeBlocks() {
		mx.unclosed = append(mx.unclosed, runtime.AddCleanup(mx, (*hugemem.Block).Free, blk))
	}
	return mx, nil
}

// Kernel names the kernels: e.g. "cpu-avx512vnni-psumbook",
// "cpu-avx2-psumbook-scalar" (scalar table loads instead of gathers) or
// "cpu-generic-dequant".
func (mx *CBMatrix) Kernel() string {
	isa := Generic
	if mx.kern != nil {
		isa = mx.b.set.isa
	}
	switch {
	case mx.dequant:
		return "cpu-" + string(isa) + "-dequant"
	case mx.i16():
		return "cpu-" + string(isa) + "-psumbooki16"
	case mx.f16():
		return "cpu-" + string(isa) + "-psumbook16"
	case mx.scalar():
		return "cpu-" + string(isa) + "-psumbook-scalar"
	}
	return "cpu-" + string(isa) + "-psumbook"
}

// Close releases the matrix; later multiplies return ErrClosed.
func (mx *CBMatrix) Close() error {
	mx.mu.Lock()
	defer mx.mu.Unlock()
	if mx.closed {
		return ErrClosed
	}
	mx.closed = true
	for _, c := range mx.unclosed {
		c.Stop()
	}
	for _, blk := range mx.codeBlocks() {
		blk.Free()
	}
	return nil
}

func (mx *CBMatrix) check(dstLen, xLen, batch int) error {
	if mx.closed {
		return ErrClosed
	}
	if batch < 1 || batch > maxBatch {
		return fmt.Errorf("%w (got %d)", ErrBatch, batch)
	}
	if err := checkLen("x", xLen, batch, mx.c.Cols); err != nil {
		return err
	}
	return checkLen("dst", dstLen, batch, mx.c.Rows)
}

// MulF32 multiplies float32 activations, within codebook.Tolerance of the
// float64 reference.
func (mx *CBMatrix) MulF32(dst, x []float32, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	if err := mx.check(len(dst), len(x), batch); err != nil {
		return err
	}
	if mx.c.PCols == mx.c.Cols { // no padding: the kernels read x in place
		for v := 0; v < batch; v++ {
			mx.mulVec(dst[v*mx.c.Rows:(v+1)*mx.c.Rows], x[v*mx.c.Cols:(v+1)*mx.c.Cols])
		}
		return nil
	}
	xp, put := cbVec(mx.c.PCols)
	defer put()
	for v := 0; v < batch; v++ {
		copy(xp, x[v*mx.c.Cols:(v+1)*mx.c.Cols])
		mx.mulVec(dst[v*mx.c.Rows:(v+1)*mx.c.Rows], xp)
	}
	return nil
}

// MulF16 multiplies binary16 activations, widened exactly.
func (mx *CBMatrix) MulF16(dst []float32, x []layout.FP16, batch int) error {
	mx.mu.RLock()
	defer mx.mu.RUnlock()
	if err := mx.check(len(dst), len(x), batch); err != nil {
		return err
	}
	xp, put := cbVec(mx.c.PCols)
	defer put()
	for v := 0; v < batch; v++ {
		layout.FromFP16s(xp, x[v*mx.c.Cols:(v+1)*mx.c.Cols])
		mx.mulVec(dst[v*mx.c.Rows:(v+1)*mx.c.Rows], xp)
	}
	return nil
}

// MulA8 returns ErrCodebookA8.
func (mx *CBMatrix) MulA8([]float32, []float32, int) error { return ErrCodebookA8 }

// MulI8 returns ErrCodebookA8.
func (mx *CBMatrix) MulI8([]float32, []int8, []float32, int) error { return ErrCodebookA8 }

// cbVecPool recycles the padded activations and the row sums of codebook
// multiplies.
var cbVecPool = sync.Pool{New: func() any { return new([]float32) }}

// cbVec returns n zeroed float32 from cbVecPool and the func that puts
// them back.
func cbVec(n int) ([]float32, func()) {
	b := cbVecPool.Get().(*[]float32)
	*b = grow(*b, n)
	clear(*b)
	return *b, func() { cbVecPool.Put(b) }
}

// f32Pool recycles the float32 Psumbooks between multiplies (every entry
// is rewritten by tables).
var f32Pool = sync.Pool{New: func() any { return new([]float32) }}

// tables builds the Psumbook of every codebook for the padded vector xp
// in buf (grown as needed): tab[i][j*K + q] = sum_e C_i[q][e] * xp[j*V+e].
func (mx *CBMatrix) tables(buf *[]float32, xp []float32) [][]float32 {
	c := mx.c
	K, V, nv := 1<<c.B, c.V, c.NV()
	*buf = grow(*buf, c.M*nv*K) // one allocation: the kernels step between codebooks by a fixed stride
	all := *buf
	tab := make([][]float32, c.M)
	for i := range tab {
		tab[i] = all[i*nv*K : (i+1)*nv*K]
	}
	_ = mx.b.parallelFor(nv, max(1, 65536/K), func(j0, j1 int) error {
		for i := range tab {
			if mx.kern != nil {
				mx.kern.table(mx.centT[i], xp[j0*V:j1*V], tab[i][j0*K:j1*K], j1-j0, K, V)
				continue
			}
			ct := mx.centT[i]
			for j := j0; j < j1; j++ {
				t := tab[i][j*K : (j+1)*K]
				for q := range t {
					var s float32
					for e := 0; e < V; e++ {
						s += ct[e*K+q] * xp[j*V+e]
					}
					t[q] = s
				}
			}
		}
		return nil
	})
	return tab
}

// mulVec computes one vector's product into dst (Rows values).
func (mx *CBMatrix) mulVec(dst, xp []float32) {
	c := mx.c
	acc, put := cbVec(c.PRows)
	defer put()
	var tab [][]float32
	if !mx.dequant && !mx.f16() && !mx.scalar() {
		buf := f32Pool.Get().(*[]float32)
		defer f32Pool.Put(buf)
		tab = mx.tables(buf, xp)
	}
	if mx.kern != nil {
		mx.mulSIMD(acc, xp, tab)
		copy(dst, acc[:c.Rows])
		return
	}
	V, K, spg := c.V, 1<<c.B, c.G/c.V
	mx.b.parallelRows(c.Rows, c.PCols/4, func(r0, r1 int) {
		for r := r0; r < r1; r++ {
			var sum float32
			for g := 0; g < c.Groups(); g++ {
				var gs float32
				for j := g * spg; j < (g+1)*spg; j++ {
					for i := 0; i < c.M; i++ {
						q := int(c.Code(r, i, j))
						if mx.dequant {
							for e := 0; e < V; e++ {
								gs += mx.cent[i][q*V+e] * xp[j*V+e]
							}
						} else {
							gs += tab[i][j*K+q]
						}
					}
				}
				sum += mx.scales[g*c.PRows+r] * gs
			}
			acc[r] = sum
		}
	})
	copy(dst, acc[:c.Rows])
}
