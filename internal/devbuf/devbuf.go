// Package devbuf holds the type a device backend's buffers implement
// (package dispatch re-exports it as dispatch.Buf), so that the backend
// packages implement dispatch's device interfaces without importing it.
package devbuf

import "errors"

// Buf is device memory a backend allocated. Write and Read copy bytes at
// a byte offset; Read waits for the work queued before it and returns
// the first fault that work met (dispatch.Device.Wait).
type Buf interface {
	Write(off int64, src []byte) error
	Read(off int64, dst []byte) error
	// Fetch is Read that leaves the faults for the next Wait or Read.
	Fetch(off int64, dst []byte) error
	Size() int64
	Close() error
}

// ErrNoDevicePath is returned by a device operation that has no device
// kernel; the caller runs the operation on the host.
var ErrNoDevicePath = errors.New("no device kernel for this operation")

// Capturer is a device backend that captures the work queued by a
// function as one graph, launched again later with one call (CUDA
// graphs): a recorded sequence of operations then costs the host one
// launch instead of one per kernel.
type Capturer interface {
	// Capture runs fn, whose operations on the backend are captured
	// instead of queued; no other work may be queued on the backend
	// meanwhile. An operation that cannot be captured (one that waits for
	// the device, such as a host run of an operation without a device
	// kernel) fails fn or Capture, and nothing was queued.
	Capture(fn func() error) (Graph, error)
}

// Graph is captured work.
type Graph interface {
	// Launch queues the captured work again. It returns false, having
	// queued nothing, when the graph no longer fits the backend's state
	// (memory it uses moved since the capture): capture again.
	Launch() (bool, error)
	// Close frees the graph.
	Close() error
}
