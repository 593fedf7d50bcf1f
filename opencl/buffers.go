//go:build opencl

package opencl

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/qgemv/qgemv/internal/devbuf"
	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/layout"
)

// Device-resident buffers (the dispatch.Device and DeviceMatrix
// interfaces): vectors in device memory, operations queued on the
// backend's in-order queue in call order. The int8 and binary16
// multiplies of Q4G128, Bits and Sparse12 matrices run on the device
// (quantization included, bit-exact with layout.QuantizeA8), and so do
// the int8 and ANS matrices' exact multiplies and the element-wise
// operations; the rest returns devbuf.ErrNoDevicePath and the caller runs
// it on the host between a read and a write.

//go:embed buffers.cl
var buffersSource string

// errNonFinite is the fault the on-device quantization reports.
var errNonFinite = errors.New("opencl: an activation is NaN or infinite")

// Buf is device memory of a Backend (devbuf.Buf).
type Buf struct {
	b    *Backend
	buf  *buffer
	size int // the bytes asked for (the buffer may be larger)
}

var _ devbuf.Buf = (*Buf)(nil)

// NewBuf allocates size bytes of device memory, zeroed.
func (b *Backend) NewBuf(size int64) (devbuf.Buf, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	inf := b.x.dev.info
	if size < 1 || size > math.MaxInt32 || (inf.GlobalMem > 0 && size > inf.GlobalMem) {
		return nil, fmt.Errorf("opencl: %s: a buffer of %d bytes (the device has %d)", inf.Name, size, inf.GlobalMem)
	}
	buf, err := b.x.newBuffer(int(size), false, inf.Unified)
	if err != nil {
		return nil, err
	}
	if err := b.x.zero(buf, buf.size); err != nil {
		buf.release()
		return nil, err
	}
	return &Buf{b: b, buf: buf, size: int(size)}, nil
}

// Size returns the buffer's bytes.
func (d *Buf) Size() int64 { return int64(d.size) }

// Close releases the buffer; a second Close returns ErrClosed, as every
// later use does.
func (d *Buf) Close() error {
	if d == nil || d.b == nil { // a deferred Close after a failed Open or Load
		return ErrClosed
	}
	d.b.mu.Lock()
	defer d.b.mu.Unlock()
	if d.buf.m == nil {
		return ErrClosed
	}
	d.buf.release()
	return nil
}

func (d *Buf) span(op string, off int64, n int) error {
	if d.buf.m == nil {
		return fmt.Errorf("opencl: %s of a closed buffer: %w", op, ErrClosed)
	}
	if off < 0 || off > int64(d.size)-int64(n) {
		return fmt.Errorf("opencl: %s of %d bytes at %d: the buffer holds %d", op, n, off, d.size)
	}
	return nil
}

// Write queues a copy of src to the buffer at byte offset off, after the
// work queued before it; src may be reused at once (the bytes go through
// pinned staging memory, the transfer does not block).
func (d *Buf) Write(off int64, src []byte) error { return d.copyAt("write", off, src, true) }

// Read waits for the queued work, copies the buffer at byte offset off
// to dst and returns the first fault the queued work met. The data and
// the status word come back in transfers queued together and waited for
// once.
func (d *Buf) Read(off int64, dst []byte) error {
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if err := d.span("read", off, len(dst)); err != nil {
		return err
	}
	return b.readBack(d.buf, int(off), dst)
}

// readBack is Read on a device buffer (b.mu held): the data and the
// status word come back in transfers queued together and waited for
// once.
func (b *Backend) readBack(buf *buffer, off int, dst []byte) error {
	data, word, err := b.x.readQueued(buf, off, len(dst), b.status)
	if err != nil {
		return err
	}
	if data == nil && len(dst) > 0 { // past the staging memory: a blocking read, then Wait's
		if err := b.x.read(buf, off, unsafe.Pointer(&dst[0]), len(dst)); err != nil {
			return err
		}
	}
	if err := b.x.finish(); err != nil {
		return err
	}
	if data != nil {
		copy(dst, unsafe.Slice((*byte)(data), len(dst)))
	}
	return b.waitDone(word)
}

