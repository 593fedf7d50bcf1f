package layout

import (
	"errors"
	"fmt"
	"math"
)

// Sparse12 is 1:2 structured sparsity: of each pair of columns (2p, 2p+1)
// of a row only one weight is nonzero, stored in one byte
//
//	byte = pos<<7 | q    (pos 0: column 2p kept, 1: column 2p+1; q < 128)
//
// with weight (q - z) * s for the kept column (s, z of its row and group of
// G columns, in the HQQ/GPTQ convention) and exactly 0 for the other.
//
// The bytes are the 8-bit elements of the Bits universal packing over
// pairs: pair p of a row is in chunk k = p/128 at o = p%128, i = o/32,
// t = o%32, byte (Words[r*WordsPerRow + k*32 + t] >> (24 - 8*i)) & 255.
// PCols is a multiple of 256 (and of G), PRows of 16; padding bytes are 0.
// Scales and zeros are a GroupMeta (group major, binary16 or float32).
type Sparse12 struct {
	Rows, Cols   int
	PRows, PCols int
	G            int  // group size in columns (PCols for whole-row groups)
	WholeRow     bool // G spans the (padded) row

	Words []uint32
	GroupMeta
}

// Sparse12Shape checks the shape and group (0: whole row) and returns the
// padded shape and group size.
func Sparse12Shape(rows, cols, g int) (prows, pcols, group int, err error) {
	if g != 0 && g != 32 && g != 64 && g != 128 && g != 256 {
		return 0, 0, 0, fmt.Errorf("layout: Sparse12: group size %d unsupported (want 32, 64, 128, 256, or 0 for the whole row)", g)
	}
	if err := CheckDims(rows, cols); err != nil {
		return 0, 0, 0, err
	}
	pcols = (cols + 255) / 256 * 256
	prows = (rows + 15) / 16 * 16
	group = g
	if g == 0 {
		group = pcols
	}
	return prows, pcols, group, nil
}

// NewSparse12 allocates a zero Sparse12 matrix.
func NewSparse12(rows, cols, g int, fp32Meta bool) (*Sparse12, error) {
	prows, pcols, group, err := Sparse12Shape(rows, cols, g)
	if err != nil {
		return nil, err
	}
	m := &Sparse12{Rows: rows, Cols: cols, PRows: prows, PCols: pcols, G: group, WholeRow: g == 0, GroupMeta: GroupMeta{FP32Meta: fp32Meta}}
	if err := checkBytes(m.Name(), rows, cols, 4*uint64(prows)*uint64(m.WordsPerRow())+uint64(m.metaBytes(m.Groups()*prows))); err != nil {
		return nil, err
	}
	m.Words = make([]uint32, prows*m.WordsPerRow())
	m.GroupMeta = newGroupMeta(m.Groups()*prows, fp32Meta)
	return m, nil
}

// WordsPerRow returns the 32-bit words of one row (four pairs each).
func (m *Sparse12) WordsPerRow() int { return m.PCols / 8 }

// Groups returns the groups per row.
func (m *Sparse12) Groups() int { return m.PCols / max(1, m.G) }

// Name returns "Sparse12G<g>" or "Sparse12Row".
func (m *Sparse12) Name() string {
	if m.WholeRow {
		return "Sparse12Row"
	}
	return fmt.Sprintf("Sparse12G%d", m.G)
}

func (m *Sparse12) pairIndex(r, p int) (int, uint) {
	k, o := p/128, p%128
	return r*m.WordsPerRow() + k*32 + o%32, uint(24 - 8*(o/32))
}

// Pair returns the kept position (0 or 1) and 7-bit code of pair p of row r.
func (m *Sparse12) Pair(r, p int) (pos int, q uint32) {
	w, sh := m.pairIndex(r, p)
	b := m.Words[w] >> sh & 255
	return int(b >> 7), b & 127
}

// SetPair stores pair p of row r.
func (m *Sparse12) SetPair(r, p, pos int, q uint32) {
	w, sh := m.pairIndex(r, p)
	b := uint32(pos&1)<<7 | q&127
	m.Words[w] = m.Words[w]&^(255<<sh) | b<<sh
}

// Scale returns the scale of row r, group g.
func (m *Sparse12) Scale(r, g int) float32 { return m.scale(g*m.PRows + r) }

