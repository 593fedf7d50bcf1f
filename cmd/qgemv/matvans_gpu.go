package main

import (
	"fmt"
	"strings"

	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
)

// gpuChains is what a GPU backend offers the MatVANS chain: loaders for
// plain int8 and ANS matrices, a chain runner on the device, and Close.
type gpuChains[M interface{ Kernel() string }] struct {
	desc     string
	loadInt8 func(w []int8, rows, cols int) (M, error)
	loadANS  func(m *ans.Matrix) (M, error)
	run      func(mats []M, alpha []float32, v0 []int8) ([]int8, error)
	close    func()
}

// engine uploads the workload's matrices (plain int8 and every coded
// layout in coded) and returns the chains, each run on the device
// (multiplies and requantization back to back, one copy of the result
// to the host). On error everything loaded is released with the backend.
func (g gpuChains[M]) engine(wl *matvans.Workload, coded [][]*ans.Matrix) (*matvansEngine, error) {
	ok := false
	defer func() {
		if !ok {
			g.close()
		}
	}()
	var int8s []M
	var int8Kernel string
	for _, w := range wl.W {
		m, err := g.loadInt8(w, wl.D, wl.D)
		if err != nil {
			return nil, fmt.Errorf("bench: -workload matvans: %w", err)
		}
		int8s, int8Kernel = append(int8s, m), m.Kernel()
	}
	ansMats := make([][]M, len(coded))
	var kernels []string
	for li, ms := range coded {
		for _, m := range ms {
			mx, err := g.loadANS(m)
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
		desc:       g.desc,
		int8Kernel: int8Kernel,
		ansKernel:  strings.Join(kernels, ", "),
		int8:       func() ([]int8, error) { return g.run(int8s, wl.Alpha, wl.V0) },
		ans: func(li int) func() ([]int8, error) {
			return func() ([]int8, error) { return g.run(ansMats[li], wl.Alpha, wl.V0) }
		},
		close: g.close,
	}, nil
}