// Fetch is Read that leaves the faults for the next Wait or Read.
func (d *Buf) Fetch(off int64, dst []byte) error { return d.copyAt("read", off, dst, false) }

// copyAt copies p into the buffer at byte offset off (write) or the
// buffer's bytes there into p, in queue order.
func (d *Buf) copyAt(op string, off int64, p []byte, write bool) error {
	b := d.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if err := d.span(op, off, len(p)); err != nil || len(p) == 0 {
		return err
	}
	if write {
		return b.x.writeAsync(d.buf, int(off), unsafe.Pointer(&p[0]), len(p))
	}
	return b.x.read(d.buf, int(off), unsafe.Pointer(&p[0]), len(p))
}

// bufOf returns the device buffer of a Buf of this backend, operand i
// of operation op (named in the error).
func (b *Backend) bufOf(op string, i int, v devbuf.Buf) (*buffer, error) {
	d, ok := v.(*Buf)
	if !ok || d == nil || d.b != b {
		return nil, fmt.Errorf("opencl: %s: operand %d is not a buffer of this backend", op, i)
	}
	if d.buf.m == nil {
		return nil, fmt.Errorf("opencl: %s: operand %d: %w", op, i, ErrClosed)
	}
	return d.buf, nil
}

// bufs3 resolves up to three Bufs (nil: none) of an operation.
func (b *Backend) bufs3(op string, x, y, z devbuf.Buf) (bx, by, bz *buffer, err error) {
	if bx, err = b.bufOf(op, 0, x); err != nil {
		return
	}
	if by, err = b.bufOf(op, 1, y); err != nil {
		return
	}
	if z != nil {
		bz, err = b.bufOf(op, 2, z)
	}
	return
}

// Wait waits for the queued work and returns the first fault it met
// (once).
func (b *Backend) Wait() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if err := b.x.finish(); err != nil {
		return err
	}
	return b.waitDone(nil)
}

// waitDone reports the first fault of the work a finish just waited for
// (b.mu held): the pending entropy-coded matrices' status, then the
// buffer kernels' status word, read from word when a Read brought it
// back with its data, else from the device.
func (b *Backend) waitDone(word unsafe.Pointer) error {
	if err := b.checkPending(); err != nil {
		return err
	}
	if b.status == nil {
		return nil
	}
	if word == nil {
		if b.statusWord == nil {
			b.statusWord = new(int32)
		}
		if err := b.x.read(b.status, 0, unsafe.Pointer(b.statusWord), 4); err != nil {
			return err
		}
		word = unsafe.Pointer(b.statusWord)
	}
	if *(*int32)(word) == 0 {
		return nil
	}
	if err := b.x.zero(b.status, 4); err != nil {
		return err
	}
	return errNonFinite
}

// bufKernel returns kernel name of the buffer program (b.mu held). The
// program is built with correctly rounded division where the device
// offers it, else with double-precision division where it has that;
// quant is false when it has neither, or flushes float32 denormals (the
// quantization then runs on the host).
func (b *Backend) bufKernel(name string) (k *kernel, quant bool, err error) {
	if b.bufProg == nil {
		inf := b.x.dev.info
		opts := b.std
		switch { // exact only where float32 denormals are kept
		case inf.CorrectDivide:
			opts += " -cl-fp32-correctly-rounded-divide-sqrt"
			b.bufQuant = inf.Denorms
		case inf.Has("cl_khr_fp64"):
			opts += " -DQDIV_F64"
			b.bufQuant = inf.Denorms
		}
		p, err := b.buildCached(buffersSource, opts)
		if err != nil {
			return nil, false, err
		}
		b.bufProg = b.addProgram("buffers\x00"+opts, p)
	}
	k, _, err = b.progKernel(b.bufProg, name, 64)
	return k, b.bufQuant, err
}

// quantKernel is bufKernel("quant_a8"), whose work-groups are 128
// work-items: quant is also false where the device runs fewer.
func (b *Backend) quantKernel() (k *kernel, quant bool, err error) {
	if k, quant, err = b.bufKernel("quant_a8"); err != nil || !quant {
		return k, quant, err
	}
	if b.quantWG == 0 {
		if b.quantWG, err = b.x.workGroupSize(k); err != nil {
			return nil, false, err
		}
	}
	return k, b.quantWG >= 128, nil
}

