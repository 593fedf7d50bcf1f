// Package errs holds the sentinel errors that every qgemv backend returns
// or wraps, so that errors.Is matches them whatever backend produced
// them. Package qgemv re-exports each one (qgemv.ErrClosed is
// errs.ErrClosed); the backend packages' own names for them (cpu.ErrClosed,
// cuda.ErrClosed, ...) are the same values.
package errs

import "errors"

// MaxBatch is the largest number of activation vectors per multiply on
// every backend.
const MaxBatch = 16

var (
	// ErrClosed is returned (or wrapped) by any operation on a closed
	// engine, backend or matrix.
	ErrClosed = errors.New("qgemv: engine or matrix is closed")
	// ErrBatch is wrapped by the error of a multiply whose batch is
	// outside 1..MaxBatch.
	ErrBatch = errors.New("batch must be between 1 and 16")
	// ErrFormatNotImplemented is wrapped by a backend's Load error when
	// the backend has no kernels for the matrix's format, and by a
	// multiply with an activation type the format does not take.
	ErrFormatNotImplemented = errors.New("format not implemented by the backend")
	// ErrUnknownBackend is wrapped by the error of opening a backend name
	// that no backend answers to.
	ErrUnknownBackend = errors.New("unknown backend")
	// ErrOverlap is wrapped by the error of a multiply whose output
	// shares memory with an input it reads.
	ErrOverlap = errors.New("output overlaps an input")
)
