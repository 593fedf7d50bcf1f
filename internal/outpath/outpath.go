// Package outpath checks an output path before a file is written there
// through a temporary file renamed over it.
package outpath

import (
	"errors"
	"fmt"
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
		return "", fmt.Errorf("%s exists and is not a regular file (%v)", path, st.Mode().Type())
	}
	return path, nil
}
