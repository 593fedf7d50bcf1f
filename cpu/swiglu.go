package cpu

import (
	"fmt"
	"math"
)

// swigluAsm is the assembly SwiGLU over a multiple of 16 values, or nil.
var swigluAsm func(d, g, u *float32, n int)

// SwiGLU sets d[i] = g[i] / (1 + exp(-g[i])) * u[i] for every i of d (d
// may be g or u): the activation between an FFN's gate and up projections
// and its down projection. Within 4 ulps of that formula with exp in
// float64 (TestSwiGLU); NaN stays NaN. g or u shorter than d is an error.
func SwiGLU(d, g, u []float32) error {
	if len(g) < len(d) || len(u) < len(d) {
		return fmt.Errorf("cpu: SwiGLU of %d values: gate has %d, up %d", len(d), len(g), len(u))
	}
	g, u = g[:len(d)], u[:len(d)]
	n := 0
	if swigluAsm != nil {
		if n = len(d) &^ 15; n > 0 {
			swigluAsm(&d[0], &g[0], &u[0], n)
		}
	}
	swigluGeneric(d[n:], g[n:], u[n:])
	return nil
}

func swigluGeneric(d, g, u []float32) {
	for i := range d {
		x := g[i]
		d[i] = x / (1 + float32(math.Exp(float64(-x)))) * u[i]
	}
}
