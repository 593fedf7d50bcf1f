package ans

import (
	"fmt"
	"math"

	"github.com/qgemv/qgemv/layout"
)

func init() {
	layout.RegisterFormat(layout.Format{
		ID: layout.FormatANS, Name: "ANS", Syntax: "ans-warp-rows, ans-warp-stripes",
		Parse: func(name string) (layout.FormatSpec, bool, error) {
			for _, l := range []Layout{WarpRows, WarpStripes} {
				if name == "ans-"+l.String() {
					return layout.FormatSpec{Format: layout.FormatANS, N: 8, L: int(l)}, true, nil
				}
			}
			return layout.FormatSpec{}, false, nil
		},
		String: func(s layout.FormatSpec) string { return "ans-" + Layout(s.L).String() },
		Decode: func(f *layout.File) (layout.Matrix, error) { return DecodeFile(f) },
		Random: func(s layout.FormatSpec, rows, cols int, seed uint64) (layout.Matrix, error) {
			return Random(Layout(s.L), rows, cols, seed)
		},
		Int8Values:    true,
		Examples:      []string{"ans-warp-rows", "ans-warp-stripes"},
		ShortExamples: 2,
	})
}

// RandomSigma is the spread of Random's values.
const RandomSigma = 4

// Random encodes a rows x cols matrix of values round(N(0, 16)) clipped
// to int8 (MatVANS's distribution at sigma 4), determined by seed, in
// layout l. A shape the layout cannot hold is an error.
func Random(l Layout, rows, cols int, seed uint64) (*Matrix, error) {
	if err := CheckShape(l, rows, cols); err != nil {
		return nil, err
	}
	rng := layout.NewRand(seed)
	w := make([]int8, rows*cols)
	for i := range w {
		v := math.RoundToEven(rng.NormFloat64() * RandomSigma)
		w[i] = int8(max(-128, min(127, v)))
	}
	return Encode(w, rows, cols, l)
}

// Spec returns the matrix's spec.
func (m *Matrix) Spec() layout.FormatSpec {
	return layout.FormatSpec{Format: layout.FormatANS, N: 8, L: int(m.Layout)}
}

// DotInt32 computes y = W v exactly by decoding every unit; a corrupt
// stream is an error wrapping ErrCorrupt.
func (m *Matrix) DotInt32(y []int32, v []int8) error {
	if len(v) != m.Cols || len(y) != m.Rows {
		return fmt.Errorf("ans: %s %dx%d: v has %d values, y %d", m.Name(), m.Rows, m.Cols, len(v), len(y))
	}
	per := 1
	if m.Layout == WarpStripes {
		per = Lanes
	}
	for u := 0; u < m.Units(); u++ {
		if err := m.DotUnit(u, v, y[u*per:]); err != nil {
			return err
		}
	}
	return nil
}

// DotRef computes W x in float64 (decoding the matrix).
func (m *Matrix) DotRef(out []float64, x []float32) error { return m.dotF64(out, x, false) }

// DotRefMag computes sum_c |W[r,c] x[c]|.
func (m *Matrix) DotRefMag(mag []float64, x []float32) error { return m.dotF64(mag, x, true) }

func (m *Matrix) dotF64(out []float64, x []float32, abs bool) error {
	if len(x) != m.Cols || len(out) != m.Rows {
		return fmt.Errorf("ans: %s %dx%d: x has %d values, out %d", m.Name(), m.Rows, m.Cols, len(x), len(out))
	}
	w, err := m.Decode()
	if err != nil {
		return err
	}
	for r := range out {
		var s float64
		for c, q := range w[r*m.Cols : (r+1)*m.Cols] {
			p := float64(q) * float64(x[c])
			if abs {
				p = math.Abs(p)
			}
			s += p
		}
		out[r] = s
	}
	return nil
}

// Tolerance returns layout.BitsTolerance.
func (m *Matrix) Tolerance([]float32) (rel, abs float64) { return layout.BitsTolerance, 0 }

var _ layout.Int32Matrix = (*Matrix)(nil)
