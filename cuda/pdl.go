//go:build cuda

package cuda

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
// #include <stdlib.h>
//
// // qgLaunchPDL launches f with programmatic dependent launch allowed:
// // its blocks may be scheduled before the kernel ahead of it on the
// // stream completes (the kernel waits for it with griddepcontrol.wait).
// static CUresult qgLaunchPDL(CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned shmem, CUstream s, void **args) {
// 	CUlaunchAttribute attr[1];
// 	attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
// 	attr[0].value.programmaticStreamSerializationAllowed = 1;
// 	CUlaunchConfig cfg = {0};
// 	cfg.gridDimX = gx;
// 	cfg.gridDimY = gy;
// 	cfg.gridDimZ = 1;
// 	cfg.blockDimX = bx;
// 	cfg.blockDimY = 1;
// 	cfg.blockDimZ = 1;
// 	cfg.sharedMemBytes = shmem;
// 	cfg.hStream = s;
// 	cfg.attrs = attr;
// 	cfg.numAttrs = 1;
// 	return cuLaunchKernelEx(&cfg, f, args, NULL);
// }
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"gorgonia.org/cu"
)

// Programmatic dependent launch (sm_90 and later): every kernel opens
// with PDL_ENTRY (the .cu files; the int8 tensor-core kernels wait only
// after loading their first weights), which lets the next kernel's blocks
// be scheduled once all of its own have started and then waits for the
// kernel before it to complete. Launched with the attribute, a kernel's
// launch and block scheduling overlap the tail of the one before, which
// otherwise costs microseconds per dependent kernel (a layer's multiplies
// and their preparations are a chain of them). Only kernels whose PTX
// holds the wait are launched so (pdlEntries); QGEMV_CUDA_PDL=0 turns it
// off.

// EnvPDL set to 0 launches every kernel without programmatic dependent
// launch.
const EnvPDL = "QGEMV_CUDA_PDL"

// pdlEntries returns the kernels of a PTX module that hold
// griddepcontrol.wait (PDL_ENTRY) and so may be launched with the
// attribute: for each ".entry NAME(", whether the wait comes before the
// next entry.
func pdlEntries(ptx string) map[string]bool {
	out := map[string]bool{}
	parts := strings.Split(ptx, ".entry ")
	for _, p := range parts[1:] {
		name, _, ok := strings.Cut(p, "(")
		if !ok {
			continue
		}
		if strings.Contains(p, "griddepcontrol.wait") {
			out[strings.TrimSpace(name)] = true
		}
	}
	return out
}

// launchArgs is C memory for one launch's kernel parameters (the values,
// then a pointer to each), reused by every launch (backend calls run one at a time).
type launchArgs struct{ p unsafe.Pointer }

func newLaunchArgs() launchArgs {
	return launchArgs{C.malloc(C.size_t(2 * maxKernelArgs * 8))}
}

func (a *launchArgs) free() {
	if a.p != nil {
		C.free(a.p)
		a.p = nil
	}
}

// launchPDL launches f on the backend's stream with programmatic
// dependent launch allowed (in a backend call); vals are the parameters.
func (b *Backend) launchPDL(name string, f cu.Function, gx, gy, bx, shmem int, vals []uint64) error {
	if b.cargs.p == nil {
		b.cargs = newLaunchArgs()
	}
	v := unsafe.Slice((*uint64)(b.cargs.p), maxKernelArgs)
	ptrs := unsafe.Slice((*unsafe.Pointer)(unsafe.Add(b.cargs.p, maxKernelArgs*8)), maxKernelArgs)
	for i, x := range vals {
		v[i] = x
		ptrs[i] = unsafe.Pointer(&v[i])
	}
	cf := *(*C.CUfunction)(unsafe.Pointer(&f)) // cu.Function holds just the CUfunction
	r := C.qgLaunchPDL(cf, C.uint(gx), C.uint(gy), C.uint(bx), C.uint(shmem), b.cstream(), &ptrs[0])
	if r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: launching %s (%dx%d blocks of %d): CUresult %d", name, gx, gy, bx, int(r))
	}
	return nil
}

// pdlAllowed reports whether the environment leaves programmatic
// dependent launch on.
func pdlAllowed() bool { return os.Getenv(EnvPDL) != "0" }
