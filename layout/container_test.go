package layout

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
)

// randQ4G128 returns a matrix with random weight and zero bytes (padding
// included) and random finite scales of every kind: negative, zero,
// subnormal, huge.
func randQ4G128(t testing.TB, rng *rand.Rand, rows, cols int) *Q4G128 {
	t.Helper()
	m, err := NewQ4G128(rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Weights {
		m.Weights[i] = byte(rng.Uint32())
	}
	for i := range m.Zeros {
		m.Zeros[i] = byte(rng.Uint32())
	}
	for i := range m.Scales {
		for {
			s := math.Float32frombits(rng.Uint32())
			if !math.IsNaN(float64(s)) && !math.IsInf(float64(s), 0) {
				m.Scales[i] = s
				break
			}
		}
	}
	return m
}

// diffQ4G128 returns "" if a and b are identical (scales compared by bits)
// and otherwise a description of the first difference.
func diffQ4G128(a, b *Q4G128) string {
	if a.Rows != b.Rows || a.Cols != b.Cols || a.PRows != b.PRows || a.PCols != b.PCols {
		return fmt.Sprintf("shape %dx%d (%dx%d) vs %dx%d (%dx%d)", a.Rows, a.Cols, a.PRows, a.PCols, b.Rows, b.Cols, b.PRows, b.PCols)
	}
	if !bytes.Equal(a.Weights, b.Weights) {
		return "weights differ"
	}
	if !bytes.Equal(a.Zeros, b.Zeros) {
		return "zeros differ"
	}
	if len(a.Scales) != len(b.Scales) {
		return fmt.Sprintf("%d vs %d scales", len(a.Scales), len(b.Scales))
	}
	for i := range a.Scales {
		if math.Float32bits(a.Scales[i]) != math.Float32bits(b.Scales[i]) {
			return fmt.Sprintf("scale %d: %v vs %v", i, a.Scales[i], b.Scales[i])
		}
	}
	return ""
}

// diffFile is diffQ4G128 for containers.
func diffFile(a, b *File) string {
	if a.Version != b.Version || a.Format != b.Format || a.Rows != b.Rows || a.Cols != b.Cols {
		return fmt.Sprintf("header %d %v %dx%d vs %d %v %dx%d", a.Version, a.Format, a.Rows, a.Cols, b.Version, b.Format, b.Rows, b.Cols)
	}
	if len(a.Params) != len(b.Params) || len(a.Sections) != len(b.Sections) {
		return fmt.Sprintf("%d params %d sections vs %d params %d sections", len(a.Params), len(a.Sections), len(b.Params), len(b.Sections))
	}
	for i := range a.Params {
		if a.Params[i] != b.Params[i] {
			return fmt.Sprintf("param %d: %d vs %d", i, a.Params[i], b.Params[i])
		}
	}
	for i := range a.Sections {
		if a.Sections[i].Tag != b.Sections[i].Tag || !bytes.Equal(a.Sections[i].Data, b.Sections[i].Data) {
			return fmt.Sprintf("section %d (%q vs %q) differs", i, a.Sections[i].Tag[:], b.Sections[i].Tag[:])
		}
	}
	return ""
}

func encodeQ4G128(t testing.TB, m *Q4G128) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := m.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d bytes", n, buf.Len())
	}
	return buf.Bytes()
}

func readQ4G128Bytes(b []byte) (*Q4G128, error) {
	return ReadQ4G128(bytes.NewReader(b), int64(len(b)))
}

func tag(s string) [4]byte {
	var t [4]byte
	copy(t[:], s)
	return t
}

// smallFile is a valid 1x1 Q4G128 file (8960 bytes).
func smallFile(t testing.TB) []byte {
	t.Helper()
	m, err := QuantizeQ4G128([]float32{0.75}, 1, 1, MinMax)
	if err != nil {
		t.Fatal(err)
	}
	return encodeQ4G128(t, m)
}

func TestQGVRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sh := range [][2]int{{1, 1}, {127, 129}, {256, 384}, {128, 128}, {300, 1}} {
		rows, cols := sh[0], sh[1]
		m := randQ4G128(t, rng, rows, cols)
		b := encodeQ4G128(t, m)
		// Layout: header 140 bytes, sections at the next multiples of 64.
		pr, pc := Pad128(rows), Pad128(cols)
		nb := (pr / 128) * (pc / 128)
		wOff := int64(192)
		sOff := alignSection(wOff + int64(pr*pc/2))
		zOff := alignSection(sOff + int64(nb*512))
		if want := zOff + int64(nb*64); int64(len(b)) != want {
			t.Errorf("%dx%d: file is %d bytes, want %d", rows, cols, len(b), want)
		}
		got, err := readQ4G128Bytes(b)
		if err != nil {
			t.Fatalf("%dx%d: %v", rows, cols, err)
		}
		if d := diffQ4G128(m, got); d != "" {
			t.Errorf("%dx%d: round trip: %s", rows, cols, d)
		}
		// Encoding is deterministic.
		if b2 := encodeQ4G128(t, got); !bytes.Equal(b, b2) {
			t.Errorf("%dx%d: re-encoding differs", rows, cols)
		}
	}
}

// TestQGVGoldenHeader pins the byte layout of the spec.
func TestQGVGoldenHeader(t *testing.T) {
	m, err := NewQ4G128(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	m.Scales[0] = 1
	b := encodeQ4G128(t, m)
	le := binary.LittleEndian
	if len(b) != 8960 {
		t.Fatalf("1x1 file is %d bytes, want 8960", len(b))
	}
	if string(b[:8]) != "\x89QGV\r\n\x1a\n" {
		t.Errorf("magic %q", b[:8])
	}
	check := func(name string, got, want uint64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	check("version", uint64(le.Uint32(b[8:])), 1)
	check("format", uint64(le.Uint32(b[12:])), 1)
	check("rows", le.Uint64(b[16:]), 1)
	check("cols", le.Uint64(b[24:]), 1)
	check("nparams", uint64(le.Uint32(b[32:])), 0)
	check("nsections", uint64(le.Uint32(b[36:])), 3)
	secs := []struct {
		tag         string
		off, length uint64
	}{{"WGHT", 192, 8192}, {"SCAL", 8384, 512}, {"ZERO", 8896, 64}}
	for i, s := range secs {
		e := b[40+32*i:]
		if string(e[:4]) != s.tag {
			t.Errorf("section %d tag %q, want %q", i, e[:4], s.tag)
		}
		check(s.tag+" flags", uint64(le.Uint32(e[4:])), 0)
		check(s.tag+" offset", le.Uint64(e[8:]), s.off)
		check(s.tag+" length", le.Uint64(e[16:]), s.length)
		check(s.tag+" crc", uint64(le.Uint32(e[24:])), uint64(crc32.Checksum(b[s.off:s.off+s.length], crc32.MakeTable(crc32.Castagnoli))))
		check(s.tag+" reserved", uint64(le.Uint32(e[28:])), 0)
	}
	check("header crc", uint64(le.Uint32(b[136:])), uint64(crc32.Checksum(b[:136], crc32.MakeTable(crc32.Castagnoli))))
	for i := 140; i < 192; i++ {
		if b[i] != 0 {
			t.Fatalf("padding byte %d is %#x", i, b[i])
		}
	}
	check("scale[0] bits", uint64(le.Uint32(b[8384:])), uint64(math.Float32bits(1)))
}

func TestQGVFileRoundTrip(t *testing.T) {
	files := []*File{
		{Version: 1, Format: 7, Rows: 3, Cols: 1 << 40},
		{Version: 1, Format: FormatQ4G128, Params: []uint64{4, 128, math.MaxUint64}, Sections: []Section{
			{Tag: tag("ABCD"), Data: []byte{1, 2, 3}},
			{Tag: tag("empt"), Data: nil},
			{Tag: tag("x-y!"), Data: bytes.Repeat([]byte{0xff}, 64)},
			{Tag: tag("~~~~"), Data: bytes.Repeat([]byte{0xaa}, 65)},
		}},
		{Version: 1, Format: 2, Params: make([]uint64, MaxFileParams), Sections: func() []Section {
			s := make([]Section, MaxFileSections)
			for i := range s {
				s[i] = Section{Tag: tag(fmt.Sprintf("S%03d", i)), Data: bytes.Repeat([]byte{byte(i)}, i)}
			}
			return s
		}()},
	}
	for i, f := range files {
		var buf bytes.Buffer
		if err := WriteFile(&buf, f); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
		got, err := ReadFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
		if d := diffFile(f, got); d != "" {
			t.Errorf("file %d: %s", i, d)
		}
		if _, err := DecodeQ4G128(got); err == nil {
			t.Errorf("file %d: DecodeQ4G128 accepted a non-Q4G128 file", i)
		}
	}
}

func TestQGVWriteFileInvalid(t *testing.T) {
	ok := func() *File { return &File{Version: 1, Format: 1, Sections: []Section{{Tag: tag("WGHT")}}} }
	cases := []struct {
		name string
		mod  func(*File) *File
		want string
	}{
		{"nil", func(*File) *File { return nil }, "nil"},
		{"version", func(f *File) *File { f.Version = 2; return f }, "version 2"},
		{"format0", func(f *File) *File { f.Format = 0; return f }, "format id 0"},
		{"params", func(f *File) *File { f.Params = make([]uint64, 17); return f }, "17 format parameters"},
		{"sections", func(f *File) *File { f.Sections = make([]Section, 65); return f }, "65 sections"},
		{"tag", func(f *File) *File { f.Sections[0].Tag = tag("WG T"); return f }, "tag"},
		{"duptag", func(f *File) *File { f.Sections = append(f.Sections, f.Sections[0]); return f }, "twice"},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		err := WriteFile(&buf, c.mod(ok()))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: wrote %d bytes of an invalid file", c.name, buf.Len())
		}
	}
	// An invalid matrix is not written either.
	m, _ := NewQ4G128(2, 2)
	m.Scales[3] = float32(math.Inf(1))
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err == nil || buf.Len() != 0 {
		t.Errorf("WriteTo of a matrix with an infinite scale: err %v, %d bytes", err, buf.Len())
	}
}

// TestQGVTruncated reads every proper prefix of a valid file.
func TestQGVTruncated(t *testing.T) {
	b := smallFile(t)
	for n := range len(b) {
		if _, err := ReadFile(bytes.NewReader(b[:n]), int64(n)); err == nil {
			t.Fatalf("prefix of %d of %d bytes: no error", n, len(b))
		}
		// The same prefix with size claiming the whole file.
		if _, err := ReadFile(bytes.NewReader(b[:n]), int64(len(b))); err == nil {
			t.Fatalf("prefix of %d of %d bytes, full size claimed: no error", n, len(b))
		}
	}
	if _, err := readQ4G128Bytes(b); err != nil {
		t.Fatal(err)
	}
}

// TestQGVBitFlips flips every bit of a small valid file. Every byte is
// covered by a CRC or is padding, which readers check is zero, so no flip
// can go unnoticed: each must be an error (not merely a matrix identical
// to the original).
func TestQGVBitFlips(t *testing.T) {
	b := smallFile(t)
	c := bytes.Clone(b)
	for i := range c {
		for bit := range 8 {
			c[i] ^= 1 << bit
			m, err := readQ4G128Bytes(c)
			if err == nil {
				t.Fatalf("byte %d bit %d flipped: no error (matrix %dx%d)", i, bit, m.Rows, m.Cols)
			}
			c[i] = b[i]
		}
	}
	// Appending anything is an error too.
	if _, err := readQ4G128Bytes(append(bytes.Clone(b), 0)); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Errorf("trailing byte: %v", err)
	}
}

