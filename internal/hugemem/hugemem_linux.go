//go:build linux

package hugemem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Alloc returns n zeroed bytes. On Linux the block is an anonymous mapping
// aligned to 2 MiB and advised MADV_HUGEPAGE; if the mapping fails it
// falls back to Go memory, so Alloc fails only where make would.
func Alloc(n int) *Block {
	if n <= 0 {
		return &Block{Bytes: []byte{}}
	}
	m, err := unix.Mmap(-1, 0, n+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return &Block{Bytes: make([]byte, n)}
	}
	off := int((hugePage - uintptr(unsafe.Pointer(&m[0]))%hugePage) % hugePage)
	b := m[off : off+n : off+n]
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advisory: THP may be off
	return &Block{Bytes: b, free: func() { _ = unix.Munmap(m) }}
}
