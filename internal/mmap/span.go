package mmap

import "unsafe"

// within returns the byte range [lo, hi) of data that b occupies, or
// lo = -1 when b does not lie inside data.
func within(data, b []byte) (lo, hi int) {
	if len(data) == 0 || len(b) == 0 {
		return -1, -1
	}
	d0 := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	b0 := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if b0 < d0 || b0-d0 > uintptr(len(data)) || uintptr(len(b)) > uintptr(len(data))-(b0-d0) {
		return -1, -1
	}
	lo = int(b0 - d0)
	return lo, lo + len(b)
}
