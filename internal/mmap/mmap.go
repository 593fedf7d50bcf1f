// Package mmap maps files read-only into memory where the platform allows
// (Linux, macOS and the BSDs) and reads them whole elsewhere. The model
// readers (safetensors, GGUF) use it so that a multi-gigabyte file costs
// no copy until a tensor is imported.
package mmap

import (
	"fmt"
	"io"
	"os"
)

// File is a read-only view of a file's bytes.
type File struct {
	Data   []byte
	mapped bool
	f      *os.File // the mapped file, kept open for ReadInto
}

// Open maps (or reads) the file at path, a regular file: anything else
// (a directory, a device, a FIFO, whose open would wait for a writer) is
// an error before it is opened.
func Open(path string) (*File, error) {
	if err := Regular(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("mmap: %s is not a regular file", path)
	}
	size := st.Size()
	if size == 0 {
		return &File{Data: []byte{}}, nil
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("mmap: %s: %d bytes do not fit the address space", path, size)
	}
	if data, err := mapFile(f, int(size)); err == nil {
		keep = true
		return &File{Data: data, mapped: true, f: f}, nil
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("mmap: reading %s: %w", path, err)
	}
	return &File{Data: data}, nil
}

// Release tells the system that the pages under b, a subslice of Data,
// are not needed for now: on a mapped file they stop counting as this
// process's resident memory (the page cache keeps them), and reading
// them again faults them back in from the file. Importers call it after
// converting a tensor, so that a loaded model is not resident twice.
// It is a no-op for a file read whole, an empty b, or a b outside Data.
func (m *File) Release(b []byte) {
	if m == nil || !m.mapped || len(b) == 0 {
		return
	}
	lo, hi := within(m.Data, b)
	if lo < 0 {
		return
	}
	release(m.Data, lo, hi)
}

// ReadInto copies b, a subslice of Data, into dst (of the same length):
// on a mapped file with a read of the file (pread), which faults none of
// the mapping's pages in, a 4 KiB page at a time, nor leaves them
// resident; a copy otherwise.
func (m *File) ReadInto(dst, b []byte) error {
	if len(dst) != len(b) {
		return fmt.Errorf("mmap: ReadInto of %d bytes into %d", len(b), len(dst))
	}
	if m == nil || !m.mapped || len(b) == 0 {
		copy(dst, b)
		return nil
	}
	lo, _ := within(m.Data, b)
	if lo < 0 {
		return fmt.Errorf("mmap: ReadInto: %d bytes outside the file's", len(b))
	}
	_, err := m.f.ReadAt(dst, int64(lo))
	return err
}

// Close unmaps the file; Data must not be used afterwards.
func (m *File) Close() error {
	if m == nil || m.Data == nil {
		return nil
	}
	var err error
	if m.mapped {
		err = unmap(m.Data)
		if cerr := m.f.Close(); err == nil {
			err = cerr
		}
	}
	m.Data, m.mapped, m.f = nil, false, nil
	return err
}

// OpenParsed maps the file at path and parses its bytes with parse; the
// mapping is released if parsing fails, else returned for the caller to
// Close once it no longer uses what parse returned (which may alias it).
// Errors from mapping are prefixed with pkg, parse errors with path.
func OpenParsed[T any](pkg, path string, parse func([]byte) (T, error)) (T, *File, error) {
	var zero T
	m, err := Open(path)
	if err != nil {
		return zero, nil, fmt.Errorf("%s: %w", pkg, err)
	}
	v, err := parse(m.Data)
	if err != nil {
		m.Close()
		return zero, nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, m, nil
}

// Regular returns an error unless path names a regular file (following
// symbolic links): checked before a file is opened, as a FIFO's open
// waits for a writer.
func Regular(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("mmap: %s is not a regular file (%v)", path, st.Mode().Type())
	}
	return nil
}

// ReadSmall reads the regular file at path whole, if it holds at most max
// bytes: the small JSON files beside a model (config files, shard
// indexes), which must not be a FIFO (its open would wait for a writer),
// a device or a file too large to be one of them.
func ReadSmall(path string, max int64) ([]byte, error) {
	if err := Regular(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: above the %d-byte limit", path, max)
	}
	return data, nil
}
