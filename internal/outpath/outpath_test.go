package outpath

import (
	"os"
	"path/filepath"
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
