// The .qgv file container, version 1
//
// A .qgv file holds one quantized matrix: a header naming the format, the
// true shape and a table of sections, followed by the section bytes. Every
// integer is little-endian. Every CRC is CRC-32C (Castagnoli polynomial,
// as computed by hash/crc32 with crc32.MakeTable(crc32.Castagnoli)).
//
// Header, at offset 0 (NP = nparams, NS = nsections):
//
//	offset        size  field
//	0             8     magic "\x89QGV\r\n\x1a\n" (89 51 47 56 0d 0a 1a 0a)
//	8             4     u32 version, 1
//	12            4     u32 format id (0 invalid, 1 = Q4G128)
//	16            8     u64 rows, the true number of rows
//	24            8     u64 cols, the true number of columns
//	32            4     u32 nparams, at most 16
//	36            8*NP  nparams u64 format parameters
//	36+8NP        4     u32 nsections, at most 64
//	40+8NP        32*NS section table, nsections entries of 32 bytes
//	40+8NP+32NS   4     u32 CRC-32C of header bytes [0, 40+8NP+32NS)
//
// The header is H = 44 + 8*NP + 32*NS bytes long. Section table entry:
//
//	offset  size  field
//	0       4     tag, 4 bytes, each printable ASCII 0x21..0x7e; tags unique
//	4       4     u32 flags, must be 0
//	8       8     u64 offset of the section's first byte from file start
//	16      8     u64 length of the section in bytes (0 allowed)
//	24      4     u32 CRC-32C of the section's bytes
//	28      4     u32 reserved, must be 0
//
// Section data follows the header. Every section offset is a multiple of
// 64. Sections are stored in table order without overlap: the first starts
// at or after H, each later one at or after the end (offset + length) of
// the one before. Every byte between H and the first section and between
// two consecutive sections is padding and must be zero. The file ends
// exactly at the end of the last section (at H when there are none).
// Writers (this package) place every section at the smallest multiple of 64
// allowed, which makes the encoding of a File unique; readers accept any
// larger aligned offset, so a writer may align sections to pages for
// mapping, but reject nonzero padding and trailing bytes.
//
// The format id says how to interpret rows, cols, the parameters and the
// sections. Version 1 defines:
//
// Format 1, Q4G128 (see the package documentation): no parameters;
// 1 <= rows, cols <= MaxDim (and CheckDims); with PR = Pad128(rows),
// PC = Pad128(cols) and NB = (PR/128)*(PC/128), exactly three sections in
// this order:
//
//	"WGHT"  PR*PC/2 bytes   Q4G128.Weights
//	"SCAL"  NB*128*4 bytes  Q4G128.Scales, float32 IEEE 754 bits, u32 LE
//	"ZERO"  NB*64 bytes     Q4G128.Zeros
//
// Every scale must be finite.
//
// Later formats get new format ids; they store their own settings (bit
// width, group size, ...) as format parameters and define their own
// section tags. A change to the header or section table layout gets a new
// version number; readers reject versions they do not know before
// interpreting anything after the version field.
//
// A reader checks, before allocating anything proportional to a size read
// from the file: the magic, the version, nparams and nsections against
// their limits, the header CRC, zero flags and reserved fields, valid and
// unique tags, then every section's alignment, order and bounds against the
// file size. It then reads the padding (which must be zero) and the
// sections, verifying each section CRC, and finally the format's own rules.

package layout

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"strings"

	"github.com/qgemv/qgemv/internal/outpath"
)

// FileMagic is the 8-byte signature at offset 0 of every .qgv file.
const FileMagic = "\x89QGV\r\n\x1a\n"

// FileVersion is the .qgv container version this package reads and writes.
const FileVersion = 1

// Limits of the .qgv header.
const (
	MaxFileParams   = 16 // most format parameters in a header
	MaxFileSections = 64 // most sections in a header
	SectionAlign    = 64 // every section offset is a multiple of this
)

