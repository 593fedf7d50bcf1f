package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ggml"
)

// writer builds GGUF files independently of the parser, following the
// published specification (ggml/docs/gguf.md).
type writer struct {
	kv      []byte
	nkv     int
	infos   []byte
	data    []byte
	ntensor int
	align   int
}

func (w *writer) str(b []byte, s string) []byte {
	return append(binary.LittleEndian.AppendUint64(b, uint64(len(s))), s...)
}

func (w *writer) kvU32(k string, v uint32) {
	w.kv = w.str(w.kv, k)
	w.kv = binary.LittleEndian.AppendUint32(w.kv, 4)
	w.kv = binary.LittleEndian.AppendUint32(w.kv, v)
	w.nkv++
}

func (w *writer) kvString(k, v string) {
	w.kv = w.str(w.kv, k)
	w.kv = binary.LittleEndian.AppendUint32(w.kv, 8)
	w.kv = w.str(w.kv, v)
	w.nkv++
}

func (w *writer) kvStrings(k string, v []string) {
	w.kv = w.str(w.kv, k)
	w.kv = binary.LittleEndian.AppendUint32(w.kv, 9)
	w.kv = binary.LittleEndian.AppendUint32(w.kv, 8)
	w.kv = binary.LittleEndian.AppendUint64(w.kv, uint64(len(v)))
	for _, s := range v {
		w.kv = w.str(w.kv, s)
	}
	w.nkv++
}

func (w *writer) tensor(name string, typ Type, dims []uint64, data []byte) {
	a := w.align
	if a == 0 {
		a = 32
	}
	for len(w.data)%a != 0 {
		w.data = append(w.data, 0)
	}
	w.infos = w.str(w.infos, name)
	w.infos = binary.LittleEndian.AppendUint32(w.infos, uint32(len(dims)))
	for _, d := range dims {
		w.infos = binary.LittleEndian.AppendUint64(w.infos, d)
	}
	w.infos = binary.LittleEndian.AppendUint32(w.infos, uint32(typ))
	w.infos = binary.LittleEndian.AppendUint64(w.infos, uint64(len(w.data)))
	w.data = append(w.data, data...)
	w.ntensor++
}

func (w *writer) bytes() []byte {
	a := w.align
	if a == 0 {
		a = 32
	}
	out := []byte("GGUF")
	out = binary.LittleEndian.AppendUint32(out, 3)
	out = binary.LittleEndian.AppendUint64(out, uint64(w.ntensor))
	out = binary.LittleEndian.AppendUint64(out, uint64(w.nkv))
	out = append(append(out, w.kv...), w.infos...)
	for len(out)%a != 0 {
		out = append(out, 0)
	}
	return append(out, w.data...)
}

func randHalf(rng *rand.Rand, lo, hi float64) []byte {
	h := layout.ToFP16(float32(lo + rng.Float64()*(hi-lo)))
	return binary.LittleEndian.AppendUint16(nil, uint16(h))
}

