//go:build !noasm && !purego

package codebook

import (
	"testing"

	"github.com/klauspost/cpuid/v2"
)

// TestNearestSets runs TestNearestMany's comparison for every assembly
// set this CPU supports, not only the one assign picks.
func TestNearestSets(t *testing.T) {
	ran := 0
	for i, s := range nearestSets {
		if !cpuid.CPU.Supports(s.requires...) {
			continue
		}
		ran++
		checkNearestMany(t, func(pts []float32, v int, ct, norm []float32, out []uint32) bool {
			return nearestWith(s.fns[v], pts, v, ct, norm, out)
		}, i)
	}
	if ran == 0 {
		t.Skip("no assembly assignment on this CPU")
	}
}
