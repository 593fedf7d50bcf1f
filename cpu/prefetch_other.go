//go:build noasm || purego || !amd64

package cpu

// prefetchL2 does nothing without assembly: the rows are read when
// multiplied.
func prefetchL2([]byte) {}
