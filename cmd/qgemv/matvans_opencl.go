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
	info := b.Info()
	return gpuChains[opencl.ChainMat]{
		desc: fmt.Sprintf("OpenCL %s (%s)", info.Name, info.Platform),
		loadInt8: func(w []int8, rows, cols int) (opencl.ChainMat, error) {
			m, err := b.LoadInt8(w, rows, cols)
			if err != nil {
				return nil, err
			}
			return m, nil
		},
		loadANS: func(m *ans.Matrix) (opencl.ChainMat, error) {
			mx, err := b.LoadANS(m)
			if err != nil {
				return nil, err
			}
			return mx, nil
		},
		run:   b.RunChain,
		close: func() { b.Close() },
	}.engine(wl, coded)
}
