//go:build !noasm && !purego

package cpu

import (
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/cpuid/v2"

	"github.com/qgemv/qgemv/layout/codebook"
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
// lines avo wrote for its kernels.
func TestNearestRequires(t *testing.T) {
	requires := requiresLines(t)
	for _, s := range nearestSets {
		var want []string
		for _, f := range s.requires {
			want = append(want, f.String())
		}
		for v, k := range s.fns {
			name := runtime.FuncForPC(reflect.ValueOf(k).Pointer()).Name()
			name = name[strings.LastIndexByte(name, '.')+1:]
			if got := strings.Join(requires[name], ", "); got != strings.Join(want, ", ") {
				t.Errorf("V %d: %s requires %q, nearestSets says %q", v, name, got, want)
			}
		}
	}
}

// TestNearestMany compares the assembly assignment (where this CPU has
// one) with codebook.Nearest, point by point, for V = 2, 4, 8 and 16 to 4096
// centroids, with the ties, zero vectors, infinities and NaNs of
// TestNearest, and with duplicate least centroids in different lanes.
func TestNearestMany(t *testing.T) {
	checkNearestMany(t, nearestMany, 0)
}

// checkNearestMany runs TestNearestMany's comparison on many (tag names
// the kernel set in failures).
func checkNearestMany(t *testing.T, many func(pts []float32, v int, ct, norm []float32, out []uint32) bool, tag int) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, v := range []int{2, 4, 8} {
		for _, k := range []int{16, 64, 256, 1024, 4096} {
			cent := make([]float32, k*v)
			for i := range cent {
				cent[i] = float32(rng.IntN(5) - 2)
			}
			copy(cent[(k-1)*v:k*v], cent[3*v:4*v]) // the same centroid in two lanes
			cent[(k/2)*v] = float32(math.NaN())
			cent[(k/2+1)*v+v-1] = float32(math.Inf(-1))
			norm := make([]float32, k)
			ct := make([]float32, k*v)
			for q := 0; q < k; q++ {
				for e := 0; e < v; e++ {
					norm[q] += cent[q*v+e] * cent[q*v+e]
					ct[e*k+q] = cent[q*v+e]
				}
			}
			const n = 500
			pts := make([]float32, n*v)
			for i := range pts {
				pts[i] = float32(rng.IntN(7)-3) * 0.5
			}
			pts[7*v] = float32(math.Inf(1))
			pts[9*v+1] = float32(math.NaN())
			clear(pts[11*v : 12*v])
			out := make([]uint32, n)
			if !many(pts, v, ct, norm, out) {
				t.Skip("no assembly assignment on this CPU")
			}
			for p := 0; p < n; p++ {
				if want := codebook.Nearest(pts[p*v:(p+1)*v], cent, norm); int(out[p]) != want {
					t.Fatalf("set %d, v %d, k %d, x %v: %d, want %d", tag, v, k, pts[p*v:(p+1)*v], out[p], want)
				}
			}
		}
	}
}
