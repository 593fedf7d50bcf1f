//go:build opencl

package opencl

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/layout/ans"
)

//go:embed ans.cl
var ansSource string

// ANSMatrix is an entropy-coded int8 matrix (layout/ans, warp rows or
// warp stripes) resident on the device, multiplied by int8 vectors
// exactly in int32 with the decode fused into the dot product (the
// matrix is never materialized): bit-exact with ans.Matrix.DotUnit.
type ANSMatrix struct {
	handle
	int8Only
	rows, cols int
	layout     ans.Layout
	units      int
	bytes      int64

	words, offs, esc, escOffs, table *buffer
	devStatus                        *buffer // status words of multiplies on device buffers (buffers.go)
	pending                          bool    // on the backend's list of statuses the next Wait checks (b.mu)
}

// upload copies p into a new read-only buffer. b.mu is held.
func (b *Backend) upload(p []byte) (*buffer, error) {
	buf, err := b.x.newBuffer(len(p), true, b.x.dev.info.Unified)
	if err != nil {
		return nil, err
	}
	if err := b.x.write(buf, 0, ptr(p), len(p)); err != nil {
		buf.release()
		return nil, err
	}
	return buf, nil
}

// asBytes views a slice's memory as bytes.
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(ptr(s)), bytesOf(s))
}

// LoadANS validates m (shape, model and every offset against the stream
// and escape lengths, so no kernel reads outside a unit) and copies it
// to the device. The streams' contents are checked while decoding: a
// corrupt stream makes the multiply an error wrapping ans.ErrCorrupt.
func (b *Backend) LoadANS(m *ans.Matrix) (*ANSMatrix, error) {
	if m == nil {
		return nil, errors.New("opencl: LoadANS: matrix is nil")
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("opencl: LoadANS: %w", err)
	}
	if m.Units() > math.MaxInt32 || m.Cols/4 > math.MaxInt32 {
		return nil, fmt.Errorf("opencl: LoadANS: %dx%d is too large", m.Rows, m.Cols)
	}
	mx := &ANSMatrix{handle: handle{b: b}, rows: m.Rows, cols: m.Cols, layout: m.Layout, units: m.Units(), bytes: m.CodedBytes()}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	dst := []**buffer{&mx.words, &mx.offs, &mx.esc, &mx.escOffs, &mx.table}
	src := [][]byte{asBytes(m.Words), asBytes(m.Offsets), asBytes(m.Esc), asBytes(m.EscOffsets), asBytes(gpuhost.ANSTable(&m.Model))}
	for i, s := range src {
		buf, err := b.upload(s)
		if err != nil {
			mx.free()
			return nil, fmt.Errorf("opencl: LoadANS %dx%d %s: %w", m.Rows, m.Cols, m.Layout, err)
		}
		*dst[i] = buf
	}
	runtime.SetFinalizer(mx, (*ANSMatrix).Close)
	return mx, nil
}

func (mx *ANSMatrix) free() {
	for _, bf := range []*buffer{mx.words, mx.offs, mx.esc, mx.escOffs, mx.table, mx.devStatus} {
		bf.release()
	}
}

// Rows returns the matrix's rows (outputs).
func (mx *ANSMatrix) Rows() int { return mx.rows }

// Cols returns the matrix's columns (inputs).
func (mx *ANSMatrix) Cols() int { return mx.cols }

// CodedBytes returns the bytes a multiply reads from the matrix.
func (mx *ANSMatrix) CodedBytes() int64 { return mx.bytes }

// Kernel names the kernel, e.g. "opencl-nvidia-h200-ans-warp-rows"
// (with "-subgroups" where the prefix sums use sub-groups).
func (mx *ANSMatrix) Kernel() string {
	s := fmt.Sprintf("opencl-%s-ans-%s", mx.b.ShortName(), mx.layout)
	if mx.b.UsesSubgroups() {
		s += "-subgroups"
	}
	return s
}

// Close releases the device buffers; later multiplies return ErrClosed.
// Closing twice is harmless.
func (mx *ANSMatrix) Close() error {
	if mx == nil || mx.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	return mx.close(mx, mx.free)
}

