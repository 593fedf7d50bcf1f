//go:build opencl

package dispatch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/qgemv/qgemv/cpu"
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

// openclIndex parses "opencl" (the default device) or "opencl:i".
func openclIndex(name string) (int, error) {
	if name == "opencl" {
		ds, err := opencl.Devices()
		if err != nil {
			return 0, err
		}
		return openclDefault(ds), nil
	}
	s, ok := strings.CutPrefix(name, "opencl:")
	i, err := strconv.Atoi(s)
	if !ok || err != nil || i < 0 {
		return 0, fmt.Errorf("dispatch: backend %q: want opencl or opencl:<device index>", name)
	}
	return i, nil
}

func openOpenCL(name string, opts Options) (Backend, error) {
	i, err := openclIndex(name)
	if err != nil {
		return nil, err
	}
	b, err := opencl.Open(opencl.Options{Device: i})
	if err != nil {
		return nil, err
	}
	return clBackend{b, name}, nil
}

// clBackend adapts *opencl.Backend to Backend.
type clBackend struct {
	*opencl.Backend
	name string
}

func (c clBackend) Name() string { return c.name }

func (c clBackend) Load(m layout.Matrix) (Matrix, error) {
	mx, err := c.Backend.Load(m)
	if err != nil {
		return nil, err
	}
	return mx, nil
}

// QuantizeA8 quantizes on the host (layout.QuantizeA8; same bytes).
func (c clBackend) QuantizeA8(xq []int8, xs []float32, x []float32) error {
	return layout.QuantizeA8(xq, xs, x)
}

// calibration is the cached result of one device's calibration.
type calibration struct {
	Device, Driver string
	GPUSeconds     float64 // one Q4G128 4096x4096 A8 multiply on the device
	CPUSeconds     float64 // the same on the CPU backend
}

// preferOpenCL prefers the default OpenCL device when it is a GPU and a
// calibration (cached per device and driver) shows it faster than the
// CPU backend. A CPU-type device (PoCL) is never preferred.
func preferOpenCL(opts Options) (bool, string) {
	ds, err := opencl.Devices()
	if err != nil {
		return false, ""
	}
	d := ds[openclDefault(ds)]
	if d.Type != "gpu" {
		return false, ""
	}
	c, err := calibrate(d, opts)
	if err != nil || c.GPUSeconds >= c.CPUSeconds {
		return false, ""
	}
	return true, fmt.Sprintf("calibration: Q4G128 4096x4096 A8 takes %.3g ms on %s, %.3g ms on the CPU", 1e3*c.GPUSeconds, d.Name, 1e3*c.CPUSeconds)
}

func calibrationPath(d opencl.DeviceInfo) string {
	dir := os.Getenv(opencl.EnvCache)
	if dir == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(c, "qgemv", "opencl")
	}
	h := sha256.Sum256([]byte(d.Name + "\x00" + d.Driver + "\x00" + d.Platform + "\x00" + d.PlatformVersion))
	return filepath.Join(dir, "calibration-"+hex.EncodeToString(h[:8])+".json")
}

func calibrate(d opencl.DeviceInfo, opts Options) (calibration, error) {
	path := calibrationPath(d)
	if path != "" {
		if data, err := os.ReadFile(path); err == nil {
			var c calibration
			if json.Unmarshal(data, &c) == nil && c.Device == d.Name && c.Driver == d.Driver && c.GPUSeconds > 0 && c.CPUSeconds > 0 {
				return c, nil
			}
		}
	}
	const n = 4096
	m, err := layout.NewQ4G128(n, n)
	if err != nil {
		return calibration{}, err
	}
	rng := rand.New(rand.NewSource(1))
	rng.Read(m.Weights)
	rng.Read(m.Zeros)
	for i := range m.Scales {
		m.Scales[i] = float32(rng.Float64()) * 0.01
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	y := make([]float32, n)
	timeIt := func(mul func() error) (float64, error) {
		best := 0.0
		for i := 0; i < 6; i++ {
			t := time.Now()
			if err := mul(); err != nil {
				return 0, err
			}
			if s := time.Since(t).Seconds(); i > 0 && (best == 0 || s < best) {
				best = s
			}
		}
		return best, nil
	}
	gb, err := opencl.Open(opencl.Options{Device: d.Index})
	if err != nil {
		return calibration{}, err
	}
	defer gb.Close()
	gm, err := gb.Load(m)
	if err != nil {
		return calibration{}, err
	}
	defer gm.Close()
	c := calibration{Device: d.Name, Driver: d.Driver}
	if c.GPUSeconds, err = timeIt(func() error { return gm.MulA8(y, x, 1) }); err != nil {
		return calibration{}, err
	}
	cb, err := cpu.New(cpu.Config{Threads: opts.Threads})
	if err != nil {
		return calibration{}, err
	}
	cm, err := cb.Load(m)
	if err != nil {
		return calibration{}, err
	}
	defer cm.Close()
	if c.CPUSeconds, err = timeIt(func() error { return cm.MulA8(y, x, 1) }); err != nil {
		return calibration{}, err
	}
	if path != "" {
		if data, err := json.Marshal(c); err == nil {
			if os.MkdirAll(filepath.Dir(path), 0o755) == nil {
				tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
				if os.WriteFile(tmp, data, 0o644) == nil && os.Rename(tmp, path) != nil {
					os.Remove(tmp)
				}
			}
		}
	}
	return c, nil
}
