package qgemv_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qgemv/qgemv"
)

// stTensor is one tensor of writeSafetensors.
type stTensor struct {
	name, dtype string
	shape       []int64
	data        []byte
}

// writeSafetensors writes the tensors, in order, as a safetensors file.
func writeSafetensors(t *testing.T, path string, ts []stTensor) {
	t.Helper()
	hdr := map[string]any{}
	var body []byte
	for _, x := range ts {
		b := len(body)
		body = append(body, x.data...)
		hdr[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int{b, len(body)}}
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), body...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ggufEmpty returns a GGUF (version 3, no metadata) of tensors of type
// typ, dims ne (ne[0] innermost), offset 0 and no data: zero-size shapes
// or types without a size only.
func ggufEmpty(typ uint32, names []string, ne ...uint64) []byte {
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("GGUF")
	le(uint32(3))
	le(uint64(len(names))) // tensors
	le(uint64(0))          // keys
	for _, name := range names {
		le(uint64(len(name)))
		b.WriteString(name)
		le(uint32(len(ne)))
		for _, d := range ne {
			le(d)
		}
		le(typ)
		le(uint64(0)) // offset
	}
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	return b.Bytes()
}

// ggufF16 is ggufEmpty of one F16 tensor.
func ggufF16(name string, ne ...uint64) []byte { return ggufEmpty(1, []string{name}, ne...) }

// TestModelManyUnsupported: a GGUF of many small tensors of a type qgemv
// does not read lists each with its reason, found once per type: the
// reason names every supported type, and a copy per tensor made the
// listing of a small file of tiny tensors tens of times its size.
func TestModelManyUnsupported(t *testing.T) {
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("blk.%d.ffn_down.weight", i)
	}
	p := filepath.Join(t.TempDir(), "unknown.gguf")
	if err := os.WriteFile(p, ggufEmpty(99, names, 1, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	md, err := qgemv.OpenModel(p)
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	ts := md.Tensors()
	if len(ts) != len(names) {
		t.Fatalf("%d tensors listed, want %d", len(ts), len(names))
	}
	var reason error
	for _, ti := range ts {
		var te *qgemv.TensorError
		if !errors.As(ti.Err, &te) || te.Tensor != ti.Name || te.Err == nil {
			t.Fatalf("%s: %v, want a TensorError naming it", ti.Name, ti.Err)
		}
		if reason == nil {
			reason = te.Err
		} else if te.Err != reason {
			t.Fatalf("%s: its reason is a copy of the first tensor's, not the same value", ti.Name)
		}
	}
}

// TestModelImpossibleShapes: tensors whose stored shape is no matrix
// (a zero or negative dimension, or more elements than any matrix) are
// listed with the reason instead of as loadable NxM matrices. GGUF
// float tensors of [0, 8] and [8, 0] and an HQQ layer whose .shape said
// [-4, 64] were listed without an error before (their loads failed).
func TestModelImpossibleShapes(t *testing.T) {
	dir := t.TempDir()
	for _, ne := range [][]uint64{{0, 8}, {8, 0}, {0, 1 << 30}} {
		p := filepath.Join(dir, "zero.gguf")
		if err := os.WriteFile(p, ggufF16("blk.0.ffn_down.weight", ne...), 0o644); err != nil {
			t.Fatal(err)
		}
		md, err := qgemv.OpenModel(p)
		if err != nil {
			t.Fatalf("%v: %v", ne, err)
		}
		ts := md.Tensors()
		if len(ts) != 1 || ts[0].Err == nil || !strings.Contains(ts[0].Err.Error(), "blk.0.ffn_down.weight") {
			t.Errorf("GGUF F16 of dims %v listed as %+v, want an error naming the tensor", ne, ts)
		}
		md.Close()
	}
	i32 := func(v ...int32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
		return b
	}
	p := filepath.Join(dir, "model.safetensors")
	writeSafetensors(t, p, []stTensor{
		{"model.layers.0.mlp.down_proj.W_q", "U8", []int64{2, 64}, make([]byte, 128)},
		{"model.layers.0.mlp.down_proj.scale", "F16", []int64{4, 1}, make([]byte, 8)},
		{"model.layers.0.mlp.down_proj.zero", "F16", []int64{4, 1}, make([]byte, 8)},
		{"model.layers.0.mlp.down_proj.shape", "I32", []int64{2}, i32(-4, 64)},
		{"model.layers.0.mlp.down_proj.nbits", "I32", []int64{1}, i32(4)},
	})
	md, err := qgemv.OpenModel(p, qgemv.WithQuantConfig(qgemv.QuantConfig{Method: "hqq", Bits: 4, GroupSize: 64}))
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	ts := md.Tensors()
	if len(ts) != 1 || ts[0].Err == nil {
		t.Errorf("HQQ layer of .shape [-4, 64] listed as %+v, want an error", ts)
	}
}

// TestModelActOrderWithoutGIdx: a GPTQ layer without g_idx under a
// config that says desc_act is listed with an error naming g_idx (its
// columns' order is unknown); it loaded with the plain grouping before.
// Without desc_act the same layer loads.
func TestModelActOrderWithoutGIdx(t *testing.T) {
	const in, out = 256, 64
	i32 := func(n int, v uint32) []byte {
		b := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], v)
		}
		return b
	}
	scales := make([]byte, 2*2*out)
	for i := 0; i < len(scales); i += 2 {
		binary.LittleEndian.PutUint16(scales[i:], 0x3c00) // 1.0
	}
	for _, descAct := range []bool{true, false} {
		dir := t.TempDir()
		p := filepath.Join(dir, "model.safetensors")
		writeSafetensors(t, p, []stTensor{
			{"model.layers.0.mlp.down_proj.qweight", "I32", []int64{in / 8, out}, i32(in/8*out, 0x76543210)},
			{"model.layers.0.mlp.down_proj.qzeros", "I32", []int64{2, out / 8}, i32(2*out/8, 0x77777777)},
			{"model.layers.0.mlp.down_proj.scales", "F16", []int64{2, out}, scales},
		})
		cfg := fmt.Sprintf(`{"bits":4,"group_size":128,"desc_act":%v}`, descAct)
		if err := os.WriteFile(filepath.Join(dir, "quantize_config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		md, err := qgemv.OpenModel(p)
		if err != nil {
			t.Fatal(err)
		}
		ts := md.Tensors()
		md.Close()
		if len(ts) != 1 {
			t.Fatalf("%d tensors listed", len(ts))
		}
		if failed := ts[0].Err != nil && strings.Contains(ts[0].Err.Error(), "g_idx"); failed != descAct {
			t.Errorf("desc_act %v, no g_idx: listed with error %v", descAct, ts[0].Err)
		}
	}
}
