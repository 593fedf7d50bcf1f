// Package cuda will hold qgemv's CUDA backend for NVIDIA GPUs, behind the
// build tag "cuda" (it needs cgo, cuda.h, and the NVIDIA driver's
// libcuda.so.1 at run time): PTX for several compute capabilities
// embedded with go:embed, device-resident matrices, SplitK for batch
// 1..16. Nothing is implemented yet; the default build does not need CUDA.
package cuda
