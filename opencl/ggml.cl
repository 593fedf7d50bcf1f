// qgemv OpenCL kernels for layout/ggml matrices: llama.cpp's block types
// as GGUF stores them, one program per type (-DGT=<ggml type id>).
//
// ggml_a8: one work-group per row. Each work-item computes the integer
// sums (S, M) of layout/ggml's exact int8-activation definition for the
// steps (128 columns of a super-block, or one 32-element block) it owns,
// writes them to local memory, and work-item 0 then combines the steps in
// order with the definition's float operations (FP_CONTRACT off: each
// product and sum rounded on its own), so the result is the CPU's bit for
// bit. Batch vectors run one after another.
//
// ggml_f32: one work-group per row; each work-item dequantizes its steps
// to the reference float32 weights (the same operations as llama.cpp's
// dequantizers) and sums weight*x per step, then a tree reduction in
// local memory.
#pragma OPENCL FP_CONTRACT OFF

#define Q4_0 2
#define Q4_1 3
#define Q5_0 6
#define Q5_1 7
#define Q8_0 8
#define Q2_K 10
#define Q3_K 11
#define Q4_K 12
#define Q5_K 13
#define Q6_K 14
#define IQ4_NL 20
#define IQ4_XS 23

#if GT == Q2_K || GT == Q3_K || GT == Q4_K || GT == Q5_K || GT == Q6_K || GT == IQ4_XS
#define SUPER 1
#define BELEMS 256
#define STEP 128
#else
#define SUPER 0
#define BELEMS 32
#define STEP 32
#endif

#if GT == Q4_0 || GT == IQ4_NL
#define BBYTES 18
#elif GT == Q4_1
#define BBYTES 20
#elif GT == Q5_0
#define BBYTES 22
#elif GT == Q5_1
#define BBYTES 24
#elif GT == Q8_0
#define BBYTES 34
#elif GT == Q2_K
#define BBYTES 84
#elif GT == Q3_K
#define BBYTES 110
#elif GT == Q4_K
#define BBYTES 144
#elif GT == Q5_K
#define BBYTES 176
#elif GT == Q6_K
#define BBYTES 210
#elif GT == IQ4_XS
#define BBYTES 136
#endif

#if GT == Q2_K || GT == Q3_K || GT == Q6_K
#define SUB 16
#else
#define SUB 32
#endif

// MINS: 1 the M term is subtracted (K types), 2 added (Q4_1, Q5_1).
#if GT == Q2_K || GT == Q4_K || GT == Q5_K
#define MINS 1
#elif GT == Q4_1 || GT == Q5_1
#define MINS 2
#else
#define MINS 0
#endif

__constant char kvalues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static float half_at(__global const uchar *b, int off) {
	return vload_half(0, (__global const half *)(b + off));
}

// d and dmin (or m) of a block.
static float blk_d(__global const uchar *b) {
#if GT == Q2_K
	return half_at(b, 80);
#elif GT == Q3_K
	return half_at(b, 108);
#elif GT == Q6_K
	return half_at(b, 208);
#else
	return half_at(b, 0);
#endif
}

static float blk_dm(__global const uchar *b) {
#if GT == Q2_K
	return half_at(b, 82);
#elif MINS
	return half_at(b, 2);
#else
	return 0.0f;
#endif
}

