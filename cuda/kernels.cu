// qgemv CUDA kernels. go run ./gen compiles this file to PTX for sm_75,
// sm_80 and sm_90 (cuda/ptx/*.ptx, embedded by the cuda package) when a
// CUDA compiler is present, and otherwise checks that the committed PTX
// was produced from this exact source.
//
// Conventions (see the cuda package documentation):
//   - every kernel parameter is 64 bits wide (gorgonia.org/cu copies 8
//     bytes per argument): pointers and long long;
//   - one warp computes RT rows; blockDim.x = 32 * WARPS; grid.x covers
//     the rows, grid.y the K splits (SplitK; 1 = data parallel);
//   - y is batch x rows (vector-major), x is batch x pcols (zero padded);
//   - integer (A8) paths reproduce layout's DotA8Exact bit for bit: the
//     per-block int32 sums are exact, f = s*xs, term = f*isum and
//     acc = acc + term are separately rounded float32 operations (the
//     __f*_rn intrinsics are never contracted into FMAs) and the terms are
//     added in block order.

#include <cuda_fp16.h>
#include <stdint.h>

// PDL_ENTRY opens every kernel but the int8 tensor-core ones (below),
// which split it. From sm_90 on the host launches kernels
// with programmatic dependent launch, so a kernel's blocks may be made
// resident while the kernel before it on the stream is still running:
// launch_dependents lets the next kernel's blocks be scheduled as soon as
// every block of this one has started, and wait holds this block until
// the kernel before has completed and its memory is visible, before any
// load or store. What overlaps is launch and block scheduling. Below
// sm_90 it is empty (the host launches normally).
//
// The int8 tensor-core kernels (a8mma) split it: PDL_LAUNCH at entry,
// PDL_WAIT after their first round of weights, scales and zeros is
// loaded. That memory belongs to the matrix, which no kernel still
// running can be writing (it is uploaded by copies the stream waits for;
// an entropy-coded matrix's words are decoded by a kernel the host waits
// for before it queues the multiply: decodeWords), so those loads may
// run before the kernel ahead completes; activations, results and
// workspace are touched only after the wait.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PDL_ENTRY() asm volatile("griddepcontrol.launch_dependents;\n\tgriddepcontrol.wait;" ::: "memory")
#define PDL_LAUNCH() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#define PDL_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define PDL_ENTRY()
#define PDL_LAUNCH()
#define PDL_WAIT()
#endif

#define FULL 0xffffffffu
#define WARPS 8
#define WARPS_A8 4 // the Bits A8 kernels: 4 warps x 16 vectors x 128 blocks of shared int32
#define MAXB 16

typedef long long i64;

// Activation loads: float32, or binary16 widened exactly.
__device__ __forceinline__ float ldx(const float *x, i64 i) { return __ldg(x + i); }
__device__ __forceinline__ float ldx(const __half *x, i64 i) { return __half2float(__ldg(x + i)); }
__device__ __forceinline__ float4 ldx4(const float *x, i64 i) { return __ldg((const float4 *)(x + i)); }
__device__ __forceinline__ float4 ldx4(const __half *x, i64 i) {
	uint2 u = __ldg((const uint2 *)(x + i));
	float2 a = __half22float2(*(__half2 *)&u.x), b = __half22float2(*(__half2 *)&u.y);
	return make_float4(a.x, a.y, b.x, b.y);
}

// Exact small unsigned integer to float: 2^23 + q as bits, minus 2^23.
__device__ __forceinline__ float u2f(uint32_t q) { return __uint_as_float(0x4B000000u | q) - 8388608.0f; }

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
	return v;
}

// ---------------------------------------------------------------- float kernels

// storeOut writes one result: mode 0 stores, 1 adds atomically into y
// (SplitK, order-dependent), 2 writes the split's partial (SplitK,
// deterministic: finishSplit adds the partials in split order).
__device__ __forceinline__ void storeOut(float *y, float *ws, i64 o, float v, i64 n, i64 mode) {
	if (mode == 0) y[o] = v;
	else if (mode == 1) atomicAdd(y + o, v);
	else ws[(gridDim.x + 63) / 64 * 64 + (i64)blockIdx.y * n + o] = v;
}

// finishSplit ends a deterministic SplitK launch (mode 2): every thread of
// the block calls it after the block's partials are stored. The block
// that finishes its row tile last (a per-tile counter at the start of ws,
// zero between launches) adds the tile's partials in split order into y
// and resets the counter: one launch, the same bits every run.
__device__ void finishSplit(float *y, float *ws, i64 rows, i64 nb, i64 row0, int tileRows, i64 mode) {
	if (mode != 2) return;
	__shared__ int last;
	unsigned *cnt = (unsigned *)ws;
	const float *part = ws + (gridDim.x + 63) / 64 * 64;
	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0) last = atomicAdd(cnt + blockIdx.x, 1u) == gridDim.y - 1;
	__syncthreads();
	if (!last) return;
	__threadfence();
	i64 n = nb * rows;
	for (int i = threadIdx.x; i < tileRows * nb; i += blockDim.x) {
		i64 r = row0 + i % tileRows, v = i / tileRows;
		if (r >= rows) continue;
		i64 o = v * rows + r;
		float sum = 0;
		for (i64 k = 0; k < gridDim.y; k++) sum += __ldcg(part + k * n + o);
		y[o] = sum;
	}
	if (threadIdx.x == 0) cnt[blockIdx.x] = 0;
}

// gemvf is every float-activation kernel: one warp computes RT rows for
// NB vectors (x holds NB zero-padded vectors; results are stored for the
// first nb). Each lane loads UNR 16-byte weight units of each row per
// step (several loads in flight), then the format F decodes each unit
// and multiplies it with the activations of all NB vectors, so every
// weight is loaded once per call. gridDim.y splits the units of a row
// (SplitK): mode 0 stores, 1 adds atomically into y, 2 writes partials
// to ws[split] for split_reduce.
template <class F, typename T, int RT, int NB, int UNR>
__device__ __forceinline__ void gemvf(const F &f, const T *x, float *y, float *ws, i64 rows, i64 nb, i64 mode) {
	int lane = threadIdx.x & 31;
	i64 row0 = ((i64)blockIdx.x * WARPS + (threadIdx.x >> 5)) * RT; // warps past the rows compute the last row and store nothing
	i64 units = f.units();
	i64 per = (units + gridDim.y - 1) / gridDim.y;
	per = (per + 32 * UNR - 1) / (32 * UNR) * (32 * UNR);
	i64 k0 = blockIdx.y * per, k1 = min(units, k0 + per);
	i64 row[RT];
#pragma unroll
	for (int r = 0; r < RT; r++) row[r] = min(row0 + r, rows - 1);
	float acc[RT][NB];
#pragma unroll
	for (int r = 0; r < RT; r++)
#pragma unroll
		for (int b = 0; b < NB; b++) acc[r][b] = 0;
	for (i64 base = k0; base < k1; base += 32 * UNR) {
		uint4 w[UNR][RT];
#pragma unroll
		for (int j = 0; j < UNR; j++) {
			i64 u = base + lane + 32 * j;
#pragma unroll
			for (int r = 0; r < RT; r++) w[j][r] = u < k1 ? __ldcs(f.W + row[r] * units + u) : make_uint4(0, 0, 0, 0);
		}
#pragma unroll
		for (int j = 0; j < UNR; j++) {
			i64 u = base + lane + 32 * j;
			if (u < k1) f.template step<T, RT, NB>(w[j], u, row, x, acc);
		}
	}
#pragma unroll
	for (int r = 0; r < RT; r++) {
#pragma unroll
		for (int b = 0; b < NB; b++) {
			float v = warpSum(acc[r][b]);
			if (lane == 0 && row0 + r < rows && b < nb) storeOut(y, ws, b * rows + row0 + r, v, nb * rows, mode);
		}
	}
	finishSplit(y, ws, rows, nb, (i64)blockIdx.x * WARPS * RT, WARPS * RT, mode);
}

// Q4G128: a unit is 16 weight bytes, 32 columns of one group.
struct Q4 {
	const uint4 *W;
	const float *S;
	const uint8_t *Z;
	i64 pcols, groups;
	__device__ i64 units() const { return pcols / 32; }
	template <typename T, int RT, int NB>
	__device__ __forceinline__ void step(const uint4 (&w)[RT], i64 u, const i64 (&row)[RT], const T *x, float (&acc)[RT][NB]) const {
		i64 g = u >> 2;
		float s[RT], z[RT];
#pragma unroll
		for (int r = 0; r < RT; r++) {
			i64 mi = ((row[r] >> 7) * groups + g) * 128 + (row[r] & 127);
			s[r] = __ldg(S + mi);
			uint32_t zb = __ldg(Z + (mi >> 1));
			z[r] = (float)((mi & 1) ? zb >> 4 : zb & 15) + 8388608.0f;
		}
		float dq[RT][NB];
#pragma unroll
		for (int r = 0; r < RT; r++)
#pragma unroll
			for (int b = 0; b < NB; b++) dq[r][b] = 0;
#pragma unroll
		for (int j = 0; j < 4; j++) {
#pragma unroll
			for (int h = 0; h < 2; h++) {
				i64 c = u * 32 + j * 8 + h * 4;
				float q[RT][4];
#pragma unroll
				for (int r = 0; r < RT; r++) {
					uint32_t wr = j == 0 ? w[r].x : j == 1 ? w[r].y : j == 2 ? w[r].z : w[r].w;
					uint32_t v = wr >> (16 * h);
#pragma unroll
					for (int e = 0; e < 4; e++) q[r][e] = __uint_as_float(0x4B000000u | ((v >> (4 * e)) & 15)) - z[r];
				}
#pragma unroll
				for (int b = 0; b < NB; b++) {
					float4 xv = ldx4(x, b * pcols + c);
#pragma unroll
					for (int r = 0; r < RT; r++) {
						dq[r][b] = fmaf(q[r][0], xv.x, dq[r][b]);
						dq[r][b] = fmaf(q[r][1], xv.y, dq[r][b]);
						dq[r][b] = fmaf(q[r][2], xv.z, dq[r][b]);
						dq[r][b] = fmaf(q[r][3], xv.w, dq[r][b]);
					}
				}
			}
		}
#pragma unroll
		for (int r = 0; r < RT; r++)
#pragma unroll
			for (int b = 0; b < NB; b++) acc[r][b] = fmaf(s[r], dq[r][b], acc[r][b]);
	}
};