// withBufs runs f with b.mu held on an open backend and the device
// buffers of x, y and z (z may be nil), operands of operation op.
func (b *Backend) withBufs(op string, x, y, z devbuf.Buf, f func(bx, by, bz *buffer) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	bx, by, bz, err := b.bufs3(op, x, y, z)
	if err != nil {
		return err
	}
	return f(bx, by, bz)
}

// elementwise queues kernel name over n float32 values: d = f(a, c)
// (c nil for one operand), s the scale (scale_f32).
func (b *Backend) elementwise(op, name string, n int, d, a, c devbuf.Buf, s float32) error {
	if err := gpuhost.CheckElementwise("opencl", op, n); err != nil {
		return err
	}
	return b.withBufs(op, d, a, c, func(bd, ba, bc *buffer) error {
		uses, nu := [3]gpuhost.Use{use("dst", bd, 4*int64(n)), use("first operand", ba, 4*int64(n))}, 2
		if bc != nil {
			uses[2], nu = use("second operand", bc, 4*int64(n)), 3
		}
		if err := gpuhost.CheckUses("opencl", op, uses[:nu]...); err != nil || n == 0 {
			return err
		}
		k, _, err := b.bufKernel(name)
		if err != nil {
			return err
		}
		if bc != nil {
			err = k.setArgs(mem(bd), mem(ba), mem(bc), i32(n))
		} else {
			err = k.setArgs(mem(bd), mem(ba), f32(s), i32(n))
		}
		if err != nil {
			return err
		}
		_, err = b.x.launch(k, (n+63)/64*64, 64, false)
		return err
	})
}

// SwiGLU queues dst[i] = g[i] / (1 + exp(-g[i])) * u[i], i < n.
func (b *Backend) SwiGLU(dst, g, u devbuf.Buf, n int) error {
	if u == nil {
		return errors.New("opencl: swiglu: the up operand is nil")
	}
	return b.elementwise("swiglu", "swiglu", n, dst, g, u, 0)
}

// Add queues dst[i] = x[i] + y[i], i < n.
func (b *Backend) Add(dst, x, y devbuf.Buf, n int) error {
	if y == nil {
		return errors.New("opencl: add: the second operand is nil")
	}
	return b.elementwise("add", "add_f32", n, dst, x, y, 0)
}

// Scale queues dst[i] = s * x[i], i < n.
func (b *Backend) Scale(dst, x devbuf.Buf, s float32, n int) error {
	if err := gpuhost.CheckScalar("opencl", "scale", s); err != nil {
		return err
	}
	return b.elementwise("scale", "scale_f32", n, dst, x, nil, s)
}

// Requantize queues dst[i] = layout.Requantize's int8 of alpha * src[i]
// (ans_requant, the MatVANS chain's step: bit-exact), i < n.
func (b *Backend) Requantize(dst, src devbuf.Buf, alpha float32, n int) error {
	if err := gpuhost.CheckScalar("opencl", "requantize", alpha); err != nil {
		return err
	}
	if err := gpuhost.CheckElementwise("opencl", "requantize", n); err != nil {
		return err
	}
	return b.withBufs("requantize", dst, src, nil, func(bd, bs, _ *buffer) error {
		if err := gpuhost.CheckUses("opencl", "requantize", use("dst", bd, int64(n)),
			use("src", bs, 4*int64(n))); err != nil || n == 0 {
			return err
		}
		k, wg, err := b.srcKernel("ans", ansSource, "ans_requant", 1, 256)
		if err != nil {
			return err
		}
		if err := k.setArgs(mem(bs), mem(bd), i32(n), f32(alpha)); err != nil {
			return err
		}
		_, err = b.x.launch(k, (n+wg-1)/wg*wg, wg, false)
		return err
	})
}

