package cpu

import (
	"fmt"
	"sync/atomic"

	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
)

// Int8Matrix is a plain row-major int8 matrix multiplied exactly in int32:
// the MatVANS baseline.
type Int8Matrix struct {
	int8Only
	b          *Backend
	closed     atomic.Bool
	rows, cols int
	w          []int8
	rowSum     []int32 // sums of each row's first cols/64*64 values (the VNNI kernel's correction)
	kern       int8Kind
}

// int8Kind is the kernel an Int8Matrix multiplies with.
type int8Kind int

const (
	int8Generic int8Kind = iota
	int8VNNI             // Int8GemvAvx512: v+128 with VPDPBUSD, 64 columns per step
	int8AVX2             // Int8GemvAvx2: VPMOVSXBW + VPMADDWD, 32 columns per step
)

// The AVX-512 ANS decoder variants (ansVariant; without assembly they
// only name the variants TestInt8AndANS runs).
const (
	ansMul   = iota // VPMULLD and VPMULLQ; the only one for frequency 128
	ansMadd         // multiply-adds and VPMULUDQ, for Intel cores
	ansMaddQ        // multiply-adds and VPMULLQ, for other cores
)

// LoadInt8 binds a rows x cols int8 matrix (used in place).
func (b *Backend) LoadInt8(w []int8, rows, cols int) (*Int8Matrix, error) {
	if err := layout.CheckDims(rows, cols); err != nil { // also keeps rows*cols from overflowing
		return nil, fmt.Errorf("cpu: int8 matrix: %w", err)
	}
	if cols > ans.MaxCols {
		return nil, fmt.Errorf("cpu: int8 matrix: %d columns, at most %d (int32 dot products must be exact)", cols, ans.MaxCols)
	}
	if len(w) != rows*cols {
		return nil, fmt.Errorf("cpu: int8 matrix: %d values for %dx%d", len(w), rows, cols)
	}
	m := &Int8Matrix{int8Only: int8Only{"Int8"}, b: b, rows: rows, cols: cols, w: w, kern: int8KernelFor(b)}
	m.rowSum = make([]int32, rows)
	for r := 0; r < rows; r++ {
		var s int32
		for _, x := range w[r*cols : r*cols+cols/64*64] {
			s += int32(x)
		}
		m.rowSum[r] = s
	}
	return m, nil
}

// Kernel names the kernel ("cpu-avx512vnni-int8", "cpu-avx2-int8",
// "cpu-avxvnni-int8" (the AVX2 kernel) or "cpu-generic-int8").
func (m *Int8Matrix) Kernel() string {
	if m.kern != int8Generic {
		return "cpu-" + string(m.b.set.isa) + "-int8"
	}
	return "cpu-generic-int8"
}

// Close releases the matrix; later multiplies return ErrClosed.
func (m *Int8Matrix) Close() error {
	if m.closed.Swap(true) {
		return ErrClosed
	}
	return nil
}

// MulI32 computes dst = W x exactly for batch vectors (x: batch*Cols,
// dst: batch*Rows).
func (m *Int8Matrix) MulI32(dst []int32, x []int8, batch int) error {
	if m.closed.Load() {
		return ErrClosed
	}
	return eachVector("Int8", dst, x, batch, m.rows, m.cols, m.Mul)
}

// eachVector checks a MulI32 call's batch and lengths and runs mul on each
// vector.
func eachVector(format string, dst []int32, x []int8, batch, rows, cols int, mul func(v []int8, y []int32) error) error {
	if batch < 1 || batch > maxBatch {
		return fmt.Errorf("cpu: %s: %w (got %d)", format, ErrBatch, batch)
	}
	if len(x) != batch*cols || len(dst) != batch*rows {
		return fmt.Errorf("cpu: %s: x has %d values, dst %d, want batch %d x %d and %d x %d", format, len(x), len(dst), batch, cols, batch, rows)
	}
	for v := 0; v < batch; v++ {
		if err := mul(x[v*cols:(v+1)*cols], dst[v*rows:(v+1)*rows]); err != nil {
			return err
		}
	}
	return nil
}

