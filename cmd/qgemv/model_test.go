package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
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
	qc := `{"bits": 4, "group_size": 128, "desc_act": true, "sym": true, "checkpoint_format": "gptq"}`
	if err := os.WriteFile(filepath.Join(dir, "quantize_config.json"), []byte(qc), 0o644); err != nil {
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
		{gp, "blk.0.ffn_down.weight", "Q4_0", nil},
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
	t.Setenv("QGEMV_WORKING_SET_MIB", "8")
	for _, p := range []string{gp, sp} {
		for _, act := range []string{"a8", "a32"} {
			if err := cmdBench([]string{"-model", p, "-twin", "-act", act, "-mintime", "1ms", "-quiet", "-hugepages=false", "-json"}); err != nil {
				t.Fatalf("bench -model %s -twin -act %s: %v", p, act, err)
			}
		}
	}
	// Without its config file a GPTQ layer is listed with the reason; the
	// flags stand in for the file.
	os.Remove(filepath.Join(filepath.Dir(sp), "quantize_config.json"))
	err := cmdImport([]string{sp, "-tensor", "model.layers.0.mlp.down_proj", "-o", filepath.Join(dir, "x.qgv")})
	if err == nil || !strings.Contains(err.Error(), "quantize_config.json") || !strings.Contains(err.Error(), "model.layers.0.mlp.down_proj") {
		t.Errorf("import without the config: %v", err)
	}
	if err := cmdImport([]string{sp, "-bits", "4", "-tensor", "model.layers.0.mlp.down_proj", "-o", filepath.Join(dir, "x.qgv")}); err != nil {
		t.Errorf("import -bits 4 without the config: %v", err)
	}
	if err := cmdInspect([]string{sp}); err != nil {
		t.Errorf("inspect without the config: %v", err)
	}
	// A truncated model is an error, not a panic.
	raw, _ := os.ReadFile(gp)
	bad := filepath.Join(dir, "bad.gguf")
	os.WriteFile(bad, raw[:len(raw)-100], 0o644)
	if err := cmdInspect([]string{bad}); err == nil {
		t.Fatal("truncated GGUF inspected")
	}
}

// capture runs f with os.Stdout going to a pipe and returns what it
// printed.
func capture(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	ferr := f()
	os.Stdout = old
	w.Close()
	out := <-done
	r.Close()
	return string(out), ferr
}

