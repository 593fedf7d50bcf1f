//go:build cuda

package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/qgemv/qgemv/cuda"
	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
)

// matvansCUDABuilt reports whether this binary has the CUDA MatVANS
// chain (built with -tags cuda).
const matvansCUDABuilt = true

// matvansCUDAHint completes matvansISA's error for a GPU backend.
const matvansCUDAHint = " or cuda[:<i>]"

// matvansCUDA uploads the workload's matrices (plain int8 and every coded
// layout in coded) to CUDA device "cuda" or "cuda:<i>" and returns the
// chains, each run on the device (cuda.RunChain: multiplies and
// requantization back to back, one copy of the result to the host).
func matvansCUDA(name string, wl *matvans.Workload, coded [][]*ans.Matrix) (*matvansEngine, error) {
	ordinal := 0
	if _, s, ok := strings.Cut(name, ":"); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bench: -backend %q: want cuda or cuda:<device number>", name)
		}
		ordinal = n
	}
	b, err := cuda.Open(ordinal, cuda.Options{})
	if err != nil {
		return nil, fmt.Errorf("bench: -workload matvans: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			b.Close()
		}
	}()
	var int8s []cuda.ChainMat
	var int8Kernel string
	for _, w := range wl.W {
		m, err := b.LoadInt8(w, wl.D, wl.D)
		if err != nil {
			return nil, fmt.Errorf("bench: -workload matvans: %w", err)
		}
		int8s, int8Kernel = append(int8s, m), m.Kernel()
	}
	ansMats := make([][]cuda.ChainMat, len(coded))
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
	return &matvansEngine{
		desc:       fmt.Sprintf("%s on %s", b.Name(), b.Device()),
		int8Kernel: int8Kernel,
		ansKernel:  strings.Join(kernels, ", "),
		int8:       func() ([]int8, error) { return b.RunChain(int8s, wl.Alpha, wl.V0) },
		ans: func(li int) func() ([]int8, error) {
			return func() ([]int8, error) { return b.RunChain(ansMats[li], wl.Alpha, wl.V0) }
		},
		close: func() { b.Close() },
	}, nil
}
