package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ggml"
)

// Lossless reports whether Import represents t's type exactly: every
// block type of layout/ggml (Q2_K..Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// IQ4_NL, IQ4_XS).
func Lossless(t Type) bool { return ggml.Type(t).Known() }

// Float reports whether Float32s reads t's type.
func Float(t Type) bool { return t == F32 || t == F16 || t == BF16 }

// ImportsAs describes what the tensor imports as: the exact qgemv format,
// float32 (to quantize), or why it cannot be imported.
func (t *Tensor) ImportsAs() string {
	rows, cols, err := t.Shape2D()
	switch {
	case err != nil:
		return "not a matrix"
	case Float(t.Type):
		return "float32 (quantize to any format)"
	case !Lossless(t.Type):
		if _, ok := types[t.Type]; !ok {
			return fmt.Sprintf("not supported (unknown ggml type id %d)", uint32(t.Type))
		}
		return "not supported"
	}
	m, err := ggml.NewShape(ggml.Type(t.Type), rows, cols)
	if err != nil {
		return "not supported: " + err.Error()
	}
	return fmt.Sprintf("%s exact (%.4g bits/weight; A8, A16, A32)", m.Name(), m.BitsPerWeight())
}

// Import returns the tensor as the qgemv matrix it imports losslessly
// into: every block type as a layout/ggml matrix (ImportGGML: the file's
// bytes). ImportBits gives Q4_0, Q4_1, Q8_0 and Q4_K as Bits instead
// (more bytes, the Bits kernels). Errors name the tensor.
func (t *Tensor) Import() (layout.Matrix, error) {
	return t.ImportGGML()
}

// ImportGGML returns the tensor's blocks as a layout/ggml matrix: the
// same bytes (copied, so the matrix outlives the file), every weight
// equal to llama.cpp's dequantization. Errors name the tensor: a type
// that is not a block type, a shape that is not a matrix, a byte count
// that does not match the shape, a non-finite half-precision scale.
func (t *Tensor) ImportGGML() (*ggml.Matrix, error) {
	return t.ImportGGMLWith(ImportOptions{})
}

// ImportOptions say where ImportGGMLWith puts a matrix and how it reads
// the tensor's bytes.
type ImportOptions struct {
	// Data, if set, supplies the matrix's bytes (ggml.NewData): a loader
	// that keeps the matrix in memory of its own imports straight into
	// it. Nil allocates them.
	Data func(n int) []byte
	// Read, if set, copies src, a piece of the tensor's Data, into dst
	// (of the same length): a loader can read the file's bytes rather
	// than through a mapping of it (mmap.File.ReadInto). Nil copies.
	Read func(dst, src []byte) error
}

// ImportGGMLWith is ImportGGML with the matrix's memory and the reads
// of the tensor's bytes as o says.
func (t *Tensor) ImportGGMLWith(o ImportOptions) (*ggml.Matrix, error) {
	if !Lossless(t.Type) {
		return nil, fmt.Errorf("gguf: tensor %q is %s: lossless import supports %v (F32/F16/BF16: read with Float32s and quantize)", t.Name, t.Type, ggml.Types)
	}
	if t.Data == nil {
		return nil, fmt.Errorf("gguf: tensor %q (%s): no data", t.Name, t.Type)
	}
	rows, cols, err := t.Shape2D()
	if err != nil {
		return nil, err
	}
	gt := ggml.Type(t.Type)
	if cols%gt.BlockElems() != 0 {
		return nil, fmt.Errorf("gguf: tensor %q: %d columns, not a multiple of the %s block of %d", t.Name, cols, t.Type, gt.BlockElems())
	}
	m, err := ggml.NewShape(gt, rows, cols)
	if err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	src := cols / gt.BlockElems() * gt.BlockBytes() // bytes per row in the file
	if int64(len(t.Data)) != int64(rows)*int64(src) {
		return nil, fmt.Errorf("gguf: tensor %q: %d bytes, a %dx%d %s matrix has %d", t.Name, len(t.Data), rows, cols, t.Type, int64(rows)*int64(src))
	}
	if m, err = ggml.NewData(gt, rows, cols, o.Data); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	if err := m.ValidateShape(); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	read := o.Read
	if read == nil {
		read = func(dst, src []byte) error { copy(dst, src); return nil }
	}
	// The scales are checked as the blocks are copied, a piece at a time
	// (in cache); padding blocks after each row stay zero.
	rb := m.RowBytes()
	step := ggml.CheckedRows(rb)
	for r0 := 0; r0 < rows; r0 += step {
		r1 := min(rows, r0+step)
		if src == rb { // the piece's rows in one read
			err = read(m.Data[r0*rb:r1*rb], t.Data[r0*src:r1*src])
		} else {
			for r := r0; r < r1 && err == nil; r++ {
				err = read(m.Data[r*rb:r*rb+src], t.Data[r*src:(r+1)*src])
			}
		}
		if err != nil {
			return nil, fmt.Errorf("gguf: tensor %q: reading rows %d..%d: %w", t.Name, r0, r1-1, err)
		}
		if err := m.CheckFinite(r0*rb, r1*rb); err != nil {
			return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
	}
	return m, nil
}

// Dequantize returns the tensor's values as float32, row-major: the
// reference dequantization of a block type (bit for bit), the exact
// values of F32, F16 and BF16.
func (t *Tensor) Dequantize() ([]float32, error) {
	if Float(t.Type) {
		return t.Float32s()
	}
	m, err := t.ImportGGML()
	if err != nil {
		return nil, err
	}
	return m.Dequantize(), nil
}

// BitsLossless reports whether ImportBits represents t's type exactly.
func BitsLossless(t Type) bool { return t == Q4_0 || t == Q4_1 || t == Q8_0 || t == Q4_K }

func half(b []byte) layout.FP16 { return layout.FP16(binary.LittleEndian.Uint16(b)) }

// Float32s reads an F32, F16 or BF16 tensor as float32 (exact), row-major
// with ne[0] columns.
func (t *Tensor) Float32s() ([]float32, error) {
	if !Float(t.Type) || t.Data == nil {
		return nil, fmt.Errorf("gguf: tensor %q is %s, not F32, F16 or BF16", t.Name, t.Type)
	}
	if err := t.checkData(); err != nil {
		return nil, err
	}
	_, size := t.Type.BlockSize()
	out := make([]float32, len(t.Data)/size)
	switch t.Type { // one loop per type
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case F16:
		for i := range out {
			out[i] = half(t.Data[2*i:]).Float32()
		}
	default:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16)
		}
	}
	return out, nil
}

