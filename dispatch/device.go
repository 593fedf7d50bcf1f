package dispatch

import "github.com/qgemv/qgemv/internal/devbuf"

// Device is implemented by backends whose vectors live in device memory
// (CUDA, OpenCL): the root package's Buffers are then Bufs, and the
// multiplies and element-wise operations on them are queued on the
// device's stream or queue in call order, without copies to or from the
// host. Backends without it (the CPU) keep buffers in host memory.
//
// Every operation returns once its work is queued (Buf.Write first waits
// for the queued work); a fault met by queued work (a NaN reaching an
// on-device quantization, a corrupted stream of an entropy-coded int8
// matrix) is returned by the next Wait or Buf.Read, once. Entropy-coded
// Bits matrices decode and check their words before each multiply,
// waiting for the decoder: a corrupt stream is that multiply's error. An
// operation the device has no kernel for returns ErrNoDevicePath, and
// the caller runs it on the host between a Read and a Write.
type Device interface {
	// NewBuf allocates size bytes of device memory, zeroed. Asking for
	// more than the device has is an error; the backend keeps working.
	NewBuf(size int64) (Buf, error)
	// Wait waits for all queued work and returns the first fault it met.
	Wait() error
	// SwiGLU queues dst[i] = g[i] / (1 + exp(-g[i])) * u[i], i < n
	// (float32 Bufs; dst may be g or u).
	SwiGLU(dst, g, u Buf, n int) error
	// Add queues dst[i] = a[i] + b[i], i < n.
	Add(dst, a, b Buf, n int) error
	// Scale queues dst[i] = s * a[i], i < n.
	Scale(dst, a Buf, s float32, n int) error
	// Requantize queues dst[i] = layout.Requantize's int8 of alpha *
	// src[i] (src int32, dst int8), i < n: bit-exact.
	Requantize(dst, src Buf, alpha float32, n int) error
}

// Buf is device memory a Device allocated. Write and Read copy bytes at
// a byte offset; Read waits for the work queued before it and returns
// its first fault, as Device.Wait does.
type Buf = devbuf.Buf

// RoundingMatrix is implemented by matrices that round float32
// activations to binary16 where they compute (a GPU's gather kernel), so
// that A16 from host slices needs no pass over the activations on the
// host: MulRoundedF16 is MulF16 of x rounded to nearest even.
type RoundingMatrix interface {
	MulRoundedF16(dst, x []float32, batch int) error
}

// DeviceMatrix is implemented by the matrices of a Device backend that
// multiply Bufs on the device. Each checks the batch (1..16) and that
// its buffers hold what it reads and writes (an error naming the
// operand, before anything is queued): x holds at least batch*Cols
// float32 values (batch*PaddedCols int8 values and
// batch*PaddedCols/128 scales for the quantized forms), dst at least
// batch*Rows. Each method returns ErrNoDevicePath where the format or
// activation has no device kernel.
type DeviceMatrix interface {
	// MulF16Buf multiplies float32 activations rounded to binary16
	// (round to nearest even): MulF16 of the rounded values.
	MulF16Buf(dst, x Buf, batch int) error
	// MulA8Buf quantizes float32 activations on the device as
	// QuantizeBuf does and multiplies them: MulA8, bit-exact.
	MulA8Buf(dst, x Buf, batch int) error
	// QuantizeBuf quantizes float32 activations as layout.QuantizeA8 does
	// (in stored column order for an act-order matrix), bit-exact.
	QuantizeBuf(xq, xs, x Buf, batch int) error
	// MulI8Buf multiplies activations QuantizeBuf quantized: MulI8.
	MulI8Buf(dst, xq, xs Buf, batch int) error
	// MulI32Buf multiplies int8 vectors exactly (the int8 formats): MulI32.
	MulI32Buf(dst, x Buf, batch int) error
}

// ErrNoDevicePath is returned by a Device or DeviceMatrix operation that
// has no device kernel; the caller runs the operation on the host.
var ErrNoDevicePath = devbuf.ErrNoDevicePath

// Capturer is implemented by device backends that capture a series of
// queued operations as one graph (CUDA graphs); Graph is what they
// capture.
type (
	Capturer = devbuf.Capturer
	Graph    = devbuf.Graph
)

// IOCapturer is implemented by device backends that also capture a
// step's input and output copies with its operations (CUDA): IOGraph is
// what they capture.
type (
	IOCapturer = devbuf.IOCapturer
	IOGraph    = devbuf.IOGraph
)

// ReadTimer is implemented by device backends that time their read
// kernel: the roofline a multiply streaming that many bytes is compared
// against.
type ReadTimer interface {
	// ReadTime returns the device seconds of one read of size bytes,
	// rotating over enough buffers of that size to stream past the
	// device's cache, iters reads back to back.
	ReadTime(size int64, iters int) (float64, error)
}

// KernelTimer is implemented by device backends that time their multiply
// kernels alone (the benchmarks compare the API's time with it).
type KernelTimer interface {
	// KernelTime returns the device seconds per multiply of iters
	// launches back to back, rotating over mats (matrices of one shape
	// and format loaded on this backend), with activation act ("A32",
	// "A16" or "A8") and batch; the activations are uploaded once.
	KernelTime(mats []Matrix, act string, batch, iters int) (float64, error)
}
