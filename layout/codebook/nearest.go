package codebook

import "sync/atomic"

// NearestKernel assigns each of the len(out) points of v values in pts
// to its nearest centroid, exactly as Nearest does point by point, from
// the k = len(norm) centroids transposed (ct[e*k + q]) and their squared
// norms; it reports whether it did (false: no kernel for this v or k,
// and out is untouched).
type NearestKernel func(pts []float32, v int, ct, norm []float32, out []uint32) bool

var nearestKernel atomic.Pointer[NearestKernel]

// SetNearestKernel makes Quantize assign points with f (nil: the Go
// loop). Package cpu installs its assembly at init; the codes are the
// same either way, so whether it is linked in changes only the speed.
func SetNearestKernel(f NearestKernel) {
	if f == nil {
		nearestKernel.Store(nil)
		return
	}
	nearestKernel.Store(&f)
}

// nearestMany runs the installed kernel, if any.
func nearestMany(pts []float32, v int, ct, norm []float32, out []uint32) bool {
	if f := nearestKernel.Load(); f != nil {
		return (*f)(pts, v, ct, norm, out)
	}
	return false
}

// Nearest returns the centroid q minimizing norm[q] - 2 x.c_q (the first
// on ties), the assignment every NearestKernel must reproduce: cent holds
// len(norm) centroids of len(x) values each. Slices that do not fit
// (an empty x or norm, cent shorter than that) give -1.
func Nearest(x, cent, norm []float32) int {
	if len(x) == 0 || len(norm) == 0 || len(cent)/len(x) < len(norm) {
		return -1
	}
	return nearest(x, cent, norm)
}
