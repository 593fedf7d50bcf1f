package qgemv_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/internal/testmodel"
)

// fuzzLlama is the seeds' model: one layer, every matrix 256 columns.
var fuzzLlama = testmodel.Llama{Layers: 1, Hidden: 256, FFN: 256, KV: 32, Seed: 5}

// FuzzOpenModel opens corrupted model files (GGUF in every generated type
// mix and one of every type qgemv imports, and GPTQ safetensors beside
// valid config files), loads every
// tensor that opened onto a CPU engine and multiplies each once with
// float and (where taken) int8 activations. Whatever the bytes, nothing
// panics or hangs; an error names the file, and a tensor's error names
// the tensor. `make fuzz` runs it without minimizing new inputs: at the
// default minute each, minimizing inputs of this size stalls the run.
func FuzzOpenModel(f *testing.F) {
	seedDir := f.TempDir()
	for _, mix := range testmodel.Mixes {
		var b bytes.Buffer
		if _, err := fuzzLlama.WriteGGUF(&b, mix); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes(), false)
	}
	// every GGUF type qgemv imports, one small tensor each (F16 and BF16
	// quantized on load)
	mixed, err := os.ReadFile(filepath.Join("layout", "gguf", "testdata", "mixed.gguf"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(mixed, false)
	st, err := fuzzLlama.WriteGPTQ(seedDir, testmodel.GPTQConfig{Bits: 4, Group: 128})
	if err != nil {
		f.Fatal(err)
	}
	raw, err := os.ReadFile(st)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw, true)
	var configs [][2]string // name, contents
	for _, name := range []string{"config.json", "quantize_config.json"} {
		c, err := os.ReadFile(filepath.Join(seedDir, name))
		if err != nil {
			f.Fatal(err)
		}
		configs = append(configs, [2]string{name, string(c)})
	}
	eng, err := qgemv.Open(qgemv.WithBackend("cpu"), qgemv.WithThreads(1))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { eng.Close() })
	x := synth.Vector(4096, 1)

	f.Fuzz(func(t *testing.T, data []byte, safetensors bool) {
		// Go's fuzzer has no per-input time limit: a file that made the
		// loader hang would stall a run silently, so a stuck input ends
		// the worker (and is saved as a failing input).
		wd := time.AfterFunc(20*time.Second, func() { panic("FuzzOpenModel: one input took over 20 s") })
		defer wd.Stop()
		dir := t.TempDir()
		path := filepath.Join(dir, "model.gguf")
		if safetensors {
			path = filepath.Join(dir, "model.safetensors")
			for _, c := range configs {
				if err := os.WriteFile(filepath.Join(dir, c[0]), []byte(c[1]), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		md, err := qgemv.OpenModel(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		defer md.Close()
		for _, ti := range md.Tensors() {
			if ti.Err != nil && !strings.Contains(ti.Err.Error(), ti.Name) {
				t.Fatalf("tensor error does not name %q: %v", ti.Name, ti.Err)
			}
		}
		w, err := md.Load(eng)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("load error does not name the file: %v", err)
			}
			return
		}
		defer w.Close()
		for _, f := range w.Failed() {
			if !strings.Contains(f.Err.Error(), f.Name) {
				t.Fatalf("load failure does not name %q: %v", f.Name, f.Err)
			}
		}
		for _, wt := range w.All() {
			if wt.Cols() > len(x) {
				continue
			}
			dst := make([]float32, wt.Rows())
			_ = wt.Mul(dst, x[:wt.Cols()], 1, qgemv.A32)
			if wt.TakesA8() {
				_ = wt.Mul(dst, x[:wt.Cols()], 1, qgemv.A8)
			}
		}
	})
}
