package layout

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// Int8 is a plain int8 matrix, multiplied exactly by int8 vectors into
// int32 results (the layers of a MatVANS chain): W holds Rows*Cols values,
// row-major. It has no scales; its entropy-coded form is layout/ans's
// Matrix.
//
// Container: .qgv format 6 (FormatInt8), no parameters, one section WGHT
// of Rows*Cols bytes.
type Int8 struct {
	Rows, Cols int
	W          []int8
}

// MaxInt8Cols is the most columns an int8 matrix may have: every dot
// product of a row with int8 inputs is then exact in int32, |sum| <=
// MaxInt8Cols * 128*128 < 2^31 (whatever a kernel's partial sums do in
// between, since they wrap modulo 2^32). It is a multiple of 128.
const MaxInt8Cols = 1<<17 - 128

// CheckInt8Shape checks the limits of CheckDims and MaxInt8Cols.
func CheckInt8Shape(rows, cols int) error {
	if err := CheckDims(rows, cols); err != nil {
		return err
	}
	if cols > MaxInt8Cols {
		return fmt.Errorf("layout: int8 matrix %dx%d: more than %d columns (an int32 dot product of int8 rows could overflow)", rows, cols, MaxInt8Cols)
	}
	return nil
}

// NewInt8 returns a rows x cols int8 matrix holding w (not copied).
func NewInt8(w []int8, rows, cols int) (*Int8, error) {
	m := &Int8{Rows: rows, Cols: cols, W: w}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Name returns "Int8".
func (m *Int8) Name() string { return "Int8" }

// Spec returns int8's spec.
func (m *Int8) Spec() FormatSpec { return FormatSpec{Format: FormatInt8, N: 8} }

// Shape returns the rows and columns.
func (m *Int8) Shape() (rows, cols int) { return m.Rows, m.Cols }

// PaddedCols returns Cols (no padding).
func (m *Int8) PaddedCols() int { return m.Cols }

// StreamBytes returns Rows*Cols.
func (m *Int8) StreamBytes() int64 { return int64(m.Rows) * int64(m.Cols) }

// Validate checks the shape and the length of W.
func (m *Int8) Validate() error {
	if m == nil {
		return errors.New("layout: Int8 is nil")
	}
	if err := CheckInt8Shape(m.Rows, m.Cols); err != nil {
		return err
	}
	if int64(len(m.W)) != int64(m.Rows)*int64(m.Cols) {
		return fmt.Errorf("layout: Int8 %dx%d: %d values, want %d", m.Rows, m.Cols, len(m.W), int64(m.Rows)*int64(m.Cols))
	}
	return nil
}

// Int32Matrix is a Matrix of int8 values multiplied exactly by int8
// vectors: every backend's int32 result equals DotInt32's.
type Int32Matrix interface {
	Matrix
	// DotInt32 computes y[r] = sum_c W[r,c]*v[c] exactly (v: Cols
	// values, y: Rows).
	DotInt32(y []int32, v []int8) error
}

// DotInt32 computes y = W v exactly.
func (m *Int8) DotInt32(y []int32, v []int8) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if len(v) != m.Cols || len(y) != m.Rows {
		return fmt.Errorf("layout: Int8 %dx%d: v has %d values, y %d", m.Rows, m.Cols, len(v), len(y))
	}
	for r := range y {
		var s int32
		for c, w := range m.W[r*m.Cols : (r+1)*m.Cols] {
			s += int32(w) * int32(v[c])
		}
		y[r] = s
	}
	return nil
}

// DotRef computes W x in float64.
func (m *Int8) DotRef(out []float64, x []float32) error {
	return m.dot(out, x, false)
}

// DotRefMag computes sum_c |W[r,c] x[c]|.
func (m *Int8) DotRefMag(mag []float64, x []float32) error {
	return m.dot(mag, x, true)
}

func (m *Int8) dot(out []float64, x []float32, abs bool) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if len(x) != m.Cols || len(out) != m.Rows {
		return fmt.Errorf("layout: Int8 %dx%d: x has %d values, out %d", m.Rows, m.Cols, len(x), len(out))
	}
	for r := range out {
		var s float64
		for c, w := range m.W[r*m.Cols : (r+1)*m.Cols] {
			p := float64(w) * float64(x[c])
			if abs {
				p = math.Abs(p)
			}
			s += p
		}
		out[r] = s
	}
	return nil
}

