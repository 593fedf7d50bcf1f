//go:build !race

package dispatch_test

const raceEnabled = false