// Bits(n, g): in chunk k of a row, word t holds columns k*E + i*32 + t
// (i < 32/n) at bit offset 32 - n*(i+1). A unit is 4 consecutive words
// of a chunk: for each plane i, 4 consecutive columns (one float4 of
// activations). S and M hold s and m with w = q*s - m, group major; the
// group of column c is c >> lg (lg = 62 for whole-row groups).
template <int N>
struct BitsF {
	const uint4 *W;
	const float *S, *M;
	i64 prows, pcols, lg;
	__device__ i64 units() const { return pcols / (32 * (32 / N)) * 8; }
	template <typename T, int RT, int NB>
	__device__ __forceinline__ void step(const uint4 (&w)[RT], i64 u, const i64 (&row)[RT], const T *x, float (&acc)[RT][NB]) const {
		const int STEP = 32 / N, E = 32 * STEP;
		const uint32_t MASK = (1u << N) - 1;
		i64 k = u >> 3, t0 = (u & 7) * 4;
#pragma unroll(STEP > 8 ? 4 : STEP)
		for (int i = 0; i < STEP; i++) {
			const int sh = 32 - N * (i + 1);
			i64 c = k * E + i * 32 + t0;
			i64 gi = (c >> lg) * prows;
			float q[RT][4];
#pragma unroll
			for (int r = 0; r < RT; r++) {
				float s = __ldg(S + gi + row[r]), m = __ldg(M + gi + row[r]);
				q[r][0] = fmaf(u2f((w[r].x >> sh) & MASK), s, -m);
				q[r][1] = fmaf(u2f((w[r].y >> sh) & MASK), s, -m);
				q[r][2] = fmaf(u2f((w[r].z >> sh) & MASK), s, -m);
				q[r][3] = fmaf(u2f((w[r].w >> sh) & MASK), s, -m);
			}
#pragma unroll
			for (int b = 0; b < NB; b++) {
				float4 xv = ldx4(x, b * pcols + c);
#pragma unroll
				for (int r = 0; r < RT; r++) {
					acc[r][b] = fmaf(q[r][0], xv.x, acc[r][b]);
					acc[r][b] = fmaf(q[r][1], xv.y, acc[r][b]);
					acc[r][b] = fmaf(q[r][2], xv.z, acc[r][b]);
					acc[r][b] = fmaf(q[r][3], xv.w, acc[r][b]);
				}
			}
		}
	}
};

// Sparse12: byte i of word t of chunk k is pair p = k*128 + i*32 + t,
// pos<<7 | q, weight q*s - m on column 2p + pos. A unit is 16 pairs.
struct Sp12F {
	const uint4 *W;
	const float *S, *M;
	i64 prows, pcols, lg;
	__device__ i64 units() const { return pcols / 32; }
	template <typename T, int RT, int NB>
	__device__ __forceinline__ void step(const uint4 (&w)[RT], i64 u, const i64 (&row)[RT], const T *x, float (&acc)[RT][NB]) const {
		i64 k = u >> 3, t0 = (u & 7) * 4;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			const int sh = 24 - 8 * i;
			i64 p = k * 128 + i * 32 + t0;
			i64 gi = ((2 * p) >> lg) * prows;
#pragma unroll
			for (int r = 0; r < RT; r++) {
				float s = __ldg(S + gi + row[r]), m = __ldg(M + gi + row[r]);
				uint32_t v[4] = {(w[r].x >> sh) & 255, (w[r].y >> sh) & 255, (w[r].z >> sh) & 255, (w[r].w >> sh) & 255};
#pragma unroll
				for (int e = 0; e < 4; e++) {
					float q = fmaf(u2f(v[e] & 127), s, -m);
					i64 col = 2 * (p + e) + (v[e] >> 7);
#pragma unroll
					for (int b = 0; b < NB; b++) acc[r][b] = fmaf(q, ldx(x, b * pcols + col), acc[r][b]);
				}
			}
		}
	}
};

// Kernel names: <format>_<f32|f16>_b<NB>; NB = 1 (batch 1), 4 (2..4),
// 16 (5..16), with RT = 4, 2, 2 rows per warp (RT = 1 at NB = 16 measured 2x slower).
#define UNPAREN(...) __VA_ARGS__
#define FLOAT_KERNELS(NAME, F, PARAMS, INIT)                                                                       \
	FLOAT_KERNEL(NAME, F, PARAMS, INIT, float, f32, 1, 4)                                                            \
	FLOAT_KERNEL(NAME, F, PARAMS, INIT, float, f32, 4, 2)                                                            \
	FLOAT_KERNEL(NAME, F, PARAMS, INIT, float, f32, 16, 2)                                                           \
	FLOAT_KERNEL(NAME, F, PARAMS, INIT, __half, f16, 1, 4)                                                           \
	FLOAT_KERNEL(NAME, F, PARAMS, INIT, __half, f16, 4, 2)                                                           \
	FLOAT_KERNEL(NAME, F, PARAMS, INIT, __half, f16, 16, 2)
#define FLOAT_KERNEL(NAME, F, PARAMS, INIT, T, TN, NB, RT)                                                          \
	extern "C" __global__ void __launch_bounds__(32 * WARPS) NAME##_##TN##_b##NB(UNPAREN PARAMS, const T *x, float *y, float *ws, i64 rows, i64 nb, i64 mode) { PDL_ENTRY(); \
		F f = INIT;                                                                                                  \
		gemvf<F, T, RT, NB, 2>(f, x, y, ws, rows, nb, mode);                                                         \
	}
FLOAT_KERNELS(q4g128, Q4, (const uint4 *W, const float *S, const uint8_t *Z, i64 pcols), (Q4{W, S, Z, pcols, pcols / 128}))
FLOAT_KERNELS(bits8, BitsF<8>, (const uint4 *W, const float *S, const float *M, i64 prows, i64 pcols, i64 lg), (BitsF<8>{W, S, M, prows, pcols, lg}))
FLOAT_KERNELS(bits4, BitsF<4>, (const uint4 *W, const float *S, const float *M, i64 prows, i64 pcols, i64 lg), (BitsF<4>{W, S, M, prows, pcols, lg}))
FLOAT_KERNELS(bits3, BitsF<3>, (const uint4 *W, const float *S, const float *M, i64 prows, i64 pcols, i64 lg), (BitsF<3>{W, S, M, prows, pcols, lg}))
FLOAT_KERNELS(bits2, BitsF<2>, (const uint4 *W, const float *S, const float *M, i64 prows, i64 pcols, i64 lg), (BitsF<2>{W, S, M, prows, pcols, lg}))
FLOAT_KERNELS(bits1, BitsF<1>, (const uint4 *W, const float *S, const float *M, i64 prows, i64 pcols, i64 lg), (BitsF<1>{W, S, M, prows, pcols, lg}))
FLOAT_KERNELS(sparse12, Sp12F, (const uint4 *W, const float *S, const float *M, i64 prows, i64 pcols, i64 lg), (Sp12F{W, S, M, prows, pcols, lg}))


// ---------------------------------------------------------------- tensor cores

// Q4G128 with binary16 activations on tensor cores (sm_80+): one block of
// 8 warps computes 16 rows; the warps share out the row's 128-column
// groups (and gridDim.y splits them further), and their partial sums are
// added in warp order in shared memory. Per group, lane (g, t) (g = lane/4,
// t = lane%4) loads 16 bytes of rows g and g+8: columns 32t..32t+31 of the
// group. Nibbles become exact binary16 (q - z) with the 0x6400 magic
// (lop3, then one hsub2/hfma2), so a 32-bit word feeds two
// mma.m16n8k16 k-steps; the products are exact and accumulate in float32,
// then each group's sum is scaled by s in float32. The K order inside a
// group is permuted to match the nibble pairs the magic yields, and the
// activations xr are stored in the order a warp reads them, so that each
// fragment load is 256 contiguous bytes: for group gg, k-step s (word
// s/2, half s%2), vector v < 8*NT (zero padded) and lane column t, the
// uint2 at ((gg*8 + s)*8*NT + v)*4 + t holds columns
// c, c+4, c+1, c+5 (s even) or c+2, c+6, c+3, c+7 (s odd) of vector v,
// c = gg*128 + 32t + 8(s/2).
#if __CUDA_ARCH__ >= 800
__device__ __forceinline__ uint32_t lop3and_or(uint32_t a, uint32_t b, uint32_t c) {
	uint32_t d;
	asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}

