//go:build !linux

package hugemem

// Alloc returns n zeroed bytes of ordinary Go memory (huge pages are only
// requested on Linux).
func Alloc(n int) *Block {
	return &Block{Bytes: make([]byte, max(n, 0))}
}