// rawEntry is a section table entry with every field free.
type rawEntry struct {
	tag           string
	flags         uint32
	off, length   uint64
	crc, reserved uint32
}

// rawFile builds a file with arbitrary header fields, a correct header CRC
// and the given body after the header.
func rawFile(version, format uint32, rows, cols uint64, params []uint64, nsections uint32, entries []rawEntry, body []byte) []byte {
	le := binary.LittleEndian
	var h []byte
	h = append(h, FileMagic...)
	h = le.AppendUint32(h, version)
	h = le.AppendUint32(h, format)
	h = le.AppendUint64(h, rows)
	h = le.AppendUint64(h, cols)
	h = le.AppendUint32(h, uint32(len(params)))
	for _, p := range params {
		h = le.AppendUint64(h, p)
	}
	h = le.AppendUint32(h, nsections)
	for _, e := range entries {
		h = append(h, e.tag...)
		h = le.AppendUint32(h, e.flags)
		h = le.AppendUint64(h, e.off)
		h = le.AppendUint64(h, e.length)
		h = le.AppendUint32(h, e.crc)
		h = le.AppendUint32(h, e.reserved)
	}
	h = le.AppendUint32(h, crc32.Checksum(h, castagnoli))
	return append(h, body...)
}

// fixCRCs returns a copy of b with the section CRCs (of the sections that
// lie within b) and the header CRC recomputed, or nil if b does not have a
// parseable header. It lets tests and the fuzzer reach the checks behind
// the CRCs.
func fixCRCs(b []byte) []byte {
	le := binary.LittleEndian
	if len(b) < fixedHeaderLen {
		return nil
	}
	np := uint64(le.Uint32(b[32:]))
	if np > MaxFileParams {
		return nil
	}
	nsOff := fixedHeaderLen + 8*np
	if uint64(len(b)) < nsOff+4 {
		return nil
	}
	ns := uint64(le.Uint32(b[nsOff:]))
	if ns > MaxFileSections {
		return nil
	}
	crcOff := nsOff + 4 + 32*ns
	if uint64(len(b)) < crcOff+4 {
		return nil
	}
	c := bytes.Clone(b)
	for i := range ns {
		e := c[nsOff+4+32*i:]
		off, n := le.Uint64(e[8:]), le.Uint64(e[16:])
		if off <= uint64(len(c)) && n <= uint64(len(c))-off {
			le.PutUint32(e[24:], crc32.Checksum(c[off:off+n], castagnoli))
		}
	}
	le.PutUint32(c[crcOff:], crc32.Checksum(c[:crcOff], castagnoli))
	return c
}

