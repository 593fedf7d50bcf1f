//go:build cuda

package cuda

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPTXForNoArch: a $QGEMV_CUDA_PTX directory whose files have no
// numeric sm_ suffix (kernels_sm_90a.ptx) is an error naming them, not an
// index panic (found by review).
func TestPTXForNoArch(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kernels_sm_90a.ptx"), []byte("//"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvPTX, dir)
	if _, _, err := ptxFor(9, 0); err == nil || !strings.Contains(err.Error(), "sm_90a") {
		t.Fatalf("ptxFor: %v, want an error naming kernels_sm_90a.ptx", err)
	}
}
