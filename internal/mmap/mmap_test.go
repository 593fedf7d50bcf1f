package mmap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// openWritten writes data to a new file and opens it; the caller closes
// it.
func openWritten(t *testing.T, data []byte) *File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	want := bytes.Repeat([]byte("qgemv"), 1000)
	m := openWritten(t, want)
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

// TestReadInto: a piece of a mapped file read with ReadInto equals the
// mapped bytes, read from the file, not through the mapping (whose pages
// do not become resident), and bad arguments are errors; a file read
// whole copies.
func TestReadInto(t *testing.T) {
	want := make([]byte, 3<<16+123)
	for i := range want {
		want[i] = byte(i * 7)
	}
	m := openWritten(t, want)
	defer m.Close()
	for _, r := range [][2]int{{0, len(want)}, {5, 70000}, {len(want) - 1, len(want)}} {
		dst := make([]byte, r[1]-r[0])
		if err := m.ReadInto(dst, m.Data[r[0]:r[1]]); err != nil || !bytes.Equal(dst, want[r[0]:r[1]]) {
			t.Fatalf("bytes %d..%d: %v, equal %v", r[0], r[1], err, bytes.Equal(dst, want[r[0]:r[1]]))
		}
	}
	if err := m.ReadInto(make([]byte, 3), m.Data[:4]); err == nil {
		t.Error("a destination of the wrong length accepted")
	}
	if m.mapped {
		if err := m.ReadInto(make([]byte, 4), want[:4]); err == nil {
			t.Error("bytes outside the file accepted")
		}
	}
	// 16 MiB read into memory of ours leave the mapping's pages alone.
	if bm := openWritten(t, bytes.Repeat(want[:1<<16], 256)); bm.mapped {
		dst := make([]byte, len(bm.Data))
		for i := 0; i < len(dst); i += 4096 {
			dst[i] = 1 // our pages, faulted in before the measurement
		}
		u0, err0 := Resident()
		err := bm.ReadInto(dst, bm.Data)
		u1, err1 := Resident()
		if err != nil || !bytes.Equal(dst[:1<<16], want[:1<<16]) {
			t.Fatalf("16 MiB: %v", err)
		}
		if err0 == nil && err1 == nil && u1.File-u0.File > 4<<20 {
			t.Errorf("ReadInto of 16 MiB made %d bytes of the file resident: it read through the mapping", u1.File-u0.File)
		}
		bm.Close()
	}
	whole := &File{Data: want}
	dst := make([]byte, 10)
	if err := whole.ReadInto(dst, want[20:30]); err != nil || !bytes.Equal(dst, want[20:30]) {
		t.Fatalf("a file read whole: %v", err)
	}
}
