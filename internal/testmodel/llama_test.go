package testmodel

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/gguf"
	"github.com/qgemv/qgemv/layout/hfquant"
	"github.com/qgemv/qgemv/layout/safetensors"
)

// TestUseMoreBits: llama.cpp's layer choice for 4 and 32 layers.
func TestUseMoreBits(t *testing.T) {
	var got []int
	for i := 0; i < 32; i++ {
		if useMoreBits(i, 32) {
			got = append(got, i)
		}
	}
	want := []int{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}
	if len(got) != len(want) {
		t.Fatalf("32 layers: %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("32 layers: %v, want %v", got, want)
		}
	}
	for i, w := range []bool{false, false, true, true} {
		if useMoreBits(i, 4) != w {
			t.Fatalf("4 layers, layer %d: %v", i, !w)
		}
	}
}

// dequantQ6K decodes one Q6_K block as ggml's dequantize_row_q6_K does.
func dequantQ6K(b []byte) []float32 {
	ql, qh, sc := b[:128], b[128:192], b[192:208]
	d := layout.FP16(binary.LittleEndian.Uint16(b[208:])).Float32()
	out := make([]float32, 256)
	for n := 0; n < 2; n++ { // two halves of 128
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(ql[64*n+l]&0xF|(qh[32*n+l]>>0&3)<<4) - 32
			q2 := int(ql[64*n+l+32]&0xF|(qh[32*n+l]>>2&3)<<4) - 32
			q3 := int(ql[64*n+l]>>4|(qh[32*n+l]>>4&3)<<4) - 32
			q4 := int(ql[64*n+l+32]>>4|(qh[32*n+l]>>6&3)<<4) - 32
			s := sc[8*n:]
			out[128*n+l] = d * float32(int8(s[is])) * float32(q1)
			out[128*n+l+32] = d * float32(int8(s[is+2])) * float32(q2)
			out[128*n+l+64] = d * float32(int8(s[is+4])) * float32(q3)
			out[128*n+l+96] = d * float32(int8(s[is+6])) * float32(q4)
		}
	}
	return out
}

// TestWriteGGUF: every mix parses with layout/gguf, has llama.cpp's
// metadata and types, every block the importer reads imports, and the
// Q6_K blocks (which it does not read yet) decode to finite weights of
// the intended size.
func TestWriteGGUF(t *testing.T) {
	l := Llama{Layers: 4, Hidden: 256, FFN: 512, KV: 128, Vocab: 512, Seed: 9}
	for _, mix := range Mixes {
		var buf bytes.Buffer
		n, err := l.WriteGGUF(&buf, mix)
		if err != nil || n != int64(buf.Len()) {
			t.Fatalf("%s: %d bytes, %v", mix, n, err)
		}
		f, err := gguf.Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", mix, err)
		}
		if f.Metadata["general.architecture"] != "llama" || f.Metadata["llama.block_count"] != uint32(4) || f.Metadata["general.file_type"] != fileType[mix] {
			t.Fatalf("%s: metadata %v", mix, f.Metadata)
		}
		if len(f.Tensors) != 2+9*4+1 || f.Tensors[0].Name != "token_embd.weight" || f.Tensors[len(f.Tensors)-1].Name != "output.weight" {
			t.Fatalf("%s: %d tensors", mix, len(f.Tensors))
		}
		q6 := 0
		for _, tn := range f.Tensors {
			kind := strings.TrimSuffix(tn.Name, ".weight")
			layer := 0
			if i := strings.LastIndex(kind, "."); i >= 0 {
				layer = int(kind[4] - '0')
				kind = kind[i+1:]
			}
			want := uint32(typeF32)
			if len(tn.Dims) == 2 {
				want, _ = GGUFType(mix, kind, layer, 4)
			}
			if uint32(tn.Type) != want {
				t.Fatalf("%s: %s is %s, want type %d", mix, tn.Name, tn.Type, want)
			}
			switch {
			case tn.Type == gguf.Q6_K:
				q6++
				blk := tn.Data[:210]
				var sum float64
				for _, v := range dequantQ6K(blk) {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || math.Abs(float64(v)) > 1 {
						t.Fatalf("%s: %s: Q6_K weight %v", mix, tn.Name, v)
					}
					sum += math.Abs(float64(v))
				}
				if sum == 0 {
					t.Fatalf("%s: %s: a Q6_K block of zeros", mix, tn.Name)
				}
			case gguf.Lossless(tn.Type):
				b, err := tn.Import()
				if err != nil {
					t.Fatalf("%s: %s: %v", mix, tn.Name, err)
				}
				rows, cols, _ := tn.Shape2D()
				if br, bc := b.Shape(); br != rows || bc != cols {
					t.Fatalf("%s: %s imports as %dx%d", mix, tn.Name, br, bc)
				}
			case gguf.Float(tn.Type):
				vals, err := tn.Float32s()
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range vals {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("%s: %s: value %v", mix, tn.Name, v)
					}
				}
			default:
				t.Fatalf("%s: %s: type %s", mix, tn.Name, tn.Type)
			}
		}
		// Q4_K_M: attn_v and ffn_down of layers 2 and 3, and output.
		if want := map[string]int{MixQ4KM: 5, MixQ4_0: 1, MixQ8_0: 0, MixF16: 0, MixBF16: 0}[mix]; q6 != want {
			t.Fatalf("%s: %d Q6_K tensors, want %d", mix, q6, want)
		}
	}
	if _, err := l.WriteGGUF(&bytes.Buffer{}, "q5_k_s"); err == nil {
		t.Error("an unknown mix: no error")
	}
	if _, err := (Llama{Layers: 1, Hidden: 100, FFN: 256, KV: 1}).WriteGGUF(&bytes.Buffer{}, MixQ4_0); err == nil {
		t.Error("hidden 100: no error")
	}
}

