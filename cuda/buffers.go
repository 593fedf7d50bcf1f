//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/qgemv/qgemv/internal/devbuf"
	"github.com/qgemv/qgemv/internal/gpuhost"
)

// Device-resident buffers (dispatch.Device, dispatch.DeviceMatrix): the
// activations of a layer stay in device memory between multiplies, and
// their preparation (binary16 rounding and order, int8 quantization) runs
// in buffers.cu's kernels. Every operation is queued on the backend's
// stream and returns without waiting; Read and Wait synchronize and
// report what the queued kernels flagged in the status word.

func init() {
	addKernels("gather_f16", "gather_h16", "xsum_f16", "xsum_h16", "quant_a8", "quant_a8_q4", "a8_sums", "a8_q4order", "a8_prep", "a8_split", "swiglu", "add_f32", "scale_f32", "copy_bytes")
}

// bufPad is the bytes allocated past a buffer's size: kernels that load
// 16 bytes at a time (the int8 chain's vectors) may read past the end.
const bufPad = 64

// DevBuf is device memory for a dispatch.Buf.
type DevBuf struct {
	b      *Backend
	buf    *buffer
	size   int64
	closed atomic.Bool
}

var _ devbuf.Buf = (*DevBuf)(nil)

// NewBuf allocates size bytes of device memory, zeroed. An allocation
// the device cannot satisfy is an error; the backend keeps working.
func (b *Backend) NewBuf(size int64) (devbuf.Buf, error) {
	if size < 1 {
		return nil, fmt.Errorf("cuda: new buffer of %d bytes", size)
	}
	d := &DevBuf{b: b, size: size}
	err := b.do(func() error {
		bf, err := alloc(size + bufPad)
		if err != nil {
			return err
		}
		if err := cu.MemsetD8(bf.ptr, 0, size+bufPad); err != nil {
			bf.free()
			return fmt.Errorf("cuda: zeroing a new buffer: %w", err)
		}
		d.buf = bf
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Size returns the buffer's bytes.
func (d *DevBuf) Size() int64 { return d.size }

// Close frees the memory; later uses return ErrClosed.
func (d *DevBuf) Close() error {
	if d == nil || d.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	if d.closed.Swap(true) {
		return ErrClosed
	}
	err := d.b.do(func() error {
		_ = cu.Synchronize() // queued kernels may still use the memory
		d.buf.free()
		d.b.freeGen++ // graphs captured before may use the memory
		return nil
	})
	if errors.Is(err, ErrClosed) { // the context's memory went with the backend
		return nil
	}
	return err
}

// span checks a copy of n bytes at off.
func (d *DevBuf) span(op string, off int64, n int) error {
	if off < 0 || int64(n) > d.size-off {
		return fmt.Errorf("cuda: buffer %s: %d bytes at offset %d of a %d-byte buffer", op, n, off, d.size)
	}
	return nil
}

// Write queues a copy of src into the buffer at byte offset off through
// pinned staging memory (src may be reused at once); it first waits for
// the queued work when the previous write's copy may still read that
// staging memory. Writes are the host's input between steps, so such a
// wait costs no overlap of kernels.
func (d *DevBuf) Write(off int64, src []byte) error {
	if err := d.span("write", off, len(src)); err != nil || len(src) == 0 {
		return err
	}
	return d.run(writeReq, off, src, false)
}

// run runs fn in a backend call with a request for d, off and data;
// keepMemo for reads, which leave the preparation memos standing.
func (d *DevBuf) run(fn func(*mulReq) error, off int64, data []byte, keepMemo bool) error {
	r := newReq()
	defer r.free()
	r.d, r.off, r.data = d, off, data
	r.keepMemo = keepMemo
	return d.b.doReq(fn, r)
}

func writeReq(r *mulReq) error {
	d := r.d
	if d.closed.Load() {
		return ErrClosed
	}
	return stagedPutAt(d.b, d.buf.ptr+cu.DevicePtr(r.off), r.data)
}

// Read waits for the work queued before it, copies the bytes at off into
// dst and returns the first fault the queued kernels flagged.
func (d *DevBuf) Read(off int64, dst []byte) error {
	if err := d.span("read", off, len(dst)); err != nil {
		return err
	}
	return d.run(readReq, off, dst, true)
}

func readReq(r *mulReq) error {
	d := r.d
	if d.closed.Load() {
		return ErrClosed
	}
	if len(r.data) > 0 {
		if err := d.b.stagedGet(r.data, d.buf.ptr+cu.DevicePtr(r.off)); err != nil {
			return err
		}
	}
	return d.b.takeStatus()
}

// Fetch is Read without the fault report: the faults stay for the next
// Wait or Read (the host runs of operations without device kernels read
// their buffers with it).
func (d *DevBuf) Fetch(off int64, dst []byte) error {
	if err := d.span("read", off, len(dst)); err != nil || len(dst) == 0 {
		return err
	}
	return d.run(fetchReq, off, dst, true)
}

func fetchReq(r *mulReq) error {
	d := r.d
	if d.closed.Load() {
		return ErrClosed
	}
	return d.b.stagedGet(r.data, d.buf.ptr+cu.DevicePtr(r.off))
}

// stagedPutAt queues a copy of src to p through pinned staging (in a
// backend call; see stagedPut), after waiting for the stream: the staging
// buffer may still feed the previous write's copy.
func stagedPutAt(b *Backend, p cu.DevicePtr, src []byte) error {
	n := int64(len(src))
	if n > stagingMax {
		if err := cu.MemcpyHtoD(p, unsafe.Pointer(&src[0]), n); err != nil {
			return fmt.Errorf("cuda: copying %d bytes to the device: %w", n, err)
		}
		return nil
	}
	if b.bufinQueued { // the previous write's copy may still read the staging memory
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("cuda: waiting before a buffer write: %w", err)
		}
		b.bufinQueued = false
	}
	h, err := b.staging("bufin", int(n))
	if err != nil {
		return err
	}
	copy(h.bytes(int(n)), src)
	if err := b.fromPinned(h, p, n); err != nil {
		return err
	}
	b.bufinQueued = true
	return nil
}

// fromPinned queues a copy of the first n bytes of pinned memory h to p:
// as copy_bytes where the device maps pinned memory, else as a
// copy-engine transfer (in a backend call).
func (b *Backend) fromPinned(h *pinned, p cu.DevicePtr, n int64) error {
	if b.dev.mapsHost {
		return b.copyKernel(p, cu.DevicePtr(uintptr(h.p)), n, 0, 0)
	}
	if err := cu.MemcpyHtoDAsync(p, h.p, n, b.stream); err != nil {
		return fmt.Errorf("cuda: copying %d bytes to the device: %w", n, err)
	}
	return nil
}

// copyKernel queues copy_bytes: n bytes from src to dst and, where st is
// not 0, the status word at st to sto (in a backend call). Where the device
// maps pinned host memory the staged copies of buffer writes and reads,
// and of results, run as this kernel on the staging memory: it starts
// and signals sooner than a copy-engine transfer (on an H200 the FFN
// block through buffers, one write and one read, took 4-6 us less).
func (b *Backend) copyKernel(dst, src cu.DevicePtr, n int64, st, sto cu.DevicePtr) error {
	blocks := max(1, min(ceilDiv(int(n), 16*256), 4*b.dev.SMs))
	if err := b.launch("copy_bytes", blocks, 1, 256, 0, src, dst, n, st, sto); err != nil {
		return fmt.Errorf("cuda: copying %d bytes: %w", n, err)
	}
	return nil
}

// toPinned queues a copy of n bytes at p into the start of pinned memory
// h and, where st is not 0, of the status word at st to h's byte w (a
// multiple of 4): as copy_bytes where the device maps pinned memory, else
// as copy-engine transfers (in a backend call).
func (b *Backend) toPinned(h *pinned, p cu.DevicePtr, n int64, st cu.DevicePtr, w int64) error {
	if b.dev.mapsHost {
		hp := cu.DevicePtr(uintptr(h.p))
		return b.copyKernel(hp, p, n, st, hp+cu.DevicePtr(w))
	}
	if err := cu.MemcpyDtoHAsync(h.p, p, n, b.stream); err != nil {
		return fmt.Errorf("cuda: copying %d bytes from the device: %w", n, err)
	}
	if st != 0 {
		if err := cu.MemcpyDtoHAsync(unsafe.Add(h.p, w), st, 4, b.stream); err != nil {
			return fmt.Errorf("cuda: copying the status word: %w", err)
		}
	}
	return nil
}

// stagedGet copies n = len(dst) bytes at p into dst through pinned
// staging, waiting for the work queued before (in a backend call).
func (b *Backend) stagedGet(dst []byte, p cu.DevicePtr) error {
	n := int64(len(dst))
	if n > stagingMax {
		if err := cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), p, n); err != nil {
			return fmt.Errorf("cuda: copying %d bytes from the device (a kernel may have failed): %w", n, err)
		}
		return nil
	}
	// The status word comes back with the data, saving takeStatus a
	// second round trip; it lands at the first 4-byte boundary past the
	// data (copy_bytes stores it as one 32-bit word).
	w := (n + 3) &^ 3
	h, err := b.staging("bufout", int(w)+4)
	if err != nil {
		return err
	}
	sb := b.scratch["bufstatus"]
	if !b.statusQueued {
		sb = nil
	}
	var st cu.DevicePtr
	if sb != nil {
		st = sb.ptr
	}
	if err := b.toPinned(h, p, n, st, w); err != nil {
		return err
	}
	if err := b.sync(); err != nil {
		return err
	}
	out := h.bytes(int(w) + 4)
	copy(dst, out[:n])
	if sb != nil {
		b.statusFetched, b.statusValue = true, *(*uint32)(unsafe.Pointer(&out[w]))
	}
	return nil
}