#if GT == Q4_K || GT == Q5_K
static int scale_k4(__global const uchar *s, int j, int want_min) {
	if (j < 4) {
		return want_min ? (s[j + 4] & 63) : (s[j] & 63);
	}
	return want_min ? ((s[j + 4] >> 4) | ((s[j] >> 6) << 4)) : ((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
}
#endif

// The integer sub-block scale and min of sub-block j (layout/ggml's Sc,
// Mn); 1 and 0 for the 32-element types.
static int blk_sc(__global const uchar *b, int j) {
#if GT == Q2_K
	return b[j] & 15;
#elif GT == Q3_K
	int lo = (b[96 + j % 8] >> (4 * (j / 8))) & 15;
	int hi = (b[104 + j % 4] >> (2 * (j / 4))) & 3;
	return (lo | (hi << 4)) - 32;
#elif GT == Q4_K || GT == Q5_K
	return scale_k4(b + 4, j, 0);
#elif GT == Q6_K
	return (int)(char)b[192 + j];
#elif GT == IQ4_XS
	int lo = (b[4 + j / 2] >> (4 * (j % 2))) & 15;
	int hi = (((int)b[2] | ((int)b[3] << 8)) >> (2 * j)) & 3;
	return (lo | (hi << 4)) - 32;
#else
	return 1;
#endif
}

static int blk_mn(__global const uchar *b, int j) {
#if GT == Q2_K
	return b[j] >> 4;
#elif GT == Q4_K || GT == Q5_K
	return scale_k4(b + 4, j, 1);
#else
	return 0;
#endif
}

// The integer weight of element e (layout/ggml's Q).
static int blk_q(__global const uchar *b, int e) {
#if GT == Q4_0
	return ((b[2 + e % 16] >> (4 * (e / 16))) & 15) - 8;
#elif GT == IQ4_NL
	return kvalues[(b[2 + e % 16] >> (4 * (e / 16))) & 15];
#elif GT == Q4_1
	return (b[4 + e % 16] >> (4 * (e / 16))) & 15;
#elif GT == Q5_0 || GT == Q5_1
	int o = GT == Q5_1 ? 2 : 0;
	uint qh = (uint)b[2 + o] | ((uint)b[3 + o] << 8) | ((uint)b[4 + o] << 16) | ((uint)b[5 + o] << 24);
	int q = ((b[6 + o + e % 16] >> (4 * (e / 16))) & 15) | (((qh >> e) & 1) << 4);
	return GT == Q5_0 ? q - 16 : q;
#elif GT == Q8_0
	return (int)(char)b[2 + e];
#elif GT == Q2_K
	return (b[16 + 32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4))) & 3;
#elif GT == Q3_K
	int q = (b[32 + 32 * (e / 128) + e % 32] >> (2 * (e / 32 % 4))) & 3;
	return ((b[e % 32] >> (e / 32)) & 1) ? q : q - 4;
#elif GT == Q4_K
	return (b[16 + 32 * (e / 64) + e % 32] >> (4 * (e / 32 % 2))) & 15;
#elif GT == Q5_K
	int q = (b[48 + 32 * (e / 64) + e % 32] >> (4 * (e / 32 % 2))) & 15;
	return q | (((b[16 + e % 32] >> (e / 32)) & 1) << 4);
#elif GT == Q6_K
	int l = e % 128, c = e / 128;
	int lo = (b[64 * c + l % 64] >> (4 * (l / 64))) & 15;
	int hi = (b[128 + 32 * c + l % 32] >> (2 * (l / 32))) & 3;
	return (lo | (hi << 4)) - 32;
#elif GT == IQ4_XS
	return kvalues[(b[8 + 16 * (e / 32) + e % 16] >> (4 * (e / 16 % 2))) & 15];
#endif
}

// The reference float32 weight of element e (sub-block j = e / SUB).
static float blk_w(__global const uchar *b, int e) {
	int j = e / SUB;
	float d = blk_d(b);
#if SUPER
	float dl = d * (float)blk_sc(b, j);
#else
	float dl = d;
#endif
	float w = dl * (float)blk_q(b, e);
#if MINS == 1
	w = w - blk_dm(b) * (float)blk_mn(b, j);
#elif MINS == 2
	w = w + blk_dm(b);
#endif
	return w;
}

#define WG 64

// One work-group per row; batch vectors. xq: batch*pcols int8, xs:
// batch*pcols/128, y: batch*rows.
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void ggml_a8(__global const uchar *w, __global const char *xq, __global const float *xs, __global float *y,
		int rows, int pcols, int batch, __local int *sm) {
	int r = get_group_id(0), t = get_local_id(0);
	int nblk = pcols / BELEMS, nsteps = pcols / STEP;
	__global const uchar *row = w + (size_t)r * nblk * BBYTES;
	for (int v = 0; v < batch; v++) {
		__global const char *x = xq + (size_t)v * pcols;
		float acc = 0.0f;
		for (int s0 = 0; s0 < nsteps; s0 += WG) {
			int s = s0 + t;
			if (s < nsteps) {
				int c0 = s * STEP;
				__global const uchar *b = row + (c0 / BELEMS) * BBYTES;
				int e0 = c0 % BELEMS;
				int S = 0, M = 0;
				for (int j = e0 / SUB; j < (e0 + STEP) / SUB; j++) {
					int dot = 0, sx = 0;
					for (int e = j * SUB; e < (j + 1) * SUB; e++) {
						int xv = x[c0 - e0 + e];
						dot += blk_q(b, e) * xv;
						sx += xv;
					}
					S += blk_sc(b, j) * dot;
#if MINS == 1
					M += blk_mn(b, j) * sx;
#else
					M = sx;
#endif
				}
				sm[2 * t] = S;
				sm[2 * t + 1] = M;
			}
			barrier(CLK_LOCAL_MEM_FENCE);
			if (t == 0) {
				for (int i = 0; i < WG && s0 + i < nsteps; i++) {
					int c0 = (s0 + i) * STEP;
					__global const uchar *b = row + (c0 / BELEMS) * BBYTES;
					float xsv = xs[(size_t)v * (pcols / 128) + c0 / 128];
					float p = blk_d(b) * xsv;
					float q = p * (float)sm[2 * i];
					acc = acc + q;
#if MINS
					float pm = blk_dm(b) * xsv;
					float qm = pm * (float)sm[2 * i + 1];
#if MINS == 1
					acc = acc - qm;
#else
					acc = acc + qm;
#endif
#endif
				}
			}
			barrier(CLK_LOCAL_MEM_FENCE);
		}
		if (t == 0) {
			y[(size_t)v * rows + r] = acc;
		}
	}
}

// Float activations: x is batch*pcols float32 (zero padded).
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void ggml_f32(__global const uchar *w, __global const float *xf, __global float *y,
		int rows, int pcols, int batch, __local float *sm) {
	int r = get_group_id(0), t = get_local_id(0);
	int nblk = pcols / BELEMS, nsteps = pcols / STEP;
	__global const uchar *row = w + (size_t)r * nblk * BBYTES;
	for (int v = 0; v < batch; v++) {
		__global const float *x = xf + (size_t)v * pcols;
		float acc = 0.0f;
		for (int s = t; s < nsteps; s += WG) {
			int c0 = s * STEP;
			__global const uchar *b = row + (c0 / BELEMS) * BBYTES;
			int e0 = c0 % BELEMS;
			float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
			for (int e = e0; e < e0 + STEP; e++) {
				p[e % 4] += blk_w(b, e) * x[c0 - e0 + e];
			}
			acc += (p[0] + p[1]) + (p[2] + p[3]);
		}
		sm[t] = acc;
		barrier(CLK_LOCAL_MEM_FENCE);
		for (int h = WG / 2; h > 0; h /= 2) {
			if (t < h) {
				sm[t] += sm[t + h];
			}
			barrier(CLK_LOCAL_MEM_FENCE);
		}
		if (t == 0) {
			y[(size_t)v * rows + r] = sm[0];
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
}
