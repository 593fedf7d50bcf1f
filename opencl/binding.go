//go:build opencl

package opencl

// This file is the only one that touches OpenCL. It uses
// github.com/jgillich/go-opencl (package cl) for platforms, devices,
// contexts, queues and buffers, and small cgo calls of its own for what
// that binding lacks or gets wrong:
//   - extension strings of platforms, sub-group sizes, device type names;
//   - build logs of every device (cl reports the first device's only);
//   - programs from binaries and their retrieval (the program cache);
//   - kernels, arguments, launches and profiling events (cl's Program
//     cannot be created from a binary, so kernels are ours too);
//   - clFlush (cl's Flush calls clFinish);
//   - reads, writes, maps and fills of buffers (cl's allocate per call);
//   - empty slices, which panic in cl: every call here guards them.
// The raw handles of cl's objects are read from their first (unexported)
// field; this is tied to the pinned version of go-opencl and checked by
// TestBindingHandles.

/*
#cgo CFLAGS: -DCL_TARGET_OPENCL_VERSION=120 -DCL_USE_DEPRECATED_OPENCL_1_2_APIS
#cgo !amd64 LDFLAGS: -lOpenCL
#include <stdlib.h>
#include <CL/cl.h>
#include <CL/cl_ext.h>

#ifndef CL_DEVICE_SUB_GROUP_SIZES_INTEL
#define CL_DEVICE_SUB_GROUP_SIZES_INTEL 0x4108
#endif

static cl_int qg_build(cl_program p, cl_device_id d, const char *opts) {
	return clBuildProgram(p, 1, &d, opts, NULL, NULL);
}
static cl_program qg_from_source(cl_context c, const char *src, size_t len, cl_int *err) {
	return clCreateProgramWithSource(c, 1, &src, &len, err);
}
static cl_program qg_from_binary(cl_context c, cl_device_id d, const unsigned char *bin, size_t len, cl_int *status, cl_int *err) {
	return clCreateProgramWithBinary(c, 1, &d, &len, &bin, status, err);
}
static cl_int qg_binary(cl_program p, unsigned char *dst, size_t len) {
	return clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof(dst), &dst, NULL);
}
static cl_int qg_launch(cl_command_queue q, cl_kernel k, size_t g0, size_t l0) {
	return clEnqueueNDRangeKernel(q, k, 1, NULL, &g0, &l0, 0, NULL, NULL);
}

// The calls below take and return values only (no Go pointer but the
// data of reads and writes), so that a multiply allocates nothing: a Go
// variable whose address cgo passes to C escapes to the heap.
typedef struct { cl_event ev; cl_int err; } qg_ev;
static qg_ev qg_launch_ev(cl_command_queue q, cl_kernel k, size_t g0, size_t l0) {
	qg_ev r;
	r.err = clEnqueueNDRangeKernel(q, k, 1, NULL, &g0, &l0, 0, NULL, &r.ev);
	return r;
}
static cl_int qg_arg_mem(cl_kernel k, cl_uint i, cl_mem m) { return clSetKernelArg(k, i, sizeof(m), &m); }
static cl_int qg_arg_u32(cl_kernel k, cl_uint i, cl_uint v) { return clSetKernelArg(k, i, 4, &v); }
static cl_int qg_arg_local(cl_kernel k, cl_uint i, size_t n) { return clSetKernelArg(k, i, n, NULL); }
static cl_int qg_write(cl_command_queue q, cl_mem m, size_t off, size_t n, const void *p) {
	return clEnqueueWriteBuffer(q, m, CL_TRUE, off, n, p, 0, NULL, NULL);
}
static cl_int qg_read(cl_command_queue q, cl_mem m, size_t off, size_t n, void *p) {
	return clEnqueueReadBuffer(q, m, CL_TRUE, off, n, p, 0, NULL, NULL);
}
static cl_int qg_write_nb(cl_command_queue q, cl_mem m, size_t off, size_t n, const void *p) {
	return clEnqueueWriteBuffer(q, m, CL_FALSE, off, n, p, 0, NULL, NULL);
}
static cl_int qg_read_nb(cl_command_queue q, cl_mem m, size_t off, size_t n, void *p) {
	return clEnqueueReadBuffer(q, m, CL_FALSE, off, n, p, 0, NULL, NULL);
}
typedef struct { void *p; cl_int err; } qg_map_t;
static qg_map_t qg_map(cl_command_queue q, cl_mem m, cl_map_flags f, size_t off, size_t n) {
	qg_map_t r;
	r.p = clEnqueueMapBuffer(q, m, CL_TRUE, f, off, n, 0, NULL, NULL, &r.err);
	return r;
}
static cl_int qg_unmap(cl_command_queue q, cl_mem m, void *p) {
	return clEnqueueUnmapMemObject(q, m, p, 0, NULL, NULL);
}
static cl_int qg_zero(cl_command_queue q, cl_mem m, size_t n) {
	cl_uchar z = 0;
	return clEnqueueFillBuffer(q, m, &z, 1, 0, n, 0, NULL, NULL);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"unsafe"

	"github.com/jgillich/go-opencl/cl"
)

// clError formats an OpenCL status code.
func clError(what string, code C.cl_int) error {
	if code == C.CL_SUCCESS {
		return nil
	}
	return fmt.Errorf("opencl: %s: error %d (%s)", what, int(code), codeName(int(code)))
}

func codeName(c int) string {
	switch c {
	case -1:
		return "CL_DEVICE_NOT_FOUND"
	case -4:
		return "CL_MEM_OBJECT_ALLOCATION_FAILURE"
	case -5:
		return "CL_OUT_OF_RESOURCES"
	case -6:
		return "CL_OUT_OF_HOST_MEMORY"
	case -11:
		return "CL_BUILD_PROGRAM_FAILURE"
	case -30:
		return "CL_INVALID_VALUE"
	case -36:
		return "CL_INVALID_COMMAND_QUEUE"
	case -42:
		return "CL_INVALID_BINARY"
	case -46:
		return "CL_INVALID_KERNEL_NAME"
	case -48:
		return "CL_INVALID_KERNEL"
	case -51:
		return "CL_INVALID_ARG_SIZE"
	case -54:
		return "CL_INVALID_WORK_GROUP_SIZE"
	case -61:
		return "CL_INVALID_BUFFER_SIZE"
	case -1001:
		return "CL_PLATFORM_NOT_FOUND_KHR: no OpenCL platform (ICD) installed"
	}
	return "see CL/cl.h"
}

// Raw handles of go-opencl's objects: each type's first field.
func rawDevice(d *cl.Device) C.cl_device_id { return *(*C.cl_device_id)(unsafe.Pointer(d)) }
func rawPlatform(p *cl.Platform) C.cl_platform_id {
	return *(*C.cl_platform_id)(unsafe.Pointer(p))
}
func rawContext(c *cl.Context) C.cl_context { return *(*C.cl_context)(unsafe.Pointer(c)) }
func rawQueue(q *cl.CommandQueue) C.cl_command_queue {
	return *(*C.cl_command_queue)(unsafe.Pointer(q))
}
func rawMem(m *cl.MemObject) C.cl_mem { return *(*C.cl_mem)(unsafe.Pointer(m)) }

// DeviceInfo describes one OpenCL device.
type DeviceInfo struct {
	Index           int      // position in Devices()
	Name            string   // device name
	Vendor          string   // device vendor
	Type            string   // "gpu", "cpu", "accelerator" or "other"
	Version         string   // CL_DEVICE_VERSION
	CVersion        string   // CL_DEVICE_OPENCL_C_VERSION
	Driver          string   // CL_DRIVER_VERSION
	Platform        string   // platform name
	PlatformVersion string   // platform version
	Extensions      []string // device extensions
	SubGroupSizes   []int    // cl_intel_subgroups sizes (nil if unknown)
	LocalMem        int64    // local memory bytes
	GlobalMem       int64    // global memory bytes
	MaxAlloc        int64    // largest buffer
	CacheBytes      int      // global memory cache bytes as the driver reports it (NVIDIA: 4 MiB on an H200, whose L2 is 60 MiB)
	ComputeUnits    int      // compute units
	MaxWorkGroup    int      // largest work-group
	Unified         bool     // host-unified memory (iGPU, CPU device)
	CorrectDivide   bool     // correctly rounded float32 division on request (CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT)
	Denorms         bool     // float32 denormals kept (CL_FP_DENORM), not flushed to zero
	ComputeCap      int      // NVIDIA compute capability, major*10+minor (cl_nv_device_attribute_query), 0 if unknown
}

// Has reports whether the device lists extension ext.
func (d *DeviceInfo) Has(ext string) bool {
	for _, e := range d.Extensions {
		if e == ext {
			return true
		}
	}
	return false
}

// device is one OpenCL device with its platform.
type device struct {
	info DeviceInfo
	p    *cl.Platform
	d    *cl.Device
}

func deviceString(d C.cl_device_id, param C.cl_device_info) string {
	var n C.size_t
	if C.clGetDeviceInfo(d, param, 0, nil, &n) != C.CL_SUCCESS || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	if C.clGetDeviceInfo(d, param, n, unsafe.Pointer(&buf[0]), nil) != C.CL_SUCCESS {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00 ")
}

func platformString(p C.cl_platform_id, param C.cl_platform_info) string {
	var n C.size_t
	if C.clGetPlatformInfo(p, param, 0, nil, &n) != C.CL_SUCCESS || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	if C.clGetPlatformInfo(p, param, n, unsafe.Pointer(&buf[0]), nil) != C.CL_SUCCESS {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00 ")
}

// errNoPlatform is returned when no OpenCL platform is installed.
var errNoPlatform = errors.New("opencl: no OpenCL platform found (install an ICD, e.g. intel-opencl-icd, pocl-opencl-icd or the NVIDIA driver)")

// listDevices returns every device of every platform.
func listDevices() ([]*device, error) {
	if err := loadICD(); err != nil {
		return nil, err
	}
	var n C.cl_uint
	if code := C.clGetPlatformIDs(0, nil, &n); code != C.CL_SUCCESS || n == 0 {
		if code == -1001 || n == 0 {
			return nil, errNoPlatform
		}
		return nil, clError("clGetPlatformIDs", code)
	}
	plats, err := cl.GetPlatforms()
	if err != nil {
		return nil, fmt.Errorf("opencl: listing platforms: %w", err)
	}
	var out []*device
	for _, p := range plats {
		var nd C.cl_uint
		if C.clGetDeviceIDs(rawPlatform(p), C.CL_DEVICE_TYPE_ALL, 0, nil, &nd) != C.CL_SUCCESS || nd == 0 {
			continue
		}
		devs, err := p.GetDevices(cl.DeviceTypeAll)
		if err != nil {
			continue
		}
		for _, d := range devs {
			out = append(out, &device{p: p, d: d, info: describe(len(out), p, d)})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("opencl: the OpenCL platforms list no device")
	}
	return out, nil
}

func describe(i int, p *cl.Platform, d *cl.Device) DeviceInfo {
	id := rawDevice(d)
	inf := DeviceInfo{
		Index:           i,
		Name:            strings.TrimSpace(deviceString(id, C.CL_DEVICE_NAME)),
		Vendor:          deviceString(id, C.CL_DEVICE_VENDOR),
		Version:         deviceString(id, C.CL_DEVICE_VERSION),
		CVersion:        deviceString(id, C.CL_DEVICE_OPENCL_C_VERSION),
		Driver:          deviceString(id, C.CL_DRIVER_VERSION),
		Platform:        platformString(rawPlatform(p), C.CL_PLATFORM_NAME),
		PlatformVersion: platformString(rawPlatform(p), C.CL_PLATFORM_VERSION),
		Extensions:      strings.Fields(deviceString(id, C.CL_DEVICE_EXTENSIONS)),
		LocalMem:        d.LocalMemSize(),
		GlobalMem:       d.GlobalMemSize(),
		MaxAlloc:        d.MaxMemAllocSize(),
		CacheBytes:      d.GlobalMemCacheSize(),
		ComputeUnits:    d.MaxComputeUnits(),
		MaxWorkGroup:    d.MaxWorkGroupSize(),
		Unified:         d.HostUnifiedMemory(),
	}
	var t C.cl_device_type
	if C.clGetDeviceInfo(id, C.CL_DEVICE_TYPE, C.size_t(unsafe.Sizeof(t)), unsafe.Pointer(&t), nil) == C.CL_SUCCESS {
		switch {
		case t&C.CL_DEVICE_TYPE_GPU != 0:
			inf.Type = "gpu"
		case t&C.CL_DEVICE_TYPE_CPU != 0:
			inf.Type = "cpu"
		case t&C.CL_DEVICE_TYPE_ACCELERATOR != 0:
			inf.Type = "accelerator"
		default:
			inf.Type = "other"
		}
	}
	if inf.Has("cl_nv_device_attribute_query") {
		var major, minor C.cl_uint
		if C.clGetDeviceInfo(id, C.CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, C.size_t(unsafe.Sizeof(major)), unsafe.Pointer(&major), nil) == C.CL_SUCCESS &&
			C.clGetDeviceInfo(id, C.CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV, C.size_t(unsafe.Sizeof(minor)), unsafe.Pointer(&minor), nil) == C.CL_SUCCESS {
			inf.ComputeCap = int(major)*10 + int(minor)
		}
	}
	var fp C.cl_device_fp_config
	if C.clGetDeviceInfo(id, C.CL_DEVICE_SINGLE_FP_CONFIG, C.size_t(unsafe.Sizeof(fp)), unsafe.Pointer(&fp), nil) == C.CL_SUCCESS {
		inf.CorrectDivide = fp&C.CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT != 0
		inf.Denorms = fp&C.CL_FP_DENORM != 0
	}
	if inf.Has("cl_intel_subgroups") {
		var n C.size_t
		if C.clGetDeviceInfo(id, C.CL_DEVICE_SUB_GROUP_SIZES_INTEL, 0, nil, &n) == C.CL_SUCCESS && n > 0 {
			sz := make([]C.size_t, int(n)/int(unsafe.Sizeof(C.size_t(0))))
			if len(sz) > 0 && C.clGetDeviceInfo(id, C.CL_DEVICE_SUB_GROUP_SIZES_INTEL, n, unsafe.Pointer(&sz[0]), nil) == C.CL_SUCCESS {
				for _, s := range sz {
					inf.SubGroupSizes = append(inf.SubGroupSizes, int(s))
				}
			}
		}
	}
	return inf
}

// ctx is a context and an in-order profiling queue on one device.
type ctx struct {
	dev *device
	c   *cl.Context
	q   *cl.CommandQueue

	// Pinned staging (a CL_MEM_ALLOC_HOST_PTR buffer kept mapped): the
	// buffer writes copy into it and queue non-blocking transfers, and a
	// read queues its transfers into it and waits once. stageUsed bytes
	// from stageP may still feed queued transfers; a finish frees them.
	stage     *buffer
	stageP    unsafe.Pointer
	stageUsed int

	// prep names the activations whose kernel form (the int8 tiled
	// order and block sums, or the binary16 gather) the backend's scratch
	// holds (the zero key: none). Every launch and write clears it, as any
	// of them may change those activations; Matrix.mulI8 and mulF16 set it
	// after their own launches.
	prep prepKey
}

// prepKey identifies a prepared form of a buffer's activations: its kind
// (prepOrder: a8_order_sums into devOrd and devSx; prepF16Tiled,
// prepF16Gather: f16_tiled or f16_gather into devF and devFsum, from
// matrices without act-order), the buffer, the tiled order (Q4G128's or
// the Bits one: it depends on nothing else but the columns), the columns
// and the batch. Kinds start at 1, so the zero key names nothing.
type prepKey struct {
	kind            int
	in              *buffer
	q4              bool
	cols, pc, batch int
}

const (
	prepOrder = iota + 1
	prepF16Tiled
	prepF16Gather
)

// stageMax bounds the copies that go through the pinned staging memory;
// larger ones run blocking from Go memory.
const stageMax = 16 << 20

func newCtx(d *device) (*ctx, error) {
	c, err := cl.CreateContext([]*cl.Device{d.d})
	if err != nil {
		return nil, fmt.Errorf("opencl: %s: creating a context: %w", d.info.Name, err)
	}
	q, err := c.CreateCommandQueue(d.d, cl.CommandQueueProfilingEnable)
	if err != nil {
		c.Release()
		return nil, fmt.Errorf("opencl: %s: creating a queue: %w", d.info.Name, err)
	}
	return &ctx{dev: d, c: c, q: q}, nil
}

func (x *ctx) release() {
	x.dropStage()
	x.q.Release()
	x.c.Release()
}

// dropStage unmaps and releases the staging memory (after a finish: no
// transfer may still use it).
func (x *ctx) dropStage() {
	if x.stage == nil {
		return
	}
	_ = x.finish()
	if C.qg_unmap(rawQueue(x.q), rawMem(x.stage.m), x.stageP) == C.CL_SUCCESS {
		_ = x.finish()
	}
	x.stage.release()
	x.stage, x.stageP, x.stageUsed = nil, nil, 0
}

// staged returns n bytes of pinned staging memory no queued transfer
// uses, waiting for the queue when the free part is too small and
// growing the memory when n exceeds it.
func (x *ctx) staged(n int) (unsafe.Pointer, error) {
	n = (n + 63) &^ 63
	size := 0
	if x.stage != nil {
		size = x.stage.size
	}
	if x.stageUsed+n > size && x.stageUsed > 0 {
		if err := x.finish(); err != nil {
			return nil, err
		}
	}
	if n > size {
		x.dropStage()
		b, err := x.newBuffer(max(n, 64<<10, 2*size), false, true)
		if err != nil {
			return nil, err
		}
		r := C.qg_map(rawQueue(x.q), rawMem(b.m), C.CL_MAP_READ|C.CL_MAP_WRITE, 0, C.size_t(b.size))
		if r.err != C.CL_SUCCESS {
			b.release()
			return nil, fmt.Errorf("opencl: mapping %d bytes of staging memory: %w", b.size, clError("clEnqueueMapBuffer", r.err))
		}
		x.stage, x.stageP = b, r.p
	}
	p := unsafe.Add(x.stageP, x.stageUsed)
	x.stageUsed += n
	return p, nil
}

// writeAsync queues a copy of n bytes at p into b at offset off through
// the staging memory (p may be reused at once); host-allocated buffers and
// copies past stageMax are written as by write.
func (x *ctx) writeAsync(b *buffer, off int, p unsafe.Pointer, n int) error {
	x.prep = prepKey{}
	if b.host || n > stageMax {
		return x.write(b, off, p, n)
	}
	if n == 0 {
		return nil
	}
	if p == nil || off < 0 || off+n > b.size {
		return fmt.Errorf("opencl: write of %d bytes at %d into a buffer of %d", n, off, b.size)
	}
	s, err := x.staged(n)
	if err != nil {
		return err
	}
	copy(unsafe.Slice((*byte)(s), n), unsafe.Slice((*byte)(p), n))
	if code := C.qg_write_nb(rawQueue(x.q), rawMem(b.m), C.size_t(off), C.size_t(n), s); code != C.CL_SUCCESS {
		return fmt.Errorf("opencl: writing %d bytes: %w", n, clError("clEnqueueWriteBuffer", code))
	}
	return nil
}

// readQueued queues a copy of n bytes of b at offset off into staging
// memory and, with st, of st's first 4 bytes after them (one piece of the
// staging memory, so that neither can be handed out again before the
// caller's finish), and returns where they will be after that finish (nil,
// with nothing queued, for host-allocated buffers and copies past
// stageMax, which the caller reads with read).
func (x *ctx) readQueued(b *buffer, off, n int, st *buffer) (data, word unsafe.Pointer, err error) {
	if b.host || n > stageMax || n == 0 {
		return nil, nil, nil
	}
	if off < 0 || off+n > b.size {
		return nil, nil, fmt.Errorf("opencl: read of %d bytes at %d from a buffer of %d", n, off, b.size)
	}
	na := (n + 63) &^ 63
	extra := 0
	if st != nil {
		extra = 64
	}
	s, err := x.staged(na + extra)
	if err != nil {
		return nil, nil, err
	}
	if code := C.qg_read_nb(rawQueue(x.q), rawMem(b.m), C.size_t(off), C.size_t(n), s); code != C.CL_SUCCESS {
		return nil, nil, fmt.Errorf("opencl: reading %d bytes: %w", n, clError("clEnqueueReadBuffer", code))
	}
	if st != nil {
		word = unsafe.Add(s, na)
		if code := C.qg_read_nb(rawQueue(x.q), rawMem(st.m), 0, 4, word); code != C.CL_SUCCESS {
			return nil, nil, fmt.Errorf("opencl: reading the status word: %w", clError("clEnqueueReadBuffer", code))
		}
	}
	return s, word, nil
}

// zero fills the first n bytes of b with zeros (queued).
func (x *ctx) zero(b *buffer, n int) error {
	x.prep = prepKey{}
	return clError("clEnqueueFillBuffer", C.qg_zero(rawQueue(x.q), rawMem(b.m), C.size_t(n)))
}

// finish waits for every queued command.
func (x *ctx) finish() error {
	if err := clError("clFinish", C.clFinish(rawQueue(x.q))); err != nil {
		return err
	}
	x.stageUsed = 0
	return nil
}

// flush submits queued commands without waiting (cl's Flush waits).
func (x *ctx) flush() error { return clError("clFlush", C.clFlush(rawQueue(x.q))) }

// buffer is a device buffer; with host set it was allocated with
// CL_MEM_ALLOC_HOST_PTR and is accessed by mapping.
type buffer struct {
	m    *cl.MemObject
	size int
	host bool
}

// newBuffer allocates size bytes (at least 16: zero-size buffers are
// invalid in OpenCL).
func (x *ctx) newBuffer(size int, readOnly, hostPtr bool) (*buffer, error) {
	size = max(size, 16)
	if int64(size) > x.dev.info.MaxAlloc && x.dev.info.MaxAlloc > 0 {
		return nil, fmt.Errorf("opencl: %s: buffer of %d bytes exceeds the device's largest allocation %d", x.dev.info.Name, size, x.dev.info.MaxAlloc)
	}
	flags := cl.MemReadWrite
	if readOnly {
		flags = cl.MemReadOnly
	}
	if hostPtr {
		flags |= cl.MemAllocHostPtr
	}
	m, err := x.c.CreateEmptyBuffer(flags, size)
	if err != nil {
		return nil, fmt.Errorf("opencl: %s: allocating %d bytes: %w", x.dev.info.Name, size, err)
	}
	return &buffer{m: m, size: size, host: hostPtr}, nil
}

func (b *buffer) release() {
	if b != nil && b.m != nil {
		b.m.Release()
		b.m = nil
	}
}

// write copies n bytes at p into the buffer at offset off (blocking). With
// a host-allocated buffer it maps, copies and unmaps (zero-copy on
// unified memory).
func (x *ctx) write(b *buffer, off int, p unsafe.Pointer, n int) error {
	x.prep = prepKey{}
	if n == 0 {
		return nil
	}
	if p == nil || off < 0 || off+n > b.size {
		return fmt.Errorf("opencl: write of %d bytes at %d into a buffer of %d", n, off, b.size)
	}
	if b.host {
		return x.mapped(b, off, n, p, true)
	}
	if code := C.qg_write(rawQueue(x.q), rawMem(b.m), C.size_t(off), C.size_t(n), p); code != C.CL_SUCCESS {
		return fmt.Errorf("opencl: writing %d bytes: %w", n, clError("clEnqueueWriteBuffer", code))
	}
	return nil
}

// read copies n bytes of the buffer at offset off to p (blocking).
func (x *ctx) read(b *buffer, off int, p unsafe.Pointer, n int) error {
	if n == 0 {
		return nil
	}
	if p == nil || off < 0 || off+n > b.size {
		return fmt.Errorf("opencl: read of %d bytes at %d from a buffer of %d", n, off, b.size)
	}
	if b.host {
		return x.mapped(b, off, n, p, false)
	}
	if code := C.qg_read(rawQueue(x.q), rawMem(b.m), C.size_t(off), C.size_t(n), p); code != C.CL_SUCCESS {
		return fmt.Errorf("opencl: reading %d bytes: %w", n, clError("clEnqueueReadBuffer", code))
	}
	x.stageUsed = 0 // a blocking read in the in-order queue ran after everything queued before it
	return nil
}

// mapped maps n bytes of b at off and copies them from p (write) or to p.
func (x *ctx) mapped(b *buffer, off, n int, p unsafe.Pointer, write bool) error {
	flag := C.cl_map_flags(C.CL_MAP_READ)
	if write {
		flag = C.CL_MAP_WRITE
	}
	r := C.qg_map(rawQueue(x.q), rawMem(b.m), flag, C.size_t(off), C.size_t(n))
	if r.err != C.CL_SUCCESS {
		return fmt.Errorf("opencl: mapping %d bytes: %w", n, clError("clEnqueueMapBuffer", r.err))
	}
	host, dev := unsafe.Slice((*byte)(p), n), unsafe.Slice((*byte)(r.p), n)
	if write {
		copy(dev, host)
	} else {
		copy(host, dev)
	}
	if code := C.qg_unmap(rawQueue(x.q), rawMem(b.m), r.p); code != C.CL_SUCCESS {
		return fmt.Errorf("opencl: unmapping: %w", clError("clEnqueueUnmapMemObject", code))
	}
	return nil
}

// program is a built program.
type program struct{ p C.cl_program }

func (p *program) release() {
	if p != nil && p.p != nil {
		C.clReleaseProgram(p.p)
		p.p = nil
	}
}

// buildLog returns the build log of the context's device.
func (x *ctx) buildLog(p C.cl_program) string {
	id := rawDevice(x.dev.d)
	var n C.size_t
	if C.clGetProgramBuildInfo(p, id, C.CL_PROGRAM_BUILD_LOG, 0, nil, &n) != C.CL_SUCCESS || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	if C.clGetProgramBuildInfo(p, id, C.CL_PROGRAM_BUILD_LOG, n, unsafe.Pointer(&buf[0]), nil) != C.CL_SUCCESS {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00 \n")
}

// buildSource compiles src with opts for the device; the error carries
// the device's full build log.
func (x *ctx) buildSource(src, opts string) (*program, error) {
	if src == "" {
		return nil, errors.New("opencl: empty program source")
	}
	cs := C.CString(src)
	defer C.free(unsafe.Pointer(cs))
	var code C.cl_int
	p := C.qg_from_source(rawContext(x.c), cs, C.size_t(len(src)), &code)
	if code != C.CL_SUCCESS {
		return nil, clError("clCreateProgramWithSource", code)
	}
	return x.build(p, opts)
}

func (x *ctx) build(p C.cl_program, opts string) (*program, error) {
	co := C.CString(opts)
	defer C.free(unsafe.Pointer(co))
	if code := C.qg_build(p, rawDevice(x.dev.d), co); code != C.CL_SUCCESS {
		log := x.buildLog(p)
		C.clReleaseProgram(p)
		return nil, fmt.Errorf("opencl: building for device %q (%s, driver %s) with %q: %w\nbuild log:\n%s",
			x.dev.info.Name, x.dev.info.Platform, x.dev.info.Driver, opts, clError("clBuildProgram", code), log)
	}
	if os.Getenv("QGEMV_OPENCL_BUILDLOG") != "" {
		fmt.Fprintf(os.Stderr, "opencl: build log for %q with %q:\n%s\n", x.dev.info.Name, opts, x.buildLog(p))
	}
	return &program{p: p}, nil
}

// buildBinary loads a binary from the program cache.
func (x *ctx) buildBinary(bin []byte, opts string) (*program, error) {
	if len(bin) == 0 {
		return nil, errors.New("opencl: empty program binary")
	}
	cb := C.CBytes(bin)
	defer C.free(cb)
	var status, code C.cl_int
	p := C.qg_from_binary(rawContext(x.c), rawDevice(x.dev.d), (*C.uchar)(cb), C.size_t(len(bin)), &status, &code)
	if code != C.CL_SUCCESS || status != C.CL_SUCCESS {
		if p != nil {
			C.clReleaseProgram(p)
		}
		if code == C.CL_SUCCESS {
			code = status
		}
		return nil, clError("clCreateProgramWithBinary", code)
	}
	return x.build(p, opts)
}

// binary returns the program's device binary.
func (p *program) binary() ([]byte, error) {
	var n C.size_t
	if code := C.clGetProgramInfo(p.p, C.CL_PROGRAM_BINARY_SIZES, C.size_t(unsafe.Sizeof(n)), unsafe.Pointer(&n), nil); code != C.CL_SUCCESS {
		return nil, clError("clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)", code)
	}
	if n == 0 {
		return nil, errors.New("opencl: the driver returned an empty program binary")
	}
	buf := C.malloc(n)
	defer C.free(buf)
	if code := C.qg_binary(p.p, (*C.uchar)(buf), n); code != C.CL_SUCCESS {
		return nil, clError("clGetProgramInfo(CL_PROGRAM_BINARIES)", code)
	}
	return C.GoBytes(buf, C.int(n)), nil
}

// kernel is one kernel of a program. Not safe for concurrent use: the
// owner serializes argument setting and launches.
type kernel struct {
	k    C.cl_kernel
	name string
}

func (p *program) kernel(name string) (*kernel, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var code C.cl_int
	k := C.clCreateKernel(p.p, cn, &code)
	if code != C.CL_SUCCESS {
		return nil, clError("clCreateKernel "+name, code)
	}
	return &kernel{k: k, name: name}, nil
}

func (k *kernel) release() {
	if k != nil && k.k != nil {
		C.clReleaseKernel(k.k)
		k.k = nil
	}
}

// arg is one kernel argument for setArgs: a buffer, a 32-bit value or
// a __local array.
type arg struct {
	buf   *buffer
	isMem bool // a buffer argument (buf nil: an error, not a value)
	v     uint32
	local int // bytes of a __local array; 0: not one
}

// localBytes is a __local array of n bytes (at least 4).
func localBytes(n int) arg { return arg{local: max(n, 4)} }

// i32 and f32 are 32-bit value arguments, mem a buffer.
func i32[T ~int | ~int32](v T) arg { return arg{v: uint32(int32(v))} }
func f32(v float32) arg            { return arg{v: math.Float32bits(v)} }
func mem(b *buffer) arg            { return arg{buf: b, isMem: true} }

// setArgs sets the kernel's arguments in order.
func (k *kernel) setArgs(args ...arg) error {
	for i, a := range args {
		var code C.cl_int
		switch {
		case a.isMem && (a.buf == nil || a.buf.m == nil):
			return fmt.Errorf("opencl: kernel %s argument %d: no buffer (nil or released)", k.name, i)
		case a.isMem:
			code = C.qg_arg_mem(k.k, C.cl_uint(i), rawMem(a.buf.m))
		case a.local > 0:
			code = C.qg_arg_local(k.k, C.cl_uint(i), C.size_t(a.local))
		default:
			code = C.qg_arg_u32(k.k, C.cl_uint(i), C.cl_uint(a.v))
		}
		if code != C.CL_SUCCESS {
			return clError(fmt.Sprintf("kernel %s argument %d", k.name, i), code)
		}
	}
	return nil
}

// event is a profiling event of a launch.
type event struct {
	e    C.cl_event
	next *event // further launches of the same multiply, timed with it
}

// launch enqueues a 1-D range of global work-items in groups of local.
// With ev set it returns a profiling event (release it).
func (x *ctx) launch(k *kernel, global, local int, ev bool) (*event, error) {
	x.prep = prepKey{}
	if global <= 0 || local <= 0 || global%local != 0 {
		return nil, fmt.Errorf("opencl: kernel %s: bad range %d / %d", k.name, global, local)
	}
	if !ev {
		if code := C.qg_launch(rawQueue(x.q), k.k, C.size_t(global), C.size_t(local)); code != C.CL_SUCCESS {
			return nil, clError("launching "+k.name, code)
		}
		return nil, nil
	}
	r := C.qg_launch_ev(rawQueue(x.q), k.k, C.size_t(global), C.size_t(local))
	if r.err != C.CL_SUCCESS {
		return nil, clError("launching "+k.name, r.err)
	}
	return &event{e: r.ev}, nil
}

// seconds returns the time between the event's start and end (after the
// queue finished), plus that of the events chained to it, and releases
// them.
func (e *event) seconds() (float64, error) {
	s, err := e.one()
	if e.next != nil {
		t, err2 := e.next.seconds()
		s += t
		if err == nil {
			err = err2
		}
	}
	return s, err
}

func (e *event) one() (float64, error) {
	defer C.clReleaseEvent(e.e)
	var t0, t1 C.cl_ulong
	if code := C.clGetEventProfilingInfo(e.e, C.CL_PROFILING_COMMAND_START, 8, unsafe.Pointer(&t0), nil); code != C.CL_SUCCESS {
		return 0, clError("profiling start", code)
	}
	if code := C.clGetEventProfilingInfo(e.e, C.CL_PROFILING_COMMAND_END, 8, unsafe.Pointer(&t1), nil); code != C.CL_SUCCESS {
		return 0, clError("profiling end", code)
	}
	return float64(t1-t0) * 1e-9, nil
}

// workGroupSize returns the largest work-group the kernel can run on
// the context's device.
func (x *ctx) workGroupSize(k *kernel) (int, error) {
	var n C.size_t
	if code := C.clGetKernelWorkGroupInfo(k.k, rawDevice(x.dev.d), C.CL_KERNEL_WORK_GROUP_SIZE, C.size_t(unsafe.Sizeof(n)), unsafe.Pointer(&n), nil); code != C.CL_SUCCESS {
		return 0, clError("work-group size of "+k.name, code)
	}
	return int(n), nil
}

// rawName returns the device name read through cl (for the handle test).
func (d *device) rawName() string { return d.d.Name() }