__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// ldW loads 16 weight bytes with the streaming hint of __ldcs and asks
// L2 to fetch the whole 256-byte block around them from DRAM: in q4mma a
// warp load covers 64 bytes of each of 16 rows and the block's other
// warps read the neighbouring groups of those rows next. On an H200
// (A16, 31-36 MB matrices) Q4G128 batch 1 took 0.94-0.96x the time with
// it; the Bits kernels, whose warp loads already cover 128 bytes of a
// row, measured no change and keep __ldcs.
__device__ __forceinline__ uint4 ldW(const uint4 *p) {
	uint4 v;
	asm volatile("ld.global.cs.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
	return v;
}

__device__ __forceinline__ uint32_t h2u(__half2 h) { return *(uint32_t *)&h; }
__device__ __forceinline__ __half2 u2h(uint32_t u) { return *(__half2 *)&u; }
#endif

#if __CUDA_ARCH__ >= 800
// mmaStore ends a tensor-core kernel: the 8 warps' fragments (rows r0
// and r0+8 of the block's 16; vectors n*8 + 2t and +1) are added in warp
// order in shared memory and stored.
template <int NT>
__device__ __forceinline__ void mmaStore(float (&acc)[NT][4], float (*red)[NT * 4][32], i64 r0, float *y, float *ws, i64 rows, i64 nb, i64 mode) {
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, t = lane & 3;
#pragma unroll
	for (int n = 0; n < NT; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) red[wp][n * 4 + e][lane] = acc[n][e];
	__syncthreads();
	if (wp == 0) {
#pragma unroll
		for (int n = 0; n < NT; n++) {
#pragma unroll
			for (int e = 0; e < 4; e++) {
				float v = 0;
#pragma unroll
				for (int w = 0; w < WARPS; w++) v += red[w][n * 4 + e][lane];
				i64 row = e < 2 ? r0 : r0 + 8, vec = n * 8 + 2 * t + (e & 1);
				if (row < rows && vec < nb) storeOut(y, ws, vec * rows + row, v, nb * rows, mode);
			}
		}
	}
	finishSplit(y, ws, rows, nb, (i64)blockIdx.x * 16, 16, mode);
}
#endif

template <int NT>
__device__ __forceinline__ void q4mma(const uint4 *W, const float *S, const uint8_t *Z, const uint2 *xr, float *y, float *ws, i64 rows, i64 pcols, i64 nb, i64 mode) {
#if __CUDA_ARCH__ >= 800
	__shared__ float red[WARPS][NT * 4][32];
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
	int g = lane >> 2, t = lane & 3;
	i64 r0 = (i64)blockIdx.x * 16 + g, r1 = r0 + 8; // padded rows exist (PRows % 128 == 0)
	i64 groups = pcols / 128, units = pcols / 32;
	i64 per = (groups + gridDim.y - 1) / gridDim.y;
	i64 k0 = blockIdx.y * per, k1 = min(groups, k0 + per);
	const uint4 *W0 = W + r0 * units + t, *W1 = W + r1 * units + t;
	i64 mb = ((r0 >> 7) * groups) * 128 + (r0 & 127); // metadata of row r0, group 0
	float acc[NT][4];
#pragma unroll
	for (int n = 0; n < NT; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) acc[n][e] = 0;
	const __half2 sixteenth = __float2half2_rn(0.0625f);
	for (i64 gi = k0 + wp; gi < k1; gi += 2 * WARPS) {
		i64 gj = gi + WARPS;
		bool two = gj < k1;
		uint4 wa[2], wb[2];
		wa[0] = ldW(W0 + gi * 4);
		wb[0] = ldW(W1 + gi * 4);
		if (two) {
			wa[1] = ldW(W0 + gj * 4);
			wb[1] = ldW(W1 + gj * 4);
		}
#pragma unroll
		for (int h = 0; h < 2; h++) {
			if (h == 1 && !two) break;
			i64 gg = h ? gj : gi;
			i64 m0 = mb + gg * 128, m1 = m0 + 8;
			float s0 = __ldg(S + m0), s1 = __ldg(S + m1);
			uint32_t zb0 = __ldg(Z + (m0 >> 1)), zb1 = __ldg(Z + (m1 >> 1));
			float z0 = (float)((m0 & 1) ? zb0 >> 4 : zb0 & 15), z1 = (float)((m1 & 1) ? zb1 >> 4 : zb1 & 15);
			__half2 lo0 = __float2half2_rn(1024.0f + z0), lo1 = __float2half2_rn(1024.0f + z1);
			__half2 hi0 = __float2half2_rn(-64.0f - z0), hi1 = __float2half2_rn(-64.0f - z1);
			float c[NT][4];
#pragma unroll
			for (int n = 0; n < NT; n++)
#pragma unroll
				for (int e = 0; e < 4; e++) c[n][e] = 0;
			const uint2 *xg = xr + gg * 8 * (8 * NT) * 4 + g * 4 + t;
#pragma unroll
			for (int j = 0; j < 4; j++) {
				uint32_t a = j == 0 ? wa[h].x : j == 1 ? wa[h].y : j == 2 ? wa[h].z : wa[h].w;
				uint32_t b = j == 0 ? wb[h].x : j == 1 ? wb[h].y : j == 2 ? wb[h].z : wb[h].w;
#pragma unroll
				for (int k = 0; k < 2; k++) {
					uint32_t va = a >> (8 * k), vb = b >> (8 * k);
					uint32_t A0 = h2u(__hsub2(u2h(lop3and_or(va, 0x000F000Fu, 0x64006400u)), lo0));
					uint32_t A1 = h2u(__hsub2(u2h(lop3and_or(vb, 0x000F000Fu, 0x64006400u)), lo1));
					uint32_t A2 = h2u(__hfma2(u2h(lop3and_or(va, 0x00F000F0u, 0x64006400u)), sixteenth, hi0));
					uint32_t A3 = h2u(__hfma2(u2h(lop3and_or(vb, 0x00F000F0u, 0x64006400u)), sixteenth, hi1));
#pragma unroll
					for (int n = 0; n < NT; n++) {
						// lanes of vectors past the batch feed zeros without
						// loading them (at batch 1, 1/8 of the traffic)
						uint2 xv = n * 8 + g < nb ? __ldg(xg + ((2 * j + k) * (8 * NT) + n * 8) * 4) : make_uint2(0, 0);
						mma16816(c[n], A0, A1, A2, A3, xv.x, xv.y);
					}
				}
			}
#pragma unroll
			for (int n = 0; n < NT; n++) {
				acc[n][0] = fmaf(s0, c[n][0], acc[n][0]);
				acc[n][1] = fmaf(s0, c[n][1], acc[n][1]);
				acc[n][2] = fmaf(s1, c[n][2], acc[n][2]);
				acc[n][3] = fmaf(s1, c[n][3], acc[n][3]);
			}
		}
	}
	mmaStore<NT>(acc, red, r0, y, ws, rows, nb, mode);
#else
	asm volatile("trap;"); // the host runs these only on sm_80 and later
#endif
}

extern "C" __global__ void __launch_bounds__(32 * WARPS) q4g128_mma_n8(const uint4 *W, const float *S, const uint8_t *Z, const uint2 *xr, float *y, float *ws, i64 rows, i64 pcols, i64 nb, i64 mode) { PDL_ENTRY();
	q4mma<1>(W, S, Z, xr, y, ws, rows, pcols, nb, mode);
}
// At most 64 registers (four blocks per SM, no spills; 68 without the
// bound): on an H200, A16 batch 16, 14336x4096 took 17.5 us against 21.1
// and 8192x8192 19.8 against 20.7.
extern "C" __global__ void __launch_bounds__(32 * WARPS, 4) q4g128_mma_n16(const uint4 *W, const float *S, const uint8_t *Z, const uint2 *xr, float *y, float *ws, i64 rows, i64 pcols, i64 nb, i64 mode) { PDL_ENTRY();
	q4mma<2>(W, S, Z, xr, y, ws, rows, pcols, nb, mode);
}


// Bits(n, g) with binary16 activations on tensor cores (sm_80+), for
// n = 8, 4, 2 and groups of at least 128 columns. A step is one chunk of
// E = 32*32/n columns (128 bytes of a row); lane (g, t) loads words
// 8t..8t+7 of the chunk for rows g and g+8. Each word is split into one
// k-step (4 codes per row) for each 128-column block q < E/128 of the
// chunk: codes become exact binary16 integers by the 0x6400 magic (after
// a byte permute that keeps each binary16 pair inside one block), the
// products q*x are exact and add up in float32 per block, and each block
// ends as s*sum(q*x) - m*sum(x) in float32 (xsum: the block sums of the
// activations, so fractional zeros and offsets work). xr holds the
// activations in the order a warp reads them (256 contiguous bytes per
// fragment load): for chunk k, word jj, block q, vector v < 8*NT and lane
// column t, the uint2 at (((k*8 + jj)*GPC + q)*8*NT + v)*4 + t holds the
// four columns of the k-step's two pairs in word 8t+jj.
// The blocks' scales, offsets and activation sums come from metaLoad
// (early, with the weights) or bitsMeta (after the products).
#if __CUDA_ARCH__ >= 800
template <int N>
__device__ __forceinline__ void bitsPairs(uint32_t w, int q, uint32_t &pa, uint32_t &pb) {
	const __half2 k1024 = __float2half2_rn(1024.0f);
	if (N == 8) { // bytes b0..b3 = planes 3..0
		pa = h2u(__hsub2(u2h(__byte_perm(w, 0x64646464u, 0x5140)), k1024));
		pb = h2u(__hsub2(u2h(__byte_perm(w, 0x64646464u, 0x7362)), k1024));
	} else if (N == 4) { // bytes [B0, B2, B1, B3]: halves (B0|B2, B1|B3)
		uint32_t v = __byte_perm(w, 0, 0x3120) >> (q == 0 ? 8 : 0);
		pa = h2u(__hsub2(u2h(lop3and_or(v, 0x000F000Fu, 0x64006400u)), k1024));
		pb = h2u(__hfma2(u2h(lop3and_or(v, 0x00F000F0u, 0x64006400u)), __float2half2_rn(0.0625f), __float2half2_rn(-64.0f)));
	} else { // N == 2: byte 3-q of w and of w >> 4 in the two halves
		uint32_t sel = (uint32_t)(3 - q) | (uint32_t)(7 - q) << 8;
		uint32_t v = __byte_perm(w, w >> 4, sel);
		pa = h2u(__hsub2(u2h(lop3and_or(v, 0x00030003u, 0x64006400u)), k1024));
		pb = h2u(__hfma2(u2h(lop3and_or(v, 0x000C000Cu, 0x64006400u)), __float2half2_rn(0.25f), __float2half2_rn(-256.0f)));
	}
}
#endif

// bitsMeta loads block blk's scale and offset of rows r0 and r1 and the
// activation sums of the lane's fragment columns (each lane its own).
template <int NT>
__device__ __forceinline__ void bitsMeta(const float *S, const float *M, const float *xsum, i64 blk, i64 lg, i64 prows, i64 nblk, i64 r0, i64 r1, int t, i64 nb, float (&ms)[2], float (&mm)[2], float (&mx)[NT][2]) {
	i64 gi = ((blk * 128) >> lg) * prows;
	ms[0] = __ldg(S + gi + r0);
	mm[0] = __ldg(M + gi + r0);
	ms[1] = __ldg(S + gi + r1);
	mm[1] = __ldg(M + gi + r1);
#pragma unroll
	for (int n = 0; n < NT; n++) {
		i64 v0 = n * 8 + 2 * t;
		mx[n][0] = v0 < nb ? __ldg(xsum + v0 * nblk + blk) : 0;
		mx[n][1] = v0 + 1 < nb ? __ldg(xsum + (v0 + 1) * nblk + blk) : 0;
	}
}

// Early metadata: a chunk's scales and offsets of the block's 16 rows
// (16*GPC values each) and the activation sums of its 8*NT fragment
// columns (8*NT*GPC) are loaded once per warp, one value per lane, in
// the same breath as the weights (value i in register i/32 of lane
// i%32), and each lane takes its own with shuffles after the products.
// Loaded after the products instead, they cost a second memory latency
// per chunk; loaded per lane before them, too many registers.
template <int GPC, int NT>
struct metaLanes {
	static const int S0 = 0, M0 = 16 * GPC, X0 = 32 * GPC, NV = 32 * GPC + 8 * NT * GPC, MV = (NV + 31) / 32;
};

// metaLoad loads chunk k's metadata into the lanes' mv (rows rb..rb+15).
template <int GPC, int NT>
__device__ __forceinline__ void metaLoad(float (&mv)[metaLanes<GPC, NT>::MV], const float *S, const float *M, const float *xsum, i64 k, i64 lg, i64 prows, i64 nblk, i64 rb, i64 nb) {
	typedef metaLanes<GPC, NT> L;
	int lane = threadIdx.x & 31;
#pragma unroll
	for (int i = 0; i < L::MV; i++) {
		int idx = i * 32 + lane;
		float v = 0;
		if (idx < L::X0) {
			int j = idx < L::M0 ? idx : idx - L::M0, q = j >> 4;
			i64 gi = (((k * GPC + q) * 128) >> lg) * prows + rb + (j & 15);
			v = __ldg((idx < L::M0 ? S : M) + gi);
		} else if (idx < L::NV) {
			int j = idx - L::X0, q = j / (8 * NT), vv = j % (8 * NT);
			if (vv < nb) v = __ldg(xsum + vv * nblk + k * GPC + q);
		}
		mv[i] = v;
	}
}

// metaTake gives lane (g, t) its block-q values from mv (metaLoad).
template <int GPC, int NT>
__device__ __forceinline__ void metaTake(const float (&mv)[metaLanes<GPC, NT>::MV], int q, int g, int t, float (&ms)[2], float (&mm)[2], float (&mx)[NT][2]) {
	typedef metaLanes<GPC, NT> L;
	const int is = L::S0 + q * 16, im = L::M0 + q * 16, ix = L::X0 + q * 8 * NT;
	ms[0] = __shfl_sync(FULL, mv[is / 32], is % 32 + g);
	ms[1] = __shfl_sync(FULL, mv[is / 32], is % 32 + g + 8);
	mm[0] = __shfl_sync(FULL, mv[im / 32], im % 32 + g);
	mm[1] = __shfl_sync(FULL, mv[im / 32], im % 32 + g + 8);
#pragma unroll
	for (int n = 0; n < NT; n++) {
		mx[n][0] = __shfl_sync(FULL, mv[(ix + n * 8) / 32], (ix + n * 8) % 32 + 2 * t);
		mx[n][1] = __shfl_sync(FULL, mv[(ix + n * 8) / 32], (ix + n * 8) % 32 + 2 * t + 1);
	}
}

template <int N, int NT, bool EARLY>
__device__ __forceinline__ void bitsmma(const uint4 *W, const float *S, const float *M, const uint2 *xr, const float *xsum, float *y, float *ws, i64 rows, i64 prows, i64 pcols, i64 lg, i64 nb, i64 mode) {
#if __CUDA_ARCH__ >= 800
	const int E = 32 * (32 / N), GPC = E / 128;
	__shared__ float red[WARPS][NT * 4][32];
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
	int g = lane >> 2, t = lane & 3;
	i64 r0 = (i64)blockIdx.x * 16 + g, r1 = r0 + 8; // padded rows exist (PRows % 16 == 0)
	i64 chunks = pcols / E, units = chunks * 8, nblk = pcols / 128;
	i64 per = (chunks + gridDim.y - 1) / gridDim.y;
	i64 k0 = blockIdx.y * per, k1 = min(chunks, k0 + per);
	const uint4 *W0 = W + r0 * units + 2 * t, *W1 = W + r1 * units + 2 * t;
	float acc[NT][4];
#pragma unroll
	for (int n = 0; n < NT; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) acc[n][e] = 0;
	// UNR chunks in flight (2*UNR loads of 16 bytes per lane and row): two
	// for the 16-vector Bits8 and Bits2 kernels, one for the others, where
	// the extra registers cost more occupancy than the loads gain. On an
	// H200 (A16 batch 16) one took Bits4 from 19.0-23.2 to 18.2-22.3 us on
	// the three shapes, and Bits2 from 19.5-23.6 to 30.6-33.6.
	const int UNR = NT == 2 && N != 4 ? 2 : 1;
	for (i64 kb = k0 + wp; kb < k1; kb += UNR * WARPS) {
		uint4 wa[UNR][2], wb[UNR][2];
#pragma unroll
		for (int h = 0; h < UNR; h++) {
			i64 k = min(kb + h * WARPS, k1 - 1);
			wa[h][0] = __ldcs(W0 + k * 8);
			wa[h][1] = __ldcs(W0 + k * 8 + 1);
			wb[h][0] = __ldcs(W1 + k * 8);
			wb[h][1] = __ldcs(W1 + k * 8 + 1);
		}
#pragma unroll
		for (int h = 0; h < UNR; h++) {
			i64 k = kb + h * WARPS;
			if (k >= k1) break;
			float c[GPC][NT][4];
#pragma unroll
			for (int q = 0; q < GPC; q++)
#pragma unroll
				for (int n = 0; n < NT; n++)
#pragma unroll
					for (int e = 0; e < 4; e++) c[q][n][e] = 0;
			float ms[GPC][2], mm[GPC][2], mx[GPC][NT][2];
			float mv[metaLanes<GPC, NT>::MV];
			if (EARLY) metaLoad<GPC, NT>(mv, S, M, xsum, k, lg, prows, nblk, (i64)blockIdx.x * 16, nb);
			const uint2 *xk = xr + k * 8 * GPC * (8 * NT) * 4 + g * 4 + t;
#pragma unroll
			for (int jj = 0; jj < 8; jj++) {
				uint4 va = wa[h][jj >> 2], vb = wb[h][jj >> 2];
				uint32_t a = (jj & 3) == 0 ? va.x : (jj & 3) == 1 ? va.y : (jj & 3) == 2 ? va.z : va.w;
				uint32_t b = (jj & 3) == 0 ? vb.x : (jj & 3) == 1 ? vb.y : (jj & 3) == 2 ? vb.z : vb.w;
#pragma unroll
				for (int q = 0; q < GPC; q++) {
					uint32_t A0, A1, A2, A3;
					bitsPairs<N>(a, q, A0, A2);
					bitsPairs<N>(b, q, A1, A3);
#pragma unroll
					for (int n = 0; n < NT; n++) {
						uint2 xv = n * 8 + g < nb ? __ldg(xk + ((jj * GPC + q) * (8 * NT) + n * 8) * 4) : make_uint2(0, 0);
						mma16816(c[q][n], A0, A1, A2, A3, xv.x, xv.y);
					}
				}
			}
#pragma unroll
			for (int q = 0; q < GPC; q++) {
				if (EARLY)
					metaTake<GPC, NT>(mv, q, g, t, ms[q], mm[q], mx[q]);
				else
					bitsMeta<NT>(S, M, xsum, k * GPC + q, lg, prows, nblk, r0, r1, t, nb, ms[q], mm[q], mx[q]);
#pragma unroll
				for (int n = 0; n < NT; n++) {
					acc[n][0] += fmaf(ms[q][0], c[q][n][0], -mm[q][0] * mx[q][n][0]);
					acc[n][1] += fmaf(ms[q][0], c[q][n][1], -mm[q][0] * mx[q][n][1]);
					acc[n][2] += fmaf(ms[q][1], c[q][n][2], -mm[q][1] * mx[q][n][0]);
					acc[n][3] += fmaf(ms[q][1], c[q][n][3], -mm[q][1] * mx[q][n][1]);
				}
			}
		}
	}
	mmaStore<NT>(acc, red, r0, y, ws, rows, nb, mode);
#else
	asm volatile("trap;"); // the host runs these only on sm_80 and later
#endif
}

// MINB16_<n>: the minimum blocks per SM asked of bits<n>_mma_n16. ", 4"
// holds Bits8 to 64 registers (a 64-byte spill; four blocks per SM
// instead of three): on an H200, A16 batch 16, 8192x8192 took 26.2 us
// against 32.3. Bits4 and Bits2 spill far more at 64 registers and keep
// the compiler's choice (asking for one block lets it take 180-209).
#define MINB16_8 , 4
#define MINB16_4
#define MINB16_2
// EARLY16_<n>: whether bits<n>_mma_n16 loads its metadata early (see
// metaLanes; the 8-vector kernels always do). On an H200, A16, early
// metadata took the 8-vector Bits4 kernel from 17.0-20.0 to 14.2-15.7 us
// on the three shapes and Bits2 from 15.1-16.4 to 13.5-15.7; at batch 16
// Bits8 from 26.4-27.3 to 23.9-24.6 and Bits4 from 23.8-29.4 to
// 18.8-23.1, while Bits2 went from 19.6-23.7 to 26.0-29.3 (more
// registers) and keeps the late loads.
#define EARLY16_8 true
#define EARLY16_4 true
#define EARLY16_2 false
#define BITSMMA(N)                                                                                                                                                                                                      \
	extern "C" __global__ void __launch_bounds__(32 * WARPS) bits##N##_mma_n8(const uint4 *W, const float *S, const float *M, const uint2 *xr, const float *xsum, float *y, float *ws, i64 rows, i64 prows, i64 pcols, i64 lg, i64 nb, i64 mode) { PDL_ENTRY();  \
		bitsmma<N, 1, true>(W, S, M, xr, xsum, y, ws, rows, prows, pcols, lg, nb, mode);                                                                                                                                 \
	}                                                                                                                                                                                                                  \
	extern "C" __global__ void __launch_bounds__(32 * WARPS MINB16_##N) bits##N##_mma_n16(const uint4 *W, const float *S, const float *M, const uint2 *xr, const float *xsum, float *y, float *ws, i64 rows, i64 prows, i64 pcols, i64 lg, i64 nb, i64 mode) { PDL_ENTRY(); \
		bitsmma<N, 2, EARLY16_##N>(W, S, M, xr, xsum, y, ws, rows, prows, pcols, lg, nb, mode);                                                                                                                                 \
	}