// Zero returns the zero point of row r, group g.
func (m *Sparse12) Zero(r, g int) float32 { return m.zero(g*m.PRows + r) }

// Affine returns s and m = float32(s*z) with w = q*s - m for row r,
// group g, the form float kernels use.
func (m *Sparse12) Affine(r, g int) (s, sz float32) {
	s = m.Scale(r, g)
	return s, s * m.Zero(r, g)
}

// StreamBytes returns the bytes a GEMV reads from the matrix.
func (m *Sparse12) StreamBytes() int64 {
	return 4*int64(len(m.Words)) + m.metaBytes(m.Groups()*m.PRows)
}

// Validate checks every dimension, length and metadata value.
func (m *Sparse12) Validate() error {
	if m == nil {
		return errors.New("layout: Sparse12 is nil")
	}
	g := m.G
	if m.WholeRow {
		g = 0
	}
	prows, pcols, group, err := Sparse12Shape(m.Rows, m.Cols, g)
	if err != nil {
		return err
	}
	if prows != m.PRows || pcols != m.PCols || group != m.G {
		return fmt.Errorf("layout: %s: padded shape %dx%d group %d, want %dx%d group %d", m.Name(), m.PRows, m.PCols, m.G, prows, pcols, group)
	}
	if want := m.PRows * m.WordsPerRow(); len(m.Words) != want {
		return fmt.Errorf("layout: %s: %d words, want %d", m.Name(), len(m.Words), want)
	}
	return m.validate(m.Name(), m.Groups(), m.PRows)
}

// IntegerZeros returns an error naming the first fractional zero point.
func (m *Sparse12) IntegerZeros() error {
	return m.integerZeros(m.Name(), m.Groups(), m.PRows, m.Rows)
}

// weight64 returns the exact weight of pair p's kept column and that column.
func (m *Sparse12) kept(r, p int) (col int, q uint32) {
	pos, q := m.Pair(r, p)
	return 2*p + pos, q
}

// Dequantize returns the Rows x Cols float32 matrix, the kept weights
// rounded once to float32 and the others exactly 0.
func (m *Sparse12) Dequantize() []float32 {
	out := make([]float32, m.Rows*m.Cols)
	for r := 0; r < m.Rows; r++ {
		for p := 0; p < m.PCols/2; p++ {
			c, q := m.kept(r, p)
			if c < m.Cols {
				g := c / m.G
				out[r*m.Cols+c] = float32((float64(q) - float64(m.Zero(r, g))) * float64(m.Scale(r, g)))
			}
		}
	}
	return out
}

// DotRef computes out[r] = sum_c w[r,c]*x[c] in float64 (exact weights).
func (m *Sparse12) DotRef(out []float64, x []float32) error {
	if err := m.Validate(); err != nil {
		return err
	}
	return m.dot64(out, x, false)
}

// DotRefMag computes mag[r] = sum over kept c of |s|(|q|+|z|)|x[c]|.
func (m *Sparse12) DotRefMag(mag []float64, x []float32) error {
	if err := m.Validate(); err != nil {
		return err
	}
	return m.dot64(mag, x, true)
}

func (m *Sparse12) dot64(out []float64, x []float32, mag bool) error {
	if len(x) != m.Cols || len(out) != m.Rows {
		return fmt.Errorf("layout: %s: x %d, out %d elements, want %d, %d", m.Name(), len(x), len(out), m.Cols, m.Rows)
	}
	for r := 0; r < m.Rows; r++ {
		var acc float64
		for p := 0; p < m.PCols/2; p++ {
			c, q := m.kept(r, p)
			if c >= m.Cols {
				continue
			}
			g := c / m.G
			s, z := float64(m.Scale(r, g)), float64(m.Zero(r, g))
			if mag {
				acc += float64(math.Abs(s) * (float64(q) + math.Abs(z)) * math.Abs(float64(x[c])))
			} else {
				acc += float64((float64(q) - z) * s * float64(x[c]))
			}
		}
		out[r] = acc
	}
	return nil
}

