package qgemv_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/internal/testmodel"
	"github.com/qgemv/qgemv/layout"
)

// smallLlama is a LLaMA-shaped model small enough for unit tests.
var smallLlama = testmodel.Llama{Layers: 4, Hidden: 256, FFN: 512, KV: 128, Seed: 3}

func writeGGUF(t *testing.T, l testmodel.Llama, mix string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), mix+".gguf")
	if _, err := l.WriteGGUFFile(p, mix); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeGPTQ(t *testing.T, l testmodel.Llama, q testmodel.GPTQConfig) string {
	t.Helper()
	p, err := l.WriteGPTQ(t.TempDir(), q)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wantKinds is one generated block's weights in file order.
var wantKinds = []string{"ffn_down", "ffn_gate", "ffn_up", "attn_k", "attn_output", "attn_q", "attn_v"}

// checkWeights loads every tensor of the model, checks that what loads
// multiplies like its imported matrix's float64 reference, that what
// does not is listed with an error naming the file and tensor, and that
// the stages run layer by layer with q/k/v and gate/up together.
func checkWeights(t *testing.T, md *qgemv.Model, wantLoaded int) {
	t.Helper()
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	w, err := md.Load(eng)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, f := range w.Failed() {
		var te *qgemv.TensorError
		if !errors.As(f.Err, &te) || !strings.Contains(f.Err.Error(), md.Path()) || !strings.Contains(f.Err.Error(), f.Name) {
			t.Errorf("%s: error %q does not name the file and tensor", f.Name, f.Err)
		}
	}
	if got := len(w.All()); got != wantLoaded {
		t.Fatalf("%d weights loaded, want %d (failed: %v)", got, wantLoaded, w.Failed())
	}
	// Every loaded weight against its import's reference (A32).
	for _, x := range w.All() {
		m, how, err := md.Import(x.Info.Name)
		if err != nil {
			t.Fatal(err)
		}
		if x.Rows() != x.Info.Rows || x.Cols() != x.Info.Cols {
			t.Fatalf("%s: loaded %dx%d, listed %dx%d", x.Info.Name, x.Rows(), x.Cols(), x.Info.Rows, x.Info.Cols)
		}
		if how == "exact" && x.Info.Type != "HQQ" && !strings.HasPrefix(x.Info.ImportsAs, x.Format()+" ") {
			t.Fatalf("%s: listed as importing as %q, loaded as %s", x.Info.Name, x.Info.ImportsAs, x.Format())
		}
		in := synth.Vector(x.Cols(), 5)
		y := make([]float32, x.Rows())
		if err := x.Mul(y, in, 1, qgemv.A32); err != nil {
			t.Fatal(err)
		}
		ref, mag := make([]float64, x.Rows()), make([]float64, x.Rows())
		m.DotRef(ref, in)
		m.DotRefMag(mag, in)
		rel, abs := m.Tolerance(in)
		for r := range y {
			if d := math.Abs(float64(y[r]) - ref[r]); d > rel*mag[r]+abs {
				t.Fatalf("%s (%s) row %d: %v, reference %v", x.Info.Name, how, r, y[r], ref[r])
			}
		}
	}
	// Stages: layer order, q/k/v and gate/up grouped, no embeddings.
	var got []string
	for _, st := range w.Stages() {
		var ks []string
		for _, x := range st.Weights {
			ks = append(ks, x.Info.Kind)
			if x.Info.Layer != st.Layer {
				t.Fatalf("stage of layer %d holds %s", st.Layer, x.Info.Name)
			}
		}
		got = append(got, fmt.Sprintf("%d:%s", st.Layer, strings.Join(ks, "+")))
	}
	for _, x := range w.All() {
		if x.Info.Kind == qgemv.KindTokenEmbd && strings.Contains(strings.Join(got, " "), "token_embd") {
			t.Fatal("the embedding table is a stage")
		}
	}
	t.Logf("stages: %s", strings.Join(got, " "))
	if wantLoaded == 28 {
		want := ""
		for l := range 4 {
			want += fmt.Sprintf("%d:attn_q+attn_k+attn_v %[1]d:attn_output %[1]d:ffn_gate+ffn_up %[1]d:ffn_down ", l)
		}
		if g := strings.Join(got, " ") + " "; g != want {
			t.Fatalf("stages\n%s\nwant\n%s", g, want)
		}
	}
}

// TestModelGGUFMixes: every generated mix opens with its matrices in
// file order, llama.cpp's types (Q4_K_M: Q6_K attn_v and ffn_down in
// layers 2 and 3), and loads what the importer reads.
func TestModelGGUFMixes(t *testing.T) {
	for _, mix := range testmodel.Mixes {
		t.Run(mix, func(t *testing.T) {
			md, err := qgemv.OpenModel(writeGGUF(t, smallLlama, mix))
			if err != nil {
				t.Fatal(err)
			}
			defer md.Close()
			ts := md.Tensors()
			if len(ts) != 28 || md.Format() != "gguf" {
				t.Fatalf("%s: %d tensors, want 28", md.Format(), len(ts))
			}
			loadable := 0
			for i, ti := range ts {
				layer, kind := i/7, wantKinds[i%7]
				if ti.Name != fmt.Sprintf("blk.%d.%s.weight", layer, kind) || ti.Layer != layer || ti.Kind != kind {
					t.Fatalf("tensor %d: %+v, want layer %d %s", i, ti, layer, kind)
				}
				want := map[string]string{testmodel.MixQ4_0: "Q4_0", testmodel.MixQ8_0: "Q8_0", testmodel.MixQ4KM: "Q4_K", testmodel.MixF16: "F16", testmodel.MixBF16: "BF16"}[mix]
				if mix == testmodel.MixQ4KM && layer >= 2 && (kind == "attn_v" || kind == "ffn_down") {
					want = "Q6_K"
				}
				if ti.Type != want {
					t.Errorf("%s is %s, want %s", ti.Name, ti.Type, want)
				}
				shape := map[string][2]int{"ffn_down": {256, 512}, "ffn_gate": {512, 256}, "ffn_up": {512, 256},
					"attn_k": {128, 256}, "attn_v": {128, 256}, "attn_q": {256, 256}, "attn_output": {256, 256}}[kind]
				if ti.Rows != shape[0] || ti.Cols != shape[1] {
					t.Errorf("%s: %dx%d, want %dx%d", ti.Name, ti.Rows, ti.Cols, shape[0], shape[1])
				}
				if ti.Err == nil {
					loadable++
				} else if !strings.Contains(ti.Err.Error(), ti.Name) || !strings.Contains(ti.Err.Error(), md.Path()) {
					t.Errorf("%s: error %q does not name the file and tensor", ti.Name, ti.Err)
				}
			}
			if mix != testmodel.MixQ4KM && loadable != 28 {
				t.Fatalf("%d of 28 loadable", loadable)
			}
			if mix == testmodel.MixQ4KM && loadable < 24 {
				t.Fatalf("%d of 28 loadable, want the 24 Q4_K at least", loadable)
			}
			checkWeights(t, md, loadable)
			checkHugeLoad(t, md)
		})
	}
}

// TestModelGPTQ: a generated GPTQ checkpoint's settings come from its
// config files; act-order and gptq_v2 variants load too, as does a
// float LM head (quantized on load) beside them.
func TestModelGPTQ(t *testing.T) {
	for _, q := range []testmodel.GPTQConfig{{Bits: 4, Group: 128}, {Bits: 4, Group: 128, ActOrder: true, V2: true}, {Bits: 8, Group: -1}} {
		t.Run(fmt.Sprintf("%+v", q), func(t *testing.T) {
			l := smallLlama
			l.Vocab = 300
			md, err := qgemv.OpenModel(writeGPTQ(t, l, q))
			if err != nil {
				t.Fatal(err)
			}
			defer md.Close()
			c := md.QuantConfig()
			if c.Method != "gptq" || c.Bits != q.Bits || c.GroupSize != q.Group || c.ActOrder != q.ActOrder || c.Source != "config.json, quantize_config.json" {
				t.Fatalf("config %+v", c)
			}
			ts := md.Tensors()
			if len(ts) != 30 {
				t.Fatalf("%d tensors, want 28 layers and embed_tokens and lm_head", len(ts))
			}
			for _, ti := range ts {
				if ti.Err != nil {
					t.Fatalf("%s: %v", ti.Name, ti.Err)
				}
				if ti.Kind == "" {
					t.Fatalf("%s: no kind", ti.Name)
				}
				if q.ActOrder != strings.Contains(ti.ImportsAs, "act-order") && ti.Type == "GPTQ" {
					t.Fatalf("%s imports as %s", ti.Name, ti.ImportsAs)
				}
			}
			checkWeights(t, md, 30)
			checkHugeLoad(t, md)
		})
	}
}

// checkHugeLoad: md loaded on a CPU engine WithHugePages (exact imports'
// codes converted straight into the engine's huge-page memory)
// multiplies as on one without, bit for bit, and the same tensors load.
func checkHugeLoad(t *testing.T, md *qgemv.Model) {
	t.Helper()
	var ws [2]*qgemv.Weights
	for i, huge := range []bool{false, true} {
		eng, err := qgemv.Open(qgemv.WithBackend("cpu"), qgemv.WithHugePages(huge))
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		if ws[i], err = md.Load(eng); err != nil {
			t.Fatal(err)
		}
		defer ws[i].Close()
	}
	if a, b := len(ws[0].All()), len(ws[1].All()); a != b || len(ws[0].Failed()) != len(ws[1].Failed()) {
		t.Fatalf("%d weights loaded without huge pages, %d with", a, b)
	}
	for _, x := range ws[0].All() {
		y := ws[1].Get(x.Info.Name)
		if y == nil {
			t.Fatalf("%s: not loaded with huge pages", x.Info.Name)
		}
		in := synth.Vector(2*x.Cols(), 7)
		for _, a := range []qgemv.Activation{qgemv.A8, qgemv.A32} {
			if a == qgemv.A8 && !x.TakesA8() {
				continue
			}
			want, got := make([]float32, 2*x.Rows()), make([]float32, 2*x.Rows())
			if err := x.Mul(want, in, 2, a); err != nil {
				t.Fatal(err)
			}
			if err := y.Mul(got, in, 2, a); err != nil {
				t.Fatal(err)
			}
			for r := range got {
				if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
					t.Fatalf("%s %v: out[%d] = %v with huge pages, %v without", x.Info.Name, a, r, got[r], want[r])
				}
			}
		}
	}
}