// sync waits for the stream's work (in a backend call).
func (b *Backend) sync() error {
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("cuda: waiting for the device (a kernel failed): %w", err)
	}
	b.bufinQueued = false
	return nil
}

// Wait waits for the queued work and returns the first fault it flagged.
func (b *Backend) Wait() error {
	r := newReq()
	defer r.free()
	r.b = b
	return b.doReq(waitReq, r)
}

func waitReq(r *mulReq) error {
	if err := r.b.sync(); err != nil {
		return err
	}
	return r.b.takeStatus()
}

// statusWord returns the buffer kernels' status word, zeroed when first
// made (in a backend call); flagged records that a kernel which may set it was
// queued, so that takeStatus reads it.
func (b *Backend) statusWord() (cu.DevicePtr, error) {
	sb, err := b.statusBuf()
	if err != nil {
		return 0, err
	}
	b.statusQueued = true
	b.statusFetched = false // this kernel may still set it
	return sb.ptr, nil
}

// statusBuf returns the buffer of the status word, zeroed when first made
// (in a backend call).
func (b *Backend) statusBuf() (*buffer, error) {
	sb, ok := b.scratch["bufstatus"]
	if !ok {
		var err error
		if sb, err = b.scratchBuf("bufstatus", 4); err != nil {
			return nil, err
		}
		if err := cu.MemsetD32(sb.ptr, 0, 1); err != nil {
			return nil, fmt.Errorf("cuda: zeroing the status word: %w", err)
		}
	}
	return sb, nil
}

