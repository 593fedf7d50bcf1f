package layout

import (
	"fmt"
	"strconv"
	"strings"
)

// FormatSpec is a format and its parameters as names spell them:
// "q4g128", "bits<n>g<g>" or "bits<n>row" (e.g. "bits4g64", "bits2row"),
// "sparse12g<g>" or "sparse12row", "cb-m<m>v<v>b<b>g<g>" or
// "cb-m<m>v<v>b<b>row" (codebooks, e.g. "cb-m1v4b8g128", "cb-m2v8b8g128").
type FormatSpec struct {
	Format FormatID
	N      int // bits per weight (Bits); bits per code (Codebook)
	G      int // group size, 0 for the whole row (Bits, Sparse12, Codebook)
	M, V   int // codebooks and vector length (Codebook)
}

// ParseFormatSpec parses a format name (case-insensitive).
func ParseFormatSpec(s string) (FormatSpec, error) {
	name := strings.ToLower(s)
	bad := fmt.Errorf("layout: unknown format %q (want q4g128, bits<8|4|3|2|1>g<32|64|128|256>, bits<n>row, sparse12g<g>, sparse12row or cb-m<m>v<v>b<b>g<g>|row)", s)
	group := func(rest string) (int, error) {
		if rest == "row" {
			return 0, nil
		}
		g, err := strconv.Atoi(strings.TrimPrefix(rest, "g"))
		if err != nil || !strings.HasPrefix(rest, "g") {
			return 0, bad
		}
		return g, nil
	}
	switch {
	case name == "q4g128":
		return FormatSpec{Format: FormatQ4G128, N: 4, G: 128}, nil
	case strings.HasPrefix(name, "cb-"):
		var m, v, b int
		var rest string
		if n, err := fmt.Sscanf(name, "cb-m%dv%db%d%s", &m, &v, &b, &rest); n != 4 || err != nil {
			return FormatSpec{}, bad
		}
		g, err := group(rest)
		if err != nil {
			return FormatSpec{}, err
		}
		spec := FormatSpec{Format: FormatCodebook, M: m, V: v, N: b, G: g}
		return spec, spec.checkCodebook()
	case strings.HasPrefix(name, "sparse12"):
		g, err := group(strings.TrimPrefix(name, "sparse12"))
		if err != nil {
			return FormatSpec{}, err
		}
		if _, _, _, err := Sparse12Shape(1, 1, g); err != nil {
			return FormatSpec{}, err
		}
		return FormatSpec{Format: FormatSparse12, N: 8, G: g}, nil
	case strings.HasPrefix(name, "bits") && len(name) > 5:
		n, err := strconv.Atoi(name[4:5])
		if err != nil {
			return FormatSpec{}, bad
		}
		g, err := group(name[5:])
		if err != nil {
			return FormatSpec{}, err
		}
		if _, _, _, err := BitsShape(1, 1, n, g); err != nil {
			return FormatSpec{}, err
		}
		return FormatSpec{Format: FormatBits, N: n, G: g}, nil
	}
	return FormatSpec{}, bad
}

// String returns the spec's name as ParseFormatSpec reads it.
func (f FormatSpec) String() string {
	g := fmt.Sprintf("g%d", f.G)
	if f.G == 0 {
		g = "row"
	}
	switch f.Format {
	case FormatQ4G128:
		return "q4g128"
	case FormatBits:
		return fmt.Sprintf("bits%d%s", f.N, g)
	case FormatSparse12:
		return "sparse12" + g
	case FormatCodebook:
		return fmt.Sprintf("cb-m%dv%db%d%s", f.M, f.V, f.N, g)
	}
	return f.Format.String()
}

// Quantize quantizes the rows x cols matrix w to this format. Q4G128 uses
// opt.Method only; Sparse12 also returns the dropped energy fraction (0
// for the other formats).
func (f FormatSpec) Quantize(w []float32, rows, cols int, opt BitsOptions) (Matrix, float64, error) {
	switch f.Format {
	case FormatQ4G128:
		m, err := QuantizeQ4G128(w, rows, cols, opt.Method)
		return m, 0, err
	case FormatBits:
		m, err := QuantizeBits(w, rows, cols, f.N, f.G, opt)
		return m, 0, err
	case FormatSparse12:
		return QuantizeSparse12(w, rows, cols, f.G, opt)
	}
	if h, ok := formats[f.Format]; ok && h.Quantize != nil {
		m, err := h.Quantize(f, w, rows, cols, opt)
		return m, 0, err
	}
	return nil, 0, fmt.Errorf("layout: cannot quantize to %v (a format package not linked in?)", f.Format)
}

// Codebook limits (layout/codebook checks the same).
var (
	CodebookMs = []int{1, 2}
	CodebookVs = []int{2, 4, 8}
	CodebookBs = []int{4, 6, 8, 10, 12}
)

// checkCodebook checks a codebook spec's parameters: the group must be a
// multiple of v (g = v: per-vector scales) up to 256, or the whole row.
func (f FormatSpec) checkCodebook() error {
	in := func(v int, set []int) bool {
		for _, s := range set {
			if s == v {
				return true
			}
		}
		return false
	}
	if !in(f.M, CodebookMs) || !in(f.V, CodebookVs) || !in(f.N, CodebookBs) {
		return fmt.Errorf("layout: codebook m%d v%d b%d: want m in %v, v in %v, b in %v", f.M, f.V, f.N, CodebookMs, CodebookVs, CodebookBs)
	}
	if f.G != 0 && (f.G%f.V != 0 || f.G > 256 || f.G&(f.G-1) != 0) {
		return fmt.Errorf("layout: codebook group %d: want a power of two multiple of v = %d up to 256, or the whole row", f.G, f.V)
	}
	return nil
}
