//go:build !amd64 || noasm || purego

package cpu

func int8KernelFor(*Backend) int8Kind { return int8Generic }

func int8Kernel([]int8, int, []uint8, int, int, []int32) {}

func int8KernelAVX2([]int8, int, []int16, int, int, []int32) {}
