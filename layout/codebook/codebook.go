// Package codebook is vector (codebook) quantization of weight matrices,
// multiplied with a Psumbook (CodeGEMM): per input segment, the inner
// product of the segment with every centroid is computed once per call,
// so each code costs one table lookup and one add.
//
// # Configuration
//
// M codebooks (1 or 2) of 2^B centroids (B in 4, 6, 8, 10, 12 bits per
// code), each centroid a vector of V consecutive columns (V in 2, 4, 8);
// one scale per (row, group of G columns), G a power-of-two multiple of V
// up to 256 (G = V: per-vector scales) or the whole row. The name is
// "CB-m<M>v<V>b<B>g<G>" or "CB-m<M>v<V>b<B>row".
//
// # Weights
//
// Row r, vector j (columns j*V .. j*V+V-1) holds M codes c_i(r, j) and
//
//	w[r, j*V+e] = s(r, j*V/G) * sum_i C_i[c_i(r, j)][e]      (exact in float64)
//
// Dequantize rounds that once to float32.
//
// # Geometry
//
// L = 32/gcd(32, B) codes fill whole 32-bit words per lane. Cols is padded
// to PCols, the smallest multiple of V*L, of 128 and (unless whole-row) of
// G; NV = PCols/V vectors per row. Rows are padded to PRows, a multiple of
// 32; padding vectors and rows hold code 0, padding rows scale 0.
//
// # Codes
//
// Rows form tiles of 32; within a tile, row t is lane t. For tile T and
// codebook i, lane t's NV codes form a little-endian bit stream of
// WL = NV*B/32 words: code j at bits j*B .. j*B+B-1 (codes may straddle
// two words when 32 is not a multiple of B). Word w of lane t is
//
//	Words[((T*M + i)*WL + w)*32 + t]
//
// so the 32 rows of a tile (a GPU warp's 32 lanes, or two 16-lane vector
// registers) read 32 consecutive words: coalesced. Words has 32 trailing
// zero words, so a reader may always load the word after a code's first.
//
// # Centroids and scales
//
// Centroids: M x 2^B x V values, codebook-major then code then element,
// binary16 (Centroids16) or, with FP32, float32 (Centroids32). Scales:
// Groups = PCols/G per row, group-major (index g*PRows + r), binary16 or
// float32 with FP32.
//
// # Container
//
// .qgv format 4 (layout.FormatCodebook): parameters M, V, B, G (0: whole
// row), 1 for float32 centroids and scales else 0; sections CODE (the
// words, uint32 little-endian, trailing zeros included), CENT, SCAL.
package codebook

import (
	"errors"
	"fmt"
	"math"

	"github.com/qgemv/qgemv/internal/sysmem"
	"github.com/qgemv/qgemv/layout"
)

// Codebook is a codebook-quantized matrix.
type Codebook struct {
	Rows, Cols   int
	PRows, PCols int
	M, V, B      int
	G            int  // scale group in columns (PCols for whole-row groups)
	WholeRow     bool // G spans the (padded) row
	FP32         bool // float32 centroids and scales instead of binary16

	Words       []uint32
	Centroids16 []layout.FP16
	Centroids32 []float32
	Scales16    []layout.FP16
	Scales32    []float32
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }

// CodesPerLane returns L, the codes that fill whole words in one lane.
func CodesPerLane(b int) int { return 32 / gcd(32, b) }

// Shape returns the padded shape and the group size for a configuration.
func Shape(rows, cols, m, v, b, g int) (prows, pcols, group int, err error) {
	if err := checkConfig(m, v, b, g); err != nil {
		return 0, 0, 0, err
	}
	if err := layout.CheckDims(rows, cols); err != nil {
		return 0, 0, 0, err
	}
	unit := lcm(v*CodesPerLane(b), 128)
	if g != 0 {
		unit = lcm(unit, g)
	}
	pcols = (cols + unit - 1) / unit * unit
	prows = (rows + 31) / 32 * 32
	group = g
	if g == 0 {
		group = pcols
	}
	return prows, pcols, group, nil
}

