//go:build race

package dispatch_test

// raceEnabled reports a -race build.
const raceEnabled = true
