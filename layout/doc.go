// Package layout defines qgemv's quantized matrix formats as plain data:
// geometry, packing, validation, quantization from float32, exact
// dequantization, the float64 reference dot product that every kernel of
// every backend is tested against, activation quantization for the integer
// paths, and the versioned .qgv file container.
//
// The package uses only the standard library: no unsafe, no assembly, no
// cgo. Every backend consumes these bytes unchanged; a backend that needs
// another arrangement derives it once at load time.
//
// # Q4G128
//
// A matrix of R rows (outputs) by C columns (inputs), 4-bit unsigned
// weights q in [0, 15], one float32 scale s and one 4-bit zero point z per
// (row, group of 128 columns). The dequantized weight is
//
//	w = (q - z) * s
//
// (exact in float64; Dequantize rounds it once to float32).
//
// R and C are padded up to PR and PC, multiples of 128; the true R and C
// are kept. Padding weights have q == z (dequantize to exactly zero) and
// padding rows have s == 0, z == 0.
//
//   - Weights: PR*PC/2 bytes, row-major. Byte r*PC/2 + j holds column 2j in
//     its low nibble and column 2j+1 in its high nibble. Weights are never
//     reordered for a SIMD width; kernels reorder activations instead.
//   - Blocks of 128x128, numbered left to right, top to bottom:
//     block_id = (r/128)*(PC/128) + c/128.
//   - Scales: float32[NumBlocks*128]; the scale of row r in column group
//     g = c/128 is Scales[block_id*128 + r%128].
//   - Zeros: u4 with the same index as Scales, two per byte, even index in
//     the low nibble: NumBlocks*64 bytes.
//
// # Activation quantization (A8)
//
// For the integer paths an activation vector x of C floats is quantized per
// group of 128 inputs (zero padded to PC) by QuantizeA8:
//
//	amax = max |x_i| over the group (float32)
//	if amax == 0: scale = 0, every q_i = 0
//	else: scale = amax / 127, inv = 127 / amax,
//	      q_i = RoundHalfToEven(x_i * inv), clamped to [-127, 127]
//
// with every operation an IEEE float32 operation, except that a group
// with amax < 2^-100 computes inv = 127 / (amax * 2^64) and
// q_i = RoundHalfToEven((x_i * 2^64) * inv): the scaling is exact, gives
// the same q_i wherever 127 / amax is finite, and keeps inv finite below
// about 3.7e-37, where 127 / amax overflows. All backends use these
// bytes, so int32 results are bit-exact across backends.
//
// The W4A8 output is defined exactly (see DotA8Exact): for row r,
//
//	acc = float32(0)
//	for g in 0 .. PC/128-1:
//	    isum = sum_c q[r,c]*xq[c] - z[r,g]*sum_c xq[c]   (int32, c in group g)
//	    acc  = acc + float32(s[r,g]*xs[g]) * float32(isum)
//
// each multiplication and addition rounded to float32 separately (no fused
// multiply-add). Every backend and ISA reproduces this bit for bit.
//
// # Determinism
//
// The quantizers, the encoders and the float64 references compute every
// product that is added in its own rounding (float64(x*y) + z): Go may
// fuse a multiply and an add into one rounding on arm64, ppc64le, riscv64,
// s390x and amd64 with GOAMD64=v3 unless the product is converted
// explicitly, and a fused operation would quantize the same input to other
// bytes on those targets. make fma-check fails on any fused instruction in
// this package's listings for them. The results then also do not depend on
// the core count (rows run in parallel, sums over rows serially). The ANS
// encoder's model choice compares costs from a table of log2(1..129) that
// layout/ans computes with basic operations alone (math.Log2 is an
// assembly routine on some architectures and need not round alike), so it
// too writes the same bytes everywhere.
//
// # Checks
//
// Whatever takes a caller's shape, slices or file returns an error naming
// the problem: the constructors and quantizers (also a shape whose
// buffers exceed the memory the process can have), Validate, the
// decoders, the reference products (DotRef, DotA8Exact, which Validate
// first). The element accessors of a valid matrix (Q4G128.Q, Scale,
// Zero; Bits.Q, SetQ; Sparse12.Pair, SetPair; codebook and ggml
// accessors, ggml block helpers) index its slices directly, for the
// kernels' tests and encoders: coordinates outside the padded shape, or
// a block shorter than its type's bytes, panic as slice indexing does.
//
// # The .qgv container
//
// See container.go for the byte-level specification.
package layout
