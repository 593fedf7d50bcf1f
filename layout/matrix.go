package layout

// Matrix is any quantized matrix format: *Q4G128, *Bits and *Sparse12 of
// this package, and *codebook.Codebook, codebook.Baseline and *ans.Matrix
// of its subpackages. Backends accept a Matrix and reject formats they do
// not implement with an error naming them.
type Matrix interface {
	// Name names the format and its parameters, e.g. "Bits4G128".
	Name() string
	// Shape returns the true rows (outputs) and columns (inputs).
	Shape() (rows, cols int)
	// Validate checks every length, index and metadata value.
	Validate() error
	// StreamBytes returns the bytes a GEMV reads from the matrix.
	StreamBytes() int64
	// PaddedCols returns the columns padded as the format stores them
	// (the int8 activations per vector of an A8 multiply).
	PaddedCols() int
}

// Name returns "Q4G128".
func (m *Q4G128) Name() string { return "Q4G128" }

// Shape returns the true rows and columns.
func (m *Q4G128) Shape() (rows, cols int) { return m.Rows, m.Cols }

// Shape returns the true rows and columns.
func (b *Bits) Shape() (rows, cols int) { return b.Rows, b.Cols }

// Shape returns the true rows and columns.
func (m *Sparse12) Shape() (rows, cols int) { return m.Rows, m.Cols }

var (
	_ Matrix = (*Q4G128)(nil)
	_ Matrix = (*Bits)(nil)
	_ Matrix = (*Sparse12)(nil)
)

// PaddedCols returns PCols, the int8 activations per vector MulInt8
// expects.
func (m *Q4G128) PaddedCols() int { return m.PCols }

// PaddedCols returns PCols.
func (b *Bits) PaddedCols() int { return b.PCols }

// PaddedCols returns PCols.
func (m *Sparse12) PaddedCols() int { return m.PCols }
