package cpu

import (
	"fmt"

	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
)

// Entropy-coded Bits matrices (layout/ans.Bits) run the Bits kernels on
// their words decoded tile by tile (rowWords): 16 rows at a time into a
// scratch that stays in L2 while the kernels read it, so the multiply
// streams the coded bytes, never the plain ones, and its results are the
// plain twin's bit for bit.

func init() {
	loaders.Register(layout.FormatANSBits, mat.Typed("cpu", func(b *Backend, m *ans.Bits) (Mat, error) {
		return mat.Bind(b.LoadANSBits(m))
	}))
}

// LoadANSBits validates m and binds it to the backend (the code and
// metadata are used in place).
func (b *Backend) LoadANSBits(m *ans.Bits) (*LowMatrix, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if 16%m.RowsPerUnit() != 0 {
		return nil, fmt.Errorf("cpu: %s: units of %d rows do not divide %d-row tiles", m.Name(), m.RowsPerUnit(), codedTile)
	}
	c := *m // a snapshot of the fields, as Load takes
	h := &c.Header
	mx := &LowMatrix{b: b, bits: h, code: &c, rows: h.Rows, cols: h.Cols, pcols: h.PCols, g: h.G, groups: h.Groups(),
		simd: newBitsSIMD(b, h), a32: withoutLut(newBitsA32(b, h)), intErr: h.IntegerZeros()}
	mx.ansKern = ansDecoderFor(b, &c)
	return mx, nil
}

// decodeTile decodes the codedTile rows from r0 (a multiple of 16; fewer
// at the end of the padded rows) of an entropy-coded matrix into w
// (codedTile*WordsPerRow words).
func (mx *LowMatrix) decodeTile(r0 int, w []uint32) error {
	c := mx.code
	ru := c.RowsPerUnit()
	n := ru * c.Header.WordsPerRow()
	u0 := r0 / ru
	units := (min(r0+codedTile, c.Header.PRows) - r0) / ru
	if mx.ansKern != nil {
		return mx.ansKern.decode(u0, units, w)
	}
	for u := u0; u < u0+units; u++ {
		if err := c.DecodeUnitWords(u, w[(u-u0)*n:]); err != nil {
			return fmt.Errorf("cpu: %s: %w", c.Name(), err)
		}
	}
	return nil
}

// ansBitsDecoder is an entropy-coded matrix's SIMD decoder: decode fills
// w with the words of units [u0, u0+units) (ans.Bits.DecodeUnitWords'
// bytes) and returns a decoding error as DecodeUnitWords would; name is
// the kernel set's, for Kernel.
type ansBitsDecoder struct {
	name   string
	decode func(u0, units int, w []uint32) error
}

// codedKernel names the kernels of an entropy-coded matrix: the decoder,
// then the Bits kernels.
func (mx *LowMatrix) codedKernel(bitsKernel string) string {
	dec := "ans-generic"
	if mx.ansKern != nil {
		dec = "ans-" + mx.ansKern.name
	}
	return bitsKernel + "+" + dec
}
