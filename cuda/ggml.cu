// qgemv CUDA kernels for layout/ggml matrices: llama.cpp's block types as
// GGUF stores them. go run ./gen compiles this file to its own PTX module.
// Every kernel parameter is 64 bits wide (pointers and long long).
//
// ggml_a8_<type>: one block of GGML_THREADS threads per row. Each thread
// computes the integer sums (S, M) of layout/ggml's exact int8-activation
// definition for the steps (128 columns of a super-block, or one
// 32-element block) it owns into shared memory; thread 0 then combines the
// steps in order with the definition's float operations (__fmul_rn and
// __fadd_rn: never contracted into a fused multiply-add), so the result is
// the CPU's bit for bit. Batch vectors run one after another.
//
// ggml_f32_<type>: float32 activations (binary16 ones are widened on the
// host); each thread dequantizes its steps to the reference float32
// weights and sums weight*x per step, then a tree reduction in shared
// memory.
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

typedef long long i64;

#define GGML_THREADS 64

enum { Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, IQ4_NL = 20, IQ4_XS = 23 };

__constant__ signed char ggml_kvalues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

template <int GT> struct T {
	static constexpr bool super = GT == Q2_K || GT == Q3_K || GT == Q4_K || GT == Q5_K || GT == Q6_K || GT == IQ4_XS;
	static constexpr int belems = super ? 256 : 32;
	static constexpr int step = super ? 128 : 32;
	static constexpr int sub = (GT == Q2_K || GT == Q3_K || GT == Q6_K) ? 16 : 32;
	static constexpr int bbytes = GT == Q4_0 || GT == IQ4_NL ? 18 : GT == Q4_1 ? 20 : GT == Q5_0 ? 22 : GT == Q5_1 ? 24 : GT == Q8_0 ? 34
		: GT == Q2_K ? 84 : GT == Q3_K ? 110 : GT == Q4_K ? 144 : GT == Q5_K ? 176 : GT == Q6_K ? 210 : 136;
	// mins: 1 the M term is subtracted (K types), 2 added (Q4_1, Q5_1)
	static constexpr int mins = (GT == Q2_K || GT == Q4_K || GT == Q5_K) ? 1 : (GT == Q4_1 || GT == Q5_1) ? 2 : 0;
};

__device__ __forceinline__ float half_at(const uint8_t *b, int off) {
	return __half2float(*(const __half *)(b + off));
}

template <int GT> __device__ __forceinline__ float blk_d(const uint8_t *b) {
	return half_at(b, GT == Q2_K ? 80 : GT == Q3_K ? 108 : GT == Q6_K ? 208 : 0);
}

template <int GT> __device__ __forceinline__ float blk_dm(const uint8_t *b) {
	if (GT == Q2_K) return half_at(b, 82);
	if (T<GT>::mins) return half_at(b, 2);
	return 0.0f;
}

__device__ __forceinline__ int scale_k4(const uint8_t *s, int j, bool want_min) {
	if (j < 4) return want_min ? (s[j + 4] & 63) : (s[j] & 63);
	return want_min ? ((s[j + 4] >> 4) | ((s[j] >> 6) << 4)) : ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
}

// The integer sub-block scale and min of sub-block j (layout/ggml's Sc, Mn).
template <int GT> __device__ __forceinline__ int blk_sc(const uint8_t *b, int j) {
	switch (GT) {
	case Q2_K: return b[j] & 15;
	case Q3_K: {
		int lo = (b[96 + j % 8] >> (4 * (j / 8))) & 15;
		int hi = (b[104 + j % 4] >> (2 * (j / 4))) & 3;
		return (lo | (hi << 4)) - 32;
	}
	case Q4_K: case Q5_K: return scale_k4(b + 4, j, false);
	case Q6_K: return (int)(signed char)b[192 + j];
	case IQ4_XS: {
		int lo = (b[4 + j / 2] >> (4 * (j % 2))) & 15;
		int hi = (((int)b[2] | ((int)b[3] << 8)) >> (2 * j)) & 3;
		return (lo | (hi << 4)) - 32;
	}
	}
	return 1;
}