// randBlocks returns random blocks of type t for a rows x cols matrix
// with sane fp16 fields, and the ggml dequantization (float32 arithmetic,
// as ggml-quants.c dequantize_row_* computes it).
func randBlocks(rng *rand.Rand, t Type, rows, cols int) ([]byte, []float32) {
	var data []byte
	var w []float32
	f16 := func(b []byte) float32 { return layout.FP16(binary.LittleEndian.Uint16(b)).Float32() }
	for r := 0; r < rows; r++ {
		switch t {
		case Q4_0, Q4_1:
			for k := 0; k < cols/32; k++ {
				blk := randHalf(rng, 1e-3, 0.1)
				if t == Q4_1 {
					blk = append(blk, randHalf(rng, -0.5, 0.5)...)
				}
				qs := make([]byte, 16)
				for i := range qs {
					qs[i] = byte(rng.Uint32())
				}
				blk = append(blk, qs...)
				d := f16(blk)
				y := make([]float32, 32)
				for j := 0; j < 16; j++ {
					if t == Q4_0 {
						x0, x1 := float32(int(qs[j]&15)-8), float32(int(qs[j]>>4)-8)
						y[j], y[j+16] = x0*d, x1*d
					} else {
						m := f16(blk[2:])
						x0, x1 := float32(qs[j]&15), float32(qs[j]>>4)
						y[j], y[j+16] = x0*d+m, x1*d+m
					}
				}
				data, w = append(data, blk...), append(w, y...)
			}
		case Q8_0:
			for k := 0; k < cols/32; k++ {
				blk := randHalf(rng, 1e-4, 0.01)
				for j := 0; j < 32; j++ {
					blk = append(blk, byte(rng.Uint32()))
				}
				d := f16(blk)
				for j := 0; j < 32; j++ {
					w = append(w, float32(int8(blk[2+j]))*d)
				}
				data = append(data, blk...)
			}
		case Q4_K:
			for k := 0; k < cols/256; k++ {
				blk := append(randHalf(rng, 1e-4, 0.01), randHalf(rng, 1e-4, 0.01)...)
				for j := 0; j < 12+128; j++ {
					blk = append(blk, byte(rng.Uint32()))
				}
				d, dmin := f16(blk), f16(blk[2:])
				sc := blk[4:16]
				q := blk[16:]
				is := 0
				for j := 0; j < 256; j += 64 {
					// get_scale_min_k4, written out.
					get := func(j int) (uint8, uint8) {
						if j < 4 {
							return sc[j] & 63, sc[j+4] & 63
						}
						return (sc[j+4] & 0xF) | ((sc[j-4] >> 6) << 4), (sc[j+4] >> 4) | ((sc[j] >> 6) << 4)
					}
					s1, m1 := get(is)
					d1, mm1 := d*float32(s1), dmin*float32(m1)
					s2, m2 := get(is + 1)
					d2, mm2 := d*float32(s2), dmin*float32(m2)
					for l := 0; l < 32; l++ {
						w = append(w, d1*float32(q[l]&0xF)-mm1)
					}
					for l := 0; l < 32; l++ {
						w = append(w, d2*float32(q[l]>>4)-mm2)
					}
					q = q[32:]
					is += 2
				}
				data = append(data, blk...)
			}
		}
	}
	return data, w
}

func TestImportExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var w writer
	w.kvString("general.architecture", "llama")
	w.kvU32("general.alignment", 64)
	w.align = 64
	w.kvStrings("tokenizer.ggml.tokens", []string{"a", "bb", ""})
	type tc struct {
		name       string
		typ        Type
		rows, cols int
		want       []float32
	}
	var cases []tc
	for _, c := range []tc{{"q40", Q4_0, 7, 96, nil}, {"q41", Q4_1, 5, 160, nil}, {"q80", Q8_0, 9, 64, nil}, {"q4k", Q4_K, 6, 512, nil}, {"q4k.b", Q4_K, 3, 256, nil}} {
		data, want := randBlocks(rng, c.typ, c.rows, c.cols)
		w.tensor(c.name, c.typ, []uint64{uint64(c.cols), uint64(c.rows)}, data)
		c.want = want
		cases = append(cases, c)
	}
	f32 := []float32{1, -2.5, 3, 0.25, 5, 6}
	var fb []byte
	for _, v := range f32 {
		fb = binary.LittleEndian.AppendUint32(fb, math.Float32bits(v))
	}
	w.tensor("f32", F32, []uint64{3, 2}, fb)
	w.tensor("f16", F16, []uint64{2}, []byte{0x00, 0x3c, 0x00, 0xc1}) // 1, -2.5
	w.tensor("bf16", BF16, []uint64{1, 1, 1}, []byte{0x40, 0x40})     // 3
	w.tensor("iq2", Type(16), []uint64{256, 1}, make([]byte, 66))     // IQ2_XXS: size unknown here
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, w.bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Alignment != 64 || f.Metadata["general.architecture"] != "llama" || len(f.Metadata["tokenizer.ggml.tokens"].([]string)) != 3 {
		t.Fatalf("metadata %v", f.Metadata)
	}
	for _, c := range cases {
		tn, err := f.Tensor(c.name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tn.ImportGGML()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.Contains(tn.ImportsAs(), "exact") {
			t.Fatalf("%s imports as %q", c.name, tn.ImportsAs())
		}
		if b.IntegerZeros() != nil || c.cols%128 == 0 && len(b.Data) != len(tn.Data) {
			t.Fatalf("%s: integer zeros %v, %d bytes (file: %d)", c.name, b.IntegerZeros(), len(b.Data), len(tn.Data))
		}
		bb, err := tn.ImportBits()
		if err != nil {
			t.Fatalf("%s: ImportBits: %v", c.name, err)
		}
		wantA8 := c.typ == Q4_0 || c.typ == Q8_0
		if (bb.IntegerZeros() == nil) != wantA8 {
			t.Fatalf("%s: Bits integer zeros %v", c.name, bb.IntegerZeros())
		}
		for _, got := range [][]float32{b.Dequantize(), bb.Dequantize()} {
			for i := range c.want {
				if math.Float32bits(got[i]) != math.Float32bits(c.want[i]) {
					t.Fatalf("%s (%s): element (%d, %d) = %v, ggml gives %v", c.name, c.typ, i/c.cols, i%c.cols, got[i], c.want[i])
				}
			}
		}
	}
	for name, want := range map[string][]float32{"f32": f32, "f16": {1, -2.5}, "bf16": {3}} {
		tn, _ := f.Tensor(name)
		got, err := tn.Float32s()
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %v %v", name, got, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: %v, want %v", name, got, want)
			}
		}
	}
	iq2, _ := f.Tensor("iq2")
	if _, err := iq2.Import(); err == nil || !strings.Contains(err.Error(), `"iq2"`) || !strings.Contains(iq2.ImportsAs(), "not supported") {
		t.Fatalf("type 16: %v, %q", err, iq2.ImportsAs())
	}
	if r, c, err := iq2.Shape2D(); err != nil || r != 1 || c != 256 {
		t.Fatal(r, c, err)
	}
}

