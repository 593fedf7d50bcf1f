// qgemv OpenCL kernels: GEMV for batch 1..NB (NB a build option) over the
// canonical layouts of package layout, one matrix row per work-group.
//
// Float paths (A32, A16 widened on the host): each work-item streams
// uint4 words of its row (stride: the work-group size), keeps one float
// accumulator per vector and folds the group's affine form in per
// 32-column slice (s * sum(q*x) - m * sum(x)); the work-group then
// reduces, with sub-group reductions where the device has them
// (USE_SUBGROUPS) and a local-memory tree otherwise.
//
// Int8 paths (A8): bit-exact to layout's DotA8Exact. Work-item j computes
// the exact int32 isum of block j of a tile of blocks (for every vector)
// into local memory; then work-item b adds the float terms
// f = s*xs, term = f*(float)isum, acc = acc + term of vector b in block
// order. FP_CONTRACT is off and those three operations are separate
// statements, each rounded to float32.
//
// Activations arrive padded to PCols per vector (zeros beyond Cols) and,
// for act-order matrices, already gathered; x[b*pcols + c] is column c of
// vector b. No atomics are used.

#pragma OPENCL FP_CONTRACT OFF

#ifndef NB
#define NB 1
#endif

#ifdef USE_SUBGROUPS
#ifdef USE_INTEL_SUBGROUPS
#pragma OPENCL EXTENSION cl_intel_subgroups : enable
#else
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#endif
#endif

