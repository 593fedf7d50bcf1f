package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// testTensor is one tensor for writeST.
type testTensor struct {
	name  string
	dtype string
	shape []int
	data  []byte
}

// writeST builds a safetensors file independently of the reader: JSON
// header padded with spaces to a multiple of 8, then the data in order.
func writeST(ts []testTensor, meta map[string]string) []byte {
	hdr := map[string]any{}
	if meta != nil {
		hdr["__metadata__"] = meta
	}
	var body []byte
	for _, t := range ts {
		hdr[t.name] = map[string]any{"dtype": t.dtype, "shape": t.shape, "data_offsets": []int{len(body), len(body) + len(t.data)}}
		body = append(body, t.data...)
	}
	j, _ := json.Marshal(hdr)
	for len(j)%8 != 0 {
		j = append(j, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(j)))
	return append(append(out, j...), body...)
}

func f32bytes(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func TestParse(t *testing.T) {
	file := writeST([]testTensor{
		{"a", "F32", []int{2, 2}, f32bytes(1, 2, 3, -4)},
		{"h", "F16", []int{3}, []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38}}, // 1, -2, 0.5
		{"b", "BF16", []int{1}, []byte{0x80, 0x3f}},                        // 1
		{"i", "I32", []int{2}, []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}},
		{"s", "I8", []int{}, []byte{0xfe}},
	}, map[string]string{"format": "pt"})
	dir := t.TempDir()
	p := filepath.Join(dir, "t.safetensors")
	if err := os.WriteFile(p, file, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Names; len(got) != 5 || got[0] != "a" || got[4] != "s" {
		t.Fatalf("names %v", got)
	}
	if f.Metadata["format"] != "pt" {
		t.Fatalf("metadata %v", f.Metadata)
	}
	a, _ := f.Tensor("a")
	if v, err := a.Float32s(); err != nil || v[3] != -4 || a.Elems() != 4 {
		t.Fatalf("a: %v %v", v, err)
	}
	h, _ := f.Tensor("h")
	if v, err := h.Float32s(); err != nil || v[0] != 1 || v[1] != -2 || v[2] != 0.5 {
		t.Fatalf("h: %v %v", v, err)
	}
	b, _ := f.Tensor("b")
	if v, err := b.Float32s(); err != nil || v[0] != 1 {
		t.Fatalf("b: %v %v", v, err)
	}
	i, _ := f.Tensor("i")
	if v, err := i.Int32s(); err != nil || v[0] != 1 || v[1] != -1 {
		t.Fatalf("i: %v %v", v, err)
	}
	s, _ := f.Tensor("s")
	if v, err := s.Ints(); err != nil || v[0] != -2 || s.Elems() != 1 {
		t.Fatalf("s: %v %v", v, err)
	}
	if _, err := a.Int32s(); err == nil {
		t.Fatal("F32 read as I32")
	}
	if _, err := a.Int32sView(); err == nil {
		t.Fatal("F32 viewed as I32")
	}
	// The view: the same values, aliasing the data where it is aligned,
	// a copy where it is not.
	for off := 0; off < 4; off++ {
		buf := make([]byte, off+len(i.Data))
		copy(buf[off:], i.Data)
		ti := *i
		ti.Data = buf[off:]
		v, err := ti.Int32sView()
		if err != nil || len(v) != 2 || v[0] != 1 || v[1] != -1 {
			t.Fatalf("i at offset %d: %v %v", off, v, err)
		}
		ti.Data[0] = 7 // a view sees it, a copy does not
		if aligned := uintptr(unsafe.Pointer(&ti.Data[0]))%4 == 0; (v[0] == 7) != aligned {
			t.Errorf("i at offset %d: view %v after a write, aligned %v", off, v, aligned)
		}
	}
	if _, err := f.Tensor("missing"); err == nil {
		t.Fatal("missing tensor found")
	}
}

