//go:build !noasm && !purego

package cpu

import (
	"slices"
	"testing"
)

// TestDisabled: EnvDisable's names are parsed once for the kernel sets,
// "amx" and the names that are neither (generic cannot be disabled).
func TestDisabled(t *testing.T) {
	t.Setenv(EnvDisable, " AVX2, amx ,cpu-avxvnni,,bogus,generic")
	sets, unknown := Disabled()
	if !slices.Equal(sets, []ISA{AVX2, AVXVNNI}) || !slices.Equal(unknown, []string{"bogus", "generic"}) {
		t.Errorf("sets %v, unknown %q", sets, unknown)
	}
	if !AMXDisabled() {
		t.Error("amx not disabled")
	}
	t.Setenv(EnvDisable, "avx2")
	if AMXDisabled() {
		t.Error("amx disabled by avx2")
	}
}