// patch returns a copy of b modified by f, with its CRCs repaired where
// the header can be parsed.
func patch(b []byte, f func(c []byte)) []byte {
	c := bytes.Clone(b)
	f(c)
	if fixed := fixCRCs(c); fixed != nil {
		return fixed
	}
	return c
}

func TestQGVHostile(t *testing.T) {
	le := binary.LittleEndian
	good := smallFile(t)
	entry := func(c []byte, i int) []byte { return c[40+32*i : 72+32*i] }
	nanFile := func() []byte {
		m, _ := NewQ4G128(1, 1)
		m.Scales[0] = 1
		b := encodeQ4G128(t, m)
		le.PutUint32(b[8384:], 0x7fc00000)
		return fixCRCs(b)
	}
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "shorter than"},
		{"magic", patch(good, func(c []byte) { c[1] = 'q' }), "bad magic"},
		{"png", append([]byte("\x89PNG\r\n\x1a\n"), good[8:]...), "bad magic"},
		{"version0", patch(good, func(c []byte) { le.PutUint32(c[8:], 0) }), "unsupported version 0"},
		{"version2", patch(good, func(c []byte) { le.PutUint32(c[8:], 2) }), "unsupported version 2"},
		{"format0", patch(good, func(c []byte) { le.PutUint32(c[12:], 0) }), "format id 0"},
		{"format99", patch(good, func(c []byte) { le.PutUint32(c[12:], 99) }), "format is FormatID(99), want Q4G128"},
		{"huge nparams", patch(good, func(c []byte) { le.PutUint32(c[32:], math.MaxUint32) }), "4294967295 format parameters"},
		{"nparams 17", patch(good, func(c []byte) { le.PutUint32(c[32:], 17) }), "17 format parameters"},
		{"params for Q4G128", rawFile(1, 1, 1, 1, []uint64{4}, 0, nil, nil), "no format parameters"},
		{"huge nsections", patch(good, func(c []byte) { le.PutUint32(c[36:], math.MaxUint32) }), "4294967295 sections"},
		{"nsections 65", rawFile(1, 1, 1, 1, nil, 65, nil, nil), "65 sections"},
		{"nsections beyond file", rawFile(1, 1, 1, 1, nil, 64, nil, nil), "too short for a 2092-byte header"},
		{"sections from data", patch(good, func(c []byte) { le.PutUint32(c[36:], 64) }), "section 3 tag"},
		{"header crc", func() []byte { c := bytes.Clone(good); c[136]++; return c }(), "header CRC-32C mismatch"},
		{"header byte", func() []byte { c := bytes.Clone(good); c[20]++; return c }(), "header CRC-32C mismatch"},
		{"section crc", func() []byte { c := bytes.Clone(good); c[8900]++; return c }(), `section "ZERO" CRC-32C mismatch`},
		{"flags", patch(good, func(c []byte) { le.PutUint32(entry(c, 1)[4:], 1) }), `section "SCAL" has flags 0x1`},
		{"reserved", patch(good, func(c []byte) { le.PutUint32(entry(c, 2)[28:], 1<<31) }), `section "ZERO" has reserved field`},
		{"bad tag", patch(good, func(c []byte) { copy(entry(c, 0), "WG\x00T") }), "tag"},
		{"dup tag", patch(good, func(c []byte) { copy(entry(c, 2), "WGHT") }), `"WGHT" appears twice`},
		{"wrong tag", patch(good, func(c []byte) { copy(entry(c, 1), "SCAM") }), `section 1 is "SCAM", want "SCAL"`},
		{"swapped tags", patch(good, func(c []byte) { copy(entry(c, 1), "ZERO"); copy(entry(c, 2), "SCAL") }), `section 1 is "ZERO", want "SCAL"`},
		{"huge rows", patch(good, func(c []byte) { le.PutUint64(c[16:], 1<<63) }), "above the limit"},
		{"huge cols", patch(good, func(c []byte) { le.PutUint64(c[24:], math.MaxUint64) }), "above the limit"},
		{"rows 0", patch(good, func(c []byte) { le.PutUint64(c[16:], 0) }), "must be positive"},
		{"dims mismatch", patch(good, func(c []byte) { le.PutUint64(c[16:], 129) }), `section "WGHT" length 8192, want 16384`},
		{"offset beyond", patch(good, func(c []byte) { le.PutUint64(entry(c, 2)[8:], 1<<62) }), `section "ZERO" offset 4611686018427387904 is beyond`},
		{"huge length", patch(good, func(c []byte) { le.PutUint64(entry(c, 0)[16:], 1<<62) }), `section "WGHT" length 4611686018427387904 exceeds file size 8960`},
		{"max length", patch(good, func(c []byte) { le.PutUint64(entry(c, 2)[16:], math.MaxUint64) }), `section "ZERO" length 18446744073709551615 exceeds`},
		{"offset+length overflow", patch(good, func(c []byte) {
			le.PutUint64(entry(c, 2)[8:], math.MaxUint64-63)
			le.PutUint64(entry(c, 2)[16:], 128)
		}), `section "ZERO" offset 18446744073709551552 is beyond`},
		{"short SCAL", patch(good, func(c []byte) { le.PutUint64(entry(c, 1)[16:], 8) }), `section "SCAL" length 8, want 512`},
		{"misaligned", patch(good, func(c []byte) { le.PutUint64(entry(c, 0)[8:], 160); le.PutUint64(entry(c, 0)[16:], 8224) }), "not a multiple of 64"},
		{"overlap header", patch(good, func(c []byte) { le.PutUint64(entry(c, 0)[8:], 128); le.PutUint64(entry(c, 0)[16:], 8256) }), "overlaps the 140-byte header"},
		{"overlap section", patch(good, func(c []byte) { le.PutUint64(entry(c, 1)[8:], 8320) }), `section "SCAL" offset 8320 overlaps section "WGHT", which ends at 8384`},
		{"out of order", patch(good, func(c []byte) { le.PutUint64(entry(c, 2)[8:], 192); le.PutUint64(entry(c, 2)[16:], 64) }), `section "ZERO" offset 192 overlaps section "SCAL"`},
		{"nonzero padding", patch(good, func(c []byte) { c[150] = 1 }), `padding byte at offset 150 before section "WGHT" is 0x01`},
		{"trailing", fixCRCs(append(bytes.Clone(good), make([]byte, 64)...)), "64 trailing bytes"},
		{"no sections", rawFile(1, 1, 1, 1, nil, 0, nil, nil), "needs sections WGHT, SCAL, ZERO; the file has 0"},
		{"nan scale", nanFile(), "is NaN"},
		{"zero-length claim at end", rawFile(1, 1, 1, 1, nil, 1, []rawEntry{{tag: "WGHT", off: 1 << 40}}, nil), "beyond the file size"},
	}
	for _, c := range cases {
		_, err := readQ4G128Bytes(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		} else if !strings.HasPrefix(err.Error(), "layout: ") {
			t.Errorf("%s: error %q lacks the package prefix", c.name, err)
		}
		// ReadFile alone never panics or over-allocates on these.
		checkReadFile(t, c.b)
	}
}

