// Package ggml is qgemv's format for llama.cpp's block types (GGML/GGUF
// quantized tensors), stored as the file stores them, so an imported
// tensor takes the bytes it takes in the GGUF file:
//
//	type    block  bytes  bits/weight  weight w of element e (sub-block j)
//	Q4_0     32     18     4.5         d * (q - 8)
//	Q4_1     32     20     5.0         d * q + m
//	Q5_0     32     22     5.5         d * (q - 16)
//	Q5_1     32     24     6.0         d * q + m
//	Q8_0     32     34     8.5         d * q            (q int8)
//	IQ4_NL   32     18     4.5         d * KValues[q]
//	Q2_K    256     84     2.625       (d*sc_j) * q - dmin*m_j      (16 sub-blocks of 16)
//	Q3_K    256    110     3.4375      (d*sc_j) * q, q in -4..3     (16 of 16, sc_j signed 6-bit)
//	Q4_K    256    144     4.5         (d*sc_j) * q - dmin*m_j      (8 of 32, 6-bit sc, m)
//	Q5_K    256    176     5.5         (d*sc_j) * q - dmin*m_j      (8 of 32)
//	Q6_K    256    210     6.5625      (d*sc_j) * (q - 32)          (16 of 16, sc_j int8)
//	IQ4_XS  256    136     4.25        (d*sc_j) * KValues[q]        (8 of 32, sc_j signed 6-bit)
//
// d, m and dmin are IEEE binary16; every product and sum is a float32
// operation in the order written (a*b rounded, then the sum rounded), the
// order of llama.cpp's reference dequantizers (dequantize_row_* and
// gguf-py's quants.dequantize), so Dequantize equals them bit for bit.
// The block byte layouts are ggml's (ggml-common.h): Decode spells each
// out, and Ints is the integer form every kernel and reference works from.
//
// # Matrix layout
//
// A Rows x Cols matrix is Rows rows of Blocks() blocks each, row-major,
// block k of a row covering columns [k*B, (k+1)*B) for the type's block
// of B elements. Columns are padded to PCols, a multiple of B and of 128
// (the activation group): a GGUF matrix (whose rows are whole blocks)
// gains padding only when ne[0] is not a multiple of 128, which no
// common model has. Padding columns meet zero activations; their blocks
// need only finite half-precision fields (Random and the importer write
// zero blocks). Rows are not padded. Data holds Rows*RowBytes() bytes.
// Every half-precision field must be finite (Validate).
//
// # Int8 activations (A8)
//
// Activations are quantized per 128 inputs by layout.QuantizeA8 (xq int8,
// xs float32 per group a = c/128). The exact product of a row (DotA8Exact;
// every backend reproduces it bit for bit) sums over the row's blocks in
// order, every float operation rounded to float32 on its own (no fused
// multiply-add), with Q, Sc, Mn, D and Dm of Ints:
//
// The 256-element types (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS), per half
// h = 0, 1 of each super-block (128 columns, activation group a):
//
//	S = sum_j Sc[j] * sum_{e in j} Q[e]*xq[e]      (int32, sub-blocks j of the half)
//	M = sum_j Mn[j] * sum_{e in j} xq[e]           (int32; Q2_K, Q4_K, Q5_K only)
//	acc = acc + float32(D*xs[a]) * float32(S)
//	acc = acc - float32(Dm*xs[a]) * float32(M)     (Q2_K, Q4_K, Q5_K only)
//
// The 32-element types, per block (activation group a = first column/128):
//
//	S = sum_e Q[e]*xq[e]                           (int32)
//	acc = acc + float32(D*xs[a]) * float32(S)
//	acc = acc + float32(Dm*xs[a]) * float32(sum_e xq[e])   (Q4_1, Q5_1 only)
//
// acc starts at +0; padding columns are summed like any other (their xq
// are zero). Every int32 sum is exact: |S| < 2^27 for every type.
//
// # Float activations (A32, A16)
//
// Every backend's float result is within Tolerance of DotRef, which sums
// the Dequantize weights times the activations in float64.
//
// # Container
//
// .qgv format 8 (layout.FormatGGML): one parameter, the ggml type id;
// rows and cols the true shape; one section BLKS of Rows*RowBytes()
// bytes, the blocks as above.
package ggml

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/qgemv/qgemv/internal/sysmem"
	"github.com/qgemv/qgemv/layout"
)

