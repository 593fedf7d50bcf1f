// qgemv CUDA kernels for device-resident buffers: activation preparation
// on the device (binary16 rounding, gather and the tensor-core order;
// int8 quantization bit-exact with layout.QuantizeA8; the A8 kernels'
// input forms) and the element-wise operations between multiplies
// (SwiGLU, add, scale; requantization is ans.cu's ans_requant). go run ./gen compiles this file
// to its own PTX module.
//
// Every kernel parameter is 64 bits wide (pointers, long long, and
// float32 values passed in the low half of a 64-bit word). Exactness:
// __f*_rn intrinsics keep float32 operations separately rounded (never
// contracted into FMAs), as the Go reference computes them.

#include <cuda_fp16.h>
#include <stdint.h>

// PDL_ENTRY opens every kernel. From sm_90 on the host launches kernels
// with programmatic dependent launch, so a kernel's blocks may be made
// resident while the kernel before it on the stream is still running:
// launch_dependents lets the next kernel's blocks be scheduled as soon as
// every block of this one has started, and wait holds this block until
// the kernel before has completed and its memory is visible, before any
// load or store. What overlaps is launch and block scheduling, never
// memory traffic. Below sm_90 it is empty (the host launches normally).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PDL_ENTRY() asm volatile("griddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;" ::: "memory")
#else
#define PDL_ENTRY()
#endif

#define FULL 0xffffffffu

typedef long long i64;

// status bits (the host reports them at the next Wait or Read)
#define ST_NONFINITE 1u

// arg32 is a float32 passed in a 64-bit parameter.
__device__ __forceinline__ float arg32(i64 v) { return __uint_as_float((uint32_t)v); }

// Activation loads for the gathers: float32 rounded to binary16 (to
// nearest even), or binary16 as is.
__device__ __forceinline__ __half tohalf(const float *x, i64 i) { return __float2half_rn(x[i]); }
__device__ __forceinline__ __half tohalf(const __half *x, i64 i) { return x[i]; }

// swiglu1 is one value of swiglu (the kernel below), which the A8
// quantization and the binary16 gather also compute when a recorded
// SwiGLU feeds them (quant128).
__device__ __forceinline__ float swiglu1(float g, float u) { return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u); }

// gather writes the binary16 activations a float kernel reads: for
// vector slot v < nv and stored column p < pc, the value at position
// ((p/S)*nv + v)*S + p%S (S = pc: plain vectors one after another; S =
// 16: the tensor-core fragment order) is x[v*cols + idx[p]] as binary16,
// or 0 where idx[p] < 0 (padding) or v >= batch. idx folds in the
// act-order permutation and the fragment order.
template <typename T>
__device__ void gather(const T *x, const int *idx, __half *out, i64 batch, i64 cols, i64 pc, i64 nv, i64 S) {
	i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= nv * pc) return;
	i64 v = t / pc, p = t - v * pc;
	int c = idx[p];
	out[((p / S) * nv + v) * S + p % S] = (v < batch && c >= 0) ? tohalf(x, v * cols + c) : __float2half_rn(0.0f);
}

// gather_f16 with u not null gathers SwiGLU's of x (the gate) and u, each
// value computed as swiglu computes it and stored to h at its place
// (quant128 says why).
extern "C" __global__ void gather_f16(const float *x, const int *idx, __half *out, i64 batch, i64 cols, i64 pc, i64 nv, i64 S, const float *u, float *h) { PDL_ENTRY();
	if (u == nullptr) {
		gather(x, idx, out, batch, cols, pc, nv, S);
		return;
	}
	i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= nv * pc) return;
	i64 v = t / pc, p = t - v * pc;
	int c = idx[p];
	__half o = __float2half_rn(0.0f);
	if (v < batch && c >= 0) {
		i64 i = v * cols + c;
		float s = swiglu1(x[i], u[i]);
		h[i] = s;
		o = __float2half_rn(s);
	}
	out[((p / S) * nv + v) * S + p % S] = o;
}

extern "C" __global__ void gather_h16(const __half *x, const int *idx, __half *out, i64 batch, i64 cols, i64 pc, i64 nv, i64 S) { PDL_ENTRY();
	gather(x, idx, out, batch, cols, pc, nv, S);
}

