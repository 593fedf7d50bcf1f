// Package ans stores int8 matrices entropy-coded with asymmetric numeral
// systems (rANS), as MatVANS does on the GPU, so that a multiply decodes
// them on the fly instead of streaming one byte per element.
//
// # Model
//
// One i.i.d. probability mass function per matrix (Model): at most 128
// symbols with frequencies f >= 1 summing to 128 (7-bit probabilities),
// symbol k owning the slot digits cum[k] .. cum[k]+f[k]-1; PPF, the
// 128-entry percent-point table, maps a digit to its symbol. FitModel
// chooses the symbols and frequencies that minimize the coded size. Values
// outside the model (more than 128 distinct values, or rare outliers where
// that is cheaper) are coded as the escape symbol and stored raw, one byte
// each, in an escape list; the cost is the escape symbol's code plus 8 bits
// per escaped element (Compression reports it).
//
// # Coder
//
// Four consecutive elements (a quad) are one symbol of the product
// distribution, F = f0*f1*f2*f3 <= 2^28. A coder's state x is 64-bit, in
// [2^31, 2^63) between quads. Decoding one quad:
//
//	s      = x mod 2^28;   digit d_i = (s >> 7i) & 127;   symbol c_i = PPF[d_i]
//	rank   = (d0-cum0) + f0*((d1-cum1) + f1*((d2-cum2) + f2*(d3-cum3)))
//	x      = F*(x >> 28) + rank
//	if x < 2^31: x = x<<32 | next word of the stream
//
// element 4q+i is the value of c_i (or, for the escape symbol, the next
// byte of the escape list). Encoding runs the quads of a coder in reverse:
// if x >= F*2^35 it emits the low 32 bits of x and shifts right by 32, then
// with rank = x mod F it writes x = (x div F)*2^28 + s, s the digits of the
// mixed-radix rank. Encoders start at x = 2^31; a decoder that has read its
// last quad must be back at exactly 2^31 (an integrity check).
//
// # Layouts
//
// Warp rows (WarpRows; Cols a multiple of 128): each row is a unit of 32
// coders; coder t owns quad t of every 128-element chunk (elements
// 128k+4t .. 128k+4t+3, in chunk order). Warp stripes (WarpStripes; Rows a
// multiple of 32, Cols of 4): each stripe of 32 rows is a unit; coder t owns
// row 32s+t, its quads in column order. A unit's stream is
//
//	64 words: the initial state of coder t as words 2t (low) and 2t+1 (high)
//	then, for step j = 0, 1, ... and coder t = 0..31 in order, the word that
//	coder t reads after decoding its quad j, if it needs one
//	zero words up to a multiple of 128 words
//
// so the 32 lanes of a warp (or of two 16-lane vector registers) decode
// step by step, and the lanes that need a refill take consecutive words in
// lane order (a ballot and popcount on the GPU, an expand-load on the
// CPU). Offsets[u] is the first word of unit u (Offsets[units] = len(Words)),
// EscOffsets[u] the first escape byte of unit u, escapes in decoding order
// (step, then lane).
//
// # Container
//
// .qgv format 5 (layout.FormatANS): parameters layout (0 warp rows, 1 warp
// stripes); sections MODL (NSym-1, Escape+1, then per symbol its value and
// frequency: 2+2*NSym bytes, NSym <= 128), OFFS and ESCO (uint64 little-endian,
// units+1 each), WRDS (uint32 little-endian), ESCV (the escape bytes).
// Every offset is checked at load, so no decoder reads outside a unit.
package ans

import (
	"errors"
	"fmt"
	"math"

	"github.com/qgemv/qgemv/internal/par"
	"github.com/qgemv/qgemv/layout"
)

// Layout selects how rows are split among coders.
type Layout int

// The two layouts.
const (
	WarpRows    Layout = 0
	WarpStripes Layout = 1
)

