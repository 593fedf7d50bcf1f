//go:build opencl && amd64

package opencl

// The OpenCL ICD loader is opened at run time (dlopen) rather than linked:
// loader_amd64.S defines every OpenCL function qgemv and go-opencl call as
// a jump through qg_cl_fn, so a binary built with the opencl tag starts
// without libOpenCL.so.1 and reports its absence as an error (dispatch then
// uses the CPU). $QGEMV_OPENCL_LIB names another loader file.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define QG_CL_N 44
static const char *qgClNames[QG_CL_N] = {
	"clBuildProgram",
	"clCreateBuffer",
	"clCreateCommandQueue",
	"clCreateContext",
	"clCreateImage",
	"clCreateKernel",
	"clCreateProgramWithBinary",
	"clCreateProgramWithSource",
	"clCreateUserEvent",
	"clEnqueueBarrierWithWaitList",
	"clEnqueueCopyBuffer",
	"clEnqueueFillBuffer",
	"clEnqueueMapBuffer",
	"clEnqueueMapImage",
	"clEnqueueMarkerWithWaitList",
	"clEnqueueNDRangeKernel",
	"clEnqueueReadBuffer",
	"clEnqueueReadImage",
	"clEnqueueTask",
	"clEnqueueUnmapMemObject",
	"clEnqueueWriteBuffer",
	"clEnqueueWriteImage",
	"clFinish",
	"clFlush",
	"clGetDeviceIDs",
	"clGetDeviceInfo",
	"clGetEventProfilingInfo",
	"clGetKernelArgInfo",
	"clGetKernelInfo",
	"clGetKernelWorkGroupInfo",
	"clGetPlatformIDs",
	"clGetPlatformInfo",
	"clGetProgramBuildInfo",
	"clGetProgramInfo",
	"clGetSupportedImageFormats",
	"clReleaseCommandQueue",
	"clReleaseContext",
	"clReleaseEvent",
	"clReleaseKernel",
	"clReleaseMemObject",
	"clReleaseProgram",
	"clSetKernelArg",
	"clSetUserEventStatus",
	"clWaitForEvents",
};

// qg_cl_missing stands in for functions the loader lacks: it returns
// CL_PLATFORM_NOT_FOUND_KHR. Only clGetPlatformIDs can reach it after a
// failed load (listDevices stops there).
static long qg_cl_missing(void) { return -1001; }

void *qg_cl_fn[QG_CL_N];
static pthread_once_t qg_cl_once = PTHREAD_ONCE_INIT;
static int qg_cl_ok;
static char qg_cl_err[512];

static void qg_cl_open(void) {
	for (int i = 0; i < QG_CL_N; i++) qg_cl_fn[i] = (void *)qg_cl_missing;
	const char *lib = getenv("QGEMV_OPENCL_LIB");
	void *h = dlopen(lib && *lib ? lib : "libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h && !(lib && *lib)) h = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		strncpy(qg_cl_err, e ? e : "dlopen failed", sizeof qg_cl_err - 1);
		return;
	}
	for (int i = 0; i < QG_CL_N; i++) {
		void *f = dlsym(h, qgClNames[i]);
		if (f) qg_cl_fn[i] = f;
	}
	if (!dlsym(h, "clGetPlatformIDs")) {
		strncpy(qg_cl_err, "the library has no clGetPlatformIDs", sizeof qg_cl_err - 1);
		return;
	}
	qg_cl_ok = 1;
}

static int qg_cl_load(void) {
	pthread_once(&qg_cl_once, qg_cl_open);
	return qg_cl_ok;
}
static const char *qg_cl_error(void) { return qg_cl_err; }
static const char *qg_cl_name(int i) { return i >= 0 && i < QG_CL_N ? qgClNames[i] : NULL; }
*/
import "C"

import "fmt"

// icdNames returns the functions of qg_cl_fn in slot order (for the test
// that checks loader_amd64.S against them).
func icdNames() []string {
	var out []string
	for i := 0; C.qg_cl_name(C.int(i)) != nil; i++ {
		out = append(out, C.GoString(C.qg_cl_name(C.int(i))))
	}
	return out
}

// loadICD opens the OpenCL ICD loader once per process; the error says
// what is missing and how to install it.
func loadICD() error {
	if C.qg_cl_load() != 0 {
		return nil
	}
	return fmt.Errorf("opencl: the OpenCL ICD loader (libOpenCL.so.1) could not be loaded: %s; install it (Debian/Ubuntu: apt-get install ocl-icd-libopencl1) plus a driver for the device (intel-opencl-icd, the NVIDIA driver, pocl-opencl-icd)", C.GoString(C.qg_cl_error()))
}