// TestQGVLyingSize passes a size larger than the reader's data with a
// header that agrees with that size: ReadFile must fail before allocating
// the claimed sections.
func TestQGVLyingSize(t *testing.T) {
	const claimed = 1 << 50
	b := rawFile(1, 1, 1, 1, nil, 1, []rawEntry{{tag: "WGHT", off: 128, length: claimed - 128}}, make([]byte, 20))
	// The least of three runs: the counter is process-wide, and goroutines
	// of earlier tests may still allocate during one of them.
	var err error
	least := ^uint64(0)
	for range 3 {
		before := totalAlloc()
		_, err = ReadFile(bytes.NewReader(b), claimed)
		least = min(least, totalAlloc()-before)
	}
	if least > 1<<16 {
		t.Errorf("allocated %d bytes", least)
	}
	if err == nil || !strings.Contains(err.Error(), "last byte") {
		t.Errorf("error %v, want one about the last byte", err)
	}
}

func TestQGVReaderErrors(t *testing.T) {
	if _, err := ReadFile(nil, 10); err == nil {
		t.Error("nil reader: no error")
	}
	if _, err := ReadFile(bytes.NewReader(nil), -1); err == nil {
		t.Error("negative size: no error")
	}
	if _, err := DecodeQ4G128(nil); err == nil {
		t.Error("DecodeQ4G128(nil): no error")
	}
}

