// qgemv CUDA kernels for entropy-coded (layout/ans) and plain int8
// matrices multiplied by int8 vectors, exact in int32 (y = W v with
// wrapping int32 arithmetic, as the CPU and layout/ans's DotUnit). go run
// ./gen compiles this file to its own PTX module.
//
// Every kernel parameter is 64 bits wide (pointers and long long).
//
// ANS kernels (ans_rows: one warp per row, 32 coders = 32 lanes; ans_stripes:
// one warp per stripe of 32 rows, one coder per lane and row; ans_decode:
// ans_rows writing the decoded words of an ans.Bits matrix instead). A warp
// decodes its unit step by step exactly as layout/ans's reference decoder:
//   - the unit's stream is read through a 256-word ring in shared memory
//     per warp, filled 128 words at a time by coalesced 16-byte loads (one
//     per lane), the next 128 words always in flight in registers;
//   - lanes whose state fell below 2^31 take the next words of the stream
//     in lane order (ballot, popcount of the lower lanes);
//   - the 128-entry digit table (value, frequency, digit - cum, escape
//     flag) is replicated per bank in shared memory (entry d of lane l at
//     word 32d + l), so the four lookups of a step never conflict;
//   - escaped elements take the next bytes of the unit's escape list in
//     decoding order (step, lane, element): a warp prefix sum of the
//     escape counts, only on steps where some lane has one; the escape
//     bytes come through a 512-byte ring per warp in shared memory, filled
//     128 bytes at a time, the next 128 always in flight;
//   - the activations of the next step are loaded one step ahead;
//   - every read is bounded by the unit's word and escape counts, so a
//     unit whose stream runs out (or its escape list) decodes on to its
//     end without a vote per step, and the lowest failing lane's first
//     failure is recorded in status (code, unit, tag) for the host to
//     report, as are an initial state out of range, a final state !=
//     2^31 and escapes left over;
//   - unit-relative word and escape counts are 32-bit (the host checks
//     they fit), the table and ring are read at 32-bit shared addresses
//     computed once, and entry fields come out with PRMT.

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
#define ANS_WARPS 8
#define STATE_LOW 0x80000000ull

typedef long long i64;
typedef unsigned long long u64;

// Status codes (cuda/ans.go names them).
#define ANS_BAD_STATE 1
#define ANS_STREAM_END 2
#define ANS_ESC_END 3
#define ANS_BAD_FINAL 4
#define ANS_ESC_LEFT 5

__device__ __forceinline__ void ans_fail(unsigned *status, unsigned code, i64 unit, i64 tag) {
	if (atomicCAS(status, 0u, code) == 0u) {
		status[1] = (unsigned)unit;
		status[2] = (unsigned)tag;
	}
}

// Replace byte e of vals by the next escape byte (from the warp's ring
// er, valid below the unit-relative position lim) when entry ent is an
// escape. err keeps a lane's first failure.
__device__ __forceinline__ void ans_escape(unsigned ent, int e, unsigned &vals, int &p, int lim, const unsigned char *er, int &err) {
	if (ent & (1u << 24)) {
		if (p < lim) {
			vals = (vals & ~(0xffu << (8 * e))) | ((unsigned)er[p & 511] << (8 * e));
		} else if (err == 0) {
			err = ANS_ESC_END;
		}
		p++;
	}
}

