package ans

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

func gaussInt8(rng *rand.Rand, n int, sigma float64) []int8 {
	w := make([]int8, n)
	for i := range w {
		v := math.RoundToEven(rng.NormFloat64() * sigma)
		w[i] = int8(max(-128, min(127, v)))
	}
	return w
}

func shapes(l Layout) [][2]int {
	if l == WarpStripes {
		return [][2]int{{32, 4}, {32, 132}, {64, 1000}, {96, 256}}
	}
	return [][2]int{{1, 128}, {3, 256}, {17, 1024}, {5, 128 * 9}}
}

func roundTrip(t *testing.T, name string, w []int8, rows, cols int, l Layout) *Matrix {
	t.Helper()
	m, err := Encode(w, rows, cols, l)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	got, err := m.Decode()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for i := range w {
		if got[i] != w[i] {
			t.Fatalf("%s: element %d = %d, want %d", name, i, got[i], w[i])
		}
	}
	// The fused dot product equals the exact int32 reference.
	rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	v := gaussInt8(rng, cols, 30)
	out := make([]int32, Lanes)
	for u := 0; u < m.Units(); u++ {
		if err := m.DotUnit(u, v, out); err != nil {
			t.Fatal(err)
		}
		n := 1
		if l == WarpStripes {
			n = Lanes
		}
		for k := 0; k < n; k++ {
			r := u*n + k
			var want int32
			for c := 0; c < cols; c++ {
				want += int32(w[r*cols+c]) * int32(v[c])
			}
			if out[k] != want {
				t.Fatalf("%s: row %d dot = %d, want %d", name, r, out[k], want)
			}
		}
	}
	return m
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, l := range []Layout{WarpRows, WarpStripes} {
		for _, sh := range shapes(l) {
			rows, cols := sh[0], sh[1]
			for _, sigma := range []float64{0.5, 1, 4, 10, 40} {
				roundTrip(t, l.String(), gaussInt8(rng, rows*cols, sigma), rows, cols, l)
			}
			c := make([]int8, rows*cols) // constant
			for i := range c {
				c[i] = -7
			}
			m := roundTrip(t, "constant", c, rows, cols, l)
			if m.Model.NSym != 1 {
				t.Fatalf("constant matrix: %d symbols", m.Model.NSym)
			}
			all := make([]int8, rows*cols) // every int8 value: escapes needed
			for i := range all {
				all[i] = int8(rng.IntN(256) - 128)
			}
			m = roundTrip(t, "all values", all, rows, cols, l)
			if rows*cols >= 256*8 && m.Model.Escape < 0 {
				t.Fatal("256 distinct values without an escape symbol")
			}
			out := make([]int8, rows*cols) // rare outliers
			for i := range out {
				out[i] = int8(rng.IntN(3) - 1)
				if rng.IntN(500) == 0 {
					out[i] = 120
				}
			}
			roundTrip(t, "outliers", out, rows, cols, l)
		}
	}
}

// TestCompression: at sigma = 4 the coded size is within 2% of the
// empirical entropy plus the per-unit padding and states.
func TestCompression(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 256, 4096
	w := gaussInt8(rng, rows*cols, 4)
	for _, l := range []Layout{WarpRows, WarpStripes} {
		m, err := Encode(w, rows, cols, l)
		if err != nil {
			t.Fatal(err)
		}
		r := m.Compression(w)
		t.Logf("%s: %.4f bits/element, entropy %.4f, overhead %.4f bits/element (states and padding), model %.4f", l, r.BitsPerElement, r.EntropyBits, r.OverheadBits, r.ModelBits)
		if r.PayloadBits > 1.02*r.EntropyBits {
			t.Errorf("%s: payload %.4f bits/element, more than 2%% above the entropy %.4f", l, r.PayloadBits, r.EntropyBits)
		}
	}
}

func TestCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	w := gaussInt8(rng, 64*512, 4)
	for _, l := range []Layout{WarpRows, WarpStripes} {
		m, err := Encode(w, 64, 512, l)
		if err != nil {
			t.Fatal(err)
		}
		errs := 0
		for trial := 0; trial < 200; trial++ {
			c := *m
			c.Words = append([]uint32(nil), m.Words...)
			i := rng.IntN(int(m.Offsets[1])) // inside unit 0
			c.Words[i] ^= 1 << rng.IntN(32)
			if _, err := c.Decode(); err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s: error %v does not wrap ErrCorrupt", l, err)
				}
				errs++
			}
		}
		t.Logf("%s: %d of 200 single-bit corruptions detected", l, errs)
		if errs < 190 {
			t.Errorf("%s: only %d of 200 single-bit corruptions detected", l, errs)
		}
		bad := []func(c *Matrix){
			func(c *Matrix) { c.Words = c.Words[:len(c.Words)-128] },
			func(c *Matrix) { c.Offsets = append([]uint64{0, 64}, c.Offsets[2:]...) },
			func(c *Matrix) { c.Offsets[1] += 128 },
			func(c *Matrix) { c.EscOffsets[len(c.EscOffsets)-1]++ },
			func(c *Matrix) { c.Model.Freq[0]++ },
			func(c *Matrix) { c.Model.NSym = 0 },
			func(c *Matrix) { c.Rows = 7 },
		}
		for i, f := range bad {
			c := *m
			c.Words = append([]uint32(nil), m.Words...)
			c.Offsets = append([]uint64(nil), m.Offsets...)
			c.EscOffsets = append([]uint64(nil), m.EscOffsets...)
			f(&c)
			if _, err := c.Decode(); err == nil {
				t.Errorf("%s: corruption %d decoded", l, i)
			}
		}
	}
	if _, err := Encode(make([]int8, 100), 1, 100, WarpRows); err == nil {
		t.Error("warp rows with 100 columns accepted")
	}
	if _, err := Encode(make([]int8, 31*4), 31, 4, WarpStripes); err == nil {
		t.Error("warp stripes with 31 rows accepted")
	}
}

