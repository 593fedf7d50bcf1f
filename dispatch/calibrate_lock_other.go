//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package dispatch

// lockCalibration does nothing here: without flock, two processes
// calibrating at once may time each other (each still caches a verdict).
func lockCalibration() func() { return func() {} }
