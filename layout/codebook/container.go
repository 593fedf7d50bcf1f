package codebook

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/qgemv/qgemv/layout"
)

var tags = [3][4]byte{{'C', 'O', 'D', 'E'}, {'C', 'E', 'N', 'T'}, {'S', 'C', 'A', 'L'}}

type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func halfBytes(v []layout.FP16) []byte {
	out := make([]byte, 0, 2*len(v))
	for _, h := range v {
		out = binary.LittleEndian.AppendUint16(out, uint16(h))
	}
	return out
}

func floatBytes(v []float32) []byte {
	out := make([]byte, 0, 4*len(v))
	for _, f := range v {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(f))
	}
	return out
}

// WriteTo writes c as a .qgv file (format 4).
func (c *Codebook) WriteTo(w io.Writer) (int64, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	g := c.G
	if c.WholeRow {
		g = 0
	}
	fp := uint64(0)
	cent, scal := halfBytes(c.Centroids16), halfBytes(c.Scales16)
	if c.FP32 {
		fp, cent, scal = 1, floatBytes(c.Centroids32), floatBytes(c.Scales32)
	}
	words := make([]byte, 0, 4*len(c.Words))
	for _, v := range c.Words {
		words = binary.LittleEndian.AppendUint32(words, v)
	}
	f := &layout.File{Version: layout.FileVersion, Format: layout.FormatCodebook, Rows: uint64(c.Rows), Cols: uint64(c.Cols),
		Params:   []uint64{uint64(c.M), uint64(c.V), uint64(c.B), uint64(g), fp},
		Sections: []layout.Section{{Tag: tags[0], Data: words}, {Tag: tags[1], Data: cent}, {Tag: tags[2], Data: scal}}}
	cw := &counter{w: w}
	err := layout.WriteFile(cw, f)
	return cw.n, err
}

// Decode builds a codebook matrix from a checked container; every length
// is checked against the parameters before anything is allocated.
func Decode(f *layout.File) (*Codebook, error) {
	if f == nil || f.Format != layout.FormatCodebook {
		return nil, fmt.Errorf("codebook: not a codebook file")
	}
	if f.Version != layout.FileVersion {
		return nil, fmt.Errorf("codebook: .qgv version %d unsupported", f.Version)
	}
	if len(f.Params) != 5 {
		return nil, fmt.Errorf("codebook: .qgv: %d parameters, want 5 (m, v, b, group, float32)", len(f.Params))
	}
	for i, p := range f.Params {
		if p > 1<<16 {
			return nil, fmt.Errorf("codebook: .qgv: parameter %d is %d", i, p)
		}
	}
	if f.Params[4] > 1 {
		return nil, fmt.Errorf("codebook: .qgv: float32 flag %d, want 0 or 1", f.Params[4])
	}
	if f.Rows > layout.MaxDim || f.Cols > layout.MaxDim {
		return nil, fmt.Errorf("codebook: .qgv: shape %dx%d above the limit %d", f.Rows, f.Cols, layout.MaxDim)
	}
	m, v, b, g, fp32 := int(f.Params[0]), int(f.Params[1]), int(f.Params[2]), int(f.Params[3]), f.Params[4] == 1
	prows, pcols, group, err := Shape(int(f.Rows), int(f.Cols), m, v, b, g)
	if err != nil {
		return nil, err
	}
	mb := int64(2)
	if fp32 {
		mb = 4
	}
	nv := int64(pcols / v)
	want := []int64{4 * (int64(prows)/32*int64(m)*nv*int64(b)/32*32 + 32), mb * int64(m*(1<<b)*v), mb * int64(pcols/group) * int64(prows)}
	if len(f.Sections) != 3 {
		return nil, fmt.Errorf("codebook: .qgv: %d sections, want CODE, CENT, SCAL", len(f.Sections))
	}
	for i, s := range f.Sections {
		if s.Tag != tags[i] {
			return nil, fmt.Errorf("codebook: .qgv: section %d is %q, want %q", i, s.Tag[:], tags[i][:])
		}
		if int64(len(s.Data)) != want[i] {
			return nil, fmt.Errorf("codebook: .qgv: section %q has %d bytes, want %d", s.Tag[:], len(s.Data), want[i])
		}
	}
	c, err := New(int(f.Rows), int(f.Cols), m, v, b, g, fp32)
	if err != nil {
		return nil, err
	}
	for i := range c.Words {
		c.Words[i] = binary.LittleEndian.Uint32(f.Sections[0].Data[4*i:])
	}
	cent, scal := f.Sections[1].Data, f.Sections[2].Data
	if fp32 {
		for i := range c.Centroids32 {
			c.Centroids32[i] = math.Float32frombits(binary.LittleEndian.Uint32(cent[4*i:]))
		}
		for i := range c.Scales32 {
			c.Scales32[i] = math.Float32frombits(binary.LittleEndian.Uint32(scal[4*i:]))
		}
	} else {
		for i := range c.Centroids16 {
			c.Centroids16[i] = layout.FP16(binary.LittleEndian.Uint16(cent[2*i:]))
		}
		for i := range c.Scales16 {
			c.Scales16[i] = layout.FP16(binary.LittleEndian.Uint16(scal[2*i:]))
		}
	}
	return c, c.Validate()
}
