package sysmem

import (
	"runtime"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tot := Total()
	if runtime.GOOS == "linux" && tot < 1<<26 {
		t.Fatalf("Total %d: not this machine's memory", tot)
	}
	if tot == 0 {
		t.Skip("memory size unknown here")
	}
	if err := Check(tot); err != nil {
		t.Errorf("Check(Total): %v", err)
	}
	if err := Check(1 << 62); err == nil || !strings.Contains(err.Error(), "4294967296.0 GiB") {
		t.Errorf("Check(2^62): %v", err)
	}
}
