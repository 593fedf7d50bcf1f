package mmap

import (
	"os"
	"syscall"
)

// release advises MADV_DONTNEED for the whole pages of data[lo:hi] (the
// mapping starts on a page boundary; pages shared with a neighbour are
// released too, and simply fault back in when read).
func release(data []byte, lo, hi int) {
	ps := os.Getpagesize()
	lo = lo / ps * ps
	hi = min(len(data), (hi+ps-1)/ps*ps)
	if lo < hi {
		_ = syscall.Madvise(data[lo:hi], syscall.MADV_DONTNEED) // advisory
	}
}
