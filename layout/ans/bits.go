package ans

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/qgemv/qgemv/layout"
)

// Bits is a layout.Bits matrix whose packed words are entropy-coded: an
// ordinary weight format (Engine.Load, Mul, MulFP16, MulInt8) that
// streams fewer bytes than its plain twin when its codes are not uniform
// (quantized weights rarely are: a Gaussian row quantized to 8 bits with
// min-max scales has about 7.4 bits of entropy per code, to 4 bits about
// 3.4).
//
// # Layout
//
// Header is the matrix as layout.Bits without its words (Words is nil):
// shape, width N (8, 4, 2 or 1), group, scales and zero points (or
// offsets), the act-order permutation; its multiplies are defined as
// Header's with the decoded words, so every activation type, bound and
// A8 result is the plain twin's (Plain), bit for bit.
//
// Code holds the words: the words of rows R*u .. R*u+R-1, as little-endian
// bytes in row order, byte b coded as the int8 value b^0x80, are row u of
// the warp-rows Matrix Code (PRows/R rows of R*4*WordsPerRow bytes). Coder
// t of a unit decodes quad t of every 128-byte chunk: word 32k+t of a
// row, which for Bits' universal packing is the word lane t of a 32-wide
// warp reads for chunk k. A decoder (a GPU warp, or two SIMD registers of
// 16 lanes) therefore holds, after each step, exactly the plain format's
// words of one chunk in lane order, the units' rows in order. R
// (RowsPerUnit) is the largest of 16, 8, 4, 2, 1 that keeps a unit within
// MaxCols bytes: units of several rows share the coders' initial states
// and the padding of their stream to 128 words (512 bytes per unit
// together), which one row of 2 KiB would pay alone. A row of
// 4*WordsPerRow bytes (a multiple of 128 for every width) must itself fit
// MaxCols.
//
// # Container
//
// .qgv format 7 (layout.FormatANSBits): Header's Bits parameters and
// sections without WRDS (SCAL, ZERO[, PERM]; layout.Bits.BitsHeaderFile),
// then Code's five sections (MODL, OFFS, ESCO, WRDS, ESCV) as in format 5.
type Bits struct {
	Header layout.Bits
	Code   *Matrix
}

// BitsWidths lists the widths Bits codes (3-bit words have spare bits no
// decoded word may set, so they stay plain).
var BitsWidths = []int{8, 4, 2, 1}

// EncodeBits entropy-codes the words of b (validated first) into a Bits.
// The words' bytes must fit the coder's row limit: 4*WordsPerRow <=
// MaxCols.
func EncodeBits(b *layout.Bits) (*Bits, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if !slices.Contains(BitsWidths, b.N) {
		return nil, fmt.Errorf("ans: %s: %d-bit codes cannot be entropy-coded (want %v)", b.Name(), b.N, BitsWidths)
	}
	wpr := b.WordsPerRow()
	r := unitRows(4 * wpr)
	if r == 0 {
		return nil, fmt.Errorf("ans: %s: rows of %d bytes, the coder takes at most %d", b.Name(), 4*wpr, MaxCols)
	}
	w := make([]int8, 4*len(b.Words))
	for i, x := range b.Words {
		for j := 0; j < 4; j++ {
			w[4*i+j] = int8(byte(x>>(8*j)) ^ 0x80)
		}
	}
	code, err := Encode(w, b.PRows/r, r*4*wpr, WarpRows)
	if err != nil {
		return nil, fmt.Errorf("ans: %s: %w", b.Name(), err)
	}
	h := *b
	h.Words = nil
	return &Bits{Header: h, Code: code}, nil
}

// unitRows returns R for rows of rowBytes bytes: the largest of 16, 8, 4,
// 2, 1 with R*rowBytes <= MaxCols, or 0 when a row alone is longer.
func unitRows(rowBytes int) int {
	for r := 16; r >= 1; r /= 2 {
		if r*rowBytes <= MaxCols {
			return r
		}
	}
	return 0
}

// RowsPerUnit returns R, the rows of one unit of Code.
func (m *Bits) RowsPerUnit() int { return unitRows(4 * m.Header.WordsPerRow()) }

// Name returns e.g. "ANS8G128" or "ANS4Row".
func (m *Bits) Name() string { return "ANS" + strings.TrimPrefix(m.Header.Name(), "Bits") }

// Spec returns the matrix's spec.
func (m *Bits) Spec() layout.FormatSpec {
	s := m.Header.Spec()
	s.Format = layout.FormatANSBits
	return s
}

// Shape returns the true rows and columns.
func (m *Bits) Shape() (rows, cols int) { return m.Header.Rows, m.Header.Cols }

// PaddedCols returns Header.PCols.
func (m *Bits) PaddedCols() int { return m.Header.PCols }

// StreamBytes returns the coded words' bytes (Code.CodedBytes) plus the
// metadata's.
func (m *Bits) StreamBytes() int64 { return m.Header.StreamBytes() + m.Code.CodedBytes() }