BITSMMA(8)
BITSMMA(4)
BITSMMA(2)

// splitReduce sums the SplitK partials in split order (deterministic).
extern "C" __global__ void split_reduce(float *y, const float *ws, i64 n, i64 splits) { PDL_ENTRY();
	i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float s = 0;
	for (i64 k = 0; k < splits; k++) s += ws[k * n + i];
	y[i] = s;
}

// ---------------------------------------------------------------- Q4G128

// Ordered accumulation of the terms held by lanes 0, 4, ..., 28 (the
// first lane of each group of 4): every lane ends with the same acc.
__device__ __forceinline__ float addTerms(float acc, float term, int stride, int count) {
	for (int j = 0; j < count; j++) acc = __fadd_rn(acc, __shfl_sync(FULL, term, j * stride));
	return acc;
}

// Q4G128, int8 activations (W4A8), bit-exact. xq is the int8 activation
// vector with every 8 columns reordered to (0,2,4,6,1,3,5,7), so that the
// low and high nibbles of a weight word meet their activations in one
// dp4a each; xs the per-group scales, sx the per-group int32 sums of xq.
// One row per warp; each step covers 1024 columns (8 groups).
extern "C" __global__ void __launch_bounds__(32 * WARPS) q4g128_a8(const uint4 *W, const float *S, const uint8_t *Z, const int4 *xq, const float *xs, const int *sx, float *y, i64 rows, i64 pcols, i64 nb) { PDL_ENTRY();
	int lane = threadIdx.x & 31;
	i64 row = (i64)blockIdx.x * WARPS + (threadIdx.x >> 5);
	if (row >= rows) return;
	i64 units = pcols / 32, groups = pcols / 128;
	float acc[MAXB];
#pragma unroll
	for (int b = 0; b < MAXB; b++) acc[b] = 0;
	for (i64 base = 0; base < units; base += 32) {
		i64 u = base + lane;
		bool ok = u < units;
		uint4 w = ok ? __ldcs(W + row * units + u) : make_uint4(0, 0, 0, 0);
		i64 g = u >> 2;
		i64 mi = ((row >> 7) * groups + min(g, groups - 1)) * 128 + (row & 127);
		float s = __ldg(S + mi);
		uint32_t zb = __ldg(Z + (mi >> 1));
		int z = (mi & 1) ? zb >> 4 : zb & 15;
		uint32_t lo[4] = {w.x & 0x0F0F0F0Fu, w.y & 0x0F0F0F0Fu, w.z & 0x0F0F0F0Fu, w.w & 0x0F0F0F0Fu};
		uint32_t hi[4] = {(w.x >> 4) & 0x0F0F0F0Fu, (w.y >> 4) & 0x0F0F0F0Fu, (w.z >> 4) & 0x0F0F0F0Fu, (w.w >> 4) & 0x0F0F0F0Fu};
		int count = (int)min((i64)8, (units - base + 3) / 4);
#pragma unroll
		for (int b = 0; b < MAXB; b++) {
			if (b >= nb) break;
			int dot = 0;
			if (ok) {
				// 32 columns = 2 int4 of reordered activations
				int4 a0 = __ldg(xq + (b * pcols + u * 32) / 16), a1 = __ldg(xq + (b * pcols + u * 32) / 16 + 1);
				dot = __dp4a((int)lo[0], a0.x, dot);
				dot = __dp4a((int)hi[0], a0.y, dot);
				dot = __dp4a((int)lo[1], a0.z, dot);
				dot = __dp4a((int)hi[1], a0.w, dot);
				dot = __dp4a((int)lo[2], a1.x, dot);
				dot = __dp4a((int)hi[2], a1.y, dot);
				dot = __dp4a((int)lo[3], a1.z, dot);
				dot = __dp4a((int)hi[3], a1.w, dot);
			}
			dot += __shfl_xor_sync(FULL, dot, 1);
			dot += __shfl_xor_sync(FULL, dot, 2);
			float term = 0;
			if (ok) {
				int isum = dot - z * __ldg(sx + b * groups + g);
				float f = __fmul_rn(s, __ldg(xs + b * groups + g));
				term = __fmul_rn(f, (float)isum);
			}
			acc[b] = addTerms(acc[b], term, 4, count);
		}
	}
	if (lane == 0)
#pragma unroll
		for (int b = 0; b < MAXB; b++)
			if (b < nb) y[b * rows + row] = acc[b];
}

