// Package outpath checks an output path before a file is written there
// through a temporary file renamed over it (or, for a character device or
// a named pipe, written directly).
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
// through it), unchanged where nothing exists yet. A character device or
// a named pipe (/dev/stdout, /dev/null, a pipe to another program) is
// written directly. Anything else that exists and is not a regular file
// (a directory, a block device, a socket) is an error, given before any
// work: a rename over a directory fails only at the end, and writing a
// disk's device would overwrite the disk.
func Resolve(path string) (string, error) {
	path, _, err := resolve(path)
	return path, err
}

// resolve is Resolve, also reporting whether the path is written
// directly (stream).
func resolve(path string) (string, bool, error) {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path, false, nil
	case err != nil:
		return "", false, err
	case stream(st.Mode()):
		return path, true, nil
	case !st.Mode().IsRegular():
		return "", false, fmt.Errorf("%s is %s, not a regular file", path, kind(st.Mode()))
	}
	return path, false, nil
}

// stream reports whether a file of mode m is written directly: a
// character device or a named pipe, which a rename would replace.
func stream(m fs.FileMode) bool {
	return m&fs.ModeCharDevice != 0 || m&fs.ModeNamedPipe != 0
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
// returns. A character device or a named pipe at path is opened and
// written directly instead (a pipe's open waits for its reader).
func Write(path string, durable bool, write func(io.Writer) error) (err error) {
	path, direct, err := resolve(path)
	if err != nil {
		return err
	}
	if direct {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
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