func TestFormatIDString(t *testing.T) {
	if s := FormatQ4G128.String(); s != "Q4G128" {
		t.Errorf("FormatQ4G128 = %q", s)
	}
	if s := FormatID(9).String(); s != "FormatID(9)" {
		t.Errorf("FormatID(9) = %q", s)
	}
}

func TestSaveLoadQ4G128(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.qgv")
	rng := rand.New(rand.NewPCG(3, 4))
	m := randQ4G128(t, rng, 130, 200)
	if err := SaveQ4G128(path, m); err != nil {
		t.Fatal(err)
	}
	got, err := LoadQ4G128(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffQ4G128(m, got); d != "" {
		t.Fatal(d)
	}
	// Overwrite with another matrix.
	m2 := randQ4G128(t, rng, 5, 7)
	if err := SaveQ4G128(path, m2); err != nil {
		t.Fatal(err)
	}
	if got, err = LoadQ4G128(path); err != nil {
		t.Fatal(err)
	} else if d := diffQ4G128(m2, got); d != "" {
		t.Fatal(d)
	}
	// An invalid matrix leaves the old file in place.
	bad := randQ4G128(t, rng, 5, 7)
	bad.Scales[0] = float32(math.NaN())
	if err := SaveQ4G128(path, bad); err == nil {
		t.Fatal("saved a matrix with a NaN scale")
	}
	if got, err = LoadQ4G128(path); err != nil {
		t.Fatal(err)
	} else if d := diffQ4G128(m2, got); d != "" {
		t.Fatal(d)
	}
	// Saving into a missing directory fails.
	if err := SaveQ4G128(filepath.Join(dir, "no", "m.qgv"), m2); err == nil {
		t.Error("saved into a missing directory")
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "m.qgv" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only m.qgv (temporary files left?)", names)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, err %v", st.Mode(), err)
	}
	// Load errors name the path.
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, b[:len(b)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadQ4G128(path); err == nil || !strings.HasPrefix(err.Error(), path+": layout: .qgv: ") {
		t.Errorf("truncated file: %v", err)
	}
	if _, err := LoadQ4G128(filepath.Join(dir, "missing.qgv")); err == nil {
		t.Error("missing file: no error")
	}
	if _, err := LoadQ4G128(dir); err == nil {
		t.Error("directory: no error")
	}
}

// totalAlloc returns the cumulative bytes allocated on the heap. Small
// objects are counted a span at a time, so differences are exact only to
// some kilobytes; runtime/metrics reads it without stopping the world.
func totalAlloc() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// boundedReaderAt serves b and records every request.
type boundedReaderAt struct {
	t         testing.TB
	b         []byte
	requested int64
}

func (r *boundedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(r.b)) {
		r.t.Errorf("ReadAt of %d bytes at %d, outside the %d-byte file", len(p), off, len(r.b))
	}
	r.requested += int64(len(p))
	return bytes.NewReader(r.b).ReadAt(p, off)
}