// xsum writes the float32 sums of each vector's 128-column blocks of the
// binary16 activations in stored column order (nat: the source column of
// each stored column, -1 for padding), for the Bits tensor-core kernels:
// one warp per (vector slot, block); slots past batch get 0. The sums
// are added in another order than gpuhost.MMAOrder's (lane partials,
// then a butterfly): the results stay within the float bound. (Adding in
// column order by shuffles made the FFN block 20 us slower.)
template <typename T>
__device__ void xsum(const T *x, const int *nat, float *out, i64 batch, i64 cols, i64 pc, i64 nv) {
	i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	i64 nblk = pc / 128;
	if (w >= nv * nblk) return;
	i64 v = w / nblk, blk = w - v * nblk;
	float s = 0;
	if (v < batch) {
		for (int k = lane; k < 128; k += 32) {
			int c = nat[blk * 128 + k];
			if (c >= 0) s += __half2float(tohalf(x, v * cols + c));
		}
	}
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
	if (lane == 0) out[w] = s;
}

extern "C" __global__ void xsum_f16(const float *x, const int *nat, float *out, i64 batch, i64 cols, i64 pc, i64 nv) { PDL_ENTRY();
	xsum(x, nat, out, batch, cols, pc, nv);
}

extern "C" __global__ void xsum_h16(const __half *x, const int *nat, float *out, i64 batch, i64 cols, i64 pc, i64 nv) { PDL_ENTRY();
	xsum(x, nat, out, batch, cols, pc, nv);
}

// quant128 quantizes one 128-column group g of vector v exactly as
// layout.QuantizeA8Go, one warp, 4 columns per lane (columns 4*lane..):
// the values are gathered through nat (stored column -> source column,
// -1 for padding: 0), or with nat null (no act-order permutation) read
// in place, 16 bytes per lane where aligned: a warp's one load then
// covers the group's 512 bytes, where four gathered ones each touch all
// of them (a host-slice call reads x over the bus). A NaN or infinity
// sets ST_NONFINITE in status and the group becomes zeros. It returns
// the lane's four codes and sets the group's scale.
//
// With u not null the activations are SwiGLU's of x and u (x the gate):
// each value is computed as swiglu computes it, stored to h at its place
// (h may be x) and quantized, so a recorded SwiGLU followed by an A8
// multiply of its output runs as this one kernel (buffers.go).
__device__ __forceinline__ char4 quant128(const float *x, const int *nat, unsigned *status, i64 v, i64 g, i64 cols, int lane, float &scale, const float *u, float *h) {
	float val[4];
	if (nat == nullptr) {
		i64 c0 = g * 128 + lane * 4;
		i64 o = v * cols + c0;
		const float *p = x + o;
		if (c0 + 4 <= cols && (((size_t)p | (u != nullptr ? (size_t)(u + o) | (size_t)(h + o) : 0)) & 15) == 0) {
			float4 f = *(const float4 *)p;
			val[0] = f.x, val[1] = f.y, val[2] = f.z, val[3] = f.w;
			if (u != nullptr) {
				float4 w = *(const float4 *)(u + o);
				val[0] = swiglu1(val[0], w.x), val[1] = swiglu1(val[1], w.y), val[2] = swiglu1(val[2], w.z), val[3] = swiglu1(val[3], w.w);
				*(float4 *)(h + o) = make_float4(val[0], val[1], val[2], val[3]);
			}
		} else {
#pragma unroll
			for (int k = 0; k < 4; k++) {
				val[k] = c0 + k < cols ? p[k] : 0.0f;
				if (u != nullptr && c0 + k < cols) h[o + k] = val[k] = swiglu1(val[k], u[o + k]);
			}
		}
	} else {
#pragma unroll
		for (int k = 0; k < 4; k++) {
			int c = nat[g * 128 + lane * 4 + k];
			val[k] = c >= 0 ? x[v * cols + c] : 0.0f;
			if (u != nullptr && c >= 0) h[v * cols + c] = val[k] = swiglu1(val[k], u[v * cols + c]);
		}
	}
	float amax = 0;
	bool bad = false;
#pragma unroll
	for (int k = 0; k < 4; k++) {
		bad |= !isfinite(val[k]);
		amax = fmaxf(amax, fabsf(val[k]));
	}
	for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(FULL, amax, o));
	if (__any_sync(FULL, bad)) {
		if (lane == 0) atomicOr(status, ST_NONFINITE);
		amax = 0;
	}
	signed char q[4] = {0, 0, 0, 0};
	if (amax != 0) {
		float pre = amax < 0x1p-100f ? 0x1p64f : 1.0f;
		float inv = __fdiv_rn(127.0f, __fmul_rn(amax, pre));
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float r = rintf(__fmul_rn(__fmul_rn(val[k], pre), inv));
			q[k] = (signed char)fmaxf(-127.0f, fminf(127.0f, r));
		}
	}
	scale = amax == 0 ? 0.0f : __fdiv_rn(amax, 127.0f);
	return make_char4(q[0], q[1], q[2], q[3]);
}

