//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"time"

	"gorgonia.org/cu"

	"github.com/qgemv/qgemv/internal/gpuhost"
	"github.com/qgemv/qgemv/layout"
)

// Timing is a measured multiply (or read) rate.
type Timing struct {
	Seconds float64 // device time per call (events around back-to-back launches)
	Bytes   int64   // bytes streamed per call (matrix + activations + results)
	Host    float64 // host time per call to issue it from Go (no waiting)
}

// GBps returns Bytes/Seconds in GB/s.
func (t Timing) GBps() float64 { return float64(t.Bytes) / t.Seconds / 1e9 }

// ReadBandwidth times the backend's read kernel over count distinct
// buffers of size bytes each, rotating between them back to back (give
// count*size several times the L2 size): the roofline the benchmarks
// compare against, at the granularity of the multiplies measured.
func (b *Backend) ReadBandwidth(size int64, count, iters int) (Timing, error) {
	if size < 1<<20 || count < 1 || iters < 1 || iters > gpuhost.MaxIters || count > gpuhost.MaxIters {
		return Timing{}, fmt.Errorf("cuda: ReadBandwidth: size %d, count %d, iters %d: want at least 1 MiB, 1 buffer and 1 iteration", size, count, iters)
	}
	size &^= 15
	var t Timing
	err := b.do(func() error {
		var bufs []*buffer
		defer func() {
			for _, bf := range bufs {
				bf.free()
			}
		}()
		for i := 0; i < count; i++ {
			buf, err := alloc(size)
			if err != nil {
				return err
			}
			bufs = append(bufs, buf)
			if err := cu.MemsetD32(buf.ptr, 0x01020304, size/4); err != nil {
				return err
			}
		}
		blocks := 4 * b.dev.SMs
		out, err := alloc(4 * int64(blocks))
		if err != nil {
			return err
		}
		defer out.free()
		i := 0
		run := func() error {
			buf := bufs[i%len(bufs)]
			i++
			return b.launch("read_bw", blocks, 1, 1024, 0, buf.ptr, size/16, out.ptr)
		}
		sec, host, err := b.timeLaunches(run, iters)
		t = Timing{Seconds: sec, Bytes: size, Host: host}
		return err
	})
	return t, err
}

// timeLaunches runs fn once to warm up, then iters times back to back
// between two events; it returns the device seconds per call and the
// host seconds per call spent issuing them (in a backend call).
func (b *Backend) timeLaunches(fn func() error, iters int) (float64, float64, error) {
	if err := fn(); err != nil {
		return 0, 0, err
	}
	start, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, 0, err
	}
	defer cu.DestroyEvent(&start)
	stop, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, 0, err
	}
	defer cu.DestroyEvent(&stop)
	if err := start.Record(b.stream); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	for i := 0; i < iters; i++ {
		if err := fn(); err != nil {
			return 0, 0, err
		}
	}
	host := time.Since(t0).Seconds() / float64(iters)
	if err := stop.Record(b.stream); err != nil {
		return 0, 0, err
	}
	if err := stop.Synchronize(); err != nil {
		return 0, 0, fmt.Errorf("cuda: waiting for the timed kernels: %w", err)
	}
	ms, err := start.Elapsed(stop)
	if err != nil {
		return 0, 0, err
	}
	return ms / 1e3 / float64(iters), host, nil
}

// timeRotating times iters calls of launch back to back in one backend
// call, rotating over mats (matrices on one backend, after one warm-up
// call), once prep has put the activations on the device; bytes is what
// one call streams. A matrix closed by then is ErrClosed.
func timeRotating[M interface {
	isClosed() bool
	backend() *Backend
}](mats []M, iters int, bytes int64, prep func(*Backend) error, launch func(m M) error) (Timing, error) {
	b := mats[0].backend()
	var t Timing
	err := b.do(func() error {
		if err := anyClosed(mats); err != nil {
			return err
		}
		if err := prep(b); err != nil {
			return err
		}
		i := 0
		sec, host, err := b.timeLaunches(func() error {
			m := mats[i%len(mats)]
			i++
			return launch(m)
		}, iters)
		t = Timing{Seconds: sec, Host: host, Bytes: bytes}
		return err
	})
	return t, err
}