// allocSlack is what ReadFile may allocate beyond the file size: the File,
// its tables, error strings.
const allocSlack = 64 << 10

// checkReadFile runs ReadFile on b and checks its properties: no read
// outside the file, at most the file (plus one probe byte) read, at most
// the file size (plus slack) allocated, errors prefixed, and for a file
// that reads, a canonical re-encoding that reads back identically and,
// when it is a Q4G128 matrix, that re-encodes identically.
func checkReadFile(t testing.TB, b []byte) {
	t.Helper()
	var (
		f   *File
		err error
	)
	// The allocation counter is process-wide and the fuzzing engine
	// allocates in the background, so an excess must repeat to count.
	for try := 0; ; try++ {
		r := &boundedReaderAt{t: t, b: b}
		before := totalAlloc()
		f, err = ReadFile(r, int64(len(b)))
		d := totalAlloc() - before
		if r.requested > int64(len(b))+1 {
			t.Fatalf("ReadFile of %d bytes read %d bytes", len(b), r.requested)
		}
		if d <= uint64(len(b))+allocSlack {
			break
		}
		if try == 4 {
			t.Fatalf("ReadFile of %d bytes allocated %d bytes", len(b), d)
		}
	}
	if err != nil {
		if !strings.HasPrefix(err.Error(), "layout: .qgv: ") {
			t.Fatalf("error %q lacks the prefix", err)
		}
		return
	}
	var buf bytes.Buffer
	if err := WriteFile(&buf, f); err != nil {
		t.Fatalf("WriteFile of a File that ReadFile returned: %v", err)
	}
	re := buf.Bytes()
	switch {
	case len(re) > len(b):
		t.Fatalf("canonical encoding is %d bytes, longer than the %d-byte input", len(re), len(b))
	case len(re) == len(b) && !bytes.Equal(re, b):
		t.Fatalf("canonical encoding of the same length differs from the input")
	}
	f2, err := ReadFile(bytes.NewReader(re), int64(len(re)))
	if err != nil {
		t.Fatalf("re-reading the canonical encoding: %v", err)
	}
	if d := diffFile(f, f2); d != "" {
		t.Fatalf("File round trip: %s", d)
	}
	if f.Format != FormatQ4G128 { // the other formats: decode, re-encode
		dm, err := Decode(f)
		if err != nil {
			return
		}
		var mbuf bytes.Buffer
		if _, err := dm.(io.WriterTo).WriteTo(&mbuf); err != nil {
			t.Fatalf("WriteTo of a decoded %s: %v", dm.Name(), err)
		}
		if !bytes.Equal(mbuf.Bytes(), re) {
			t.Fatalf("WriteTo of the decoded %s differs from the canonical encoding", dm.Name())
		}
		return
	}
	m, err := DecodeQ4G128(f)
	if err != nil {
		return
	}
	var mbuf bytes.Buffer
	if _, err := m.WriteTo(&mbuf); err != nil {
		t.Fatalf("WriteTo of a decoded matrix: %v", err)
	}
	if !bytes.Equal(mbuf.Bytes(), re) {
		t.Fatalf("WriteTo of the decoded matrix differs from the canonical encoding")
	}
	m2, err := readQ4G128Bytes(mbuf.Bytes())
	if err != nil {
		t.Fatalf("re-reading the matrix: %v", err)
	}
	if d := diffQ4G128(m, m2); d != "" {
		t.Fatalf("matrix round trip: %s", d)
	}
}

