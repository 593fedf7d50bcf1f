//go:build !cuda

package main

import (
	"fmt"

	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
)

// matvansCUDABuilt reports whether this binary has the CUDA MatVANS
// chain (built with -tags cuda).
const matvansCUDABuilt = false

// matvansCUDAHint completes matvansISA's error for a GPU backend.
const matvansCUDAHint = " (the CUDA chain needs a binary built with -tags cuda)"

// matvansCUDA is unreachable without the cuda tag (matvansISA refuses
// CUDA backends); it returns an error saying so.
func matvansCUDA(name string, _ *matvans.Workload, _ [][]*ans.Matrix) (*matvansEngine, error) {
	return nil, fmt.Errorf("bench: -workload matvans -backend %s: this binary was built without -tags cuda", name)
}
