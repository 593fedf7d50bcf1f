// Package outpath checks an output path before a file is written there
// through a temporary file renamed over it.
package outpath

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Resolve returns the path to write for path: the file a symbolic link
// names (a rename over the link would replace the link instead of writing
// through it), unchanged where nothing exists yet. A path that exists and
// is not a regular file (a directory, a device, a FIFO) is an error, given
// before any work: a rename over a directory fails only at the end, and
// one over a device as root would replace the device.
func Resolve(path string) (string, error) {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path, nil
	case err != nil:
		return "", err
	case !st.Mode().IsRegular():
		return "", fmt.Errorf("%s is %s, not a regular file", path, kind(st.Mode()))
	}
	return path, nil
}

// kind names a file type for an error.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return fmt.Sprintf("of type %v", m.Type())
}

// Write writes a file at path (resolved by Resolve) through a temporary
// file in the same directory renamed over it, so that readers see the old
// file or the whole new one, never a part, and a failed write leaves what
// was there. write gets the temporary file; its error, or any of creating,
// closing or renaming, removes the temporary file and is returned with the
// path named. The file gets mode 0644 (the temporary file's is 0600). With
// durable, the data and the rename are synced to disk before Write
// returns.
func Write(path string, durable bool, write func(io.Writer) error) (err error) {
	if path, err = Resolve(path); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close() // a second Close's error is ignored
			os.Remove(tmp.Name())
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if durable {
		if err = tmp.Sync(); err != nil {
			return err
		}
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if durable {
		// Persist the rename. Not every platform can sync a directory, and
		// the file itself is complete either way, so errors are ignored.
		if d, derr := os.Open(dir); derr == nil {
			_ = d.Sync()
			d.Close()
		}
	}
	return nil
}
