//go:build opencl

package dispatch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/opencl"
)

func init() {
	registerGPU(driver{Name: "opencl", Probe: probeOpenCL, Open: openOpenCL, Preferred: preferOpenCL, Order: 1})
}

// openclDefault returns the index of the device "opencl" names: the first
// GPU, else device 0.
func openclDefault(ds []opencl.DeviceInfo) int {
	for i, d := range ds {
		if d.Type == "gpu" {
			return i
		}
	}
	return 0
}

func probeOpenCL() []Candidate {
	ds, err := opencl.Devices()
	if err != nil {
		return []Candidate{{Name: "opencl", Detail: err.Error()}}
	}
	def := openclDefault(ds)
	var out []Candidate
	for i, d := range ds {
		name := "opencl:" + strconv.Itoa(i)
		if i == def {
			name = "opencl"
		}
		var ext []string
		for _, e := range []string{"cl_intel_subgroups", "cl_khr_subgroups", "cl_khr_fp16", "cl_khr_integer_dot_product"} {
			if d.Has(e) {
				ext = append(ext, strings.TrimPrefix(e, "cl_"))
			}
		}
		if len(d.SubGroupSizes) > 0 {
			ext = append(ext, fmt.Sprintf("sub-group sizes %v", d.SubGroupSizes))
		}
		if len(ext) == 0 {
			ext = []string{"no sub-groups"}
		}
		detail := fmt.Sprintf("%s (%s, %s, driver %s; %s; %d KiB local memory", d.Name, d.Type, d.Platform, d.Driver, strings.Join(ext, ", "), d.LocalMem>>10)
		if d.Unified {
			detail += ", host-unified memory"
		}
		out = append(out, Candidate{Name: name, Available: true, Detail: detail + ")"})
	}
	return out
}

// openclIndex parses "opencl" (the default device: -1) or "opencl:i".
func openclIndex(name string) (int, error) {
	if name == "opencl" {
		return -1, nil
	}
	s, ok := strings.CutPrefix(name, "opencl:")
	i, err := strconv.Atoi(s)
	if !ok || err != nil || i < 0 {
		return 0, fmt.Errorf("dispatch: backend %q: want opencl or opencl:<device index>", name)
	}
	return i, nil
}

// openOpenCL opens the device name names. The backend takes the name
// Probe lists the device under: "opencl" for the default device,
// "opencl:i" for the others (so that "opencl:0" or "opencl:00" opened
// names the candidate line it chose).
func openOpenCL(name string, opts Options) (Backend, error) {
	i, err := openclIndex(name)
	if err != nil {
		return nil, err
	}
	ds, err := opencl.Devices()
	if err != nil {
		return nil, err
	}
	def := openclDefault(ds)
	if i < 0 {
		i = def
	}
	b, err := opencl.Open(opencl.Options{Device: i})
	if err != nil {
		return nil, err
	}
	if i == def {
		return clBackend{b, "opencl"}, nil
	}
	return clBackend{b, "opencl:" + strconv.Itoa(i)}, nil
}

// clBackend adapts *opencl.Backend to Backend.
type clBackend struct {
	*opencl.Backend
	name string
}

// The OpenCL backend keeps buffers in device memory; its Q4G128, Bits and
// Sparse12 matrices multiply them there with int8 activations, its int8
// and ANS matrices with int8 vectors.
var (
	_ Device       = clBackend{}
	_ KernelTimer  = clBackend{}
	_ DeviceMatrix = (*opencl.Matrix)(nil)
	_ DeviceMatrix = (*opencl.Int8Matrix)(nil)
	_ DeviceMatrix = (*opencl.ANSMatrix)(nil)
)

func (c clBackend) Name() string { return c.name }

func (c clBackend) Load(m layout.Matrix) (Matrix, error) {
	mx, err := c.Backend.LoadMatrix(m)
	if err != nil {
		return nil, fmt.Errorf("dispatch: backend %s: %w", c.name, err)
	}
	return mx, nil
}

// QuantizeA8 quantizes on the host (layout.QuantizeA8, with the CPU's
// assembly quantizer installed).
func (c clBackend) QuantizeA8(xq []int8, xs []float32, x []float32) error {
	return layout.QuantizeA8(xq, xs, x)
}

// Chain runs the MatVANS chain on the device (opencl.RunChain).
func (c clBackend) Chain(dst []int8, mats []Matrix, alpha []float32, v0 []int8) error {
	cm := make([]opencl.ChainMat, len(mats))
	for i, m := range mats {
		var ok bool
		if cm[i], ok = m.(opencl.ChainMat); !ok {
			return fmt.Errorf("dispatch: %s: chain matrix %d is not an int8 matrix: %w", c.name, i, ErrFormatNotImplemented)
		}
	}
	v, err := c.RunChain(cm, alpha, v0)
	if err != nil {
		return err
	}
	if len(v) != len(dst) {
		return fmt.Errorf("dispatch: %s: chain returned %d values, want %d", c.name, len(v), len(dst))
	}
	copy(dst, v)
	return nil
}

// preferOpenCL prefers the default OpenCL device when it is a GPU and a
// calibration (calibrate.go; cached per device and driver in the OpenCL
// cache directory) shows it faster than the CPU backend. A CPU-type
// device (PoCL) is never preferred.
func preferOpenCL(opts Options) (bool, string) {
	ds, err := opencl.Devices()
	if err != nil || len(ds) == 0 {
		return false, ""
	}
	i := openclDefault(ds)
	d := ds[i]
	if d.Type != "gpu" {
		return false, ""
	}
	return calibrator{
		Key:    "opencl\x00" + d.Name + "\x00" + d.Driver + "\x00" + d.Platform + "\x00" + d.PlatformVersion + "\x00" + cpuReferenceKey(opts),
		Device: d.Name,
		Dir:    calibrationDir(opencl.EnvCache, "opencl"),
		Open:   func() (Backend, error) { return openOpenCL("opencl:"+strconv.Itoa(i), opts) },
		CPU:    cpuReference(opts),
	}.preferred()
}

// KernelTime times the multiply kernels alone (opencl.TimeGEMV).
func (c clBackend) KernelTime(mats []Matrix, act string, batch, iters int) (float64, error) {
	cm := make([]*opencl.Matrix, len(mats))
	for i, m := range mats {
		var ok bool
		if cm[i], ok = m.(*opencl.Matrix); !ok {
			return 0, fmt.Errorf("dispatch: %s: kernel time: matrix %d has no timed kernels: %w", c.name, i, ErrFormatNotImplemented)
		}
	}
	return opencl.TimeGEMV(cm, act, batch, iters)
}