// Type is a ggml tensor type id (the GGUF file's type field).
type Type uint32

// The block types of this format (ggml's ids).
const (
	Q4_0   Type = 2
	Q4_1   Type = 3
	Q5_0   Type = 6
	Q5_1   Type = 7
	Q8_0   Type = 8
	Q2_K   Type = 10
	Q3_K   Type = 11
	Q4_K   Type = 12
	Q5_K   Type = 13
	Q6_K   Type = 14
	IQ4_NL Type = 20
	IQ4_XS Type = 23
)

// Types lists every block type of the format, in ggml id order.
var Types = []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS}

type offKind uint8

const (
	offNone  offKind = iota
	offPlus          // w = d*q + m (Q4_1, Q5_1)
	offMinus         // w = (d*sc)*q - dmin*m (Q2_K, Q4_K, Q5_K)
)

type info struct {
	name              string
	elems, bytes, sub int // block elements, block bytes, sub-block elements
	off               offKind
}

var infos = map[Type]info{
	Q4_0: {"Q4_0", 32, 18, 32, offNone}, Q4_1: {"Q4_1", 32, 20, 32, offPlus},
	Q5_0: {"Q5_0", 32, 22, 32, offNone}, Q5_1: {"Q5_1", 32, 24, 32, offPlus},
	Q8_0: {"Q8_0", 32, 34, 32, offNone}, IQ4_NL: {"IQ4_NL", 32, 18, 32, offNone},
	Q2_K: {"Q2_K", 256, 84, 16, offMinus}, Q3_K: {"Q3_K", 256, 110, 16, offNone},
	Q4_K: {"Q4_K", 256, 144, 32, offMinus}, Q5_K: {"Q5_K", 256, 176, 32, offMinus},
	Q6_K: {"Q6_K", 256, 210, 16, offNone}, IQ4_XS: {"IQ4_XS", 256, 136, 32, offNone},
}

// Known reports whether t is a block type of this format.
func (t Type) Known() bool { _, ok := infos[t]; return ok }

