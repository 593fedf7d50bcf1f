package layout

// EncodeGroupGo is the Go candidate encoder, for the external tests that
// check the installed kernels against it.
var EncodeGroupGo = encodeGroupGo

// EncodeGroupKernel runs the installed encoder (HasEncodeKernel).
func EncodeGroupKernel(vals []float32, q []uint8, s float32, z uint8, best float64) float64 {
	return (*encodeKernel.Load())(vals, q, s, z, best)
}

// WithoutEncodeKernel uninstalls the encoder until the returned function
// puts it back.
func WithoutEncodeKernel() func() {
	k := encodeKernel.Load()
	encodeKernel.Store(nil)
	return func() { encodeKernel.Store(k) }
}

// BitsEncodeGo is the Go encoder of the Bits quantizer.
var BitsEncodeGo = bitsEncodeGo

// BitsEncodeKernelRun runs the installed Bits encoder (HasBitsEncodeKernel).
func BitsEncodeKernelRun(vals []float32, q []uint32, s, z, qmax, best float64) float64 {
	return (*bitsEncodeKernel.Load())(vals, q, s, z, qmax, best)
}

// WithoutBitsEncodeKernel uninstalls the Bits encoder until the returned
// function puts it back.
func WithoutBitsEncodeKernel() func() {
	k := bitsEncodeKernel.Load()
	bitsEncodeKernel.Store(nil)
	return func() { bitsEncodeKernel.Store(k) }
}

// WithEncodeKernels installs q4 and bits until the returned function puts
// back what was installed.
func WithEncodeKernels(q4 EncodeKernel, bits BitsEncodeKernel) func() {
	k, kb := encodeKernel.Load(), bitsEncodeKernel.Load()
	SetEncodeKernel(q4)
	SetBitsEncodeKernel(bits)
	return func() { encodeKernel.Store(k); bitsEncodeKernel.Store(kb) }
}