// New allocates a zero codebook matrix.
func New(rows, cols, m, v, b, g int, fp32 bool) (*Codebook, error) {
	prows, pcols, group, err := Shape(rows, cols, m, v, b, g)
	if err != nil {
		return nil, err
	}
	c := &Codebook{Rows: rows, Cols: cols, PRows: prows, PCols: pcols, M: m, V: v, B: b, G: group, WholeRow: g == 0, FP32: fp32}
	elem := uint64(2) // a centroid or scale
	if fp32 {
		elem = 4
	}
	if err := sysmem.Check(4*uint64(c.numWords()) + elem*uint64(m*(1<<b)*v+c.Groups()*prows)); err != nil {
		return nil, fmt.Errorf("codebook: %s %dx%d: %w", c.Spec(), rows, cols, err)
	}
	c.Words = make([]uint32, c.numWords())
	nc, ns := m*(1<<b)*v, c.Groups()*prows
	if fp32 {
		c.Centroids32, c.Scales32 = make([]float32, nc), make([]float32, ns)
	} else {
		c.Centroids16, c.Scales16 = make([]layout.FP16, nc), make([]layout.FP16, ns)
	}
	return c, nil
}

// NV returns the vectors (codes per codebook) of a row.
func (c *Codebook) NV() int { return c.PCols / max(1, c.V) }

// WL returns the words per lane and codebook.
func (c *Codebook) WL() int { return c.NV() * c.B / 32 }

func (c *Codebook) numWords() int { return c.PRows/32*c.M*c.WL()*32 + 32 }

// Groups returns the scale groups per row.
func (c *Codebook) Groups() int { return c.PCols / max(1, c.G) }

// Spec returns the configuration as a layout.FormatSpec.
func (c *Codebook) Spec() layout.FormatSpec {
	g := c.G
	if c.WholeRow {
		g = 0
	}
	return layout.FormatSpec{Format: layout.FormatCodebook, M: c.M, V: c.V, N: c.B, G: g}
}

// Name returns e.g. "CB-m1v4b8g128".
func (c *Codebook) Name() string { return "CB" + c.Spec().String()[2:] }

// Shape returns the true rows and columns.
func (c *Codebook) Shape() (rows, cols int) { return c.Rows, c.Cols }

// PaddedCols returns PCols.
func (c *Codebook) PaddedCols() int { return c.PCols }

// wordBit returns the index of the first word holding code (r, i, j) and
// the code's bit offset in it.
func (c *Codebook) wordBit(r, i, j int) (int, uint) {
	bit := j * c.B
	return ((r/32*c.M+i)*c.WL()+bit/32)*32 + r%32, uint(bit % 32)
}

// Code returns code i of row r, vector j.
func (c *Codebook) Code(r, i, j int) uint32 {
	w, off := c.wordBit(r, i, j)
	v := c.Words[w] >> off
	if int(off)+c.B > 32 {
		v |= c.Words[w+32] << (32 - off)
	}
	return v & (1<<c.B - 1)
}

// SetCode stores code q (< 2^B) as code i of row r, vector j.
func (c *Codebook) SetCode(r, i, j int, q uint32) {
	w, off := c.wordBit(r, i, j)
	mask := uint64(1)<<c.B - 1
	both := uint64(c.Words[w]) | uint64(c.Words[w+32])<<32
	both = both&^(mask<<off) | (uint64(q)&mask)<<off
	c.Words[w] = uint32(both)
	if int(off)+c.B > 32 {
		c.Words[w+32] = uint32(both >> 32)
	}
}

// Centroid returns element e of centroid q of codebook i.
func (c *Codebook) Centroid(i int, q uint32, e int) float32 {
	k := (i<<c.B+int(q))*c.V + e
	if c.FP32 {
		return c.Centroids32[k]
	}
	return c.Centroids16[k].Float32()
}

// SetCentroid stores element e of centroid q of codebook i (rounded to
// binary16 without FP32).
func (c *Codebook) SetCentroid(i int, q uint32, e int, v float32) {
	k := (i<<c.B+int(q))*c.V + e
	if c.FP32 {
		c.Centroids32[k] = v
	} else {
		c.Centroids16[k] = layout.ToFP16(v)
	}
}

// Scale returns the scale of row r, group g.
func (c *Codebook) Scale(r, g int) float32 {
	if c.FP32 {
		return c.Scales32[g*c.PRows+r]
	}
	return c.Scales16[g*c.PRows+r].Float32()
}

// SetScale stores the scale of row r, group g (rounded to binary16
// without FP32).
func (c *Codebook) SetScale(r, g int, s float32) {
	if c.FP32 {
		c.Scales32[g*c.PRows+r] = s
	} else {
		c.Scales16[g*c.PRows+r] = layout.ToFP16(s)
	}
}

