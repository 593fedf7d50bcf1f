//go:build cuda

package cuda

// HostQuantRuns is how many host-slice MulA8 calls of b quantized on the
// host (mulA8Host).
func HostQuantRuns(b *Backend) int { return b.hostQuantRuns }
