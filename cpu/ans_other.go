//go:build !amd64 || noasm || purego

package cpu

import "github.com/qgemv/qgemv/layout/ans"

func ansKernelOK(*Backend) bool { return false }

func (b *Backend) mulANSSIMD(*ans.Matrix, []int8, []int32) error { return nil }

// ansVariant has no effect without assembly.
var ansVariant int
