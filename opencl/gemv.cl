// qgemv OpenCL kernels: GEMV for batch 1..NB (NB a build option) over the
// layouts of package layout (Q4G128 also in 16-row tiles, see below);
// the generic kernels take one matrix row per work-group.
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

// On the device a Q4G128 matrix is stored in one of two arrangements
// (matrix.go, Load; the build option Q4TILES says which):
//   - row-major, as in package layout (the canonical bytes);
//   - with Q4TILES, in tiles of 16 rows (matrix.go, q4Stripe): for tile
//     T = r/16 and 128-column group g, the 64 bytes of each of the 16
//     rows (canonical nibble order) are 1 KB contiguous at byte
//     ((T*ng + g)*16 + r%16)*64, and the rows' scales and zeros (two per
//     byte, even index in the low nibble) sit at index
//     (T*ng + g)*16 + r%16. The 128-row stripes keep their canonical
//     byte ranges. A work-group of q4_mma then reads one contiguous range
//     and each warp load 512 contiguous bytes. H200, b1, medians of 6
//     (two alternating runs): q4_mma A32 16384x16384 49.6 us against 53.4
//     row-major; but the CUDA-core float kernel is 8-16% slower on tiles
//     (16384x16384 75.5 against 70.0 us) and the int8 tiled kernel 3.6%
//     (51.2 against 49.4 us), so tiles are the default only where the
//     tensor-core kernels run.

#ifdef Q4TILES
// q4_unit returns the uint4 index of unit u (columns 32u..32u+31) of row r.
inline size_t q4_unit(int r, int u, int ng) {
	return ((size_t)((r >> 4) * ng + (u >> 2)) * 16 + (r & 15)) * 4 + (u & 3);
}
// q4_meta returns the scale (and zero) index of row r, group g.
inline int q4_meta(int r, int g, int ng) { return ((r >> 4) * ng + g) * 16 + (r & 15); }
// Q4_WS and Q4_MS: what q4_unit and q4_meta advance by from one group to
// the next of the same row
#define Q4_WS 64
#define Q4_MS 16
#else
inline size_t q4_unit(int r, int u, int ng) { return (size_t)r * ng * 4 + u; }
inline int q4_meta(int r, int g, int ng) { return ((r >> 7) * ng + g) * 128 + (r & 127); }
#define Q4_WS 4
#define Q4_MS 128
#endif

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
	if (fmt == FMT_BITS) {
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
	int g = lg < 0 ? 0 : (bl * blkc) >> lg;
	return meta(sp, g * prows + r, meta16);
}

// gemv_a8 is the generic exact int8 path (Bits, Sparse12): tiles of wg blocks;
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

// readbw streams n uint4 words (grid-stride, four loads in flight per
// work-item and step) and folds them into a value that is stored only if
// it equals a constant, so no load can be elided and the kernel writes
// (almost) nothing.
__kernel void readbw(__global const uint4 *p, int n, __global uint *out) {
	size_t gid = get_global_id(0), gs = get_global_size(0);
	uint4 a = (uint4)(0), b = (uint4)(0), c = (uint4)(0), d = (uint4)(0);
	size_t i = gid;
	for (; i + 3 * gs < (size_t)n; i += 4 * gs) {
		a ^= p[i];
		b += p[i + gs];
		c ^= p[i + 2 * gs];
		d += p[i + 3 * gs];
	}
	for (; i < (size_t)n; i += gs) a ^= p[i];
	uint4 e = (a ^ b) + (c ^ d);
	uint v = e.x ^ e.y ^ e.z ^ e.w;
	if (v == 0x9E3779B9u) out[0] = (uint)gid;
}

// selftest writes out[i] = 3*i + 1: run once per device at load.
__kernel void selftest(__global int *out) {
	int i = get_global_id(0);
	out[i] = 3 * i + 1;
}

// ================================================ tiled kernels (Q4G128, Bits4)
//
// Fast paths for Q4G128 and Bits(4, G >= 128). A work-group of TWG
// work-items (TWG/32 "warps" of 32 consecutive work-items) owns a tile of
// rows; the 32 lanes of a warp stride over the row's uint4 units (32
// columns each), so weight loads are contiguous across lanes, and each
// lane keeps several rows' words in flight and reuses every activation
// load for all of them. ks warps (a kernel argument, chosen per matrix
// on the host) may share the same rows and split their columns, so that
// matrices with few rows still launch enough work-groups. Activations arrive rearranged by the host (see
// matrix.go, reorder*):
//   float: float4 j (0..7) of unit u of vector b at
//          ((b*nc + u/32)*8 + j)*32 + u%32, nc = ceil(units/32), so the
//          lanes of a warp read consecutive float4s; each value is
//          pre-scaled by 16^-k, k the position of its nibble in a 16-bit
//          half-word, so that as_float(0x4B000000 | (h & (15 << 4k))) -
//          2^23 = q*16^k needs no shift (exact: q*16^k < 2^16); xsum holds
//          the sum of the unscaled activations of each unit (Q4) or half
//          unit (Bits4).
//   int8:  32 bytes per unit, arranged so that the nibbles of a weight
//          word, masked to bytes, meet their activations in whole words
//          (one dp4a each); sx holds the int32 sum of each 128-column
//          group.
// The A8 kernels keep the exact contract: per-unit int32 partial dots
// (exact in any order) go to local memory, each (row, block) term
// f = s*xs, term = f*(float)isum is formed by one work-item, and one
// work-item per row adds the terms in block order.

#ifndef TWG
#define TWG 128
#endif
#define NWARP (TWG / 32)
#ifndef RPW
#define RPW 4 // float: rows per warp
#endif
#ifndef UNF
#define UNF 2 // float: units per lane per step
#endif
#ifndef RPA
#define RPA 4 // int8: rows per warp
#endif
#ifndef UNA
#define UNA 2 // int8: units per lane per tile
#endif

#define MAGIC 0x4B000000u
#define MAGICF 8388608.0f

// qf returns q*16^k for the nibble of h selected by mask (15 << 4k).
#define QF(h, mask) (as_float(((h) & (mask)) | MAGIC) - MAGICF)

// nib_half returns sum over k < 4 of nibble k of h times a[k] (a pre-scaled).
inline float nib_half(uint h, float4 a, float acc) {
	acc = mad(QF(h, 0xFu), a.x, acc);
	acc = mad(QF(h, 0xF0u), a.y, acc);
	acc = mad(QF(h, 0xF00u), a.z, acc);
	acc = mad(QF(h, 0xF000u), a.w, acc);
	return acc;
}

// nib_lanes returns sum over e < 4 of the nibble of v.e selected by mask
// times a[e].
inline float nib_lanes(uint4 v, uint mask, float4 a, float acc) {
	acc = mad(QF(v.x, mask), a.x, acc);
	acc = mad(QF(v.y, mask), a.y, acc);
	acc = mad(QF(v.z, mask), a.z, acc);
	acc = mad(QF(v.w, mask), a.w, acc);
	return acc;
}