// takeStatus reads and clears the status word if a kernel that sets it
// was queued since the last read (in a backend call, after a synchronization).
func (b *Backend) takeStatus() error {
	if mats := b.ansQueued; mats != nil {
		b.ansQueued = nil
		sb := b.scratch["ansbufstatus"]
		err := checkStatus(sb, func(tag uint32) string {
			if int(tag) < len(mats) {
				m := mats[tag]
				return fmt.Sprintf("the %dx%d %s matrix of MulInt32Buffer number %d since the last Wait", m.Rows(), m.Cols(), m.Kernel(), tag+1)
			}
			return "an int8 matrix"
		})
		if err != nil {
			if zerr := cu.MemsetD32(sb.ptr, 0, 4); zerr != nil {
				return fmt.Errorf("cuda: clearing the status: %w", zerr)
			}
			return err
		}
	}
	if !b.statusQueued {
		return nil
	}
	b.statusQueued = false
	sb := b.scratch["bufstatus"]
	st := b.statusValue // stagedGet brought it back after the last kernel
	if !b.statusFetched {
		var err error
		if st, err = readWord(sb); err != nil {
			return err
		}
	}
	b.statusFetched = false
	if st == 0 {
		return nil
	}
	if err := cu.MemsetD32(sb.ptr, 0, 1); err != nil {
		return fmt.Errorf("cuda: clearing the status word: %w", err)
	}
	return errors.New("cuda: an activation quantized on the device was NaN or infinite (its results are not valid)")
}

// readWord copies the first 32-bit word of sb to the host (in a backend call).
func readWord(sb *buffer) (uint32, error) {
	var st [1]uint32
	err := download(sb, st[:])
	return st[0], err
}

// devPtr returns the memory of a buffer of this backend.
func (b *Backend) devPtr(what string, x devbuf.Buf) (cu.DevicePtr, error) {
	d, ok := x.(*DevBuf)
	if !ok || d == nil || d.b != b {
		return 0, fmt.Errorf("cuda: %s buffer is not one of this backend's", what)
	}
	if d.closed.Load() {
		return 0, fmt.Errorf("cuda: %s buffer: %w", what, ErrClosed)
	}
	return d.buf.ptr, nil
}

// sizeOf returns x's size in bytes, or the most an int64 holds for what
// is not a buffer (nil, a typed nil): devPtr reports those.
func sizeOf(x devbuf.Buf) int64 {
	if d, ok := x.(*DevBuf); x == nil || ok && d == nil {
		return math.MaxInt64
	}
	return x.Size()
}

// use is operand what of an operation touching need bytes of x.
func use(what string, x devbuf.Buf, need int64) gpuhost.Use {
	return gpuhost.Use{What: what, Have: sizeOf(x), Need: need}
}

// devBufs resolves buffers (devPtr) in order.
func (b *Backend) devBufs(names []string, bufs ...devbuf.Buf) (out [3]cu.DevicePtr, err error) {
	for i, x := range bufs {
		if out[i], err = b.devPtr(names[i], x); err != nil {
			return out, err
		}
	}
	return out, nil
}

// bufOp runs fn in a backend call with a request holding the buffers
// (at most three, named by names for errors), n and the extra argument.
func (b *Backend) bufOp(fn func(*mulReq) error, name string, n int, names []string, extra uint64, bufs ...devbuf.Buf) error {
	r := newReq()
	defer r.free()
	r.b, r.name, r.n, r.names, r.arg = b, name, n, names, extra
	r.nbufs = copy(r.bufs[:], bufs)
	return b.doReq(fn, r)
}

// elementwise queues a one-thread-per-element kernel on n elements of
// two or three buffers, with an extra 64-bit argument when withArg.
func (b *Backend) elementwise(name string, n int, names []string, extra uint64, bufs ...devbuf.Buf) error {
	if err := gpuhost.CheckElementwise("cuda", name, n); err != nil {
		return err
	}
	var uses [3]gpuhost.Use
	for i, x := range bufs[:min(len(bufs), 3)] {
		uses[i] = use(names[i], x, 4*int64(n))
	}
	if err := gpuhost.CheckUses("cuda", name, uses[:min(len(bufs), 3)]...); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return b.bufOp(elementwiseReq, name, n, names, extra, bufs...)
}

func elementwiseReq(r *mulReq) error {
	b := r.b
	ps, err := b.devBufs(r.names, r.bufs[:r.nbufs]...)
	if err != nil {
		return err
	}
	gx, n := ceilDiv(r.n, 256), int64(r.n)
	if r.name == "swiglu" && b.capturing { // the next request queues it, or an A8 multiply computes it
		b.swiPend = swiglu{d: ps[0], g: ps[1], u: ps[2], n: n}
		return nil
	}
	if r.nbufs == 3 {
		return b.launch(r.name, gx, 1, 256, 0, ps[0], ps[1], ps[2], n)
	}
	return b.launch(r.name, gx, 1, 256, 0, ps[0], ps[1], r.arg, n)
}

var (
	namesDGU = []string{"dst", "gate", "up"}
	namesDAB = []string{"dst", "a", "b"}
	namesDA  = []string{"dst", "a"}
	namesDS  = []string{"dst", "src"}
)

// swiglu is a SwiGLU of n values deferred during a capture (swiPend):
// d = silu(g) * u.
type swiglu struct {
	d, g, u cu.DevicePtr
	n       int64
}

// swiIn, where u is not 0, makes an activation preparation (the A8
// quantization, the binary16 gather) compute its input x as the SwiGLU
// of g and u, storing it to x as it goes.
type swiIn struct{ g, u cu.DevicePtr }

// args returns what the preparation kernels take for input x: the
// values they read, u and where they store the SwiGLU's values.
func (sw swiIn) args(x cu.DevicePtr) (src, u, h cu.DevicePtr) {
	if sw.u == 0 {
		return x, 0, 0
	}
	return sw.g, sw.u, x
}

