//go:build !amd64 || noasm || purego

package cpu

import "github.com/qgemv/qgemv/internal/hugemem"

// cbKernels is empty without assembly.
type cbKernels struct {
	table func(ct, x, out []float32, nseg, k, v int)
}

func cbKernelsFor(*Backend) *cbKernels { return nil }

func (mx *CBMatrix) mulSIMD([]float32, []float32, [][]float32) {}

func (mx *CBMatrix) f16() bool { return false }

func (mx *CBMatrix) scalar() bool { return false }

// cbI16 is the int16 kernel's state, which needs assembly.
type cbI16 struct{}

func (mx *CBMatrix) i16() bool { return false }

// prepareCodes has no kernel state to build without assembly.
func (mx *CBMatrix) prepareCodes() {}

// codeBlocks: no code copies without assembly.
func (mx *CBMatrix) codeBlocks() []*hugemem.Block { return nil }
