package ans

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/qgemv/qgemv/layout"
)

var tags = [5][4]byte{{'M', 'O', 'D', 'L'}, {'O', 'F', 'F', 'S'}, {'E', 'S', 'C', 'O'}, {'W', 'R', 'D', 'S'}, {'E', 'S', 'C', 'V'}}

// Name returns e.g. "ANS-warp-rows".
func (m *Matrix) Name() string { return "ANS-" + m.Layout.String() }

// Shape returns the rows and columns.
func (m *Matrix) Shape() (rows, cols int) { return m.Rows, m.Cols }

// StreamBytes returns CodedBytes (layout.Matrix).
func (m *Matrix) StreamBytes() int64 { return m.CodedBytes() }

// PaddedCols returns Cols (the layouts need no padding).
func (m *Matrix) PaddedCols() int { return m.Cols }

type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func u64s(v []uint64) []byte {
	out := make([]byte, 0, 8*len(v))
	for _, x := range v {
		out = binary.LittleEndian.AppendUint64(out, x)
	}
	return out
}

// WriteTo writes m as a .qgv file (format 5).
func (m *Matrix) WriteTo(w io.Writer) (int64, error) {
	if err := m.Validate(); err != nil {
		return 0, err
	}
	f := &layout.File{Version: layout.FileVersion, Format: layout.FormatANS, Rows: uint64(m.Rows), Cols: uint64(m.Cols),
		Params: []uint64{uint64(m.Layout)}, Sections: m.sections()}
	cw := &counter{w: w}
	err := layout.WriteFile(cw, f)
	return cw.n, err
}

// sections returns m's container sections: MODL, OFFS, ESCO, WRDS, ESCV.
func (m *Matrix) sections() []layout.Section {
	md := []byte{byte(m.Model.NSym - 1), byte(m.Model.Escape + 1)}
	for k := 0; k < m.Model.NSym; k++ {
		md = append(md, byte(m.Model.Value[k]), m.Model.Freq[k])
	}
	words := make([]byte, 0, 4*len(m.Words))
	for _, x := range m.Words {
		words = binary.LittleEndian.AppendUint32(words, x)
	}
	esc := make([]byte, len(m.Esc))
	for i, v := range m.Esc {
		esc[i] = byte(v)
	}
	return []layout.Section{{Tag: tags[0], Data: md}, {Tag: tags[1], Data: u64s(m.Offsets)}, {Tag: tags[2], Data: u64s(m.EscOffsets)},
		{Tag: tags[3], Data: words}, {Tag: tags[4], Data: esc}}
}

// DecodeFile builds an ANS matrix from a checked container: every size
// is checked against the parameters before allocation and every offset
// against the streams (Validate).
func DecodeFile(f *layout.File) (*Matrix, error) {
	if f == nil || f.Format != layout.FormatANS || f.Version != layout.FileVersion {
		return nil, fmt.Errorf("ans: not a version-%d ANS file", layout.FileVersion)
	}
	if len(f.Params) != 1 || f.Params[0] > 1 {
		return nil, fmt.Errorf("ans: .qgv: parameters %v, want [layout 0 or 1]", f.Params)
	}
	if f.Rows > layout.MaxDim || f.Cols > layout.MaxDim {
		return nil, fmt.Errorf("ans: .qgv: shape %dx%d: dimensions above the limit %d", f.Rows, f.Cols, layout.MaxDim)
	}
	return decodeSections(f.Sections, int(f.Rows), int(f.Cols), Layout(f.Params[0]))
}

// decodeSections builds a rows x cols matrix of layout l from its five
// sections (Matrix.sections), checking every size against the shape
// before allocating and every offset against the streams.
func decodeSections(secs []layout.Section, rows, cols int, l Layout) (*Matrix, error) {
	m := &Matrix{Rows: rows, Cols: cols, Layout: l}
	if err := CheckShape(l, m.Rows, m.Cols); err != nil {
		return nil, err
	}
	if len(secs) != 5 {
		return nil, fmt.Errorf("ans: .qgv: %d sections, want MODL, OFFS, ESCO, WRDS, ESCV", len(secs))
	}
	for i, s := range secs {
		if s.Tag != tags[i] {
			return nil, fmt.Errorf("ans: .qgv: section %d is %q, want %q", i, s.Tag[:], tags[i][:])
		}
	}
	md := secs[0].Data
	if len(md) < 2 || len(md) != 2+2*(int(md[0])+1) {
		return nil, fmt.Errorf("ans: .qgv: model section of %d bytes", len(md))
	}
	if n := int(md[0]) + 1; n > MaxSyms {
		return nil, fmt.Errorf("ans: .qgv: the model section claims %d symbols, at most %d", n, MaxSyms)
	}
	m.Model.NSym, m.Model.Escape = int(md[0])+1, int(md[1])-1
	for k := 0; k < m.Model.NSym; k++ {
		m.Model.Value[k], m.Model.Freq[k] = int8(md[2+2*k]), md[3+2*k]
	}
	units := m.Units()
	for i, dst := range []*[]uint64{&m.Offsets, &m.EscOffsets} {
		d := secs[1+i].Data
		if len(d) != 8*(units+1) {
			return nil, fmt.Errorf("ans: .qgv: section %q has %d bytes, want %d", tags[1+i][:], len(d), 8*(units+1))
		}
		*dst = make([]uint64, units+1)
		for j := range *dst {
			(*dst)[j] = binary.LittleEndian.Uint64(d[8*j:])
		}
	}
	wd := secs[3].Data
	if len(wd)%4 != 0 {
		return nil, fmt.Errorf("ans: .qgv: word section of %d bytes", len(wd))
	}
	m.Words = make([]uint32, len(wd)/4)
	for i := range m.Words {
		m.Words[i] = binary.LittleEndian.Uint32(wd[4*i:])
	}
	m.Esc = make([]int8, len(secs[4].Data))
	for i, b := range secs[4].Data {
		m.Esc[i] = int8(b)
	}
	return m, m.Validate()
}
