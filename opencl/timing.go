//go:build opencl

package opencl

import (
	"fmt"
	"math/rand/v2"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/layout"
)

// TimeGEMV returns the device seconds per multiply of the matrices' own
// kernels: iters multiplies back to back, rotating over mats (matrices
// of one backend, shape and format), with activation act ("A32", "A16"
// or "A8") and batch, timed by profiling events. The activations (random
// values) are prepared and uploaded once, as Mul prepares them, so only
// the launches are timed. Codebook and entropy-coded matrices are an
// error.
func TimeGEMV(mats []*Matrix, act string, batch, iters int) (float64, error) {
	if len(mats) == 0 || iters < 1 || iters > gpuhost.MaxIters {
		return 0, fmt.Errorf("opencl: TimeGEMV: %d matrices, %d iterations", len(mats), iters)
	}
	if batch < 1 || batch > errs.MaxBatch {
		return 0, fmt.Errorf("opencl: TimeGEMV: %w (got %d)", ErrBatch, batch)
	}
	m0 := mats[0]
	for i, m := range mats {
		if m == nil || m.b != m0.b || m.geo != m0.geo || m.m.Name() != m0.m.Name() {
			return 0, fmt.Errorf("opencl: TimeGEMV: matrix %d differs from matrix 0 in backend, shape or format", i)
		}
		if m.isClosed() {
			return 0, fmt.Errorf("opencl: TimeGEMV: matrix %d: %w", i, ErrClosed)
		}
	}
	if m0.cb != nil || m0.coded != nil {
		return 0, fmt.Errorf("opencl: TimeGEMV: %s runs more than its multiply kernels (codebook tables or a decode)", m0.m.Name())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	cols, pc := m0.geo.Cols, m0.geo.PCols
	x := make([]float32, batch*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if act == "A16" {
			x[i] = layout.ToFP16(x[i]).Float32()
		}
	}
	var xf []float32
	var xq []int8
	var xs []float32
	switch act {
	case "A32", "A16":
		xf = make([]float32, batch*pc)
		if err := gpuhost.PadF32(xf, x, batch, cols, pc, m0.perm); err != nil {
			return 0, err
		}
	case "A8":
		if m0.a8err != nil {
			return 0, fmt.Errorf("opencl: TimeGEMV: %w", m0.a8err)
		}
		var err error
		if xq, xs, err = gpuhost.QuantizeA8("opencl", x, batch, cols, pc, m0.perm); err != nil {
			return 0, err
		}
	default:
		return 0, fmt.Errorf("opencl: TimeGEMV: activation %q, want A32, A16 or A8", act)
	}
	b := m0.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, ErrClosed
	}
	float, err := m0.prepare(xf, xq, xs, batch)
	if err != nil {
		return 0, err
	}
	evs := make([]*event, 0, iters)
	for it := 0; it < iters; it++ {
		m := mats[it%len(mats)]
		if m.isClosed() {
			releaseEvents(evs)
			return 0, fmt.Errorf("opencl: TimeGEMV: matrix %d: %w", it%len(mats), ErrClosed)
		}
		ev, err := m.launch(b.scratch(), float, batch, true)
		if err != nil {
			releaseEvents(evs)
			return 0, err
		}
		evs = append(evs, ev)
	}
	total, err := b.finishEvents(evs)
	if err != nil {
		return 0, err
	}
	return total / float64(iters), nil
}
