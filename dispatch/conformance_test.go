package dispatch_test

import (
	"testing"

	"github.com/qgemv/qgemv/cpu"
	"github.com/qgemv/qgemv/dispatch"
	"github.com/qgemv/qgemv/internal/conformance"
)

// TestConformanceCPU runs the backend-neutral suite on every CPU kernel
// set this machine supports (the generic one on the short shapes only).
// Under -race it runs the best set and the generic one: the sets differ
// mostly in assembly, which the detector does not instrument, and each
// takes about 85 s there on two cores.
func TestConformanceCPU(t *testing.T) {
	for _, isa := range cpu.ISAs() {
		if !cpu.Supported(isa) || raceEnabled && isa != cpu.Best() && isa != cpu.Generic {
			continue
		}
		t.Run(string(isa), func(t *testing.T) {
			be, _, err := dispatch.Open(dispatch.Options{Backend: "cpu-" + string(isa), Threads: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			conformance.Run(t, be, conformance.Options{
				Short: testing.Short() || (isa == cpu.Generic && cpu.Best() != cpu.Generic),
			})
		})
	}
}
