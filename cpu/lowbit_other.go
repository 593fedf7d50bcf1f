//go:build noasm || purego || !amd64

package cpu

import "github.com/qgemv/qgemv/layout"

// bitsSIMD has no assembly kernel on this build.
type bitsSIMD struct{}

func newBitsSIMD(*Backend, *layout.Bits) *bitsSIMD { return nil }

func newSparseSIMD(*Backend, *layout.Sparse12) *bitsSIMD { return nil }

func (c *lowCall) mulI8SIMD() error { return nil }

func (c *lowCall) simdRows(int, int, []uint32) {}

func (s *bitsSIMD) kernelName() string { return "" }

func (s *bitsSIMD) setName() string { return "" }

// bitsA32 has no assembly kernel on this build.
type bitsA32 struct{}

func newBitsA32(*Backend, *layout.Bits) *bitsA32 { return nil }

func (c *lowCall) mulF32SIMD() error { return nil }

// sparseA32 has no assembly kernel on this build.
type sparseA32 struct{}

func newSparseA32(*Backend, *layout.Sparse12) *sparseA32 { return nil }

func (c *lowCall) mulF32Sparse() error { return nil }

func (mx *LowMatrix) freeKernels() {}

func (mx *LowMatrix) dropMeta() {}