// String returns ggml's name, e.g. "Q6_K", or "type N".
func (t Type) String() string {
	if i, ok := infos[t]; ok {
		return i.name
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// BlockElems returns the elements per block (32 or 256; 0 if unknown).
func (t Type) BlockElems() int { return infos[t].elems }

// BlockBytes returns the bytes per block (0 if unknown).
func (t Type) BlockBytes() int { return infos[t].bytes }

// SubLen returns the elements per sub-block (16 or 32; the 32-element
// types are one sub-block).
func (t Type) SubLen() int { return infos[t].sub }

// SubBlocks returns the sub-blocks per block (0 if unknown).
func (t Type) SubBlocks() int {
	if infos[t].sub == 0 {
		return 0
	}
	return infos[t].elems / infos[t].sub
}

// Super reports whether t is a 256-element super-block type.
func (t Type) Super() bool { return infos[t].elems == 256 }

// HasMins reports whether the A8 definition has an M term: the K types
// with mins (Q2_K, Q4_K, Q5_K: subtracted) and Q4_1, Q5_1 (added).
func (t Type) HasMins() bool { return infos[t].off != offNone }

// MinsAdd reports whether the M term is added (Q4_1, Q5_1) rather than
// subtracted (the K types).
func (t Type) MinsAdd() bool { return infos[t].off == offPlus }

func (t Type) off() offKind { return infos[t].off }

// BitsPerWeight returns the type's storage cost per weight.
func (t Type) BitsPerWeight() float64 { return 8 * float64(t.BlockBytes()) / float64(t.BlockElems()) }

// SpecName returns the lower-case spec name, e.g. "q6_k".
func (t Type) SpecName() string { return strings.ToLower(t.String()) }

// ParseType reads a type name in any case ("Q4_K", "iq4_xs").
func ParseType(s string) (Type, bool) {
	for _, t := range Types {
		if strings.EqualFold(s, t.String()) {
			return t, true
		}
	}
	return 0, false
}

// PadCols returns the padded column count for cols columns of type t.
func (t Type) PadCols(cols int) int {
	u := max(t.BlockElems(), layout.GroupSize)
	return (cols + u - 1) / u * u
}

// Matrix is a matrix of one ggml block type (see the package doc).
type Matrix struct {
	Type       Type
	Rows, Cols int
	PCols      int    // columns padded to a multiple of the block and of 128
	Data       []byte // Rows*RowBytes() bytes
}

// New returns a zero matrix (every block all zero bytes: weights 0).
func New(t Type, rows, cols int) (*Matrix, error) {
	return NewData(t, rows, cols, nil)
}

// NewData is New with the blocks' bytes taken from data: it is called
// once with their count and must return that many zero bytes, which the
// matrix then uses (memory the caller manages, such as a backend's huge
// pages, so that filling the matrix is its only copy). A nil data
// allocates them on the Go heap.
func NewData(t Type, rows, cols int, data func(n int) []byte) (*Matrix, error) {
	m, err := NewShape(t, rows, cols)
	if err != nil {
		return nil, err
	}
	n := rows * m.RowBytes()
	if err := sysmem.Check(uint64(n)); err != nil {
		return nil, fmt.Errorf("ggml: %s %dx%d: %w", m.Name(), rows, cols, err)
	}
	if data == nil {
		m.Data = make([]byte, n)
		return m, nil
	}
	if m.Data = data(n); len(m.Data) != n {
		return nil, fmt.Errorf("ggml: %s %dx%d: the data function returned %d bytes, want %d", m.Name(), rows, cols, len(m.Data), n)
	}
	return m, nil
}

// NewShape returns the matrix's header without its blocks (Data nil):
// its name, padded shape, size and bits per weight, for describing a
// tensor without allocating it.
func NewShape(t Type, rows, cols int) (*Matrix, error) {
	if !t.Known() {
		return nil, fmt.Errorf("ggml: %v is not a supported block type", t)
	}
	if err := layout.CheckDims(rows, cols); err != nil {
		return nil, err
	}
	return &Matrix{Type: t, Rows: rows, Cols: cols, PCols: t.PadCols(cols)}, nil
}

// Blocks returns the blocks per (padded) row (0 for an unknown type).
func (m *Matrix) Blocks() int {
	if m.Type.BlockElems() == 0 {
		return 0
	}
	return m.PCols / m.Type.BlockElems()
}

// RowBytes returns the bytes of one row.
func (m *Matrix) RowBytes() int { return m.Blocks() * m.Type.BlockBytes() }

// Block returns the bytes of block k of row r.
func (m *Matrix) Block(r, k int) []byte {
	n := m.Type.BlockBytes()
	o := r*m.RowBytes() + k*n
	return m.Data[o : o+n : o+n]
}

// Name returns the type's name, e.g. "Q6_K".
func (m *Matrix) Name() string { return m.Type.String() }

// Spec returns the matrix's spec.
func (m *Matrix) Spec() layout.FormatSpec {
	return layout.FormatSpec{Format: layout.FormatGGML, Type: int(m.Type)}
}

// Shape returns the true rows and columns.
func (m *Matrix) Shape() (rows, cols int) { return m.Rows, m.Cols }

// PaddedCols returns PCols.
func (m *Matrix) PaddedCols() int { return m.PCols }

// StreamBytes returns the bytes a GEMV reads: the blocks.
func (m *Matrix) StreamBytes() int64 { return int64(len(m.Data)) }

// BitsPerWeight returns the storage per true weight (of the shape: a
// NewShape header has it too).
func (m *Matrix) BitsPerWeight() float64 {
	return 8 * float64(m.Rows*m.RowBytes()) / float64(m.Rows) / float64(m.Cols)
}

// Validate checks the type, the shape, the data length and that every
// half-precision field of every block is finite.
func (m *Matrix) Validate() error {
	if err := m.ValidateShape(); err != nil {
		return err
	}
	return m.CheckFinite(0, len(m.Data))
}

// ValidateShape is Validate without the scan of the blocks' fields: a
// loader that copies the blocks checks each piece with CheckFinite while
// it is in cache instead.
func (m *Matrix) ValidateShape() error {
	if m == nil {
		return errors.New("ggml: matrix is nil")
	}
	if !m.Type.Known() {
		return fmt.Errorf("ggml: %v is not a supported block type", m.Type)
	}
	if err := layout.CheckDims(m.Rows, m.Cols); err != nil {
		return err
	}
	if m.PCols != m.Type.PadCols(m.Cols) {
		return fmt.Errorf("ggml: %s %dx%d: padded columns %d, want %d", m.Name(), m.Rows, m.Cols, m.PCols, m.Type.PadCols(m.Cols))
	}
	if want := int64(m.Rows) * int64(m.RowBytes()); int64(len(m.Data)) != want {
		return fmt.Errorf("ggml: %s %dx%d: %d bytes of blocks, want %d", m.Name(), m.Rows, m.Cols, len(m.Data), want)
	}
	return nil
}

// CheckFinite checks that every half-precision field of the blocks in
// m.Data[from:to] is finite (from a multiple of the block size; a
// partial block at the end is left out), naming the first that is not
// by row and block. The shape must have passed ValidateShape.
func (m *Matrix) CheckFinite(from, to int) error {
	if !m.Type.Known() {
		return fmt.Errorf("ggml: %v is not a supported block type", m.Type)
	}
	nb := m.Type.BlockBytes()
	if from < 0 || to > len(m.Data) || from > to || from%nb != 0 {
		return fmt.Errorf("ggml: %s: blocks [%d, %d) of %d bytes", m.Name(), from, to, len(m.Data))
	}
	if i, f := nonFiniteHalf(m.Data[from:to], m.Type.halfFields(), nb); i >= 0 {
		i += from
		r, k := i/m.RowBytes(), i%m.RowBytes()/nb
		return fmt.Errorf("ggml: %s: row %d block %d: half-precision %s is %v (want finite)", m.Name(), r, k, f.name, m.halfAt(i, f.name))
	}
	return nil
}

// checkPiece is the bytes CopyChecked copies before checking them: small
// enough to be still in cache when CheckFinite reads them.
const checkPiece = 64 << 10

// CopyChecked copies m.Data into dst (at least as long) about 64 KiB of
// whole blocks at a time, checking each piece's half-precision fields as
// CheckFinite does right after copying it, instead of a pass of its own
// over the whole matrix. The shape must have passed ValidateShape.
func (m *Matrix) CopyChecked(dst []byte) error {
	if !m.Type.Known() {
		return fmt.Errorf("ggml: %v is not a supported block type", m.Type)
	}
	if len(dst) < len(m.Data) {
		return fmt.Errorf("ggml: %s: CopyChecked into %d bytes, want %d", m.Name(), len(dst), len(m.Data))
	}
	nb := m.Type.BlockBytes()
	step := max(1, checkPiece/nb) * nb
	for o := 0; o < len(m.Data); o += step {
		e := min(len(m.Data), o+step)
		copy(dst[o:e], m.Data[o:e])
		if err := m.CheckFinite(o, e); err != nil {
			return err
		}
	}
	return nil
}

// CheckedRows is the number of rows of rowBytes bytes in a piece that
// CopyChecked would copy and check at once.
func CheckedRows(rowBytes int) int { return max(1, checkPiece/max(1, rowBytes)) }

// nonFiniteHalf returns the offset of the first block of nb bytes in data
// with one of the binary16 fields an infinity or a NaN (all exponent bits
// set), and that field, or -1: one pass over the blocks, on the bits
// alone (every block of a model passes here at load).
func nonFiniteHalf(data []byte, fields []halfField, nb int) (int, halfField) {
	for i := 0; i+nb <= len(data); i += nb {
		for _, f := range fields {
			if binary.LittleEndian.Uint16(data[i+f.off:])&0x7c00 == 0x7c00 {
				return i, f
			}
		}
	}
	return -1, halfField{}
}

func (m *Matrix) halfAt(i int, field string) float32 {
	for _, f := range m.Type.halfFields() {
		if f.name == field {
			return f16(m.Data[i+f.off:])
		}
	}
	return 0
}

// Dequantize returns the Rows x Cols float32 weights, row-major, equal bit
// for bit to llama.cpp's reference dequantization.
func (m *Matrix) Dequantize() []float32 {
	out := make([]float32, m.Rows*m.Cols)
	row := make([]float32, m.PCols)
	for r := 0; r < m.Rows; r++ {
		m.DequantizeRow(row, r)
		copy(out[r*m.Cols:], row[:m.Cols])
	}
	return out
}

// DequantizeRow writes the PCols weights of row r to dst.
func (m *Matrix) DequantizeRow(dst []float32, r int) {
	n := m.Type.BlockElems()
	var z Ints
	for k := 0; k < m.Blocks(); k++ {
		m.Type.Decode(&z, m.Block(r, k))
		m.Type.dequantizeInts(dst[k*n:], &z)
	}
}

// DotRef computes out[r] = sum_c w[r,c]*x[c] in float64 from the
// Dequantize weights.
func (m *Matrix) DotRef(out []float64, x []float32) error { return m.dotRef(out, x, false) }

// DotRefMag computes mag[r] = sum_c |w[r,c]*x[c]|.
func (m *Matrix) DotRefMag(mag []float64, x []float32) error { return m.dotRef(mag, x, true) }

func (m *Matrix) dotRef(out []float64, x []float32, abs bool) error {
	if err := m.ValidateShape(); err != nil {
		return err
	}
	if len(x) != m.Cols || len(out) != m.Rows {
		return fmt.Errorf("ggml: %s: DotRef: x %d, out %d elements, want %d, %d", m.Name(), len(x), len(out), m.Cols, m.Rows)
	}
	row := make([]float32, m.PCols)
	for r := 0; r < m.Rows; r++ {
		m.DequantizeRow(row, r)
		var acc float64
		for c, v := range x {
			p := float64(float64(row[c]) * float64(v)) // rounded: no fused multiply-add (make fma-check)
			if abs {
				p = math.Abs(p)
			}
			acc += p
		}
		out[r] = acc
	}
	return nil
}

// Tolerance bounds the float paths (A32, A16 after widening) of every
// backend: |y - ref| <= Tolerance * mag for rows of up to
// layout.MaxBoundGroups groups of 128 columns; a longer row adds up to
// 2^-24 * mag per further group, as for layout.BitsTolerance.
const Tolerance = 3e-5

// Tolerance returns the float paths' bound for x.
func (m *Matrix) Tolerance([]float32) (rel, abs float64) {
	g := m.PCols / layout.GroupSize
	if g > layout.MaxBoundGroups {
		return Tolerance + float64(float64(g-layout.MaxBoundGroups)*0x1p-24), 0
	}
	return Tolerance, 0
}

// IntegerZeros returns nil: every type multiplies int8 activations.
func (m *Matrix) IntegerZeros() error { return nil }

// DotA8Exact computes the exact int8-activation product of every row (see
// the package doc) from xq (PCols values) and xs (PCols/128 scales).
func (m *Matrix) DotA8Exact(out []float32, xq []int8, xs []float32) error {
	if err := m.ValidateShape(); err != nil {
		return err
	}
	if len(xq) != m.PCols || len(xs) != m.PCols/layout.GroupSize || len(out) != m.Rows {
		return fmt.Errorf("ggml: %s: DotA8Exact: xq %d, xs %d, out %d, want %d, %d, %d", m.Name(), len(xq), len(xs), len(out), m.PCols, m.PCols/layout.GroupSize, m.Rows)
	}
	var z Ints
	for r := 0; r < m.Rows; r++ {
		var acc float32
		for k := 0; k < m.Blocks(); k++ {
			m.Type.Decode(&z, m.Block(r, k))
			n := m.Type.BlockElems()
			acc = A8Block(m.Type, &z, acc, xq[k*n:], xs[k*n/layout.GroupSize:])
		}
		out[r] = acc
	}
	return nil
}

// A8Block adds block z's terms of the exact A8 product to acc (see the
// package doc) and returns the new acc: xq starts at the block's first
// column, xs at its activation group (xs[0]; a super-block's second half
// uses xs[1]). It is the definition every kernel reproduces.
func A8Block(t Type, z *Ints, acc float32, xq []int8, xs []float32) float32 {
	_ = xq[t.BlockElems()-1]
	sub := t.SubLen()
	step := min(t.BlockElems(), layout.GroupSize) // columns per float step: 128 or 32
	for h := 0; h < t.BlockElems()/step; h++ {
		var s, mn int32
		for j := h * step / sub; j < (h+1)*step/sub; j++ {
			var dot, sx int32
			for e := j * sub; e < (j+1)*sub; e++ {
				dot += int32(z.Q[e]) * int32(xq[e])
				sx += int32(xq[e])
			}
			s += z.Sc[j] * dot
			if t.Super() {
				mn += z.Mn[j] * sx
			} else {
				mn = sx
			}
		}
		acc = A8Step(t, acc, z.D, z.Dm, s, mn, xs[h])
	}
	return acc
}

// A8Step is one float step of the definition: the int32 sums s and mn of
// a step (128 columns of a super-block, or one 32-element block) with
// activation scale x.
func A8Step(t Type, acc, d, dm float32, s, mn int32, x float32) float32 {
	acc = float32(acc + float32(float32(d*x)*float32(s)))
	switch t.off() {
	case offMinus:
		acc = float32(acc - float32(float32(dm*x)*float32(mn)))
	case offPlus:
		acc = float32(acc + float32(float32(dm*x)*float32(mn)))
	}
	return acc
}

// file returns the container form of m (BLKS shares m.Data).
func (m *Matrix) file() (*layout.File, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &layout.File{
		Version: layout.FileVersion, Format: layout.FormatGGML,
		Rows: uint64(m.Rows), Cols: uint64(m.Cols),
		Params:   []uint64{uint64(m.Type)},
		Sections: []layout.Section{{Tag: blksTag, Data: m.Data}},
	}, nil
}

var blksTag = [4]byte{'B', 'L', 'K', 'S'}

// WriteTo validates m and writes it as a .qgv file (io.WriterTo).
func (m *Matrix) WriteTo(w io.Writer) (int64, error) {
	f, err := m.file()
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: w}
	err = layout.WriteFile(cw, f)
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// DecodeFile interprets a .qgv container of format 8; the matrix's Data
// shares the BLKS section's memory.
func DecodeFile(f *layout.File) (*Matrix, error) {
	if f == nil {
		return nil, errors.New("ggml: .qgv: File is nil")
	}
	if f.Format != layout.FormatGGML {
		return nil, fmt.Errorf("ggml: .qgv: format is %v, want %v", f.Format, layout.FormatGGML)
	}
	if len(f.Params) != 1 {
		return nil, fmt.Errorf("ggml: .qgv: %d format parameters, want 1 (the ggml type)", len(f.Params))
	}
	if f.Params[0] > math.MaxUint32 || !Type(f.Params[0]).Known() {
		return nil, fmt.Errorf("ggml: .qgv: ggml type %d is not supported (want one of %v)", f.Params[0], Types)
	}
	t := Type(f.Params[0])
	if f.Rows > layout.MaxDim || f.Cols > layout.MaxDim {
		return nil, fmt.Errorf("ggml: .qgv: matrix shape %dx%d: dimensions above the limit %d", f.Rows, f.Cols, layout.MaxDim)
	}
	rows, cols := int(f.Rows), int(f.Cols)
	if err := layout.CheckDims(rows, cols); err != nil {
		return nil, err
	}
	if len(f.Sections) != 1 || f.Sections[0].Tag != blksTag {
		return nil, fmt.Errorf("ggml: .qgv: %s needs exactly one section BLKS, the file has %d", t, len(f.Sections))
	}
	m := &Matrix{Type: t, Rows: rows, Cols: cols, PCols: t.PadCols(cols), Data: f.Sections[0].Data}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

func init() {
	var ex []string
	for _, t := range []Type{Q4_K, Q6_K, Q8_0, Q5_K, Q4_0, Q2_K, Q3_K, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS} {
		ex = append(ex, t.SpecName())
	}
	var names []string
	for _, t := range Types {
		names = append(names, t.SpecName())
	}
	layout.RegisterFormat(layout.Format{
		ID: layout.FormatGGML, Name: "GGML", Syntax: strings.Join(names, "|"),
		Parse: func(name string) (layout.FormatSpec, bool, error) {
			t, ok := ParseType(name)
			if !ok {
				return layout.FormatSpec{}, false, nil
			}
			return layout.FormatSpec{Format: layout.FormatGGML, Type: int(t)}, true, nil
		},
		String: func(s layout.FormatSpec) string { return Type(s.Type).SpecName() },
		Decode: func(f *layout.File) (layout.Matrix, error) { return DecodeFile(f) },
		Random: func(s layout.FormatSpec, rows, cols int, seed uint64) (layout.Matrix, error) {
			return Random(Type(s.Type), rows, cols, seed)
		},
		Examples:      ex,
		ShortExamples: 4,
	})
}

// Random returns a matrix of type t with random blocks (finite
// half-precision fields of realistic size, see RandomBlocks), determined
// by seed.
func Random(t Type, rows, cols int, seed uint64) (*Matrix, error) {
	m, err := New(t, rows, cols)
	if err != nil {
		return nil, err
	}
	RandomBlocks(t, layout.NewRand(seed), m.Data)
	return m, nil
}

// RandomBlocks fills dst (whole blocks of type t) with random codes and
// scales, and binary16 fields d in [1e-3, 2e-2) (K types: [1e-4, 1e-2),
// with dmin likewise) and m in [-0.5, 0.5): every block is valid. Q8_0
// codes lie in [-127, 127], as llama.cpp's quantizer writes them (a code
// of -128 is valid, and some CPU kernel sets run such matrices in Go).
func RandomBlocks(t Type, rng *rand.Rand, dst []byte) {
	layout.FillRandom(rng, dst)
	if !t.Known() { // no fields to set (and no block size to step by)
		return
	}
	if t == Q8_0 {
		for b := dst; len(b) >= t.BlockBytes(); b = b[t.BlockBytes():] {
			for i := 2; i < t.BlockBytes(); i++ {
				if b[i] == 0x80 {
					b[i] = 0x81
				}
			}
		}
	}
	put := func(b []byte, lo, hi float64) {
		h := layout.ToFP16(float32(lo + float64(rng.Float64()*(hi-lo))))
		b[0], b[1] = byte(h), byte(h>>8)
	}
	for b := dst; len(b) >= t.BlockBytes(); b = b[t.BlockBytes():] {
		for _, f := range t.halfFields() {
			switch {
			case f.name == "m":
				put(b[f.off:], -0.5, 0.5)
			case t.Super():
				put(b[f.off:], 1e-4, 1e-2)
			default:
				put(b[f.off:], 1e-3, 2e-2)
			}
		}
	}
}

var (
	_ layout.A8Matrix = (*Matrix)(nil)
	_ io.WriterTo     = (*Matrix)(nil)
)
