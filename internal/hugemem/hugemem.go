// Package hugemem allocates large buffers backed by transparent huge pages
// where the OS offers them (Linux with THP in "madvise" or "always" mode),
// and by ordinary Go memory elsewhere. Streaming a matrix through 2 MiB
// pages avoids a TLB miss every 4 KiB, which matters to the kernels'
// linear software prefetch (measured +10% W4A8 on one Zen 4 thread).
package hugemem

// Block is a buffer from Alloc. Free releases it; the slice must not be
// used afterwards.
type Block struct {
	Bytes []byte
	free  func()
}

// Free releases the block's memory (a no-op for Go-allocated blocks).
// It is safe to call more than once.
func (b *Block) Free() {
	if b.free != nil {
		b.free()
		b.free = nil
	}
	b.Bytes = nil
}

// hugePage is the huge page size the allocation is aligned to.
const hugePage = 2 << 20