// lds32 reads the shared-memory word at the 32-bit shared address addr
// (an address computed once, so that the loop does not rebuild the shared
// window base for every access, as ptxas does for sm_90).
__device__ __forceinline__ unsigned lds32(unsigned addr) {
	unsigned v;
	asm("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
	return v;
}

// lds32_ordered is lds32 kept in order with the surrounding memory
// accesses (for the ring, which the warp rewrites).
__device__ __forceinline__ unsigned lds32_ordered(unsigned addr) {
	unsigned v;
	asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
	return v;
}

// ans_esc4 loads escape bytes i..i+3 of a unit with ne bytes (zeros past
// the end) as one word.
__device__ __forceinline__ unsigned ans_esc4(const signed char *eu, i64 i, i64 ne) {
	unsigned w = 0;
#pragma unroll
	for (int k = 0; k < 4; k++)
		if (i + k < ne) w |= (unsigned)(unsigned char)eu[i + k] << (8 * k);
	return w;
}

// ans_mul: STRIPES selects warp stripes. table: 128 digit entries
// (bits 0-7 value, 8-15 frequency, 16-22 digit - cum, 24 escape); v: the
// int8 vector as words of four values; y: int32 results. DECODE (warp
// rows) instead writes each lane's four decoded bytes of step j, each XOR
// 0x80 (the byte an ans.Bits code holds), as word j*32+lane of unit u's
// words at out + u*steps*32: the plain words an ans.Bits matrix codes.
template <bool STRIPES, bool DECODE>
__device__ __forceinline__ void ans_mul(const uint4 *words, const u64 *offs, const signed char *esc, const u64 *escOffs,
	const unsigned *table, const int *v, int *y, unsigned *out, unsigned *status, i64 units, i64 steps, i64 tag) {
	__shared__ unsigned tab[128 * 32];
	__shared__ __align__(16) unsigned ring[ANS_WARPS][256];
	__shared__ __align__(16) unsigned escRing[ANS_WARPS][128];
#pragma unroll
	for (int k = 0; k < 128 / ANS_WARPS; k++) {
		const int i = threadIdx.x + k * 32 * ANS_WARPS;
		tab[i] = __ldg(table + (i >> 5));
	}
	__syncthreads();
	const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
	const unsigned lt = (1u << lane) - 1;
	unsigned *q = ring[wid];
	uint4 *q4 = (uint4 *)q;
	// Shared address of lane's copy of entry 0 in tab; entry d is 128 d
	// bytes further.
	const unsigned tabS = (unsigned)__cvta_generic_to_shared(tab) + 4 * lane;
	const unsigned qS = (unsigned)__cvta_generic_to_shared(q);
	const unsigned char *er = (const unsigned char *)escRing[wid];
	const int nsteps = (int)steps;
	for (i64 u = (i64)blockIdx.x * ANS_WARPS + wid; u < units; u += (i64)gridDim.x * ANS_WARPS) {
		// Unit-relative counts fit 31 bits (checked at load).
		const u64 w0 = offs[u];
		const unsigned n = (unsigned)(offs[u + 1] - w0); // a multiple of 128 words, >= 128 (checked at load)
		const u64 e0 = escOffs[u];
		const int ne = (int)(escOffs[u + 1] - e0);
		const uint4 *src = words + w0 / 4;
		const signed char *eu = esc + e0;
		__syncwarp();
		q4[lane] = src[lane];
		unsigned loaded = 128; // words of the unit in the ring
		bool more = n > 128;
		uint4 pre = make_uint4(0, 0, 0, 0);
		if (more) pre = src[32 + lane];
		// Escape bytes: a 512-byte ring per warp filled 128 bytes at a
		// time, the next 128 in flight in epre.
		int eLoaded = 0;
		unsigned epre = ans_esc4(eu, 4 * lane, ne);
		int vw = DECODE ? 0 : STRIPES ? __ldg(v) : __ldg(v + lane);
		unsigned *ou = DECODE ? out + u * steps * 32 + lane : 0;
		__syncwarp();
		u64 x = (u64)q[2 * lane] | ((u64)q[2 * lane + 1] << 32);
		if (__any_sync(FULL, x < STATE_LOW || (x >> 63) != 0)) {
			if (lane == 0) ans_fail(status, ANS_BAD_STATE, u, tag);
			continue;
		}
		unsigned qpos = 64;
		int ep = 0;
		int acc = 0, err = 0; // err: the lane's first failure; decoding goes on, every read bounded
		for (int step = 0; step < nsteps; step++) {
			if (loaded - qpos < 32 && more) {
				__syncwarp();
				q4[((loaded >> 7) & 1) * 32 + lane] = pre;
				loaded += 128;
				more = loaded < n;
				if (more) pre = src[loaded / 4 + lane];
				__syncwarp();
			}
			const int vn = DECODE || step + 1 >= nsteps ? 0 : (STRIPES ? __ldg(v + step + 1) : __ldg(v + (step + 1) * 32 + lane));
			const unsigned lo = (unsigned)x;
			const unsigned a = lds32(tabS + ((lo << 7) & 0x3f80u)), b = lds32(tabS + (lo & 0x3f80u));
			const unsigned c = lds32(tabS + ((lo >> 7) & 0x3f80u)), d = lds32(tabS + ((lo >> 14) & 0x3f80u));
			// Byte 1 of an entry is the frequency, byte 2 the digit minus cum.
			const unsigned fa = __byte_perm(a, 0, 0x4441), fb = __byte_perm(b, 0, 0x4441), fc = __byte_perm(c, 0, 0x4441), fd = __byte_perm(d, 0, 0x4441);
			const unsigned rank = __byte_perm(a, 0, 0x4442) + fa * (__byte_perm(b, 0, 0x4442) + fb * (__byte_perm(c, 0, 0x4442) + fc * __byte_perm(d, 0, 0x4442)));
			x = (u64)((fa * fb) * (fc * fd)) * (x >> 28) + rank;
			unsigned vals = __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
			if (__any_sync(FULL, (a | b | c | d) & (1u << 24))) {
				// Each lane's escapes (0..4) start after those of the lower
				// lanes: a prefix sum from the ballots of the count's bits.
				const int cnt = ((a >> 24) & 1) + ((b >> 24) & 1) + ((c >> 24) & 1) + ((d >> 24) & 1);
				const unsigned b0 = __ballot_sync(FULL, cnt & 1), b1 = __ballot_sync(FULL, cnt & 2), b2 = __ballot_sync(FULL, cnt & 4);
				while (eLoaded - ep < 128 && eLoaded < ne) {
					__syncwarp();
					escRing[wid][((eLoaded >> 2) & 127) + lane] = epre;
					eLoaded += 128;
					epre = ans_esc4(eu, eLoaded + 4 * lane, ne);
					__syncwarp();
				}
				int p = ep + __popc(b0 & lt) + 2 * __popc(b1 & lt) + 4 * __popc(b2 & lt);
				const int lim = min(eLoaded, ne);
				ans_escape(a, 0, vals, p, lim, er, err);
				ans_escape(b, 1, vals, p, lim, er, err);
				ans_escape(c, 2, vals, p, lim, er, err);
				ans_escape(d, 3, vals, p, lim, er, err);
				ep += __popc(b0) + 2 * __popc(b1) + 4 * __popc(b2);
			}
			const bool need = x < STATE_LOW;
			const unsigned m = __ballot_sync(FULL, need);
			if (need) {
				const unsigned k = qpos + __popc(m & lt);
				if (k < loaded) {
					x = (x << 32) | lds32_ordered(qS + 4 * (k & 255));
				} else if (err == 0) {
					err = ANS_STREAM_END;
				}
			}
			qpos += __popc(m);
			if (DECODE) {
				__stcs(ou + step * 32, vals ^ 0x80808080u);
			} else {
				acc = __dp4a((int)vals, vw, acc);
				vw = vn;
			}
		}
		const unsigned bad = __ballot_sync(FULL, err != 0);
		if (bad != 0) {
			// The lowest failing lane reports its first failure.
			if (lane == __ffs(bad) - 1) ans_fail(status, (unsigned)err, u, tag);
			continue;
		}
		if (__any_sync(FULL, x != STATE_LOW)) {
			if (lane == 0) ans_fail(status, ANS_BAD_FINAL, u, tag);
			continue;
		}
		if (ep != ne) {
			if (lane == 0) ans_fail(status, ANS_ESC_LEFT, u, tag);
			continue;
		}
		if (DECODE) continue;
		if (STRIPES) {
			y[u * 32 + lane] = acc;
		} else {
#pragma unroll
			for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL, acc, o);
			if (lane == 0) y[u] = acc;
		}
	}
}

