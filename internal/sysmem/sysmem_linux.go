package sysmem

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

func total() uint64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	t := (uint64(si.Totalram) + uint64(si.Totalswap)) * uint64(si.Unit)
	// cgroup v2, then v1: a container's limit ("max": none)
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && v < t {
				t = v
			}
			break
		}
	}
	return t
}