// takeSwiGLU returns, for a multiply on buffers of batch vectors of cols
// values at x, the SwiGLU deferred in a capture when it wrote exactly
// those values (the preparation computes it), or queues the deferred one
// and returns none (in a backend call).
func (b *Backend) takeSwiGLU(x cu.DevicePtr, batch, cols int) (swiIn, error) {
	p := b.swiPend
	if p.n == 0 {
		return swiIn{}, nil
	}
	b.swiPend = swiglu{}
	if p.d == x && p.n == int64(batch)*int64(cols) {
		return swiIn{g: p.g, u: p.u}, nil
	}
	return swiIn{}, b.queueSwiGLU(p)
}

// queueSwiGLU queues p (in a backend call).
func (b *Backend) queueSwiGLU(p swiglu) error {
	return b.launch("swiglu", ceilDiv(int(p.n), 256), 1, 256, 0, p.d, p.g, p.u, p.n)
}

// SwiGLU queues dst[i] = g[i] / (1 + exp(-g[i])) * u[i], i < n. During a
// capture it is deferred to the next request, which an A8 or binary16
// multiply of dst (all of it) takes into its activation preparation.
func (b *Backend) SwiGLU(dst, g, u devbuf.Buf, n int) error {
	return b.elementwise("swiglu", n, namesDGU, 0, dst, g, u)
}

// Add queues dst[i] = a[i] + c[i], i < n.
func (b *Backend) Add(dst, a, c devbuf.Buf, n int) error {
	return b.elementwise("add_f32", n, namesDAB, 0, dst, a, c)
}

// Scale queues dst[i] = s * a[i], i < n.
func (b *Backend) Scale(dst, a devbuf.Buf, s float32, n int) error {
	if err := gpuhost.CheckScalar("cuda", "scale", s); err != nil {
		return err
	}
	return b.elementwise("scale_f32", n, namesDA, uint64(math.Float32bits(s)), dst, a)
}

// Requantize queues dst[i] = int8(round_half_even(alpha * src[i])),
// clamped, i < n (ans.cu's ans_requant: src first).
func (b *Backend) Requantize(dst, src devbuf.Buf, alpha float32, n int) error {
	if err := gpuhost.CheckScalar("cuda", "requantize", alpha); err != nil {
		return err
	}
	if err := gpuhost.CheckElementwise("cuda", "requantize", n); err != nil {
		return err
	}
	if err := gpuhost.CheckUses("cuda", "requantize", use("dst", dst, int64(n)), use("src", src, 4*int64(n))); err != nil || n == 0 {
		return err
	}
	return b.bufOp(requantizeReq, "ans_requant", n, namesDS, uint64(math.Float32bits(alpha)), dst, src)
}

func requantizeReq(r *mulReq) error {
	b := r.b
	ps, err := b.devBufs(r.names, r.bufs[:2]...)
	if err != nil {
		return err
	}
	return b.launch(r.name, ceilDiv(r.n, 256), 1, 256, 0, ps[1], ps[0], int64(r.n), r.arg)
}

// colTables returns the matrix's gather tables (in a backend call), made on
// first use: nat maps each stored column to its source column (the
// act-order permutation; -1 for padding), mma is nat in the tensor-core
// kernels' fragment order (gpuhost.MMAOrder), or nil where the matrix
// does not run on tensor cores.
func (mx *Matrix) colTables() (nat, mma *buffer, err error) {
	if mx.nat != nil {
		return mx.nat, mx.mma, nil
	}
	pc := mx.geo.PCols
	idx := gpuhost.GatherIndex(mx.geo.Cols, pc, mx.perm)
	var order []int32
	if mx.useMMA() {
		n := 0
		if mx.f == fmtBits {
			n = mx.n
		}
		if order, err = gpuhost.MMAIndex(n, pc); err != nil {
			return nil, nil, err
		}
		for i, c := range order {
			order[i] = idx[c]
		}
	}
	var nb, mb *buffer
	if err := uploadAll(into(&nb, idx)); err != nil {
		return nil, nil, err
	}
	if order != nil {
		if err := uploadAll(into(&mb, order)); err != nil {
			nb.free()
			return nil, nil, err
		}
	}
	mx.nat, mx.mma = nb, mb
	return nb, mb, nil
}

// a8Table returns the device copy of the Bits A8 tensor-core kernels'
// fragment order (gpuhost.A8FragOrder), made on first use (in a backend call).
func (mx *Matrix) a8Table() (*buffer, error) {
	if mx.a8t != nil {
		return mx.a8t, nil
	}
	tab, err := gpuhost.A8FragOrder(mx.n)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if err := uploadAll(into(&mx.a8t, tab)); err != nil {
		return nil, err
	}
	return mx.a8t, nil
}

// withWords runs f with the matrix's words in place: an entropy-coded
// matrix's are decoded into scratch first (in a backend call).
func (mx *Matrix) withWords(f func() error) error {
	if mx.coded == nil {
		return f()
	}
	w, err := mx.decodeWords()
	if err != nil {
		return err
	}
	saved := mx.w
	mx.w = w // the kernels read the decoded words; Close keeps freeing the placeholder
	defer func() { mx.w = saved }()
	return f()
}

// MulF16Buf queues dst = W x for batch float32 vectors in device memory,
// rounded to binary16 on the device: MulF16 of the rounded values.
func (mx *Matrix) MulF16Buf(dst, x devbuf.Buf, batch int) error {
	if err := gpuhost.CheckBufs("cuda", "multiply", batch, use("dst", dst, mx.geo.OutBytes(batch)), use("x", x, mx.geo.InBytes(batch, 4))); err != nil {
		return err
	}
	return mx.swiOp(mulF16BufReq, batch, true, dst, x)
}