// TestBenchDecode: bench -model times decode steps of generated
// LLaMA-shaped models (GGUF Q4_K_M with its Q6_K tensors, GPTQ), prints
// the tables, JSON with a step time and per-type and per-kind rows, and
// an SVG chart that parses as XML with a bar per row.
func TestBenchDecode(t *testing.T) {
	t.Setenv("QGEMV_WORKING_SET_MIB", "8")
	dir := t.TempDir()
	l := testmodel.Llama{Layers: 2, Hidden: 256, FFN: 512, KV: 128, Vocab: 300, Seed: 2}
	gp := filepath.Join(dir, "m.gguf")
	if _, err := l.WriteGGUFFile(gp, testmodel.MixQ4KM); err != nil {
		t.Fatal(err)
	}
	sp, err := l.WriteGPTQ(dir, testmodel.GPTQConfig{Bits: 4, Group: 128, ActOrder: true})
	if err != nil {
		t.Fatal(err)
	}
	shardDir := filepath.Join(dir, "sharded")
	os.Mkdir(shardDir, 0o755)
	ip, err := l.WriteGPTQ(shardDir, testmodel.GPTQConfig{Bits: 4, Group: 128, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		args []string
	}{
		{gp, nil},
		{gp, []string{"-batch", "4", "-act", "a16"}},
		{sp, []string{"-batch", "3"}},
		{sp, []string{"-act", "a32", "-threads", "1"}},
		{ip, nil},       // a sharded checkpoint through its index
		{shardDir, nil}, // and its directory
	} {
		svg := filepath.Join(dir, "chart.svg")
		os.Remove(svg)
		args := append([]string{"-model", c.file, "-mintime", "1ms", "-steps", "3", "-quiet", "-hugepages=false", "-json", "-svg", svg}, c.args...)
		out, err := capture(t, func() error { return cmdBench(args) })
		if err != nil {
			t.Fatalf("bench %v: %v", args, err)
		}
		var r decodeResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("bench %v: JSON: %v\n%s", args, err, out)
		}
		// 2 layers of 7, plus the LM head (GGUF: Q6_K, so only where
		// it loads); the embedding table is not multiplied.
		want := 15 // every tensor, Q4_K_M's Q6_K ones too
		if len(r.NotLoaded) != 0 {
			t.Errorf("bench %v: not loaded: %v", args, r.NotLoaded)
		}
		if len(r.Tensors) != want || r.StepMedianUS <= 0 || r.GBps <= 0 || r.ReadBWGBps <= 0 || r.Steps < 3 || len(r.PerType) == 0 || len(r.PerKind) == 0 {
			t.Fatalf("bench %v: %d tensors, result %+v", args, len(r.Tensors), r)
		}
		if len(r.NotMultiplied) != 1 || !strings.Contains(r.NotMultiplied[0], "token_embd") && !strings.Contains(r.NotMultiplied[0], "embed_tokens") {
			t.Errorf("bench %v: not multiplied %v, want the embedding table", args, r.NotMultiplied)
		}
		var sum float64
		for _, g := range r.PerKind {
			sum += g.TimeUS
		}
		if sum+r.InputUS > 3*r.StepMedianUS || r.Tensors[0].Layer != 0 || r.Tensors[0].Kind != "attn_q" || r.Tensors[len(r.Tensors)-1].Kind != "output" && c.file == sp {
			t.Errorf("bench %v: per-kind times sum to %v us, the step takes %v; first %+v", args, sum, r.StepMedianUS, r.Tensors[0])
		}
		raw, err := os.ReadFile(svg)
		if err != nil {
			t.Fatal(err)
		}
		checkSVG(t, raw, len(r.PerType)+len(r.PerKind))
	}
	// The default workload: a generated LLaMA-3-8B-shaped GPTQ model (one
	// layer here), removed afterwards.
	out, err := capture(t, func() error {
		return cmdBench([]string{"-layers", "1", "-mintime", "1ms", "-steps", "2", "-quiet", "-hugepages=false", "-json"})
	})
	var r decodeResult
	if err != nil || json.Unmarshal([]byte(out), &r) != nil || len(r.Tensors) != 7 || r.Tensors[6].Kind != "ffn_down" || r.Tensors[6].Rows != 4096 || r.Tensors[6].Cols != 14336 {
		t.Fatalf("bench -layers 1: %v\n%s", err, out)
	}
	if _, err := os.Stat(r.File); !os.IsNotExist(err) {
		t.Errorf("the generated model %s is still there: %v", r.File, err)
	}
	// Text output, and the old comparison against native twins.
	if out, err := capture(t, func() error {
		return cmdBench([]string{"-model", sp, "-mintime", "1ms", "-steps", "2", "-quiet", "-hugepages=false"})
	}); err != nil || !strings.Contains(out, "per layer kind") || !strings.Contains(out, "of read bandwidth") {
		t.Errorf("bench -model text: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"-model", gp, "-batch", "17"},
		{"-model", gp, "-batch", "0"},
		{"-model", gp, "-steps", "0"},
		{"-model", filepath.Join(dir, "missing.gguf")},
		{"-svg", "x.svg", "-workload", "ffn"}, // the FFN block draws nothing
		{"-model", gp, "-workload", "ffn"},
		{"-workload", "decode", "-mix", "q5_0", "-layers", "1"},
		{"-workload", "decode", "-layers", "0"},
		{"-twin", "-workload", "decode"}, // without -model
	} {
		if _, err := capture(t, func() error { return cmdBench(append(args, "-mintime", "1ms", "-quiet", "-hugepages=false")) }); err == nil {
			t.Errorf("bench %v: no error", args)
		}
	}
}

// checkSVG parses an SVG chart as XML and checks that it is an svg
// document with a title and a pair of bars per row.
func checkSVG(t *testing.T, raw []byte, rows int) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(raw))
	d.Strict = true
	var root string
	rects, texts := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v\n%s", err, raw)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Space + " " + se.Name.Local
			}
			switch se.Name.Local {
			case "rect":
				rects++
				for _, a := range se.Attr {
					if a.Name.Local == "width" {
						if v, err := strconv.ParseFloat(a.Value, 64); err != nil || v < 0 || math.IsNaN(v) {
							t.Fatalf("rect width %q", a.Value)
						}
					}
				}
			case "text":
				texts++
			}
		}
	}
	if root != "http://www.w3.org/2000/svg svg" {
		t.Fatalf("SVG root %q", root)
	}
	// background + (time, bandwidth) per row + the input row's time bar
	if rects != 1+2*rows+1 || texts < rows {
		t.Fatalf("SVG has %d rects and %d texts for %d rows", rects, texts, rows)
	}
}

// TestGenModel: genmodel writes files that bench -model and inspect read.
func TestGenModel(t *testing.T) {
	dir := t.TempDir()
	small := []string{"-layers", "1", "-hidden", "256", "-ffn", "512", "-kv", "128"}
	g := filepath.Join(dir, "m.gguf")
	if _, err := capture(t, func() error { return cmdGenModel(append([]string{"-mix", "q4_0", "-o", g}, small...)) }); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(dir, "gptq")
	if _, err := capture(t, func() error { return cmdGenModel(append([]string{"-mix", "gptq", "-act-order", "-o", d}, small...)) }); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{g, filepath.Join(d, "model.safetensors")} {
		out, err := capture(t, func() error { return cmdInspect([]string{p}) })
		if err != nil || !strings.Contains(out, "7 weight matrices, 7 loadable") {
			t.Errorf("inspect %s: %v\n%s", p, err, out)
		}
	}
	for _, args := range [][]string{{"-mix", "q4_0"}, {"-mix", "q9", "-o", g}, {"-hidden", "100", "-o", g}, {"-mix", "gptq", "-bits", "3", "-o", d}, {"-o", g, "extra"}} {
		if _, err := capture(t, func() error { return cmdGenModel(args) }); err == nil {
			t.Errorf("genmodel %v: no error", args)
		}
	}
}
