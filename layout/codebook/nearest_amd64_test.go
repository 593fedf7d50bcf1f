//go:build !noasm && !purego

package codebook

import (
	"os"
	"reflect"
	"runtime"
	"strings"
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

// TestNearestRequires checks nearestSets' features against the Requires
// lines avo wrote for its kernels in asm/codebook_amd64.s.
func TestNearestRequires(t *testing.T) {
	src, err := os.ReadFile("../../asm/codebook_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	requires := map[string]string{} // kernel -> its Requires line
	var fn string
	for _, line := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(line, "// func "); ok {
			fn = rest[:strings.IndexByte(rest, '(')]
		} else if rest, ok := strings.CutPrefix(line, "// Requires: "); ok {
			requires[fn] = rest
		}
	}
	for _, s := range nearestSets {
		var want []string
		for _, f := range s.requires {
			want = append(want, f.String())
		}
		for v, k := range s.fns {
			name := runtime.FuncForPC(reflect.ValueOf(k).Pointer()).Name()
			name = name[strings.LastIndexByte(name, '.')+1:]
			if got := requires[name]; got != strings.Join(want, ", ") {
				t.Errorf("V %d: %s requires %q, nearestSets says %q", v, name, got, want)
			}
		}
	}
}