// reduce_store sums acc[b] over the work-group and stores vector b's
// result for row r at y[b*rows + r], for b < batch. red holds NB*WG
// floats.
inline void reduce_store(float *acc, __local float *red, __global float *y, int r, int rows, int batch) {
	int lid = get_local_id(0), wg = get_local_size(0);
#ifdef USE_SUBGROUPS
	int ns = get_num_sub_groups(), sg = get_sub_group_id();
	for (int b = 0; b < NB; b++) {
		float v = sub_group_reduce_add(acc[b]);
		if (get_sub_group_local_id() == 0) red[b * wg + sg] = v;
	}
	barrier(CLK_LOCAL_MEM_FENCE);
	if (lid < batch) {
		float s = 0.0f;
		for (int i = 0; i < ns; i++) s += red[lid * wg + i];
		y[(size_t)lid * rows + r] = s;
	}
#else
	for (int b = 0; b < NB; b++) red[b * wg + lid] = acc[b];
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int s = wg / 2; s > 0; s >>= 1) {
		if (lid < s) {
			for (int b = 0; b < NB; b++) red[b * wg + lid] += red[b * wg + lid + s];
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (lid < batch) y[(size_t)lid * rows + r] = red[lid * wg];
#endif
}

// nib8 returns sum over the 8 nibbles of w (low nibble first) of q*x.
inline float nib8(uint w, float4 a, float4 b) {
	float4 qa = (float4)((float)(w & 15), (float)((w >> 4) & 15), (float)((w >> 8) & 15), (float)((w >> 12) & 15));
	float4 qb = (float4)((float)((w >> 16) & 15), (float)((w >> 20) & 15), (float)((w >> 24) & 15), (float)(w >> 28));
	return dot(qa, a) + dot(qb, b);
}

inline float hsum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

// ---------------------------------------------------------------- Q4G128

__kernel void q4_f32(__global const uint4 *w, __global const float *sc, __global const uchar *zp,
                     __global const float *x, __global float *y, int rows, int pcols, int batch,
                     __local float *red) {
	int r = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
	int nu = pcols / 32, groups = pcols / 128;
	__global const uint4 *wr = w + (size_t)r * nu;
	int mb = (r / 128) * groups * 128 + r % 128;
	float acc[NB];
	for (int b = 0; b < NB; b++) acc[b] = 0.0f;
	for (int u = lid; u < nu; u += wg) {
		uint4 v = wr[u];
		int mi = mb + (u >> 2) * 128;
		float s = sc[mi];
		float m = s * (float)((zp[mi >> 1] >> ((mi & 1) * 4)) & 15);
		for (int b = 0; b < NB; b++) {
			if (b < batch) {
				__global const float4 *xv = (__global const float4 *)(x + (size_t)b * pcols + 32 * u);
				float4 x0 = xv[0], x1 = xv[1], x2 = xv[2], x3 = xv[3], x4 = xv[4], x5 = xv[5], x6 = xv[6], x7 = xv[7];
				float qx = (nib8(v.x, x0, x1) + nib8(v.y, x2, x3)) + (nib8(v.z, x4, x5) + nib8(v.w, x6, x7));
				float sx = hsum4((x0 + x1) + (x2 + x3) + (x4 + x5) + (x6 + x7));
				acc[b] += s * qx - m * sx;
			}
		}
	}
	reduce_store(acc, red, y, r, rows, batch);
}

// ------------------------------------------------------------ Bits(N, G)

// meta returns the scale (or zero/offset) at index i of a binary16
// (meta16) or float32 metadata array.
inline float meta(__global const uchar *p, int i, int meta16) {
	return meta16 ? vload_half(i, (__global const half *)p) : ((__global const float *)p)[i];
}

inline void bits_f32(const int N, __global const uint4 *w, __global const uchar *sp, __global const uchar *zp,
                     __global const float *x, __global float *y, int rows, int prows, int pcols, int batch,
                     int lg, int meta16, int offsets, __local float *red) {
	const int step = 32 / N, E = 32 * step;
	const uint mask = (1u << N) - 1u;
	int r = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
	int nu = pcols / E * 8;
	__global const uint4 *wr = w + (size_t)r * nu;
	float acc[NB];
	for (int b = 0; b < NB; b++) acc[b] = 0.0f;
	for (int u = lid; u < nu; u += wg) {
		uint4 v = wr[u];
		int base = (u >> 3) * E + 4 * (u & 7);
		int lastg = -1;
		float s = 0.0f, m = 0.0f;
		for (int i = 0; i < step; i++) {
			int c = base + 32 * i;
			int g = lg < 0 ? 0 : c >> lg;
			if (g != lastg) {
				int mi = g * prows + r;
				s = meta(sp, mi, meta16);
				float z = meta(zp, mi, meta16);
				m = offsets ? -z : s * z;
				lastg = g;
			}
			int sh = 32 - N * (i + 1);
			float4 q = (float4)((float)((v.x >> sh) & mask), (float)((v.y >> sh) & mask),
			                    (float)((v.z >> sh) & mask), (float)((v.w >> sh) & mask));
			for (int b = 0; b < NB; b++) {
				if (b < batch) {
					float4 xv = *(__global const float4 *)(x + (size_t)b * pcols + c);
					acc[b] += s * dot(q, xv) - m * hsum4(xv);
				}
			}
		}
	}
	reduce_store(acc, red, y, r, rows, batch);
}

// ---------------------------------------------------------- exact A8 path

#define FMT_Q4 0
#define FMT_BITS 1
#define FMT_SP12 2

// block_isum writes isum[b] = sum q*xq - z*sum xq (int32, exact) of block
// bl (BLK columns from bl*BLK) of row r for every vector b < batch.
inline void block_isum(const int fmt, const int N, __global const uchar *w, __global const uchar *zp,
                       __global const char *xq, int r, int prows, int pcols, int batch, int lg, int meta16,
                       int bl, int blkc, __local int *isum) {
	int d[NB], sx[NB];
	for (int b = 0; b < NB; b++) d[b] = sx[b] = 0;
	int c0 = bl * blkc, z;
	if (fmt == FMT_Q4) {
		int mi = ((r / 128) * (pcols / 128) + bl) * 128 + r % 128;
		z = (zp[mi >> 1] >> ((mi & 1) * 4)) & 15;
		__global const uchar *wb = w + (size_t)r * (pcols / 2) + bl * 64;
		for (int i = 0; i < 64; i++) {
			int q = wb[i];
			for (int b = 0; b < NB; b++) {
				if (b < batch) {
					__global const char *xb = xq + (size_t)b * pcols + c0 + 2 * i;
					int x0 = xb[0], x1 = xb[1];
					d[b] += (q & 15) * x0 + (q >> 4) * x1;
					sx[b] += x0 + x1;
				}
			}
		}
	} else if (fmt == FMT_BITS) {
		const int step = 32 / N, E = 32 * step;
		const uint mask = (1u << N) - 1u;
		int g = lg < 0 ? 0 : c0 >> lg;
		z = (int)meta(zp, g * prows + r, meta16);
		__global const uint *wr = (__global const uint *)w + (size_t)r * (pcols / E * 32);
		for (int c = c0; c < c0 + blkc; c += 32) {
			int k = c / E, sh = 32 - N * ((c % E) / 32 + 1);
			__global const uint *wk = wr + k * 32;
			for (int t = 0; t < 32; t++) {
				int q = (int)((wk[t] >> sh) & mask);
				for (int b = 0; b < NB; b++) {
					if (b < batch) {
						int xv = xq[(size_t)b * pcols + c + t];
						d[b] += q * xv;
						sx[b] += xv;
					}
				}
			}
		}
	} else {
		int g = lg < 0 ? 0 : c0 >> lg;
		z = (int)meta(zp, g * prows + r, meta16);
		__global const uint *wr = (__global const uint *)w + (size_t)r * (pcols / 8);
		for (int p0 = c0 / 2; p0 < (c0 + blkc) / 2; p0 += 16) {
			int k = p0 / 128, o = p0 % 128, sh = 24 - 8 * (o / 32);
			__global const uint *wk = wr + k * 32 + o % 32;
			for (int t = 0; t < 16; t++) {
				uint by = (wk[t] >> sh) & 255u;
				int q = (int)(by & 127u);
				int c = 2 * (p0 + t) + (int)(by >> 7);
				for (int b = 0; b < NB; b++) {
					if (b < batch) {
						int xv = xq[(size_t)b * pcols + c];
						d[b] += q * xv;
						sx[b] += xv;
					}
				}
			}
		}
	}
	for (int b = 0; b < NB; b++) isum[b] = d[b] - z * sx[b];
}

// block_scale returns the weight scale of block bl of row r.
inline float block_scale(const int fmt, __global const uchar *sp, int r, int prows, int pcols, int lg, int meta16,
                         int bl, int blkc) {
	if (fmt == FMT_Q4) {
		return ((__global const float *)sp)[((r / 128) * (pcols / 128) + bl) * 128 + r % 128];
	}
	int g = lg < 0 ? 0 : (bl * blkc) >> lg;
	return meta(sp, g * prows + r, meta16);
}

// gemv_a8 is the exact int8 path of every format: tiles of wg blocks;
// work-item j computes block t0+j's isums into local memory; work-item b
// then accumulates vector b's float terms in block order.
inline void gemv_a8(const int fmt, const int N, __global const uchar *w, __global const uchar *sp,
                    __global const uchar *zp, __global const char *xq, __global const float *xs,
                    __global float *y, int rows, int prows, int pcols, int batch, int lg, int meta16,
                    __local int *isum) {
	int r = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
	int blkc = lg < 0 ? 128 : min(1 << lg, 128);
	int nblk = pcols / blkc, ng = pcols / 128;
	float acc = 0.0f;
	for (int t0 = 0; t0 < nblk; t0 += wg) {
		if (t0 + lid < nblk) {
			block_isum(fmt, N, w, zp, xq, r, prows, pcols, batch, lg, meta16, t0 + lid, blkc, isum + lid * NB);
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		if (lid < batch) {
			int n = min(wg, nblk - t0);
			for (int j = 0; j < n; j++) {
				int bl = t0 + j;
				float s = block_scale(fmt, sp, r, prows, pcols, lg, meta16, bl, blkc);
				float f = s * xs[lid * ng + bl * blkc / 128];
				float term = f * (float)isum[j * NB + lid];
				acc = acc + term;
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (lid < batch) y[(size_t)lid * rows + r] = acc;
}

__kernel void q4_a8(__global const uchar *w, __global const uchar *sc, __global const uchar *zp,
                    __global const char *xq, __global const float *xs, __global float *y, int rows,
                    int pcols, int batch, __local int *isum) {
	gemv_a8(FMT_Q4, 4, w, sc, zp, xq, xs, y, rows, 0, pcols, batch, 7, 0, isum);
}

__kernel void sp12_a8(__global const uchar *w, __global const uchar *sp, __global const uchar *zp,
                      __global const char *xq, __global const float *xs, __global float *y, int rows, int prows,
                      int pcols, int batch, int lg, int meta16, __local int *isum) {
	gemv_a8(FMT_SP12, 8, w, sp, zp, xq, xs, y, rows, prows, pcols, batch, lg, meta16, isum);
}

#define BITS_KERNELS(N)                                                                                   \
	__kernel void bits##N##_f32(__global const uint4 *w, __global const uchar *sp, __global const uchar *zp, \
	                            __global const float *x, __global float *y, int rows, int prows, int pcols,  \
	                            int batch, int lg, int meta16, int offsets, __local float *red) {           \
		bits_f32(N, w, sp, zp, x, y, rows, prows, pcols, batch, lg, meta16, offsets, red);              \
	}                                                                                                 \
	__kernel void bits##N##_a8(__global const uchar *w, __global const uchar *sp, __global const uchar *zp,  \
	                           __global const char *xq, __global const float *xs, __global float *y,        \
	                           int rows, int prows, int pcols, int batch, int lg, int meta16,               \
	                           __local int *isum) {                                                         \
		gemv_a8(FMT_BITS, N, w, sp, zp, xq, xs, y, rows, prows, pcols, batch, lg, meta16, isum);        \
	}

BITS_KERNELS(8)
BITS_KERNELS(4)
BITS_KERNELS(3)
BITS_KERNELS(2)
BITS_KERNELS(1)

// -------------------------------------------------------------- Sparse12

__kernel void sp12_f32(__global const uint4 *w, __global const uchar *sp, __global const uchar *zp,
                       __global const float *x, __global float *y, int rows, int prows, int pcols, int batch,
                       int lg, int meta16, __local float *red) {
	int r = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
	int nu = pcols / 32;
	__global const uint4 *wr = w + (size_t)r * nu;
	float acc[NB];
	for (int b = 0; b < NB; b++) acc[b] = 0.0f;
	for (int u = lid; u < nu; u += wg) {
		uint4 v = wr[u];
		int p0 = (u >> 3) * 128 + 4 * (u & 7);
		for (int i = 0; i < 4; i++) {
			int p = p0 + 32 * i;
			int g = lg < 0 ? 0 : (2 * p) >> lg;
			int mi = g * prows + r;
			float s = meta(sp, mi, meta16);
			float m = s * meta(zp, mi, meta16);
			int sh = 24 - 8 * i;
			uint4 by = (v >> (uint)sh) & 255u;
			float4 q = convert_float4(by & 127u);
			int4 pos = convert_int4(by >> 7);
			for (int b = 0; b < NB; b++) {
				if (b < batch) {
					float8 xv = vload8(0, x + (size_t)b * pcols + 2 * p);
					float4 xk = (float4)(pos.x ? xv.s1 : xv.s0, pos.y ? xv.s3 : xv.s2,
					                     pos.z ? xv.s5 : xv.s4, pos.w ? xv.s7 : xv.s6);
					acc[b] += s * dot(q, xk) - m * hsum4(xk);
				}
			}
		}
	}
	reduce_store(acc, red, y, r, rows, batch);
}


// ------------------------------------------------------------ utilities

// readbw streams n uint4 words (grid-stride) and writes one value per
// work-item that depends on every word it read, so nothing is elided.
__kernel void readbw(__global const uint4 *p, int n, __global uint *out) {
	size_t gid = get_global_id(0), gs = get_global_size(0);
	uint4 a = (uint4)(0), b = (uint4)(0);
	size_t i = gid;
	for (; i + gs < (size_t)n; i += 2 * gs) {
		a ^= p[i];
		b += p[i + gs];
	}
	if (i < (size_t)n) a ^= p[i];
	uint4 c = a ^ b;
	out[gid] = c.x ^ c.y ^ c.z ^ c.w;
}

// selftest writes out[i] = 3*i + 1: run once per device at load.
__kernel void selftest(__global int *out) {
	int i = get_global_id(0);
	out[i] = 3 * i + 1;
}
