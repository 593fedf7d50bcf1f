package main

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/internal/testmodel"
	"github.com/qgemv/qgemv/layout"
)

func writeModels(t *testing.T) (ggufPath, stPath string) {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 1))
	var f32 []byte
	for i := 0; i < 64*128; i++ {
		f32 = binary.LittleEndian.AppendUint32(f32, math.Float32bits(float32(rng.NormFloat64())))
	}
	g := testmodel.GGUF(map[string]string{"general.architecture": "llama"}, []testmodel.GGUFTensor{
		{Name: "blk.0.ffn_down.weight", Type: 2, Dims: []uint64{256, 64}, Data: testmodel.Blocks(rng, 2, 64, 256)},
		{Name: "blk.0.ffn_up.weight", Type: 12, Dims: []uint64{256, 48}, Data: testmodel.Blocks(rng, 12, 48, 256)},
		{Name: "blk.0.attn_q.weight", Type: 3, Dims: []uint64{128, 32}, Data: testmodel.Blocks(rng, 3, 32, 128)},
		{Name: "blk.0.attn_k.weight", Type: 8, Dims: []uint64{128, 16}, Data: testmodel.Blocks(rng, 8, 16, 128)},
		{Name: "output.weight", Type: 0, Dims: []uint64{128, 64}, Data: f32},
		{Name: "blk.0.attn_norm.weight", Type: 0, Dims: []uint64{128}, Data: f32[:512]},
	})
	ggufPath = filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(ggufPath, g, 0o644); err != nil {
		t.Fatal(err)
	}
	var ts []testmodel.STTensor
	for _, l := range testmodel.GPTQ(rng, 256, 64, 128, true) {
		l.Name = "model.layers.0.mlp.down_proj." + l.Name
		ts = append(ts, l)
	}
	ts = append(ts, testmodel.STTensor{Name: "lm_head.weight", DType: "F32", Shape: []int{64, 128}, Data: f32})
	stPath = filepath.Join(dir, "m.safetensors")
	if err := os.WriteFile(stPath, testmodel.Safetensors(ts), 0o644); err != nil {
		t.Fatal(err)
	}
	return ggufPath, stPath
}

func TestModelCommands(t *testing.T) {
	gp, sp := writeModels(t)
	dir := t.TempDir()
	for _, p := range []string{gp, sp} {
		if err := cmdInspect([]string{p}); err != nil {
			t.Fatalf("inspect %s: %v", p, err)
		}
	}
	for _, c := range []struct {
		file, tensor string
		want         string
		extra        []string
	}{
		{gp, "blk.0.ffn_down.weight", "Bits4G32", nil},
		{gp, "blk.0.ffn_up.weight", "Q4_K", nil},
		{gp, "blk.0.attn_k.weight", "Q8_0", nil},
		{gp, "output.weight", "Bits2G64", []string{"-format", "bits2g64"}},
		{sp, "model.layers.0.mlp.down_proj", "Bits4G128", nil},
		{sp, "lm_head.weight", "Q4G128", nil},
	} {
		out := filepath.Join(dir, strings.ReplaceAll(c.tensor, ".", "_")+".qgv")
		args := append([]string{c.file, "-tensor", c.tensor, "-o", out}, c.extra...)
		if err := cmdImport(args); err != nil {
			t.Fatalf("import %v: %v", args, err)
		}
		m, err := layout.LoadMatrix(out)
		if err != nil {
			t.Fatal(err)
		}
		if m.Name() != c.want {
			t.Fatalf("%s imported as %s, want %s", c.tensor, m.Name(), c.want)
		}
	}
	for _, args := range [][]string{
		{gp, "-tensor", "missing", "-o", filepath.Join(dir, "x.qgv")},
		{gp, "-tensor", "blk.0.attn_norm.weight", "-o", filepath.Join(dir, "x.qgv")},
		{gp, "-tensor", "blk.0.ffn_down.weight"},
		{filepath.Join(dir, "none.gguf"), "-tensor", "a", "-o", filepath.Join(dir, "x.qgv")},
	} {
		if err := cmdImport(args); err == nil {
			t.Errorf("import %v: no error", args)
		}
	}
	for _, p := range []string{gp, sp} {
		for _, act := range []string{"a8", "a32"} {
			if err := cmdBench([]string{"-model", p, "-act", act, "-mintime", "1ms", "-quiet", "-hugepages=false", "-json"}); err != nil {
				t.Fatalf("bench -model %s -act %s: %v", p, act, err)
			}
		}
	}
	// A truncated model is an error, not a panic.
	raw, _ := os.ReadFile(gp)
	bad := filepath.Join(dir, "bad.gguf")
	os.WriteFile(bad, raw[:len(raw)-100], 0o644)
	if err := cmdInspect([]string{bad}); err == nil {
		t.Fatal("truncated GGUF inspected")
	}
}