// StreamBytes returns the bytes a GEMV reads: codes, centroids, scales.
func (c *Codebook) StreamBytes() int64 {
	mb := int64(2)
	if c.FP32 {
		mb = 4
	}
	return 4*int64(len(c.Words)) + mb*int64(c.M*(1<<c.B)*c.V) + mb*int64(c.Groups()*c.PRows)
}

// BitsPerWeight returns the storage per true weight, codebooks and scales
// included.
func (c *Codebook) BitsPerWeight() float64 {
	return 8 * float64(c.StreamBytes()) / float64(c.Rows*c.Cols)
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// Validate checks every dimension, length and value.
func (c *Codebook) Validate() error {
	if c == nil {
		return errors.New("codebook: matrix is nil")
	}
	g := c.G
	if c.WholeRow {
		g = 0
	}
	prows, pcols, group, err := Shape(c.Rows, c.Cols, c.M, c.V, c.B, g)
	if err != nil {
		return err
	}
	if prows != c.PRows || pcols != c.PCols || group != c.G {
		return fmt.Errorf("codebook: %s: padded shape %dx%d group %d, want %dx%d group %d", c.Name(), c.PRows, c.PCols, c.G, prows, pcols, group)
	}
	if len(c.Words) != c.numWords() {
		return fmt.Errorf("codebook: %s: %d code words, want %d", c.Name(), len(c.Words), c.numWords())
	}
	for _, w := range c.Words[len(c.Words)-32:] {
		if w != 0 {
			return fmt.Errorf("codebook: %s: the 32 trailing code words must be zero", c.Name())
		}
	}
	nc, ns := c.M*(1<<c.B)*c.V, c.Groups()*c.PRows
	if c.FP32 {
		if len(c.Centroids32) != nc || len(c.Scales32) != ns || c.Centroids16 != nil || c.Scales16 != nil {
			return fmt.Errorf("codebook: %s: float32 metadata: %d centroid values, %d scales, want %d, %d", c.Name(), len(c.Centroids32), len(c.Scales32), nc, ns)
		}
	} else if len(c.Centroids16) != nc || len(c.Scales16) != ns || c.Centroids32 != nil || c.Scales32 != nil {
		return fmt.Errorf("codebook: %s: binary16 metadata: %d centroid values, %d scales, want %d, %d", c.Name(), len(c.Centroids16), len(c.Scales16), nc, ns)
	}
	for k := 0; k < nc; k++ {
		i, q, e := k/(c.V<<c.B), uint32(k/c.V%(1<<c.B)), k%c.V
		if v := c.Centroid(i, q, e); !finite(v) {
			return fmt.Errorf("codebook: %s: codebook %d centroid %d element %d is %v", c.Name(), i, q, e, v)
		}
	}
	// The scales in storage order (element k: row k%PRows, group
	// k/PRows), binary16 ones by their exponent bits (all ones: Inf or
	// NaN), without converting each.
	bad := -1
	if c.FP32 {
		for k, s := range c.Scales32 {
			if !finite(s) {
				bad = k
				break
			}
		}
	} else {
		for k, h := range c.Scales16 {
			if h&0x7c00 == 0x7c00 {
				bad = k
				break
			}
		}
	}
	if bad >= 0 {
		return fmt.Errorf("codebook: %s: row %d group %d scale is %v", c.Name(), bad%c.PRows, bad/c.PRows, c.Scale(bad%c.PRows, bad/c.PRows))
	}
	return nil
}

// weight64 returns the exact weight at (r, col).
func (c *Codebook) weight64(r, col int) float64 {
	j, e := col/c.V, col%c.V
	var sum float64
	for i := 0; i < c.M; i++ {
		sum += float64(c.Centroid(i, c.Code(r, i, j), e))
	}
	return float64(c.Scale(r, col/c.G)) * sum
}

// Dequantize returns the Rows x Cols matrix, each weight rounded once to
// float32.
func (c *Codebook) Dequantize() []float32 {
	out := make([]float32, c.Rows*c.Cols)
	for r := 0; r < c.Rows; r++ {
		for col := 0; col < c.Cols; col++ {
			out[r*c.Cols+col] = float32(c.weight64(r, col))
		}
	}
	return out
}

// DotRef computes out[r] = sum_c w[r,c]*x[c] in float64 for every true row.
func (c *Codebook) DotRef(out []float64, x []float32) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if len(x) != c.Cols || len(out) != c.Rows {
		return fmt.Errorf("codebook: %s: DotRef: x %d, out %d elements, want %d, %d", c.Name(), len(x), len(out), c.Cols, c.Rows)
	}
	for r := 0; r < c.Rows; r++ {
		var acc float64
		for col := 0; col < c.Cols; col++ {
			acc += float64(c.weight64(r, col) * float64(x[col]))
		}
		out[r] = acc
	}
	return nil
}

