package qgemv

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/qgemv/qgemv/dispatch"
	"github.com/qgemv/qgemv/layout"
)

// Chain runs a MatVANS chain: v_i = round_half_even(alpha[i] * W_i
// v_{i-1}) clamped to int8 (layout.Requantize), from v0 through mats in
// order, and writes the last v into dst. The matrices are int8 formats
// (layout.Int8, ans.Matrix) loaded on this engine, each with as many
// columns as the previous one has rows (the first: len(v0)); dst has the
// last one's rows. On GPU backends the whole chain runs on the device,
// with one copy in and one out.
func (e *Engine) Chain(dst []int8, mats []*Matrix, alpha []float32, v0 []int8) error {
	if e == nil || e.be == nil {
		return ErrInvalid
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	if len(mats) == 0 || len(alpha) != len(mats) {
		return fmt.Errorf("qgemv: chain: %d matrices and %d scales, want at least one matrix and one scale each", len(mats), len(alpha))
	}
	// Read-lock each distinct matrix once for the whole chain (a matrix
	// may appear more than once; locking it twice could deadlock against
	// a Close waiting between the two), in address order: two chains over
	// the same matrices in other orders, each racing a Close, cannot then
	// wait on each other (as the buffer operations lock their buffers).
	var held []*Matrix
	for i, m := range mats {
		if m == nil || m.e != e {
			return fmt.Errorf("qgemv: chain: matrix %d is nil or loaded on another engine", i)
		}
		if !slices.Contains(held, m) {
			held = append(held, m)
		}
	}
	slices.SortFunc(held, func(x, y *Matrix) int {
		return cmp.Compare(uintptr(unsafe.Pointer(x)), uintptr(unsafe.Pointer(y)))
	})
	for _, m := range held {
		m.mu.RLock()
		if chainLocked != nil {
			chainLocked(m)
		}
	}
	defer func() {
		for _, m := range held {
			m.mu.RUnlock()
		}
	}()
	n, width := len(v0), len(v0)
	dm := make([]dispatch.Matrix, len(mats))
	for i, m := range mats {
		if m.closed {
			return fmt.Errorf("qgemv: chain: matrix %d: %w", i, ErrClosed)
		}
		if m.cols != n {
			return fmt.Errorf("qgemv: chain: matrix %d (%s) has %d columns, the vector %d values", i, m.format, m.cols, n)
		}
		if a := float64(alpha[i]); math.IsNaN(a) || math.IsInf(a, 0) {
			return fmt.Errorf("qgemv: chain: scale %d is %v", i, alpha[i])
		}
		n, width = m.rows, max(width, m.rows)
		dm[i] = m.m
	}
	if len(dst) != n {
		return fmt.Errorf("qgemv: chain: dst has %d values, the last matrix %d rows", len(dst), n)
	}
	if overlap(dst, v0) {
		return fmt.Errorf("qgemv: chain: dst and v0: %w", ErrOverlap)
	}
	if c, ok := e.be.(dispatch.Chainer); ok {
		if err := c.Chain(dst, dm, alpha, v0); err != nil {
			return fmt.Errorf("qgemv: chain: %w", err)
		}
		return nil
	}
	v, y := make([]int8, width), make([]int32, width)
	copy(v, v0)
	for i, m := range mats {
		if err := m.m.MulI32(y[:m.rows], v[:m.cols], 1); err != nil {
			return fmt.Errorf("qgemv: chain: matrix %d (%s): %w", i, m.format, err)
		}
		layout.Requantize(v, y[:m.rows], alpha[i])
	}
	copy(dst, v[:n])
	return nil
}

// chainLocked, when set (by tests, while no chain runs), is called by
// Chain after it read-locks each matrix.
var chainLocked func(m *Matrix)
