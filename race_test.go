//go:build race

package qgemv_test

// raceEnabled reports a -race build (whose instrumentation allocates).
const raceEnabled = true