// Mul computes y = W v exactly.
func (m *Int8Matrix) Mul(v []int8, y []int32) error {
	if len(v) != m.cols || len(y) != m.rows {
		return fmt.Errorf("cpu: int8 multiply: v %d, y %d, want %d, %d", len(v), len(y), m.cols, m.rows)
	}
	var xu []uint8
	var xw []int16
	tile := 0
	switch m.kern {
	case int8VNNI:
		tile = 64
		xu = make([]uint8, m.cols)
		for i, x := range v {
			xu[i] = uint8(int16(x) + 128)
		}
	case int8AVX2:
		tile = 32
		xw = make([]int16, m.cols)
		for i, x := range v {
			xw[i] = int16(x)
		}
	}
	return m.b.parallelChunks(m.rows/4+1, 16, func(q0, q1 int) error {
		r0, r1 := 4*q0, min(4*q1, m.rows)
		if tile > 0 && r1-r0 >= 4 && m.cols >= tile {
			quads := (r1 - r0) / 4
			ct := m.cols / tile * tile
			if m.kern == int8VNNI {
				int8Kernel(m.w[r0*m.cols:], m.cols, xu, ct/64, quads, y[r0:])
				for r := r0; r < r0+4*quads; r++ {
					y[r] -= 128 * m.rowSum[r]
				}
			} else {
				int8KernelAVX2(m.w[r0*m.cols:], m.cols, xw, ct/32, quads, y[r0:])
			}
			for r := r0 + 4*quads; r < r1; r++ { // rows left over
				y[r] = dotInt8(m.w[r*m.cols:(r+1)*m.cols], v)
			}
			if ct < m.cols {
				for r := r0; r < r0+4*quads; r++ {
					y[r] += dotInt8(m.w[r*m.cols+ct:(r+1)*m.cols], v[ct:])
				}
			}
			return nil
		}
		for r := r0; r < r1; r++ {
			y[r] = dotInt8(m.w[r*m.cols:(r+1)*m.cols], v)
		}
		return nil
	})
}

func dotInt8(w, v []int8) int32 {
	v = v[:len(w)]
	var a, b int32
	i := 0
	for ; i+1 < len(w); i += 2 {
		a += int32(w[i]) * int32(v[i])
		b += int32(w[i+1]) * int32(v[i+1])
	}
	if i < len(w) {
		a += int32(w[i]) * int32(v[i])
	}
	return a + b
}

func init() {
	loaders.Register(layout.FormatInt8, mat.Typed("cpu", func(b *Backend, m *layout.Int8) (Mat, error) {
		return mat.Bind(b.LoadInt8(m.W, m.Rows, m.Cols))
	}))
	loaders.Register(layout.FormatANS, mat.Typed("cpu", func(b *Backend, m *ans.Matrix) (Mat, error) {
		a := *m // a snapshot of the fields, as Load takes
		return &ANSMatrix{int8Only: int8Only{a.Name()}, b: b, m: &a}, nil
	}))
}

// ANSMatrix is an entropy-coded int8 matrix (layout/ans) bound to a CPU
// backend: MulI32 decodes it on the fly (MulANS).
type ANSMatrix struct {
	int8Only
	b      *Backend
	m      *ans.Matrix
	closed atomic.Bool
}

// Kernel names the decoder (ANSKernel).
func (a *ANSMatrix) Kernel() string { return a.b.ANSKernel() }

// Close releases the matrix; later multiplies return ErrClosed.
func (a *ANSMatrix) Close() error {
	if a.closed.Swap(true) {
		return ErrClosed
	}
	return nil
}

// MulI32 computes dst = W x exactly for batch vectors, decoding the
// matrix once per vector.
func (a *ANSMatrix) MulI32(dst []int32, x []int8, batch int) error {
	if a.closed.Load() {
		return ErrClosed
	}
	return eachVector(a.m.Name(), dst, x, batch, a.m.Rows, a.m.Cols, func(v []int8, y []int32) error {
		return a.b.MulANS(a.m, v, y)
	})
}

// MulANS computes y = W v exactly for an entropy-coded matrix, decoding
// on the fly (the AVX-512 decoder where the CPU has it, else generic Go),
// threads over units (rows or stripes).
func (b *Backend) MulANS(m *ans.Matrix, v []int8, y []int32) error {
	if err := m.Check(); err != nil { // nil, offsets, model: what the decoders index by
		return fmt.Errorf("cpu: ANS multiply: %w", err)
	}
	if len(v) != m.Cols || len(y) != m.Rows {
		return fmt.Errorf("cpu: ANS multiply: v %d, y %d, want %d, %d", len(v), len(y), m.Cols, m.Rows)
	}
	if ansKernelOK(b) {
		return b.mulANSSIMD(m, v, y)
	}
	per := 1
	if m.Layout == ans.WarpStripes {
		per = ans.Lanes
	}
	return b.parallelFor(m.Units(), max(1, 64/per), func(u0, u1 int) error {
		out := make([]int32, ans.Lanes)
		for u := u0; u < u1; u++ {
			if err := m.DotUnit(u, v, out); err != nil {
				return err
			}
			copy(y[u*per:(u+1)*per], out[:per])
		}
		return nil
	})
}

// ANSKernel names the ANS decoder MulANS runs ("cpu-avx512vnni-ans" or
// "cpu-generic-ans").
func (b *Backend) ANSKernel() string {
	if ansKernelOK(b) {
		return "cpu-" + string(b.set.isa) + "-ans"
	}
	return "cpu-generic-ans"
}
