package layout

import (
	"fmt"
	"strconv"
	"strings"
)

// FormatSpec is a format and its parameters as names spell them, e.g.
// "q4g128", "bits4g64", "bits2row", "sparse12g128", "cb-m1v4b8g128",
// "ans4g128", "q6_k" (every registered format's syntax: qgemv formats lists
// them). Which fields a format uses is its own business; the others are
// zero.
type FormatSpec struct {
	Format FormatID
	N      int // bits per weight (Bits, Sparse12: 8, ANS-coded Bits); bits per code (Codebook)
	G      int // group size, 0 for the whole row (Bits, Sparse12, Codebook, ANS-coded Bits)
	M, V   int // codebooks and vector length (Codebook)
	L      int // layout variant (ANS-coded int8: 0 warp rows, 1 warp stripes)
	Type   int // block type (GGML: the ggml type id, e.g. 14 for Q6_K)
}

// ParseFormatSpec parses a format name (case-insensitive) with the
// registered formats' parsers.
func ParseFormatSpec(s string) (FormatSpec, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	for _, f := range Formats() {
		spec, ok, err := f.Parse(name)
		if err != nil {
			return FormatSpec{}, err
		}
		if ok {
			return spec, nil
		}
	}
	return FormatSpec{}, fmt.Errorf("layout: unknown format %q (want %s)", s, syntax())
}

// String returns the spec's name as ParseFormatSpec reads it.
func (f FormatSpec) String() string {
	if fm, ok := LookupFormat(f.Format); ok {
		return fm.String(f)
	}
	return f.Format.String()
}

// Quantize quantizes the rows x cols matrix w to this format. extra is a
// format-specific figure (Sparse12: the fraction of the energy pruning
// dropped; 0 for formats without one).
func (f FormatSpec) Quantize(w []float32, rows, cols int, opt QuantOptions) (m Matrix, extra float64, err error) {
	fm, ok := LookupFormat(f.Format)
	if !ok {
		return nil, 0, fmt.Errorf("layout: cannot quantize to %v (a format package not linked in?)", f.Format)
	}
	if fm.Quantize == nil {
		return nil, 0, fmt.Errorf("layout: format %s is not made from float weights", f)
	}
	return fm.Quantize(f, w, rows, cols, opt)
}

// QuantizeRows quantizes a rows x cols matrix read row by row from src to
// this format: the matrix Quantize makes of the same values. Formats that
// quantize row by row (Q4G128, Bits) hold a row per goroutine; others
// gather the whole matrix first. Source errors and non-finite values are
// errors naming the row.
func (f FormatSpec) QuantizeRows(rows, cols int, opt QuantOptions, src RowSource) (Matrix, error) {
	fm, ok := LookupFormat(f.Format)
	if !ok {
		return nil, fmt.Errorf("layout: cannot quantize to %v (a format package not linked in?)", f.Format)
	}
	if fm.Quantize == nil {
		return nil, fmt.Errorf("layout: format %s is not made from float weights", f)
	}
	if fm.QuantizeRows != nil {
		return fm.QuantizeRows(f, rows, cols, opt, src)
	}
	if err := CheckDims(rows, cols); err != nil {
		return nil, err
	}
	if err := checkBytes(f.String()+" (its float32 values)", rows, cols, 4*uint64(rows)*uint64(cols)); err != nil {
		return nil, err
	}
	w := make([]float32, rows*cols)
	for r := range rows {
		row, err := readRow(src, r, cols, w[r*cols:(r+1)*cols])
		if err != nil {
			return nil, err
		}
		copy(w[r*cols:], row)
	}
	m, _, err := fm.Quantize(f, w, rows, cols, opt)
	return m, err
}

// Quantizable reports whether the format quantizes float weights.
func (f FormatSpec) Quantizable() bool {
	fm, ok := LookupFormat(f.Format)
	return ok && fm.Quantize != nil
}

// ParseGroup parses a spec name's group suffix: "g<n>" (n > 0) or "row"
// (0). It is for format parsers.
func ParseGroup(rest string) (int, bool) {
	if rest == "row" {
		return 0, true
	}
	g, err := strconv.Atoi(strings.TrimPrefix(rest, "g"))
	if err != nil || !strings.HasPrefix(rest, "g") || g <= 0 {
		return 0, false
	}
	return g, true
}

// GroupName spells a group size as ParseGroup reads it.
func GroupName(g int) string {
	if g == 0 {
		return "row"
	}
	return fmt.Sprintf("g%d", g)
}