// swiOp runs a multiply on buffers dst and x that may take a SwiGLU
// deferred in a capture (takeSwiGLU) into its activation preparation.
func (mx *Matrix) swiOp(fn func(*mulReq) error, batch int, keepMemo bool, dst, x devbuf.Buf) error {
	r := newReq()
	defer r.free()
	r.mx, r.names, r.batch, r.keepMemo, r.takesSwiGLU = mx, namesDX, batch, keepMemo, true
	r.bufs[0], r.bufs[1], r.nbufs = dst, x, 2
	return mx.doReq(fn, r)
}

func mulF16BufReq(r *mulReq) error {
	mx := r.mx
	ps, err := mx.b.devBufs(r.names, r.bufs[:2]...)
	if err != nil {
		return err
	}
	sw, err := mx.b.takeSwiGLU(ps[1], r.batch, mx.geo.Cols)
	if err != nil {
		return err
	}
	if err := mx.mulF16Dev(ps[0], ps[1], false, r.batch, sw); err != nil {
		return err
	}
	mx.b.memoWrote(span{ps[0], 4 * int64(r.batch*mx.geo.Rows)})
	return nil
}

// bufOp runs fn in a backend call, unless the matrix is closed by
// then, with a request holding the buffers (named by names for errors)
// and batch; keepMemo for the multiplies, which leave the preparation
// memos of earlier multiplies standing (memo.go).
func (mx *Matrix) bufOp(fn func(*mulReq) error, names []string, batch int, keepMemo bool, bufs ...devbuf.Buf) error {
	r := newReq()
	defer r.free()
	r.mx, r.names, r.batch, r.keepMemo = mx, names, batch, keepMemo
	r.nbufs = copy(r.bufs[:], bufs)
	return mx.doReq(fn, r)
}

// mulF16Dev queues y = W x for batch vectors at x in device memory:
// float32 rounded to binary16, or binary16 when half (in a backend call). The
// gather puts them in the float kernel's order in the scratch buffer "x"
// (with the block sums in "xsum" for the Bits tensor-core kernels).
func (mx *Matrix) mulF16Dev(y, x cu.DevicePtr, half bool, batch int, sw swiIn) error {
	b := mx.b
	nat, mma, err := mx.colTables()
	if err != nil {
		return err
	}
	pc := mx.geo.PCols
	nv, _ := bucket(batch)
	name, idx, S := mx.floatKernel("f16", batch), nat, pc
	if mma != nil {
		nv = mmaSlots(batch)
		name, _ = mx.mmaKernel(nv)
		idx, S = mma, 16
	}
	xb, err := b.scratchBuf("x", 2*int64(nv*pc))
	if err != nil {
		return err
	}
	gather, sum := "gather_f16", "xsum_f16"
	elem := int64(4)
	if half {
		gather, sum, elem = "gather_h16", "xsum_h16", 2
	}
	var sb *buffer // the Bits tensor-core kernels' block sums
	if mma != nil && mx.f == fmtBits {
		if sb, err = b.scratchBuf("xsum", 4*int64(nv*pc/128)); err != nil {
			return err
		}
	}
	key := prepKey{half: half, in: [2]span{{x, elem * int64(batch*mx.geo.Cols)}}, tab: mx.sig(), batch: batch, nv: nv}
	if hit := b.memoHit(prepF16, key); !hit || sw.u != 0 { // a SwiGLU to compute is never skipped
		var err error
		if half {
			err = b.launch(gather, ceilDiv(nv*pc, 256), 1, 256, 0, x, idx.ptr, xb.ptr,
				int64(batch), int64(mx.geo.Cols), int64(pc), int64(nv), int64(S))
		} else {
			src, u, h := sw.args(x) // then xsum reads the values stored to x
			err = b.launch(gather, ceilDiv(nv*pc, 256), 1, 256, 0, src, idx.ptr, xb.ptr,
				int64(batch), int64(mx.geo.Cols), int64(pc), int64(nv), int64(S), u, h)
		}
		if err != nil {
			return err
		}
		if sb != nil {
			if err := b.launch(sum, ceilDiv(nv*pc/128, 8), 1, 256, 0, x, nat.ptr, sb.ptr,
				int64(batch), int64(mx.geo.Cols), int64(pc), int64(nv)); err != nil {
				return err
			}
		}
	}
	return mx.withWords(func() error {
		return mx.launch(name, nil, y, batch)
	})
}

var (
	namesDX  = []string{"dst", "x"}
	namesQSX = []string{"xq", "xs", "x"}
	namesDQS = []string{"dst", "xq", "xs"}
)

// QuantizeBuf queues the quantization of batch float32 vectors in device
// memory to int8 per 128 stored columns, bit-exact with
// layout.QuantizeA8 (act-order matrices gather first): xq receives
// batch*PCols values, xs batch*PCols/128 scales. A NaN or infinity is
// reported by the next Wait or Read.
func (mx *Matrix) QuantizeBuf(xq, xs, x devbuf.Buf, batch int) error {
	g := mx.geo
	if err := gpuhost.CheckBufs("cuda", "multiply", batch, use("xq", xq, g.QBytes(batch)), use("xs", xs, g.SBytes(batch)), use("x", x, g.InBytes(batch, 4))); err != nil {
		return err
	}
	return mx.bufOp(quantizeBufReq, namesQSX, batch, false, xq, xs, x)
}

func quantizeBufReq(r *mulReq) error {
	b := r.mx.b
	ps, err := b.devBufs(r.names, r.bufs[:3]...)
	if err != nil {
		return err
	}
	st, err := b.statusWord()
	if err != nil {
		return err
	}
	return r.mx.quantize(ps[0], ps[1], ps[2], st, r.batch, swiIn{})
}