#ifdef USE_PTX
// Not volatile: a pure function of its operands, so the compiler may
// schedule it freely (the volatile form measured slower than the
// portable dot product on the H200).
inline int dp4a(uint a, uint b, int c) {
	int d;
	__asm__("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}

// Warp shuffles (all 32 lanes of the warp take part; volatile keeps
// them where they are written, outside lane-divergent code).
inline int shfl_xor(int v, int m) {
	int r;
	__asm__ __volatile__("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(m));
	return r;
}
inline float shfl_idx(float v, int l) {
	int r;
	__asm__ __volatile__("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_int(v)), "r"(l));
	return as_float(r);
}
#else
inline int dp4a(uint a, uint b, int c) {
	return c + (int)(a & 255u) * (int)(char)(b & 255u) + (int)((a >> 8) & 255u) * (int)(char)((b >> 8) & 255u) +
	       (int)((a >> 16) & 255u) * (int)(char)((b >> 16) & 255u) + (int)(a >> 24) * ((int)b >> 24);
}
#endif

// store_rows reduces acc over the 32 lanes of each warp and the ks warps
// that share a row group, and stores the tile's NWARP/ks*RPW rows (red:
// NWARP*RPW*33 floats).
inline void store_rows(float acc[RPW][NB], __local float *red, __global float *y, int rt0, int rows, int batch, int ks) {
	int lid = get_local_id(0), lane = lid & 31, wp = lid >> 5;
	for (int b = 0; b < NB; b++) {
		if (b >= batch) break; // uniform
		for (int p = 0; p < RPW; p++) red[(wp * RPW + p) * 33 + lane] = acc[p][b];
		barrier(CLK_LOCAL_MEM_FENCE);
		if (lid < NWARP / ks * RPW) {
			int g = lid / RPW, p = lid % RPW;
			float s = 0.0f;
			for (int i = 0; i < ks; i++) {
				__local const float *rr = red + ((g * ks + i) * RPW + p) * 33;
				for (int l = 0; l < 32; l++) s += rr[l];
			}
			int r = rt0 + lid;
			if (r < rows) y[(size_t)b * rows + r] = s;
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
}

__kernel __attribute__((reqd_work_group_size(TWG, 1, 1))) void
q4_f32t(__global const uint4 *w, __global const float *sc, __global const uchar *zp, __global const float4 *x4,
        __global const float *xsum, __global float *y, int rows, int prows, int pcols, int batch, int ks,
        __local float *red) {
	int lid = get_local_id(0), lane = lid & 31, wp = lid >> 5;
	int nu = pcols / 32, nc = (nu + 31) / 32, ng = pcols / 128;
	int rt0 = get_group_id(0) * (NWARP / ks * RPW), r0 = rt0 + wp / ks * RPW;
	float acc[RPW][NB];
	for (int p = 0; p < RPW; p++)
		for (int b = 0; b < NB; b++) acc[p][b] = 0.0f;
#define Q4_LOAD(WV, S, M, U0)                                                        \
	for (int k = 0; k < UNF; k++) {                                                  \
		int u = min((U0) + 32 * k + lane, nu - 1);                                   \
		for (int p = 0; p < RPW; p++) {                                              \
			int r = min(r0 + p, prows - 1);                                          \
			WV[k][p] = w[q4_unit(r, u, ng)];                                         \
			int mi = q4_meta(r, u >> 2, ng);                                         \
			S[k][p] = sc[mi];                                                        \
			M[k][p] = (float)((zp[mi >> 1] >> ((mi & 1) * 4)) & 15);                 \
		}                                                                            \
	}
#ifdef PF
	uint4 wn[UNF][RPW];
	float sn[UNF][RPW], mn[UNF][RPW];
	Q4_LOAD(wn, sn, mn, wp % ks * 32 * UNF)
#endif
	for (int u0 = wp % ks * 32 * UNF; u0 < nu; u0 += ks * 32 * UNF) {
		uint4 wv[UNF][RPW];
		float s[UNF][RPW], m[UNF][RPW];
#ifdef PF
		// software pipelining: the next step's loads are in flight while
		// this step computes
		for (int k = 0; k < UNF; k++)
			for (int p = 0; p < RPW; p++) wv[k][p] = wn[k][p], s[k][p] = sn[k][p], m[k][p] = mn[k][p];
		if (u0 + ks * 32 * UNF < nu) {
			Q4_LOAD(wn, sn, mn, u0 + ks * 32 * UNF)
		}
#else
		Q4_LOAD(wv, s, m, u0)
#endif
		for (int k = 0; k < UNF; k++) {
			int u = u0 + 32 * k + lane;
			if (u >= nu) break;
			for (int b = 0; b < NB; b++) {
				if (b >= batch) break;
				__global const float4 *xp = x4 + (size_t)((b * nc + (u >> 5)) * 8) * 32 + (u & 31);
				float4 a0 = xp[0], a1 = xp[32], a2 = xp[64], a3 = xp[96];
				float4 a4 = xp[128], a5 = xp[160], a6 = xp[192], a7 = xp[224];
				float sx = xsum[b * nu + u];
				for (int p = 0; p < RPW; p++) {
					uint4 v = wv[k][p];
					float q = nib_half(v.x, a0, 0.0f);
					q = nib_half(v.x >> 16, a1, q);
					q = nib_half(v.y, a2, q);
					q = nib_half(v.y >> 16, a3, q);
					q = nib_half(v.z, a4, q);
					q = nib_half(v.z >> 16, a5, q);
					q = nib_half(v.w, a6, q);
					q = nib_half(v.w >> 16, a7, q);
					acc[p][b] += s[k][p] * (q - m[k][p] * sx);
				}
			}
		}
	}
	store_rows(acc, red, y, rt0, rows, batch, ks);
}

__kernel __attribute__((reqd_work_group_size(TWG, 1, 1))) void
bits4_f32t(__global const uint4 *w, __global const uchar *sp, __global const uchar *zp, __global const float4 *x4,
           __global const float *xsum, __global float *y, int rows, int prows, int pcols, int batch, int lg,
           int meta16, int offsets, int ks, __local float *red) {
	int lid = get_local_id(0), lane = lid & 31, wp = lid >> 5;
	int nu = pcols / 32, nc = (nu + 31) / 32;
	int rt0 = get_group_id(0) * (NWARP / ks * RPW), r0 = rt0 + wp / ks * RPW;
	float acc[RPW][NB];
	for (int p = 0; p < RPW; p++)
		for (int b = 0; b < NB; b++) acc[p][b] = 0.0f;
#define B4_LOAD(WV, SH, MH, SL, ML, U0)                                              \
	for (int k = 0; k < UNF; k++) {                                                  \
		int u = min((U0) + 32 * k + lane, nu - 1);                                   \
		int c = (u >> 3) * 256;                                                      \
		int gh = lg < 0 ? 0 : c >> lg, gl = lg < 0 ? 0 : (c + 128) >> lg;            \
		for (int p = 0; p < RPW; p++) {                                              \
			int r = min(r0 + p, prows - 1);                                          \
			WV[k][p] = w[(size_t)r * nu + u];                                        \
			float s = meta(sp, gh * prows + r, meta16), z = meta(zp, gh * prows + r, meta16); \
			SH[k][p] = s;                                                            \
			MH[k][p] = offsets ? -z : s * z;                                         \
			s = meta(sp, gl * prows + r, meta16);                                    \
			z = meta(zp, gl * prows + r, meta16);                                    \
			SL[k][p] = s;                                                            \
			ML[k][p] = offsets ? -z : s * z;                                         \
		}                                                                            \
	}
#ifdef PF
	uint4 wn[UNF][RPW];
	float shn[UNF][RPW], mhn[UNF][RPW], sln[UNF][RPW], mln[UNF][RPW];
	B4_LOAD(wn, shn, mhn, sln, mln, wp % ks * 32 * UNF)
#endif
	for (int u0 = wp % ks * 32 * UNF; u0 < nu; u0 += ks * 32 * UNF) {
		uint4 wv[UNF][RPW];
		float sh[UNF][RPW], mh[UNF][RPW], sl[UNF][RPW], ml[UNF][RPW];
#ifdef PF
		for (int k = 0; k < UNF; k++)
			for (int p = 0; p < RPW; p++)
				wv[k][p] = wn[k][p], sh[k][p] = shn[k][p], mh[k][p] = mhn[k][p], sl[k][p] = sln[k][p], ml[k][p] = mln[k][p];
		if (u0 + ks * 32 * UNF < nu) {
			B4_LOAD(wn, shn, mhn, sln, mln, u0 + ks * 32 * UNF)
		}
#else
		B4_LOAD(wv, sh, mh, sl, ml, u0)
#endif
		for (int k = 0; k < UNF; k++) {
			int u = u0 + 32 * k + lane;
			if (u >= nu) break;
			for (int b = 0; b < NB; b++) {
				if (b >= batch) break;
				__global const float4 *xp = x4 + (size_t)((b * nc + (u >> 5)) * 8) * 32 + (u & 31);
				float4 a0 = xp[0], a1 = xp[32], a2 = xp[64], a3 = xp[96];
				float4 a4 = xp[128], a5 = xp[160], a6 = xp[192], a7 = xp[224];
				float sxh = xsum[2 * (b * nu + u)], sxl = xsum[2 * (b * nu + u) + 1];
				for (int p = 0; p < RPW; p++) {
					uint4 v = wv[k][p], h = v >> 16u;
					float qh = nib_lanes(h, 0xF000u, a0, 0.0f);
					qh = nib_lanes(h, 0xF00u, a1, qh);
					qh = nib_lanes(h, 0xF0u, a2, qh);
					qh = nib_lanes(h, 0xFu, a3, qh);
					float ql = nib_lanes(v, 0xF000u, a4, 0.0f);
					ql = nib_lanes(v, 0xF00u, a5, ql);
					ql = nib_lanes(v, 0xF0u, a6, ql);
					ql = nib_lanes(v, 0xFu, a7, ql);
					acc[p][b] += (sh[k][p] * qh - mh[k][p] * sxh) + (sl[k][p] * ql - ml[k][p] * sxl);
				}
			}
		}
	}
	store_rows(acc, red, y, rt0, rows, batch, ks);
}

// The int8 kernels: a work-group holds NWARP/ks row groups of RPA rows
// (rt rows); the ks warps of a row group split each tile of tu =
// ks*32*UNA units. part holds the partial dots of a tile per (vector,
// row) at stride ps, terms the tile's tu/4 block terms at stride tu/4+1.

// a8_tile_terms turns the partial dots of a tile into the terms of its
// blocks, then adds them in block order to acc (one work-item per
// (vector, row)).
inline void a8_tile_terms(const int fmt, __local const int *part, __local float *terms, int ps, int rt, int nbk,
                          __global const uchar *sp, __global const uchar *zp, __global const float *xs,
                          __global const int *sx, int rt0, int prows, int ng, int batch, int lg, int meta16, int g0,
                          float *acc) {
	int lid = get_local_id(0), ts = nbk + 1;
	for (int p = lid; p < NB * rt * nbk; p += TWG) {
		int rho = p % rt, j = (p / rt) % nbk, b = p / (rt * nbk);
		int g = g0 + j;
		if (g < ng && b < batch) {
			int r = min(rt0 + rho, prows - 1);
			__local const int *pp = part + (b * rt + rho) * ps;
			int d, z;
			float s;
			if (fmt == FMT_Q4) {
				d = (pp[4 * j] + pp[4 * j + 1]) + (pp[4 * j + 2] + pp[4 * j + 3]);
				int mi = q4_meta(r, g, ng);
				s = ((__global const float *)sp)[mi];
				z = (zp[mi >> 1] >> ((mi & 1) * 4)) & 15;
			} else {
				int o = 16 * (j >> 1) + (j & 1);
				d = 0;
				for (int q = 0; q < 8; q++) d += pp[o + 2 * q];
				int mg = lg < 0 ? 0 : (g * 128) >> lg;
				s = meta(sp, mg * prows + r, meta16);
				z = (int)meta(zp, mg * prows + r, meta16);
			}
			int isum = d - z * sx[b * ng + g];
			float f = s * xs[b * ng + g];
			float term = f * (float)isum;
			terms[(b * rt + rho) * ts + j] = term;
		}
	}
	barrier(CLK_LOCAL_MEM_FENCE);
	if (lid < NB * rt) {
		int b = lid / rt, rho = lid % rt;
		if (b < batch) {
			int n = min(nbk, ng - g0);
			float a = *acc;
			for (int j = 0; j < n; j++) {
				float term = terms[(b * rt + rho) * ts + j];
				a = a + term;
			}
			*acc = a;
		}
	}
}

inline void a8_store(float acc, __global float *y, int rt0, int rt, int rows, int batch) {
	int lid = get_local_id(0);
	if (lid < NB * rt) {
		int b = lid / rt, r = rt0 + lid % rt;
		if (b < batch && r < rows) y[(size_t)b * rows + r] = acc;
	}
}

__kernel __attribute__((reqd_work_group_size(TWG, 1, 1))) void
q4_a8t(__global const uint4 *w, __global const uchar *sc, __global const uchar *zp, __global const uint4 *xq4,
       __global const float *xs, __global const int *sx, __global float *y, int rows, int prows, int pcols, int batch,
       int ks, __local int *part, __local float *terms) {
	int lid = get_local_id(0), lane = lid & 31, wp = lid >> 5;
	int nu = pcols / 32, ng = pcols / 128;
	int rt = NWARP / ks * RPA, tu = ks * 32 * UNA, ps = tu + 1;
	int rt0 = get_group_id(0) * rt, rg = wp / ks * RPA, um0 = wp % ks * 32 * UNA, r0 = rt0 + rg;
	float acc = 0.0f;
	for (int u0 = 0; u0 < nu; u0 += tu) {
		uint4 wv[UNA][RPA];
		for (int k = 0; k < UNA; k++) {
			int u = min(u0 + um0 + 32 * k + lane, nu - 1);
			for (int p = 0; p < RPA; p++) wv[k][p] = w[q4_unit(min(r0 + p, prows - 1), u, ng)];
		}
		for (int k = 0; k < UNA; k++) {
			int um = um0 + 32 * k + lane, u = u0 + um;
			for (int b = 0; b < NB; b++) {
				if (b >= batch) break;
				uint4 a0 = (uint4)(0), a1 = (uint4)(0);
				if (u < nu) {
					a0 = xq4[2 * (b * nu + u)];
					a1 = xq4[2 * (b * nu + u) + 1];
				}
				for (int p = 0; p < RPA; p++) {
					uint4 v = wv[k][p];
					uint4 lo = v & 0x0F0F0F0Fu, hi = (v >> 4u) & 0x0F0F0F0Fu;
					int d = dp4a(lo.x, a0.x, 0);
					d = dp4a(hi.x, a0.y, d);
					d = dp4a(lo.y, a0.z, d);
					d = dp4a(hi.y, a0.w, d);
					d = dp4a(lo.z, a1.x, d);
					d = dp4a(hi.z, a1.y, d);
					d = dp4a(lo.w, a1.z, d);
					d = dp4a(hi.w, a1.w, d);
					part[(b * rt + rg + p) * ps + um] = d;
				}
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		a8_tile_terms(FMT_Q4, part, terms, ps, rt, tu / 4, sc, zp, xs, sx, rt0, prows, ng, batch, 0, 0, u0 / 4, &acc);
	}
	a8_store(acc, y, rt0, rt, rows, batch);
}

__kernel __attribute__((reqd_work_group_size(TWG, 1, 1))) void
bits4_a8t(__global const uint4 *w, __global const uchar *sp, __global const uchar *zp, __global const uint4 *xq4,
          __global const float *xs, __global const int *sx, __global float *y, int rows, int prows, int pcols,
          int batch, int lg, int meta16, int ks, __local int *part, __local float *terms) {
	int lid = get_local_id(0), lane = lid & 31, wp = lid >> 5;
	int nu = pcols / 32, ng = pcols / 128;
	int rt = NWARP / ks * RPA, tu = ks * 32 * UNA, ps = 2 * tu + 1;
	int rt0 = get_group_id(0) * rt, rg = wp / ks * RPA, um0 = wp % ks * 32 * UNA, r0 = rt0 + rg;
	float acc = 0.0f;
	for (int u0 = 0; u0 < nu; u0 += tu) {
		uint4 wv[UNA][RPA];
		for (int k = 0; k < UNA; k++) {
			int u = min(u0 + um0 + 32 * k + lane, nu - 1);
			for (int p = 0; p < RPA; p++) wv[k][p] = w[(size_t)min(r0 + p, prows - 1) * nu + u];
		}
		for (int k = 0; k < UNA; k++) {
			int um = um0 + 32 * k + lane, u = u0 + um;
			for (int b = 0; b < NB; b++) {
				if (b >= batch) break;
				uint4 ae = (uint4)(0), ao = (uint4)(0);
				if (u < nu) {
					ae = xq4[2 * (b * nu + u)];
					ao = xq4[2 * (b * nu + u) + 1];
				}
				for (int p = 0; p < RPA; p++) {
					uint4 v = wv[k][p];
					uint4 lo = v & 0x0F0F0F0Fu, hi = (v >> 4u) & 0x0F0F0F0Fu;
					uint4 ev = (lo & 0xFFFF0000u) | (hi >> 16u), od = (lo & 0xFFFFu) | (hi << 16u);
					int de = dp4a(ev.x, ae.x, 0), dd = dp4a(od.x, ao.x, 0);
					de = dp4a(ev.y, ae.y, de);
					dd = dp4a(od.y, ao.y, dd);
					de = dp4a(ev.z, ae.z, de);
					dd = dp4a(od.z, ao.z, dd);
					de = dp4a(ev.w, ae.w, de);
					dd = dp4a(od.w, ao.w, dd);
					__local int *pp = part + (b * rt + rg + p) * ps + 2 * um;
					pp[0] = de;
					pp[1] = dd;
				}
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		a8_tile_terms(FMT_BITS, part, terms, ps, rt, tu / 4, sp, zp, xs, sx, rt0, prows, ng, batch, lg, meta16, u0 / 4, &acc);
	}
	a8_store(acc, y, rt0, rt, rows, batch);
}


// ============================================ warp-shuffle int8 kernels
//
// NVIDIA (inline PTX) only: the int8 Q4G128 and Bits4 kernels without
// local memory or barriers, after cuda/kernels.cu. A work-group of TWG
// work-items is TWG/32 warps; warp i of group g computes rows
// (g*NWARP + i)*RWA .. +RWA-1 over the whole row. A step is 32 units
// (one per lane; 1024 columns); UNW steps are loaded before any is
// computed. Each lane's dp4a partial dot is summed over the lanes of its
// 128-column block with butterfly shuffles (exact: int32), the block's
// term f = s*xs, term = f*(float)isum is formed by every lane of the
// block, and the terms are added to acc in block order by index shuffles
// (every lane holds the same acc). Activations and sums are those of the
// tiled int8 kernels (matrix.go, reorder).

#ifdef USE_PTX
#ifndef RWA
#define RWA 1
#endif
#ifndef UNW
#define UNW 2
#endif

__kernel __attribute__((reqd_work_group_size(TWG, 1, 1))) void
q4_a8w(__global const uint4 *w, __global const float *sc, __global const uchar *zp, __global const uint4 *xq4,
       __global const float *xs, __global const int *sx, __global float *y, int rows, int prows, int pcols,
       int batch) {
	int lane = get_local_id(0) & 31, wp = get_local_id(0) >> 5;
	int nu = pcols / 32, ng = pcols / 128;
	int r0 = (get_group_id(0) * NWARP + wp) * RWA;
	if (r0 >= rows) return; // warp-uniform
	int rr[RWA];
	for (int p = 0; p < RWA; p++) rr[p] = min(r0 + p, prows - 1);
	float acc[RWA][NB];
	for (int p = 0; p < RWA; p++)
		for (int b = 0; b < NB; b++) acc[p][b] = 0.0f;
	for (int b0 = 0; b0 < nu; b0 += 32 * UNW) {
		uint4 wv[UNW][RWA];
		for (int k = 0; k < UNW; k++) {
			int u = min(b0 + 32 * k + lane, nu - 1);
			for (int p = 0; p < RWA; p++) wv[k][p] = w[q4_unit(rr[p], u, ng)];
		}
		for (int k = 0; k < UNW; k++) {
			int base = b0 + 32 * k;
			if (base >= nu) break; // warp-uniform
			int u = base + lane, ok = u < nu, g = min(u, nu - 1) >> 2;
			int count = min(8, (nu - base) / 4);
			float s[RWA];
			int z[RWA];
			for (int p = 0; p < RWA; p++) {
				int mi = q4_meta(rr[p], g, ng);
				s[p] = sc[mi];
				z[p] = (zp[mi >> 1] >> ((mi & 1) * 4)) & 15;
			}
			for (int b = 0; b < NB; b++) {
				if (b >= batch) break; // uniform
				uint4 a0 = (uint4)(0), a1 = (uint4)(0);
				if (ok) {
					a0 = xq4[2 * (b * nu + u)];
					a1 = xq4[2 * (b * nu + u) + 1];
				}
				int sxg = sx[b * ng + g];
				float xsg = xs[b * ng + g];
				for (int p = 0; p < RWA; p++) {
					uint4 v = wv[k][p];
					uint4 lo = v & 0x0F0F0F0Fu, hi = (v >> 4u) & 0x0F0F0F0Fu;
					int d = dp4a(lo.x, a0.x, 0);
					d = dp4a(hi.x, a0.y, d);
					d = dp4a(lo.y, a0.z, d);
					d = dp4a(hi.y, a0.w, d);
					d = dp4a(lo.z, a1.x, d);
					d = dp4a(hi.z, a1.y, d);
					d = dp4a(lo.w, a1.z, d);
					d = dp4a(hi.w, a1.w, d);
					d += shfl_xor(d, 1);
					d += shfl_xor(d, 2);
					int isum = d - z[p] * sxg;
					float f = s[p] * xsg;
					float term = f * (float)isum;
					float a = acc[p][b];
					for (int j = 0; j < count; j++) {
						float t = shfl_idx(term, 4 * j);
						a = a + t;
					}
					acc[p][b] = a;
				}
			}
		}
	}
	if (lane == 0) {
		for (int p = 0; p < RWA; p++)
			for (int b = 0; b < NB; b++)
				if (b < batch && r0 + p < rows) y[(size_t)b * rows + r0 + p] = acc[p][b];
	}
}

__kernel __attribute__((reqd_work_group_size(TWG, 1, 1))) void
bits4_a8w(__global const uint4 *w, __global const uchar *sp, __global const uchar *zp, __global const uint4 *xq4,
          __global const float *xs, __global const int *sx, __global float *y, int rows, int prows, int pcols,
          int batch, int lg, int meta16) {
	int lane = get_local_id(0) & 31, wp = get_local_id(0) >> 5;
	int nu = pcols / 32, ng = pcols / 128;
	int r0 = (get_group_id(0) * NWARP + wp) * RWA;
	if (r0 >= rows) return; // warp-uniform
	int rr[RWA];
	for (int p = 0; p < RWA; p++) rr[p] = min(r0 + p, prows - 1);
	float acc[RWA][NB];
	for (int p = 0; p < RWA; p++)
		for (int b = 0; b < NB; b++) acc[p][b] = 0.0f;
	for (int b0 = 0; b0 < nu; b0 += 32 * UNW) {
		uint4 wv[UNW][RWA];
		for (int k = 0; k < UNW; k++) {
			int u = min(b0 + 32 * k + lane, nu - 1);
			for (int p = 0; p < RWA; p++) wv[k][p] = w[(size_t)rr[p] * nu + u];
		}
		for (int k = 0; k < UNW; k++) {
			int base = b0 + 32 * k;
			if (base >= nu) break; // warp-uniform
			int u = base + lane, ok = u < nu;
			int ge = 2 * (min(u, nu - 1) >> 3), go = ge + 1; // the chunk's two blocks
			int count = min(4, (nu - base) / 8);
			int me = lg < 0 ? 0 : (ge * 128) >> lg, mo = lg < 0 ? 0 : (go * 128) >> lg;
			float se[RWA], so[RWA];
			int ze[RWA], zo[RWA];
			for (int p = 0; p < RWA; p++) {
				se[p] = meta(sp, me * prows + rr[p], meta16);
				ze[p] = (int)meta(zp, me * prows + rr[p], meta16);
				so[p] = meta(sp, mo * prows + rr[p], meta16);
				zo[p] = (int)meta(zp, mo * prows + rr[p], meta16);
			}
			for (int b = 0; b < NB; b++) {
				if (b >= batch) break; // uniform
				uint4 ae = (uint4)(0), ao = (uint4)(0);
				if (ok) {
					ae = xq4[2 * (b * nu + u)];
					ao = xq4[2 * (b * nu + u) + 1];
				}
				int sxe = sx[b * ng + ge], sxo = sx[b * ng + go];
				float xse = xs[b * ng + ge], xso = xs[b * ng + go];
				for (int p = 0; p < RWA; p++) {
					uint4 v = wv[k][p];
					uint4 lo = v & 0x0F0F0F0Fu, hi = (v >> 4u) & 0x0F0F0F0Fu;
					uint4 ev = (lo & 0xFFFF0000u) | (hi >> 16u), od = (lo & 0xFFFFu) | (hi << 16u);
					int de = dp4a(ev.x, ae.x, 0), dd = dp4a(od.x, ao.x, 0);
					de = dp4a(ev.y, ae.y, de);
					dd = dp4a(od.y, ao.y, dd);
					de = dp4a(ev.z, ae.z, de);
					dd = dp4a(od.z, ao.z, dd);
					de = dp4a(ev.w, ae.w, de);
					dd = dp4a(od.w, ao.w, dd);
					de += shfl_xor(de, 1);
					dd += shfl_xor(dd, 1);
					de += shfl_xor(de, 2);
					dd += shfl_xor(dd, 2);
					de += shfl_xor(de, 4);
					dd += shfl_xor(dd, 4);
					int ie = de - ze[p] * sxe, io = dd - zo[p] * sxo;
					float fe = se[p] * xse, fo = so[p] * xso;
					float te = fe * (float)ie, to = fo * (float)io;
					float a = acc[p][b];
					for (int j = 0; j < count; j++) {
						float t = shfl_idx(te, 8 * j);
						a = a + t;
						t = shfl_idx(to, 8 * j);
						a = a + t;
					}
					acc[p][b] = a;
				}
			}
		}
	}
	if (lane == 0) {
		for (int p = 0; p < RWA; p++)
			for (int b = 0; b < NB; b++)
				if (b < batch && r0 + p < rows) y[(size_t)b * rows + r0 + p] = acc[p][b];
	}
}
#endif

// ------------------------------------------------------ tensor cores
//
// Float32 activations on NVIDIA tensor cores (sm_80+, inline PTX; built
// with -DUSE_MMA): the host splits each vector into two binary16 columns,
// sigma*x = hi + lo (gpuhost.SplitHiLo; sigma a power of two), and stores
// them in the order the lanes read their B fragments (gpuhost.MMAOrder).
// A work-group of 8 or 16 warps takes 16 rows; its warps split the columns
// (Q4G128: 128-column groups; Bits: chunks) and add their fragments in
// warp order in local memory at the end. Codes become exact binary16
// integers with the 0x6400 magic (lop3, then one sub or fma on half
// pairs), so the products with hi and lo are exact and mma.m16n8k16 adds
// them in float32; each group's or block's sum is scaled in float32.
// Columns 2v and 2v+1 of the fragment are vector v's hi and lo parts:
// lane (g, t) ends with both for vector t and adds them before scaling
// by 1/sigma. At most 4 vectors per launch.
#ifdef USE_MMA
// Every tensor-core kernel comes in two work-group sizes: NAME_8 (8
// warps) and NAME_16 (16 warps, for matrices with few 16-row tiles); the
// host picks one (matrix.go, mmaWarps).

inline uint lop3_ao(uint a, uint b, uint c) { // (a & b) | c
	uint d;
	__asm__("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}
inline uint hsub2(uint a, uint b) {
	uint d;
	__asm__("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
	return d;
}
inline uint hfma2(uint a, uint b, uint c) {
	uint d;
	__asm__("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}
inline uint prmt(uint a, uint b, uint s) {
	uint d;
	__asm__("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
	return d;
}
inline void mma16816(float *c, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1) {
	__asm__ __volatile__("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
	                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// mma_store adds the mw warps' fragments in warp order (red: mw*4*32
// floats) and stores rows r0 and r0+8 of vector t < nb from lane (g, t)
// of warp 0: (hi + lo) * inv[t].
inline void mma_store(const int mw, float *acc, __local float *red, int r0, __global float *y,
                      __global const float *inv, int rows, int nb) {
	int lid = get_local_id(0), lane = lid & 31, wp = lid >> 5, t = lane & 3;
	for (int e = 0; e < 4; e++) red[(wp * 4 + e) * 32 + lane] = acc[e];
	barrier(CLK_LOCAL_MEM_FENCE);
	if (wp == 0 && t < nb) {
		float v[4];
		for (int e = 0; e < 4; e++) {
			float s = 0.0f;
			for (int w = 0; w < mw; w++) s += red[(w * 4 + e) * 32 + lane];
			v[e] = s;
		}
		float f = inv[t];
		if (r0 < rows) y[(size_t)t * rows + r0] = (v[0] + v[1]) * f;
		if (r0 + 8 < rows) y[(size_t)t * rows + r0 + 8] = (v[2] + v[3]) * f;
	}
}

// q4_mma: lane (g, t) loads 16 bytes (columns 32t..32t+31 of a group) of
// rows g and g+8; mu groups in flight per warp: QMU8 with 8 warps, QMU16
// with 16. Three each, measured on the H200 (A32, medians of 3):
// 16384x16384 52.0-52.1 us against 55.5-55.7 with 4 and 74.4 with 2 (8
// warps, two runs); 4096x14336 16.2 against 18.2 with 2 and 22.5 with 6
// (16 warps, one run); 14336x4096 within noise of 4.
#ifndef QMU8
#define QMU8 3
#endif
#ifndef QMU16
#define QMU16 3
#endif
#define MU_MAX (QMU8 > QMU16 ? QMU8 : QMU16)
inline void q4_mma(const int mw, const int mu, __global const uint4 *w, __global const float *sc,
                   __global const uchar *zp, __global const uint2 *xr, __global const float *inv, __global float *y,
                   int rows, int pcols, int nb, __local float *red) {
	int lid = get_local_id(0), lane = lid & 31, wp = lid >> 5, g = lane >> 2, t = lane & 3;
	int r0 = get_group_id(0) * 16 + g; // padded rows exist (PRows % 128 == 0)
	int groups = pcols / 128;
	// rows r0 and r0+8, group 0: the lane's uint4 and metadata index;
	// group gg adds gg*Q4_WS and gg*Q4_MS
	__global const uint4 *w0 = w + q4_unit(r0, t, groups), *w1 = w + q4_unit(r0 + 8, t, groups);
	int mb = q4_meta(r0, 0, groups);
	bool live = g < 2 * nb;                     // fragment columns past the batch are zero
	float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	for (int g0 = wp; g0 < groups; g0 += mu * mw) {
		uint4 wa[MU_MAX], wb[MU_MAX];
		for (int h = 0; h < mu; h++) {
			int gg = min(g0 + h * mw, groups - 1);
			wa[h] = w0[gg * Q4_WS];
			wb[h] = w1[gg * Q4_WS];
		}
		for (int h = 0; h < mu; h++) {
			int gg = g0 + h * mw;
			if (gg >= groups) break;
			int m0 = mb + gg * Q4_MS, m1 = m0 + 8;
			float s0 = sc[m0], s1 = sc[m1];
			uint z0 = (zp[m0 >> 1] >> ((m0 & 1) * 4)) & 15u, z1 = (zp[m1 >> 1] >> ((m1 & 1) * 4)) & 15u;
			// binary16 pairs of 1024 + z and -(64 + z)
			uint lo0 = (0x6400u + z0) * 0x10001u, lo1 = (0x6400u + z1) * 0x10001u;
			uint hi0 = (0xD400u + 16u * z0) * 0x10001u, hi1 = (0xD400u + 16u * z1) * 0x10001u;
			float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
			__global const uint2 *xg = xr + (size_t)gg * 8 * 8 * 4 + g * 4 + t;
			for (int j = 0; j < 4; j++) {
				uint a = j == 0 ? wa[h].x : j == 1 ? wa[h].y : j == 2 ? wa[h].z : wa[h].w;
				uint b = j == 0 ? wb[h].x : j == 1 ? wb[h].y : j == 2 ? wb[h].z : wb[h].w;
				for (int k = 0; k < 2; k++) {
					uint va = a >> (8 * k), vb = b >> (8 * k);
					uint A0 = hsub2(lop3_ao(va, 0x000F000Fu, 0x64006400u), lo0);
					uint A1 = hsub2(lop3_ao(vb, 0x000F000Fu, 0x64006400u), lo1);
					uint A2 = hfma2(lop3_ao(va, 0x00F000F0u, 0x64006400u), 0x2C002C00u, hi0); // * 1/16
					uint A3 = hfma2(lop3_ao(vb, 0x00F000F0u, 0x64006400u), 0x2C002C00u, hi1);
					uint2 xv = live ? xg[(2 * j + k) * 8 * 4] : (uint2)(0u, 0u);
					mma16816(c, A0, A1, A2, A3, xv.x, xv.y);
				}
			}
			acc[0] = fma(s0, c[0], acc[0]);
			acc[1] = fma(s0, c[1], acc[1]);
			acc[2] = fma(s1, c[2], acc[2]);
			acc[3] = fma(s1, c[3], acc[3]);
		}
	}
	mma_store(mw, acc, red, r0, y, inv, rows, nb);
}

// The tensor-core float kernels take vectors 4vg..4vg+nb-1 of a batch:
// per group of 4 vectors, xr holds 2*pcols uint2 (8 binary16 columns),
// xsum 8*pcols/128 floats, inv 4 and y 4*rows.
#define Q4_MMA(MW, MU)                                                                                              \
	__kernel __attribute__((reqd_work_group_size(32 * MW, 1, 1))) void q4_mma_##MW(                                 \
	    __global const uint4 *w, __global const float *sc, __global const uchar *zp, __global const uint2 *xr,      \
	    __global const float *inv, __global float *y, int rows, int pcols, int nb, int vg, __local float *red) {    \
		q4_mma(MW, MU, w, sc, zp, xr + (size_t)vg * 2 * pcols, inv + 4 * vg, y + (size_t)vg * 4 * rows, rows,      \
		       pcols, nb, red);                                                                                     \
	}
Q4_MMA(8, QMU8)
Q4_MMA(16, QMU16)

// bits_pairs turns word w of a lane into the two binary16 code pairs of
// its k-step for 128-column block q of the chunk (N = 8, 4, 2; the byte
// permutes keep each pair inside one block).
inline void bits_pairs(const int N, uint w, int q, uint *pa, uint *pb) {
	if (N == 8) { // bytes b0..b3 = planes 3..0
		*pa = hsub2(prmt(w, 0x64646464u, 0x5140u), 0x64006400u);
		*pb = hsub2(prmt(w, 0x64646464u, 0x7362u), 0x64006400u);
	} else if (N == 4) { // bytes [B0, B2, B1, B3]: halves (B0|B2, B1|B3)
		uint v = prmt(w, 0u, 0x3120u) >> (q == 0 ? 8 : 0);
		*pa = hsub2(lop3_ao(v, 0x000F000Fu, 0x64006400u), 0x64006400u);
		*pb = hfma2(lop3_ao(v, 0x00F000F0u, 0x64006400u), 0x2C002C00u, 0xD400D400u); // * 1/16 - 64
	} else { // N == 2: byte 3-q of w and of w >> 4 in the two halves
		uint v = prmt(w, w >> 4, (uint)(3 - q) | (uint)(7 - q) << 8);
		*pa = hsub2(lop3_ao(v, 0x00030003u, 0x64006400u), 0x64006400u);
		*pb = hfma2(lop3_ao(v, 0x000C000Cu, 0x64006400u), 0x34003400u, 0xDC00DC00u); // * 1/4 - 256
	}
}

// chunks in flight per warp of bits_mma: BMU8 with 8 warps, BMU16 with
// 16 (one each: two measured 15-30% slower on the H200, register bound)
#define BMU_MAX 2
#ifndef BMU8
#define BMU8 1
#endif
#ifndef BMU16
#define BMU16 1
#endif
// whether bits_mma loads the block metadata early (see there): EARLY8
// with 8 warps, EARLY16 with 16
#ifndef EARLY8
#define EARLY8 1
#endif
#ifndef EARLY16
#define EARLY16 0
#endif

// bits_meta loads the scale s, the offset m (s*z, or -offset) of rows r0
// and r1 and the activation sums of the lane's two fragment columns for
// the GPC blocks of chunk k.
inline void bits_meta(const int GPC, int k, int t, int r0, int r1, __global const uchar *sp, __global const uchar *zp,
                      __global const float *xsum, int prows, int lg, int meta16, int offsets, int nb, int nblk,
                      float ms[4][2], float mm[4][2], float mx[4][2]) {
	for (int q = 0; q < GPC; q++) {
		int blk = k * GPC + q, gi = (lg < 0 ? 0 : (blk * 128) >> lg) * prows;
		float s0 = meta(sp, gi + r0, meta16), z0 = meta(zp, gi + r0, meta16);
		float s1 = meta(sp, gi + r1, meta16), z1 = meta(zp, gi + r1, meta16);
		ms[q][0] = s0;
		ms[q][1] = s1;
		mm[q][0] = offsets ? -z0 : s0 * z0;
		mm[q][1] = offsets ? -z1 : s1 * z1;
		int v0 = 2 * t;
		mx[q][0] = v0 < 2 * nb ? xsum[v0 * nblk + blk] : 0.0f;
		mx[q][1] = v0 + 1 < 2 * nb ? xsum[(v0 + 1) * nblk + blk] : 0.0f;
	}
}

// bits_mma: a step is one chunk of E = 1024/N columns (128 bytes of a
// row); lane (g, t) loads words 8t..8t+7 of rows g and g+8. Each block
// ends as s*sum(q*x) - m*sum(x) (m = s*z, or -offset), xsum holding the
// block sums of every fragment column. early: the block metadata is
// loaded with the weights (8-warp kernels; with 16 warps the registers it
// holds cost occupancy: 57.6 against 70.5% of the same-size read for
// Bits4G128 A32 4096x14336 on the H200), else after the products.
inline void bits_mma(const int N, const int mw, const int mu, const int early, __global const uint4 *w,
                     __global const uchar *sp, __global const uchar *zp, __global const uint2 *xr, __global const float *xsum,
                     __global const float *inv, __global float *y, int rows, int prows, int pcols, int lg, int meta16,
                     int offsets, int nb, __local float *red) {
	const int E = 32 * (32 / N), GPC = E / 128;
	int lid = get_local_id(0), lane = lid & 31, wp = lid >> 5, g = lane >> 2, t = lane & 3;
	int r0 = get_group_id(0) * 16 + g, r1 = r0 + 8; // padded rows exist (PRows % 16 == 0)
	int chunks = pcols / E, units = chunks * 8, nblk = pcols / 128;
	__global const uint4 *w0 = w + (size_t)r0 * units + 2 * t, *w1 = w + (size_t)r1 * units + 2 * t;
	bool live = g < 2 * nb;
	float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	for (int kb = wp; kb < chunks; kb += mu * mw) {
		uint4 wa[BMU_MAX][2], wb[BMU_MAX][2]; // mu chunks in flight
		// unrolled, so that wa and wb stay in registers
#pragma unroll
		for (int h = 0; h < mu; h++) {
			int k = min(kb + h * mw, chunks - 1);
			wa[h][0] = w0[k * 8];
			wa[h][1] = w0[k * 8 + 1];
			wb[h][0] = w1[k * 8];
			wb[h][1] = w1[k * 8 + 1];
		}
#pragma unroll
		for (int h = 0; h < mu; h++) {
			int k = kb + h * mw;
			if (k >= chunks) continue;
			float c[4][4]; // [block of the chunk][fragment]
			for (int q = 0; q < GPC; q++)
				for (int e = 0; e < 4; e++) c[q][e] = 0.0f;
			float ms[4][2], mm[4][2], mx[4][2];
			if (early) bits_meta(GPC, k, t, r0, r1, sp, zp, xsum, prows, lg, meta16, offsets, nb, nblk, ms, mm, mx);
			__global const uint2 *xk = xr + (size_t)k * 8 * GPC * 8 * 4 + g * 4 + t;
#pragma unroll
			for (int jj = 0; jj < 8; jj++) {
				uint4 va = wa[h][jj >> 2], vb = wb[h][jj >> 2];
				int j = jj & 3;
				uint a = j == 0 ? va.x : j == 1 ? va.y : j == 2 ? va.z : va.w;
				uint b = j == 0 ? vb.x : j == 1 ? vb.y : j == 2 ? vb.z : vb.w;
				for (int q = 0; q < GPC; q++) {
					uint A0, A1, A2, A3;
					bits_pairs(N, a, q, &A0, &A2);
					bits_pairs(N, b, q, &A1, &A3);
					uint2 xv = live ? xk[(jj * GPC + q) * 8 * 4] : (uint2)(0u, 0u);
					mma16816(c[q], A0, A1, A2, A3, xv.x, xv.y);
				}
			}
			if (!early) bits_meta(GPC, k, t, r0, r1, sp, zp, xsum, prows, lg, meta16, offsets, nb, nblk, ms, mm, mx);
			for (int q = 0; q < GPC; q++) {
				acc[0] += fma(ms[q][0], c[q][0], -mm[q][0] * mx[q][0]);
				acc[1] += fma(ms[q][0], c[q][1], -mm[q][0] * mx[q][1]);
				acc[2] += fma(ms[q][1], c[q][2], -mm[q][1] * mx[q][0]);
				acc[3] += fma(ms[q][1], c[q][3], -mm[q][1] * mx[q][1]);
			}
		}
	}
	mma_store(mw, acc, red, r0, y, inv, rows, nb);
}

#define BITS_MMA(N, MW)                                                                                               \
	__kernel __attribute__((reqd_work_group_size(32 * MW, 1, 1))) void bits##N##_mma_##MW(                            \
	    __global const uint4 *w, __global const uchar *sp, __global const uchar *zp, __global const uint2 *xr,        \
	    __global const float *xsum, __global const float *inv, __global float *y, int rows, int prows, int pcols,     \
	    int lg, int meta16, int offsets, int nb, int vg, __local float *red) {                                        \
		bits_mma(N, MW, BMU##MW, EARLY##MW, w, sp, zp, xr + (size_t)vg * 2 * pcols,                                    \
		         xsum + (size_t)vg * 8 * (pcols / 128), inv + 4 * vg, y + (size_t)vg * 4 * rows, rows, prows, pcols, lg, \
		         meta16, offsets, nb, red);                                                                           \
	}
BITS_MMA(8, 8)
BITS_MMA(4, 8)
BITS_MMA(2, 8)
BITS_MMA(8, 16)
BITS_MMA(4, 16)
BITS_MMA(2, 16)

// bits4_a8m: Bits(4, G >= 128) with int8 activations on tensor cores
// (mma.m16n8k32, unsigned 4-bit codes times signed int8 activations,
// exact int32 sums per 128-column block). Lane (g, t) loads words
// 8t..8t+7 of a chunk (256 columns) for rows g and g+8; b4_regs splits a
// word into one register of four codes per block (planes 3, 1, 2, 0 and
// 7, 5, 6, 4, one byte each), and words 2s and 2s+1 make the A fragment
// of k-step s. xr holds the activations in the order the lanes read their
// B fragments (matrix.go, a8MMAOrder): for chunk k, step s, block b,
// vector v < 8 and lane column t, the uint2 at (((k*4 + s)*2 + b)*8 + v)*4
// + t holds the block's planes' bytes at word columns 8t + 2s (x) and
// 8t + 2s + 1 (y). Each (row, block) term f*(float)(isum - z*sx), f =
// s*xs, goes to local memory; one work-item per (vector, row) adds a
// tile's terms in block order, so the result is bit-exact with DotA8Exact.
// Term rows are 2*tch+1 floats apart (bank-conflict free).
inline void mma16832(int *c, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1) {
	__asm__ __volatile__("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
	                     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
	                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

inline void b4_regs(uint w, uint *blk0, uint *blk1) {
	uint lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
	*blk1 = prmt(lo, hi, 0x5410u); // planes 7, 5, 6, 4
	*blk0 = prmt(lo, hi, 0x7632u); // planes 3, 1, 2, 0
}

// chunks in flight per warp of bits4_a8m: AMU8 with 8 warps (two: 16.0
// against 17.2 us for one, Bits4G128 A8 4096x14336 on the H200, three
// runs), AMU16 with 16
#ifndef AMU8
#define AMU8 2
#endif
#ifndef AMU16
#define AMU16 1
#endif
#define AMU_MAX (AMU8 > AMU16 ? AMU8 : AMU16)

inline void bits4_a8m(const int mw, const int mu, __global const uint4 *w, __global const uchar *sp,
                      __global const uchar *zp, __global const uint2 *xr, __global const float *xs,
                      __global const int *sx, __global float *y, int rows, int prows, int pcols, int lg, int meta16,
                      int nb, int tch, __local float *terms) {
	int lid = get_local_id(0), lane = lid & 31, wp = lid >> 5, g = lane >> 2, t = lane & 3;
	int rb = get_group_id(0) * 16, r0 = rb + g, r1 = r0 + 8; // padded rows exist (PRows % 16 == 0)
	int chunks = pcols / 256, units = chunks * 8, nblk = pcols / 128;
	__global const uint4 *w0 = w + (size_t)r0 * units + 2 * t, *w1 = w + (size_t)r1 * units + 2 * t;
	bool live = g < nb;
	float yacc = 0.0f; // work-item lid < 16*nb: vector lid/16, row rb + lid%16
	const int ts = 2 * tch + 1; // term row stride: odd, so the 16 summing work-items hit distinct banks
	for (int k0 = 0; k0 < chunks; k0 += tch) { // tiles of tch chunks: their terms fit in local memory
		int k1 = min(chunks, k0 + tch);
		for (int kb = k0 + wp; kb < k1; kb += mu * mw) {
			uint4 wa[AMU_MAX][2], wb[AMU_MAX][2];
			// the blocks' metadata, loaded with the weights rather than after the products
			float s[AMU_MAX][2][2], f[AMU_MAX][2][2];
			int z[AMU_MAX][2][2], sxv[AMU_MAX][2][2];
			for (int h = 0; h < mu; h++) {
				int k = min(kb + h * mw, k1 - 1);
				wa[h][0] = w0[k * 8];
				wa[h][1] = w0[k * 8 + 1];
				wb[h][0] = w1[k * 8];
				wb[h][1] = w1[k * 8 + 1];
				for (int b = 0; b < 2; b++) {
					int blk = 2 * k + b, mg = (lg < 0 ? 0 : (blk * 128) >> lg) * prows;
					s[h][b][0] = meta(sp, mg + r0, meta16);
					s[h][b][1] = meta(sp, mg + r1, meta16);
					z[h][b][0] = (int)meta(zp, mg + r0, meta16);
					z[h][b][1] = (int)meta(zp, mg + r1, meta16);
					for (int e = 0; e < 2; e++) {
						int v = 2 * t + e;
						f[h][b][e] = v < nb ? xs[v * nblk + blk] : 0.0f;
						sxv[h][b][e] = v < nb ? sx[v * nblk + blk] : 0;
					}
				}
			}
			for (int h = 0; h < mu; h++) {
				int k = kb + h * mw;
				if (k >= k1) break;
				int c[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
				__global const uint2 *xk = xr + (size_t)k * 4 * 2 * 8 * 4 + g * 4 + t;
				for (int st = 0; st < 4; st++) {
					uint4 va = wa[h][st >> 1], vb = wb[h][st >> 1];
					uint pa = (st & 1) ? va.z : va.x, qa = (st & 1) ? va.w : va.y;
					uint pb = (st & 1) ? vb.z : vb.x, qb = (st & 1) ? vb.w : vb.y;
					uint pa0, pa1, qa0, qa1, pb0, pb1, qb0, qb1;
					b4_regs(pa, &pa0, &pa1);
					b4_regs(qa, &qa0, &qa1);
					b4_regs(pb, &pb0, &pb1);
					b4_regs(qb, &qb0, &qb1);
					uint2 x0 = live ? xk[(st * 2) * 8 * 4] : (uint2)(0u, 0u);
					uint2 x1 = live ? xk[(st * 2 + 1) * 8 * 4] : (uint2)(0u, 0u);
					mma16832(c[0], pa0, pb0, qa0, qb0, x0.x, x0.y);
					mma16832(c[1], pa1, pb1, qa1, qb1, x1.x, x1.y);
				}
				for (int b = 0; b < 2; b++) {
					int blk = 2 * k + b;
					for (int e = 0; e < 4; e++) {
						int v = 2 * t + (e & 1), r = e >> 1;
						if (v < nb) {
							int isum = c[b][e] - z[h][b][r] * sxv[h][b][e & 1];
							terms[(v * 16 + g + r * 8) * ts + blk - 2 * k0] = (s[h][b][r] * f[h][b][e & 1]) * (float)isum;
						}
					}
				}
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		if (lid < 16 * nb) {
			__local const float *tp = terms + lid * ts;
			for (int j = 0; j < 2 * (k1 - k0); j++) yacc = yacc + tp[j];
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (lid < 16 * nb) {
		int r = rb + (lid & 15);
		if (r < rows) y[(size_t)(lid >> 4) * rows + r] = yacc;
	}
}

#define BITS4_A8M(MW)                                                                                                 \
	__kernel __attribute__((reqd_work_group_size(32 * MW, 1, 1))) void bits4_a8m_##MW(                                \
	    __global const uint4 *w, __global const uchar *sp, __global const uchar *zp, __global const uint2 *xr,        \
	    __global const float *xs, __global const int *sx, __global float *y, int rows, int prows, int pcols, int lg,  \
	    int meta16, int nb, int tch, __local float *terms) {                                                          \
		bits4_a8m(MW, AMU##MW, w, sp, zp, xr, xs, sx, y, rows, prows, pcols, lg, meta16, nb, tch, terms);                      \
	}
BITS4_A8M(8)
BITS4_A8M(16)
#endif
