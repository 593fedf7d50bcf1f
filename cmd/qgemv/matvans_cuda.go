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
	return gpuChains[cuda.ChainMat]{
		desc: fmt.Sprintf("%s on %s", b.Name(), b.Device()),
		loadInt8: func(w []int8, rows, cols int) (cuda.ChainMat, error) {
			m, err := b.LoadInt8(w, rows, cols)
			if err != nil {
				return nil, err
			}
			return m, nil
		},
		loadANS: func(m *ans.Matrix) (cuda.ChainMat, error) {
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
