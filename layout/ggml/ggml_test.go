package ggml

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

func TestTypes(t *testing.T) {
	for _, typ := range Types {
		if typ.BlockBytes()*8 != int(typ.BitsPerWeight()*float64(typ.BlockElems())) {
			t.Errorf("%s: %d bytes per %d", typ, typ.BlockBytes(), typ.BlockElems())
		}
		spec, err := layout.ParseFormatSpec(strings.ToUpper(typ.SpecName()))
		if err != nil || spec.Type != int(typ) || spec.String() != typ.SpecName() {
			t.Errorf("%s: spec %+v %v", typ, spec, err)
		}
	}
}

// TestRoundTrip: every type through the container at tail shapes.
func TestRoundTrip(t *testing.T) {
	for _, typ := range Types {
		for _, sh := range [][2]int{{1, 1}, {3, 300}, {5, 512}} {
			m, err := Random(typ, sh[0], sh[1], 7)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := m.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			f, err := layout.ReadFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				t.Fatal(err)
			}
			g, err := layout.Decode(f)
			if err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			gm := g.(*Matrix)
			if gm.Type != typ || gm.Rows != m.Rows || gm.Cols != m.Cols || !bytes.Equal(gm.Data, m.Data) {
				t.Fatalf("%s %v: round trip differs", typ, sh)
			}
			// corrupt the type and the section
			bad := *f
			bad.Params = []uint64{99}
			if _, err := DecodeFile(&bad); err == nil {
				t.Errorf("%s: type 99 decoded", typ)
			}
			bad = *f
			bad.Sections = []layout.Section{{Tag: blksTag, Data: f.Sections[0].Data[1:]}}
			if _, err := DecodeFile(&bad); err == nil {
				t.Errorf("%s: short section decoded", typ)
			}
			bad.Params = nil
			if _, err := DecodeFile(&bad); err == nil {
				t.Errorf("%s: no params decoded", typ)
			}
		}
	}
}

// TestA8 checks DotA8Exact against the float64 reference on quantized
// activations (they differ by the activation rounding only) and the
// integer decomposition against Dequantize.
func TestA8(t *testing.T) {
	for _, typ := range Types {
		m, err := Random(typ, 6, 700, 3)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, m.Cols)
		rng := layout.NewRand(5)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		xq, xs := make([]int8, m.PCols), make([]float32, m.PCols/128)
		if err := layout.QuantizeA8(xq, xs, x); err != nil {
			t.Fatal(err)
		}
		xd := make([]float32, m.Cols) // the dequantized activations
		for i := range xd {
			xd[i] = float32(xq[i]) * xs[i/128]
		}
		got := make([]float32, m.Rows)
		if err := m.DotA8Exact(got, xq, xs); err != nil {
			t.Fatal(err)
		}
		ref, mag := make([]float64, m.Rows), make([]float64, m.Rows)
		m.DotRef(ref, xd)
		m.DotRefMag(mag, xd)
		for r := range got {
			if d := math.Abs(float64(got[r]) - ref[r]); d > 1e-5*mag[r] {
				t.Errorf("%s row %d: A8 %v, reference %v (mag %v)", typ, r, got[r], ref[r], mag[r])
			}
		}
	}
}

// TestValidate: non-finite half-precision fields and wrong lengths.
func TestValidate(t *testing.T) {
	for _, typ := range Types {
		m, _ := Random(typ, 2, 256, 1)
		nb := typ.BlockBytes()
		last := fmt.Sprintf("row 1 block %d", m.RowBytes()/nb-1)
		for _, f := range typ.halfFields() {
			b := append([]byte(nil), m.Data...)
			binary.LittleEndian.PutUint16(b[nb+f.off:], 0x7c00)
			bad := *m
			bad.Data = b
			if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "finite") {
				t.Errorf("%s: infinite %s: %v", typ, f.name, err)
			}
			// -Inf and NaNs in the last block are named there; the
			// largest finite values pass
			for _, h := range []uint16{0xfc00, 0x7e00, 0xfd01, 0x7c01} {
				b := append([]byte(nil), m.Data...)
				binary.LittleEndian.PutUint16(b[len(b)-nb+f.off:], h)
				bad.Data = b
				if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), last) || !strings.Contains(err.Error(), f.name) {
					t.Errorf("%s: %s = %#04x in the last block: %v (want %q)", typ, f.name, h, err, last)
				}
			}
			for _, h := range []uint16{0x7bff, 0xfbff, 0x8000} {
				b := append([]byte(nil), m.Data...)
				binary.LittleEndian.PutUint16(b[len(b)-nb+f.off:], h)
				bad.Data = b
				if err := bad.Validate(); err != nil {
					t.Errorf("%s: %s = %#04x rejected: %v", typ, f.name, h, err)
				}
			}
		}
		bad := *m
		bad.Data = bad.Data[1:]
		if bad.Validate() == nil {
			t.Errorf("%s: short data accepted", typ)
		}
		bad = *m
		bad.PCols += 128
		if bad.Validate() == nil {
			t.Errorf("%s: wrong padding accepted", typ)
		}
	}
	if _, err := New(Type(16), 1, 256); err == nil {
		t.Error("type 16 accepted")
	}
}

// TestUnknownTypeAccessors: the per-type accessors of an unknown type
// return zero instead of dividing by its zero sizes (SubBlocks and
// Blocks panicked before).
func TestUnknownTypeAccessors(t *testing.T) {
	u := Type(99)
	if u.Known() || u.SubBlocks() != 0 || u.BlockElems() != 0 || u.BlockBytes() != 0 {
		t.Errorf("unknown type: known %v, sub-blocks %d, elems %d, bytes %d", u.Known(), u.SubBlocks(), u.BlockElems(), u.BlockBytes())
	}
	m := &Matrix{Type: u, Rows: 2, Cols: 256, PCols: 256}
	if m.Blocks() != 0 || m.RowBytes() != 0 || m.BitsPerWeight() != 0 {
		t.Errorf("unknown type matrix: blocks %d, row bytes %d, bits %v", m.Blocks(), m.RowBytes(), m.BitsPerWeight())
	}
	if m.Validate() == nil {
		t.Error("a matrix of an unknown type validated")
	}
}
