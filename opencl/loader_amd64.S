//go:build opencl

// Trampolines for every OpenCL entry point qgemv and go-opencl call (see
// loader_amd64.go): each jumps through qg_cl_fn, which qg_cl_load fills from
// the ICD loader opened with dlopen, so the binary does not need
// libOpenCL.so.1 to start. Keep the list in step with qgClNames.

	.text
	.globl clBuildProgram
	.type clBuildProgram, @function
clBuildProgram:
	jmp *qg_cl_fn+0(%rip)
	.globl clCreateBuffer
	.type clCreateBuffer, @function
clCreateBuffer:
	jmp *qg_cl_fn+8(%rip)
	.globl clCreateCommandQueue
	.type clCreateCommandQueue, @function
clCreateCommandQueue:
	jmp *qg_cl_fn+16(%rip)
	.globl clCreateContext
	.type clCreateContext, @function
clCreateContext:
	jmp *qg_cl_fn+24(%rip)
	.globl clCreateImage
	.type clCreateImage, @function
clCreateImage:
	jmp *qg_cl_fn+32(%rip)
	.globl clCreateKernel
	.type clCreateKernel, @function
clCreateKernel:
	jmp *qg_cl_fn+40(%rip)
	.globl clCreateProgramWithBinary
	.type clCreateProgramWithBinary, @function
clCreateProgramWithBinary:
	jmp *qg_cl_fn+48(%rip)
	.globl clCreateProgramWithSource
	.type clCreateProgramWithSource, @function
clCreateProgramWithSource:
	jmp *qg_cl_fn+56(%rip)
	.globl clCreateUserEvent
	.type clCreateUserEvent, @function
clCreateUserEvent:
	jmp *qg_cl_fn+64(%rip)
	.globl clEnqueueBarrierWithWaitList
	.type clEnqueueBarrierWithWaitList, @function
clEnqueueBarrierWithWaitList:
	jmp *qg_cl_fn+72(%rip)
	.globl clEnqueueCopyBuffer
	.type clEnqueueCopyBuffer, @function
clEnqueueCopyBuffer:
	jmp *qg_cl_fn+80(%rip)
	.globl clEnqueueFillBuffer
	.type clEnqueueFillBuffer, @function
clEnqueueFillBuffer:
	jmp *qg_cl_fn+88(%rip)
	.globl clEnqueueMapBuffer
	.type clEnqueueMapBuffer, @function
clEnqueueMapBuffer:
	jmp *qg_cl_fn+96(%rip)
	.globl clEnqueueMapImage
	.type clEnqueueMapImage, @function
clEnqueueMapImage:
	jmp *qg_cl_fn+104(%rip)
	.globl clEnqueueMarkerWithWaitList
	.type clEnqueueMarkerWithWaitList, @function
clEnqueueMarkerWithWaitList:
	jmp *qg_cl_fn+112(%rip)
	.globl clEnqueueNDRangeKernel
	.type clEnqueueNDRangeKernel, @function
clEnqueueNDRangeKernel:
	jmp *qg_cl_fn+120(%rip)
	.globl clEnqueueReadBuffer
	.type clEnqueueReadBuffer, @function
clEnqueueReadBuffer:
	jmp *qg_cl_fn+128(%rip)
	.globl clEnqueueReadImage
	.type clEnqueueReadImage, @function
clEnqueueReadImage:
	jmp *qg_cl_fn+136(%rip)
	.globl clEnqueueTask
	.type clEnqueueTask, @function
clEnqueueTask:
	jmp *qg_cl_fn+144(%rip)
	.globl clEnqueueUnmapMemObject
	.type clEnqueueUnmapMemObject, @function
clEnqueueUnmapMemObject:
	jmp *qg_cl_fn+152(%rip)
	.globl clEnqueueWriteBuffer
	.type clEnqueueWriteBuffer, @function
clEnqueueWriteBuffer:
	jmp *qg_cl_fn+160(%rip)
	.globl clEnqueueWriteImage
	.type clEnqueueWriteImage, @function
clEnqueueWriteImage:
	jmp *qg_cl_fn+168(%rip)
	.globl clFinish
	.type clFinish, @function
clFinish:
	jmp *qg_cl_fn+176(%rip)
	.globl clFlush
	.type clFlush, @function
clFlush:
	jmp *qg_cl_fn+184(%rip)
	.globl clGetDeviceIDs
	.type clGetDeviceIDs, @function
clGetDeviceIDs:
	jmp *qg_cl_fn+192(%rip)
	.globl clGetDeviceInfo
	.type clGetDeviceInfo, @function
clGetDeviceInfo:
	jmp *qg_cl_fn+200(%rip)
	.globl clGetEventProfilingInfo
	.type clGetEventProfilingInfo, @function
clGetEventProfilingInfo:
	jmp *qg_cl_fn+208(%rip)
	.globl clGetKernelArgInfo
	.type clGetKernelArgInfo, @function
clGetKernelArgInfo:
	jmp *qg_cl_fn+216(%rip)
	.globl clGetKernelInfo
	.type clGetKernelInfo, @function
clGetKernelInfo:
	jmp *qg_cl_fn+224(%rip)
	.globl clGetKernelWorkGroupInfo
	.type clGetKernelWorkGroupInfo, @function
clGetKernelWorkGroupInfo:
	jmp *qg_cl_fn+232(%rip)
	.globl clGetPlatformIDs
	.type clGetPlatformIDs, @function
clGetPlatformIDs:
	jmp *qg_cl_fn+240(%rip)
	.globl clGetPlatformInfo
	.type clGetPlatformInfo, @function
clGetPlatformInfo:
	jmp *qg_cl_fn+248(%rip)
	.globl clGetProgramBuildInfo
	.type clGetProgramBuildInfo, @function
clGetProgramBuildInfo:
	jmp *qg_cl_fn+256(%rip)
	.globl clGetProgramInfo
	.type clGetProgramInfo, @function
clGetProgramInfo:
	jmp *qg_cl_fn+264(%rip)
	.globl clGetSupportedImageFormats
	.type clGetSupportedImageFormats, @function
clGetSupportedImageFormats:
	jmp *qg_cl_fn+272(%rip)
	.globl clReleaseCommandQueue
	.type clReleaseCommandQueue, @function
clReleaseCommandQueue:
	jmp *qg_cl_fn+280(%rip)
	.globl clReleaseContext
	.type clReleaseContext, @function
clReleaseContext:
	jmp *qg_cl_fn+288(%rip)
	.globl clReleaseEvent
	.type clReleaseEvent, @function
clReleaseEvent:
	jmp *qg_cl_fn+296(%rip)
	.globl clReleaseKernel
	.type clReleaseKernel, @function
clReleaseKernel:
	jmp *qg_cl_fn+304(%rip)
	.globl clReleaseMemObject
	.type clReleaseMemObject, @function
clReleaseMemObject:
	jmp *qg_cl_fn+312(%rip)
	.globl clReleaseProgram
	.type clReleaseProgram, @function
clReleaseProgram:
	jmp *qg_cl_fn+320(%rip)
	.globl clSetKernelArg
	.type clSetKernelArg, @function
clSetKernelArg:
	jmp *qg_cl_fn+328(%rip)
	.globl clSetUserEventStatus
	.type clSetUserEventStatus, @function
clSetUserEventStatus:
	jmp *qg_cl_fn+336(%rip)
	.globl clWaitForEvents
	.type clWaitForEvents, @function
clWaitForEvents:
	jmp *qg_cl_fn+344(%rip)
	.section .note.GNU-stack,"",@progbits
