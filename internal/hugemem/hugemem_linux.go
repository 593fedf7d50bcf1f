//go:build linux

package hugemem

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxMappings bounds the blocks mapped at once: each is one mapping (one
// kernel memory area), and a process may hold vm.max_map_count of those
// (65530 by default), which the Go runtime needs too. A model of tens of
// thousands of tensors (per-expert weights) gets the blocks beyond it as
// Go memory.
const maxMappings = 16384

// mappings counts the blocks mapped now.
var mappings atomic.Int64

// Alloc returns n zeroed bytes. On Linux the block is an anonymous mapping
// aligned to 2 MiB and advised MADV_HUGEPAGE (the slack mapped to align it
// is unmapped again, so the block is one mapping); if the mapping fails,
// or maxMappings are held, it falls back to Go memory, so Alloc fails
// only where make would.
func Alloc(n int) *Block {
	if n <= 0 {
		return &Block{Bytes: []byte{}}
	}
	if mappings.Add(1) > maxMappings {
		mappings.Add(-1)
		return &Block{Bytes: make([]byte, n)}
	}
	total := uintptr(n + hugePage)
	p, err := unix.MmapPtr(-1, 0, nil, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		mappings.Add(-1)
		return &Block{Bytes: make([]byte, n)}
	}
	off := (hugePage - uintptr(p)%hugePage) % hugePage
	end := off + uintptr(n+pageSize-1)/uintptr(pageSize)*uintptr(pageSize) // the block's pages
	// Trimming is best effort: an area left mapped is only address space.
	if off > 0 {
		_ = unix.MunmapPtr(p, off)
	}
	if end < total {
		_ = unix.MunmapPtr(unsafe.Add(p, end), total-end)
	}
	start := unsafe.Add(p, off)
	b := unsafe.Slice((*byte)(start), n)
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advisory: THP may be off
	return &Block{Bytes: b, free: func() {
		_ = unix.MunmapPtr(start, end-off)
		mappings.Add(-1)
	}}
}

// pageSize is the granule the mapping is trimmed at.
var pageSize = unix.Getpagesize()