// TestModelConfigErrors: missing, inconsistent or malformed config files
// and shapes that disagree with the config are errors naming the file
// (and, per tensor, the tensor).
func TestModelConfigErrors(t *testing.T) {
	l := testmodel.Llama{Layers: 1, Hidden: 256, FFN: 512, KV: 128, Seed: 1}
	path := writeGPTQ(t, l, testmodel.GPTQConfig{Bits: 4, Group: 128})
	dir := filepath.Dir(path)
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	qcfg, _ := os.ReadFile(filepath.Join(dir, "quantize_config.json"))
	restore := func() {
		os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
		os.WriteFile(filepath.Join(dir, "quantize_config.json"), qcfg, 0o644)
	}
	edit := func(name string, f func(m map[string]any)) {
		raw := map[string][]byte{"config.json": cfg, "quantize_config.json": qcfg}[name]
		var m map[string]any
		json.Unmarshal(raw, &m)
		f(m)
		b, _ := json.Marshal(m)
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	// Per-tensor errors: the model opens, each layer says why.
	for _, c := range []struct {
		name   string
		change func()
		want   string
	}{
		{"no config files", func() {
			os.Remove(filepath.Join(dir, "config.json"))
			os.Remove(filepath.Join(dir, "quantize_config.json"))
		}, "no config.json"},
		{"bits disagree with qzeros", func() {
			edit("config.json", func(m map[string]any) { m["quantization_config"].(map[string]any)["bits"] = 8 })
			edit("quantize_config.json", func(m map[string]any) { m["bits"] = 8 })
		}, ".qzeros has"},
		{"group disagrees with scales", func() {
			edit("config.json", func(m map[string]any) { m["quantization_config"].(map[string]any)["group_size"] = 64 })
			edit("quantize_config.json", func(m map[string]any) { m["group_size"] = 64 })
		}, ".scales has"},
		{"unknown checkpoint format", func() {
			os.Remove(filepath.Join(dir, "config.json"))
			edit("quantize_config.json", func(m map[string]any) { m["checkpoint_format"] = "marlin" })
		}, "marlin"},
		{"config says awq", func() {
			os.Remove(filepath.Join(dir, "config.json"))
			edit("quantize_config.json", func(m map[string]any) { m["quant_method"] = "awq" })
		}, "GPTQ-shaped"},
	} {
		restore()
		c.change()
		md, err := qgemv.OpenModel(path)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, ti := range md.Tensors() {
			if ti.Err == nil || !strings.Contains(ti.Err.Error(), path) || !strings.Contains(ti.Err.Error(), ti.Name) || !strings.Contains(ti.Err.Error(), c.want) {
				t.Errorf("%s: %s: error %v, want one naming the file, the tensor and %q", c.name, ti.Name, ti.Err, c.want)
			}
		}
		eng, _ := qgemv.Open()
		w, err := md.Load(eng)
		if err != nil || len(w.All()) != 0 || len(w.Failed()) != 7 {
			t.Errorf("%s: Load: %v, %d loaded, %d failed", c.name, err, len(w.All()), len(w.Failed()))
		}
		eng.Close()
		md.Close()
	}
	// Whole-file errors.
	for _, c := range []struct {
		name   string
		change func()
		want   []string
	}{
		{"inconsistent bits", func() {
			edit("quantize_config.json", func(m map[string]any) { m["bits"] = 3 })
		}, []string{"inconsistent", "config.json", "quantize_config.json", "bits"}},
		{"malformed config.json", func() {
			os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"quantization_config": {`), 0o644)
		}, []string{filepath.Join(dir, "config.json")}},
		{"bits of the wrong type", func() {
			edit("quantize_config.json", func(m map[string]any) { m["bits"] = "four" })
		}, []string{"quantize_config.json", "bits"}},
	} {
		restore()
		c.change()
		_, err := qgemv.OpenModel(path)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want one containing %q", c.name, err, w)
			}
		}
	}
	restore()
	// WithQuantConfig replaces the files.
	os.Remove(filepath.Join(dir, "config.json"))
	os.Remove(filepath.Join(dir, "quantize_config.json"))
	md, err := qgemv.OpenModel(path, qgemv.WithQuantConfig(qgemv.QuantConfig{Bits: 4, GroupSize: 128}))
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range md.Tensors() {
		if ti.Err != nil {
			t.Fatalf("with WithQuantConfig: %v", ti.Err)
		}
	}
	md.Close()
}

// TestModelTruncated: files cut short mid-tensor are errors naming the
// file and the tensor; so are unknown names and closed models.
func TestModelTruncated(t *testing.T) {
	l := testmodel.Llama{Layers: 1, Hidden: 256, FFN: 512, KV: 128, Seed: 1}
	g := writeGGUF(t, l, testmodel.MixQ4_0)
	s := writeGPTQ(t, l, testmodel.GPTQConfig{Bits: 4, Group: 128})
	for _, p := range []string{g, s} {
		raw, _ := os.ReadFile(p)
		bad := p + ".cut"
		os.WriteFile(bad, raw[:len(raw)-5000], 0o644)
		_, err := qgemv.OpenModel(bad)
		if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "tensor \"") ||
			!strings.Contains(err.Error(), "truncated") && !strings.Contains(err.Error(), "outside the") {
			t.Errorf("%s cut short: %v", filepath.Base(p), err)
		}
	}
	if _, err := qgemv.OpenModel(filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Error("a missing file opened")
	}
	junk := filepath.Join(t.TempDir(), "junk.bin")
	os.WriteFile(junk, []byte("neither format"), 0o644)
	if _, err := qgemv.OpenModel(junk); err == nil || !strings.Contains(err.Error(), junk) {
		t.Errorf("junk: %v", err)
	}
	// A .gguf file without the magic (empty, cut before it) is reported
	// as a GGUF file, not as a malformed safetensors one.
	for _, name := range []string{"empty.gguf", "EMPTY.GGUF"} {
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, nil, 0o644)
		if _, err := qgemv.OpenModel(p); err == nil || !strings.Contains(err.Error(), "gguf:") || strings.Contains(err.Error(), "safetensors") {
			t.Errorf("%s: %v, want the GGUF parser's error", name, err)
		}
	}
	md, err := qgemv.OpenModel(g)
	if err != nil {
		t.Fatal(err)
	}
	eng, _ := qgemv.Open()
	defer eng.Close()
	if _, err := md.Load(eng, "blk.0.attn_q.weight", "blk.9.attn_q.weight"); err == nil || !strings.Contains(err.Error(), "blk.9.attn_q.weight") {
		t.Errorf("unknown name: %v", err)
	}
	w, err := md.Load(eng, "blk.0.attn_v.weight", "blk.0.attn_q.weight")
	if err != nil || len(w.All()) != 2 || w.All()[0].Info.Name != "blk.0.attn_q.weight" || w.Get("blk.0.attn_v.weight") == nil {
		t.Fatalf("selected load: %v %v", err, w)
	}
	if err := md.Close(); err != nil {
		t.Fatal(err)
	}
	// Loaded weights outlive the file.
	y := make([]float32, 256)
	if err := w.Get("blk.0.attn_q.weight").Mul(y, synth.Vector(256, 1), 1, qgemv.A8); err != nil {
		t.Fatal(err)
	}
	if _, err := md.Load(eng); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("Load after Close: %v", err)
	}
	if _, _, err := md.Import("blk.0.attn_q.weight"); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("Import after Close: %v", err)
	}
	eng.Close()
	if err := w.Close(); err != nil {
		t.Errorf("closing weights of a closed engine: %v", err)
	}
	md, _ = qgemv.OpenModel(g)
	defer md.Close()
	if _, err := md.Load(eng); !errors.Is(err, qgemv.ErrClosed) {
		t.Errorf("Load onto a closed engine: %v", err)
	}
	if _, err := md.Load(nil); err == nil {
		t.Error("Load onto a nil engine: no error")
	}
}

// TestModelFloatRows: float tensors (F16, BF16) load converted row by row
// as they are quantized, into exactly the matrices Import makes of their
// whole values: the same A32 products, bit for bit.
func TestModelFloatRows(t *testing.T) {
	eng, err := qgemv.Open(qgemv.WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for _, mix := range []string{testmodel.MixF16, testmodel.MixBF16} {
		for _, format := range []string{"q4g128", "bits3g64", "sparse12g128"} {
			spec, _ := layout.ParseFormatSpec(format)
			md, err := qgemv.OpenModel(writeGGUF(t, smallLlama, mix), qgemv.WithFloatFormat(spec), qgemv.WithQuantMethod(layout.MinMax))
			if err != nil {
				t.Fatal(err)
			}
			names := []string{md.Tensors()[0].Name, md.Tensors()[3].Name}
			w, err := md.Load(eng, names...)
			if err != nil || len(w.All()) != 2 {
				t.Fatalf("%s %s: %v, %d loaded (%v)", mix, format, err, len(w.All()), w.Failed())
			}
			for _, x := range w.All() {
				m, how, err := md.Import(x.Info.Name)
				if err != nil {
					t.Fatal(err)
				}
				// the error is measured reading the rows again (never the tensor whole)
				var e float64
				if n, err := fmt.Sscanf(how[strings.Index(how, ", ")+2:], "relative RMS error %g", &e); n != 1 || err != nil || !(e > 0 && e < 1) {
					t.Errorf("%s %s %s: Import says %q", mix, format, x.Info.Name, how)
				}
				ref, err := eng.Load(m)
				if err != nil {
					t.Fatal(err)
				}
				in := synth.Vector(x.Cols(), 7)
				got, want := make([]float32, x.Rows()), make([]float32, x.Rows())
				if err := x.Mul(got, in, 1, qgemv.A32); err != nil {
					t.Fatal(err)
				}
				if err := ref.Mul(want, in, 1, qgemv.A32); err != nil {
					t.Fatal(err)
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s %s %s: output %d is %v, Import's matrix gives %v", mix, format, x.Info.Name, i, got[i], want[i])
					}
				}
				ref.Close()
			}
			w.Close()
			md.Close()
		}
	}
}

// TestModelHQQConfig: a config.json in transformers' HqqConfig shape
// (quant_method beside quant_config, the settings in
// weight_quant_params) names the method, so GPTQ layers under it are not
// loaded as if the config were theirs, and an axis other than 1 is an
// error. The method was lost before (the nested object replaced the
// outer one) and the GPTQ layers loaded with the HQQ settings.
func TestModelHQQConfig(t *testing.T) {
	l := testmodel.Llama{Layers: 1, Hidden: 256, FFN: 512, KV: 128, Seed: 1}
	path := writeGPTQ(t, l, testmodel.GPTQConfig{Bits: 4, Group: 128})
	dir := filepath.Dir(path)
	os.Remove(filepath.Join(dir, "quantize_config.json"))
	write := func(axis int) {
		cfg := fmt.Sprintf(`{"quantization_config":{"quant_method":"hqq","quant_config":{"weight_quant_params":{"nbits":4,"group_size":128,"axis":%d}}}}`, axis)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	md, err := qgemv.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if q := md.QuantConfig(); q.Method != "hqq" || q.Bits != 4 || q.GroupSize != 128 {
		t.Errorf("QuantConfig %+v, want hqq, 4 bits, group 128", q)
	}
	eng, err := qgemv.Open(qgemv.WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	w, err := md.Load(eng)
	if err == nil {
		if n := len(w.All()); n > 0 {
			t.Errorf("%d GPTQ layers loaded under an HQQ config", n)
		}
		w.Close()
	}
	md.Close()
	write(0)
	if md, err := qgemv.OpenModel(path); err == nil || !strings.Contains(err.Error(), "axis") {
		if md != nil {
			md.Close()
		}
		t.Errorf("HQQ config of axis 0: %v, want an error naming the axis", err)
	}
}
