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
	// (memory it uses moved or was freed since the capture): capture
	// again.
	Launch() (bool, error)
	// Close frees the graph.
	Close() error
}

// IOCapturer is a Capturer that also captures, around the work, a copy
// of host input into a buffer and of a buffer to host output through
// its own staging memory: a step that writes its input, runs and reads
// its output costs one launch and one wait.
type IOCapturer interface {
	// CaptureIO is Capture with a copy of nin bytes of input into the
	// start of in before fn's operations and one of nout bytes from the
	// start of out after them.
	CaptureIO(in Buf, nin int64, out Buf, nout int64, fn func() error) (IOGraph, error)
}

// IOGraph is captured work with its input and output copies.
type IOGraph interface {
	// Run copies src (the captured nin bytes) to the input, runs the
	// work, waits for it and for the work queued before it, copies the
	// output into dst (nout bytes) and returns the first fault the work
	// met, as Buf.Read does. It returns false, having done nothing, when
	// the graph no longer fits the backend's state: capture again.
	Run(src, dst []byte) (bool, error)
	// Close frees the graph.
	Close() error
}
