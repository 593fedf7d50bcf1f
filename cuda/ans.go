//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"

	"gorgonia.org/cu"

	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
)

// The kernels of ans.cu.
func init() {
	addKernels("ans_rows", "ans_stripes", "ans_decode", "int8_gemv16", "int8_gemv1", "ans_requant")
	loaders.Register(layout.FormatInt8, mat.Typed("cuda", func(b *Backend, m *layout.Int8) (Mat, error) {
		return mat.Bind(b.LoadInt8(m.W, m.Rows, m.Cols))
	}))
	loaders.Register(layout.FormatANS, mat.Typed("cuda", func(b *Backend, m *ans.Matrix) (Mat, error) {
		return mat.Bind(b.LoadANS(m))
	}))
}

// int8Only answers the float and A8 multiplies of the int8 formats.
type int8Only struct{}

func int8OnlyErr(what string) error {
	return fmt.Errorf("cuda: int8 matrix: %s (MulI32 multiplies int8 vectors): %w", what, errs.ErrFormatNotImplemented)
}

func (int8Only) MulF32([]float32, []float32, int) error { return int8OnlyErr("float32 activations") }
func (int8Only) MulF16([]float32, []layout.FP16, int) error {
	return int8OnlyErr("binary16 activations")
}
func (int8Only) MulA8([]float32, []float32, int) error { return int8OnlyErr("quantized activations") }
func (int8Only) MulI8([]float32, []int8, []float32, int) error {
	return int8OnlyErr("quantized activations")
}

// MulI32 computes dst = W x exactly for batch vectors.
func (mx *ANSMatrix) MulI32(dst []int32, x []int8, batch int) error {
	return mulI32(mx, dst, x, batch)
}

// MulI32 computes dst = W x exactly for batch vectors.
func (mx *Int8Matrix) MulI32(dst []int32, x []int8, batch int) error {
	return mulI32(mx, dst, x, batch)
}

// mulI32 checks a MulI32 call and multiplies vector by vector.
func mulI32(mx ChainMat, dst []int32, x []int8, batch int) error {
	if batch < 1 || batch > errs.MaxBatch {
		return fmt.Errorf("cuda: %w (got %d)", ErrBatch, batch)
	}
	rows, cols := mx.Rows(), mx.Cols()
	if len(x) != batch*cols || len(dst) != batch*rows {
		return fmt.Errorf("cuda: %s: x has %d values, dst %d, want batch %d x %d and %d x %d", mx.Kernel(), len(x), len(dst), batch, cols, batch, rows)
	}
	for v := 0; v < batch; v++ {
		if err := mulOne(mx, x[v*cols:(v+1)*cols], dst[v*rows:(v+1)*rows]); err != nil {
			return err
		}
	}
	return nil
}

// ansWarps must match ANS_WARPS in ans.cu (warps per block).
const ansWarps = 8

// ANSMatrix is an entropy-coded int8 matrix (layout/ans) resident in
// device memory, multiplied by int8 vectors exactly in int32 with the
// decode fused into the dot product (the matrix is never materialized).
type ANSMatrix struct {
	handle
	int8Only
	rows, cols int
	layout     ans.Layout
	units      int
	bytes      int64

	words, offs, esc, escOffs, table *buffer
}

