//go:build cuda

package dispatch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/qgemv/qgemv/cuda"
	"github.com/qgemv/qgemv/layout"
	"gorgonia.org/cu"
)

func init() {
	registerGPU(driver{Name: "cuda", Probe: probeCUDA, Open: openCUDA, Preferred: preferCUDA, Order: 0})
}

// preferCUDA prefers CUDA device 0 (the backend "cuda") when a calibration
// (calibrate.go; cached per device and driver version) shows it faster
// than the CPU backend.
func preferCUDA(opts Options) (bool, string) {
	ds, err := cuda.Devices()
	if err != nil || len(ds) == 0 {
		return false, ""
	}
	d := ds[0]
	return calibrator{
		Key:    fmt.Sprintf("cuda\x00%s\x00sm_%d%d\x00%d SMs\x00%d bytes\x00driver %d\x00", d.Name, d.Major, d.Minor, d.SMs, d.Memory, cu.Version()) + cpuReferenceKey(opts),
		Device: d.Name,
		Dir:    calibrationDir(EnvCUDACache, "cuda"),
		Open:   func() (Backend, error) { return openCUDA("cuda", opts) },
		CPU:    cpuReference(opts),
	}.preferred()
}

func probeCUDA() []Candidate {
	ds, err := cuda.Devices()
	if err != nil {
		return []Candidate{{Name: "cuda", Detail: err.Error()}}
	}
	if len(ds) == 0 {
		return []Candidate{{Name: "cuda", Detail: "no CUDA device"}}
	}
	var out []Candidate
	for i, d := range ds {
		name := "cuda"
		if i > 0 {
			name = "cuda:" + strconv.Itoa(i)
		}
		out = append(out, Candidate{Name: name, Available: true, Detail: d.String()})
	}
	return out
}

func openCUDA(name string, _ Options) (Backend, error) {
	i := 0
	if s, ok := strings.CutPrefix(name, "cuda:"); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("dispatch: backend %q: want cuda or cuda:<device index>", name)
		}
		i = n
	}
	b, err := cuda.Open(i, cuda.Options{})
	if err != nil {
		return nil, err
	}
	return cuBackend{b}, nil
}

// cuBackend adapts *cuda.Backend to Backend.
type cuBackend struct{ *cuda.Backend }

// The CUDA backend keeps buffers in device memory, and its matrices
// multiply them there.
var (
	_ Device       = cuBackend{}
	_ ReadTimer    = cuBackend{}
	_ KernelTimer  = cuBackend{}
	_ DeviceMatrix = (*cuda.Matrix)(nil)
	_ DeviceMatrix = (*cuda.Int8Matrix)(nil)
	_ DeviceMatrix = (*cuda.ANSMatrix)(nil)
)

func (c cuBackend) Load(m layout.Matrix) (Matrix, error) {
	mx, err := c.Backend.Load(m)
	if err != nil {
		return nil, fmt.Errorf("dispatch: backend %s: %w", c.Name(), err)
	}
	return mx, nil
}

// QuantizeA8 quantizes on the host (layout.QuantizeA8, with the CPU's
// assembly quantizer installed).
func (c cuBackend) QuantizeA8(xq []int8, xs []float32, x []float32) error {
	return layout.QuantizeA8(xq, xs, x)
}

// Chain runs the MatVANS chain on the device (cuda.RunChain).
func (c cuBackend) Chain(dst []int8, mats []Matrix, alpha []float32, v0 []int8) error {
	cm := make([]cuda.ChainMat, len(mats))
	for i, m := range mats {
		var ok bool
		if cm[i], ok = m.(cuda.ChainMat); !ok {
			return fmt.Errorf("dispatch: %s: chain matrix %d is not an int8 matrix: %w", c.Name(), i, ErrFormatNotImplemented)
		}
	}
	v, err := c.RunChain(cm, alpha, v0)
	if err != nil {
		return err
	}
	if len(v) != len(dst) {
		return fmt.Errorf("dispatch: %s: chain returned %d values, want %d", c.Name(), len(v), len(dst))
	}
	copy(dst, v)
	return nil
}

// ReadTime times the read kernel over buffers of size bytes, as many as
// stream four times the L2 (at least two).
func (c cuBackend) ReadTime(size int64, iters int) (float64, error) {
	count := 2
	if size > 0 {
		count = max(2, int((4*int64(c.Device().L2)+size-1)/size))
	}
	t, err := c.ReadBandwidth(size, count, iters)
	return t.Seconds, err
}

// KernelTime times the multiply kernels alone (cuda.TimeGEMV).
func (c cuBackend) KernelTime(mats []Matrix, act string, batch, iters int) (float64, error) {
	cm := make([]*cuda.Matrix, len(mats))
	for i, m := range mats {
		var ok bool
		if cm[i], ok = m.(*cuda.Matrix); !ok {
			return 0, fmt.Errorf("dispatch: %s: kernel time: matrix %d has no timed kernels: %w", c.Name(), i, ErrFormatNotImplemented)
		}
	}
	t, err := cuda.TimeGEMV(cm, act, batch, iters)
	return t.Seconds, err
}