// TimeGEMV times iters multiplies launched back to back, rotating over
// mats (matrices of one shape and format: give enough of them that their
// bytes exceed the L2 cache, so every call streams from memory), with
// activation type act ("A32", "A16" or "A8") and the given batch. The
// activations are random and uploaded once: the time is the kernels'.
func TimeGEMV(mats []*Matrix, act string, batch, iters int) (Timing, error) {
	same := func(m, m0 *Matrix) bool { return m.b == m0.b && m.geo == m0.geo && m.name == m0.name }
	if err := checkTimed("TimeGEMV", mats, iters, batch, same, "backend, shape or format"); err != nil {
		return Timing{}, err
	}
	m0 := mats[0]
	if m0.coded != nil {
		return Timing{}, fmt.Errorf("cuda: TimeGEMV: %s is entropy-coded: its multiplies decode first, which TimeGEMV does not time", m0.name)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pc, rows := m0.geo.PCols, m0.geo.Rows
	nbk, _ := bucket(batch)
	x := make([]float32, nbk*pc)
	for i := range x[:batch*pc] {
		x[i] = float32(rng.NormFloat64())
	}
	actBytes := int64(4 * batch * pc)
	var name string
	var args func(m *Matrix) *a8Lead // A8: the kernel's leading arguments
	var prep func(b *Backend) error
	var multi func(m *Matrix) error // when set, the launches of one multiply
	switch act {
	case "A32":
		name = m0.floatKernel("f32", batch)
		prep = func(b *Backend) error {
			_, err := putScratch(b, "x", x, false)
			return err
		}
		// On tensor cores: the launches of MulF32's hi/lo parts, each
		// with its own activation and result buffers.
		if parts := m0.f32Parts(x[:batch*pc], batch); parts != nil {
			var ybs []*buffer
			prep = func(b *Backend) error {
				ybs = ybs[:0]
				for i, p := range parts {
					sfx := fmt.Sprint(i)
					if err := b.putF16As(sfx, p.xr, p.xsum, false); err != nil {
						return err
					}
					yb, err := b.scratchBuf("y"+sfx, 4*int64(2*p.n*rows))
					if err != nil {
						return err
					}
					ybs = append(ybs, yb)
				}
				return nil
			}
			multi = func(m *Matrix) error {
				for i, p := range parts {
					if err := m.launchIn(fmt.Sprint(i), p.name, nil, ybs[i].ptr, 2*p.n); err != nil {
						return err
					}
				}
				return nil
			}
		}
	case "A16":
		h := make([]layout.FP16, batch*m0.geo.Cols)
		for i := range h {
			h[i] = layout.ToFP16(x[i/m0.geo.Cols*pc+i%m0.geo.Cols])
		}
		actBytes /= 2
		var hp []layout.FP16
		var xsum []float32
		var err error
		if name, hp, xsum, err = m0.f16Inputs(h, batch); err != nil {
			return Timing{}, err
		}
		prep = func(b *Backend) error { return b.putF16(hp, xsum, false) }
	case "A8":
		if m0.a8err != nil {
			return Timing{}, m0.a8err
		}
		x = x[:batch*pc]
		xq, xs := make([]int8, len(x)), make([]float32, len(x)/128)
		if err := gpuhost.QuantizeBatch(xq, xs, x, batch, pc, pc); err != nil {
			return Timing{}, fmt.Errorf("cuda: %w", err)
		}
		actBytes = int64(len(xq)) + 4*int64(len(xs))
		qa, sx := m0.a8Inputs(xq, xs, batch)
		prep = func(b *Backend) error {
			ptrs, xsp, sxp, err := b.uploadA8(qa, xs, sx)
			args = func(m *Matrix) *a8Lead {
				_, a := m.a8Args(ptrs, xsp, sxp, batch)
				return &a
			}
			name, _ = m0.a8Args(ptrs, xsp, sxp, batch)
			return err
		}
	default:
		return Timing{}, fmt.Errorf("cuda: TimeGEMV: activation %q (want A32, A16 or A8)", act)
	}
	var yb *buffer
	prepY := func(b *Backend) (err error) {
		if err := prep(b); err != nil {
			return err
		}
		yb, err = b.scratchBuf("y", 4*int64(batch*rows))
		return err
	}
	bytes := m0.bytes + actBytes + 4*int64(batch*rows)
	return timeRotating(mats, iters, bytes, prepY, func(m *Matrix) error {
		if multi != nil {
			return multi(m)
		}
		if args != nil {
			return m.launch(name, args(m), yb.ptr, batch)
		}
		return m.launch(name, nil, yb.ptr, batch)
	})
}

// f32Part is up to 8 float32 vectors (v0..v0+n-1) prepared for the
// tensor-core kernels as MulF32 prepares them (mulF32MMA): each split
// into binary16 hi and lo vectors, slots 2v and 2v+1 of the launch.
type f32Part struct {
	name  string
	xr    []layout.FP16
	xsum  []float32
	v0, n int
}

// f32Parts prepares float32 activations (xp: batch padded vectors) for
// the tensor-core kernels, 8 vectors per launch: nil when the matrix
// does not run on tensor cores or a vector is not finite.
func (mx *Matrix) f32Parts(xp []float32, batch int) []f32Part {
	if !mx.useMMA() {
		return nil
	}
	var parts []f32Part
	for v0 := 0; v0 < batch; v0 += 8 {
		n := min(8, batch-v0)
		var r mulReq // each part keeps its own memory
		name, xsum, ok := mx.prepF32Part(&r, xp, v0, n)
		if !ok {
			return nil
		}
		parts = append(parts, f32Part{name, r.xr, xsum, v0, n})
	}
	return parts
}