extern "C" __global__ void __launch_bounds__(32 * ANS_WARPS) ans_rows(const uint4 *words, const u64 *offs, const signed char *esc, const u64 *escOffs,
	const unsigned *table, const int *v, int *y, unsigned *status, i64 units, i64 steps, i64 tag) { PDL_ENTRY();
	ans_mul<false, false>(words, offs, esc, escOffs, table, v, y, 0, status, units, steps, tag);
}

extern "C" __global__ void __launch_bounds__(32 * ANS_WARPS) ans_stripes(const uint4 *words, const u64 *offs, const signed char *esc, const u64 *escOffs,
	const unsigned *table, const int *v, int *y, unsigned *status, i64 units, i64 steps, i64 tag) { PDL_ENTRY();
	ans_mul<true, false>(words, offs, esc, escOffs, table, v, y, 0, status, units, steps, tag);
}

// ans_decode: the words of an ans.Bits matrix (warp rows) into out, unit
// u at u*steps*32, for the Bits kernels to multiply.
extern "C" __global__ void __launch_bounds__(32 * ANS_WARPS) ans_decode(const uint4 *words, const u64 *offs, const signed char *esc, const u64 *escOffs,
	const unsigned *table, unsigned *out, unsigned *status, i64 units, i64 steps, i64 tag) { PDL_ENTRY();
	ans_mul<false, true>(words, offs, esc, escOffs, table, 0, 0, out, status, units, steps, tag);
}

