package qgemv

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/qgemv/qgemv/layout"
)

// SharedInput is one input (a batch of vectors) read by several matrices
// of the same Cols, such as a layer's q, k and v projections or its gate
// and up projections. Set prepares it once: with A8 it quantizes the
// activations once per distinct column order and padding among the
// matrices (usually once; an act-order matrix, which stores its columns
// permuted, needs the activations gathered into its order first), not
// once per matrix; Mul(i, dst) then multiplies matrix i. Results equal
// the matrices' own Mul with the same activation type bit for bit.
//
// Set allocates only when a batch is larger than every earlier one; Mul
// never does, so a SharedInput made once serves every decode step. Mul
// calls may run concurrently; Set waits for them and they for Set.
type SharedInput struct {
	mats []*Matrix
	cols int
	key  []int // matrix i reads keys[key[i]]
	keys []*sharedKey

	mu    sync.RWMutex
	e     *Engine
	set   bool
	batch int
	act   Activation
	x     []float32     // A32: a copy of the input
	xh    []layout.FP16 // A16: the input rounded to binary16
}

// sharedKey is one column order and padding and its quantized input.
type sharedKey struct {
	pcols int
	perm  []int32
	xg    []float32 // the gathered vector (act-order)
	xq    []int8
	xs    []float32
}

// samePerm reports whether a and b are the same column order.
func samePerm(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b) || slices.Equal(a, b)
}

// NewSharedInput returns a SharedInput for mats: matrices loaded on e
// with the same number of columns.
func (e *Engine) NewSharedInput(mats ...*Matrix) (*SharedInput, error) {
	if e == nil || e.be == nil {
		return nil, ErrInvalid
	}
	if len(mats) == 0 {
		return nil, errors.New("qgemv: shared input: no matrices")
	}
	s := &SharedInput{e: e, mats: slices.Clone(mats), key: make([]int, len(mats))}
	for i, m := range mats {
		if m == nil || m.e != e {
			return nil, fmt.Errorf("qgemv: shared input: matrix %d is nil or loaded on another engine", i)
		}
		if i == 0 {
			s.cols = m.cols
		} else if m.cols != s.cols {
			return nil, fmt.Errorf("qgemv: shared input: matrix %d (%s, %dx%d) has %d columns, matrix 0 has %d", i, m.format, m.rows, m.cols, m.cols, s.cols)
		}
		s.key[i] = -1
		for k, key := range s.keys {
			if key.pcols == m.pcols && samePerm(key.perm, m.perm) {
				s.key[i] = k
				break
			}
		}
		if s.key[i] < 0 {
			s.key[i] = len(s.keys)
			s.keys = append(s.keys, &sharedKey{pcols: m.pcols, perm: m.perm})
		}
	}
	return s, nil
}

// Len returns the number of matrices.
func (s *SharedInput) Len() int {
	if s == nil {
		return 0
	}
	return len(s.mats)
}

// Set prepares the batch vectors in x (batch*Cols values) for every
// matrix with the activation type act. With A8 every matrix must take
// int8 activations (Matrix.TakesA8); the activations are quantized per
// 128 inputs exactly as Mul's A8 does. With A16 they are rounded to
// binary16 once, as Mul's A16 rounds them, and each matrix multiplies
// the rounded values (MulFP16). With A32 Set keeps a copy of x. x may be
// changed or reused as soon as Set returns.
func (s *SharedInput) Set(x []float32, batch int, act Activation) error {
	if s == nil {
		return ErrInvalid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = false
	if err := checkBatch("shared input", batch); err != nil {
		return err
	}
	if len(x) != batch*s.cols {
		return fmt.Errorf("qgemv: shared input: x has %d values, want batch %d x %d columns = %d", len(x), batch, s.cols, batch*s.cols)
	}
	switch act {
	case A32:
		s.x = grow(s.x, len(x))
		copy(s.x, x)
	case A16:
		s.xh = grow(s.xh, len(x))
		layout.ToFP16s(s.xh, x)
	case A8:
		for i, m := range s.mats {
			if !m.a8 {
				return fmt.Errorf("qgemv: shared input: matrix %d (%s) takes float activations only (fractional zero points or offsets): use A32: %w", i, m.format, ErrFormatNotImplemented)
			}
		}
		for _, k := range s.keys {
			pc := k.pcols
			k.xq = grow(k.xq, batch*pc)
			k.xs = grow(k.xs, batch*pc/128)
			if k.perm != nil {
				k.xg = grow(k.xg, s.cols)
			}
			for b := 0; b < batch; b++ {
				xv := x[b*s.cols : (b+1)*s.cols]
				if k.perm != nil {
					gather(k.xg, xv, k.perm)
					xv = k.xg
				}
				if err := s.e.QuantizeA8(k.xq[b*pc:(b+1)*pc], k.xs[b*pc/128:(b+1)*pc/128], xv); err != nil {
					return fmt.Errorf("qgemv: shared input: vector %d: %w", b, err)
				}
			}
		}
	default:
		return fmt.Errorf("qgemv: shared input: unknown activation %v (A32, A16 or A8)", act)
	}
	s.set, s.batch, s.act = true, batch, act
	return nil
}

// Mul computes dst = W_i x for matrix i and the input of the last Set:
// dst holds batch*Rows values of matrix i.
func (s *SharedInput) Mul(i int, dst []float32) error {
	if s == nil {
		return ErrInvalid
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i < 0 || i >= len(s.mats) {
		return fmt.Errorf("qgemv: shared input: matrix %d of %d", i, len(s.mats))
	}
	if !s.set {
		return errors.New("qgemv: shared input: Mul before a successful Set")
	}
	m := s.mats[i]
	switch s.act {
	case A32:
		return m.Mul(dst, s.x[:s.batch*s.cols], s.batch, A32)
	case A16:
		return m.MulFP16(dst, s.xh[:s.batch*s.cols], s.batch)
	}
	k := s.keys[s.key[i]]
	return m.MulInt8(dst, k.xq[:s.batch*k.pcols], k.xs[:s.batch*k.pcols/128], s.batch)
}

// MulShared multiplies the batch vectors in x by each of mats, matrices
// of the same Cols that read the same input, into dst[i] (batch*Rows of
// mats[i] values each): with A8 the activations are quantized once, not
// once per matrix (see SharedInput, which MulShared makes and drops per
// call; keep a SharedInput to multiply without allocating). No dst may
// share memory with x or with another dst (ErrOverlap).
func (e *Engine) MulShared(dst [][]float32, mats []*Matrix, x []float32, batch int, act Activation) error {
	if e == nil || e.be == nil {
		return ErrInvalid
	}
	if len(dst) != len(mats) {
		return fmt.Errorf("qgemv: mul shared: %d outputs for %d matrices", len(dst), len(mats))
	}
	for i := range dst {
		if overlap(dst[i], x) {
			return fmt.Errorf("qgemv: mul shared: dst %d and x: %w", i, ErrOverlap)
		}
		for j := range i {
			if overlap(dst[i], dst[j]) {
				return fmt.Errorf("qgemv: mul shared: dst %d and dst %d: %w", j, i, ErrOverlap)
			}
		}
	}
	s, err := e.NewSharedInput(mats...)
	if err != nil {
		return err
	}
	if err := s.Set(x, batch, act); err != nil {
		return err
	}
	for i := range mats {
		if err := s.Mul(i, dst[i]); err != nil {
			return fmt.Errorf("qgemv: mul shared: matrix %d: %w", i, err)
		}
	}
	return nil
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}