// quantize queues quant_a8 (in a backend call), flagging a NaN or infinity in
// the status word st. Without an act-order permutation the kernel reads
// x in place (a null gather table).
func (mx *Matrix) quantize(xq, xs, x, st cu.DevicePtr, batch int, sw swiIn) error {
	var nat cu.DevicePtr
	if mx.perm != nil {
		nb, _, err := mx.colTables()
		if err != nil {
			return err
		}
		nat = nb.ptr
	}
	pc := mx.geo.PCols
	if mx.f == fmtQ4 && mx.useA8MMA() && mx.sig().ok {
		return mx.quantizeQ4(xq, xs, x, st, nat, batch, sw)
	}
	warpsTotal := batch * pc / 128
	src, u, h := sw.args(x)
	return mx.b.launch("quant_a8", ceilDiv(warpsTotal, 8), 1, 256, 0, src, nat, xq, xs, st,
		int64(batch), int64(mx.geo.Cols), int64(pc), u, h)
}

// a8mmaScratch returns the scratch buffers of the int8 tensor-core
// kernels' inputs for nv vector slots of pc columns: "xq0" (the
// activations in the kernels' order, a8XR in buffers.cu: every slot's
// place, filled or not) and "xm" (per block and slot, the scale's bits
// and the block sum) (in a backend call).
func (b *Backend) a8mmaScratch(nv, pc int64) (rb, mb *buffer, err error) {
	if rb, err = b.scratchBuf("xq0", nv*pc); err != nil {
		return nil, nil, err
	}
	mb, err = b.scratchBuf("xm", 8*nv*pc/128)
	return rb, mb, err
}

// quantizeQ4 is quantize for a Q4G128 matrix on the int8 tensor cores:
// quant_a8_q4 also writes the inputs a8_prep would (the scratch "xq0" and
// "xm", as mulI8Dev allocates them) and records them as the prepA8 memo of
// xq and xs, so that a multiply of this or a like matrix reading them next
// skips a8_prep (in a backend call).
func (mx *Matrix) quantizeQ4(xq, xs, x, st, nat cu.DevicePtr, batch int, sw swiIn) error {
	b := mx.b
	pc := int64(mx.geo.PCols)
	n := int64(batch) * pc
	nv := int64(mmaSlots(batch))
	rb, mb, err := b.a8mmaScratch(nv, pc)
	if err != nil {
		return err
	}
	src, u, h := sw.args(x)
	if err := b.launch("quant_a8_q4", ceilDiv(int(nv*pc/128), 8), 1, 256, 0, src, nat, xq, xs, st, mb.ptr, rb.ptr,
		int64(batch), int64(mx.geo.Cols), pc, nv, u, h); err != nil {
		return err
	}
	b.memoHit(prepA8, prepKey{in: [2]span{{xq, n}, {xs, 4 * n / 128}}, tab: mx.sig(), batch: batch, nv: int(nv)})
	return nil
}

// MulI8Buf queues dst = W x for int8 activations in device memory
// (QuantizeBuf's xq and xs): MulI8, bit-exact.
func (mx *Matrix) MulI8Buf(dst, xq, xs devbuf.Buf, batch int) error {
	if mx.a8err != nil {
		return fmt.Errorf("cuda: %w", mx.a8err)
	}
	g := mx.geo
	if err := gpuhost.CheckBufs("cuda", "multiply", batch, use("dst", dst, g.OutBytes(batch)), use("xq", xq, g.QBytes(batch)), use("xs", xs, g.SBytes(batch))); err != nil {
		return err
	}
	return mx.bufOp(mulI8BufReq, namesDQS, batch, true, dst, xq, xs)
}

func mulI8BufReq(r *mulReq) error {
	mx := r.mx
	ps, err := mx.b.devBufs(r.names, r.bufs[:3]...)
	if err != nil {
		return err
	}
	if err := mx.mulI8Dev(ps[0], ps[1], ps[2], r.batch); err != nil {
		return err
	}
	mx.b.memoWrote(span{ps[0], 4 * int64(r.batch*mx.geo.Rows)})
	return nil
}

// MulA8Buf quantizes batch float32 vectors in device memory and
// multiplies them: MulA8, bit-exact.
func (mx *Matrix) MulA8Buf(dst, x devbuf.Buf, batch int) error {
	if mx.a8err != nil {
		return fmt.Errorf("cuda: %w", mx.a8err)
	}
	if err := gpuhost.CheckBufs("cuda", "multiply", batch, use("dst", dst, mx.geo.OutBytes(batch)), use("x", x, mx.geo.InBytes(batch, 4))); err != nil {
		return err
	}
	return mx.swiOp(mulA8BufReq, batch, false, dst, x)
}

func mulA8BufReq(r *mulReq) error {
	b := r.mx.b
	ps, err := b.devBufs(r.names, r.bufs[:2]...)
	if err != nil {
		return err
	}
	sw, err := b.takeSwiGLU(ps[1], r.batch, r.mx.geo.Cols)
	if err != nil {
		return err
	}
	st, err := b.statusWord()
	if err != nil {
		return err
	}
	return r.mx.mulA8Dev(ps[0], ps[1], st, r.batch, sw)
}

// mulA8Dev queues the quantization of batch float32 vectors at x into
// the scratch buffers "aq" and "as" and the multiply into y (in a backend call).
func (mx *Matrix) mulA8Dev(y, x, st cu.DevicePtr, batch int, sw swiIn) error {
	b := mx.b
	pc := int64(mx.geo.PCols)
	qb, err := b.scratchBuf("aq", int64(batch)*pc)
	if err != nil {
		return err
	}
	sb, err := b.scratchBuf("as", 4*int64(batch)*pc/128)
	if err != nil {
		return err
	}
	if err := mx.quantize(qb.ptr, sb.ptr, x, st, batch, sw); err != nil {
		return err
	}
	return mx.mulI8Dev(y, qb.ptr, sb.ptr, batch)
}