// mulI32Buf queues y = W v for one vector of an int8 chain matrix (b.mu
// taken here). An ANS matrix's status words go to its own buffer, which
// the next Wait checks: a corrupt stream is that Wait's error.
func mulI32Buf(mx ChainMat, dst, x devbuf.Buf, batch int) error {
	if err := gpuhost.CheckBatch("opencl: mul int32", batch); err != nil {
		return err
	}
	if batch != 1 {
		return devbuf.ErrNoDevicePath // the chain kernels take one vector
	}
	b := mx.backend()
	return b.withBufs("mul int32", dst, x, nil, func(by, bx, _ *buffer) error {
		if mx.isClosed() {
			return ErrClosed
		}
		if err := gpuhost.CheckUses("opencl", "mul int32", use("dst", by, 4*int64(mx.Rows())),
			use("x", bx, int64(mx.Cols()))); err != nil {
			return err
		}
		var st *buffer
		if ns := mx.statusLen(); ns > 0 {
			a := mx.(*ANSMatrix)
			if a.devStatus == nil {
				var err error
				if a.devStatus, err = b.x.newBuffer(4*ns, false, false); err != nil {
					return err
				}
			}
			if err := b.x.zero(a.devStatus, 4*ns); err != nil {
				return err
			}
			st = a.devStatus
			if !a.pending { // once per matrix until the next check
				a.pending = true
				b.pending = append(b.pending, a)
			}
		}
		_, err := mx.enqueue(bx, by, st, false)
		return err
	})
}

// checkPending reads the status words of the ANS multiplies queued since
// the last check and returns the first corrupt unit's error (b.mu held,
// the queue finished). A matrix multiplied twice is checked once: a
// corrupt stream stays corrupt.
func (b *Backend) checkPending() error {
	var first error
	for i, a := range b.pending {
		if first == nil && !a.isClosed() && a.devStatus != nil {
			first = b.checkStatus(a.devStatus, a.statusLen(), a.Kernel())
		}
		a.pending = false
		b.pending[i] = nil
	}
	b.pending = b.pending[:0]
	return first
}

// MulI32Buf multiplies one int8 vector exactly on the device (int8_gemv).
func (mx *Int8Matrix) MulI32Buf(dst, x devbuf.Buf, batch int) error {
	return mulI32Buf(mx, dst, x, batch)
}

// MulI32Buf multiplies one int8 vector exactly on the device (ans_mul).
func (mx *ANSMatrix) MulI32Buf(dst, x devbuf.Buf, batch int) error {
	return mulI32Buf(mx, dst, x, batch)
}

// The int8 formats take no float or quantized activations.
func (int8Only) MulF16Buf(dst, x devbuf.Buf, batch int) error      { return devbuf.ErrNoDevicePath }
func (int8Only) MulA8Buf(dst, x devbuf.Buf, batch int) error       { return devbuf.ErrNoDevicePath }
func (int8Only) QuantizeBuf(xq, xs, x devbuf.Buf, batch int) error { return devbuf.ErrNoDevicePath }
func (int8Only) MulI8Buf(dst, xq, xs devbuf.Buf, batch int) error  { return devbuf.ErrNoDevicePath }

// devA8 reports whether the matrix multiplies int8 activations on the
// device: not codebooks (no A8), entropy-coded Bits (decoded per
// multiply on the host's schedule) or formats that refuse A8.
func (mx *Matrix) devA8() bool { return mx.cb == nil && mx.coded == nil && mx.a8err == nil }

// devTables uploads the matrix's gather of source columns (nat: stored
// column -> source column, -1 for padding) and, for the tiled kernels,
// their activation order (b.mu held).
func (mx *Matrix) devTables() error {
	if mx.nat != nil {
		return nil
	}
	b := mx.b
	nat := gpuhost.GatherIndex(mx.geo.Cols, mx.geo.PCols, mx.perm)
	var order []int32
	if mx.tiled != 0 {
		order = mx.a8Order()
	}
	var natBuf, orderBuf *buffer
	if err := put(b, &natBuf, nat); err != nil {
		natBuf.release()
		return err
	}
	if order != nil {
		if err := put(b, &orderBuf, order); err != nil {
			natBuf.release()
			orderBuf.release()
			return err
		}
	}
	mx.nat, mx.order = natBuf, orderBuf
	return nil
}