// ---------------------------------------------------------------- Bits

// dp4aus is dp4a with unsigned bytes in a (8-bit codes) and signed bytes
// in b.
__device__ __forceinline__ int dp4aus(int a, int b, int c) {
	int d;
	asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}

// pack4 gathers code i of four words (4 consecutive columns) into the
// bytes of one word for dp4a.
template <int N>
__device__ __forceinline__ int pack4(uint4 w, int sh) {
	const uint32_t MASK = (1u << N) - 1;
	uint32_t a = __byte_perm(w.x >> sh, w.y >> sh, 0x0040), b = __byte_perm(w.z >> sh, w.w >> sh, 0x0040);
	return (int)(__byte_perm(a, b, 0x5410) & (MASK * 0x01010101u));
}

// Bits(n, g), int8 activations, bit-exact: blocks of BLK = min(G, 128)
// columns; one row per warp. A warp step covers 4 chunks = 128*STEP
// columns, a whole number of blocks, so blocks never straddle steps. Each
// lane adds its 4-column dot products per block into shared memory
// (integer atomics: exact in any order), then the warp turns the step's
// blocks into float terms and adds them in order. sx holds the int32
// sums of xq per block, xs the activation scales per 128 columns, Zi the
// integer zero points, S the scales (group major).
template <int N>
__device__ void bitsa8(const uint4 *W, const float *S, const int *Zi, const int *xq, const float *xs, const int *sx, float *y, i64 rows, i64 prows, i64 pcols, i64 lg, i64 nb) {
	const int STEP = 32 / N, E = 32 * STEP, SPAN = 4 * E;
	__shared__ int sblk[WARPS_A8][MAXB][128];
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
	i64 row = (i64)blockIdx.x * WARPS_A8 + wp;
	if (row >= rows) return;
	int lb2 = lg >= 7 ? 7 : (int)lg;
	i64 blk = (i64)1 << lb2, nblk = pcols / blk;
	int bps = (int)(SPAN / blk); // blocks per step (<= 128)
	i64 units = pcols / E * 8;
	float acc[MAXB];
#pragma unroll
	for (int b = 0; b < MAXB; b++) acc[b] = 0;
	for (i64 base = 0; base < units; base += 32) {
		for (int j = lane; j < bps; j += 32)
#pragma unroll
			for (int b = 0; b < MAXB; b++) sblk[wp][b][j] = 0;
		__syncwarp();
		i64 u = base + lane;
		if (u < units) {
			i64 k = u >> 3, t0 = (u & 7) * 4;
			uint4 w = __ldcs(W + row * units + u);
#pragma unroll 4
			for (int i = 0; i < STEP; i++) {
				int p = pack4<N>(w, 32 - N * (i + 1));
				i64 c = k * E + i * 32 + t0;
				int lb = (int)((c - base / 8 * E) >> lb2);
#pragma unroll
				for (int b = 0; b < MAXB; b++) {
					if (b >= nb) break;
					int d = dp4aus(p, __ldg(xq + (b * pcols + c) / 4), 0);
					atomicAdd(&sblk[wp][b][lb], d);
				}
			}
		}
		__syncwarp();
		i64 b0 = base / 8 * E / blk; // first block of this step
		int count = (int)min((i64)bps, nblk - b0);
		for (int j0 = 0; j0 < count; j0 += 32) {
			int j = j0 + lane;
			i64 bi = b0 + j;
			i64 c0 = bi * blk, g = c0 >> lg, a = c0 / 128;
			i64 mi = g * prows + row;
			float s = j < count ? __ldg(S + mi) : 0;
			int z = j < count ? __ldg(Zi + mi) : 0;
#pragma unroll
			for (int b = 0; b < MAXB; b++) {
				if (b >= nb) break;
				float term = 0;
				if (j < count) {
					int isum = sblk[wp][b][j] - z * __ldg(sx + b * nblk + bi);
					term = __fmul_rn(__fmul_rn(s, __ldg(xs + b * (pcols / 128) + a)), (float)isum);
				}
				acc[b] = addTerms(acc[b], term, 1, min(32, count - j0));
			}
		}
		__syncwarp();
	}
	if (lane == 0)
#pragma unroll
		for (int b = 0; b < MAXB; b++)
			if (b < nb) y[b * rows + row] = acc[b];
}

#define BITSA8(N)                                                                                                                                                                       \
	extern "C" __global__ void __launch_bounds__(32 * WARPS_A8) bits##N##_a8(const uint4 *W, const float *S, const int *Zi, const int *xq, const float *xs, const int *sx, float *y, i64 rows, i64 prows, i64 pcols, i64 lg, i64 nb) { PDL_ENTRY(); \
		bitsa8<N>(W, S, Zi, xq, xs, sx, y, rows, prows, pcols, lg, nb);                                                                                                              \
	}
BITSA8(8)
BITSA8(4)
BITSA8(3)
BITSA8(2)
BITSA8(1)

// ---------------------------------------------------------------- A8 on tensor cores

// Q4G128 and Bits(n, g) (n = 8, 4, 2, g >= 128) with int8 activations on
// the int8 tensor cores (sm_80+), bit-exact: mma.m16n8k32 multiplies
// unsigned codes by signed activations into exact int32 block sums, and
// the float combination is layout's, block terms added in block order.
// A block of 8 warps computes 16 rows; a step is one 128-column group
// (Q4G128) or one 128-byte chunk of E = 32*32/n columns (Bits: GPC = E/128
// blocks of 128 columns). Lane (g, t) loads 16 (Q4G128: columns
// 32t..32t+31) or 32 bytes (Bits: words 8t..8t+7) of rows g and g+8 per
// step and turns them into a-fragments (a8Frag): 4 k-steps of 32 codes
// per block and row, the codes of one k-step always inside one block.
// The K order inside a block is free as long as the activations follow
// it: position 32t + 8s + b of a block (in a vector's fragment order)
// holds the column that byte b of lane t's k-step s multiplies
// (gpuhost.A8FragOrder; for Q4G128 that is a8_q4order's arrangement).
// xf holds the activations block by block in the order the lanes load
// them (a8XR): for block blk and vector v < 8*NT, position p's byte at
// blk*128*8*NT + (v/8)*1024 + ((p/16)%2)*512 + (v%8)*64 + (p/32)*16 +
// p%16, so each of a warp's 16-byte loads of 8 vectors' half-blocks
// reads 512 contiguous bytes (in the vector-major order each load took
// 32 sectors for 512 bytes: on an H200, batch 16, the kernels took
// 0.88-0.95x the time the contiguous way); xm holds, per 128-column block and
// vector v < 8*NT, the activation scale's bits and the block's int32
// activation sum (a8_prep). A round is WARPS*SPW consecutive steps (warp
// wp takes step wp, and for Q4G128 a second one: a8Step): each lane turns its
// int32 sums into float terms s*xs*(sum - z*sx) in shared memory, one
// barrier, then thread i adds the round's terms of its (row, vector) in
// block order. The next round's weights are loaded before the products
// of the current one (two term buffers where they fit, so one barrier
// per round).
//
// A8MMA_MINB: blocks per SM the register budget must allow. Two: on an
// H200 three or four made the compiler spill (Bits) and were slower on
// most shapes.
#ifndef A8MMA_MINB
#define A8MMA_MINB 2
#endif