// hostCall runs a multiply of host slices on the device (in a backend call):
// put copies the activations in (through pinned staging, queued), enqueue
// queues the kernels writing dst's values into y and, with status, may
// flag the status word st (a NaN reaching quant_a8; without status st is
// 0); one copy brings the results and the status back, one wait. Where
// the device addresses pinned memory (and no kernel adds into y with
// atomics: Options.Mode Atomic), y is the pinned buffer itself: the
// kernels' stores cross the bus as they are made, and the call waits
// without a queued copy; there the kernels of op at this batch run as a
// graph from the second call on (runHost).
func (mx *Matrix) hostCall(dst []float32, op hostOp, batch int, status bool, put func() error, enqueue func(y, st cu.DevicePtr) error) error {
	b := mx.b
	n := 4 * int64(len(dst))
	if b.readsPinned(n) && b.opts.Mode != Atomic {
		return mx.hostCallMapped(dst, op, batch, status, put, enqueue)
	}
	yb, err := b.scratchBuf("y", n+4)
	if err != nil {
		return err
	}
	st := yb.ptr + cu.DevicePtr(n)
	var word *uint32 // the status word in pinned memory (pinnedStatus)
	if status {
		w, dev, ok, err := b.pinnedStatus()
		switch {
		case err != nil:
			return err
		case ok:
			word, st = w, dev
			status = false // no device word to copy back
		default:
			if err := cu.MemsetD32Async(st, 0, 1, b.stream); err != nil {
				return fmt.Errorf("cuda: zeroing the status word: %w", err)
			}
		}
	} else {
		st = 0
	}
	if err := put(); err != nil {
		_ = cu.Synchronize() // queued copies finish before their staging is reused
		return err
	}
	if err := enqueue(yb.ptr, st); err != nil {
		_ = cu.Synchronize()
		return err
	}
	var flag uint32
	if n+4 > stagingMax {
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("cuda: waiting for the multiply (a kernel may have failed): %w", err)
		}
		if err := download(yb, dst); err != nil {
			return err
		}
		if status {
			var f [1]uint32
			if err := cu.MemcpyDtoH(unsafe.Pointer(&f[0]), st, 4); err != nil {
				return fmt.Errorf("cuda: copying the status word: %w", err)
			}
			flag = f[0]
		}
	} else {
		h, err := b.staging("out", int(n+4))
		if err != nil {
			return err
		}
		m := n
		if status {
			m += 4
		}
		if err := cu.MemcpyDtoHAsync(h.p, yb.ptr, m, b.stream); err != nil {
			return fmt.Errorf("cuda: copying %d bytes from the device: %w", m, err)
		}
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("cuda: waiting for the multiply (a kernel may have failed): %w", err)
		}
		out := h.bytes(int(n + 4))
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), n), out)
		if status {
			flag = *(*uint32)(unsafe.Pointer(&out[n]))
		}
	}
	if word != nil {
		flag = *word
	}
	if flag != 0 {
		return errNonFinite
	}
	return nil
}

// hostCallMapped is hostCall with the results and the status word in
// pinned host memory the kernels write directly (Device.mapsHost).
func (mx *Matrix) hostCallMapped(dst []float32, op hostOp, batch int, status bool, put func() error, enqueue func(y, st cu.DevicePtr) error) error {
	b := mx.b
	n := 4 * len(dst)
	var word *uint32
	var st cu.DevicePtr
	if status { // pinned, as the device maps host memory
		var err error
		if word, st, _, err = b.pinnedStatus(); err != nil {
			return err
		}
	}
	h, err := b.staging("out", n)
	if err != nil {
		return err
	}
	if err := put(); err != nil {
		_ = cu.Synchronize() // queued copies finish before their staging is reused
		return err
	}
	if err := mx.runHost(op, batch, enqueue, cu.DevicePtr(uintptr(h.p)), st); err != nil {
		_ = cu.Synchronize()
		return err
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("cuda: waiting for the multiply (a kernel may have failed): %w", err)
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), n), h.bytes(n))
	if word != nil && *word != 0 {
		return errNonFinite
	}
	return nil
}

// errNonFinite is hostCall's error for a NaN or infinity met by quant_a8.
var errNonFinite = errors.New("cuda: an activation is NaN or infinite")

