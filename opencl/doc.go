// Package opencl is qgemv's OpenCL backend for Intel iGPUs and any
// OpenCL 1.2+ device (NVIDIA, AMD, PoCL on the CPU). It is compiled only
// with the build tag "opencl" (it needs cgo and links the OpenCL ICD
// loader, libOpenCL.so.1); the default build does not need OpenCL and
// this package then holds only this documentation.
//
// Kernels (gemv.cl, embedded with go:embed) run Q4G128, Bits(n, g) and
// Sparse12 GEMV for batch 1..16 with float32 activations (A32), binary16
// activations widened exactly on the host (A16), and int8 activations
// (A8, quantized on the host with layout.QuantizeA8, bit-exact against
// DotA8Exact). One row per work-group; float paths reduce with
// sub-groups where the device has cl_intel_subgroups or cl_khr_subgroups
// and with a local-memory tree otherwise; no atomics. On NVIDIA sm_80+
// devices float32 multiplies of Q4G128 and Bits 8/4/2 (groups of at least
// 128) at batch 1-4 run on tensor cores through inline PTX, with each
// vector split into exact binary16 hi/lo parts, and Bits4 int8 multiplies
// of matrices with few rows or long ones run mma.m16n8k32 (bit-exact).
// There Q4G128 matrices are stored in 16-row tiles (Options.Q4Layout),
// elsewhere in their canonical row-major bytes. On amd64 the
// ICD loader is opened at run time, so a missing libOpenCL.so.1 is an
// error, not a failure to start. Programs are built
// per device with an explicit -cl-std and cached on disk
// (os.UserCacheDir()/qgemv/opencl, or $QGEMV_OPENCL_CACHE) keyed by a
// hash of source, options, device, driver and platform; a self-test
// kernel runs at Open (set QGEMV_OPENCL_BUILDLOG=1 to print the log of
// every program built from source, e.g. register counts with the
// benchmark variant -cl-nv-verbose). Devices sharing memory with the host get
// CL_MEM_ALLOC_HOST_PTR buffers accessed by mapping (zero-copy).
//
// Package dispatch lists the devices as backends "opencl", "opencl:1",
// ... and uses one by default only after a calibration shows it faster
// than the CPU (never a CPU-type device such as PoCL).
package opencl