// int8_gemv16: one warp per row of a row-major int8 matrix whose columns
// are a multiple of 16: each lane loads 16 bytes of the row (four in
// flight) and of v, four dp4a each.
extern "C" __global__ void __launch_bounds__(32 * ANS_WARPS) int8_gemv16(const int4 *w, const int4 *v, int *y, i64 rows, i64 cols16) { PDL_ENTRY();
	const int lane = threadIdx.x & 31;
	const i64 row = (i64)blockIdx.x * ANS_WARPS + (threadIdx.x >> 5);
	if (row >= rows) return;
	const int4 *r = w + row * cols16;
	int acc = 0;
	i64 i = lane;
	for (; i + 96 < cols16; i += 128) {
		int4 a0 = __ldcs(r + i), a1 = __ldcs(r + i + 32), a2 = __ldcs(r + i + 64), a3 = __ldcs(r + i + 96);
		int4 b0 = __ldg(v + i), b1 = __ldg(v + i + 32), b2 = __ldg(v + i + 64), b3 = __ldg(v + i + 96);
		acc = __dp4a(a0.x, b0.x, acc); acc = __dp4a(a0.y, b0.y, acc); acc = __dp4a(a0.z, b0.z, acc); acc = __dp4a(a0.w, b0.w, acc);
		acc = __dp4a(a1.x, b1.x, acc); acc = __dp4a(a1.y, b1.y, acc); acc = __dp4a(a1.z, b1.z, acc); acc = __dp4a(a1.w, b1.w, acc);
		acc = __dp4a(a2.x, b2.x, acc); acc = __dp4a(a2.y, b2.y, acc); acc = __dp4a(a2.z, b2.z, acc); acc = __dp4a(a2.w, b2.w, acc);
		acc = __dp4a(a3.x, b3.x, acc); acc = __dp4a(a3.y, b3.y, acc); acc = __dp4a(a3.z, b3.z, acc); acc = __dp4a(a3.w, b3.w, acc);
	}
	for (; i < cols16; i += 32) {
		int4 a = __ldcs(r + i), b = __ldg(v + i);
		acc = __dp4a(a.x, b.x, acc); acc = __dp4a(a.y, b.y, acc); acc = __dp4a(a.z, b.z, acc); acc = __dp4a(a.w, b.w, acc);
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL, acc, o);
	if (lane == 0) y[row] = acc;
}

// int8_gemv1: any shape, one warp per row, one byte per lane and step.
extern "C" __global__ void __launch_bounds__(32 * ANS_WARPS) int8_gemv1(const signed char *w, const signed char *v, int *y, i64 rows, i64 cols) { PDL_ENTRY();
	const int lane = threadIdx.x & 31;
	const i64 row = (i64)blockIdx.x * ANS_WARPS + (threadIdx.x >> 5);
	if (row >= rows) return;
	const signed char *r = w + row * cols;
	int acc = 0;
	for (i64 i = lane; i < cols; i += 32) acc += (int)r[i] * (int)__ldg(v + i);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL, acc, o);
	if (lane == 0) y[row] = acc;
}

// ans_requant: v[i] = round_half_even(alpha * float(y[i])) clipped to int8,
// in float32 exactly as internal/matvans.Step (alphaBits: the float32's
// bits).
extern "C" __global__ void ans_requant(const int *y, signed char *v, i64 n, i64 alphaBits) { PDL_ENTRY();
	const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	const float p = __fmul_rn(__int_as_float((int)alphaBits), __int2float_rn(y[i]));
	v[i] = (signed char)(int)fminf(fmaxf(rintf(p), -128.0f), 127.0f);
}
