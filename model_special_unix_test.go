//go:build unix

package qgemv_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/testmodel"
)

// TestModelSpecialFiles: a FIFO where a model file, a shard or a config
// file should be, or a config file larger than any config, is an error
// naming it, at once. OpenModel waited for ever on a FIFO before (its
// open waits for a writer) and read a config file of any size whole.
func TestModelSpecialFiles(t *testing.T) {
	l := testmodel.Llama{Layers: 1, Hidden: 256, FFN: 512, KV: 128, Seed: 1}
	open := func(t *testing.T, path, want string) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			md, err := qgemv.OpenModel(path)
			if md != nil {
				md.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("OpenModel(%s): %v, want an error naming %q", path, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("OpenModel(%s) still waiting after 10 s", path)
		}
	}
	fifo := func(t *testing.T, path string) {
		t.Helper()
		os.Remove(path)
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Skip(err)
		}
	}
	t.Run("model", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "model.safetensors")
		fifo(t, p)
		open(t, p, "not a regular file")
	})
	t.Run("shard", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"),
			[]byte(`{"weight_map":{"w":"model-00001-of-00001.safetensors"}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		fifo(t, filepath.Join(dir, "model-00001-of-00001.safetensors"))
		open(t, dir, "not a regular file")
	})
	t.Run("index", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "model.safetensors.index.json")
		fifo(t, p)
		open(t, p, "not a regular file")
	})
	for _, name := range []string{"config.json", "quantize_config.json"} {
		t.Run(name, func(t *testing.T) {
			path := writeGPTQ(t, l, testmodel.GPTQConfig{Bits: 4, Group: 128})
			cfg := filepath.Join(filepath.Dir(path), name)
			fifo(t, cfg)
			open(t, path, name)
			os.Remove(cfg)
			// 1 GiB, sparse: no disk used, and no read of it either
			f, err := os.Create(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(1 << 30); err != nil {
				t.Fatal(err)
			}
			f.Close()
			open(t, path, "limit")
		})
	}
}