// FuzzReadFile feeds arbitrary bytes to ReadFile, and the same bytes with
// their CRCs repaired so that mutations reach the checks behind the CRCs.
// Seeds live in testdata/fuzz/FuzzReadFile; QGV_WRITE_FUZZ_SEEDS=1 go test
// -run TestWriteFuzzSeeds regenerates them.
func FuzzReadFile(f *testing.F) {
	// Small Bits and Sparse12 files, so mutations reach their decoders.
	if b, err := NewBits(2, 40, 3, 32, false); err == nil {
		b.SetQ(1, 7, 5)
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err == nil {
			f.Add(buf.Bytes())
		}
	}
	if m, err := NewSparse12(1, 20, 64, true); err == nil {
		m.SetPair(0, 3, 1, 100)
		var buf bytes.Buffer
		if _, err := m.WriteTo(&buf); err == nil {
			f.Add(buf.Bytes())
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkReadFile(t, b)
		if c := fixCRCs(b); c != nil && !bytes.Equal(c, b) {
			checkReadFile(t, c)
		}
	})
}

// fuzzSeeds returns the seed corpus by name. Seeds are kept small where
// the case allows: the fuzzing engine minimizes every new input, which
// costs time quadratic in its length.
func fuzzSeeds(t testing.TB) map[string][]byte {
	le := binary.LittleEndian
	good := smallFile(t)
	var buf bytes.Buffer
	if err := WriteFile(&buf, &File{Version: 1, Format: 3, Rows: 2, Cols: 3, Params: []uint64{4, 64},
		Sections: []Section{{Tag: tag("DATA"), Data: []byte("hello")}, {Tag: tag("NONE")}}}); err != nil {
		t.Fatal(err)
	}
	small := buf.Bytes() // 192 bytes, two sections, parameters
	gap := rawFile(1, 5, 0, 0, nil, 1, []rawEntry{{tag: "DATA", off: 256, length: 5,
		crc: crc32.Checksum([]byte("hello"), castagnoli)}}, nil)
	gap = append(append(gap, make([]byte, 256-len(gap))...), "hello"...)
	return map[string][]byte{
		"valid_q4g128_1x1":  good,
		"valid_container":   small,
		"valid_aligned_gap": gap, // sections beyond the minimal offsets are allowed
		"trunc_empty":       {},
		"trunc_magic":       good[:8],
		"trunc_fixed":       good[:35],
		"trunc_table":       good[:100],
		"trunc_header_crc":  good[:139],
		"trunc_padding":     good[:160],
		"trunc_wght":        good[:300],
		"trunc_last_byte":   good[:len(good)-1],
		"trunc_container":   small[:133],
		"bad_header_crc":    func() []byte { c := bytes.Clone(small); c[120] ^= 0x40; return c }(),
		"bad_section_crc":   func() []byte { c := bytes.Clone(small); c[130] ^= 1; return c }(),
		"bad_q4g128_crc":    func() []byte { c := bytes.Clone(good); c[8400] ^= 1; return c }(),
		"bad_padding":       patch(small, func(c []byte) { c[150] = 1 }),
		"hostile_sizes": patch(good[:192], func(c []byte) {
			le.PutUint64(c[16:], 1<<62)
			le.PutUint64(c[24:], 1<<62)
			le.PutUint64(c[40+16:], 1<<62)
		}),
		"hostile_nparams":   patch(good[:44], func(c []byte) { le.PutUint32(c[32:], math.MaxUint32) }),
		"hostile_nsections": patch(good[:44], func(c []byte) { le.PutUint32(c[36:], math.MaxUint32) }),
		"hostile_overflow": rawFile(1, 1, 1, 1, nil, 2, []rawEntry{
			{tag: "WGHT", off: 128, length: 64}, {tag: "SCAL", off: 192, length: math.MaxUint64 - 127},
		}, make([]byte, 128)),
		"hostile_overlap": patch(small, func(c []byte) { le.PutUint64(c[56+32+8:], 128) }),
	}
}

// TestWriteFuzzSeeds regenerates testdata/fuzz/FuzzReadFile when
// QGV_WRITE_FUZZ_SEEDS=1, and otherwise checks that the committed seeds
// match.
func TestWriteFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReadFile")
	write := os.Getenv("QGV_WRITE_FUZZ_SEEDS") == "1"
	if write {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range fuzzSeeds(t) {
		text := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		path := filepath.Join(dir, name)
		if write {
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil || string(old) != text {
			t.Errorf("seed %s is missing or stale (err %v); regenerate with QGV_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds", path, err)
		}
	}
}
