//go:build opencl && amd64

package opencl

import (
	_ "embed"
	"fmt"
	"strings"
	"testing"
)

// trampolineSrc is the assembly, embedded so the test binary runs from
// any directory (it is built here and run on GPU machines).
//
//go:embed loader_amd64.S
var trampolineSrc string

// TestICDTrampolines checks that loader_amd64.S defines one trampoline
// per slot of qg_cl_fn, in slot order, each jumping through its own slot.
func TestICDTrampolines(t *testing.T) {
	names := icdNames()
	var labels, jumps []string
	for _, l := range strings.Split(trampolineSrc, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasSuffix(l, ":") && strings.HasPrefix(l, "cl"):
			labels = append(labels, strings.TrimSuffix(l, ":"))
		case strings.HasPrefix(l, "jmp "):
			jumps = append(jumps, l)
		}
	}
	if len(labels) != len(names) || len(jumps) != len(names) {
		t.Fatalf("%d labels and %d jumps for %d slots", len(labels), len(jumps), len(names))
	}
	for i, n := range names {
		if labels[i] != n {
			t.Errorf("trampoline %d is %s, slot %d is %s", i, labels[i], i, n)
		}
		if want := fmt.Sprintf("jmp *qg_cl_fn+%d(%%rip)", 8*i); jumps[i] != want {
			t.Errorf("%s: %q, want %q", n, jumps[i], want)
		}
	}
}
