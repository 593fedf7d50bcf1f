package layout

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLowbitContainerRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	w := gaussian(rng, 7*300)
	var ms []interface {
		Matrix
		WriteTo(w interface{ Write([]byte) (int, error) }) (int64, error)
	}
	_ = ms
	dir := t.TempDir()
	for _, fp32 := range []bool{false, true} {
		for _, n := range BitWidths {
			b, err := QuantizeBits(w, 7, 300, n, 64, QuantOptions{FP32Meta: fp32})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, b.Name()+".qgv")
			if err := SaveMatrix(path, b); err != nil {
				t.Fatal(err)
			}
			got, err := LoadMatrix(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, Matrix(b)) {
				t.Fatalf("%s fp32=%v: round trip differs", b.Name(), fp32)
			}
		}
		sp, _, err := QuantizeSparse12(w, 7, 300, 0, QuantOptions{FP32Meta: fp32})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := sp.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, err := ReadFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, Matrix(sp)) {
			t.Fatal("Sparse12 round trip differs")
		}
		// Every truncation is an error.
		data := buf.Bytes()
		for cut := 0; cut < len(data); cut += 97 {
			if f, err := ReadFile(bytes.NewReader(data[:cut]), int64(cut)); err == nil {
				if _, err := Decode(f); err == nil {
					t.Fatalf("truncated to %d bytes: no error", cut)
				}
			}
		}
	}
}

func TestLowbitContainerBadParams(t *testing.T) {
	b, _ := NewBits(3, 100, 4, 64, false)
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(f *File){
		"bits 5":        func(f *File) { f.Params = []uint64{5, 64, 0} },
		"bits 1<<40":    func(f *File) { f.Params = []uint64{1 << 40, 64, 0} },
		"group 100":     func(f *File) { f.Params = []uint64{4, 100, 0} },
		"meta flag 2":   func(f *File) { f.Params = []uint64{4, 64, 2} },
		"fp32 mismatch": func(f *File) { f.Params = []uint64{4, 64, 1} },
		"two params":    func(f *File) { f.Params = []uint64{4, 64} },
		"huge rows":     func(f *File) { f.Rows = 1 << 40 },
		"rows mismatch": func(f *File) { f.Rows = 100 },
		"wrong format":  func(f *File) { f.Format = FormatSparse12 },
	} {
		c := *f
		c.Params = append([]uint64(nil), f.Params...)
		mut(&c)
		if _, err := Decode(&c); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestBitsImportedRoundTrip: offset-form metadata and the act-order
// permutation survive the container; a bad permutation or unknown flag is
// an error.
func TestBitsImportedRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, mode := range []struct{ off, perm bool }{{true, false}, {false, true}, {true, true}} {
		b, err := NewBits(5, 200, 4, 32, true)
		if err != nil {
			t.Fatal(err)
		}
		b.Offsets = mode.off
		for i := range b.Scales32 {
			b.Scales32[i], b.Zeros32[i] = float32(rng.Float64()), float32(rng.NormFloat64())
		}
		for i := range b.Words {
			b.Words[i] = rng.Uint32()
		}
		if mode.perm {
			b.Perm = make([]int32, b.Cols)
			for i, p := range rng.Perm(b.Cols) {
				b.Perm[i] = int32(p)
			}
		}
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		f, err := ReadFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, Matrix(b)) {
			t.Fatalf("%+v: round trip differs", mode)
		}
		if !mode.perm {
			continue
		}
		bad := *f
		bad.Sections = append([]Section(nil), f.Sections...)
		pb := append([]byte(nil), f.Sections[3].Data...)
		copy(pb[4:8], pb[0:4]) // a repeated column
		bad.Sections[3] = Section{permTag, pb}
		if _, err := Decode(&bad); err == nil || !strings.Contains(err.Error(), "permutation") {
			t.Fatalf("repeated permutation entry: err %v", err)
		}
		bad.Sections = f.Sections[:3]
		if _, err := Decode(&bad); err == nil {
			t.Fatal("missing PERM section: decoded")
		}
		bad = *f
		bad.Params = []uint64{4, 32, 1, 1 << 5}
		if _, err := Decode(&bad); err == nil || !strings.Contains(err.Error(), "unknown") {
			t.Fatalf("unknown flag: err %v", err)
		}
	}
}