func TestParseErrors(t *testing.T) {
	var w writer
	w.kvString("general.name", "x")
	data, _ := randBlocks(rand.New(rand.NewPCG(3, 3)), Q4_0, 2, 64)
	w.tensor("t", Q4_0, []uint64{64, 2}, data)
	w.tensor("u", F32, []uint64{4}, make([]byte, 16))
	good := w.bytes()
	if _, err := Parse(good); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(good); i++ { // every strict prefix is an error
		if _, err := Parse(good[:i]); err == nil {
			t.Fatalf("prefix of %d bytes parsed", i)
		}
	}
	mod := func(at int, v []byte) []byte {
		b := append([]byte(nil), good...)
		copy(b[at:], v)
		return b
	}
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	kvEnd := 24 + 8 + len("general.name") + 4 + 8 + 1
	cases := map[string][]byte{
		"magic":         mod(0, []byte("GGUG")),
		"version 1":     mod(4, u32(1)),
		"big endian":    mod(4, []byte{0, 0, 0, 3}),
		"many tensors":  mod(8, u64(1<<40)),
		"many keys":     mod(16, u64(1<<40)),
		"huge key":      mod(24, u64(1<<62)),
		"value type":    mod(24+8+len("general.name"), u32(99)),
		"huge string":   mod(24+8+len("general.name")+4, u64(1<<40)),
		"n_dims 5":      mod(kvEnd+8+1, u32(5)),
		"huge dim":      mod(kvEnd+8+1+4, u64(1<<62)),
		"bad offset":    mod(kvEnd+8+1+4+16+4, u64(3)),
		"offset past":   mod(kvEnd+8+1+4+16+4, u64(1<<40)),
		"ne0 not block": mod(kvEnd+8+1+4, u64(48)),
	}
	for name, b := range cases {
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: parsed", name)
		} else if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v does not wrap ErrFormat", name, err)
		}
	}
	// Overlapping tensors and a duplicate name.
	var o writer
	o.tensor("a", F32, []uint64{16}, make([]byte, 64))
	o.tensor("b", F32, []uint64{8}, make([]byte, 32))
	ob := o.bytes()
	// Point b's offset (the last 8 bytes of its info) at a's data.
	infoEnd := 24 + (8+1+4+8+4+8)*2
	copy(ob[infoEnd-8:], u64(32))
	if _, err := Parse(ob); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("overlap: %v", err)
	}
	var d writer
	d.tensor("a", F32, []uint64{1}, make([]byte, 4))
	d.tensor("a", F32, []uint64{1}, make([]byte, 4))
	if _, err := Parse(d.bytes()); err == nil {
		t.Fatal("duplicate tensor name parsed")
	}
	var al writer
	al.kvU32("general.alignment", 24)
	if _, err := Parse(al.bytes()); err == nil {
		t.Fatal("alignment 24 parsed")
	}
	// A key past GGUF's 2^16-1 bytes is an error before anything quotes
	// it: a 1 MiB key of zero bytes allocated about 57 MiB of labels.
	var lk writer
	lk.kvU32(strings.Repeat("\x00", 1<<20), 1)
	lk.tensor("a", F32, []uint64{1}, make([]byte, 4))
	b := lk.bytes()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	if _, err := Parse(b); err == nil || !strings.Contains(err.Error(), "at most 65535") {
		t.Fatalf("1 MiB key: %v", err)
	}
	runtime.ReadMemStats(&ms)
	if got := ms.TotalAlloc - before; got > 4<<20 {
		t.Errorf("parsing a file with a 1 MiB key allocated %d bytes", got)
	}
}