// Tolerance returns BitsTolerance.
func (m *Int8) Tolerance([]float32) (rel, abs float64) { return BitsTolerance, 0 }

var int8Tag = [4]byte{'W', 'G', 'H', 'T'}

// WriteTo writes m as a .qgv file (format 6).
func (m *Int8) WriteTo(w io.Writer) (int64, error) {
	if err := m.Validate(); err != nil {
		return 0, err
	}
	b := make([]byte, len(m.W))
	for i, v := range m.W {
		b[i] = byte(v)
	}
	return writeFile(w, &File{Version: FileVersion, Format: FormatInt8, Rows: uint64(m.Rows), Cols: uint64(m.Cols),
		Sections: []Section{{int8Tag, b}}})
}

// DecodeInt8 builds an Int8 matrix from a container of format 6.
func DecodeInt8(f *File) (*Int8, error) {
	if f == nil {
		return nil, errf("File is nil")
	}
	if f.Format != FormatInt8 {
		return nil, errf("format is %v, want Int8", f.Format)
	}
	if len(f.Params) != 0 || len(f.Sections) != 1 || f.Sections[0].Tag != int8Tag {
		return nil, errf("Int8: want no parameters and one WGHT section, have %d parameters and %d sections", len(f.Params), len(f.Sections))
	}
	if f.Rows > MaxDim || f.Cols > MaxDim {
		return nil, errf("Int8: shape %dx%d above the limit %d", f.Rows, f.Cols, MaxDim)
	}
	rows, cols := int(f.Rows), int(f.Cols)
	if err := CheckInt8Shape(rows, cols); err != nil {
		return nil, errf("%v", err)
	}
	d := f.Sections[0].Data
	if int64(len(d)) != int64(rows)*int64(cols) {
		return nil, errf("Int8 %dx%d: WGHT has %d bytes, want %d", rows, cols, len(d), int64(rows)*int64(cols))
	}
	w := make([]int8, len(d))
	for i, v := range d {
		w[i] = int8(v)
	}
	return &Int8{Rows: rows, Cols: cols, W: w}, nil
}

// RandomInt8 returns a rows x cols matrix of uniformly random int8 values.
func RandomInt8(rows, cols int, seed uint64) (*Int8, error) {
	if err := CheckInt8Shape(rows, cols); err != nil {
		return nil, err
	}
	if err := checkBytes("Int8", rows, cols, 2*uint64(rows)*uint64(cols)); err != nil { // the random bytes and the values
		return nil, err
	}
	b := make([]byte, rows*cols)
	FillRandom(NewRand(seed), b)
	w := make([]int8, len(b))
	for i, v := range b {
		w[i] = int8(v)
	}
	return &Int8{Rows: rows, Cols: cols, W: w}, nil
}

func init() {
	RegisterFormat(Format{
		ID: FormatInt8, Name: "Int8", Syntax: "int8",
		Parse: func(name string) (FormatSpec, bool, error) {
			if strings.TrimSpace(name) != "int8" {
				return FormatSpec{}, false, nil
			}
			return FormatSpec{Format: FormatInt8, N: 8}, true, nil
		},
		String:        func(FormatSpec) string { return "int8" },
		Decode:        func(f *File) (Matrix, error) { return DecodeInt8(f) },
		Random:        func(_ FormatSpec, rows, cols int, seed uint64) (Matrix, error) { return RandomInt8(rows, cols, seed) },
		Int8Values:    true,
		Examples:      []string{"int8"},
		ShortExamples: 1,
	})
}

// Requantize sets v[i] = round_half_even(alpha * y[i]) clamped to
// [-128, 127], the product alpha*float32(y[i]) computed in float32: the
// requantization between the layers of a MatVANS chain, identical on
// every backend. v shorter than y, or alpha not finite, is an error.
func Requantize(v []int8, y []int32, alpha float32) error {
	if len(v) < len(y) {
		return fmt.Errorf("layout: Requantize of %d values into %d", len(y), len(v))
	}
	if isBad(alpha) {
		return fmt.Errorf("layout: Requantize by %v (want finite)", alpha)
	}
	v = v[:len(y)]
	for i, x := range y {
		v[i] = int8(max(-128, min(127, math.RoundToEven(float64(alpha*float32(x))))))
	}
	return nil
}