#if __CUDA_ARCH__ >= 800
__device__ __forceinline__ void mmaI8(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
	asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
		     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
		     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t u4at(uint4 w, int i) { return i == 0 ? w.x : i == 1 ? w.y : i == 2 ? w.z : w.w; }

// a8Frag returns one a-fragment register of a row: 4 codes of block q
// for k-step s, half 0 (a0/a1) or 1 (a2/a3), from the lane's words w
// (Q4G128: w[0], 32 nibbles; Bits: w[0..1], words 8t..8t+7).
template <int N>
__device__ __forceinline__ uint32_t a8Frag(const uint4 (&w)[2], int q, int s, int half) {
	const uint32_t M4 = 0x0F0F0F0Fu;
	if (N == 0) { // word s: even columns in the low nibbles, odd in the high
		uint32_t v = u4at(w[0], s);
		return half ? (v >> 4) & M4 : v & M4;
	}
	if (N == 8) { // word 2s+half: bytes = planes 3..0
		int j = 2 * s + half;
		return u4at(w[j >> 2], j & 3);
	}
	if (N == 4) { // word 2s+half: planes [3,1,2,0] (q = 0) or [7,5,6,4] (q = 1)
		int j = 2 * s + half;
		uint32_t v = u4at(w[j >> 2], j & 3);
		return __byte_perm(v & M4, (v >> 4) & M4, q == 0 ? 0x7632 : 0x5410);
	}
	// N == 2: byte 3-q of words 4h..4h+3 (h = s/2) gathered, then the
	// 2-bit field f = 2(s%2) + half of each: plane 4q + 3 - f
	int h = s >> 1, f = 2 * (s & 1) + half;
	uint32_t w0 = u4at(w[h], 0), w1 = u4at(w[h], 1), w2 = u4at(w[h], 2), w3 = u4at(w[h], 3);
	uint32_t a = __byte_perm(w0, w1, q < 2 ? 0x6273 : 0x4051), c = __byte_perm(w2, w3, q < 2 ? 0x6273 : 0x4051);
	uint32_t r = __byte_perm(a, c, (q & 1) ? 0x7632 : 0x5410);
	return (r >> (2 * f)) & 0x03030303u;
}
#endif

#if __CUDA_ARCH__ >= 800
// a8Step is the step of a round that warp wp takes as its h-th: h*WARPS +
// wp, or with ADJ (the persistent kernels) wp*SPW + h, a warp's steps
// adjacent (on an H200, Q4G128 14336x4096 took 0.98-0.99x the time at
// batches 1-16 that way; the one-tile kernel on 4096x14336 1.01x).
template <int SPW, bool ADJ>
__device__ __forceinline__ int a8Step(int h, int wp) { return ADJ ? wp * SPW + h : h * WARPS + wp; }

// a8Load loads round R's weights of the lane: step R*RS + a8Step(h, wp)
// (the last step past the end) of rows r0 and r1 for each h < SPW.
// Q4G128's 16-byte loads ask L2 for the whole 256-byte block (ldW, as
// q4mma): on an H200 batch 1 took 0.98-0.99x the time on every shape.
template <int N, int SPW, int UPS, bool ADJ, typename IX>
__device__ __forceinline__ void a8Load(uint4 (&w)[SPW][2][2], const uint4 *W0, const uint4 *W1, IX R, int wp, IX steps) {
#pragma unroll
	for (int h = 0; h < SPW; h++) {
		IX k = min(R * (WARPS * SPW) + a8Step<SPW, ADJ>(h, wp), steps - 1);
		w[h][0][0] = N == 0 ? ldW(W0 + k * UPS) : __ldcs(W0 + k * UPS);
		w[h][1][0] = N == 0 ? ldW(W1 + k * UPS) : __ldcs(W1 + k * UPS);
		w[h][0][1] = N != 0 ? __ldcs(W0 + k * UPS + 1) : make_uint4(0, 0, 0, 0);
		w[h][1][1] = N != 0 ? __ldcs(W1 + k * UPS + 1) : make_uint4(0, 0, 0, 0);
	}
}

// a8Rows locates the metadata of a tile's rows r0 and r1 = r0 + 8 once
// per tile (a8RowsOf; the LEAN kernels, see a8mma): Q4G128 keeps a
// 128-row super tile's scales block by block (row r0's of block 0 at
// S[m], r1's at S[m + 8], block b 128 floats on) and their zero nibbles
// two to a byte (at shift zs: r0's parity); Bits keeps groups of prows
// values (m = r0).
struct a8Rows {
	i64 m;
	int zs;
};

template <int N>
__device__ __forceinline__ a8Rows a8RowsOf(i64 r0, i64 nblk) {
	if (N == 0) {
		i64 m = (r0 >> 7) * nblk * 128 + (r0 & 127);
		return a8Rows{m, (int)(m & 1) * 4};
	}
	return a8Rows{r0, 0};
}

// a8Meta loads block blk's scale and zero of rows r0 and r1 = r0 + 8:
// with LEAN from a8Rows m, else from r0.
template <int N, bool LEAN>
__device__ __forceinline__ void a8Meta(const float *S, const void *Zp, a8Rows m, i64 blk, i64 r0, i64 nblk, i64 prows, i64 lg, float &s0, float &s1, int &z0, int &z1) {
	if (N == 0 && LEAN) {
		const float *Sb = S + m.m + (int)blk * 128;
		const uint8_t *Z = (const uint8_t *)Zp + (m.m >> 1) + (int)blk * 64;
		s0 = __ldg(Sb);
		s1 = __ldg(Sb + 8);
		z0 = (__ldg(Z) >> m.zs) & 15;
		z1 = (__ldg(Z + 4) >> m.zs) & 15;
	} else if (N == 0) {
		const uint8_t *Z = (const uint8_t *)Zp;
		i64 m0 = ((r0 >> 7) * nblk + blk) * 128 + (r0 & 127), m1 = m0 + 8;
		s0 = __ldg(S + m0);
		s1 = __ldg(S + m1);
		uint32_t zb0 = __ldg(Z + (m0 >> 1)), zb1 = __ldg(Z + (m1 >> 1));
		z0 = (m0 & 1) ? zb0 >> 4 : zb0 & 15;
		z1 = (m1 & 1) ? zb1 >> 4 : zb1 & 15;
	} else {
		const int *Zi = (const int *)Zp;
		if constexpr (LEAN) {
			i64 gi = m.m + (i64)(((int)blk * 128) >> (int)lg) * prows;
			s0 = __ldg(S + gi);
			s1 = __ldg(S + gi + 8);
			z0 = __ldg(Zi + gi);
			z1 = __ldg(Zi + gi + 8);
		} else {
			i64 gi = ((blk * 128) >> lg) * prows, r1 = r0 + 8;
			s0 = __ldg(S + gi + r0);
			s1 = __ldg(S + gi + r1);
			z0 = __ldg(Zi + gi + r0);
			z1 = __ldg(Zi + gi + r1);
		}
	}
}

// a8Metas is a8Meta for every block of step k.
template <int N, bool LEAN, int GPC>
__device__ __forceinline__ void a8Metas(const float *S, const void *Zp, a8Rows m, i64 k, i64 r0, i64 nblk, i64 prows, i64 lg, float (&s0)[GPC], float (&s1)[GPC], int (&z0)[GPC], int (&z1)[GPC]) {
#pragma unroll
	for (int q = 0; q < GPC; q++) a8Meta<N, LEAN>(S, Zp, m, k * GPC + q, r0, nblk, prows, lg, s0[q], s1[q], z0[q], z1[q]);
}

// pick<B, T, F>::type is T if B, else F.
template <bool B, typename T, typename F>
struct pick {
	typedef T type;
};
template <typename T, typename F>
struct pick<false, T, F> {
	typedef F type;
};
#endif

template <int N, int NT, bool P, int Q4SPW>
__device__ __forceinline__ void a8mma(const uint4 *W, const float *S, const void *Zp, const uint4 *xf, const int4 *xm, float *y, i64 rows, i64 prows, i64 pcols, i64 lg, i64 nb) {
#if __CUDA_ARCH__ >= 800
	const int E = N == 0 ? 128 : 32 * (32 / N), GPC = E / 128, UPS = N == 0 ? 4 : 8;
	// SPW: steps per warp and round. Two for Q4G128 (16 bytes a row per
	// step; Q4SPW = 1 for the _s kernels and the 16-vector _p one); one
	// for Bits, whose steps load 32 (on an H200 two took Bits8 from 20.9
	// to 25.1 us at batch 1 on 14336x4096 and Bits4 did not gain).
	const int SPW = N == 0 ? Q4SPW : 1, RS = WARPS * SPW, RB = RS * GPC, NV = 8 * NT;
	const int NBUF = 2 * RB * 16 * NV * 4 <= 32 * 1024 ? 2 : 1;
	// A step's terms: the four of lane (g, t) and vector pair n (rows g
	// and g + 8, vectors n*8 + 2t and + 1) as one float4, slot (t*NT +
	// n)*8 + (g ^ 2t) (the xor puts a store phase's eight lanes on eight
	// bank groups); thread i adds its row i%16 and vector (i/16)%2 of pair
	// i/32 of every step, so the reads are conflict-free and a warp's
	// results two runs of 16 rows. Row-major [16][NV] terms took four
	// shared-memory wavefronts per scalar store.
	const int C = 4 * NT;
	__shared__ __align__(16) float tb[NBUF][RB][32 * C];
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
	// LEAN: 32-bit step and tile counters (ix), and each lane's activation
	// and metadata addresses set up once per tile rather than per step
	// (xfl, xml, mr). On an H200: the Q4G128 persistent and one-step
	// kernels 0.95-0.98x the time, Bits4 0.94-0.97x (level on 4096x14336
	// at up to 8 vectors), Bits2 up to 8 vectors 0.91-0.98x; but the
	// Q4G128 two-step one-tile kernel took 1.12-1.14x at batch 1 and 4,
	// the 16-vector Bits2 kernels spilled (1.05-1.18x), Bits8's _s kernel
	// too (1.11x) and its others were level, so those stay as they were;
	// since the activations' contiguous placement (a8XR) Bits8's 16-vector
	// kernel takes 0.98-0.99x the time LEAN.
	const bool LEAN = N == 0 ? P || Q4SPW == 1 : N == 4 || (N == 2 && NT == 1) || (N == 8 && NT == 2);
	typedef typename pick<LEAN, int, i64>::type ix;
	ix steps = pcols / E, nblk = pcols / 128;
	i64 units = (i64)steps * UPS;
	ix lo = N == 0 ? t : 2 * t;
	int arow = threadIdx.x & 15, ap = threadIdx.x >> 5, ae = threadIdx.x >> 4 & 1, av = ap % NT * 8 + 2 * (ap / NT) + ae;
	int aw = (ap * 8 + ((arow & 7) ^ 2 * (ap / NT))) * 4 + (arow >> 3) * 2 + ae; // its word
	// The block computes the 16-row tile blockIdx.x (padded rows exist:
	// PRows % 16 == 0); with P (the ..._p kernels, launched on fewer
	// blocks than tiles) a run of consecutive tiles, mine of them, as one
	// pipeline of rounds: the next tile's first round loads during this
	// tile's last, so a tile does not start with a wait for memory.
	// Consecutive rather than strided tiles (blockIdx.x + i*gridDim.x):
	// on an H200, batch 1, Q4G128 took 0.94x the time on 14336x4096 and
	// 0.97x on 8192x8192 (Bits and batch 16 within the rounds' spread).
	ix tiles = (rows + 15) / 16, rounds = (steps + RS - 1) / RS;
	ix mine = 1, tile = blockIdx.x;
	if (P) {
		ix base = tiles / gridDim.x, extra = tiles % gridDim.x;
		mine = base + ((ix)blockIdx.x < extra);
		tile = blockIdx.x * base + min((ix)blockIdx.x, extra);
		if (mine == 0) return;
	}
	ix total = mine * rounds;
	i64 r0 = (i64)tile * 16 + g, r1 = r0 + 8;
	const uint4 *W0 = W + r0 * units + lo, *W1 = W + r1 * units + lo;
	a8Rows mr = a8RowsOf<N>(r0, nblk);
	// the lane's activations: its fragment columns of vector n*8 + g, 16
	// bytes of each half of a block (xf, lane on from xfl; see a8mma's
	// comment) and the scales and sums of vectors n*8 + 2t and + 1 (xm,
	// n*4 on from xml)
	const uint4 *xfl = xf + lane;
	const int4 *xml = xm + t;
	bool xon[NT], mon[NT];
#pragma unroll
	for (int n = 0; n < NT; n++) xon[n] = n * 8 + g < nb, mon[n] = n * 8 + 2 * t < nb;
	float acc = 0;
	// A step's block scales and zeros (a8Meta) and the activations'
	// scales and sums (xm) are loaded before its products, not after:
	// waiting for them after the products left the kernels bound by
	// memory latency (on an H200, batch 1, Bits2G128 took 18-19 us and
	// 13-14 with them early, Q4G128 4096x14336 19.7 and 17.4). The Bits
	// kernels load the scales and zeros a round ahead, with the weights
	// (batch 1 0.88-0.95x the time, batch 16 1.00-1.03x). So do the
	// Q4G128 kernels of up to 8 vectors whose blocks run few rounds per
	// tile (persistent, _p: 14336x4096 batch 1 and 4 0.92x the time)
	// or one step per warp (_s: 8192x8192 0.98x); the two-step one-tile
	// kernel took 1.05-1.07x the time that way on 4096x14336, and the
	// 16-vector ones 1.08-1.20x.
	const bool AHEAD = N != 0 || (NT == 1 && (P || Q4SPW == 1));
	uint4 wc[SPW][2][2];
	float ms0[SPW][GPC], ms1[SPW][GPC]; // the round's scales and zeros (AHEAD)
	int mz0[SPW][GPC], mz1[SPW][GPC];
	if (AHEAD)
#pragma unroll
		for (int h = 0; h < SPW; h++)
			if (a8Step<SPW, P>(h, wp) < steps) a8Metas<N, LEAN, GPC>(S, Zp, mr, a8Step<SPW, P>(h, wp), r0, nblk, prows, lg, ms0[h], ms1[h], mz0[h], mz1[h]);
	a8Load<N, SPW, UPS, P, ix>(wc, W0, W1, 0, wp, steps);
	// Only the matrix's memory is read above (see PDL_ENTRY). On an H200
	// the Q4G128 A8 FFN block took 57.1 against 59.4 us with these loads
	// ahead of the wait, the sum of its three kernels' own times 38.8
	// against 40.8.
	PDL_WAIT();
	ix R = 0;
	for (ix it = 0; it < total; it++) {
		// the next round: R + 1 of this tile, or round 0 of the next one
		// (past the last tile: this tile's last round again, unused)
		ix nR = R + 1, ntile = tile;
		if (P && nR == rounds && it + 1 < total) nR = 0, ntile++;
		i64 nr0 = (i64)ntile * 16 + g, nr1 = nr0 + 8;
		const uint4 *nW0 = W + nr0 * units + lo, *nW1 = W + nr1 * units + lo;
		a8Rows nmr = a8RowsOf<N>(nr0, nblk);
		uint4 wn[SPW][2][2];
		a8Load<N, SPW, UPS, P, ix>(wn, nW0, nW1, nR, wp, steps);
		float ns0[SPW][GPC], ns1[SPW][GPC];
		int nz0[SPW][GPC], nz1[SPW][GPC];
		if (AHEAD)
#pragma unroll
			for (int h = 0; h < SPW; h++) {
				ix k = nR * RS + a8Step<SPW, P>(h, wp);
				if (k < steps) a8Metas<N, LEAN, GPC>(S, Zp, nmr, k, nr0, nblk, prows, lg, ns0[h], ns1[h], nz0[h], nz1[h]);
			}
		int buf = NBUF == 2 ? (int)(it & 1) : 0;
#pragma unroll
		for (int h = 0; h < SPW; h++) {
			ix k = R * RS + a8Step<SPW, P>(h, wp);
			if (k >= steps) break;
			int4 xmv[GPC][NT];
#pragma unroll
			for (int q = 0; q < GPC; q++)
#pragma unroll
				for (int n = 0; n < NT; n++) {
					// xs and sx of vectors n*8 + 2t and + 1
					if constexpr (LEAN) {
						const int4 *xp = xml + (k * GPC + q) * (NV / 2) + n * 4;
						xmv[q][n] = mon[n] ? __ldg(xp) : make_int4(0, 0, 0, 0);
					} else {
						int v = n * 8 + 2 * t;
						xmv[q][n] = v < nb ? __ldg(xm + ((k * GPC + q) * NV + v) / 2) : make_int4(0, 0, 0, 0);
					}
				}
			if (!AHEAD) a8Metas<N, LEAN, GPC>(S, Zp, mr, k, r0, nblk, prows, lg, ms0[h], ms1[h], mz0[h], mz1[h]);
			// The sums start at the bits of 1.5*2^23: a block's sum minus
			// z*sx stays within 2^22 in magnitude (at most 128*255*127),
			// so those bits read as a float are 1.5*2^23 + the sum exactly
			// and one subtraction gives float(sum) (no conversion).
			int c[GPC][NT][4];
#pragma unroll
			for (int q = 0; q < GPC; q++)
#pragma unroll
				for (int n = 0; n < NT; n++)
#pragma unroll
					for (int e = 0; e < 4; e++) c[q][n][e] = 0x4B400000;
#pragma unroll
			for (int q = 0; q < GPC; q++) {
				uint4 xv[NT][2];
#pragma unroll
				for (int n = 0; n < NT; n++) {
					if constexpr (LEAN) {
						const uint4 *xp = xfl + ((k * GPC + q) * NV + n * 8) * 8;
						xv[n][0] = xon[n] ? __ldg(xp) : make_uint4(0, 0, 0, 0);
						xv[n][1] = xon[n] ? __ldg(xp + 32) : make_uint4(0, 0, 0, 0);
					} else {
						const uint4 *xp = xf + lane + ((k * GPC + q) * NV + n * 8) * 8;
						xv[n][0] = n * 8 + g < nb ? __ldg(xp) : make_uint4(0, 0, 0, 0);
						xv[n][1] = n * 8 + g < nb ? __ldg(xp + 32) : make_uint4(0, 0, 0, 0);
					}
				}
#pragma unroll
				for (int s = 0; s < 4; s++) {
					uint32_t A0 = a8Frag<N>(wc[h][0], q, s, 0), A1 = a8Frag<N>(wc[h][1], q, s, 0);
					uint32_t A2 = a8Frag<N>(wc[h][0], q, s, 1), A3 = a8Frag<N>(wc[h][1], q, s, 1);
#pragma unroll
					for (int n = 0; n < NT; n++) {
						uint4 x = xv[n][s >> 1];
						mmaI8(c[q][n], A0, A1, A2, A3, (s & 1) ? x.z : x.x, (s & 1) ? x.w : x.y);
					}
				}
			}
#pragma unroll
			for (int q = 0; q < GPC; q++) {
				int lb = a8Step<SPW, P>(h, wp) * GPC + q;
				float s0 = ms0[h][q], s1 = ms1[h][q];
				int z0 = mz0[h][q], z1 = mz1[h][q];
				// every slot's terms, a missing vector's too (its
				// activations read as zero; never added): on an H200 that
				// took Q4G128 4096x14336 at batch 1 to 0.87x the time of
				// skipping them
#pragma unroll
				for (int n = 0; n < NT; n++) {
					int4 m = xmv[q][n];
					float tv[4];
#pragma unroll
					for (int e = 0; e < 2; e++) {
						float f = __int_as_float(e ? m.z : m.x);
						int sv = e ? m.w : m.y;
						float i0 = __fsub_rn(__int_as_float(c[q][n][e] - z0 * sv), 12582912.0f);
						float i1 = __fsub_rn(__int_as_float(c[q][n][e + 2] - z1 * sv), 12582912.0f);
						tv[e] = __fmul_rn(__fmul_rn(s0, f), i0);
						tv[2 + e] = __fmul_rn(__fmul_rn(s1, f), i1);
					}
					*(float4 *)&tb[buf][lb][((t * NT + n) * 8 + (g ^ 2 * t)) * 4] = make_float4(tv[0], tv[1], tv[2], tv[3]);
				}
			}
		}
		__syncthreads();
		bool aon = threadIdx.x < 16 * NV && av < nb && (i64)tile * 16 + arow < rows;
		if (aon) {
			int count = (int)min((ix)RB, nblk - R * RB);
			if (count == RB) {
#pragma unroll
				for (int j = 0; j < RB; j++) acc = __fadd_rn(acc, tb[buf][j][aw]);
			} else {
				for (int j = 0; j < count; j++) acc = __fadd_rn(acc, tb[buf][j][aw]);
			}
			if (R == rounds - 1) y[av * rows + (i64)tile * 16 + arow] = acc;
		}
		if (R == rounds - 1) acc = 0;
		if (NBUF == 1) __syncthreads();
#pragma unroll
		for (int h = 0; h < SPW; h++) {
#pragma unroll
			for (int r = 0; r < 2; r++) {
				wc[h][r][0] = wn[h][r][0];
				wc[h][r][1] = wn[h][r][1];
			}
			if (AHEAD)
#pragma unroll
				for (int q = 0; q < GPC; q++) ms0[h][q] = ns0[h][q], ms1[h][q] = ns1[h][q], mz0[h][q] = nz0[h][q], mz1[h][q] = nz1[h][q];
		}
		R = nR, tile = ntile, r0 = nr0, r1 = nr1, mr = nmr;
	}
#else
	asm volatile("trap;"); // the host runs these only on sm_80 and later
#endif
}

#define A8MMA_N8(NAME, N, P, SPW, MINB, SFX)                                                                                                                                                               \
	extern "C" __global__ void __launch_bounds__(32 * WARPS, MINB) NAME##_a8mma_n8##SFX(const uint4 *W, const float *S, const void *Z, const uint4 *xf, const int4 *xm, float *y, i64 rows, i64 prows, i64 pcols, i64 lg, i64 nb) { PDL_LAUNCH(); \
		a8mma<N, 1, P, SPW>(W, S, Z, xf, xm, y, rows, prows, pcols, lg, nb);                                                                                                                                    \
	}