const (
	fixedHeaderLen  = 36 // magic through nparams
	sectionEntryLen = 32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FormatID identifies the matrix format stored in a .qgv file. Zero is
// invalid; new formats take new ids.
type FormatID uint32

// Formats defined by version 1 of the container.
const (
	// FormatQ4G128 is Q4G128: 4-bit weights, one float32 scale and one
	// 4-bit zero point per (row, 128-column group). It has no parameters.
	FormatQ4G128 FormatID = 1
	// FormatBits is Bits; parameters: bits per weight, group size (0 for
	// the whole row), 1 for float32 metadata else 0, and optionally flags
	// (bit 0: the zero slots hold offsets, w = q*s + o, Bits.Offsets; bit
	// 1: an act-order column permutation follows, Bits.Perm; a file with
	// neither has three parameters). Sections WRDS (the words, uint32),
	// SCAL and ZERO (GroupMeta order, binary16 or float32), then with flag
	// bit 1 PERM (Cols uint32 little-endian: stored column c holds source
	// column PERM[c]). Imported GPTQ act-order, Q4_1 and Q4_K matrices use
	// them.
	FormatBits FormatID = 2
	// FormatSparse12 is Sparse12; parameters: group size (0 for the whole
	// row), 1 for float32 metadata else 0; sections as FormatBits.
	FormatSparse12 FormatID = 3
	// FormatCodebook is layout/codebook's Codebook (registered by that
	// package; see its doc for parameters and sections).
	FormatCodebook FormatID = 4
	// FormatANS is layout/ans's entropy-coded int8 Matrix (registered by
	// that package; see its doc).
	FormatANS FormatID = 5
	// FormatInt8 is Int8, a plain int8 matrix; no parameters, one
	// section WGHT.
	FormatInt8 FormatID = 6
	// FormatANSBits is layout/ans's entropy-coded Bits matrix
	// (registered by that package; see its doc).
	FormatANSBits FormatID = 7
	// FormatGGML is layout/ggml's Matrix, llama.cpp's block types stored
	// as GGUF stores them (registered by that package; see its doc).
	FormatGGML FormatID = 8
)

// String returns the registered format's name, or FormatID(n) for an id
// no linked-in package registered.
func (id FormatID) String() string {
	if f, ok := LookupFormat(id); ok {
		return f.Name
	}
	return fmt.Sprintf("FormatID(%d)", uint32(id))
}

// Section is one tagged byte range of a .qgv file.
type Section struct {
	Tag  [4]byte // e.g. "WGHT"; printable ASCII, unique within a file
	Data []byte
}

// File is the decoded content of a .qgv container: the header fields and
// the sections, in file order. Offsets, CRCs and padding are not kept;
// WriteFile derives them.
type File struct {
	Version    uint32   // FileVersion
	Format     FormatID // how to interpret the rest
	Rows, Cols uint64   // true matrix dimensions
	Params     []uint64 // format parameters, at most MaxFileParams
	Sections   []Section
}

func errf(format string, args ...any) error {
	return fmt.Errorf("layout: .qgv: "+format, args...)
}

// fileHeaderLen returns the header length H for np parameters and ns
// sections.
func fileHeaderLen(np, ns int) int {
	return fixedHeaderLen + 8*np + 4 + sectionEntryLen*ns + 4
}

func alignSection(n int64) int64 {
	return (n + SectionAlign - 1) &^ (SectionAlign - 1)
}

func validTag(tag [4]byte) bool {
	for _, b := range tag {
		if b < 0x21 || b > 0x7e {
			return false
		}
	}
	return true
}

// check validates the fields of f that WriteFile relies on.
func (f *File) check() error {
	if f == nil {
		return errf("File is nil")
	}
	if f.Version != FileVersion {
		return errf("version %d unsupported (want %d)", f.Version, FileVersion)
	}
	if f.Format == 0 {
		return errf("format id 0 is invalid")
	}
	if len(f.Params) > MaxFileParams {
		return errf("%d format parameters, more than the limit %d", len(f.Params), MaxFileParams)
	}
	if len(f.Sections) > MaxFileSections {
		return errf("%d sections, more than the limit %d", len(f.Sections), MaxFileSections)
	}
	for i, s := range f.Sections {
		if !validTag(s.Tag) {
			return errf("section %d tag %q is not 4 printable ASCII characters", i, s.Tag[:])
		}
		for j := range i {
			if f.Sections[j].Tag == s.Tag {
				return errf("section tag %q appears twice (sections %d and %d)", s.Tag[:], j, i)
			}
		}
	}
	return nil
}

// countWriter counts the bytes written through it and turns short writes
// without an error into io.ErrShortWrite.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return n, err
}