func FuzzParse(f *testing.F) {
	var w writer
	w.kvString("general.name", "x")
	w.kvStrings("a", []string{"p", "q"})
	data, _ := randBlocks(rand.New(rand.NewPCG(4, 4)), Q4_K, 1, 256)
	w.tensor("k", Q4_K, []uint64{256, 1}, data)
	d2, _ := randBlocks(rand.New(rand.NewPCG(5, 5)), Q4_1, 1, 32)
	w.tensor("q", Q4_1, []uint64{32, 1}, d2)
	f.Add(w.bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		for _, tn := range file.Tensors {
			tn.ImportsAs()
			if Lossless(tn.Type) {
				if b, err := tn.ImportGGML(); err == nil {
					b.Dequantize()
				}
				tn.Import()
			}
			if Float(tn.Type) {
				tn.Float32s()
			}
		}
	})
}

// TestGGUFPyFixture reads a file written by llama.cpp's own Python package
// (gguf-py; internal/testmodel/reference/make_fixtures.py): its quantizer
// made the Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 tensors (the others are random
// blocks) and its dequantizer the .expected ones.
func TestGGUFPyFixture(t *testing.T) {
	f, err := Open("testdata/gguf_py.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Metadata["general.architecture"] != "llama" {
		t.Fatalf("metadata %v", f.Metadata)
	}
	n := 0
	for _, tn := range f.Tensors {
		if !Lossless(tn.Type) {
			continue
		}
		exp, err := f.Tensor(tn.Name + ".expected")
		if err != nil {
			t.Fatal(err)
		}
		want, err := exp.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		var given []byte // every other tensor imported into memory of the test's, read by the test
		var read int
		b, err := tn.ImportGGML()
		if n%2 == 1 {
			b, err = tn.ImportGGMLWith(ImportOptions{
				Data: func(k int) []byte { given = make([]byte, k); return given },
				Read: func(dst, src []byte) error { read += copy(dst, src); return nil },
			})
			if read != len(tn.Data) {
				t.Fatalf("%s: %d bytes went through Read, the tensor has %d", tn.Name, read, len(tn.Data))
			}
			failing := func(dst, src []byte) error { return fmt.Errorf("disk on fire") }
			if _, err := tn.ImportGGMLWith(ImportOptions{Read: failing}); err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), tn.Name) {
				t.Fatalf("%s: a failing read: %v", tn.Name, err)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", tn.Name, err)
		}
		if given != nil && &b.Data[0] != &given[0] {
			t.Fatalf("%s: ImportGGMLWith copied the blocks out of the memory it was given", tn.Name)
		}
		if _, err := tn.ImportGGMLWith(ImportOptions{Data: func(k int) []byte { return make([]byte, k+1) }}); err == nil || !strings.Contains(err.Error(), tn.Name) || !strings.Contains(err.Error(), "bytes, want") {
			t.Fatalf("%s: a data function of the wrong length: %v", tn.Name, err)
		}
		if !strings.Contains(tn.ImportsAs(), "exact") || int64(len(b.Data)) != int64(len(tn.Data)) {
			t.Fatalf("%s: imports as %q, %d bytes (file: %d)", tn.Name, tn.ImportsAs(), len(b.Data), len(tn.Data))
		}
		got := b.Dequantize()
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, gguf-py has %d", tn.Name, len(got), len(want))
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: element %d = %v, gguf-py dequantizes %v", tn.Name, i, got[i], want[i])
			}
		}
		n++
	}
	if n != len(ggml.Types) {
		t.Fatalf("%d quantized tensors checked, want %d (every ggml block type)", n, len(ggml.Types))
	}
}

