package layout

// Matrix is any registered matrix format: *Q4G128, *Bits, *Sparse12 and
// *Int8 of this package, *codebook.Codebook (and codebook.Baseline), and
// layout/ans's entropy-coded matrices. Backends look up their kernels by
// Spec().Format and reject formats they do not implement with an error
// naming them. The reference methods are what every backend is tested
// against (internal/conformance).
type Matrix interface {
	// Name names the format and its parameters, e.g. "Bits4G128".
	Name() string
	// Spec returns the format and its parameters.
	Spec() FormatSpec
	// Shape returns the true rows (outputs) and columns (inputs).
	Shape() (rows, cols int)
	// Validate checks every length, index and metadata value.
	Validate() error
	// StreamBytes returns the bytes a GEMV reads from the matrix.
	StreamBytes() int64
	// PaddedCols returns the columns padded as the format stores them
	// (the int8 activations per vector of an A8 multiply).
	PaddedCols() int
	// DotRef computes out[r] = sum_c W[r,c]*x[c] in float64 from the
	// exact weights (x: Cols values in source column order, out: Rows).
	DotRef(out []float64, x []float32) error
	// DotRefMag computes mag[r] = sum_c |W[r,c]*x[c]|, the scale the float
	// paths' bound is relative to.
	DotRefMag(mag []float64, x []float32) error
	// Tolerance returns the float paths' (A32, A16) bound for the vector
	// x: every backend's y[r] is within rel*mag[r] + abs of DotRef's.
	Tolerance(x []float32) (rel, abs float64)
}

// A8Matrix is a Matrix that multiplies int8 activations (A8) exactly:
// every backend's result equals DotA8Exact's bit for bit.
type A8Matrix interface {
	Matrix
	// DotA8Exact computes one vector's A8 product from activations
	// quantized with QuantizeA8 in stored column order (xq: PaddedCols
	// values, xs: PaddedCols/128 scales).
	DotA8Exact(out []float32, xq []int8, xs []float32) error
	// IntegerZeros returns nil when the matrix can multiply int8
	// activations, else an error saying why not (fractional zero
	// points, offsets).
	IntegerZeros() error
}

// Permuted is a Matrix whose stored columns are a permutation of the
// source columns (GPTQ act-order): multiplies gather x[ColumnPerm()[j]]
// into stored column j first. ColumnPerm returns nil for the identity.
type Permuted interface {
	ColumnPerm() []int32
}

// Grouped is a Matrix with one (scale, zero point or offset) per (row,
// group of GroupCols columns) and codes q: w = q*s - m. GPU backends
// flatten it into plain arrays (internal/gpuhost.FlattenMeta).
type Grouped interface {
	Matrix
	Groups() int
	GroupCols() int
	PaddedRows() int
	// Affine returns s and m with w = q*s - m for row r, group g.
	Affine(r, g int) (s, m float32)
	// ZeroPoint returns the zero point z of row r, group g (w = (q-z)*s).
	ZeroPoint(r, g int) float32
	// IntegerZeros is A8Matrix's.
	IntegerZeros() error
}

// Name returns "Q4G128".
func (m *Q4G128) Name() string { return "Q4G128" }

// Spec returns q4g128's spec.
func (m *Q4G128) Spec() FormatSpec { return FormatSpec{Format: FormatQ4G128, N: 4, G: 128} }

// Shape returns the true rows and columns.
func (m *Q4G128) Shape() (rows, cols int) { return m.Rows, m.Cols }

// Tolerance returns A32Tolerance.
func (m *Q4G128) Tolerance([]float32) (rel, abs float64) { return A32Tolerance, 0 }

// IntegerZeros returns nil: Q4G128's zero points are integers.
func (m *Q4G128) IntegerZeros() error { return nil }

// GroupCols returns GroupSize.
func (m *Q4G128) GroupCols() int { return GroupSize }

// PaddedRows returns PRows.
func (m *Q4G128) PaddedRows() int { return m.PRows }

// Affine returns s and m = s*z (rounded once to float32) for row r,
// group g.
func (m *Q4G128) Affine(r, g int) (s, sz float32) {
	s = m.Scale(r, g)
	return s, s * float32(m.Zero(r, g))
}

// ZeroPoint returns the zero point of row r, group g.
func (m *Q4G128) ZeroPoint(r, g int) float32 { return float32(m.Zero(r, g)) }

// Spec returns the matrix's spec.
func (b *Bits) Spec() FormatSpec {
	g := b.G
	if b.WholeRow {
		g = 0
	}
	return FormatSpec{Format: FormatBits, N: b.N, G: g}
}

// Shape returns the true rows and columns.
func (b *Bits) Shape() (rows, cols int) { return b.Rows, b.Cols }

// Tolerance returns BitsTolerance.
func (b *Bits) Tolerance([]float32) (rel, abs float64) { return BitsTolerance, 0 }

// ColumnPerm returns Perm.
func (b *Bits) ColumnPerm() []int32 { return b.Perm }

// GroupCols returns G.
func (b *Bits) GroupCols() int { return b.G }

// PaddedRows returns PRows.
func (b *Bits) PaddedRows() int { return b.PRows }

// ZeroPoint returns Zero(r, g).
func (b *Bits) ZeroPoint(r, g int) float32 { return b.Zero(r, g) }

// Spec returns the matrix's spec.
func (m *Sparse12) Spec() FormatSpec {
	g := m.G
	if m.WholeRow {
		g = 0
	}
	return FormatSpec{Format: FormatSparse12, N: 8, G: g}
}

// Shape returns the true rows and columns.
func (m *Sparse12) Shape() (rows, cols int) { return m.Rows, m.Cols }

// Tolerance returns BitsTolerance.
func (m *Sparse12) Tolerance([]float32) (rel, abs float64) { return BitsTolerance, 0 }

// GroupCols returns G.
func (m *Sparse12) GroupCols() int { return m.G }

// PaddedRows returns PRows.
func (m *Sparse12) PaddedRows() int { return m.PRows }

// ZeroPoint returns Zero(r, g).
func (m *Sparse12) ZeroPoint(r, g int) float32 { return m.Zero(r, g) }

var (
	_ A8Matrix = (*Q4G128)(nil)
	_ A8Matrix = (*Bits)(nil)
	_ A8Matrix = (*Sparse12)(nil)
	_ Grouped  = (*Q4G128)(nil)
	_ Grouped  = (*Bits)(nil)
	_ Grouped  = (*Sparse12)(nil)
	_ Permuted = (*Bits)(nil)
)

// PaddedCols returns PCols, the int8 activations per vector MulInt8
// expects.
func (m *Q4G128) PaddedCols() int { return m.PCols }

// PaddedCols returns PCols.
func (b *Bits) PaddedCols() int { return b.PCols }

// PaddedCols returns PCols.
func (m *Sparse12) PaddedCols() int { return m.PCols }