template <int GT> __device__ __forceinline__ int blk_mn(const uint8_t *b, int j) {
	if (GT == Q2_K) return b[j] >> 4;
	if (GT == Q4_K || GT == Q5_K) return scale_k4(b + 4, j, true);
	return 0;
}

// The integer weight of element e (layout/ggml's Q).
template <int GT> __device__ __forceinline__ int blk_q(const uint8_t *b, int e) {
	switch (GT) {
	case Q4_0: return ((b[2 + e % 16] >> (4 * (e / 16))) & 15) - 8;
	case IQ4_NL: return ggml_kvalues[(b[2 + e % 16] >> (4 * (e / 16))) & 15];
	case Q4_1: return (b[4 + e % 16] >> (4 * (e / 16))) & 15;
	case Q5_0: case Q5_1: {
		const int o = GT == Q5_1 ? 2 : 0;
		uint32_t qh = (uint32_t)b[2 + o] | ((uint32_t)b[3 + o] << 8) | ((uint32_t)b[4 + o] << 16) | ((uint32_t)b[5 + o] << 24);
		int q = ((b[6 + o + e % 16] >> (4 * (e / 16))) & 15) | (((qh >> e) & 1) << 4);
		return GT == Q5_0 ? q - 16 : q;
	}
	case Q8_0: return (int)(signed char)b[2 + e];
	case Q2_K: return (b[16 + 32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4))) & 3;
	case Q3_K: {
		int q = (b[32 + 32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4))) & 3;
		return ((b[e % 32] >> (e / 32)) & 1) ? q : q - 4;
	}
	case Q4_K: return (b[16 + 32 * (e / 64) + e % 32] >> (4 * (e / 32 % 2))) & 15;
	case Q5_K: {
		int q = (b[48 + 32 * (e / 64) + e % 32] >> (4 * (e / 32 % 2))) & 15;
		return q | (((b[16 + e % 32] >> (e / 32)) & 1) << 4);
	}
	case Q6_K: {
		int l = e % 128, c = e / 128;
		int lo = (b[64 * c + l % 64] >> (4 * (l / 64))) & 15;
		int hi = (b[128 + 32 * c + l % 32] >> (2 * (l / 32))) & 3;
		return (lo | (hi << 4)) - 32;
	}
	case IQ4_XS: return ggml_kvalues[(b[8 + 16 * (e / 32) + e % 16] >> (4 * (e / 16 % 2))) & 15];
	}
	return 0;
}

// The reference float32 weight of element e.
template <int GT> __device__ __forceinline__ float blk_w(const uint8_t *b, int e) {
	int j = e / T<GT>::sub;
	float d = blk_d<GT>(b);
	float dl = T<GT>::super ? __fmul_rn(d, (float)blk_sc<GT>(b, j)) : d;
	float w = __fmul_rn(dl, (float)blk_q<GT>(b, e));
	if (T<GT>::mins == 1) w = __fsub_rn(w, __fmul_rn(blk_dm<GT>(b), (float)blk_mn<GT>(b, j)));
	if (T<GT>::mins == 2) w = __fadd_rn(w, blk_dm<GT>(b));
	return w;
}

