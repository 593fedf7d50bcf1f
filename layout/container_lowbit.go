package layout

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

var lowbitTags = [3][4]byte{{'W', 'R', 'D', 'S'}, {'S', 'C', 'A', 'L'}, {'Z', 'E', 'R', 'O'}}

// permTag names the optional fourth Bits section: the act-order column
// permutation, Cols little-endian uint32.
var permTag = [4]byte{'P', 'E', 'R', 'M'}

// Bits flag bits (the optional fourth parameter).
const (
	bitsFlagOffsets = 1 << iota
	bitsFlagPerm
	bitsFlagsKnown = bitsFlagOffsets | bitsFlagPerm
)

func b2u(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

// metaSections encodes a GroupMeta's scales and zeros, little-endian.
func (m *GroupMeta) metaSections() (scal, zero []byte) {
	if m.FP32Meta {
		for i := range m.Scales32 {
			scal = binary.LittleEndian.AppendUint32(scal, math.Float32bits(m.Scales32[i]))
			zero = binary.LittleEndian.AppendUint32(zero, math.Float32bits(m.Zeros32[i]))
		}
		return scal, zero
	}
	for i := range m.Scales16 {
		scal = binary.LittleEndian.AppendUint16(scal, uint16(m.Scales16[i]))
		zero = binary.LittleEndian.AppendUint16(zero, uint16(m.Zeros16[i]))
	}
	return scal, zero
}

// decodeMeta fills m (allocated by the caller) from its sections.
func (m *GroupMeta) decodeMeta(scal, zero []byte) {
	if m.FP32Meta {
		for i := range m.Scales32 {
			m.Scales32[i] = math.Float32frombits(binary.LittleEndian.Uint32(scal[4*i:]))
			m.Zeros32[i] = math.Float32frombits(binary.LittleEndian.Uint32(zero[4*i:]))
		}
		return
	}
	for i := range m.Scales16 {
		m.Scales16[i] = FP16(binary.LittleEndian.Uint16(scal[2*i:]))
		m.Zeros16[i] = FP16(binary.LittleEndian.Uint16(zero[2*i:]))
	}
}

func wordBytes(w []uint32) []byte {
	out := make([]byte, 0, 4*len(w))
	for _, v := range w {
		out = binary.LittleEndian.AppendUint32(out, v)
	}
	return out
}

// lowbitFile builds the container of a Bits or Sparse12 matrix.
func lowbitFile(format FormatID, rows, cols int, params []uint64, words []uint32, meta *GroupMeta) *File {
	scal, zero := meta.metaSections()
	return &File{Version: FileVersion, Format: format, Rows: uint64(rows), Cols: uint64(cols), Params: params,
		Sections: []Section{{lowbitTags[0], wordBytes(words)}, {lowbitTags[1], scal}, {lowbitTags[2], zero}}}
}

// WriteTo writes b as a .qgv file (format Bits).
func (b *Bits) WriteTo(w io.Writer) (int64, error) {
	if err := b.Validate(); err != nil {
		return 0, err
	}
	return writeFile(w, b.file())
}

// WriteTo writes m as a .qgv file (format Sparse12).
func (m *Sparse12) WriteTo(w io.Writer) (int64, error) {
	if err := m.Validate(); err != nil {
		return 0, err
	}
	g := m.G
	if m.WholeRow {
		g = 0
	}
	return writeFile(w, lowbitFile(FormatSparse12, m.Rows, m.Cols, []uint64{uint64(g), b2u(m.FP32Meta)}, m.Words, &m.GroupMeta))
}

// checkLowbitSections checks tags and lengths against the geometry before
// anything proportional to the claimed shape is allocated.
func checkLowbitSections(f *File, name string, words, metas int64, fp32 bool, perm int64) error {
	mb := int64(2)
	if fp32 {
		mb = 4
	}
	want := []int64{4 * words, mb * metas, mb * metas}
	tags := lowbitTags[:]
	if words < 0 { // a header without words (DecodeBitsHeader)
		want, tags = want[1:], tags[1:]
	}
	if perm >= 0 {
		want = append(want, 4*perm)
		tags = append(tags, permTag)
	}
	if len(f.Sections) != len(want) {
		names := "WRDS, SCAL, ZERO"
		if words < 0 {
			names = "SCAL, ZERO"
		}
		if perm >= 0 {
			names += ", PERM"
		}
		return errf("%s needs %d sections (%s); the file has %d", name, len(want), names, len(f.Sections))
	}
	for i, s := range f.Sections {
		if s.Tag != tags[i] {
			return errf("section %d is %q, want %q (%s needs [WRDS, ]SCAL, ZERO[, PERM] in this order)", i, s.Tag[:], tags[i][:], name)
		}
		if int64(len(s.Data)) != want[i] {
			return errf("section %q length %d, want %d for a %dx%d %s matrix", s.Tag[:], len(s.Data), want[i], f.Rows, f.Cols, name)
		}
	}
	return nil
}

func fileDims(f *File) (int, int, error) {
	if f.Version != FileVersion {
		return 0, 0, errf("version %d unsupported (want %d)", f.Version, FileVersion)
	}
	if f.Rows > MaxDim || f.Cols > MaxDim {
		return 0, 0, errf("matrix shape %dx%d: dimensions above the limit %d", f.Rows, f.Cols, MaxDim)
	}
	return int(f.Rows), int(f.Cols), CheckDims(int(f.Rows), int(f.Cols))
}

func flagParam(v uint64, what string) (bool, error) {
	if v > 1 {
		return false, errf("%s parameter is %d, want 0 or 1", what, v)
	}
	return v == 1, nil
}

// DecodeBits builds a Bits matrix from a checked container.
func DecodeBits(f *File) (*Bits, error) {
	if f == nil || f.Format != FormatBits {
		return nil, errf("not a Bits file")
	}
	return decodeBits(f, true, 0)
}

// DecodeBitsHeader builds a Bits matrix without its words (Words nil,
// checked with ValidateHeader) from a container of format f.Format whose
// parameters and first sections are a Bits file's without WRDS (SCAL,
// ZERO[, PERM]; BitsHeaderFile writes them), followed by extra sections
// of the caller's, which it leaves alone.
func DecodeBitsHeader(f *File, extra int) (*Bits, error) {
	if f == nil || extra < 0 || len(f.Sections) < extra {
		return nil, errf("not a Bits-header file")
	}
	g := *f
	g.Sections = f.Sections[:len(f.Sections)-extra]
	return decodeBits(&g, false, extra)
}

// BitsHeaderFile returns the container of b without its words: b's
// parameters and the sections SCAL, ZERO[, PERM], for format id (a format
// that stores the words in another form appends its own sections).
func (b *Bits) BitsHeaderFile(id FormatID) *File {
	f := b.file()
	f.Format = id
	f.Sections = f.Sections[1:]
	return f
}

// file builds b's container.
func (b *Bits) file() *File {
	g := b.G
	if b.WholeRow {
		g = 0
	}
	params := []uint64{uint64(b.N), uint64(g), b2u(b.FP32Meta)}
	flags := b2u(b.Offsets)*bitsFlagOffsets | b2u(b.Perm != nil)*bitsFlagPerm
	if flags != 0 { // files without flags stay as version 1 wrote them
		params = append(params, flags)
	}
	f := lowbitFile(FormatBits, b.Rows, b.Cols, params, b.Words, &b.GroupMeta)
	if b.Perm != nil {
		var pb []byte
		for _, p := range b.Perm {
			pb = binary.LittleEndian.AppendUint32(pb, uint32(p))
		}
		f.Sections = append(f.Sections, Section{permTag, pb})
	}
	return f
}

// decodeBits decodes a Bits file, or with !withWords its header (the
// file's sections lack WRDS; extra only names them in errors).
func decodeBits(f *File, withWords bool, extra int) (*Bits, error) {
	rows, cols, err := fileDims(f)
	if err != nil {
		return nil, err
	}
	if len(f.Params) != 3 && len(f.Params) != 4 {
		return nil, errf("Bits takes 3 or 4 parameters (bits, group, float32 metadata[, flags]), the file has %d", len(f.Params))
	}
	var flags uint64
	if len(f.Params) == 4 {
		if flags = f.Params[3]; flags&^bitsFlagsKnown != 0 {
			return nil, errf("Bits flags %#x: unknown bits %#x", flags, flags&^bitsFlagsKnown)
		}
	}
	if f.Params[0] > 8 || f.Params[1] > 256 {
		return nil, errf("Bits parameters %d bits, group %d out of range", f.Params[0], f.Params[1])
	}
	fp32, err := flagParam(f.Params[2], "float32-metadata")
	if err != nil {
		return nil, err
	}
	n, g := int(f.Params[0]), int(f.Params[1])
	prows, pcols, group, err := BitsShape(rows, cols, n, g)
	if err != nil {
		return nil, err
	}
	words := int64(prows) * int64(32*pcols/BitsChunk(n))
	if !withWords {
		words = -1
	}
	perm := int64(-1)
	if flags&bitsFlagPerm != 0 {
		perm = int64(cols)
	}
	if err := checkLowbitSections(f, fmt.Sprintf("Bits%d", n), words, int64(pcols/group)*int64(prows), fp32, perm); err != nil {
		return nil, err
	}
	var b *Bits
	if withWords {
		b, err = NewBits(rows, cols, n, g, fp32)
	} else {
		b, err = newBitsHeader(rows, cols, n, g, fp32)
	}
	if err != nil {
		return nil, err
	}
	b.Offsets = flags&bitsFlagOffsets != 0
	sec := f.Sections
	if withWords {
		for i := range b.Words {
			b.Words[i] = binary.LittleEndian.Uint32(sec[0].Data[4*i:])
		}
		sec = sec[1:]
	}
	if perm >= 0 {
		b.Perm = make([]int32, cols)
		for i := range b.Perm {
			b.Perm[i] = int32(binary.LittleEndian.Uint32(sec[2].Data[4*i:]))
		}
	}
	b.decodeMeta(sec[0].Data, sec[1].Data)
	if withWords {
		err = b.Validate()
	} else {
		err = b.ValidateHeader()
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// DecodeSparse12 builds a Sparse12 matrix from a checked container.
func DecodeSparse12(f *File) (*Sparse12, error) {
	if f == nil || f.Format != FormatSparse12 {
		return nil, errf("not a Sparse12 file")
	}
	rows, cols, err := fileDims(f)
	if err != nil {
		return nil, err
	}
	if len(f.Params) != 2 {
		return nil, errf("Sparse12 takes 2 parameters (group, float32 metadata), the file has %d", len(f.Params))
	}
	if f.Params[0] > 256 {
		return nil, errf("Sparse12 group %d out of range", f.Params[0])
	}
	fp32, err := flagParam(f.Params[1], "float32-metadata")
	if err != nil {
		return nil, err
	}
	g := int(f.Params[0])
	prows, pcols, group, err := Sparse12Shape(rows, cols, g)
	if err != nil {
		return nil, err
	}
	if err := checkLowbitSections(f, "Sparse12", int64(prows)*int64(pcols/8), int64(pcols/group)*int64(prows), fp32, -1); err != nil {
		return nil, err
	}
	m, err := NewSparse12(rows, cols, g, fp32)
	if err != nil {
		return nil, err
	}
	for i := range m.Words {
		m.Words[i] = binary.LittleEndian.Uint32(f.Sections[0].Data[4*i:])
	}
	m.decodeMeta(f.Sections[1].Data, f.Sections[2].Data)
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Decode builds the matrix of any registered format from a container.
func Decode(f *File) (Matrix, error) {
	if f == nil {
		return nil, errf("File is nil")
	}
	if fm, ok := LookupFormat(f.Format); ok {
		return fm.Decode(f)
	}
	return nil, errf("format %v is not supported by this version (a format package not linked in?)", f.Format)
}

// SaveMatrix writes any supported matrix to path atomically.
func SaveMatrix(path string, m interface {
	Matrix
	io.WriterTo
}) error {
	if m == nil {
		return fmt.Errorf("layout: save %s: the matrix is nil", path)
	}
	if err := m.Validate(); err != nil {
		return err
	}
	return saveAtomic(path, m)
}

// LoadMatrix reads the matrix of any supported format from path.
func LoadMatrix(path string) (Matrix, error) {
	f, err := loadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
