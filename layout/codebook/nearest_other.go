//go:build !amd64 || noasm || purego

package codebook

// nearestMany has no assembly kernel here: assign uses the Go loop.
func nearestMany(pts []float32, v int, ct, norm []float32, out []uint32) bool { return false }