// String names the layout.
func (l Layout) String() string {
	switch l {
	case WarpRows:
		return "warp-rows"
	case WarpStripes:
		return "warp-stripes"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// Lanes is the number of coders per unit.
const Lanes = 32

// Matrix is an entropy-coded int8 matrix.
type Matrix struct {
	Rows, Cols int
	Layout     Layout
	Model      Model
	Words      []uint32
	Offsets    []uint64 // units+1 word offsets
	Esc        []int8
	EscOffsets []uint64 // units+1 byte offsets
}

// ErrCorrupt is wrapped by every decoding error.
var ErrCorrupt = errors.New("ans: corrupt stream")

// Units returns the number of units (rows or stripes).
func (m *Matrix) Units() int {
	if m.Layout == WarpStripes {
		return m.Rows / Lanes
	}
	return m.Rows
}

// steps returns the quads per coder.
func (m *Matrix) steps() int {
	if m.Layout == WarpStripes {
		return m.Cols / 4
	}
	return m.Cols / 128
}

// MaxCols is the most columns a matrix may have: every dot product of a
// row with int8 inputs is then exact in int32, |sum| <= MaxCols * 128*128
// < 2^31 (whatever a kernel's partial sums do in between, since they wrap
// modulo 2^32). It is a multiple of 128, so both layouts can reach it.
const MaxCols = layout.MaxInt8Cols

// CheckShape reports whether a layout can hold a rows x cols matrix: the
// limits of layout.CheckDims (each side at most 2^24, at most 2^40
// elements), at most MaxCols columns, and the layout's multiples.
func CheckShape(l Layout, rows, cols int) error {
	if err := layout.CheckDims(rows, cols); err != nil {
		return fmt.Errorf("ans: %w", err)
	}
	if cols > MaxCols {
		return fmt.Errorf("ans: shape %dx%d: more than %d columns (an int32 dot product of int8 rows could overflow)", rows, cols, MaxCols)
	}
	switch l {
	case WarpRows:
		if cols%128 != 0 {
			return fmt.Errorf("ans: warp rows need columns in multiples of 128, got %d", cols)
		}
	case WarpStripes:
		if rows%Lanes != 0 || cols%4 != 0 {
			return fmt.Errorf("ans: warp stripes need rows in multiples of 32 and columns of 4, got %dx%d", rows, cols)
		}
	default:
		return fmt.Errorf("ans: unknown layout %d", l)
	}
	return nil
}

// element returns the row and column of element e of coder lane's quad
// step in unit u (e < 4).
func (m *Matrix) element(u, lane, step, e int) (int, int) {
	if m.Layout == WarpStripes {
		return u*Lanes + lane, 4*step + e
	}
	return u, 128*step + 4*lane + e
}

// Encode entropy-codes the rows x cols row-major int8 matrix w with a
// fitted model. Units are coded in parallel (par.Each); the bytes are
// the same whatever the number of goroutines.
func Encode(w []int8, rows, cols int, l Layout) (*Matrix, error) {
	if err := CheckShape(l, rows, cols); err != nil {
		return nil, err
	}
	if len(w) != rows*cols {
		return nil, fmt.Errorf("ans: %d values, want %d x %d", len(w), rows, cols)
	}
	model, _, err := FitModel(w)
	if err != nil {
		return nil, err
	}
	m := &Matrix{Rows: rows, Cols: cols, Layout: l, Model: *model}
	units := m.Units()
	coded := make([]unitCode, units)
	_ = par.Each(units, func() func(int) error {
		var e unitEncoder
		return func(u int) error {
			coded[u] = e.encode(m, w, u)
			return nil
		}
	})
	var nw, ne int
	for _, c := range coded {
		nw, ne = nw+len(c.words), ne+len(c.esc)
	}
	m.Words, m.Esc = make([]uint32, 0, nw), make([]int8, 0, ne)
	m.Offsets, m.EscOffsets = make([]uint64, 0, units+1), make([]uint64, 0, units+1)
	for _, c := range coded {
		m.Offsets = append(m.Offsets, uint64(len(m.Words)))
		m.EscOffsets = append(m.EscOffsets, uint64(len(m.Esc)))
		m.Words = append(m.Words, c.words...)
		m.Esc = append(m.Esc, c.esc...)
	}
	m.Offsets = append(m.Offsets, uint64(len(m.Words)))
	m.EscOffsets = append(m.EscOffsets, uint64(len(m.Esc)))
	return m, nil
}

// unitCode is one unit's coded words (states, stream, padding) and
// escapes, in decoding order.
type unitCode struct {
	words []uint32
	esc   []int8
}

// unitEncoder holds one goroutine's scratch: the stream words by
// decoding position (step*Lanes + lane; a coder emits at most one word
// per step) and which positions hold one.
type unitEncoder struct {
	slot []uint32
	has  []bool
}

// encode codes unit u of m (whose model is fitted) from w.
func (e *unitEncoder) encode(m *Matrix, w []int8, u int) unitCode {
	steps, md, cols := m.steps(), &m.Model, m.Cols
	if len(e.slot) < steps*Lanes {
		e.slot, e.has = make([]uint32, steps*Lanes), make([]bool, steps*Lanes)
	}
	slot, has := e.slot[:steps*Lanes], e.has[:steps*Lanes]
	clear(has)
	n := 0
	var finals [Lanes]uint64
	for lane := 0; lane < Lanes; lane++ {
		x := uint64(StateLow)
		for step := steps - 1; step >= 0; step-- {
			var sym [4]int
			F := uint64(1)
			for e := 0; e < 4; e++ {
				r, c := m.element(u, lane, step, e)
				sym[e] = md.symbolOf(w[r*cols+c])
				F *= uint64(md.Freq[sym[e]])
			}
			if x >= F<<35 {
				slot[step*Lanes+lane], has[step*Lanes+lane] = uint32(x), true
				n++
				x >>= 32
			}
			q, rank := x/F, x%F
			var s uint64
			for e := 0; e < 4; e++ {
				f := uint64(md.Freq[sym[e]])
				s |= (uint64(md.Cum[sym[e]]) + rank%f) << (7 * e)
				rank /= f
			}
			x = q<<QuadBits | s
		}
		finals[lane] = x
	}
	var c unitCode
	c.words = make([]uint32, 0, (2*Lanes+n+127)/128*128)
	for lane := 0; lane < Lanes; lane++ {
		c.words = append(c.words, uint32(finals[lane]), uint32(finals[lane]>>32))
	}
	// Decoder order: step ascending, lane ascending.
	for k, ok := range has {
		if ok {
			c.words = append(c.words, slot[k])
		}
	}
	for len(c.words)%128 != 0 {
		c.words = append(c.words, 0)
	}
	// Escapes in decoding order.
	if md.Escape >= 0 {
		for step := 0; step < steps; step++ {
			for lane := 0; lane < Lanes; lane++ {
				for e := 0; e < 4; e++ {
					r, col := m.element(u, lane, step, e)
					if v := w[r*cols+col]; md.symbolOf(v) == md.Escape {
						c.esc = append(c.esc, v)
					}
				}
			}
		}
	}
	return c
}

// Report is the compression of a matrix, in bits per element.
type Report struct {
	BitsPerElement float64 // everything a multiply reads
	PayloadBits    float64 // the coded data alone: words read after the states, the data bits of the states (log2(x) - 31), escape bytes
	EntropyBits    float64 // the empirical entropy of the values
	OverheadBits   float64 // initial states, padding and offset tables
	ModelBits      float64
}

// Compression measures m against the values it encodes.
func (m *Matrix) Compression(w []int8) Report {
	var counts [256]int64
	for _, v := range w {
		counts[int(v)+128]++
	}
	n := float64(m.Rows * m.Cols)
	units := m.Units()
	// Payload words: all words minus states and the padding the decoder
	// does not read (counted by decoding).
	var pad int64
	for u := 0; u < units; u++ {
		read, err := m.decodeUnitN(u, func(int, int, *[4]int8) {})
		if err != nil {
			read = int(m.Offsets[u+1] - m.Offsets[u])
		}
		pad += int64(m.Offsets[u+1]-m.Offsets[u]) - int64(read)
	}
	// A coder's initial state x in [2^31, 2^63) carries log2(x) - 31 bits
	// of data; the rest of its 64 bits is overhead.
	payload := float64(32*(int64(len(m.Words))-pad-int64(units*2*Lanes)) + 8*int64(len(m.Esc)))
	var stateInfo float64
	for u := 0; u < units; u++ {
		w := m.Words[m.Offsets[u]:]
		for t := 0; t < Lanes; t++ {
			x := uint64(w[2*t]) | uint64(w[2*t+1])<<32
			stateInfo += math.Log2(float64(x)) - 31
		}
	}
	payload += stateInfo
	return Report{
		BitsPerElement: 8 * float64(m.CodedBytes()) / n,
		PayloadBits:    payload / n,
		EntropyBits:    Entropy(&counts) / n,
		OverheadBits:   (float64(64*int64(units*Lanes)) - stateInfo + float64(32*pad+128*int64(len(m.Offsets)))) / n,
		ModelBits:      float64(8*(2+2*m.Model.NSym)) / n,
	}
}
