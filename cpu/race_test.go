//go:build race

package cpu

// raceEnabled reports a -race build (whose instrumentation allocates).
const raceEnabled = true