// quant_a8 quantizes activations exactly as layout.QuantizeA8Go
// (quant128): one warp per (vector, group of 128 stored columns). A NaN
// or infinity sets ST_NONFINITE in status (the host reports the error).
extern "C" __global__ void quant_a8(const float *x, const int *nat, signed char *xq, float *xs, unsigned *status, i64 batch, i64 cols, i64 pc, const float *u, float *h) { PDL_ENTRY();
	i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	i64 ng = pc / 128;
	if (w >= batch * ng) return;
	i64 v = w / ng, g = w - v * ng;
	float scale;
	*(char4 *)(xq + v * pc + g * 128 + lane * 4) = quant128(x, nat, status, v, g, cols, lane, scale, u, h);
	if (lane == 0) xs[w] = scale;
}

// a8XR is where byte p (in fragment order) of 128-column block blk of
// vector slot v < nv goes in the A8 tensor-core kernels' activations
// (a8mma in kernels.cu): block by block, and in a block the 16-byte
// halves of a warp's loads together (8 vectors' lanes t, half h = p/16%2:
// 512 contiguous bytes per load).
__device__ __forceinline__ i64 a8XR(i64 blk, i64 v, int p, i64 nv) {
	return blk * nv * 128 + (v >> 3) * 1024 + ((p >> 4) & 1) * 512 + (v & 7) * 64 + (p >> 5) * 16 + (p & 15);
}

// quant_a8_q4 is quant_a8 followed by a8_prep for Q4G128 (e = 0) in one
// kernel: one warp per 128-column block and vector slot v < nv (a8_prep's
// numbering), quantizing as quant_a8 (xq, xs and the status word) and
// writing a8_prep's outputs (xm, and xr: each vector's block in
// a8_q4order's order, placed by a8XR) from the same registers, so the
// tensor-core multiply that follows skips a8_prep (one dependent kernel
// fewer between the large ones).
extern "C" __global__ void quant_a8_q4(const float *x, const int *nat, signed char *xq, float *xs, unsigned *status, int2 *xm, signed char *xr, i64 batch, i64 cols, i64 pc, i64 nv, const float *u, float *h) { PDL_ENTRY();
	i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	i64 nblk = pc / 128;
	if (w >= nblk * nv) return;
	i64 blk = w / nv, v = w % nv;
	if (v >= batch) {
		if (lane == 0) xm[w] = make_int2(0, 0);
		return;
	}
	float scale;
	char4 cq = quant128(x, nat, status, v, blk, cols, lane, scale, u, h);
	i64 i = v * pc + blk * 128 + lane * 4;
	*(char4 *)(xq + i) = cq;
	int s = cq.x + cq.y + cq.z + cq.w;
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
	if (lane == 0) {
		xs[v * nblk + blk] = scale;
		xm[w] = make_int2(__float_as_int(scale), s);
	}
	int mine = *(const int *)&cq;
	int other = __shfl_xor_sync(FULL, mine, 1);
	char4 o = *(const char4 *)&other;
	char4 a = lane & 1 ? o : cq, b = lane & 1 ? cq : o;
	*(char4 *)(xr + a8XR(blk, v, lane * 4, nv)) = lane & 1 ? make_char4(a.y, a.w, b.y, b.w) : make_char4(a.x, a.z, b.x, b.z);
}

// a8_sums writes the exact int32 sum of each block of blk int8
// activations (n values, n a multiple of blk): one warp per block.
extern "C" __global__ void a8_sums(const signed char *xq, int *sx, i64 n, i64 blk) { PDL_ENTRY();
	i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	if (w >= n / blk) return;
	int s = 0;
	for (i64 k = lane; k < blk; k += 32) s += xq[w * blk + k];
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
	if (lane == 0) sx[w] = s;
}