// Validate checks the header (layout.Bits.ValidateHeader), the width, and
// the code's shape, model and offsets (Matrix.Validate); the streams
// themselves are checked while decoding.
func (m *Bits) Validate() error {
	if m == nil {
		return errors.New("ans: Bits is nil")
	}
	if err := m.Header.ValidateHeader(); err != nil {
		return err
	}
	if m.Header.Words != nil {
		return fmt.Errorf("ans: %s: the header holds words; Code holds them", m.Name())
	}
	if !slices.Contains(BitsWidths, m.Header.N) {
		return fmt.Errorf("ans: %s: %d-bit codes, want %v", m.Name(), m.Header.N, BitsWidths)
	}
	if m.Code == nil {
		return fmt.Errorf("ans: %s: no code", m.Name())
	}
	r := m.RowsPerUnit()
	if r == 0 {
		return fmt.Errorf("ans: %s: rows of %d bytes, the coder takes at most %d", m.Name(), 4*m.Header.WordsPerRow(), MaxCols)
	}
	if m.Code.Layout != WarpRows || m.Code.Rows != m.Header.PRows/r || m.Code.Cols != r*4*m.Header.WordsPerRow() {
		return fmt.Errorf("ans: %s: code is %s %dx%d, want warp-rows %dx%d", m.Name(), m.Code.Layout, m.Code.Rows, m.Code.Cols,
			m.Header.PRows/r, r*4*m.Header.WordsPerRow())
	}
	return m.Code.Validate()
}

// DecodeUnitWords decodes unit u of Code, the words of rows R*u ..
// R*u+R-1, into dst (R*WordsPerRow words, row-major); a corrupt stream is
// an error wrapping ErrCorrupt.
func (m *Bits) DecodeUnitWords(u int, dst []uint32) error {
	n := m.Code.Cols / 4
	if u < 0 || u >= m.Code.Rows || len(dst) < n {
		return fmt.Errorf("ans: %s: DecodeUnitWords: unit %d of %d, %d words for %d", m.Name(), u, m.Code.Rows, len(dst), n)
	}
	dst = dst[:n]
	clear(dst)
	return m.Code.decodeUnit(u, func(lane, step int, q *[4]int8) {
		var w uint32
		for i, v := range q {
			w |= uint32(byte(v)^0x80) << (8 * i)
		}
		dst[32*step+lane] = w
	})
}

// Plain returns the plain twin: Header with the decoded words.
func (m *Bits) Plain() (*layout.Bits, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b := m.Header
	n := m.Code.Cols / 4
	b.Words = make([]uint32, b.PRows*b.WordsPerRow())
	for u := 0; u < m.Code.Rows; u++ {
		if err := m.DecodeUnitWords(u, b.Words[u*n:(u+1)*n]); err != nil {
			return nil, err
		}
	}
	return &b, nil
}

// Dequantize returns the plain twin's Dequantize (nil if a stream is
// corrupt).
func (m *Bits) Dequantize() []float32 {
	p, err := m.Plain()
	if err != nil {
		return nil
	}
	return p.Dequantize()
}

// The reference methods are the plain twin's.

// DotRef is the plain twin's DotRef.
func (m *Bits) DotRef(out []float64, x []float32) error {
	p, err := m.Plain()
	if err != nil {
		return err
	}
	return p.DotRef(out, x)
}

// DotRefMag is the plain twin's DotRefMag.
func (m *Bits) DotRefMag(mag []float64, x []float32) error {
	p, err := m.Plain()
	if err != nil {
		return err
	}
	return p.DotRefMag(mag, x)
}

// DotA8Exact is the plain twin's DotA8Exact.
func (m *Bits) DotA8Exact(out []float32, xq []int8, xs []float32) error {
	p, err := m.Plain()
	if err != nil {
		return err
	}
	return p.DotA8Exact(out, xq, xs)
}

// Tolerance returns layout.BitsTolerance.
func (m *Bits) Tolerance([]float32) (rel, abs float64) { return layout.BitsTolerance, 0 }

// IntegerZeros is the header's.
func (m *Bits) IntegerZeros() error { return m.Header.IntegerZeros() }

// Groups is the header's.
func (m *Bits) Groups() int { return m.Header.Groups() }

// GroupCols is the header's.
func (m *Bits) GroupCols() int { return m.Header.G }

// PaddedRows is the header's.
func (m *Bits) PaddedRows() int { return m.Header.PRows }

// Affine is the header's.
func (m *Bits) Affine(r, g int) (s, sz float32) { return m.Header.Affine(r, g) }

// ZeroPoint is the header's.
func (m *Bits) ZeroPoint(r, g int) float32 { return m.Header.Zero(r, g) }

// ColumnPerm returns the header's act-order permutation.
func (m *Bits) ColumnPerm() []int32 { return m.Header.Perm }

