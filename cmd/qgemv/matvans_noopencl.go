//go:build !opencl

package main

import (
	"fmt"

	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
)

// matvansOpenCLBuilt reports whether this binary has the OpenCL MatVANS
// chain (built with -tags opencl).
const matvansOpenCLBuilt = false

// matvansOpenCLHint completes matvansISA's error for a GPU backend.
const matvansOpenCLHint = " (the OpenCL chain needs a binary built with -tags opencl)"

// matvansOpenCLDevice is unreachable without the opencl tag.
func matvansOpenCLDevice(name string) (int, error) {
	return 0, fmt.Errorf("bench: -workload matvans -backend %s: this binary was built without -tags opencl", name)
}

// matvansOpenCL is unreachable without the opencl tag (matvansISA
// refuses OpenCL backends); it returns an error saying so.
func matvansOpenCL(name string, _ *matvans.Workload, _ [][]*ans.Matrix) (*matvansEngine, error) {
	return nil, fmt.Errorf("bench: -workload matvans -backend %s: this binary was built without -tags opencl", name)
}
