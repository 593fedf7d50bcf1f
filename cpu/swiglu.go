package cpu

import "math"

// swigluAsm is the assembly SwiGLU over a multiple of 16 values, or nil.
var swigluAsm func(d, g, u *float32, n int)

// SwiGLU sets d[i] = g[i] / (1 + exp(-g[i])) * u[i] for every i of d (g
// and u at least as long; d may be g or u): the activation between an
// FFN's gate and up projections and its down projection. Within 4 ulps of
// that formula with exp in float64 (TestSwiGLU); NaN stays NaN.
func SwiGLU(d, g, u []float32) {
	g, u = g[:len(d)], u[:len(d)]
	n := 0
	if swigluAsm != nil {
		if n = len(d) &^ 15; n > 0 {
			swigluAsm(&d[0], &g[0], &u[0], n)
		}
	}
	swigluGeneric(d[n:], g[n:], u[n:])
}

func swigluGeneric(d, g, u []float32) {
	for i := range d {
		x := g[i]
		d[i] = x / (1 + float32(math.Exp(float64(-x)))) * u[i]
	}
}
