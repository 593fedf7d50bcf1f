//go:build opencl

package opencl

import (
	_ "embed"
	"fmt"
	"os"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/layout/codebook"
)

//go:embed codebook.cl
var codebookSource string

// EnvPsumbook selects where the codebook kernels keep the Psumbook:
// "local" (built per work-group and chunk of segments in local memory)
// or "global" (built once per call by a first kernel into a global
// buffer). Unset, local is used for batch 1 with at most 256 table
// entries per segment when the chunk fits the local memory, global
// otherwise (the rule the CUDA backend measured on an H200: a
// work-group's own table only pays off while it is small).
const EnvPsumbook = "QGEMV_OPENCL_PSUMBOOK"

// ErrCodebookA8 is returned by the int8 multiplies of codebook matrices:
// codebooks have no exact int8 definition (as on the CPU).
var ErrCodebookA8 = fmt.Errorf("opencl: codebook matrices multiply float activations (A32, A16), not int8: %w", errs.ErrFormatNotImplemented)

// Codebook launch parameters: cbLocal bounds the local memory a
// work-group's Psumbook chunk (or, dequantizing, its codebooks) takes;
// cbGlobalTable bounds the global Psumbook; a column split covers at
// least cbMinSegs segments and there are at most cbMaxSplits.
const (
	cbLocal       = 32 << 10
	cbGlobalTable = 256 << 20
	cbMinSegs     = 32
	cbMaxSplits   = 32
)

// Codebook kernel modes (codebook.cl).
const (
	cbModeLocal  = 0 // Psumbook in local memory
	cbModeGlobal = 1 // Psumbook in global memory (cb_table first)
	cbModeDeqL   = 2 // dequantize, codebooks in local memory
	cbModeDeqG   = 3 // dequantize, codebooks in global memory
)

var cbKernelNames = [4]string{"cb_psum", "cb_psumg", "cb_deqs", "cb_deqg"}

// cbMatrix is the codebook part of a Matrix: the code words are mx.w,
// centroids (M x 2^B x V) and scales (Groups x PRows) widened to float32
// in mx.sp and mx.zp.
type cbMatrix struct {
	c       *codebook.Codebook
	dequant bool   // codebook.Baseline: the dequantize-then-multiply kernels
	table   string // EnvPsumbook at load: "local", "global" or ""
	splits  int    // forced column splits (tests; 0: chosen per launch)
}

// cbParts returns the device arrays of a codebook matrix: code words,
// float32 centroids and float32 scales.
func cbParts(c *codebook.Codebook) (words []uint32, cent, scales []float32) {
	k := 1 << c.B
	cent = make([]float32, c.M*k*c.V)
	for i := 0; i < c.M; i++ {
		for q := 0; q < k; q++ {
			for e := 0; e < c.V; e++ {
				cent[(i*k+q)*c.V+e] = c.Centroid(i, uint32(q), e)
			}
		}
	}
	scales = make([]float32, c.Groups()*c.PRows)
	for g := 0; g < c.Groups(); g++ {
		for r := 0; r < c.PRows; r++ {
			scales[g*c.PRows+r] = c.Scale(r, g)
		}
	}
	return c.Words, cent, scales
}

func newCBMatrix(c *codebook.Codebook, dequant bool) (*cbMatrix, error) {
	mode := os.Getenv(EnvPsumbook)
	if mode != "" && mode != "local" && mode != "global" {
		return nil, fmt.Errorf("opencl: %s=%q: want local or global", EnvPsumbook, mode)
	}
	return &cbMatrix{c: c, dequant: dequant, table: mode}, nil
}

// srcKernel returns kernel name of the program built from src (tag names
// the source in the program map) for batch bound nb, and its work-group
// size: the largest power of two up to want the device allows. b.mu is
// held.
func (b *Backend) srcKernel(tag, src, name string, nb, want int) (*kernel, int, error) {
	opts := fmt.Sprintf("%s -DNB=%d", b.std, nb)
	key := tag + "\x00" + opts
	ps := b.progs[key]
	if ps == nil {
		p, err := b.buildCached(src, opts)
		if err != nil {
			return nil, 0, err
		}
		ps = b.addProgram(key, p)
	}
	return b.progKernel(ps, name, want)
}

