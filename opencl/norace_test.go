//go:build opencl && !race

package opencl

const raceEnabled = false