// DotA8Exact computes the exact int8-activation result: over blocks of
// min(G, 128) columns in order,
//
//	isum = sum over kept c of (q*xq[c]) - z * sum over kept c of xq[c]
//	acc  = acc + float32(s*xs[a]) * float32(isum)
//
// with a = block/128, every float operation rounded to float32.
func (m *Sparse12) DotA8Exact(out []float32, xq []int8, xs []float32) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if len(xq) != m.PCols || len(xs) != m.PCols/GroupSize || len(out) != m.Rows {
		return fmt.Errorf("layout: %s: DotA8Exact: xq %d, xs %d, out %d, want %d, %d, %d", m.Name(), len(xq), len(xs), len(out), m.PCols, m.PCols/GroupSize, m.Rows)
	}
	if err := m.IntegerZeros(); err != nil {
		return err
	}
	blk := min(m.G, GroupSize)
	for r := 0; r < m.Rows; r++ {
		var acc float32
		for c0 := 0; c0 < m.PCols; c0 += blk {
			g := c0 / m.G
			var dot, sx int32
			for p := c0 / 2; p < (c0+blk)/2; p++ {
				c, q := m.kept(r, p)
				dot += int32(q) * int32(xq[c])
				sx += int32(xq[c])
			}
			isum := dot - int32(m.Zero(r, g))*sx
			f := float32(m.Scale(r, g) * xs[c0/GroupSize])
			acc = float32(acc + float32(f*float32(isum)))
		}
		out[r] = acc
	}
	return nil
}

// QuantizeSparse12 keeps the larger-magnitude weight of each column pair
// (the first on a tie), quantizes the kept weights to 7 bits per group of g
// columns (0: whole row), and returns the matrix and the fraction of the
// matrix's energy (sum of squares) the dropped weights carried.
func QuantizeSparse12(w []float32, rows, cols, g int, opt QuantOptions) (*Sparse12, float64, error) {
	if err := checkQuantInput(w, rows, cols, opt.Method); err != nil {
		return nil, 0, err
	}
	m, err := NewSparse12(rows, cols, g, opt.FP32Meta)
	if err != nil {
		return nil, 0, err
	}
	// The kept weight of pair p of row r: position 0 for column 2p, 1 for
	// 2p+1 (the first on a tie), columns past cols being 0.
	pair := func(r, p int) (a, b float32, k int) {
		if c := 2 * p; c < cols {
			a = w[r*cols+c]
		}
		if c := 2*p + 1; c < cols {
			b = w[r*cols+c]
		}
		if math.Abs(float64(b)) > math.Abs(float64(a)) {
			k = 1
		}
		return a, b, k
	}
	// The pairs that hold a true column; the padding pairs stay 0.
	truePairs := (cols + 1) / 2
	// The energies first, serially, in row and pair order (the same sums,
	// bit for bit, whatever the number of goroutines below).
	var dropped, total float64
	for r := 0; r < rows; r++ {
		for p := 0; p < truePairs; p++ {
			a, b, k := pair(r, p)
			total += float64(float64(a)*float64(a)) + float64(float64(b)*float64(b))
			drop := [2]float32{b, a}[k]
			dropped += float64(float64(drop) * float64(drop))
		}
	}
	// Then the fits, rows in parallel: a row's pairs are words of its own
	// and its metadata elements of their own.
	err = quantRows(rows, func() func(r0, r1 int) error {
		f := &fitter{qmax: 127, opt: opt}
		vals := make([]float32, m.G/2)
		pos := make([]int, m.G/2)
		q := make([]uint32, m.G/2)
		return func(r0, r1 int) error {
			for r := r0; r < r1; r++ {
				for gi := 0; gi*m.G/2 < truePairs; gi++ {
					// The group's true pairs; padding stays out of the fit.
					p0 := gi * m.G / 2
					n := min(m.G/2, truePairs-p0)
					for i := range n {
						a, b, k := pair(r, p0+i)
						vals[i], pos[i] = [2]float32{a, b}[k], k
					}
					s, z, err := f.fit(vals[:n], q[:n])
					if err != nil {
						return fmt.Errorf("layout: quantize %s: row %d group %d: %w", m.Name(), r, gi, err)
					}
					m.set(gi*m.PRows+r, s, z)
					for i := range n {
						m.SetPair(r, p0+i, pos[i], q[i])
					}
				}
			}
			return nil
		}
	})
	if err != nil {
		return nil, 0, err
	}
	frac := 0.0
	if total > 0 {
		frac = dropped / total
	}
	return m, frac, nil
}