func TestContainer(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	dir := t.TempDir()
	for _, l := range []Layout{WarpRows, WarpStripes} {
		w := gaussInt8(rng, 64*256, 60) // escapes too
		m, err := Encode(w, 64, 256, l)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, l.String()+".qgv")
		if err := layout.SaveMatrix(p, m); err != nil {
			t.Fatal(err)
		}
		got, err := layout.LoadMatrix(p)
		if err != nil {
			t.Fatal(err)
		}
		d, err := got.(*Matrix).Decode()
		if err != nil {
			t.Fatal(err)
		}
		for i := range w {
			if d[i] != w[i] {
				t.Fatalf("%s: element %d differs after the container", l, i)
			}
		}
		var buf bytes.Buffer
		if _, err := m.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		for cut := 0; cut < len(data); cut += 1 + len(data)/53 {
			if f, err := layout.ReadFile(bytes.NewReader(data[:cut]), int64(cut)); err == nil {
				if _, err := layout.Decode(f); err == nil {
					t.Fatalf("truncated to %d bytes: decoded", cut)
				}
			}
		}
	}
}

// FuzzDecode decodes arbitrary containers: errors, never a panic or a
// read outside the buffers.
func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, l := range []Layout{WarpRows, WarpStripes} {
		m, _ := Encode(gaussInt8(rng, 32*128, 4), 32, 128, l)
		var buf bytes.Buffer
		m.WriteTo(&buf)
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := layout.ReadFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		m, err := layout.Decode(file)
		if err != nil {
			return
		}
		if a, ok := m.(*Matrix); ok {
			a.Decode()
		}
	})
}

// FuzzStreams corrupts the words, offsets and escapes of a valid matrix
// in memory (no CRC): decoding returns an error or values, never panics.
func FuzzStreams(f *testing.F) {
	f.Add(uint32(0), uint32(1), uint16(0), byte(0))
	f.Fuzz(func(t *testing.T, idx, val uint32, off uint16, which byte) {
		rng := rand.New(rand.NewPCG(11, 12))
		m, _ := Encode(gaussInt8(rng, 32*256, 50), 32, 256, Layout(which%2))
		switch which % 4 {
		case 0, 1:
			m.Words[int(idx)%len(m.Words)] ^= val
		case 2:
			m.Offsets[int(idx)%len(m.Offsets)] += uint64(off)
		case 3:
			m.EscOffsets[int(idx)%len(m.EscOffsets)] += uint64(off)
		}
		m.Decode()
		out := make([]int32, Lanes)
		for u := 0; u < m.Units(); u++ {
			m.DotUnit(u, make([]int8, m.Cols), out)
		}
	})
}

// TestEncodeDeterministic: Encode's parallel unit coding gives the same
// matrix with one goroutine as with several.
func TestEncodeDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	w := gaussInt8(rng, 256*512, 12)
	for _, l := range []Layout{WarpStripes, WarpRows} {
		prev := runtime.GOMAXPROCS(1)
		one, err := Encode(w, 256, 512, l)
		runtime.GOMAXPROCS(4)
		four, err4 := Encode(w, 256, 512, l)
		runtime.GOMAXPROCS(prev)
		if err != nil || err4 != nil {
			t.Fatal(err, err4)
		}
		if !reflect.DeepEqual(one, four) {
			t.Errorf("%v: GOMAXPROCS 1 and 4 encode differently", l)
		}
		if len(one.Esc) == 0 {
			t.Errorf("%v: no escapes at sigma 12: the test covers less than it should", l)
		}
	}
}