// cbPlan is how one multiply of a codebook matrix runs.
type cbPlan struct {
	mode int
	nb   int // vectors per launch (the program's NB)
	cs   int // segments per local Psumbook chunk (mode local)
	loc  int // local memory bytes
}

// localBudget returns the local memory a codebook work-group may use.
func (b *Backend) localBudget() int {
	l := int(b.x.dev.info.LocalMem) - 1024
	return max(0, min(l, cbLocal))
}

// plan chooses the kernel mode and launch grouping for batch vectors.
func (cb *cbMatrix) plan(b *Backend, batch int) cbPlan {
	c := cb.c
	k := 1 << c.B
	budget := b.localBudget()
	nb := nbBucket(batch)
	if cb.dequant {
		if c.M*k*c.V*4 <= budget {
			return cbPlan{mode: cbModeDeqL, nb: nb, loc: c.M * k * c.V * 4}
		}
		return cbPlan{mode: cbModeDeqG, nb: nb}
	}
	local := cb.table == "local" || (cb.table == "" && nb == 1 && c.M*k <= 256)
	if local {
		n := nb
		for n > 1 && n*(c.M*k+c.V)*4 > budget {
			n /= 2
		}
		if row := n * (c.M*k + c.V) * 4; row <= budget {
			cs := min(budget/row, c.NV())
			return cbPlan{mode: cbModeLocal, nb: n, cs: cs, loc: cs * row}
		}
	}
	n := nb
	for n > 1 && int64(n*c.NV()*c.M*k)*4 > min(cbGlobalTable, b.x.dev.info.MaxAlloc) {
		n /= 2
	}
	if int64(n*c.NV()*c.M*k)*4 > min(cbGlobalTable, b.x.dev.info.MaxAlloc) {
		// a table this large costs more than decoding the weights
		return cbPlan{mode: cbModeDeqG, nb: nb}
	}
	return cbPlan{mode: cbModeGlobal, nb: n}
}

// cbSplits returns the column splits for gx work-groups of row tiles:
// enough work-groups for four per compute unit, each split at least
// cbMinSegs segments.
func (cb *cbMatrix) cbSplits(b *Backend, gx int) int {
	if cb.splits > 0 {
		return cb.splits
	}
	s := 1
	if want := 4 * b.x.dev.info.ComputeUnits; gx < want {
		s = (want + gx - 1) / gx
	}
	return max(1, min(s, cbMaxSplits, cb.c.NV()/cbMinSegs))
}

// cbKernelName names the codebook kernel family.
func (mx *Matrix) cbKernelName() string {
	base := "opencl-" + mx.b.ShortName()
	// A Psumbook larger than the global-table budget even for one vector
	// runs the dequantizing kernel (plan), whatever the batch.
	if mx.cb.dequant || mx.cb.plan(mx.b, 1).mode == cbModeDeqG {
		return base + "-dequant"
	}
	if mx.cb.table == "global" {
		return base + "-psumbook-global"
	}
	return base + "-psumbook"
}

// runCB runs one codebook multiply of batch padded float32 vectors xf
// (batch*PCols) into dst (batch*Rows). b.mu is held.
func (mx *Matrix) runCB(dst, xf []float32, batch int) error {
	b := mx.b
	if err := put(b, &b.xf, xf); err != nil {
		return err
	}
	if _, err := b.ensure(&b.y, 4*batch*mx.geo.Rows, false); err != nil {
		return err
	}
	if _, err := mx.launchCB(batch, false); err != nil {
		return err
	}
	return b.x.read(b.y, 0, ptr(dst), 4*batch*mx.geo.Rows)
}

