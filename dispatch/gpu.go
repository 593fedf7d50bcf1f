package dispatch

import (
	"fmt"
	"sort"
)

// driver is a GPU backend compiled into this binary. The files
// gpu_opencl.go and gpu_cuda.go register one each under their build tag
// (opencl, cuda); the default build registers none.
type driver struct {
	// Name is the dispatch name, "opencl" or "cuda".
	Name string
	// Probe lists the backend's devices (one Candidate each, named
	// "<name>" for the default device and "<name>:<i>" for device i);
	// a missing loader, driver or platform is one unavailable Candidate
	// whose Detail says why.
	Probe func() []Candidate
	// Open opens the backend by its dispatch name ("opencl",
	// "opencl:1", ...).
	Open func(name string, opts Options) (Backend, error)
	// Preferred reports whether the backend should be chosen over the
	// CPU when nothing is forced (a calibration showed it faster); nil
	// means never.
	Preferred func(opts Options) (ok bool, reason string)
	// Order sorts drivers when several are compiled in (lower first).
	Order int
}

var gpuDrivers []driver

// registerGPU adds a driver; called from init functions of tagged files.
func registerGPU(d driver) {
	gpuDrivers = append(gpuDrivers, d)
	sort.SliceStable(gpuDrivers, func(i, j int) bool { return gpuDrivers[i].Order < gpuDrivers[j].Order })
}

func findDriver(name string) *driver {
	for i := range gpuDrivers {
		if gpuDrivers[i].Name == name {
			return &gpuDrivers[i]
		}
	}
	return nil
}

// gpuCandidates lists the GPU backends: the probe of each compiled-in
// driver, and one unavailable entry for each that is not compiled in.
func gpuCandidates() []Candidate {
	var out []Candidate
	for _, name := range []string{"opencl", "cuda"} {
		if d := findDriver(name); d != nil {
			out = append(out, d.Probe()...)
			continue
		}
		out = append(out, Candidate{Name: name, Detail: "not compiled in (build tag " + name + ")"})
	}
	return out
}

// baseName returns "opencl" for "opencl" and "opencl:1".
func baseName(name string) string {
	for i := 0; i < len(name); i++ {
		if name[i] == ':' {
			return name[:i]
		}
	}
	return name
}

func openGPU(name string, opts Options) (Backend, error) {
	d := findDriver(baseName(name))
	if d == nil {
		return nil, fmt.Errorf("dispatch: backend %q is not compiled into this binary (build with -tags %s)", name, baseName(name))
	}
	return d.Open(name, opts)
}

// preferredGPU returns the first compiled-in GPU backend whose driver
// prefers it over the CPU, with the reason.
func preferredGPU(opts Options) (string, string) {
	for _, d := range gpuDrivers {
		if d.Preferred == nil {
			continue
		}
		if ok, why := d.Preferred(opts); ok {
			return d.Name, why
		}
	}
	return "", ""
}