// scaleMinK4 decodes the 6-bit scale and min of sub-block j from the 12
// packed bytes of a Q4_K block.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// ImportBits converts a Q4_0, Q4_1, Q8_0 or Q4_K matrix into Bits(n, 32)
// losslessly (see the package doc for each mapping): the import before
// layout/ggml, kept for the Bits kernels (Q4_0 as Bits4G32 runs every
// kernel set's SIMD A8 kernels).
func (t *Tensor) ImportBits() (*layout.Bits, error) {
	if !BitsLossless(t.Type) || t.Data == nil {
		return nil, fmt.Errorf("gguf: tensor %q is %s: lossless import supports Q4_0, Q4_1, Q8_0 and Q4_K (F32/F16/BF16: read with Float32s and quantize)", t.Name, t.Type)
	}
	rows, cols, err := t.Shape2D()
	if err != nil {
		return nil, err
	}
	if err := t.checkData(); err != nil {
		return nil, err
	}
	blk, siz := t.Type.BlockSize()
	perRow := cols / blk
	n := 4
	if t.Type == Q8_0 {
		n = 8
	}
	b, err := layout.NewBits(rows, cols, n, 32, t.Type == Q4_K)
	if err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	b.Offsets = t.Type == Q4_1 || t.Type == Q4_K
	for r := 0; r < rows; r++ {
		for k := 0; k < perRow; k++ {
			x := t.Data[(r*perRow+k)*siz : (r*perRow+k+1)*siz]
			c0 := k * blk
			switch t.Type {
			case Q4_0, Q4_1:
				qs := x[2:]
				if t.Type == Q4_1 {
					qs = x[4:]
				}
				for j := 0; j < 16; j++ {
					b.SetQ(r, c0+j, uint32(qs[j]&15))
					b.SetQ(r, c0+j+16, uint32(qs[j]>>4))
				}
				g := (c0/32)*b.PRows + r
				b.Scales16[g] = half(x)
				if t.Type == Q4_0 {
					b.Zeros16[g] = layout.ToFP16(8)
				} else {
					b.Zeros16[g] = half(x[2:])
				}
			case Q8_0:
				for j := 0; j < 32; j++ {
					b.SetQ(r, c0+j, uint32(int32(int8(x[2+j]))+128))
				}
				g := (c0/32)*b.PRows + r
				b.Scales16[g], b.Zeros16[g] = half(x), layout.ToFP16(128)
			case Q4_K:
				d, dmin := half(x).Float32(), half(x[2:]).Float32()
				scales, qs := x[4:16], x[16:144]
				for c := 0; c < 4; c++ { // 64 columns: sub-blocks 2c (low nibbles), 2c+1 (high)
					for l := 0; l < 32; l++ {
						v := qs[32*c+l]
						b.SetQ(r, c0+64*c+l, uint32(v&15))
						b.SetQ(r, c0+64*c+32+l, uint32(v>>4))
					}
				}
				for j := 0; j < 8; j++ {
					sc, m := scaleMinK4(j, scales)
					g := (c0/32+j)*b.PRows + r
					b.Scales32[g] = d * float32(sc)     // exact: 11 x 6 significant bits
					b.Zeros32[g] = -(dmin * float32(m)) // exact likewise
				}
			}
		}
	}
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	return b, nil
}