func TestParseErrors(t *testing.T) {
	good := writeST([]testTensor{{"a", "F32", []int{2}, f32bytes(1, 2)}, {"b", "F32", []int{1}, f32bytes(3)}}, nil)
	hdr := func(j string) []byte {
		out := binary.LittleEndian.AppendUint64(nil, uint64(len(j)))
		return append(append(out, j...), make([]byte, 16)...)
	}
	cases := map[string][]byte{
		"empty":           nil,
		"short":           good[:5],
		"huge header":     binary.LittleEndian.AppendUint64(nil, 1<<62),
		"header past end": append(binary.LittleEndian.AppendUint64(nil, 1000), '{', '}'),
		"bad json":        hdr(`{"a":`),
		"unknown dtype":   hdr(`{"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}}`),
		"offsets past":    hdr(`{"a":{"dtype":"U8","shape":[100],"data_offsets":[0,100]}}`),
		"offsets reverse": hdr(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[8,4]}}`),
		"size mismatch":   hdr(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`),
		"negative dim":    hdr(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`),
		"overflow shape":  hdr(`{"a":{"dtype":"U8","shape":[4294967296,4294967296,16],"data_offsets":[0,16]}}`),
		"huge after zero": hdr(`{"a":{"dtype":"U8","shape":[0,9223372036854775807],"data_offsets":[0,0]}}`),
		"2^32+1 after 0":  hdr(`{"a":{"dtype":"U8","shape":[0,4294967297,4294967297],"data_offsets":[0,0]}}`),
		"overlap":         hdr(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}}`),
		"bad metadata":    hdr(`{"__metadata__":{"k":1}}`),
		"duplicate name":  hdr(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"a":{"dtype":"U8","shape":[8],"data_offsets":[8,16]}}`),
		"not an object":   hdr(`[1,2]`),
		"two objects":     hdr(`{} {}`),
	}
	for name, data := range cases {
		if _, err := Parse(data); err == nil {
			t.Errorf("%s: parsed", name)
		} else if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: error %v does not wrap ErrFormat", name, err)
		}
	}
	// Every strict prefix of a valid file is an error.
	for i := 0; i < len(good); i++ {
		if _, err := Parse(good[:i]); err == nil {
			t.Fatalf("prefix of %d bytes parsed", i)
		}
	}
	if _, err := Open(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("missing file opened")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(writeST([]testTensor{{"a", "F32", []int{2}, f32bytes(1, 2)}}, map[string]string{"x": "y"}))
	f.Add(writeST([]testTensor{{"q", "I32", []int{1, 2}, make([]byte, 8)}, {"s", "F16", []int{2}, make([]byte, 4)}}, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		for _, name := range file.Names {
			tn := file.Tensors[name]
			if len(tn.Data) != tn.Elems()*tn.DType.Size() {
				t.Fatalf("%s: %d bytes for %v %s", name, len(tn.Data), tn.Shape, tn.DType)
			}
			tn.Float32s()
			tn.Ints()
			tn.Int32s()
			tn.Int32sView()
		}
	})
}

// TestIndex: the index's shards in order, merged in that order; a tensor
// in a shard the index does not name for it is an error.
func TestIndex(t *testing.T) {
	a, _ := Parse(writeST([]testTensor{{"w1", "F32", []int{2}, f32bytes(1, 2)}, {"w0", "F32", []int{1}, f32bytes(3)}}, nil))
	b, _ := Parse(writeST([]testTensor{{"w2", "F32", []int{1}, f32bytes(4)}}, nil))
	ix, err := ParseIndex([]byte(`{"metadata": {"total_size": 16}, "weight_map": {"w2": "b.safetensors", "w0": "a.safetensors", "w1": "a.safetensors"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := ix.Shards(); len(s) != 2 || s[0] != "a.safetensors" || s[1] != "b.safetensors" {
		t.Fatalf("shards %v", s)
	}
	m, err := ix.Merge([]*File{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Names) != 3 || m.Names[0] != "w1" || m.Names[1] != "w0" || m.Names[2] != "w2" || m.Tensors["w2"] != b.Tensors["w2"] {
		t.Fatalf("merged names %v", m.Names)
	}
	if _, err := ix.Merge([]*File{b, a}); err == nil || !strings.Contains(err.Error(), "a.safetensors") {
		t.Errorf("shards swapped: %v", err)
	}
	if _, err := ix.Merge([]*File{a}); err == nil || !errors.Is(err, ErrFormat) {
		t.Errorf("one shard of two: %v", err)
	}
	if _, err := ix.Merge([]*File{a, nil}); err == nil {
		t.Error("a nil shard: no error")
	}
	if _, err := (&Index{}).Merge(nil); err == nil {
		t.Error("an empty index: no error")
	}
	for _, bad := range []string{`{"weight_map": {"w": "../a"}}`, `{"weight_map": {"w": "d/a"}}`, `{"weight_map": {"w": ""}}`, `{"weight_map": {}}`, `[]`} {
		if _, err := ParseIndex([]byte(bad)); err == nil || !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if _, err := ParseIndex(make([]byte, MaxIndex+1)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized index: %v", err)
	}
}

// FuzzIndex: any index bytes over two fixed shards parse and merge or fail
// with an error, never a panic; a merge holds every tensor the index lists.
func FuzzIndex(f *testing.F) {
	a, _ := Parse(writeST([]testTensor{{"w1", "F32", []int{2}, f32bytes(1, 2)}, {"w0", "F32", []int{1}, f32bytes(3)}}, nil))
	b, _ := Parse(writeST([]testTensor{{"w2", "F32", []int{1}, f32bytes(4)}}, nil))
	f.Add([]byte(`{"weight_map": {"w2": "b", "w0": "a", "w1": "a"}}`))
	f.Add([]byte(`{"weight_map": {"w2": "a", "w0": "a", "w1": "b"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := ParseIndex(data)
		if err != nil {
			return
		}
		shards := []*File{a, b}
		if n := len(ix.Shards()); n < 2 {
			shards = shards[:n]
		}
		m, err := ix.Merge(shards)
		if err != nil {
			return
		}
		if len(m.Names) != len(ix.WeightMap) || len(m.Tensors) != len(ix.WeightMap) {
			t.Fatalf("merged %d names, %d tensors for an index of %d", len(m.Names), len(m.Tensors), len(ix.WeightMap))
		}
		for i, s := range ix.Shards() {
			for n, tn := range shards[i].Tensors {
				if ix.WeightMap[n] != s || m.Tensors[n] != tn {
					t.Fatalf("%q: in shard %s, the index says %s; merged %p, shard %p", n, s, ix.WeightMap[n], m.Tensors[n], tn)
				}
			}
		}
	})
}