// TestContainerBadHeader: a model section claiming more than MaxSyms
// symbols and shapes past the limits are errors that say so, with valid
// CRCs (so the checks behind them are what is tested), never a panic.
func TestContainerBadHeader(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m, err := Encode(gaussInt8(rng, 32*128, 4), 32, 128, WarpStripes)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	good, err := layout.ReadFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		edit func(f *layout.File)
		want string
	}{
		"256 symbols": {func(f *layout.File) {
			md := []byte{255, 0}
			for k := 0; k < 256; k++ {
				md = append(md, byte(k), 1)
			}
			f.Sections[0].Data = md
		}, "claims 256 symbols, at most 128"},
		"2^48 elements":     {func(f *layout.File) { f.Rows, f.Cols = 1<<24, 1<<24 }, "more than 2^40 elements"},
		"rows past 2^24":    {func(f *layout.File) { f.Rows = 1<<24 + 32 }, "above the limit"},
		"cols past MaxCols": {func(f *layout.File) { f.Cols = MaxCols + 4 }, "more than 130944 columns"},
	}
	for name, c := range cases {
		f := *good
		f.Sections = append([]layout.Section(nil), good.Sections...)
		c.edit(&f)
		var out bytes.Buffer
		if err := layout.WriteFile(&out, &f); err != nil {
			t.Fatal(name, err)
		}
		g, err := layout.ReadFile(bytes.NewReader(out.Bytes()), int64(out.Len()))
		if err == nil {
			_, err = layout.Decode(g)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, c.want)
		}
	}
	if err := CheckShape(WarpRows, 1, MaxCols); err != nil {
		t.Errorf("CheckShape(WarpRows, 1, MaxCols): %v", err)
	}
}

// TestMaxColsExact: at MaxCols columns the largest dot product, -128 *
// -128 summed over every column, is exact in int32.
func TestMaxColsExact(t *testing.T) {
	w := make([]int8, 32*MaxCols)
	for i := range w {
		w[i] = -128
	}
	m, err := Encode(w, 32, MaxCols, WarpStripes)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]int8, MaxCols)
	for i := range v {
		v[i] = -128
	}
	out := make([]int32, Lanes)
	if err := m.DotUnit(0, v, out); err != nil {
		t.Fatal(err)
	}
	for t0, got := range out {
		if want := int64(MaxCols) * 128 * 128; int64(got) != want {
			t.Fatalf("lane %d: %d, want %d", t0, got, want)
		}
	}
}

// FuzzSections replaces one section or the shape of a valid matrix's
// container with arbitrary data, behind valid CRCs (the file is
// rewritten), so every mutation reaches DecodeFile's checks: errors,
// never a panic or a read outside the buffers.
func FuzzSections(f *testing.F) {
	rng := rand.New(rand.NewPCG(13, 14))
	var files []*layout.File
	for _, l := range []Layout{WarpRows, WarpStripes} {
		m, _ := Encode(gaussInt8(rng, 32*128, 30), 32, 128, l)
		var buf bytes.Buffer
		m.WriteTo(&buf)
		g, err := layout.ReadFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			f.Fatal(err)
		}
		files = append(files, g)
		for i, s := range g.Sections {
			f.Add(byte(len(files)-1), byte(i), uint32(32), uint32(128), s.Data)
		}
	}
	f.Add(byte(0), byte(0), uint32(32), uint32(128), append([]byte{255, 0}, make([]byte, 512)...))
	f.Fuzz(func(t *testing.T, which, sec byte, rows, cols uint32, data []byte) {
		g := *files[int(which)%len(files)]
		g.Sections = append([]layout.Section(nil), g.Sections...)
		g.Sections[int(sec)%len(g.Sections)].Data = data
		g.Rows, g.Cols = uint64(rows%(1<<25)), uint64(cols%(1<<18))
		if g.Rows*g.Cols > 1<<22 {
			return // a valid shape that large only costs time
		}
		m, err := DecodeFile(&g)
		if err != nil {
			return
		}
		m.Decode()
		out := make([]int32, Lanes)
		v := make([]int8, m.Cols)
		for u := 0; u < m.Units(); u++ {
			m.DotUnit(u, v, out)
		}
	})
}

// TestCheckOffsetsOrder: offset tables that go backwards are corrupt
// (the decoders index units by them); mutation testing found the order
// checks untested.
func TestCheckOffsetsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	m, err := Encode(gaussInt8(rng, 96*128, 40), 96, 128, WarpStripes)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckOffsets(); err != nil {
		t.Fatal(err)
	}
	w := append([]uint64(nil), m.Offsets...)
	m.Offsets[1], m.Offsets[2] = m.Offsets[2], m.Offsets[1]
	if err := m.CheckOffsets(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("word offsets out of order: %v", err)
	}
	m.Offsets = w
	if m.EscOffsets[1] == m.EscOffsets[2] {
		t.Fatal("no escapes in unit 1: the test needs some")
	}
	m.EscOffsets[1], m.EscOffsets[2] = m.EscOffsets[2], m.EscOffsets[1]
	if err := m.CheckOffsets(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("escape offsets out of order: %v", err)
	}
}

// TestLog2Int: the model choice's logarithm table, computed without
// math.Log2 so that every architecture fits the same model, is exact at
// powers of two and within 4e-16 of math.Log2 elsewhere.
func TestLog2Int(t *testing.T) {
	for i := 1; i < len(log2Int); i++ {
		want := math.Log2(float64(i))
		if i&(i-1) == 0 && log2Int[i] != want {
			t.Errorf("log2(%d) = %v, want exactly %v", i, log2Int[i], want)
		}
		if d := math.Abs(log2Int[i] - want); d > 4e-16*max(1, want) {
			t.Errorf("log2(%d) = %v, math.Log2 %v (off %.3g)", i, log2Int[i], want, d)
		}
	}
}