// enqueue launches y = W v on the given buffers, one status word per
// unit (b.mu held), optionally returning a profiling event.
func (mx *ANSMatrix) enqueue(v, y, status *buffer, ev bool) (*event, error) {
	b := mx.b
	k, _, err := b.srcKernel("ans", ansSource, "ans_mul", 1, 32)
	if err != nil {
		return nil, err
	}
	steps, stripes := mx.cols/128, int32(0)
	if mx.layout == ans.WarpStripes {
		steps, stripes = mx.cols/4, 1
	}
	if err := k.setArgs(mem(mx.words), mem(mx.offs), mem(mx.esc), mem(mx.escOffs), mem(mx.table), mem(v), mem(y), mem(status), i32(mx.units), i32(steps), i32(stripes)); err != nil {
		return nil, err
	}
	return b.x.launch(k, 32*mx.units, 32, ev)
}

// statusLen is the status words a multiply uses (one per unit).
func (mx *ANSMatrix) statusLen() int { return mx.units }

// Mul computes y = W v exactly (len(v) = Cols, len(y) = Rows). A corrupt
// stream is an error wrapping ans.ErrCorrupt naming the unit.
func (mx *ANSMatrix) Mul(v []int8, y []int32) error { return mulOne(mx, v, y) }

// Int8Matrix is a plain row-major int8 matrix on the device, multiplied
// by int8 vectors exactly in int32: the MatVANS baseline.
type Int8Matrix struct {
	handle
	int8Only
	rows, cols int
	w          *buffer
}

// LoadInt8 copies the rows x cols row-major int8 matrix w to the device.
func (b *Backend) LoadInt8(w []int8, rows, cols int) (*Int8Matrix, error) {
	if rows < 1 || cols < 1 || rows > math.MaxInt32 || cols > math.MaxInt32 || len(w) != rows*cols {
		return nil, fmt.Errorf("opencl: LoadInt8: %d values for a %dx%d matrix", len(w), rows, cols)
	}
	mx := &Int8Matrix{handle: handle{b: b}, rows: rows, cols: cols}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	buf, err := b.upload(asBytes(w))
	if err != nil {
		return nil, fmt.Errorf("opencl: LoadInt8 %dx%d: %w", rows, cols, err)
	}
	mx.w = buf
	runtime.SetFinalizer(mx, (*Int8Matrix).Close)
	return mx, nil
}

// Rows returns the matrix's rows (outputs).
func (mx *Int8Matrix) Rows() int { return mx.rows }

// Cols returns the matrix's columns (inputs).
func (mx *Int8Matrix) Cols() int { return mx.cols }

// Kernel names the kernel, e.g. "opencl-nvidia-h200-int8".
func (mx *Int8Matrix) Kernel() string { return "opencl-" + mx.b.ShortName() + "-int8" }

// Close releases the device buffer; later multiplies return ErrClosed.
// Closing twice is harmless.
func (mx *Int8Matrix) Close() error {
	if mx == nil || mx.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	return mx.close(mx, mx.w.release)
}

func (mx *Int8Matrix) statusLen() int { return 0 }

// enqueue launches y = W v (b.mu held).
func (mx *Int8Matrix) enqueue(v, y, _ *buffer, ev bool) (*event, error) {
	b := mx.b
	k, wg, err := b.srcKernel("ans", ansSource, "int8_gemv", 1, 128)
	if err != nil {
		return nil, err
	}
	if err := k.setArgs(mem(mx.w), mem(v), mem(y), i32(mx.rows), i32(mx.cols), localBytes(4*wg)); err != nil {
		return nil, err
	}
	return b.x.launch(k, mx.rows*wg, wg, ev)
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
	statusLen() int
	enqueue(v, y, status *buffer, ev bool) (*event, error)
}

// chainBufs returns the vector (n bytes and more), result (n int32) and
// status (ns words, zeroed) buffers. b.mu is held.
func (b *Backend) chainBufs(n, ns int) (v, y, status *buffer, err error) {
	if v, err = b.ensure(&b.ansV, n+16, false); err != nil {
		return
	}
	if y, err = b.ensure(&b.ansY, 4*n, false); err != nil {
		return
	}
	if status, err = b.ensure(&b.ansSt, 4*max(ns, 1), false); err != nil {
		return
	}
	zero := make([]uint32, max(ns, 1))
	err = b.x.write(status, 0, ptr(zero), bytesOf(zero))
	return
}

