//go:build !linux

package mmap

// release does nothing outside Linux: the pages stay mapped and the
// system reclaims them under memory pressure.
func release([]byte, int, int) {}