// TestMixedFixture: a model-shaped file with a tensor of every importable
// type (gguf-py wrote it, make_fixtures.py) reads whole, and every
// tensor's Dequantize equals gguf-py's dequantization in
// mixed_expected.gguf bit for bit.
func TestMixedFixture(t *testing.T) {
	f, err := Open("testdata/mixed.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e, err := Open("testdata/mixed_expected.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	seen := map[Type]bool{}
	for _, tn := range f.Tensors {
		if strings.Contains(tn.ImportsAs(), "not supported") {
			t.Errorf("%s (%s): %s", tn.Name, tn.Type, tn.ImportsAs())
			continue
		}
		got, err := tn.Dequantize()
		if err != nil {
			t.Fatalf("%s: %v", tn.Name, err)
		}
		if Lossless(tn.Type) { // what models load: the same values
			m, err := tn.Import()
			if err != nil {
				t.Fatalf("%s: %v", tn.Name, err)
			}
			d := m.(interface{ Dequantize() []float32 }).Dequantize()
			for i := range d {
				if math.Float32bits(d[i]) != math.Float32bits(got[i]) {
					t.Fatalf("%s: Import as %s: element %d = %v, want %v", tn.Name, m.Name(), i, d[i], got[i])
				}
			}
		}
		exp, err := e.Tensor(tn.Name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := exp.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, gguf-py has %d", tn.Name, len(got), len(want))
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s (%s): element %d = %v, gguf-py dequantizes %v", tn.Name, tn.Type, i, got[i], want[i])
			}
		}
		seen[tn.Type] = true
	}
	for _, typ := range append([]Type{F32, F16, BF16}, func() (ts []Type) {
		for _, g := range ggml.Types {
			ts = append(ts, Type(g))
		}
		return
	}()...) {
		if !seen[typ] {
			t.Errorf("the mixed file has no %s tensor", typ)
		}
	}
}

