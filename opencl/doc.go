// Package opencl will hold qgemv's OpenCL backend for Intel iGPUs and any
// OpenCL 1.2+ device, behind the build tag "opencl" (it needs cgo and an
// OpenCL ICD loader): kernel sources embedded with go:embed, built per
// device with cached binaries, and dispatch that prefers a GPU only when a
// calibration shows it faster. Nothing is implemented yet; the default
// build does not need OpenCL.
package opencl
