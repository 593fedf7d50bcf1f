package qgemv_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/testmodel"
	"github.com/qgemv/qgemv/layout/safetensors"
)

// TestModelSharded: a sharded GPTQ checkpoint (some layers' tensors in
// two shards) opens through its index or its directory as one model: the
// layers of the single-file checkpoint, every one loaded and checked
// against its import, the size the shards' together.
func TestModelSharded(t *testing.T) {
	l := smallLlama
	l.Vocab = 300
	q := testmodel.GPTQConfig{Bits: 4, Group: 128}
	single, err := qgemv.OpenModel(writeGPTQ(t, l, q))
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	want := map[string]qgemv.TensorInfo{}
	for _, ti := range single.Tensors() {
		want[ti.Name] = ti
	}
	for _, shards := range []int{2, 5} {
		q.Shards = shards
		index := writeGPTQ(t, l, q)
		dir := filepath.Dir(index)
		straddles(t, index)
		for _, path := range []string{index, dir} {
			md, err := qgemv.OpenModel(path)
			if err != nil {
				t.Fatal(err)
			}
			if md.Path() != index || md.Format() != "safetensors" {
				t.Fatalf("%s: path %s, format %s", path, md.Path(), md.Format())
			}
			var size int64
			m, _ := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
			for _, p := range m {
				st, _ := os.Stat(p)
				size += st.Size()
			}
			if len(m) != shards || md.Size() != size {
				t.Fatalf("%d shards of %d bytes, Size %d", len(m), size, md.Size())
			}
			ts := md.Tensors()
			if len(ts) != len(want) {
				t.Fatalf("%d shards: %d tensors, want %d", shards, len(ts), len(want))
			}
			for _, ti := range ts {
				w, ok := want[ti.Name]
				if !ok || ti.Type != w.Type || ti.Rows != w.Rows || ti.Cols != w.Cols || ti.Layer != w.Layer || ti.Kind != w.Kind || ti.ImportsAs != w.ImportsAs || ti.Err != nil {
					t.Fatalf("%d shards: %+v, want %+v", shards, ti, w)
				}
			}
			checkWeights(t, md, len(want))
			md.Close()
		}
	}
}

// straddles fails unless some GPTQ layer of the index has its qweight and
// scales in different shards (the case a per-file reader would miss).
func straddles(t *testing.T, index string) {
	t.Helper()
	b, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := safetensors.ParseIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	for n, shard := range ix.WeightMap {
		if p, ok := strings.CutSuffix(n, ".qweight"); ok && ix.WeightMap[p+".scales"] != shard {
			return
		}
	}
	t.Fatalf("%s: no layer straddles two shards", index)
}

