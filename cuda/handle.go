//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/qgemv/qgemv/internal/gpuhost"
)

// handle is what every matrix resident on the device shares: its backend
// and whether Close has run. Close marks the handle closed before its
// backend call frees the memory, and work run through handle.do checks
// the mark under the backend's lock, so no kernel ever reads freed memory,
// however Close and multiplies race; the free waits for the kernels
// already queued (multiplies on buffers return before they ran).
type handle struct {
	b      *Backend
	closed atomic.Bool
}

func (h *handle) backend() *Backend { return h.b }

func (h *handle) isClosed() bool { return h.closed.Load() }

// close marks the handle closed and frees its memory (free, in a backend
// call). A second close returns ErrClosed; after the backend closed,
// the context's memory is gone with it and close returns nil.
func (h *handle) close(free func()) error {
	if h.closed.Swap(true) {
		return ErrClosed
	}
	err := h.b.do(func() error {
		_ = cu.Synchronize() // multiplies on buffers may still be queued
		free()
		h.b.freeGen++ // graphs captured before may use the memory
		return nil
	})
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// do runs f with the backend's context current unless the handle is (by
// then) closed.
func (h *handle) do(f func() error) error { return h.b.send(call{f: f, h: h}) }

// anyClosed returns ErrClosed if one of hs is closed.
func anyClosed[H interface{ isClosed() bool }](hs []H) error {
	for _, h := range hs {
		if h.isClosed() {
			return ErrClosed
		}
	}
	return nil
}

// freeAll frees the buffers (nil ones are skipped; in a backend call).
func freeAll(bufs ...*buffer) {
	for _, bf := range bufs {
		bf.free()
	}
}

// hostSlice is a host slice to upload into a new buffer stored in *dst.
type hostSlice struct {
	dst *(*buffer)
	p   unsafe.Pointer
	n   int64
}

// into describes the upload of s into a new buffer stored in *dst.
func into[T any](dst **buffer, s []T) hostSlice {
	p, n := bytesOf(s)
	return hostSlice{dst: dst, p: p, n: n}
}

// uploadAll copies each slice into a new device buffer stored in its
// dst, in order (in a backend call). On an error it frees the buffers it made
// and leaves their dst nil: a failed load leaks no device memory.
func uploadAll(ss ...hostSlice) error {
	for i, s := range ss {
		bf, err := uploadBytes(s.p, s.n)
		if err != nil {
			for _, done := range ss[:i] {
				(*done.dst).free()
				*done.dst = nil
			}
			return err
		}
		*s.dst = bf
	}
	return nil
}

// putScratch copies s into the backend's scratch buffer of that name,
// grown to hold it, and returns the buffer (in a backend call): through pinned
// staging, asynchronously, when staged (see stagedPut), else directly.
func putScratch[T any](b *Backend, name string, s []T, staged bool) (*buffer, error) {
	_, n := bytesOf(s)
	bf, err := b.scratchBuf(name, n)
	if err != nil {
		return nil, err
	}
	if staged {
		return bf, stagedPut(b, name, bf, s)
	}
	return bf, put(bf, s)
}

// growable is device or pinned host memory a backend caches by name.
type growable interface {
	capacity() int64
	free()
}

// grown returns cache[name] if it holds at least size bytes; otherwise
// it frees that entry (once the queued work that may use it is done) and
// stores a new one of max(size, 64 KiB) bytes made by alloc (in a
// backend call).
func grown[T growable](cache map[string]T, name string, size int64, alloc func(int64) (T, error)) (T, error) {
	if h, ok := cache[name]; ok {
		if h.capacity() >= size {
			return h, nil
		}
		_ = cu.Synchronize()
		h.free()
		delete(cache, name)
	}
	h, err := alloc(max(size, 1<<16))
	if err != nil {
		return h, err
	}
	cache[name] = h
	return h, nil
}

// checkTimed checks the arguments of a timing call: at least one matrix
// and one iteration, every matrix like the first (same(m, mats[0]): the
// same backend, shape and kernel; differ names what is compared), none
// closed, batch in 1..16.
func checkTimed[M interface{ isClosed() bool }](what string, mats []M, iters, batch int, same func(m, m0 M) bool, differ string) error {
	if len(mats) == 0 || iters < 1 || iters > gpuhost.MaxIters {
		return fmt.Errorf("cuda: %s: %d matrices, %d iterations: want at least one of each, at most %d iterations", what, len(mats), iters, gpuhost.MaxIters)
	}
	for i, m := range mats {
		if v := reflect.ValueOf(m); !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil() {
			return fmt.Errorf("cuda: %s: matrix %d is nil", what, i)
		}
	}
	for _, m := range mats {
		if !same(m, mats[0]) {
			return fmt.Errorf("cuda: %s: the matrices differ in %s", what, differ)
		}
	}
	if err := anyClosed(mats); err != nil {
		return err
	}
	return gpuhost.CheckBatch("cuda", batch)
}
