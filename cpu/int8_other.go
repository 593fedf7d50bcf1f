//go:build !amd64 || noasm || purego

package cpu

func int8KernelOK(*Backend) bool { return false }

func int8Kernel([]int8, int, []uint8, int, int, []int32) {}