// TestModelShardedErrors: an index that is not JSON, lists no tensors,
// points outside its directory, names a missing or truncated shard, or
// disagrees with what the shards hold fails OpenModel with an error naming
// the file and what is wrong; a directory without one model file too.
func TestModelShardedErrors(t *testing.T) {
	l := testmodel.Llama{Layers: 2, Hidden: 256, FFN: 512, KV: 128, Seed: 1}
	index := writeGPTQ(t, l, testmodel.GPTQConfig{Bits: 4, Group: 128, Shards: 3})
	dir := filepath.Dir(index)
	orig, _ := os.ReadFile(index)
	var ix map[string]any
	json.Unmarshal(orig, &ix)
	wm := ix["weight_map"].(map[string]any)
	var aTensor, aShard string
	for n, s := range wm {
		if aTensor == "" || n < aTensor {
			aTensor, aShard = n, s.(string)
		}
	}
	withMap := func(f func(m map[string]any)) []byte {
		m := map[string]any{}
		for k, v := range wm {
			m[k] = v
		}
		f(m)
		b, _ := json.Marshal(map[string]any{"weight_map": m})
		return b
	}
	for _, c := range []struct {
		name  string
		index []byte
		want  string
	}{
		{"not JSON", []byte("{"), "index JSON"},
		{"no tensors", []byte(`{"metadata": {}}`), "no weight_map"},
		{"outside", withMap(func(m map[string]any) { m[aTensor] = "../" + aShard }), "not a file name"},
		{"missing shard", withMap(func(m map[string]any) { m["extra.weight"] = "model-00009-of-00009.safetensors" }), "model-00009-of-00009.safetensors"},
		{"not in shard", withMap(func(m map[string]any) { m["extra.weight"] = aShard }), `"extra.weight"`},
		{"not in index", withMap(func(m map[string]any) { delete(m, aTensor) }), aTensor},
		{"other shard", withMap(func(m map[string]any) {
			for _, s := range m {
				if s != aShard {
					m[aTensor] = s
					return
				}
			}
		}), aTensor},
	} {
		if err := os.WriteFile(index, c.index, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := qgemv.OpenModel(index)
		if err == nil || !strings.Contains(err.Error(), index) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s and %q", c.name, err, index, c.want)
		}
	}
	if err := os.WriteFile(index, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	// a shard cut short
	shard := filepath.Join(dir, aShard)
	sb, _ := os.ReadFile(shard)
	os.WriteFile(shard, sb[:len(sb)/2], 0o644)
	if _, err := qgemv.OpenModel(index); err == nil || !strings.Contains(err.Error(), shard) {
		t.Errorf("truncated shard: error %v, want one naming %s", err, shard)
	}
	os.WriteFile(shard, sb, 0o644)
	if md, err := qgemv.OpenModel(dir); err != nil {
		t.Fatalf("restored: %v", err)
	} else {
		md.Close()
	}
	// a layer's error names its shard (both, where it straddles two)
	for _, name := range []string{"config.json", "quantize_config.json"} {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(string(b), `"group_size": 128`, `"group_size": 64`)), 0o644)
	}
	md, err := qgemv.OpenModel(index)
	if err != nil {
		t.Fatal(err)
	}
	both := 0
	for _, ti := range md.Tensors() {
		if ti.Type != "GPTQ" {
			continue
		}
		var te *qgemv.TensorError
		if !errors.As(ti.Err, &te) || !strings.Contains(te.File, filepath.Join(dir, "model-0")) || strings.Contains(te.File, ".json") {
			t.Fatalf("%s: error %v, want one naming its shard", ti.Name, ti.Err)
		}
		if strings.Contains(te.File, " and ") {
			both++
		}
	}
	md.Close()
	if both == 0 {
		t.Error("no layer error names two shards")
	}
	// directories without an index: none or two model files
	empty := t.TempDir()
	if _, err := qgemv.OpenModel(empty); err == nil || !strings.Contains(err.Error(), "no "+safetensors.IndexFile) {
		t.Errorf("empty directory: %v", err)
	}
	os.Remove(index)
	if _, err := qgemv.OpenModel(dir); err == nil || !strings.Contains(err.Error(), "name one") {
		t.Errorf("three shards, no index: %v", err)
	}
}

// TestLoadProgress: WithLoadProgress sees every tensor Load takes, done
// growing to the total of their file bytes, one call per tensor.
func TestLoadProgress(t *testing.T) {
	var calls int
	var last, total int64
	md, err := qgemv.OpenModel(writeGGUF(t, smallLlama, testmodel.MixQ4_0), qgemv.WithLoadProgress(func(done, tot int64) {
		if done <= last || (total != 0 && tot != total) {
			t.Errorf("progress %d of %d after %d of %d", done, tot, last, total)
		}
		calls, last, total = calls+1, done, tot
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer md.Close()
	var want int64
	names := []string{}
	for _, ti := range md.Tensors()[:5] {
		names = append(names, ti.Name)
		want += ti.Bytes
	}
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	w, err := md.Load(eng, names...)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if calls != len(names) || last != want || total != want {
		t.Fatalf("%d calls, last %d of %d, want %d calls reaching %d", calls, last, total, len(names), want)
	}
}
