// qgemv OpenCL kernels for device-resident buffers (buffers.go): int8
// quantization bit-exact with layout.QuantizeA8, the tiled int8 kernels'
// input forms, and the element-wise operations between multiplies.
//
// Exactness: no contraction into FMAs; the two divisions of the
// quantization are correctly rounded, through the build option
// -cl-fp32-correctly-rounded-divide-sqrt or, with -DQDIV_F64, computed in
// double precision and rounded once to float (exact for division: double
// has more than twice float's precision).

#pragma OPENCL FP_CONTRACT OFF

#ifdef QDIV_F64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define QDIV(a, b) ((float)((double)(a) / (double)(b)))
#else
#define QDIV(a, b) ((a) / (b))
#endif

// status bits (the host reports them at the next Wait or Read)
#define ST_NONFINITE 1

// quant_a8 quantizes activations exactly as layout.QuantizeA8Go: one
// work-group of 128 work-items per (vector, group of 128 stored columns),
// one column each. The values are gathered through nat (stored column ->
// source column, -1 for padding: 0). A NaN or infinity sets ST_NONFINITE
// in status and the group is written as zeros.
__kernel void quant_a8(__global const float *x, __global const int *nat, __global char *xq,
                       __global float *xs, __global volatile int *status, int cols, int pc) {
	__local float red[128];
	__local int bad;
	int ng = pc / 128;
	int w = get_group_id(0);
	int v = w / ng, g = w - v * ng;
	int k = get_local_id(0);
	if (k == 0) bad = 0;
	barrier(CLK_LOCAL_MEM_FENCE);
	int c = nat[g * 128 + k];
	float f = c >= 0 ? x[(long)v * cols + c] : 0.0f;
	if (!isfinite(f)) bad = 1;
	red[k] = fabs(f);
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int s = 64; s > 0; s >>= 1) {
		if (k < s) red[k] = fmax(red[k], red[k + s]);
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	float amax = red[0];
	if (bad) {
		if (k == 0) atomic_or(status, ST_NONFINITE);
		amax = 0.0f;
	}
	char q = 0;
	if (amax != 0.0f) {
		float pre = amax < 0x1p-100f ? 0x1p64f : 1.0f;
		float inv = QDIV(127.0f, amax * pre);
		float r = rint((f * pre) * inv);
		q = (char)fmax(-127.0f, fmin(127.0f, r));
	}
	xq[(long)v * pc + g * 128 + k] = q;
	if (k == 0) xs[w] = amax == 0.0f ? 0.0f : QDIV(amax, 127.0f);
}

// a8_order_sums writes each vector's pc int8 activations in the order a
// tiled kernel reads them, out[v*pc + p] = xq[v*pc + idx[p]], and the
// exact int32 sum of each block of 128 (in stored order: the work-item of
// a block's first value adds them), in one launch (n = batch*pc).
__kernel void a8_order_sums(__global const char *xq, __global const int *idx, __global char *out, __global int *sx, int pc, int n) {
	int i = get_global_id(0);
	if (i >= n) return;
	int v = i / pc, p = i - v * pc;
	out[i] = xq[v * pc + idx[p]];
	if ((i & 127) == 0) {
		int s = 0;
		for (int k = 0; k < 128; k++) s += xq[i + k];
		sx[i >> 7] = s;
	}
}

// swiglu: d[i] = g[i] / (1 + exp(-g[i])) * u[i] (exp within the device's
// OpenCL accuracy, 3 ulps; the division and product rounded float32).
__kernel void swiglu(__global float *d, __global const float *g, __global const float *u, int n) {
	int i = get_global_id(0);
	if (i >= n) return;
	float x = g[i];
	d[i] = x / (1.0f + exp(-x)) * u[i];
}

__kernel void add_f32(__global float *d, __global const float *a, __global const float *b, int n) {
	int i = get_global_id(0);
	if (i < n) d[i] = a[i] + b[i];
}

__kernel void scale_f32(__global float *d, __global const float *a, float s, int n) {
	int i = get_global_id(0);
	if (i < n) d[i] = s * a[i];
}

// rh rounds a float32 activation to binary16 (to nearest even) and back.
inline float rh(float f) {
	ushort h; // binary16 bits (half values need cl_khr_fp16; pointers to half do not)
	vstore_half_rte(f, 0, (half *)&h);
	return vload_half(0, (const half *)&h);
}

// src returns stored column c of vector v, rounded to binary16: the source
// column nat[c] of x, 0 for padding (nat[c] < 0).
inline float src(__global const float *x, __global const int *nat, int v, int cols, int c) {
	int s = nat[c];
	return s >= 0 ? rh(x[(long)v * cols + s]) : 0.0f;
}

// h16_widen widens n binary16 values (their bits in h) to float32,
// exactly: the host-slice binary16 multiplies upload half the bytes.
__kernel void h16_widen(__global const ushort *h, __global float *out, int n) {
	int i = get_global_id(0);
	if (i < n) out[i] = vload_half(i, (__global const half *)h);
}

// f16_gather writes the float kernels' activations: out[v*pc + p] =
// vector v's stored column p rounded to binary16 (n = batch*pc).
__kernel void f16_gather(__global const float *x, __global const int *nat, __global float *out, int cols, int pc, int n) {
	int i = get_global_id(0);
	if (i >= n) return;
	int v = i / pc, p = i - v * pc;
	out[i] = src(x, nat, v, cols, p);
}

// f16_tiled writes the tiled float kernels' activations and unit sums
// from binary16-rounded values, as the host's reorder does (gemv.cl,
// "tiled kernels"): one work-item per vector and unit of 32 columns, nc
// chunks of 32 units per vector (units past nu written as zeros).
__kernel void f16_tiled(__global const float *x, __global const int *nat, __global float *out, __global float *sums,
                        int cols, int pc, int nu, int nc, int q4, int n) {
	int i = get_global_id(0);
	if (i >= n) return;
	int v = i / (nc * 32), u = i - v * (nc * 32);
	int base = ((v * nc + u / 32) * 8 * 32 + u % 32) * 4;
	const float nib[4] = {1.0f, 1.0f / 16, 1.0f / 256, 1.0f / 4096};
	float s0 = 0, s1 = 0;
	for (int j = 0; j < 8; j++) {
		for (int e = 0; e < 4; e++) {
			float f = 0, sc;
			int c;
			if (q4) {
				c = 32 * u + 4 * j + e;
				sc = nib[e];
			} else {
				c = (u / 8) * 256 + 32 * j + 4 * (u % 8) + e;
				sc = nib[3 - j % 4];
			}
			if (u < nu) f = src(x, nat, v, cols, c);
			out[base + j * 32 * 4 + e] = f * sc;
			if (j < 4) s0 += f; else s1 += f;
		}
	}
	if (u >= nu) return;
	if (q4) {
		sums[v * nu + u] = s0 + s1;
	} else {
		sums[2 * (v * nu + u)] = s0;
		sums[2 * (v * nu + u) + 1] = s1;
	}
}