// mulI8Dev prepares the A8 kernel's inputs from int8 activations in
// natural stored order (xq) and queues the multiply (in a backend call).
func (mx *Matrix) mulI8Dev(dst, xq, xs cu.DevicePtr, batch int) error {
	b := mx.b
	pc := int64(mx.geo.PCols)
	n := int64(batch) * pc
	var ptrs []cu.DevicePtr
	var sx cu.DevicePtr
	sums := func(blk int64) error {
		sb, err := b.scratchBuf("sx", 4*n/blk)
		if err != nil {
			return err
		}
		sx = sb.ptr
		return b.launch("a8_sums", ceilDiv(int(n/blk), 8), 1, 256, 0, xq, sb.ptr, n, blk)
	}
	if !mx.useA8MMA() { // the other kernels' preparations may overwrite "xq0"
		b.memo[prepA8] = prepKey{}
	}
	switch {
	case mx.useA8MMA(): // fragment order placed by a8XR; scales and sums per block and vector slot (a8_prep)
		var tab cu.DevicePtr // Q4G128: a8_q4order's order (e = 0)
		var e int64
		if mx.f != fmtQ4 {
			t, err := mx.a8Table()
			if err != nil {
				return err
			}
			tab, e = t.ptr, int64(1024/mx.n)
		}
		nv := int64(mmaSlots(batch))
		rb, mb, err := b.a8mmaScratch(nv, pc)
		if err != nil {
			return err
		}
		ptrs, sx = []cu.DevicePtr{rb.ptr}, mb.ptr
		key := prepKey{in: [2]span{{xq, n}, {xs, 4 * n / 128}}, tab: mx.sig(), batch: batch, nv: int(nv)}
		if !b.memoHit(prepA8, key) {
			if err := b.launch("a8_prep", ceilDiv(int(nv*pc/128), 8), 1, 256, 0, xq, xs, mb.ptr, rb.ptr, tab, int64(batch), pc, nv, e); err != nil {
				return err
			}
		}
	case mx.f == fmtQ4:
		rb, err := b.scratchBuf("xq0", n)
		if err != nil {
			return err
		}
		if err := b.launch("a8_q4order", ceilDiv(int(n/8), 256), 1, 256, 0, xq, rb.ptr, n); err != nil {
			return err
		}
		ptrs = []cu.DevicePtr{rb.ptr}
		if err := sums(128); err != nil {
			return err
		}
	case mx.f == fmtBits:
		if err := sums(int64(min(mx.g, 128))); err != nil {
			return err
		}
		ptrs = []cu.DevicePtr{xq}
	default:
		eb, err := b.scratchBuf("xq0", n/2)
		if err != nil {
			return err
		}
		ob, err := b.scratchBuf("xq1", n/2)
		if err != nil {
			return err
		}
		if err := b.launch("a8_split", ceilDiv(int(n/2), 256), 1, 256, 0, xq, eb.ptr, ob.ptr, n); err != nil {
			return err
		}
		ptrs = []cu.DevicePtr{eb.ptr, ob.ptr}
	}
	return mx.withWords(func() error {
		name, lead := mx.a8Args(ptrs, xs, sx, batch)
		return mx.launch(name, &lead, dst, batch)
	})
}

// MulI32Buf has no device path for these formats (they have scales):
// the host path returns MulI32's error.
func (mx *Matrix) MulI32Buf(dst, x devbuf.Buf, batch int) error { return devbuf.ErrNoDevicePath }

// The int8 matrices (Int8Matrix, ANSMatrix) multiply int8 Bufs on the
// device (MulI32Buf); their other multiplies have no path anywhere.
func (int8Only) MulF16Buf(dst, x devbuf.Buf, batch int) error      { return devbuf.ErrNoDevicePath }
func (int8Only) QuantizeBuf(xq, xs, x devbuf.Buf, batch int) error { return devbuf.ErrNoDevicePath }
func (int8Only) MulI8Buf(dst, xq, xs devbuf.Buf, batch int) error  { return devbuf.ErrNoDevicePath }
func (int8Only) MulA8Buf(dst, x devbuf.Buf, batch int) error       { return devbuf.ErrNoDevicePath }

// MulI32Buf queues dst = W x exactly for batch int8 vectors in device
// memory; a corrupted stream is reported by the next Wait or Read.
func (mx *ANSMatrix) MulI32Buf(dst, x devbuf.Buf, batch int) error {
	return mulI32Buf(mx, dst, x, batch)
}

// MulI32Buf queues dst = W x exactly for batch int8 vectors in device
// memory.
func (mx *Int8Matrix) MulI32Buf(dst, x devbuf.Buf, batch int) error {
	return mulI32Buf(mx, dst, x, batch)
}

func mulI32Buf(mx ChainMat, dst, x devbuf.Buf, batch int) error {
	if err := gpuhost.CheckBufs("cuda", "mul int32", batch, use("dst", dst, 4*int64(batch)*int64(mx.Rows())), use("x", x, int64(batch)*int64(mx.Cols()))); err != nil {
		return err
	}
	b := mx.backend()
	r := newReq()
	defer r.free()
	r.cm, r.names, r.batch = mx, namesDX, batch
	r.nbufs = copy(r.bufs[:], []devbuf.Buf{dst, x})
	return b.doReq(mulI32BufReq, r)
}

func mulI32BufReq(r *mulReq) error {
	mx := r.cm
	b := mx.backend()
	if mx.isClosed() {
		return ErrClosed
	}
	ps, err := b.devBufs(r.names, r.bufs[:2]...)
	if err != nil {
		return err
	}
	sb, err := b.ansStatus()
	if err != nil {
		return err
	}
	// An entropy-coded matrix may find its stream corrupt: its launches
	// carry a tag naming it in the status (takeStatus). Plain int8
	// matrices never flag it.
	tag := 0
	if _, ok := mx.(*ANSMatrix); ok {
		if tag = slices.Index(b.ansQueued, mx); tag < 0 {
			tag = len(b.ansQueued)
			b.ansQueued = append(b.ansQueued, mx)
		}
		b.capTags = max(b.capTags, tag+1)
	}
	rows, cols := mx.Rows(), mx.Cols()
	for v := 0; v < r.batch; v++ {
		if err := mx.enqueue(ps[1]+cu.DevicePtr(v*cols), ps[0]+cu.DevicePtr(4*v*rows), sb.ptr, int64(tag)); err != nil {
			return err
		}
	}
	return nil
}

// ansStatus returns the status buffer of the int8 multiplies on buffers,
// zeroed when first made (in a backend call).
func (b *Backend) ansStatus() (*buffer, error) {
	if sb, ok := b.scratch["ansbufstatus"]; ok {
		return sb, nil
	}
	sb, err := b.scratchBuf("ansbufstatus", 16)
	if err != nil {
		return nil, err
	}
	if err := cu.MemsetD32(sb.ptr, 0, 4); err != nil {
		return nil, fmt.Errorf("cuda: zeroing the status: %w", err)
	}
	return sb, nil
}
