package sysmem

import (
	"bufio"
	"os"
	"path/filepath"
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
	for _, p := range cgroupLimits() {
		if b, err := os.ReadFile(p); err == nil {
			// "max" (no limit) does not parse
			if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && v < t {
				t = v
			}
		}
	}
	return t
}

// cgroupLimits returns the memory-limit files of this process's cgroup and
// its ancestors (cgroup v2; v1's memory controller), as far as they are
// visible: with a cgroup namespace the process's own is the mount's root.
func cgroupLimits() []string {
	files := []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return files
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "0::/path" (v2) or "N:memory,...:/path" (v1)
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			continue
		}
		var root, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			root, file = "/sys/fs/cgroup", "memory.max"
		case strings.Contains(","+parts[1]+",", ",memory,"):
			root, file = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		for dir := filepath.Clean(parts[2]); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
			files = append(files, filepath.Join(root, dir, file))
		}
	}
	return files
}
