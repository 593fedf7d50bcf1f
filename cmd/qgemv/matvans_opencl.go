//go:build opencl

package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
	"github.com/qgemv/qgemv/opencl"
)

// matvansOpenCLBuilt reports whether this binary has the OpenCL MatVANS
// chain (built with -tags opencl).
const matvansOpenCLBuilt = true

// matvansOpenCLHint completes matvansISA's error for a GPU backend.
const matvansOpenCLHint = " or opencl[:<i>]"

// matvansOpenCLDevice parses "opencl" (the first GPU of opencl.Devices,
// else device 0) or "opencl:<i>" and checks that the device exists.
func matvansOpenCLDevice(name string) (int, error) {
	dev := -1
	if _, s, ok := strings.Cut(name, ":"); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bench: -backend %q: want opencl or opencl:<device index>", name)
		}
		dev = n
	}
	ds, err := opencl.Devices()
	if err != nil {
		return 0, fmt.Errorf("bench: -workload matvans: %w", err)
	}
	if dev < 0 {
		dev = 0
		for i, d := range ds {
			if d.Type == "gpu" {
				dev = i
				break
			}
		}
	}
	if dev >= len(ds) {
		return 0, fmt.Errorf("bench: -backend %q: OpenCL device %d does not exist (%d devices)", name, dev, len(ds))
	}
	return dev, nil
}

// matvansOpenCL uploads the workload's matrices (plain int8 and every
// coded layout in coded) to OpenCL device "opencl" or "opencl:<i>" and
// returns the chains, each run on the device (opencl.RunChain: multiplies
// and requantization back to back, one read of the result).
func matvansOpenCL(name string, wl *matvans.Workload, coded [][]*ans.Matrix) (*matvansEngine, error) {
	dev, err := matvansOpenCLDevice(name)
	if err != nil {
		return nil, err
	}
	b, err := opencl.Open(opencl.Options{Device: dev})
	if err != nil {
		return nil, fmt.Errorf("bench: -workload matvans: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			b.Close()
		}
	}()
	var int8s []opencl.ChainMat
	var int8Kernel string
	for _, w := range wl.W {
		m, err := b.LoadInt8(w, wl.D, wl.D)
		if err != nil {
			return nil, fmt.Errorf("bench: -workload matvans: %w", err)
		}
		int8s, int8Kernel = append(int8s, m), m.Kernel()
	}
	ansMats := make([][]opencl.ChainMat, len(coded))
	var kernels []string
	for li, ms := range coded {
		for _, m := range ms {
			mx, err := b.LoadANS(m)
			if err != nil {
				return nil, fmt.Errorf("bench: -workload matvans: %w", err)
			}
			ansMats[li] = append(ansMats[li], mx)
		}
		if len(ms) > 0 {
			kernels = append(kernels, ansMats[li][0].Kernel())
		}
	}
	ok = true
	info := b.Info()
	return &matvansEngine{
		desc:       fmt.Sprintf("OpenCL %s (%s)", info.Name, info.Platform),
		int8Kernel: int8Kernel,
		ansKernel:  strings.Join(kernels, ", "),
		int8:       func() ([]int8, error) { return b.RunChain(int8s, wl.Alpha, wl.V0) },
		ans: func(li int) func() ([]int8, error) {
			return func() ([]int8, error) { return b.RunChain(ansMats[li], wl.Alpha, wl.V0) }
		},
		close: func() { b.Close() },
	}, nil
}