// QuantizeBuf quantizes batch vectors of x (Cols float32 values each)
// exactly as layout.QuantizeA8 (after the act-order gather) into xq
// (batch*PaddedCols int8) and xs (batch*PaddedCols/128 scales). A NaN or
// infinity is reported by the next Wait or Read.
func (mx *Matrix) QuantizeBuf(xq, xs, x devbuf.Buf, batch int) error {
	return mx.devOp("quantize", mx.devA8(), x, xq, xs, func(bx, bq, bs *buffer) error {
		g := mx.geo
		if err := gpuhost.CheckBufs("opencl", "quantize", batch, use("x", bx, g.InBytes(batch, 4)),
			use("xq", bq, g.QBytes(batch)), use("xs", bs, g.SBytes(batch))); err != nil {
			return err
		}
		return mx.quantize(bx, bq, bs, batch)
	})
}

// use is operand what of an operation touching need bytes of device
// buffer d.
func use(what string, d *buffer, need int64) gpuhost.Use {
	return gpuhost.Use{What: what, Have: int64(d.size), Need: need}
}

// devOp runs f with b.mu held on the device buffers of x, y and z (z may
// be nil), after the checks every device multiply makes: the matrix and
// backend open, and ok (the matrix has this device path) or
// devbuf.ErrNoDevicePath.
func (mx *Matrix) devOp(op string, ok bool, x, y, z devbuf.Buf, f func(bx, by, bz *buffer) error) error {
	if err := mx.checkOpen(); err != nil {
		return err
	}
	if !ok {
		return devbuf.ErrNoDevicePath
	}
	return mx.b.withBufs(op, x, y, z, f)
}

// quantize queues quant_a8 (b.mu held).
func (mx *Matrix) quantize(x, xq, xs *buffer, batch int) error {
	b := mx.b
	k, ok, err := b.quantKernel()
	if err != nil {
		return err
	}
	if !ok {
		return devbuf.ErrNoDevicePath
	}
	if err := mx.devTables(); err != nil {
		return err
	}
	if b.status == nil {
		st, err := b.x.newBuffer(16, false, b.x.dev.info.Unified)
		if err != nil {
			return err
		}
		if err := b.x.zero(st, 16); err != nil {
			st.release()
			return err
		}
		b.status = st
	}
	pc := mx.geo.PCols
	if err := k.setArgs(mem(x), mem(mx.nat), mem(xq), mem(xs), mem(b.status), i32(mx.geo.Cols), i32(pc)); err != nil {
		return err
	}
	_, err = b.x.launch(k, batch*pc, 128, false)
	return err
}

// MulA8Buf quantizes x on the device (QuantizeBuf) and multiplies:
// MulA8's result, bit for bit.
func (mx *Matrix) MulA8Buf(dst, x devbuf.Buf, batch int) error {
	return mx.devOp("mul", mx.devA8(), dst, x, nil, func(by, bx, _ *buffer) error {
		if err := gpuhost.CheckBufs("opencl", "mul", batch, use("dst", by, mx.geo.OutBytes(batch)),
			use("x", bx, mx.geo.InBytes(batch, 4))); err != nil {
			return err
		}
		b, pc := mx.b, mx.geo.PCols
		if err := b.ensureScratch(scratch{&b.devQ, batch * pc}, scratch{&b.devS, 4 * batch * pc / 128}); err != nil {
			return err
		}
		if err := mx.quantize(bx, b.devQ, b.devS, batch); err != nil {
			return err
		}
		return mx.mulI8(by, b.devQ, b.devS, batch)
	})
}

