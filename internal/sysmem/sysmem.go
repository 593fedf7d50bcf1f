// Package sysmem tells how much memory a process can have, so that a size
// from a caller or a file can be refused with an error before an
// allocation that the Go runtime could only answer by ending the process
// ("fatal error: runtime: out of memory" cannot be recovered).
package sysmem

import (
	"fmt"
	"sync"
)

// Total returns the memory a process can hope to allocate, in bytes: the
// machine's RAM plus swap, or the cgroup's memory limit where that is
// lower (Linux); 0 where it is not known.
var Total = sync.OnceValue(total)

// Check returns an error when bytes exceed Total (never where Total is
// unknown). The error names both sizes.
func Check(bytes uint64) error {
	if t := Total(); t != 0 && bytes > t {
		return fmt.Errorf("needs %s, more than the %s of memory this process can have", Size(bytes), Size(t))
	}
	return nil
}

// Size formats a byte count for an error: "1.5 GiB", "512 MiB", "4096 bytes".
func Size(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", b)
}