// checkStatus reads ns status words and reports the first failed unit.
// b.mu is held.
func (b *Backend) checkStatus(status *buffer, ns int, what string) error {
	if ns == 0 {
		return nil
	}
	st := make([]uint32, ns)
	if err := b.x.read(status, 0, ptr(st), bytesOf(st)); err != nil {
		return err
	}
	for u, c := range st {
		if c == 0 {
			continue
		}
		return gpuhost.ANSCorrupt("opencl", what, uint32(u), c)
	}
	return nil
}

func mulOne(mx ChainMat, v []int8, y []int32) error {
	if err := gpuhost.CheckMul("opencl", mx.Kernel(), len(v), len(y), mx.Rows(), mx.Cols()); err != nil {
		return err
	}
	if mx.isClosed() {
		return ErrClosed
	}
	b := mx.backend()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || mx.isClosed() { // Close frees the buffers under b.mu: check again under it
		return ErrClosed
	}
	vb, yb, sb, err := b.chainBufs(max(len(v), len(y)), mx.statusLen())
	if err != nil {
		return err
	}
	if err := b.x.write(vb, 0, ptr(v), len(v)); err != nil {
		return err
	}
	if _, err := mx.enqueue(vb, yb, sb, false); err != nil {
		return err
	}
	if err := b.x.read(yb, 0, ptr(y), bytesOf(y)); err != nil {
		return err
	}
	return b.checkStatus(sb, mx.statusLen(), mx.Kernel())
}

// RunChain computes the MatVANS chain on the device: v = v0, then for
// each matrix i, y = W_i v and v = round_half_even(alpha[i] * y) clipped
// to int8 (float32, exactly as internal/matvans.Step), and returns the
// last v. Everything after v0's upload runs on the device back to back;
// one copy brings the result back. A corrupt ANS stream is an error
// wrapping ans.ErrCorrupt naming the matrix and unit.
func (b *Backend) RunChain(mats []ChainMat, alpha []float32, v0 []int8) ([]int8, error) {
	n, width, err := gpuhost.CheckChain("opencl", mats, alpha, len(v0), func(i int, m ChainMat) error {
		if m == nil || m.backend() != b {
			return fmt.Errorf("opencl: RunChain: matrix %d is nil or loaded on another backend", i)
		}
		if m.isClosed() {
			return fmt.Errorf("opencl: RunChain: matrix %d: %w", i, ErrClosed)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	for i, m := range mats { // Close frees the buffers under b.mu: check again under it
		if m.isClosed() {
			return nil, fmt.Errorf("opencl: RunChain: matrix %d: %w", i, ErrClosed)
		}
	}
	vb, yb, sb, err := b.chainBufs(width, 0)
	if err != nil {
		return nil, err
	}
	if err := b.x.write(vb, 0, ptr(v0), len(v0)); err != nil {
		return nil, err
	}
	rk, rwg, err := b.srcKernel("ans", ansSource, "ans_requant", 1, 256)
	if err != nil {
		return nil, err
	}
	// each matrix's status words: its own slice of the status buffer
	// (sub-buffers are avoided: a scratch buffer per matrix instead)
	sts := make([]*buffer, len(mats))
	defer func() {
		for _, s := range sts {
			s.release()
		}
	}()
	for i, m := range mats {
		if m.statusLen() > 0 {
			if sts[i], err = b.x.newBuffer(4*m.statusLen(), false, false); err != nil {
				return nil, err
			}
			zero := make([]uint32, m.statusLen())
			if err := b.x.write(sts[i], 0, ptr(zero), bytesOf(zero)); err != nil {
				return nil, err
			}
		}
		st := sts[i]
		if st == nil {
			st = sb
		}
		if _, err := m.enqueue(vb, yb, st, false); err != nil {
			return nil, err
		}
		rows := m.Rows()
		if err := rk.setArgs(mem(yb), mem(vb), i32(rows), f32(alpha[i])); err != nil {
			return nil, err
		}
		if _, err := b.x.launch(rk, (rows+rwg-1)/rwg*rwg, rwg, false); err != nil {
			return nil, err
		}
	}
	out := make([]int8, n)
	if err := b.x.read(vb, 0, ptr(out), n); err != nil {
		return nil, err
	}
	for i, m := range mats {
		if sts[i] != nil {
			if err := b.checkStatus(sts[i], m.statusLen(), fmt.Sprintf("chain matrix %d (%s)", i, m.Kernel())); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
