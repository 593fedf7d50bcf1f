//go:build cuda

package cuda

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// stagingMax bounds the activations and results copied through pinned
// host memory; larger copies go directly from Go memory.
const stagingMax = 16 << 20

// pinned is page-locked host memory (cuMemAllocHost): copies from it run
// as direct DMA instead of through the driver's bounce buffer, which
// matters for the small per-call copies of a GEMV.
type pinned struct {
	p    unsafe.Pointer
	size int
}

// allocPinned allocates size bytes of pinned host memory.
func allocPinned(size int64) (*pinned, error) {
	var p unsafe.Pointer
	if r := C.cuMemAllocHost_v2(&p, C.size_t(size)); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuda: allocating %d bytes of pinned host memory: CUresult %d", size, int(r))
	}
	return &pinned{p: p, size: int(size)}, nil
}

// free releases the memory; freeing twice, or a nil buffer, is harmless.
func (h *pinned) free() {
	if h != nil && h.p != nil {
		C.cuMemFreeHost(h.p)
		h.p = nil
	}
}

func (h *pinned) capacity() int64 { return int64(h.size) }

func (h *pinned) bytes(n int) []byte { return unsafe.Slice((*byte)(h.p), n) }

// staging returns the backend's pinned buffer of that name with at least
// size bytes (in a backend call).
func (b *Backend) staging(name string, size int) (*pinned, error) {
	return b.growPinned(b.pinned, name, int64(size))
}

// growPinned is grown for the pinned caches, counting replaced buffers in
// pinGen: a graph captured before reads freed memory (in a backend call).
func (b *Backend) growPinned(cache map[string]*pinned, name string, size int64) (*pinned, error) {
	old := cache[name]
	h, err := grown(cache, name, size, allocPinned)
	if old != nil && h != old {
		b.pinGen++
	}
	return h, err
}

// stagedPut queues a copy of s into bf through the pinned buffer of that
// name (in a backend call). The copy is asynchronous on the backend's
// stream: kernels launched after it see the data, and the staging buffer
// is not reused before the call's stagedDownload has synchronized, so one
// multiply pays for one wait instead of one per copy.
func stagedPut[T any](b *Backend, name string, bf *buffer, s []T) error {
	p, n := bytesOf(s)
	if n == 0 || n > stagingMax {
		return put(bf, s)
	}
	if n > bf.size {
		return fmt.Errorf("cuda: %d bytes do not fit a %d-byte buffer", n, bf.size)
	}
	h, err := b.growPinned(b.stageIn, name, n)
	if err != nil {
		return err
	}
	copy(h.bytes(int(n)), unsafe.Slice((*byte)(p), n))
	if err := cu.MemcpyHtoDAsync(bf.ptr, h.p, n, b.stream); err != nil {
		return fmt.Errorf("cuda: copying %d bytes to the device: %w", n, err)
	}
	return nil
}

// stagedDownload copies the start of bf into dst through pinned memory,
// waiting for everything queued before it (in a backend call).
func (b *Backend) stagedDownload(bf *buffer, dst []float32) error {
	p, n := bytesOf(dst)
	if n == 0 || n > stagingMax {
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("cuda: waiting for the multiply (a kernel may have failed): %w", err)
		}
		return download(bf, dst)
	}
	if n > bf.size {
		return fmt.Errorf("cuda: reading %d bytes from a %d-byte buffer", n, bf.size)
	}
	h, err := b.staging("out", int(n))
	if err != nil {
		return err
	}
	if err := b.toPinned(h, bf.ptr, n, 0, 0); err != nil {
		return err
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("cuda: waiting for the multiply (a kernel may have failed): %w", err)
	}
	copy(unsafe.Slice((*byte)(p), n), h.bytes(int(n)))
	return nil
}

// EnvHostMap set to 0 makes host-slice multiplies copy their activations
// to device memory even where kernels could read them from pinned host
// memory (pinnedIn, pinnedStatus).
const EnvHostMap = "QGEMV_CUDA_HOSTMAP"

// pinnedIn makes s readable by the kernels queued next and returns its
// device address (in a backend call). Where the device addresses pinned host
// memory (Device.mapsHost), s is copied into the pinned buffer of that
// name (not a scratch buffer's: the fallback's staging is keyed apart, in
// b.stageIn) and the first kernel reads it over the bus: one queued copy
// and one driver call fewer than putScratch's staged copy, which is the fallback
// (and the path above stagingMax). The memory is rewritten only by the
// next host-slice call, after this one's wait.
func pinnedIn[T any](b *Backend, name string, s []T) (cu.DevicePtr, error) {
	p, n := bytesOf(s)
	if !b.readsPinned(n) {
		bf, err := putScratch(b, name, s, true)
		if err != nil {
			return 0, err
		}
		return bf.ptr, nil
	}
	h, err := b.staging(name, int(n))
	if err != nil {
		return 0, err
	}
	copy(h.bytes(int(n)), unsafe.Slice((*byte)(p), n))
	return cu.DevicePtr(uintptr(h.p)), nil
}

// readsPinned reports whether kernels read (or write) n bytes in pinned
// staging memory in place: the device maps it and n fits the staging.
func (b *Backend) readsPinned(n int64) bool { return b.dev.mapsHost && n > 0 && n <= stagingMax }

// pinnedStatus returns a zeroed status word in pinned host memory and its
// device address, where the device addresses pinned memory (ok false
// otherwise): the kernels flag it directly, with no queued memset or copy
// (in a backend call).
func (b *Backend) pinnedStatus() (word *uint32, dev cu.DevicePtr, ok bool, err error) {
	if !b.dev.mapsHost {
		return nil, 0, false, nil
	}
	h, err := b.staging("status", 4)
	if err != nil {
		return nil, 0, false, err
	}
	word = (*uint32)(h.p)
	*word = 0
	return word, cu.DevicePtr(uintptr(h.p)), true, nil
}
