//go:build opencl && race

package opencl

// raceEnabled reports a -race build (whose instrumentation allocates).
const raceEnabled = true