// WriteFile validates f and writes it to w in the .qgv format, each
// section at the smallest allowed offset. It fails without writing
// anything if f is invalid: a version other than FileVersion, format id 0,
// too many parameters or sections, or a bad or repeated tag.
func WriteFile(w io.Writer, f *File) error {
	_, err := writeFile(w, f)
	return err
}

func writeFile(w io.Writer, f *File) (int64, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	hlen := fileHeaderLen(len(f.Params), len(f.Sections))
	le := binary.LittleEndian
	hdr := make([]byte, 0, hlen)
	hdr = append(hdr, FileMagic...)
	hdr = le.AppendUint32(hdr, f.Version)
	hdr = le.AppendUint32(hdr, uint32(f.Format))
	hdr = le.AppendUint64(hdr, f.Rows)
	hdr = le.AppendUint64(hdr, f.Cols)
	hdr = le.AppendUint32(hdr, uint32(len(f.Params)))
	for _, p := range f.Params {
		hdr = le.AppendUint64(hdr, p)
	}
	hdr = le.AppendUint32(hdr, uint32(len(f.Sections)))
	offsets := make([]int64, len(f.Sections))
	end := int64(hlen)
	for i, s := range f.Sections {
		off := alignSection(end)
		offsets[i] = off
		hdr = append(hdr, s.Tag[:]...)
		hdr = le.AppendUint32(hdr, 0) // flags
		hdr = le.AppendUint64(hdr, uint64(off))
		hdr = le.AppendUint64(hdr, uint64(len(s.Data)))
		hdr = le.AppendUint32(hdr, crc32.Checksum(s.Data, castagnoli))
		hdr = le.AppendUint32(hdr, 0) // reserved
		end = off + int64(len(s.Data))
	}
	hdr = le.AppendUint32(hdr, crc32.Checksum(hdr, castagnoli))

	cw := &countWriter{w: w}
	if _, err := cw.Write(hdr); err != nil {
		return cw.n, err
	}
	var zeros [SectionAlign]byte
	for i, s := range f.Sections {
		if pad := offsets[i] - cw.n; pad > 0 {
			if _, err := cw.Write(zeros[:pad]); err != nil {
				return cw.n, err
			}
		}
		if _, err := cw.Write(s.Data); err != nil {
			return cw.n, err
		}
	}
	return cw.n, nil
}

// readFull reads len(p) bytes at off, treating a short read as an error
// even if the reader did not report one.
func readFull(r io.ReaderAt, p []byte, off int64, what string) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return errf("reading %s (%d bytes at offset %d): %w", what, len(p), off, err)
}

