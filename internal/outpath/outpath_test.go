package outpath

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolve: a new path and a regular file are written as named, a
// symbolic link through to its file, a directory is refused.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "l")
	if err := os.Symlink(file, link); err != nil {
		t.Skip(err)
	}
	for _, c := range []struct{ in, want string }{{filepath.Join(dir, "new"), filepath.Join(dir, "new")}, {file, file}, {link, file}} {
		got, err := Resolve(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if want, _ := filepath.EvalSymlinks(filepath.Dir(c.want)); filepath.Join(want, filepath.Base(c.want)) != got && got != c.want {
			t.Errorf("%s: %s, want %s", c.in, got, c.want)
		}
	}
	if _, err := Resolve(dir); err == nil {
		t.Error("a directory accepted")
	}
}

// TestWrite: a failed write leaves the old file and no temporary file; a
// complete one replaces it with mode 0644, through a symbolic link.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	fail := errors.New("disk full")
	for _, durable := range []bool{false, true} {
		err := Write(file, durable, func(w io.Writer) error {
			w.Write([]byte("partial"))
			return fail
		})
		if !errors.Is(err, fail) || !strings.Contains(err.Error(), file) {
			t.Errorf("failed write: %v, want the write's error naming the file", err)
		}
		if b, _ := os.ReadFile(file); string(b) != "old" {
			t.Errorf("failed write changed the file to %q", b)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("failed write left %d files, want 1", len(ents))
		}
	}
	link := filepath.Join(dir, "l")
	if err := os.Symlink(file, link); err != nil {
		t.Skip(err)
	}
	if err := Write(link, true, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(file)
	if b, _ := os.ReadFile(file); err != nil || string(b) != "new" || st.Mode().Perm() != 0o644 {
		t.Errorf("written through the link: %q, %v, want \"new\" with mode 0644", b, st.Mode())
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", err)
	}
	if err := Write(dir, false, func(io.Writer) error { t.Error("write called for a directory"); return nil }); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: %v", err)
	}
}

// TestWriteStreams: a character device and a named pipe are written
// directly (the device is still there afterwards), a block device or a
// socket is refused.
func TestWriteStreams(t *testing.T) {
	if _, err := os.Stat("/dev/null"); err != nil {
		t.Skip(err)
	}
	if err := Write("/dev/null", true, func(w io.Writer) error { _, err := w.Write([]byte("x")); return err }); err != nil {
		t.Errorf("/dev/null: %v", err)
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a character device: %v", err)
	}
	fifo := filepath.Join(t.TempDir(), "p")
	if err := syscallMkfifo(fifo); err != nil {
		t.Skip(err)
	}
	got := make(chan []byte)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		got <- b
	}()
	if err := Write(fifo, false, func(w io.Writer) error { _, err := w.Write([]byte("through the pipe")); return err }); err != nil {
		t.Fatalf("FIFO: %v", err)
	}
	if b := <-got; string(b) != "through the pipe" {
		t.Errorf("FIFO reader got %q", b)
	}
}