// launchCB enqueues one multiply of the activations in b.xf into b.y:
// per group of the plan's vectors, the global Psumbook build when used,
// the GEMV kernel and, when the columns are split, the reduction. With
// ev set it returns the launches' profiling events. b.mu is held.
func (mx *Matrix) launchCB(batch int, ev bool) ([]*event, error) {
	b, cb, c := mx.b, mx.cb, mx.cb.c
	p := cb.plan(b, batch)
	kern, wg, err := b.srcKernel("codebook", codebookSource, cbKernelNames[p.mode], p.nb, 256)
	if err != nil {
		return nil, err
	}
	if wg < 32 {
		return nil, fmt.Errorf("opencl: %s: kernel %s runs at most %d work-items per group, want 32", b.x.dev.info.Name, kern.name, wg)
	}
	rows, pc, k := mx.geo.Rows, mx.geo.PCols, 1<<c.B
	gx := (c.PRows + wg - 1) / wg
	splits := cb.cbSplits(b, gx)
	var tab *buffer
	if p.mode == cbModeGlobal {
		if tab, err = b.ensure(&b.cbTab, 4*c.NV()*c.M*k*p.nb, false); err != nil {
			return nil, err
		}
	} else if tab, err = b.ensure(&b.cbTab, 16, false); err != nil {
		return nil, err
	}
	ws, err := b.ensure(&b.cbWS, 4*splits*p.nb*rows, false)
	if err != nil {
		return nil, err
	}
	var evs []*event
	add := func(e *event, err error) error {
		if e != nil {
			evs = append(evs, e)
		}
		return err
	}
	for v0 := 0; v0 < batch; v0 += p.nb {
		cnt := min(p.nb, batch-v0)
		xoff, yoff := int32(v0*pc), int32(v0*rows)
		if p.mode == cbModeGlobal {
			tk, twg, err := b.srcKernel("codebook", codebookSource, "cb_table", p.nb, 256)
			if err != nil {
				return evs, err
			}
			n := c.NV() * c.M * k
			if err := tk.setArgs(mem(mx.sp), mem(b.xf), mem(tab), i32(pc), i32(c.M), i32(c.V), i32(c.B), i32(cnt), i32(xoff)); err != nil {
				return evs, err
			}
			if err := add(b.x.launch(tk, (n+twg-1)/twg*twg, twg, ev)); err != nil {
				return evs, err
			}
		}
		if err := kern.setArgs(mem(mx.w), mem(mx.sp), mem(mx.zp), mem(b.xf), mem(tab), mem(b.y), mem(ws), i32(rows), i32(c.PRows), i32(pc),
			i32(c.M), i32(c.V), i32(c.B), i32(c.G/c.V), i32(cnt), i32(p.cs), i32(splits), i32(xoff), i32(yoff),
			localBytes(p.loc)); err != nil {
			return evs, err
		}
		if err := add(b.x.launch(kern, gx*splits*wg, wg, ev)); err != nil {
			return evs, err
		}
		if splits > 1 {
			rk, rwg, err := b.srcKernel("codebook", codebookSource, "cb_reduce", p.nb, 256)
			if err != nil {
				return evs, err
			}
			n := cnt * rows
			if err := rk.setArgs(mem(ws), mem(b.y), i32(n), i32(splits), i32(yoff)); err != nil {
				return evs, err
			}
			if err := add(b.x.launch(rk, (n+rwg-1)/rwg*rwg, rwg, ev)); err != nil {
				return evs, err
			}
		}
	}
	return evs, nil
}

// cbOf returns the codebook matrix of m (a *codebook.Codebook or a
// codebook.Baseline) and whether it runs the dequantizing baseline.
func cbOf(m any) (*codebook.Codebook, bool) {
	switch m := m.(type) {
	case *codebook.Codebook:
		return m, false
	case codebook.Baseline:
		return m.Codebook, true
	}
	return nil, false
}