var (
	_ layout.A8Matrix = (*Bits)(nil)
	_ layout.Grouped  = (*Bits)(nil)
	_ layout.Permuted = (*Bits)(nil)
)

// WriteTo writes m as a .qgv file (format 7).
func (m *Bits) WriteTo(w io.Writer) (int64, error) {
	if err := m.Validate(); err != nil {
		return 0, err
	}
	f := m.Header.BitsHeaderFile(layout.FormatANSBits)
	f.Sections = append(f.Sections, m.Code.sections()...)
	cw := &counter{w: w}
	err := layout.WriteFile(cw, f)
	return cw.n, err
}

// DecodeBitsFile builds a Bits from a checked container of format 7.
func DecodeBitsFile(f *layout.File) (*Bits, error) {
	if f == nil || f.Format != layout.FormatANSBits || f.Version != layout.FileVersion {
		return nil, fmt.Errorf("ans: not a version-%d ANS-coded Bits file", layout.FileVersion)
	}
	if len(f.Sections) < 5 {
		return nil, fmt.Errorf("ans: .qgv: %d sections, want the Bits header's and MODL, OFFS, ESCO, WRDS, ESCV", len(f.Sections))
	}
	h, err := layout.DecodeBitsHeader(f, 5)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(BitsWidths, h.N) {
		return nil, fmt.Errorf("ans: .qgv: %d-bit codes, want %v", h.N, BitsWidths)
	}
	r := unitRows(4 * h.WordsPerRow())
	if r == 0 {
		return nil, fmt.Errorf("ans: .qgv: rows of %d bytes, the coder takes at most %d", 4*h.WordsPerRow(), MaxCols)
	}
	code, err := decodeSections(f.Sections[len(f.Sections)-5:], h.PRows/r, r*4*h.WordsPerRow(), WarpRows)
	if err != nil {
		return nil, err
	}
	m := &Bits{Header: *h, Code: code}
	return m, m.Validate()
}

// RandomBits returns a Bits matrix of n-bit codes drawn around the middle
// of their range as quantized Gaussian weights are (standard deviation a
// sixth of the range, rounded and clipped), binary16 scales in [0.001,
// 0.02) and integer zero points, entropy-coded; determined by seed.
func RandomBits(rows, cols, n, g int, seed uint64) (*Bits, error) {
	b, err := layout.RandomBits(rows, cols, n, g, seed)
	if err != nil {
		return nil, err
	}
	rng := layout.NewRand(seed ^ 0x5bd1e995)
	qmax := float64(int(1)<<n - 1)
	for r := 0; r < b.Rows; r++ { // padding rows and columns keep code 0
		for c := 0; c < b.Cols; c++ {
			q := math.Round(float64(qmax/2) + float64(rng.NormFloat64()*(qmax+1)/6)) // products pinned: no FMA
			b.SetQ(r, c, uint32(max(0, min(qmax, q))))
		}
	}
	return EncodeBits(b)
}

func init() {
	layout.RegisterFormat(layout.Format{
		ID: layout.FormatANSBits, Name: "ANSBits", Syntax: "ans<8|4|2|1>g<32|64|128|256>, ans<n>row",
		Parse: func(name string) (layout.FormatSpec, bool, error) {
			rest, ok := strings.CutPrefix(name, "ans")
			if !ok || len(rest) < 2 {
				return layout.FormatSpec{}, false, nil
			}
			n, err := strconv.Atoi(rest[:1])
			g, okG := layout.ParseGroup(rest[1:])
			if err != nil || !okG {
				return layout.FormatSpec{}, false, nil
			}
			if !slices.Contains(BitsWidths, n) {
				return layout.FormatSpec{}, false, fmt.Errorf("ans: %q: %d-bit codes, want %v", name, n, BitsWidths)
			}
			if _, _, _, err := layout.BitsShape(1, 1, n, g); err != nil {
				return layout.FormatSpec{}, false, err
			}
			return layout.FormatSpec{Format: layout.FormatANSBits, N: n, G: g}, true, nil
		},
		String: func(s layout.FormatSpec) string { return fmt.Sprintf("ans%d%s", s.N, layout.GroupName(s.G)) },
		Decode: func(f *layout.File) (layout.Matrix, error) { return DecodeBitsFile(f) },
		Quantize: func(s layout.FormatSpec, w []float32, rows, cols int, opt layout.QuantOptions) (layout.Matrix, float64, error) {
			b, err := layout.QuantizeBits(w, rows, cols, s.N, s.G, opt)
			if err != nil {
				return nil, 0, err
			}
			m, err := EncodeBits(b)
			return m, 0, err
		},
		Random: func(s layout.FormatSpec, rows, cols int, seed uint64) (layout.Matrix, error) {
			return RandomBits(rows, cols, s.N, s.G, seed)
		},
		Examples:      []string{"ans8g128", "ans4g32", "ans4row", "ans2g64", "ans1g128", "ans8g32"},
		ShortExamples: 3,
	})
}