// TestWriteGPTQ: the checkpoint parses, its layers import exactly with
// the settings its config files give, and the files agree.
func TestWriteGPTQ(t *testing.T) {
	l := Llama{Layers: 2, Hidden: 256, FFN: 512, KV: 128, Seed: 4}
	for _, q := range []GPTQConfig{{Bits: 4, Group: 128}, {Bits: 4, Group: 128, ActOrder: true, V2: true}, {Bits: 2, Group: -1}} {
		dir := t.TempDir()
		p, err := l.WriteGPTQ(dir, q)
		if err != nil {
			t.Fatal(err)
		}
		f, err := safetensors.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		prefixes, kinds := hfquant.Layers(f)
		if len(prefixes) != 14 {
			t.Fatalf("%+v: %d layers", q, len(prefixes))
		}
		var qc map[string]any
		raw, _ := os.ReadFile(filepath.Join(dir, "quantize_config.json"))
		if err := json.Unmarshal(raw, &qc); err != nil || qc["bits"] != float64(q.Bits) || qc["desc_act"] != q.ActOrder {
			t.Fatalf("quantize_config.json: %v %v", err, qc)
		}
		for i, pf := range prefixes {
			if kinds[i] != hfquant.KindGPTQ {
				t.Fatalf("%s: %s", pf, kinds[i])
			}
			b, _, err := hfquant.Load(f, pf, hfquant.Options{Bits: q.Bits, V2: q.V2})
			if err != nil {
				t.Fatalf("%+v: %s: %v", q, pf, err)
			}
			if (b.Perm != nil) != q.ActOrder {
				t.Fatalf("%+v: %s: act-order %v", q, pf, b.Perm != nil)
			}
			// Symmetric: every zero point is 2^(bits-1).
			if z := b.Zero(0, 0); z != float32(int(1)<<(q.Bits-1)) {
				t.Fatalf("%+v: %s: zero %v", q, pf, z)
			}
		}
		// Widest dtype first, then names: the library's order.
		if !strings.HasSuffix(f.Names[0], ".g_idx") || f.Names[len(f.Names)-1] != "model.norm.weight" {
			t.Fatalf("order %s ... %s", f.Names[0], f.Names[len(f.Names)-1])
		}
		f.Close()
	}
}

// TestWriteGGUFFloatSchedule: the float mixes, filled in parallel, write
// the same bytes on one thread as on several.
func TestWriteGGUFFloatSchedule(t *testing.T) {
	l := Llama{Layers: 1, Hidden: 256, FFN: 512, KV: 128, Seed: 3}
	for _, mix := range []string{MixF16, MixBF16} {
		var one, many bytes.Buffer
		prev := runtime.GOMAXPROCS(1)
		_, err := l.WriteGGUF(&one, mix)
		runtime.GOMAXPROCS(max(4, prev))
		if err == nil {
			_, err = l.WriteGGUF(&many, mix)
		}
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(one.Bytes(), many.Bytes()) {
			t.Fatalf("%s: the bytes depend on the thread count", mix)
		}
	}
}

// TestWriteFileKeepsTarget: a failed write leaves the file at the path as
// it was and no temporary file beside it; a path that is not a regular
// file (a directory here) is refused before anything is written. Before,
// WriteGGUFFile truncated the target, and removed it on an error (a
// device node included, when run as root).
func TestWriteFileKeepsTarget(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.gguf")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := writeFile(path, func(w io.Writer) (int64, error) {
		w.Write([]byte("partial"))
		return 7, errors.New("disk full")
	})
	if err == nil {
		t.Fatal("a failed write reported success")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("the target holds %q after a failed write, want %q", b, "old")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the directory after a failed write, want the target alone", len(ents))
	}
	if _, err := writeFile(dir, func(w io.Writer) (int64, error) { return 0, nil }); err == nil {
		t.Error("a directory accepted as the target")
	}
	if _, err := writeFile(path, func(w io.Writer) (int64, error) { n, err := w.Write([]byte("new")); return int64(n), err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("the target holds %q after a write, want %q", b, "new")
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm()&0o044 == 0 {
		t.Errorf("the written file's mode: %v (%v), want it readable by others as os.Create made it", st.Mode(), err)
	}
}
