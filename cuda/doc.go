// Package cuda is qgemv's CUDA backend for NVIDIA GPUs, behind the build
// tag "cuda" (the default build does not compile it): Q4G128, the
// Bits(n, g) low-bit family and Sparse12 with float32, binary16 and int8
// activations; codebook matrices (CodeGEMM Psumbook, codebook.go) with
// float activations; entropy-coded int8 matrices (layout/ans, ans.go)
// with the decode fused into an exact int32 dot product, and the MatVANS
// chain (RunChain). Batch 1..16, matrices resident in device memory.
//
// # Building and running
//
// The package uses gorgonia.org/cu, which needs cgo, cuda.h to compile and
// the NVIDIA driver's libcuda.so.1 to run: a binary built with -tags cuda
// does not start on a machine without the driver (the dynamic loader
// cannot find libcuda.so.1). cu's package initialisation would exit the
// process if cuInit failed (no visible device, say); this package defines
// cuInit in the executable (init.go), calling the driver's own and
// reporting success to cu, so that Devices and Open return the driver's
// result as an error instead and the CPU backends still run. `make
// cuda-headers` fetches cuda.h and a libcuda.so link stub (from Debian's
// nvidia-cuda-dev, through apt) into the user cache, once per machine;
// `make cuda-vet`, `make cuda-test-bin` and `eval "$(make -s cuda-env)"`
// use them.
//
// # Kernels
//
// Every cuda/*.cu source is compiled ahead of time to PTX for sm_75, sm_80
// and sm_90 by go run ./gen when a CUDA compiler is present; a capability's
// PTX is kept only where it differs from the next lower one's in more than
// its .target line (today kernels.cu has sm_75 and sm_80, whose
// tensor-core kernels need sm_80; ans.cu and codebook.cu have sm_75 only).
// The kept files, cuda/ptx/<source>_sm_<cc>.ptx.gz, are gzip-compressed
// and embedded; without a compiler gen checks that each records its
// source's current hash. Open takes, per source, the highest PTX not above
// the device's capability, decompresses it, has the driver compile it for
// the device (an sm_90 device compiles the sm_80 PTX; PTXArch reports the
// highest target loaded), and runs a self-test kernel, so a driver that
// cannot run the PTX fails at Open with its JIT log. Every
// call runs on its caller's goroutine, locked to its OS thread, under the
// backend's lock, with the context pushed for the call and popped after
// (the thread's own context stack is left as it was); every kernel scalar argument is 64 bits wide (cu copies 8
// bytes per argument). A multiply of host slices copies its activations
// into pinned staging memory, which the first kernel reads over the bus
// where the device maps host memory (else a queued copy moves them), and
// the multiply stores its results into pinned memory likewise; the call
// waits once.
//
// Binary16 activations on sm_80 and later (Q4G128; Bits with 8, 4 or 2
// bits and groups of at least 128) run on tensor cores: codes become
// exact binary16 integers by the 0x6400 magic number, mma.m16n8k16
// multiplies them with the activations exactly and accumulates in
// float32, and scales (and, for Bits, s*sum(q*x) - m*sum(x)) are applied
// per 128-column block in float32. The K order inside a block is
// permuted to match the code pairs the magic yields, and the activations
// are stored in the order a warp's fragment loads read them. A block of 8
// warps takes 16 rows; the warps share out its groups or chunks. The
// Bits kernels load each chunk's scales, offsets and activation sums
// with its weights, one value per lane, and shuffle them to the lanes
// that need them after the products.
// Float32 activations of the same matrices run on the same kernels: the
// host splits each vector into binary16 hi and lo parts (sigma*x = hi +
// lo within 2^-22 of each value, sigma a power of two), both are
// multiplied in one launch (slots 2v and 2v+1; up to 8 vectors per
// launch), and y = (y_hi + y_lo)/sigma in float32; vectors holding NaN or
// an infinity take the CUDA-core kernels, which propagate them.
//
// Other float kernels: one warp computes 4, 2 or 2 rows for batches of
// 1, 2..4 and 5..16 (activations padded to 1, 4 or 16 vectors), each
// lane streaming 16 bytes of each row per step with two steps in flight
// (Q4G128: 32 columns of one group; Bits: four words of a chunk, i.e.
// four consecutive columns per plane), activations read through the
// read-only cache, every loaded weight used for all the batch's vectors.
// The K dimension is split (SplitK) across blocks when there are too few
// rows to fill the device, reduced by default deterministically (partials
// in a workspace; the block that finishes a row tile last adds its
// partials in split order, in the same launch; the codebook kernels use a
// second kernel, split_reduce) or with atomics (Options.Mode,
// QGEMV_CUDA_SPLITK_MODE).
//
// Int8 kernels are bit-exact with layout's DotA8Exact: per-block int32
// sums, then f = s*xs, term = f*isum and acc = acc + term in float32,
// unfused, in block order. The exact order is why int8 multiplies are not
// split. On sm_80 and later, Q4G128 and Bits 8/4/2 with groups of at
// least 128 take the sums from the int8 tensor cores (mma.m16n8k32; the
// activations in the fragments' K order, gpuhost.A8FragOrder) and keep
// the block order across warps through shared memory; the other formats
// and older GPUs use dp4a (Q4G128 with the activations reordered per 8
// columns to meet the low and high nibbles; Bits with the codes of four
// consecutive columns gathered into one word; Sparse12 with the position
// bits selecting even or odd activations byte by byte).
//
// On sm_90 and later every kernel is launched with programmatic
// dependent launch (pdl.go): it opens by letting the next kernel's blocks
// be scheduled and then waits for the one before it to complete, so
// launches overlap the previous kernel's tail; QGEMV_CUDA_PDL=0 turns it
// off.
//
// A host-slice multiply (MulA8, MulF16, MulRoundedF16) runs its kernels
// on activations and results in pinned host memory where the device maps
// it, and from its second call with one matrix, operation and batch on
// as a captured graph, one driver call (graph.go); QGEMV_CUDA_HOSTGRAPH=0
// queues them kernel by kernel. MulA8 on rows of 8192 columns or more
// quantizes on the host, a quarter of the bytes over the bus
// (QGEMV_CUDA_HOSTQUANT sets the threshold, 0 turns it off).
//
// For kernel development, QGEMV_CUDA_PTX names a directory whose
// <source>_sm_<cc>.ptx (or .ptx.gz) files are loaded instead of the
// embedded PTX of their sources (chosen per source in the same way; other
// sources keep the embedded PTX), so variants of the .cu sources can be
// timed without rebuilding a binary.
package cuda
