package mmap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	want := bytes.Repeat([]byte("qgemv"), 1000)
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, want) {
		t.Fatal("mapped bytes differ from the file")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := Open(dir); err == nil {
		t.Fatal("a directory opened")
	}
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing file opened")
	}
	e := filepath.Join(dir, "empty")
	os.WriteFile(e, nil, 0o644)
	if m, err := Open(e); err != nil || len(m.Data) != 0 {
		t.Fatalf("empty file: %v, %d bytes", err, len(m.Data))
	}
}