#define A8MMA_N16(NAME, N, P, SPW, MINB, SFX)                                                                                                                                                              \
	extern "C" __global__ void __launch_bounds__(32 * WARPS, MINB) NAME##_a8mma_n16##SFX(const uint4 *W, const float *S, const void *Z, const uint4 *xf, const int4 *xm, float *y, i64 rows, i64 prows, i64 pcols, i64 lg, i64 nb) { PDL_LAUNCH(); \
		a8mma<N, 2, P, SPW>(W, S, Z, xf, xm, y, rows, prows, pcols, lg, nb);                                                                                                                                    \
	}
#define A8MMA(NAME, N, P, SPW, MINB, SFX) \
	A8MMA_N8(NAME, N, P, SPW, MINB, SFX)  \
	A8MMA_N16(NAME, N, P, SPW, MINB, SFX)
A8MMA(q4g128, 0, false, 2, A8MMA_MINB, )
A8MMA(bits8, 8, false, 1, A8MMA_MINB, )
A8MMA(bits4, 4, false, 1, A8MMA_MINB, )
A8MMA(bits2, 2, false, 1, A8MMA_MINB, )
// The persistent variants (_p): Bits8 has none (on an H200, 14336x4096
// at batch 1 and 4, its one-tile kernels took 0.91x the time of a
// persistent one).
A8MMA_N8(q4g128, 0, true, 2, A8MMA_MINB, _p)
// The 16-vector persistent Q4G128 kernel takes one step per warp and
// round in registers for four blocks per SM: on an H200, 14336x4096 at
// batch 16 took 19.1 against 19.6 us with two steps at two blocks (with
// the activations' vector-major order, before a8XR, 20.4 against 21.3);
// since the float4 term slots (measured with them in lane order) the two
// are level, 18.78 against 18.79 us.
A8MMA_N16(q4g128, 0, true, 1, 4, _p)
A8MMA(bits4, 4, true, 1, A8MMA_MINB, _p)
A8MMA(bits2, 2, true, 1, A8MMA_MINB, _p)
// Q4G128 with one step per warp and round, in registers for four blocks
// per SM (_s): twice the blocks resident, for launches of about as many
// row tiles as those blocks (one tile each). On an H200, 8192x8192 A8
// took 16.2 against 19.3 us at batch 1 and 20.9 against 22.9 at batch 16
// (A16 14.4 and 19.2); 4096x14336 (half as many tiles) 24.4 against 16.5
// and 14336x4096 (more tiles than blocks) 18.8 against 18.1 us, which
// keep the two-step kernels up to 8 vectors (the 16-vector persistent
// one is one-step, above).
A8MMA(q4g128, 0, false, 1, 4, _s)
// Bits8 in registers for four blocks per SM, up to 8 vectors (_s, the
// same rule): on an H200, 8192x8192 at batch 1 took 19.2 against 24.3 us
// (A16 22.3), 14336x4096 18.9 against 19.9 and 4096x14336 23.3 against
// 22.4; the 16-vector kernel spilled that way (32-47 against 24-28 us).
A8MMA_N8(bits8, 8, false, 1, 4, _s)