// ReadFile reads and checks a .qgv container of size bytes from r. size
// must be the number of bytes r holds from offset 0; the file must end
// there.
//
// ReadFile checks the header (magic, version, counts, CRC, flags, tags)
// and every section's alignment, order and bounds against size before it
// allocates anything proportional to a size found in the file, so it
// allocates at most about size bytes in all, and it checks that the last
// byte before size can be read before reading any section. It then
// verifies that padding is zero and every section's CRC. A truncated,
// corrupted or hostile file yields an error naming the problem. Format
// rules (dimensions, section tags and lengths) are not checked here; see
// DecodeQ4G128.
func ReadFile(r io.ReaderAt, size int64) (*File, error) {
	if r == nil {
		return nil, errf("reader is nil")
	}
	if size < 0 {
		return nil, errf("negative file size %d", size)
	}
	le := binary.LittleEndian
	if size < fixedHeaderLen {
		return nil, errf("file is %d bytes, shorter than the %d-byte fixed header (truncated?)", size, fixedHeaderLen)
	}
	fixed := make([]byte, fixedHeaderLen)
	if err := readFull(r, fixed, 0, "fixed header"); err != nil {
		return nil, err
	}
	if string(fixed[:8]) != FileMagic {
		return nil, errf("bad magic %q, not a .qgv file", fixed[:8])
	}
	f := &File{
		Version: le.Uint32(fixed[8:]),
		Format:  FormatID(le.Uint32(fixed[12:])),
		Rows:    le.Uint64(fixed[16:]),
		Cols:    le.Uint64(fixed[24:]),
	}
	if f.Version != FileVersion {
		return nil, errf("unsupported version %d (this reader knows version %d)", f.Version, FileVersion)
	}
	np := le.Uint32(fixed[32:])
	if np > MaxFileParams {
		return nil, errf("header claims %d format parameters, more than the limit %d", np, MaxFileParams)
	}
	// Both counts are bounded, so the header lengths below cannot overflow.
	midLen := 8*int64(np) + 4
	if fixedHeaderLen+midLen > size {
		return nil, errf("file is %d bytes, too short for a header with %d format parameters (truncated?)", size, np)
	}
	mid := make([]byte, midLen)
	if err := readFull(r, mid, fixedHeaderLen, "format parameters"); err != nil {
		return nil, err
	}
	ns := le.Uint32(mid[midLen-4:])
	if ns > MaxFileSections {
		return nil, errf("header claims %d sections, more than the limit %d", ns, MaxFileSections)
	}
	tableOff := fixedHeaderLen + midLen
	tableLen := sectionEntryLen*int64(ns) + 4
	hlen := tableOff + tableLen
	if hlen > size {
		return nil, errf("file is %d bytes, too short for a %d-byte header with %d sections (truncated?)", size, hlen, ns)
	}
	table := make([]byte, tableLen)
	if err := readFull(r, table, tableOff, "section table"); err != nil {
		return nil, err
	}
	crc := crc32.Update(0, castagnoli, fixed)
	crc = crc32.Update(crc, castagnoli, mid)
	crc = crc32.Update(crc, castagnoli, table[:tableLen-4])
	if stored := le.Uint32(table[tableLen-4:]); stored != crc {
		return nil, errf("header CRC-32C mismatch: stored %08x, computed %08x (corrupted header)", stored, crc)
	}
	if f.Format == 0 {
		return nil, errf("format id 0 is invalid")
	}
	if np > 0 {
		f.Params = make([]uint64, np)
		for i := range f.Params {
			f.Params[i] = le.Uint64(mid[8*i:])
		}
	}

	type entry struct {
		off, length uint64
		crc         uint32
	}
	entries := make([]entry, ns)
	f.Sections = make([]Section, ns)
	for i := range entries {
		e := table[sectionEntryLen*i:]
		s := &f.Sections[i]
		copy(s.Tag[:], e[:4])
		if !validTag(s.Tag) {
			return nil, errf("section %d tag %q is not 4 printable ASCII characters", i, s.Tag[:])
		}
		for j := range i {
			if f.Sections[j].Tag == s.Tag {
				return nil, errf("section tag %q appears twice (sections %d and %d)", s.Tag[:], j, i)
			}
		}
		if flags := le.Uint32(e[4:]); flags != 0 {
			return nil, errf("section %q has flags %#x, must be 0", s.Tag[:], flags)
		}
		if res := le.Uint32(e[28:]); res != 0 {
			return nil, errf("section %q has reserved field %#x, must be 0", s.Tag[:], res)
		}
		entries[i] = entry{off: le.Uint64(e[8:]), length: le.Uint64(e[16:]), crc: le.Uint32(e[24:])}
	}

	// Bounds, alignment and order, all in uint64 without overflow:
	// off <= usize and length <= usize-off imply off+length <= usize.
	usize := uint64(size)
	end := uint64(hlen) // end of the previous item
	for i, e := range entries {
		tag := f.Sections[i].Tag[:]
		if e.off > usize {
			return nil, errf("section %q offset %d is beyond the file size %d (truncated?)", tag, e.off, size)
		}
		if e.length > usize-e.off {
			return nil, errf("section %q length %d exceeds file size %d (offset %d; truncated?)", tag, e.length, size, e.off)
		}
		if e.off%SectionAlign != 0 {
			return nil, errf("section %q offset %d is not a multiple of %d", tag, e.off, SectionAlign)
		}
		if e.off < end {
			if i == 0 {
				return nil, errf("section %q offset %d overlaps the %d-byte header", tag, e.off, hlen)
			}
			return nil, errf("section %q offset %d overlaps section %q, which ends at %d", tag, e.off, f.Sections[i-1].Tag[:], end)
		}
		if e.length > math.MaxInt {
			return nil, errf("section %q length %d does not fit in memory", tag, e.length)
		}
		end = e.off + e.length
	}
	if end != usize {
		return nil, errf("file is %d bytes but its last section ends at %d: %d trailing bytes", size, end, usize-end)
	}
	// Make sure the reader really holds size bytes before allocating
	// section buffers on the strength of size.
	if size > hlen {
		var last [1]byte
		if err := readFull(r, last[:], size-1, "last byte"); err != nil {
			return nil, err
		}
	}

	var pad []byte
	end = uint64(hlen)
	for i, e := range entries {
		tag := f.Sections[i].Tag[:]
		for at := end; at < e.off; {
			n := min(e.off-at, 4096)
			if uint64(cap(pad)) < n {
				pad = make([]byte, n)
			}
			p := pad[:n]
			if err := readFull(r, p, int64(at), fmt.Sprintf("padding before section %q", tag)); err != nil {
				return nil, err
			}
			for k, b := range p {
				if b != 0 {
					return nil, errf("padding byte at offset %d before section %q is %#02x, must be 0", at+uint64(k), tag, b)
				}
			}
			at += n
		}
		data := make([]byte, e.length)
		if err := readFull(r, data, int64(e.off), fmt.Sprintf("section %q", tag)); err != nil {
			return nil, err
		}
		if got := crc32.Checksum(data, castagnoli); got != e.crc {
			return nil, errf("section %q CRC-32C mismatch: stored %08x, computed %08x (corrupted data)", tag, e.crc, got)
		}
		f.Sections[i].Data = data
		end = e.off + e.length
	}
	return f, nil
}