// DotRefMag computes mag[r] = sum_c |s| * sum_i |C_i[e]| * |x[c]|, the
// magnitude float-path errors are normalized by.
func (c *Codebook) DotRefMag(mag []float64, x []float32) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if len(x) != c.Cols || len(mag) != c.Rows {
		return fmt.Errorf("codebook: %s: DotRefMag: x %d, mag %d elements, want %d, %d", c.Name(), len(x), len(mag), c.Cols, c.Rows)
	}
	for r := 0; r < c.Rows; r++ {
		var acc float64
		for col := 0; col < c.Cols; col++ {
			j, e := col/c.V, col%c.V
			var sum float64
			for i := 0; i < c.M; i++ {
				sum += math.Abs(float64(c.Centroid(i, c.Code(r, i, j), e)))
			}
			acc += float64(math.Abs(float64(c.Scale(r, col/c.G))) * sum * math.Abs(float64(x[col])))
		}
		mag[r] = acc
	}
	return nil
}

// Tolerance bounds every backend's codebook GEMV with float32 tables:
// |y - ref| <= Tolerance * mag (float32 tables and accumulation over up
// to 64K columns).
const Tolerance = 3e-5

// ToleranceF16 bounds the kernels that hold the Psumbook in binary16
// (scaled per call by a power of two alpha so that no entry overflows):
// each entry is rounded to 11 significant bits, or, below binary16's
// normal range, to within 2^-25 * alpha, so
//
//	|y - ref| <= ToleranceF16 * mag + M * NV * 2^-24 * alpha * max|s|
//
// (the second term is negligible unless the activations span more than
// about 2^15 in magnitude). Backends say which kernel they run.
const ToleranceF16 = 1e-3

// ToleranceI16 bounds the kernels that hold the Psumbook as int16 fixed
// point: every entry is rounded to an integer multiple of a power-of-two
// step alpha (at most 2 * cAbs * max|x| / 32767, cAbs the largest
// sum_e |C[e]| of a centroid) and those integers are summed exactly, so
//
//	|y - ref| <= Tolerance * mag + ToleranceI16 * M * NV * alpha * max|s|
//
// (half a step per lookup). Backends say which kernel they run.
const ToleranceI16 = 0.5

// Tolerance returns the float-path bound every backend's codebook GEMV
// meets for the vector x: ToleranceF16 relative (the binary16 Psumbook
// kernels; the float32 ones lie within it) plus the absolute term of
// ToleranceI16 (the int16 fixed-point kernels): half a step per lookup,
// ToleranceI16 * M * NV * alpha * max|s| with alpha at most
// 2 * cAbs * max|x| / 32767.
func (c *Codebook) Tolerance(x []float32) (rel, abs float64) {
	var cAbs, xAbs, sAbs float64
	for i := 0; i < c.M; i++ {
		for q := 0; q < 1<<c.B; q++ {
			var a float64
			for e := 0; e < c.V; e++ {
				a += math.Abs(float64(c.Centroid(i, uint32(q), e)))
			}
			cAbs = max(cAbs, a)
		}
	}
	for _, v := range x {
		xAbs = max(xAbs, math.Abs(float64(v)))
	}
	for r := 0; r < c.Rows; r++ {
		for g := 0; g < c.Groups(); g++ {
			sAbs = max(sAbs, math.Abs(float64(c.Scale(r, g))))
		}
	}
	alpha := 2 * cAbs * xAbs / 32767
	return ToleranceF16, ToleranceI16 * float64(c.M*c.NV()) * alpha * sAbs
}

// Baseline wraps a codebook matrix so that backends run it with the
// dequantize-then-multiply kernel (the AQLM way: each weight decoded from
// its centroids, then multiplied) instead of the Psumbook: the in-run
// baseline of the benchmarks.
type Baseline struct{ *Codebook }

// Name returns the matrix name with "-dequant".
func (b Baseline) Name() string { return b.Codebook.Name() + "-dequant" }