// ---------------------------------------------------------------- Sparse12

// Sparse12, int8 activations, bit-exact. xe and xo hold the int8
// activations of the even and odd column of each pair (pair order), so
// the position bits select bytes between two words before the dp4a of
// the codes and the dp4a summing the kept activations: each lane adds
// sum(q*x) - z*sum(x) of its 4 pairs to its block (the zero point
// multiplies kept activations only). Blocks of min(G, 128) columns.
extern "C" __global__ void __launch_bounds__(32 * WARPS) sparse12_a8(const uint4 *W, const float *S, const int *Zi, const int *xe, const int *xo, const float *xs, float *y, i64 rows, i64 prows, i64 pcols, i64 lg, i64 nb) { PDL_ENTRY();
	__shared__ int sblk[WARPS][MAXB][32];
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
	i64 row = (i64)blockIdx.x * WARPS + wp;
	if (row >= rows) return;
	int lb2 = lg >= 7 ? 7 : (int)lg;
	i64 blk = (i64)1 << lb2, nblk = pcols / blk, npairs = pcols / 2;
	int bps = (int)(1024 / blk); // a step covers 4 chunks = 512 pairs = 1024 columns
	i64 units = pcols / 32;
	float acc[MAXB];
#pragma unroll
	for (int b = 0; b < MAXB; b++) acc[b] = 0;
	for (i64 base = 0; base < units; base += 32) {
		for (int j = lane; j < bps; j += 32)
#pragma unroll
			for (int b = 0; b < MAXB; b++) sblk[wp][b][j] = 0;
		__syncwarp();
		i64 u = base + lane;
		if (u < units) {
			i64 k = u >> 3, t0 = (u & 7) * 4;
			uint4 w = __ldcs(W + row * units + u);
#pragma unroll
			for (int i = 0; i < 4; i++) {
				int p8 = pack4<8>(w, 24 - 8 * i);
				int q = p8 & 0x7F7F7F7F;
				uint32_t sel = (uint32_t)((p8 >> 7) & 0x01010101) * 255u;
				i64 p = k * 128 + i * 32 + t0;
				int lb = (int)((2 * p - base * 32) >> lb2);
				int z = __ldg(Zi + ((2 * p) >> lg) * prows + row);
#pragma unroll
				for (int b = 0; b < MAXB; b++) {
					if (b >= nb) break;
					uint32_t e = __ldg(xe + (b * npairs + p) / 4), o = __ldg(xo + (b * npairs + p) / 4);
					int a = (int)((e & ~sel) | (o & sel));
					atomicAdd(&sblk[wp][b][lb], __dp4a(q, a, 0) - z * __dp4a(0x01010101, a, 0));
				}
			}
		}
		__syncwarp();
		i64 b0 = base * 32 / blk;
		int count = (int)min((i64)bps, nblk - b0);
		int j = lane;
		i64 bi = b0 + j;
		i64 c0 = bi * blk, g = c0 >> lg, a = c0 / 128;
		i64 mi = g * prows + row;
		float s = j < count ? __ldg(S + mi) : 0;
#pragma unroll
		for (int b = 0; b < MAXB; b++) {
			if (b >= nb) break;
			float term = 0;
			if (j < count) {
				int isum = sblk[wp][b][j];
				term = __fmul_rn(__fmul_rn(s, __ldg(xs + b * (pcols / 128) + a)), (float)isum);
			}
			acc[b] = addTerms(acc[b], term, 1, count);
		}
		__syncwarp();
	}
	if (lane == 0)
#pragma unroll
		for (int b = 0; b < MAXB; b++)
			if (b < nb) y[b * rows + row] = acc[b];
}

// ---------------------------------------------------------------- utility

// read_bw streams n 16-byte words and writes one checksum per block: the
// backend's own read-bandwidth kernel (the roofline of every benchmark).
extern "C" __global__ void read_bw(const uint4 *p, i64 n, uint32_t *out) { PDL_ENTRY();
	uint32_t s = 0;
	i64 stride = (i64)gridDim.x * blockDim.x, i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	for (; i + 3 * stride < n; i += 4 * stride) { // four loads in flight
		uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
		s ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
	}
	for (; i < n; i += stride) {
		uint4 v = __ldcs(p + i);
		s ^= v.x ^ v.y ^ v.z ^ v.w;
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) s ^= __shfl_xor_sync(FULL, s, o);
	if ((threadIdx.x & 31) == 0) atomicXor(out + blockIdx.x, s);
}

// selftest writes y[i] = x[i]*2 + i: loaded at start-up so that a driver
// that cannot run the embedded PTX fails early with a clear error.
extern "C" __global__ void selftest(const float *x, float *y, i64 n) { PDL_ENTRY();
	i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = x[i] * 2 + (float)i;
}