var q4g128Tags = [3][4]byte{{'W', 'G', 'H', 'T'}, {'S', 'C', 'A', 'L'}, {'Z', 'E', 'R', 'O'}}

// DecodeQ4G128 interprets f as a Q4G128 matrix. It checks the version,
// the format id, that there are no parameters, the dimensions (CheckDims),
// that the sections are exactly WGHT, SCAL and ZERO in that order with the
// lengths the dimensions imply, and finally the matrix itself (Validate,
// which rejects non-finite scales).
//
// The matrix's Weights and Zeros share memory with the WGHT and ZERO
// sections of f; Scales is a new slice.
func DecodeQ4G128(f *File) (*Q4G128, error) {
	if f == nil {
		return nil, errf("File is nil")
	}
	if f.Version != FileVersion {
		return nil, errf("version %d unsupported (want %d)", f.Version, FileVersion)
	}
	if f.Format != FormatQ4G128 {
		return nil, errf("format is %v, want %v", f.Format, FormatQ4G128)
	}
	if len(f.Params) != 0 {
		return nil, errf("Q4G128 takes no format parameters, the file has %d", len(f.Params))
	}
	if f.Rows > MaxDim || f.Cols > MaxDim {
		return nil, errf("matrix shape %dx%d: dimensions above the limit %d", f.Rows, f.Cols, MaxDim)
	}
	rows, cols := int(f.Rows), int(f.Cols)
	if err := CheckDims(rows, cols); err != nil {
		return nil, err
	}
	m := &Q4G128{Rows: rows, Cols: cols, PRows: Pad128(rows), PCols: Pad128(cols)}
	nb := m.NumBlocks()
	want := [3]int64{int64(m.PRows) * int64(m.PCols) / 2, int64(nb) * GroupSize * 4, int64(nb) * GroupSize / 2}
	if len(f.Sections) != len(q4g128Tags) {
		tags := make([]string, len(f.Sections))
		for i, s := range f.Sections {
			tags[i] = fmt.Sprintf("%q", s.Tag[:])
		}
		return nil, errf("Q4G128 needs sections WGHT, SCAL, ZERO; the file has %d [%s]", len(f.Sections), strings.Join(tags, " "))
	}
	for i, s := range f.Sections {
		if s.Tag != q4g128Tags[i] {
			return nil, errf("section %d is %q, want %q (Q4G128 needs WGHT, SCAL, ZERO in this order)", i, s.Tag[:], q4g128Tags[i][:])
		}
		if int64(len(s.Data)) != want[i] {
			return nil, errf("section %q length %d, want %d for a %dx%d Q4G128 matrix", s.Tag[:], len(s.Data), want[i], rows, cols)
		}
	}
	m.Weights = f.Sections[0].Data
	scal := f.Sections[1].Data
	m.Scales = make([]float32, len(scal)/4)
	for i := range m.Scales {
		m.Scales[i] = math.Float32frombits(binary.LittleEndian.Uint32(scal[4*i:]))
	}
	m.Zeros = f.Sections[2].Data
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// file returns the container form of m. WGHT and ZERO share m's memory.
func (m *Q4G128) file() (*File, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	scal := make([]byte, 0, 4*len(m.Scales))
	for _, s := range m.Scales {
		scal = binary.LittleEndian.AppendUint32(scal, math.Float32bits(s))
	}
	return &File{
		Version: FileVersion,
		Format:  FormatQ4G128,
		Rows:    uint64(m.Rows),
		Cols:    uint64(m.Cols),
		Sections: []Section{
			{Tag: q4g128Tags[0], Data: m.Weights},
			{Tag: q4g128Tags[1], Data: scal},
			{Tag: q4g128Tags[2], Data: m.Zeros},
		},
	}, nil
}

// WriteTo validates m and writes it to w as a .qgv file. It returns the
// number of bytes written. It implements io.WriterTo.
func (m *Q4G128) WriteTo(w io.Writer) (int64, error) {
	f, err := m.file()
	if err != nil {
		return 0, err
	}
	return writeFile(w, f)
}

// ReadQ4G128 reads a Q4G128 matrix from the .qgv file of size bytes in r:
// ReadFile followed by DecodeQ4G128.
func ReadQ4G128(r io.ReaderAt, size int64) (*Q4G128, error) {
	f, err := ReadFile(r, size)
	if err != nil {
		return nil, err
	}
	return DecodeQ4G128(f)
}

// SaveQ4G128 writes m to the .qgv file path atomically: it writes a
// temporary file in the same directory, syncs it to stable storage, sets
// its mode to 0644 and renames it over path, then syncs the directory
// (best effort). On error path is left as it was and the temporary file is
// removed.
func SaveQ4G128(path string, m *Q4G128) (err error) {
	if err := m.Validate(); err != nil {
		return err
	}
	return saveAtomic(path, m)
}

// saveAtomic writes m's encoding to path atomically (see SaveQ4G128).
func saveAtomic(path string, m io.WriterTo) error {
	err := outpath.Write(path, true, func(w io.Writer) error {
		_, err := m.WriteTo(w)
		return err
	})
	if err != nil {
		return fmt.Errorf("layout: save: %w", err)
	}
	return nil
}

// LoadQ4G128 reads the Q4G128 matrix in the .qgv file path. Errors about
// the file's content are prefixed with path.
func LoadQ4G128(path string) (*Q4G128, error) {
	f, err := loadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := DecodeQ4G128(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// loadFile reads and checks the .qgv container at path.
func loadFile(path string) (*File, error) {
	// a regular file before it is opened: a FIFO's open waits for a writer
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, errf("not a regular file"))
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, errf("not a regular file"))
	}
	f, err := ReadFile(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}