// mulA8Device is MulA8 on the device path (b.mu held): the activations
// go up as they are through the staging memory, quant_a8 and the int8
// kernels run as for MulA8Buf, and the results come back with one wait.
// It reports false, doing nothing, where the device cannot quantize
// exactly. On discrete GPUs this replaces preparing the activations on
// the host (quantization, the kernels' order, block sums) and uploading
// them piece by piece.
func (mx *Matrix) mulA8Device(dst, x []float32, batch int) (bool, error) {
	b := mx.b
	if _, ok, err := b.quantKernel(); err != nil || !ok {
		return false, err
	}
	pc, cols, rows := mx.geo.PCols, mx.geo.Cols, mx.geo.Rows
	if err := b.ensureScratch(scratch{&b.hsX, 4 * batch * cols}, scratch{&b.hsY, 4 * batch * rows},
		scratch{&b.devQ, batch * pc}, scratch{&b.devS, 4 * batch * pc / 128}); err != nil {
		return true, err
	}
	if err := b.x.writeAsync(b.hsX, 0, unsafe.Pointer(&x[0]), 4*len(x)); err != nil {
		return true, err
	}
	if err := mx.quantize(b.hsX, b.devQ, b.devS, batch); err != nil {
		return true, err
	}
	if err := mx.mulI8(b.hsY, b.devQ, b.devS, batch); err != nil {
		return true, err
	}
	err := b.readBack(b.hsY, 0, unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst)))
	if errors.Is(err, errNonFinite) { // name the activation, as the host path does
		for v := 0; v < batch; v++ {
			if i := slices.IndexFunc(x[v*cols:(v+1)*cols], func(f float32) bool { return f-f != 0 }); i >= 0 {
				return true, fmt.Errorf("opencl: vector %d: activation %d is %v", v, i, x[v*cols+i])
			}
		}
	}
	return true, err
}

// mulF16Device is MulF16 on the device path (b.mu held): the binary16
// values go up as they are, h16_widen widens them, and the float kernels
// run as for MulF16Buf, the results coming back with one wait.
func (mx *Matrix) mulF16Device(dst []float32, x []layout.FP16, batch int) error {
	b := mx.b
	k, _, err := b.bufKernel("h16_widen")
	if err != nil {
		return err
	}
	n := len(x)
	if err := b.ensureScratch(scratch{&b.hsH, 2 * n}, scratch{&b.hsX, 4 * n}, scratch{&b.hsY, 4 * len(dst)}); err != nil {
		return err
	}
	if err := b.x.writeAsync(b.hsH, 0, unsafe.Pointer(&x[0]), 2*n); err != nil {
		return err
	}
	if err := k.setArgs(mem(b.hsH), mem(b.hsX), i32(n)); err != nil {
		return err
	}
	if _, err := b.x.launch(k, (n+63)/64*64, 64, false); err != nil {
		return err
	}
	if err := mx.mulF16(b.hsY, b.hsX, batch); err != nil {
		return err
	}
	return b.readBack(b.hsY, 0, unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst)))
}

// MulI8Buf multiplies int8 activations QuantizeBuf quantized: MulI8.
func (mx *Matrix) MulI8Buf(dst, xq, xs devbuf.Buf, batch int) error {
	return mx.devOp("mul", mx.devA8(), dst, xq, xs, func(by, bq, bs *buffer) error {
		g := mx.geo
		if err := gpuhost.CheckBufs("opencl", "mul", batch, use("dst", by, g.OutBytes(batch)),
			use("xq", bq, g.QBytes(batch)), use("xs", bs, g.SBytes(batch))); err != nil {
			return err
		}
		return mx.mulI8(by, bq, bs, batch)
	})
}

// mulI8 queues the int8 kernel on device activations (b.mu held): the
// tiled kernels' order and block sums are made on the device, and the
// kernel reads the buffers in place of the host path's scratch.
func (mx *Matrix) mulI8(y, xq, xs *buffer, batch int) error {
	b := mx.b
	if mx.isClosed() {
		return ErrClosed
	}
	if err := mx.devTables(); err != nil {
		return err
	}
	pc := mx.geo.PCols
	sx := b.sx
	if mx.tiled != 0 {
		if err := b.ensureScratch(scratch{&b.devOrd, batch * pc}, scratch{&b.devSx, 4 * batch * pc / 128}); err != nil {
			return err
		}
		key := prepKey{kind: prepOrder, in: xq, q4: mx.tiled == tiledQ4, pc: pc, batch: batch}
		if b.x.prep != key { // else the scratch holds them: gate and up, one input
			k, _, err := b.bufKernel("a8_order_sums")
			if err != nil {
				return err
			}
			n := batch * pc
			if err := k.setArgs(mem(xq), mem(mx.order), mem(b.devOrd), mem(b.devSx), i32(pc), i32(n)); err != nil {
				return err
			}
			if _, err := b.x.launch(k, (n+63)/64*64, 64, false); err != nil {
				return err
			}
		}
		if _, err := mx.launch(operands{xq: b.devOrd, xs: xs, sx: b.devSx, y: y}, false, batch, false); err != nil {
			return err
		}
		b.x.prep = key
		return nil
	}
	_, err := mx.launch(operands{xq: xq, xs: xs, sx: sx, y: y}, false, batch, false)
	return err
}

