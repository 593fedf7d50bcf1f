package layout

// EncodeGroupGo is the Go candidate encoder, for the external tests that
// check the installed kernels against it.
var EncodeGroupGo = encodeGroupGo

// EncodeGroupKernel runs the installed encoder.
func EncodeGroupKernel(vals []float32, q []uint8, s float32, z uint8, best float64) float64 {
	return (*encodeKernel.Load())(vals, q, s, z, best)
}

// BitsEncodeGo is the Go encoder of the Bits quantizer.
var BitsEncodeGo = bitsEncodeGo

// BitsEncodeKernelRun runs the installed Bits encoder.
func BitsEncodeKernelRun(vals []float32, q []uint32, s, z, qmax, best float64) float64 {
	return (*bitsEncodeKernel.Load())(vals, q, s, z, qmax, best)
}

// WithEncodeKernels installs q4 and bits until the returned function puts
// back what was installed.
func WithEncodeKernels(q4 EncodeKernel, bits BitsEncodeKernel) func() {
	k, kb := encodeKernel.Load(), bitsEncodeKernel.Load()
	SetEncodeKernel(q4)
	SetBitsEncodeKernel(bits)
	return func() { encodeKernel.Store(k); bitsEncodeKernel.Store(kb) }
}
