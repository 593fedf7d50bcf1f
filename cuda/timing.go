//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"gorgonia.org/cu"

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
	if size < 1<<20 || count < 1 || iters < 1 {
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
// host seconds per call spent issuing them (CUDA thread).
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
	if err := start.Record(cu.Stream{}); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	for i := 0; i < iters; i++ {
		if err := fn(); err != nil {
			return 0, 0, err
		}
	}
	host := time.Since(t0).Seconds() / float64(iters)
	if err := stop.Record(cu.Stream{}); err != nil {
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

// TimeGEMV times iters multiplies launched back to back, rotating over
// mats (matrices of one shape and format: give enough of them that their
// bytes exceed the L2 cache, so every call streams from memory), with
// activation type act ("A32", "A16" or "A8") and the given batch. The
// activations are random and uploaded once: the time is the kernels'.
func TimeGEMV(mats []*Matrix, act string, batch, iters int) (Timing, error) {
	if len(mats) == 0 || iters < 1 {
		return Timing{}, errors.New("cuda: TimeGEMV: no matrices or no iterations")
	}
	m0 := mats[0]
	for _, m := range mats {
		if m.b != m0.b || m.geo != m0.geo || m.name != m0.name {
			return Timing{}, errors.New("cuda: TimeGEMV: the matrices differ in backend, shape or format")
		}
		if m.closed {
			return Timing{}, ErrClosed
		}
	}
	if err := checkBatch(batch); err != nil {
		return Timing{}, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pc, rows := m0.geo.PCols, m0.geo.Rows
	nbk, _ := bucket(batch)
	x := make([]float32, nbk*pc)
	for i := range x[:batch*pc] {
		x[i] = float32(rng.NormFloat64())
	}
	var name string
	var args []any
	actBytes := int64(4 * batch * pc)
	b := m0.b
	var prep func(b *Backend) (string, []any, error)
	switch act {
	case "A32":
		prep = func(b *Backend) (string, []any, error) {
			xb, err := b.scratchBuf("x", 4*int64(len(x)))
			if err != nil {
				return "", nil, err
			}
			return m0.floatKernel("f32", batch), nil, put(xb, x)
		}
	case "A16":
		h := make([]layout.FP16, batch*m0.geo.Cols)
		for i := range h {
			h[i] = layout.ToFP16(x[i/m0.geo.Cols*pc+i%m0.geo.Cols])
		}
		actBytes /= 2
		name, hp, xsum := m0.f16Inputs(h, batch)
		prep = func(b *Backend) (string, []any, error) {
			xb, err := b.scratchBuf("x", 2*int64(len(hp)))
			if err != nil {
				return "", nil, err
			}
			if xsum != nil {
				sb, err := b.scratchBuf("xsum", 4*int64(len(xsum)))
				if err != nil {
					return "", nil, err
				}
				if err := put(sb, xsum); err != nil {
					return "", nil, err
				}
			}
			return name, nil, put(xb, hp)
		}
	case "A8":
		if m0.a8err != nil {
			return Timing{}, m0.a8err
		}
		x = x[:batch*pc]
		xq, xs := make([]int8, len(x)), make([]float32, len(x)/128)
		for v := 0; v < batch; v++ {
			if err := layout.QuantizeA8(xq[v*pc:(v+1)*pc], xs[v*pc/128:(v+1)*pc/128], x[v*pc:(v+1)*pc]); err != nil {
				return Timing{}, err
			}
		}
		actBytes = int64(len(xq)) + 4*int64(len(xs))
		return timeA8(mats, xq, xs, batch, iters, actBytes)
	default:
		return Timing{}, fmt.Errorf("cuda: TimeGEMV: activation %q (want A32, A16 or A8)", act)
	}
	var t Timing
	err := b.do(func() error {
		var err error
		if name, args, err = prep(b); err != nil {
			return err
		}
		yb, err := b.scratchBuf("y", 4*int64(batch*rows))
		if err != nil {
			return err
		}
		i := 0
		sec, host, err := b.timeLaunches(func() error {
			m := mats[i%len(mats)]
			i++
			return m.launch(name, args, yb, batch)
		}, iters)
		t = Timing{Seconds: sec, Host: host, Bytes: m0.bytes + actBytes + 4*int64(batch*rows)}
		return err
	})
	return t, err
}

func checkBatch(batch int) error {
	if batch < 1 || batch > 16 {
		return fmt.Errorf("cuda: batch %d: must be between 1 and 16", batch)
	}
	return nil
}

// timeA8 is TimeGEMV for int8 activations.
func timeA8(mats []*Matrix, xq []int8, xs []float32, batch, iters int, actBytes int64) (Timing, error) {
	m0 := mats[0]
	act, sx := m0.a8Inputs(xq, batch)
	b := m0.b
	var t Timing
	err := b.do(func() error {
		ptrs, xsp, sxp, err := b.uploadA8(act, xs, sx)
		if err != nil {
			return err
		}
		yb, err := b.scratchBuf("y", 4*int64(batch*m0.geo.Rows))
		if err != nil {
			return err
		}
		i := 0
		sec, host, err := b.timeLaunches(func() error {
			m := mats[i%len(mats)]
			i++
			name, args := m.a8Args(ptrs, xsp, sxp)
			return m.launch(name, args, yb, batch)
		}, iters)
		t = Timing{Seconds: sec, Host: host, Bytes: m0.bytes + actBytes + 4*int64(batch*m0.geo.Rows)}
		return err
	})
	return t, err
}