// a8_prep prepares int8 activations for the A8 tensor-core kernels, one
// warp per 128-column block and vector slot v < nv: it writes the
// activation scale's bits and the exact int32 sum of the block's int8
// activations (zeros for the slots past batch), two words per (block,
// vector), block-major; and the block's activations in the kernel's
// order, each vector's in fragment order (Q4G128's, e = 0, as
// a8_q4order; the Bits kernels' f[i] = xq[i - i%e + tab[i%e]], e
// columns per step, tab from gpuhost.A8FragOrder) placed by a8XR.
extern "C" __global__ void a8_prep(const signed char *xq, const float *xs, int2 *xm, signed char *xr, const int *tab, i64 batch, i64 pc, i64 nv, i64 e) { PDL_ENTRY();
	i64 w = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	i64 nblk = pc / 128;
	if (w >= nblk * nv) return;
	i64 blk = w / nv, v = w % nv;
	if (v >= batch) {
		if (lane == 0) xm[w] = make_int2(0, 0);
		return;
	}
	i64 i = v * pc + blk * 128 + lane * 4;
	char4 q = *(const char4 *)(xq + i);
	int s = q.x + q.y + q.z + q.w;
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
	if (lane == 0) xm[w] = make_int2(__float_as_int(xs[v * nblk + blk]), s);
	char4 out;
	if (e == 0) { // even lanes hold bytes 0..3 of each 8, odd lanes 4..7
		int mine = *(const int *)&q;
		int other = __shfl_xor_sync(FULL, mine, 1);
		char4 o = *(const char4 *)&other;
		char4 a = lane & 1 ? o : q, b = lane & 1 ? q : o;
		out = lane & 1 ? make_char4(a.y, a.w, b.y, b.w) : make_char4(a.x, a.z, b.x, b.z);
	} else {
		signed char t[4];
#pragma unroll
		for (int k = 0; k < 4; k++) {
			i64 r = (i + k) % e;
			t[k] = xq[i + k - r + tab[r]];
		}
		out = make_char4(t[0], t[1], t[2], t[3]);
	}
	*(char4 *)(xr + a8XR(blk, v, lane * 4, nv)) = out;
}

// a8_q4order rearranges every 8 int8 activations as (0,2,4,6,1,3,5,7),
// the order the Q4G128 A8 kernel's nibble unpacking consumes them.
extern "C" __global__ void a8_q4order(const signed char *xq, signed char *xr, i64 n) { PDL_ENTRY();
	i64 i = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * 8;
	if (i >= n) return;
	char4 a = *(const char4 *)(xq + i), b = *(const char4 *)(xq + i + 4);
	*(char4 *)(xr + i) = make_char4(a.x, a.z, b.x, b.z);
	*(char4 *)(xr + i + 4) = make_char4(a.y, a.w, b.y, b.w);
}

// a8_split writes the even and odd int8 activations of each column pair
// apart (the Sparse12 A8 kernel's inputs).
extern "C" __global__ void a8_split(const signed char *xq, signed char *xe, signed char *xo, i64 n) { PDL_ENTRY();
	i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (p >= n / 2) return;
	xe[p] = xq[2 * p];
	xo[p] = xq[2 * p + 1];
}

// swiglu: d[i] = g[i] / (1 + exp(-g[i])) * u[i]. expf is within 2 ulps;
// the division and product are rounded float32 operations.
extern "C" __global__ void swiglu(float *d, const float *g, const float *u, i64 n) { PDL_ENTRY();
	i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) d[i] = swiglu1(g[i], u[i]);
}

extern "C" __global__ void add_f32(float *d, const float *a, const float *b, i64 n) { PDL_ENTRY();
	i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) d[i] = __fadd_rn(a[i], b[i]);
}

extern "C" __global__ void scale_f32(float *d, const float *a, i64 s, i64 n) { PDL_ENTRY();
	i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) d[i] = __fmul_rn(arg32(s), a[i]);
}

// copy_bytes copies n bytes from src to dst (16 at a time where both are
// 16-byte aligned, else one at a time) and, where st is not null, the
// status word *st to *sto. Either side may be pinned host memory the
// device maps: buffer writes and reads then run as this kernel instead of
// a copy-engine transfer, which takes longer to start and to signal.
extern "C" __global__ void copy_bytes(const unsigned char *src, unsigned char *dst, i64 n, const unsigned *st, unsigned *sto) { PDL_ENTRY();
	i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x, step = (i64)gridDim.x * blockDim.x;
	if (st != 0 && i == 0) *sto = *st;
	i64 k = i;
	if ((((uintptr_t)src | (uintptr_t)dst) & 15) == 0) {
		const i64 n16 = n >> 4;
		for (; k < n16; k += step) ((uint4 *)dst)[k] = ((const uint4 *)src)[k];
		k = (n16 << 4) + i;
	}
	for (; k < n; k += step) dst[k] = src[k];
}