// MulF16Buf multiplies float32 activations rounded to binary16 (to
// nearest even): MulF16 of the rounded values, within the float bound
// (the tiled kernels' unit sums are added in float32 on the device, in
// float64 on the host). The rounding, gather and the tiled kernels'
// order run on the device; so do the CUDA-core float kernels, also where
// the host path would run tensor cores. Codebooks and entropy-coded Bits
// return devbuf.ErrNoDevicePath.
func (mx *Matrix) MulF16Buf(dst, x devbuf.Buf, batch int) error {
	return mx.devOp("mul", mx.cb == nil && mx.coded == nil, dst, x, nil, func(by, bx, _ *buffer) error {
		if err := gpuhost.CheckBufs("opencl", "mul", batch, use("dst", by, mx.geo.OutBytes(batch)),
			use("x", bx, mx.geo.InBytes(batch, 4))); err != nil {
			return err
		}
		return mx.mulF16(by, bx, batch)
	})
}

// mulF16 is MulF16Buf on device buffers (b.mu held).
func (mx *Matrix) mulF16(by, bx *buffer, batch int) error {
	b := mx.b
	if err := mx.devTables(); err != nil {
		return err
	}
	pc, cols := mx.geo.PCols, mx.geo.Cols
	xsum := b.xsum
	var k *kernel
	var err error
	key := prepKey{kind: prepF16Gather, in: bx, q4: mx.tiled == tiledQ4, cols: cols, pc: pc, batch: batch}
	if mx.tiled != 0 {
		key.kind = prepF16Tiled
	}
	// the scratch may hold this input's form already (gate and up); the
	// gather of a matrix with act-order is its own
	held := mx.perm == nil && b.x.prep == key
	if mx.tiled != 0 {
		nu := pc / 32
		nc := (nu + 31) / 32
		per := 1
		if mx.tiled != tiledQ4 {
			per = 2
		}
		if err := b.ensureScratch(scratch{&b.devF, 4 * batch * nc * 1024}, scratch{&b.devFsum, 4 * batch * nu * per}); err != nil {
			return err
		}
		if k, _, err = b.bufKernel("f16_tiled"); err != nil {
			return err
		}
		q4 := 0
		if mx.tiled == tiledQ4 {
			q4 = 1
		}
		n := batch * nc * 32
		if !held {
			if err := k.setArgs(mem(bx), mem(mx.nat), mem(b.devF), mem(b.devFsum), i32(cols), i32(pc), i32(nu), i32(nc), i32(q4), i32(n)); err != nil {
				return err
			}
			if _, err := b.x.launch(k, (n+63)/64*64, 64, false); err != nil {
				return err
			}
		}
		xsum = b.devFsum
	} else {
		if _, err := b.ensure(&b.devF, 4*batch*pc, false); err != nil {
			return err
		}
		if k, _, err = b.bufKernel("f16_gather"); err != nil {
			return err
		}
		n := batch * pc
		if !held {
			if err := k.setArgs(mem(bx), mem(mx.nat), mem(b.devF), i32(cols), i32(pc), i32(n)); err != nil {
				return err
			}
			if _, err := b.x.launch(k, (n+63)/64*64, 64, false); err != nil {
				return err
			}
		}
	}
	if _, err = mx.launch(operands{xf: b.devF, xsum: xsum, y: by}, true, batch, false); err != nil {
		return err
	}
	if mx.perm == nil {
		b.x.prep = key
	}
	return nil
}

// MulI32Buf: Q4G128, Bits and Sparse12 have scales (int32 products are
// for the int8 formats).
func (mx *Matrix) MulI32Buf(dst, x devbuf.Buf, batch int) error { return devbuf.ErrNoDevicePath }