// LoadANS validates m (shape, model and every offset against the stream
// and escape lengths, so no kernel reads outside a unit) and copies it to
// the device. The streams' contents are checked while decoding: a corrupt
// stream makes the multiply an error wrapping ans.ErrCorrupt.
func (b *Backend) LoadANS(m *ans.Matrix) (*ANSMatrix, error) {
	if m == nil {
		return nil, errors.New("cuda: LoadANS: matrix is nil")
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("cuda: LoadANS: %w", err)
	}
	if len(m.Words)%4 != 0 || m.Rows > math.MaxInt32 || m.Cols/4 > math.MaxInt32 {
		return nil, fmt.Errorf("cuda: LoadANS: %d words (want a multiple of 4), %dx%d", len(m.Words), m.Rows, m.Cols)
	}
	for u := 0; u < m.Units(); u++ { // the kernels count a unit's words and escapes in 31 bits
		if m.Offsets[u+1]-m.Offsets[u] > math.MaxInt32 || m.EscOffsets[u+1]-m.EscOffsets[u] > math.MaxInt32 {
			return nil, fmt.Errorf("cuda: LoadANS: unit %d has %d words and %d escapes (at most %d each)", u,
				m.Offsets[u+1]-m.Offsets[u], m.EscOffsets[u+1]-m.EscOffsets[u], math.MaxInt32)
		}
	}
	mx := &ANSMatrix{handle: handle{b: b}, rows: m.Rows, cols: m.Cols, layout: m.Layout, units: m.Units(), bytes: m.CodedBytes()}
	table := gpuhost.ANSTable(&m.Model)
	err := b.do(func() error {
		return uploadAll(into(&mx.words, m.Words), into(&mx.offs, m.Offsets), into(&mx.esc, m.Esc),
			into(&mx.escOffs, m.EscOffsets), into(&mx.table, table))
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: LoadANS %dx%d %s: %w", m.Rows, m.Cols, m.Layout, err)
	}
	return mx, nil
}

// Rows returns the matrix's rows (outputs).
func (mx *ANSMatrix) Rows() int { return mx.rows }

// Cols returns the matrix's columns (inputs).
func (mx *ANSMatrix) Cols() int { return mx.cols }

// CodedBytes returns the bytes a multiply reads from the matrix.
func (mx *ANSMatrix) CodedBytes() int64 { return mx.bytes }

// Kernel names the kernel, e.g. "cuda-sm90-ans-warp-rows".
func (mx *ANSMatrix) Kernel() string {
	return fmt.Sprintf("cuda-sm%d-ans-%s", mx.b.arch, mx.layout)
}

// Close frees the device memory; later multiplies return ErrClosed, and
// so does a second Close.
func (mx *ANSMatrix) Close() error {
	if mx == nil || mx.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	return mx.close(mx.free)
}

// free frees the device memory (in a backend call).
func (mx *ANSMatrix) free() { freeAll(mx.words, mx.offs, mx.esc, mx.escOffs, mx.table) }

// enqueue launches y = W v (in a backend call).
func (mx *ANSMatrix) enqueue(v, y, status cu.DevicePtr, tag int64) error {
	name, steps := "ans_rows", int64(mx.cols/128)
	if mx.layout == ans.WarpStripes {
		name, steps = "ans_stripes", int64(mx.cols/4)
	}
	blocks := min((mx.units+ansWarps-1)/ansWarps, 8*mx.b.dev.SMs)
	return mx.b.launch(name, blocks, 1, 32*ansWarps, 0, mx.words.ptr, mx.offs.ptr, mx.esc.ptr, mx.escOffs.ptr, mx.table.ptr,
		v, y, status, int64(mx.units), steps, tag)
}

// Mul computes y = W v exactly (len(v) = Cols, len(y) = Rows). A corrupt
// stream is an error wrapping ans.ErrCorrupt naming the unit.
func (mx *ANSMatrix) Mul(v []int8, y []int32) error { return mulOne(mx, v, y) }

// Int8Matrix is a plain row-major int8 matrix in device memory,
// multiplied by int8 vectors exactly in int32: the MatVANS baseline.
type Int8Matrix struct {
	handle
	int8Only
	rows, cols int
	w          *buffer
}

// LoadInt8 copies the rows x cols row-major int8 matrix w to the device.
func (b *Backend) LoadInt8(w []int8, rows, cols int) (*Int8Matrix, error) {
	if rows < 1 || cols < 1 || rows > math.MaxInt32 || len(w) != rows*cols {
		return nil, fmt.Errorf("cuda: LoadInt8: %d values for a %dx%d matrix", len(w), rows, cols)
	}
	mx := &Int8Matrix{handle: handle{b: b}, rows: rows, cols: cols}
	err := b.do(func() error { return uploadAll(into(&mx.w, w)) })
	if err != nil {
		return nil, fmt.Errorf("cuda: LoadInt8 %dx%d: %w", rows, cols, err)
	}
	return mx, nil
}

// Rows returns the matrix's rows (outputs).
func (mx *Int8Matrix) Rows() int { return mx.rows }

// Cols returns the matrix's columns (inputs).
func (mx *Int8Matrix) Cols() int { return mx.cols }

// Kernel names the kernel ("cuda-sm90-int8").
func (mx *Int8Matrix) Kernel() string { return fmt.Sprintf("cuda-sm%d-int8", mx.b.arch) }

// Close frees the device memory; later multiplies return ErrClosed, and
// so does a second Close.
func (mx *Int8Matrix) Close() error {
	if mx == nil || mx.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	return mx.close(mx.w.free)
}

// enqueue launches y = W v (in a backend call); v's buffer is padded to 16 bytes.
func (mx *Int8Matrix) enqueue(v, y, _ cu.DevicePtr, _ int64) error {
	blocks := (mx.rows + ansWarps - 1) / ansWarps
	if mx.cols%16 == 0 {
		return mx.b.launch("int8_gemv16", blocks, 1, 32*ansWarps, 0, mx.w.ptr, v, y, int64(mx.rows), int64(mx.cols/16))
	}
	return mx.b.launch("int8_gemv1", blocks, 1, 32*ansWarps, 0, mx.w.ptr, v, y, int64(mx.rows), int64(mx.cols))
}

// Mul computes y = W v exactly (len(v) = Cols, len(y) = Rows).
func (mx *Int8Matrix) Mul(v []int8, y []int32) error { return mulOne(mx, v, y) }

// ChainMat is a device matrix an int8 chain multiplies: *ANSMatrix or
// *Int8Matrix.
type ChainMat interface {
	Rows() int
	Cols() int
	Kernel() string
	backend() *Backend
	isClosed() bool
	enqueue(v, y, status cu.DevicePtr, tag int64) error
}

// chainBufs returns the scratch vector, result and status buffers for
// vectors of up to n values (in a backend call); the status is zeroed.
func (b *Backend) chainBufs(n int) (v, y, status *buffer, err error) {
	if v, err = b.scratchBuf("ansv", int64(n+16)); err != nil {
		return
	}
	if y, err = b.scratchBuf("ansy", 4*int64(n)); err != nil {
		return
	}
	if status, err = b.scratchBuf("ansstatus", 16); err != nil {
		return
	}
	err = cu.MemsetD32(status.ptr, 0, 4)
	return
}

// checkStatus reads the status the ANS kernels wrote (in a backend call).
func checkStatus(status *buffer, what func(tag uint32) string) error {
	var st [4]uint32
	if err := download(status, st[:]); err != nil {
		return err
	}
	if st[0] == 0 {
		return nil
	}
	return gpuhost.ANSCorrupt("cuda", what(st[2]), st[1], st[0])
}

// mulOne computes y = W v for one matrix of a chain (Mul).
func mulOne(mx ChainMat, v []int8, y []int32) error {
	if err := gpuhost.CheckMul("cuda", mx.Kernel(), len(v), len(y), mx.Rows(), mx.Cols()); err != nil {
		return err
	}
	if mx.isClosed() {
		return ErrClosed
	}
	b := mx.backend()
	return b.do(func() error {
		if mx.isClosed() { // closed while this call waited: the memory may be gone
			return ErrClosed
		}
		vb, yb, sb, err := b.chainBufs(max(len(v), len(y)))
		if err != nil {
			return err
		}
		if err := put(vb, v); err != nil {
			return err
		}
		if err := mx.enqueue(vb.ptr, yb.ptr, sb.ptr, 0); err != nil {
			return err
		}
		if err := download(yb, y); err != nil {
			return err
		}
		return checkStatus(sb, func(uint32) string { return mx.Kernel() })
	})
}

// RunChain computes the MatVANS chain on the device: v = v0, then for
// each matrix i, y = W_i v and v = round_half_even(alpha[i] * y) clipped
// to int8 (float32, exactly as internal/matvans.Step; a scale that is
// not finite is an error), and returns the
// last v. Everything after v0's upload runs on the device back to back;
// one copy brings the result back. A corrupt ANS stream is an error
// wrapping ans.ErrCorrupt naming the matrix and unit.
func (b *Backend) RunChain(mats []ChainMat, alpha []float32, v0 []int8) ([]int8, error) {
	n, width, err := gpuhost.CheckChain("cuda", mats, alpha, len(v0), func(i int, m ChainMat) error {
		if m == nil || m.backend() != b {
			return fmt.Errorf("cuda: RunChain: matrix %d is nil or loaded on another backend", i)
		}
		if m.isClosed() {
			return fmt.Errorf("cuda: RunChain: matrix %d: %w", i, ErrClosed)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]int8, n)
	err = b.do(func() error {
		if err := anyClosed(mats); err != nil { // closed while this call waited
			return fmt.Errorf("cuda: RunChain: %w", err)
		}
		vb, yb, sb, err := b.chainBufs(width)
		if err != nil {
			return err
		}
		if err := put(vb, v0); err != nil {
			return err
		}
		for i, m := range mats {
			if err := m.enqueue(vb.ptr, yb.ptr, sb.ptr, int64(i)); err != nil {
				return err
			}
			rows := int64(m.Rows())
			if err := b.launch("ans_requant", int((rows+255)/256), 1, 256, 0, yb.ptr, vb.ptr, rows, int64(math.Float32bits(alpha[i]))); err != nil {
				return err
			}
		}
		if err := download(vb, out); err != nil {
			return err
		}
		return checkStatus(sb, func(tag uint32) string {
			if int(tag) < len(mats) {
				return fmt.Sprintf("chain matrix %d (%s)", tag, mats[tag].Kernel())
			}
			return fmt.Sprintf("chain matrix %d", tag)
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