template <int GT>
__device__ void ggml_a8(const uint8_t *w, const signed char *xq, const float *xs, float *y, i64 rows, i64 pcols, i64 batch) {
	__shared__ int sm[2 * GGML_THREADS];
	const int r = blockIdx.x, t = threadIdx.x;
	const int nblk = (int)(pcols / T<GT>::belems), nsteps = (int)(pcols / T<GT>::step);
	const uint8_t *row = w + (i64)r * nblk * T<GT>::bbytes;
	for (int v = 0; v < batch; v++) {
		const signed char *x = xq + (i64)v * pcols;
		float acc = 0.0f;
		for (int s0 = 0; s0 < nsteps; s0 += GGML_THREADS) {
			int s = s0 + t;
			if (s < nsteps) {
				int c0 = s * T<GT>::step;
				const uint8_t *b = row + (c0 / T<GT>::belems) * T<GT>::bbytes;
				int e0 = c0 % T<GT>::belems;
				int S = 0, M = 0;
				for (int j = e0 / T<GT>::sub; j < (e0 + T<GT>::step) / T<GT>::sub; j++) {
					int dot = 0, sx = 0;
					for (int e = j * T<GT>::sub; e < (j + 1) * T<GT>::sub; e++) {
						int xv = x[c0 - e0 + e];
						dot += blk_q<GT>(b, e) * xv;
						sx += xv;
					}
					S += blk_sc<GT>(b, j) * dot;
					M = T<GT>::mins == 1 ? M + blk_mn<GT>(b, j) * sx : sx;
				}
				sm[2 * t] = S;
				sm[2 * t + 1] = M;
			}
			__syncthreads();
			if (t == 0) {
				for (int i = 0; i < GGML_THREADS && s0 + i < nsteps; i++) {
					int c0 = (s0 + i) * T<GT>::step;
					const uint8_t *b = row + (c0 / T<GT>::belems) * T<GT>::bbytes;
					float xsv = xs[(i64)v * (pcols / 128) + c0 / 128];
					acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(blk_d<GT>(b), xsv), (float)sm[2 * i]));
					if (T<GT>::mins) {
						float qm = __fmul_rn(__fmul_rn(blk_dm<GT>(b), xsv), (float)sm[2 * i + 1]);
						acc = T<GT>::mins == 1 ? __fsub_rn(acc, qm) : __fadd_rn(acc, qm);
					}
				}
			}
			__syncthreads();
		}
		if (t == 0) y[(i64)v * rows + r] = acc;
	}
}

template <int GT>
__device__ void ggml_f32(const uint8_t *w, const float *xf, float *y, i64 rows, i64 pcols, i64 batch) {
	__shared__ float sm[GGML_THREADS];
	const int r = blockIdx.x, t = threadIdx.x;
	const int nblk = (int)(pcols / T<GT>::belems), nsteps = (int)(pcols / T<GT>::step);
	const uint8_t *row = w + (i64)r * nblk * T<GT>::bbytes;
	for (int v = 0; v < batch; v++) {
		const float *x = xf + (i64)v * pcols;
		float acc = 0.0f;
		for (int s = t; s < nsteps; s += GGML_THREADS) {
			int c0 = s * T<GT>::step;
			const uint8_t *b = row + (c0 / T<GT>::belems) * T<GT>::bbytes;
			int e0 = c0 % T<GT>::belems;
			float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
			for (int e = e0; e < e0 + T<GT>::step; e++) {
				p[e % 4] += blk_w<GT>(b, e) * x[c0 - e0 + e];
			}
			acc += (p[0] + p[1]) + (p[2] + p[3]);
		}
		sm[t] = acc;
		__syncthreads();
		for (int h = GGML_THREADS / 2; h > 0; h /= 2) {
			if (t < h) sm[t] += sm[t + h];
			__syncthreads();
		}
		if (t == 0) y[(i64)v * rows + r] = sm[0];
		__syncthreads();
	}
}

#define GGML_KERNELS(NAME, GT)                                                                                          \
	extern "C" __global__ void __launch_bounds__(GGML_THREADS) ggml_a8_##NAME(const uint8_t *w, const signed char *xq, \
		const float *xs, float *y, i64 rows, i64 pcols, i64 batch) { PDL_ENTRY();                                                  \
		ggml_a8<GT>(w, xq, xs, y, rows, pcols, batch);                                                                \
	}                                                                                                                   \
	extern "C" __global__ void __launch_bounds__(GGML_THREADS) ggml_f32_##NAME(const uint8_t *w, const float *xf,      \
		float *y, i64 rows, i64 pcols, i64 batch) { PDL_ENTRY();                                                                   \
		ggml_f32<GT>(w, xf, y, rows, pcols, batch);                                                                   \
	}

GGML_KERNELS(q4_0, Q4_0)
GGML_KERNELS(q4_1, Q4_1)
GGML_KERNELS(q5_0, Q5_0)
GGML_KERNELS(q5_1, Q5_1)
GGML_KERNELS(q8_0, Q8_0)
GGML_KERNELS(q2_k, Q2_K)
GGML_KERNELS(q3_k, Q3_K)
GGML_KERNELS(q4_k, Q4_K)
GGML_KERNELS(q5_k, Q5_K)
GGML_KERNELS(q6_k, Q6_K)
GGML_KERNELS(iq4_nl, IQ4_NL)
GGML_KERNELS(iq4_xs, IQ4_XS)
