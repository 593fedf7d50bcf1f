//go:build noasm || purego || !amd64 || !linux

package cpu

// amxPermitted reports false: this build has no AMX kernels, or the OS
// permission request is Linux-only.
func amxPermitted() bool { return false }