// TestImportBadInput: bad blocks are errors naming the tensor, never
// panics: non-finite binary16 scales, a byte count that does not match the
// shape, columns that are not whole blocks, unknown types.
func TestImportBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, gt := range ggml.Types {
		typ := Type(gt)
		blk, siz := typ.BlockSize()
		data := make([]byte, 2*siz*(256/blk))
		ggml.RandomBlocks(gt, rng, data)
		good := &Tensor{Name: "blk.0." + gt.String(), Dims: []uint64{256, 2}, Type: typ, Data: data}
		if _, err := good.Import(); err != nil {
			t.Fatalf("%s: %v", gt, err)
		}
		// a NaN and an infinite d in the last block
		for _, h := range []uint16{0x7e00, 0xfc00} {
			bad := append([]byte(nil), data...)
			off := map[ggml.Type]int{ggml.Q2_K: 80, ggml.Q3_K: 108, ggml.Q6_K: 208}[gt]
			binary.LittleEndian.PutUint16(bad[len(bad)-siz+off:], h)
			tn := *good
			tn.Data = bad
			if _, err := tn.Import(); err == nil || !strings.Contains(err.Error(), tn.Name) || !strings.Contains(err.Error(), "finite") {
				t.Errorf("%s: non-finite d %#x: %v", gt, h, err)
			}
		}
		// past the first 64 KiB copied (the scales are checked a piece
		// at a time): the last row is named
		const tall = 1200
		tdata := make([]byte, tall*siz*(256/blk))
		ggml.RandomBlocks(gt, rng, tdata)
		off := map[ggml.Type]int{ggml.Q2_K: 80, ggml.Q3_K: 108, ggml.Q6_K: 208}[gt]
		binary.LittleEndian.PutUint16(tdata[len(tdata)-siz+off:], 0x7c00)
		tt := &Tensor{Name: "tall", Dims: []uint64{256, tall}, Type: typ, Data: tdata}
		want := fmt.Sprintf("row %d block %d", tall-1, 256/blk-1)
		if _, err := tt.ImportGGML(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: infinite d in the last of %d rows: %v (want %q)", gt, tall, err, want)
		}
		for _, tn := range []Tensor{
			{Name: "short", Dims: []uint64{256, 2}, Type: typ, Data: data[:len(data)-1]},
			{Name: "long", Dims: []uint64{256, 2}, Type: typ, Data: append(append([]byte(nil), data...), 0)},
			{Name: "cols", Dims: []uint64{uint64(blk) + 16, 1}, Type: typ, Data: data[:2*siz]},
			{Name: "nodata", Dims: []uint64{256, 2}, Type: typ},
			{Name: "cube", Dims: []uint64{256, 1, 2}, Type: typ, Data: data},
		} {
			if _, err := tn.Import(); err == nil || !strings.Contains(err.Error(), `"`+tn.Name+`"`) {
				t.Errorf("%s %s: %v", gt, tn.Name, err)
			}
			if _, err := tn.Dequantize(); err == nil {
				t.Errorf("%s %s: Dequantize accepted it", gt, tn.Name)
			}
		}
	}
	unk := &Tensor{Name: "odd", Dims: []uint64{32, 1}, Type: Type(99), Data: make([]byte, 32)}
	if _, err := unk.Import(); err == nil || !strings.Contains(err.Error(), `"odd"`) {
		t.Errorf("type 99: %v", err)
	}
	if as := unk.ImportsAs(); !strings.Contains(as, "unknown ggml type id 99") {
		t.Errorf("type 99 imports as %q", as)
	}
	// A truncated super-block in a file: Parse names the tensor.
	var w writer
	w.tensor("trunc", Q6_K, []uint64{256, 2}, make([]byte, 2*210-5))
	if _, err := Parse(w.bytes()); err == nil || !strings.Contains(err.Error(), `"trunc"`) {
		t.Errorf("truncated Q6_K: %v", err)
	}
}

// TestArrayMemory: metadata arrays are typed slices, so parsing one takes
// about the memory of its bytes (a []any took 8 to 16 times as much: a
// crafted 1 GB file could have cost over 10 GB), and each element type
// comes back as its slice type.
func TestArrayMemory(t *testing.T) {
	const n = 1 << 20
	var w writer
	w.kv = w.str(w.kv, "big")
	w.kv = binary.LittleEndian.AppendUint32(w.kv, 9) // array
	w.kv = binary.LittleEndian.AppendUint32(w.kv, 2) // of uint16
	w.kv = binary.LittleEndian.AppendUint64(w.kv, n)
	w.kv = append(w.kv, make([]byte, 2*n)...)
	w.nkv++
	w.kvStrings("names", []string{"a", "bc"})
	w.kv = w.str(w.kv, "nested")
	w.kv = binary.LittleEndian.AppendUint32(w.kv, 9)
	w.kv = binary.LittleEndian.AppendUint32(w.kv, 9) // array of arrays
	w.kv = binary.LittleEndian.AppendUint64(w.kv, 1)
	w.kv = binary.LittleEndian.AppendUint32(w.kv, 6) // of float32
	w.kv = binary.LittleEndian.AppendUint64(w.kv, 1)
	w.kv = binary.LittleEndian.AppendUint32(w.kv, math.Float32bits(1.5))
	w.nkv++
	data := w.bytes()
	var f *File
	least := ^uint64(0) // of three runs: the counter is process-wide
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var err error
		f, err = Parse(data)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	if least > 4*n {
		t.Errorf("parsing a %d-byte uint16 array allocated %d bytes", 2*n, least)
	}
	if a, ok := f.Metadata["big"].([]uint16); !ok || len(a) != n {
		t.Errorf("big: %T of %d", f.Metadata["big"], len(a))
	}
	if a, ok := f.Metadata["names"].([]string); !ok || len(a) != 2 || a[1] != "bc" {
		t.Errorf("names: %#v", f.Metadata["names"])
	}
	if a, ok := f.Metadata["nested"].([]any); !ok || len(a) != 1 || !reflect.DeepEqual(a[0], []float32{1.5}) {
		t.Errorf("nested: %#v", f.Metadata["nested"])
	}
}
