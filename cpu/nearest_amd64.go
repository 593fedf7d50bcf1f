//go:build !noasm && !purego

package cpu

import (
	"github.com/klauspost/cpuid/v2"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout/codebook"
)

// nearestFunc is asm.NearestV<v><isa>: nearest for n points at once,
// with the centroids transposed (ct[e*k + q]).
type nearestFunc func(x *float32, n int, ct *float32, k int, norm *float32, out *uint32)

// nearestSets are the assembly assignments by V, best first, with the
// features their Requires lines name.
var nearestSets = []struct {
	requires []cpuid.FeatureID
	fns      map[int]nearestFunc
}{
	{[]cpuid.FeatureID{cpuid.AVX, cpuid.AVX512F}, map[int]nearestFunc{2: asm.NearestV2Avx512, 4: asm.NearestV4Avx512, 8: asm.NearestV8Avx512}},
	{[]cpuid.FeatureID{cpuid.AVX, cpuid.AVX2}, map[int]nearestFunc{2: asm.NearestV2Avx2, 4: asm.NearestV4Avx2, 8: asm.NearestV8Avx2}},
}

// nearestKernels is the best set this CPU runs that QGEMV_CPU_DISABLE
// allows, or nil (the Go loop): installHelpers sets it, and installs
// nearestMany as codebook.Quantize's k-means assignment (the same codes as
// its Go loop, faster).
var nearestKernels map[int]nearestFunc

// installNearest is installHelpers' part for the k-means assignment.
func installNearest(disabled []ISA) {
	nearestKernels = nil
	codebook.SetNearestKernel(nil)
	for _, s := range nearestSets {
		names := make([]string, len(s.requires))
		for i, f := range s.requires {
			names[i] = f.String()
		}
		if helperAllowed(names, disabled) {
			nearestKernels = s.fns
			codebook.SetNearestKernel(nearestMany)
			return
		}
	}
}

// nearestMany sets out[p] = codebook.Nearest(pts[p*v:(p+1)*v], cent, norm) for
// every point, with the assembly kernel when there is one for v and k is
// a multiple of 16 (ct is cent transposed); it reports whether it did.
func nearestMany(pts []float32, v int, ct, norm []float32, out []uint32) bool {
	return nearestWith(nearestKernels[v], pts, v, ct, norm, out)
}

func nearestWith(fn nearestFunc, pts []float32, v int, ct, norm []float32, out []uint32) bool {
	k := len(norm)
	if fn == nil || k%16 != 0 || len(out) == 0 {
		return false
	}
	_ = pts[len(out)*v-1]
	_ = ct[v*k-1]
	fn(&pts[0], len(out), &ct[0], k, &norm[0], &out[0])
	return true
}
