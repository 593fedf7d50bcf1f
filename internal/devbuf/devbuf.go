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
