//go:build unix

package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestFIFOInputs: inspect and dequantize of a FIFO (named like a model
// or a .qgv file) are errors at once. inspect's GGUF sniff and the .qgv
// reader opened the path before checking it, so both waited for a writer
// for ever.
func TestFIFOInputs(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"model", "w.qgv"} {
		p := filepath.Join(dir, name)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skip(err)
		}
		for _, cmd := range []struct {
			name string
			run  func() error
		}{
			{"inspect", func() error { return cmdInspect([]string{p}) }},
			{"dequantize", func() error { return cmdDequantize([]string{"-o", filepath.Join(dir, "out.f32"), p}) }},
		} {
			done := make(chan error, 1)
			go func() { done <- cmd.run() }()
			select {
			case err := <-done:
				if err == nil {
					t.Errorf("%s %s: no error", cmd.name, name)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s %s still waiting after 10 s", cmd.name, name)
			}
		}
	}
}
