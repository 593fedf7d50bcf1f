//go:build cuda

package cuda

// gorgonia.org/cu calls cuInit in its package initialisation and exits the
// process when it fails (no visible device, CUDA_VISIBLE_DEVICES="", a
// driver without a usable GPU). This file defines cuInit in the executable,
// which takes precedence over libcuda.so.1's: it calls the driver's own
// (found with dlsym(RTLD_NEXT)), records the result and reports success,
// so that cu's initialisation returns and the failure reaches the caller
// of Devices or Open as an error instead. cu's later calls then fail with
// CUDA_ERROR_NOT_INITIALIZED, which they return as errors.

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <cuda.h>

static CUresult qgemvInitResult = CUDA_ERROR_NOT_INITIALIZED;
static int qgemvInitCalled;

CUresult cuInit(unsigned int flags) {
	CUresult (*real)(unsigned int) = (CUresult (*)(unsigned int))dlsym(RTLD_NEXT, "cuInit");
	qgemvInitCalled = 1;
	qgemvInitResult = real ? real(flags) : CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
	return CUDA_SUCCESS;
}

static int qgemvCuInitCalled(void) { return qgemvInitCalled; }
static CUresult qgemvCuInitResult(void) { return qgemvInitResult; }

// qgemvErrorName names r (cuGetErrorName works without an initialised
// driver), or returns NULL.
static const char *qgemvErrorName(CUresult r) {
	const char *s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS) return NULL;
	return s;
}
*/
import "C"

import "fmt"

// initErr returns the driver's cuInit result as an error (nil when it
// succeeded): "no CUDA device", say, where cu would have exited.
func initErr() error {
	if C.qgemvCuInitCalled() == 0 {
		return nil // cuInit was not interposed (another link order): cu checked it
	}
	if r := C.qgemvCuInitResult(); r != C.CUDA_SUCCESS {
		name := fmt.Sprintf("CUresult %d", int(r))
		if s := C.qgemvErrorName(r); s != nil {
			name = C.GoString(s)
		}
		return fmt.Errorf("cuda: initialising the driver (cuInit): %s (no usable CUDA device: none visible, or the driver cannot use it)", name)
	}
	return nil
}
