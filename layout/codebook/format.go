package codebook

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qgemv/qgemv/layout"
)

// Configuration limits.
var (
	Ms = []int{1, 2}
	Vs = []int{2, 4, 8}
	Bs = []int{4, 6, 8, 10, 12}
)

// checkConfig checks m, v, b and the group g (0: the whole row): a
// power-of-two multiple of v (g = v: per-vector scales) up to 256.
func checkConfig(m, v, b, g int) error {
	if !slices.Contains(Ms, m) || !slices.Contains(Vs, v) || !slices.Contains(Bs, b) {
		return fmt.Errorf("layout: codebook m%d v%d b%d: want m in %v, v in %v, b in %v", m, v, b, Ms, Vs, Bs)
	}
	if g != 0 && (g < 0 || g%v != 0 || g > 256 || g&(g-1) != 0) {
		return fmt.Errorf("layout: codebook group %d: want a power of two multiple of v = %d up to 256, or the whole row", g, v)
	}
	return nil
}

func init() {
	layout.RegisterFormat(layout.Format{
		ID: layout.FormatCodebook, Name: "Codebook", Syntax: "cb-m<m>v<v>b<b>g<g>, cb-m<m>v<v>b<b>row",
		Parse: func(name string) (layout.FormatSpec, bool, error) {
			if !strings.HasPrefix(name, "cb-") {
				return layout.FormatSpec{}, false, nil
			}
			var m, v, b int
			var rest string
			if n, err := fmt.Sscanf(name, "cb-m%dv%db%d%s", &m, &v, &b, &rest); n != 4 || err != nil {
				return layout.FormatSpec{}, false, nil
			}
			g, ok := layout.ParseGroup(rest)
			if !ok {
				return layout.FormatSpec{}, false, nil
			}
			return layout.FormatSpec{Format: layout.FormatCodebook, M: m, V: v, N: b, G: g}, true, checkConfig(m, v, b, g)
		},
		String: func(s layout.FormatSpec) string {
			return fmt.Sprintf("cb-m%dv%db%d%s", s.M, s.V, s.N, layout.GroupName(s.G))
		},
		Decode: func(f *layout.File) (layout.Matrix, error) { return Decode(f) },
		Quantize: func(spec layout.FormatSpec, w []float32, rows, cols int, opt layout.QuantOptions) (layout.Matrix, float64, error) {
			m, err := Quantize(w, rows, cols, spec, Options{FP32: opt.FP32Meta, Seed: opt.Seed, Iters: opt.Iters, TimeBudget: opt.TimeBudget, Progress: opt.Progress})
			return m, 0, err
		},
		Random: func(spec layout.FormatSpec, rows, cols int, seed uint64) (layout.Matrix, error) {
			return Random(spec, rows, cols, seed)
		},
		KMeans:        true,
		Examples:      []string{"cb-m1v4b8g128", "cb-m2v8b6g128"},
		ShortExamples: 2,
	})
}

// Random returns a codebook matrix of spec with random codes, Gaussian
// centroids and scales in [0.01, 0.11), determined by seed.
func Random(spec layout.FormatSpec, rows, cols int, seed uint64) (*Codebook, error) {
	rng := layout.NewRand(seed)
	c, err := New(rows, cols, spec.M, spec.V, spec.N, spec.G, false)
	if err != nil {
		return nil, err
	}
	for i := range c.Words[:len(c.Words)-32] { // random bit streams; the tail stays zero
		c.Words[i] = rng.Uint32()
	}
	for i := range c.Centroids16 {
		c.Centroids16[i] = layout.ToFP16(float32(rng.NormFloat64()))
	}
	for i := range c.Scales16 {
		c.Scales16[i] = layout.ToFP16(float32(float64(rng.Float64()*0.1) + 0.01))
	}
	return c, nil
}
