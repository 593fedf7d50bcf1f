//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"gorgonia.org/cu"

	"github.com/qgemv/qgemv/layout/ans"
)

// The kernels of ans.cu.
func init() {
	addKernels("ans_rows", "ans_stripes", "int8_gemv16", "int8_gemv1", "ans_requant")
}

// ansWarps must match ANS_WARPS in ans.cu (warps per block).
const ansWarps = 8

// Status codes written by the ANS kernels (ans.cu).
var ansStatus = map[uint32]string{
	1: "initial state out of range",
	2: "stream exhausted",
	3: "escape list exhausted",
	4: "final state is not 2^31",
	5: "escape bytes left unused",
}

// ANSMatrix is an entropy-coded int8 matrix (layout/ans) resident in
// device memory, multiplied by int8 vectors exactly in int32 with the
// decode fused into the dot product (the matrix is never materialized).
type ANSMatrix struct {
	b          *Backend
	rows, cols int
	layout     ans.Layout
	units      int
	bytes      int64

	words, offs, esc, escOffs, table *buffer

	mu     sync.Mutex
	closed bool
}

// ansTable packs the model's 128 slot digits for the kernels: bits 0-7
// the value, 8-15 the symbol frequency, 16-22 digit - cum, 24 escape.
func ansTable(md *ans.Model) []uint32 {
	t := make([]uint32, ans.ProbScale)
	for d := range t {
		k := int(md.PPF[d])
		e := uint32(uint8(md.Value[k])) | uint32(md.Freq[k])<<8 | (uint32(d)-uint32(md.Cum[k]))<<16
		if k == md.Escape {
			e = e&^0xff | 1<<24
		}
		t[d] = e
	}
	return t
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
	if len(m.Words)%4 != 0 || m.Rows > math.MaxInt32 {
		return nil, fmt.Errorf("cuda: LoadANS: %d words (want a multiple of 4), %d rows", len(m.Words), m.Rows)
	}
	mx := &ANSMatrix{b: b, rows: m.Rows, cols: m.Cols, layout: m.Layout, units: m.Units(), bytes: m.CodedBytes()}
	table := ansTable(&m.Model)
	err := b.do(func() error {
		var err error
		defer func() {
			if err != nil {
				mx.free()
			}
		}()
		if mx.words, err = upload(m.Words); err != nil {
			return err
		}
		if mx.offs, err = upload(m.Offsets); err != nil {
			return err
		}
		if mx.esc, err = upload(m.Esc); err != nil {
			return err
		}
		if mx.escOffs, err = upload(m.EscOffsets); err != nil {
			return err
		}
		mx.table, err = upload(table)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: LoadANS %dx%d %s: %w", m.Rows, m.Cols, m.Layout, err)
	}
	return mx, nil
}

func (mx *ANSMatrix) free() {
	for _, bf := range []*buffer{mx.words, mx.offs, mx.esc, mx.escOffs, mx.table} {
		bf.free()
	}
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

// Close frees the device memory.
func (mx *ANSMatrix) Close() error {
	mx.mu.Lock()
	defer mx.mu.Unlock()
	if mx.closed {
		return ErrClosed
	}
	mx.closed = true
	err := mx.b.do(func() error { mx.free(); return nil })
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

func (mx *ANSMatrix) backend() *Backend { return mx.b }

func (mx *ANSMatrix) isClosed() bool {
	mx.mu.Lock()
	defer mx.mu.Unlock()
	return mx.closed
}

// enqueue launches y = W v (CUDA thread).
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
	b          *Backend
	rows, cols int
	w          *buffer

	mu     sync.Mutex
	closed bool
}

// LoadInt8 copies the rows x cols row-major int8 matrix w to the device.
func (b *Backend) LoadInt8(w []int8, rows, cols int) (*Int8Matrix, error) {
	if rows < 1 || cols < 1 || rows > math.MaxInt32 || len(w) != rows*cols {
		return nil, fmt.Errorf("cuda: LoadInt8: %d values for a %dx%d matrix", len(w), rows, cols)
	}
	mx := &Int8Matrix{b: b, rows: rows, cols: cols}
	err := b.do(func() error {
		var err error
		mx.w, err = upload(w)
		return err
	})
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

// Close frees the device memory.
func (mx *Int8Matrix) Close() error {
	mx.mu.Lock()
	defer mx.mu.Unlock()
	if mx.closed {
		return ErrClosed
	}
	mx.closed = true
	err := mx.b.do(func() error { mx.w.free(); return nil })
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

func (mx *Int8Matrix) backend() *Backend { return mx.b }

func (mx *Int8Matrix) isClosed() bool {
	mx.mu.Lock()
	defer mx.mu.Unlock()
	return mx.closed
}

// enqueue launches y = W v (CUDA thread); v's buffer is padded to 16 bytes.
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

// download copies the start of bf into dst (CUDA thread).
func download[T any](bf *buffer, dst []T) error {
	p, n := bytesOf(dst)
	if n > bf.size {
		return fmt.Errorf("cuda: reading %d bytes from a %d-byte buffer", n, bf.size)
	}
	if n == 0 {
		return nil
	}
	if err := cu.MemcpyDtoH(p, bf.ptr, n); err != nil {
		return fmt.Errorf("cuda: copying %d bytes from the device (a kernel may have failed): %w", n, err)
	}
	return nil
}

// chainBufs returns the scratch vector, result and status buffers for
// vectors of up to n values (CUDA thread); the status is zeroed.
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

// checkStatus reads the status the ANS kernels wrote (CUDA thread).
func checkStatus(status *buffer, what func(tag uint32) string) error {
	var st [4]uint32
	if err := download(status, st[:]); err != nil {
		return err
	}
	if st[0] == 0 {
		return nil
	}
	msg, ok := ansStatus[st[0]]
	if !ok {
		msg = fmt.Sprintf("status %d", st[0])
	}
	return fmt.Errorf("cuda: %s unit %d: %w: %s", what(st[2]), st[1], ans.ErrCorrupt, msg)
}

func mulOne(mx ChainMat, v []int8, y []int32) error {
	if len(v) != mx.Cols() || len(y) != mx.Rows() {
		return fmt.Errorf("cuda: %s multiply: v %d, y %d, want %d, %d", mx.Kernel(), len(v), len(y), mx.Cols(), mx.Rows())
	}
	if mx.isClosed() {
		return ErrClosed
	}
	b := mx.backend()
	return b.do(func() error {
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
// to int8 (float32, exactly as internal/matvans.Step), and returns the
// last v. Everything after v0's upload runs on the device back to back;
// one copy brings the result back. A corrupt ANS stream is an error
// wrapping ans.ErrCorrupt naming the matrix and unit.
func (b *Backend) RunChain(mats []ChainMat, alpha []float32, v0 []int8) ([]int8, error) {
	if len(mats) == 0 || len(alpha) != len(mats) {
		return nil, fmt.Errorf("cuda: RunChain: %d matrices and %d scales", len(mats), len(alpha))
	}
	n := len(v0)
	width := n
	for i, m := range mats {
		if m == nil || m.backend() != b {
			return nil, fmt.Errorf("cuda: RunChain: matrix %d is nil or loaded on another backend", i)
		}
		if m.isClosed() {
			return nil, fmt.Errorf("cuda: RunChain: matrix %d: %w", i, ErrClosed)
		}
		if m.Cols() != n {
			return nil, fmt.Errorf("cuda: RunChain: matrix %d has %d columns, the vector %d values", i, m.Cols(), n)
		}
		n = m.Rows()
		width = max(width, n)
	}
	out := make([]int8, n)
	err := b.do(func() error {
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
