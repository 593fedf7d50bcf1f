//go:build opencl && !amd64

package opencl

// Off amd64 the ICD loader is linked (binding.go's -lOpenCL): a binary
// that starts has it.
func loadICD() error { return nil }
