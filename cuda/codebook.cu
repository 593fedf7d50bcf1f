// qgemv CUDA kernels for codebook matrices (layout/codebook): the CodeGEMM
// Psumbook GEMV and the dequantize-then-multiply baseline. A separate PTX
// module (go run ./gen compiles every cuda/*.cu); see cuda/codebook.go.
//
// Conventions (as in kernels.cu): every parameter is 64 bits wide; x is
// NB zero-padded float32 vectors of pcols values; y is nb x rows
// (vector-major); ws holds SplitK partials, split-major (split_reduce in
// kernels.cu adds them in split order: deterministic).
//
// Work decomposition: blockDim.x = 32 * warps; warp w of block bx owns
// row tile T = bx * warps + w (32 rows, lane t = row 32T + t: the code
// words of a tile are 32 consecutive words, so every load is coalesced);
// blockIdx.y is the K split: segments (input vectors of V columns)
// [s0, s1). A lane walks its row's bit streams (one per codebook) with a
// two-word window and funnel shifts (codes may straddle words), one word
// load per 32 bits of codes, the next three words already in flight.
//
// Psumbook (cb_psum_*): the block builds, per chunk of CS segments of its
// range, the table tab[s][i][q][v] = sum_e C_i[q][e] * x[v][(c0+s)V+e]
// in shared memory (the chunk's activations staged there first; each
// thread one centroid (i, q) in registers for all segments and NB
// vectors), then
// every lane adds one table entry per code and vector. The global variant
// (cb_psumg_*) reads the same table built once per call for the whole row
// by cb_table into global memory (no per-block builds, no barriers, but
// each lookup is an L1/L2 gather). Per (row, group) scales are applied
// when a group (G/V segments) ends or the range does.
//
// Dequantize (cb_deq_*): the baseline, the AQLM way: each code's centroid
// (from shared memory when the codebooks fit, else through L1) is decoded
// to V weights and multiplied with the activations.

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

struct CB {
	const uint32_t *W; // code words, layout/codebook order
	const float *C;    // centroids M x K x V, float32
	const float *S;    // scales Groups x PRows, float32, group-major
	i64 rows, prows, nv, wl, m, v, b, spg;
};

// codeStream is one lane's bit stream of one codebook: word w of lane t
// at base[w*32]; bits [off, off+B) of the window lo:hi are the next code.
struct codeStream {
	const uint32_t *base;
	uint32_t lo, hi, n1, n2;
	i64 w, wl;
	__device__ __forceinline__ uint32_t load(i64 k) const { return k <= wl ? __ldg(base + k * 32) : 0u; }
	__device__ __forceinline__ void start(const uint32_t *b, i64 bit, i64 wlen) {
		base = b;
		wl = wlen;
		w = bit >> 5;
		// words up to wl exist: word wl is the next stream's first or one
		// of the 32 trailing zero words; beyond it the window reads zeros
		lo = load(w);
		hi = load(w + 1);
		n1 = load(w + 2);
		n2 = load(w + 3);
	}
	__device__ __forceinline__ uint32_t peek(int off, uint32_t mask) const { return __funnelshift_r(lo, hi, off) & mask; }
	// advance moves the window one word on, three words in flight.
	__device__ __forceinline__ void advance() {
		w++;
		lo = hi;
		hi = n1;
		n1 = n2;
		n2 = load(w + 3);
	}
};

// Activation loads for NB vectors at one column (x is NB x pcols).
template <int NB>
__device__ __forceinline__ void ldxv(const float *x, i64 pcols, i64 c, float (&xv)[NB]) {
#pragma unroll
	for (int k = 0; k < NB; k++) xv[k] = __ldg(x + k * pcols + c);
}

// Table entries of NB vectors at t (float4 loads when NB >= 4).
template <int NB>
__device__ __forceinline__ void addEntry(const float *t, float (&gs)[NB]) {
	if (NB == 1) {
		gs[0] += t[0];
	} else {
#pragma unroll
		for (int k = 0; k < NB; k += 4) {
			float4 e = *(const float4 *)(t + k);
			gs[k] += e.x;
			gs[k + 1] += e.y;
			gs[k + 2] += e.z;
			gs[k + 3] += e.w;
		}
	}
}

// addEntryG is addEntry for a table in global memory (read-only path).
template <int NB>
__device__ __forceinline__ void addEntryG(const float *t, float (&gs)[NB]) {
	if (NB == 1) {
		gs[0] += __ldg(t);
	} else {
#pragma unroll
		for (int k = 0; k < NB; k += 4) {
			float4 e = __ldg((const float4 *)(t + k));
			gs[k] += e.x;
			gs[k + 1] += e.y;
			gs[k + 2] += e.z;
			gs[k + 3] += e.w;
		}
	}
}

// buildTable fills tab[((s*M + i)*K + q)*NB + v] for segments
// [c0, c0+ns): the chunk's activations are first staged in xs (ns*V*NB
// floats, read back as broadcasts), then each thread keeps the V values
// of one centroid (i, q) in registers and walks the segments, so no
// global load sits in the loop.
template <int NB>
__device__ __forceinline__ void buildTable(const CB &p, const float *x, i64 pcols, i64 c0, int ns, float *tab, float *xs, int tid, int nthreads) {
	int K = 1 << p.b, V = (int)p.v, M = (int)p.m;
	for (int e = tid; e < ns * V * NB; e += nthreads) {
		int v = e % NB, se = e / NB;
		xs[e] = __ldg(x + v * pcols + c0 * V + se);
	}
	__syncthreads();
	for (int iq = tid; iq < M * K; iq += nthreads) {
		const float *cq = p.C + (i64)iq * V;
		float c[8];
#pragma unroll
		for (int k = 0; k < 8; k++) c[k] = k < V ? __ldg(cq + k) : 0.f;
#pragma unroll 2
		for (int s = 0; s < ns; s++) {
			const float *xv = xs + s * V * NB;
			float acc[NB];
#pragma unroll
			for (int v = 0; v < NB; v++) {
				float a = 0;
#pragma unroll
				for (int k = 0; k < 8; k++)
					if (k < V) a = fmaf(c[k], xv[k * NB + v], a);
				acc[v] = a;
			}
			float *d = tab + ((i64)s * M * K + iq) * NB;
			if (NB == 1) {
				d[0] = acc[0];
			} else {
#pragma unroll
				for (int v = 0; v < NB; v += 4) *(float4 *)(d + v) = make_float4(acc[v], acc[v + 1], acc[v + 2], acc[v + 3]);
			}
		}
	}
}

// store writes a lane's row results (or its split's partials).
template <int NB>
__device__ __forceinline__ void storeRow(const CB &p, i64 row, const float (&acc)[NB], float *y, float *ws, i64 nb) {
	if (row >= p.rows) return;
#pragma unroll
	for (int v = 0; v < NB; v++) {
		if (v < nb) {
			i64 o = v * p.rows + row;
			if (gridDim.y == 1) y[o] = acc[v];
			else ws[(i64)blockIdx.y * nb * p.rows + o] = acc[v];
		}
	}
}

// MODE 0: Psumbook in shared memory (chunks of cs segments);
// MODE 1: Psumbook in global memory (gtab: nv x M x K x NB, from cb_table);
// MODE 2: dequantize, codebooks in shared memory (cs unused);
// MODE 3: dequantize, codebooks read through L1.
template <int MODE, int NB>
__device__ __forceinline__ void cbGemv(const CB &p, const float *x, const float *gtab, float *y, float *ws, i64 pcols, i64 nb, i64 cs) {
	extern __shared__ __align__(16) float sh[];
	int tid = threadIdx.x, lane = tid & 31, warps = blockDim.x >> 5;
	i64 T = (i64)blockIdx.x * warps + (tid >> 5);
	bool active = T * 32 < p.prows;
	i64 row = T * 32 + lane;
	int M = (int)p.m, B = (int)p.b, K = 1 << B, V = (int)p.v;
	uint32_t mask = (1u << B) - 1;
	i64 per = (p.nv + gridDim.y - 1) / gridDim.y;
	i64 s0 = blockIdx.y * per, s1 = min(p.nv, s0 + per);
	if (MODE == 2) {
		for (int e = tid; e < M * K * V; e += blockDim.x) sh[e] = __ldg(p.C + e);
		__syncthreads();
	}
	const float *cent = MODE == 2 ? sh : p.C;
	float acc[NB], gs[NB];
#pragma unroll
	for (int v = 0; v < NB; v++) acc[v] = gs[v] = 0;
	if (s0 >= s1) { // an empty split (more splits than segments)
		if (active) storeRow<NB>(p, row, acc, y, ws, nb);
		return;
	}
	codeStream cs0, cs1;
	const uint32_t *wt = p.W + (T * M * p.wl) * 32 + lane;
	if (active) {
		cs0.start(wt, s0 * B, p.wl);
		if (M == 2) cs1.start(wt + p.wl * 32, s0 * B, p.wl);
	}
	int off = (int)((s0 * B) & 31);
	i64 fold = min(s1, (s0 / p.spg + 1) * p.spg); // next group end
	i64 step = MODE == 0 ? cs : s1 - s0;
	for (i64 c0 = s0; c0 < s1; c0 += step) {
		int ns = (int)min(step, s1 - c0);
		const float *tab = nullptr;
		if (MODE == 0) {
			__syncthreads(); // the previous chunk's lookups are done
			buildTable<NB>(p, x, pcols, c0, ns, sh, sh + cs * M * K * NB, tid, blockDim.x);
			__syncthreads();
			tab = sh;
		} else if (MODE == 1) {
			tab = gtab + c0 * M * K * NB;
		}
		if (!active) continue;
#pragma unroll 4
		for (int s = 0; s < ns; s++) {
			i64 j = c0 + s;
			uint32_t q0 = cs0.peek(off, mask), q1 = M == 2 ? cs1.peek(off, mask) : 0u;
			off += B;
			if (off >= 32) {
				off -= 32;
				cs0.advance();
				if (M == 2) cs1.advance();
			}
			if (MODE <= 1) {
				const float *t = tab + (i64)s * M * K * NB;
				if (MODE == 0) {
					addEntry<NB>(t + q0 * NB, gs);
					if (M == 2) addEntry<NB>(t + (K + q1) * NB, gs);
				} else {
					addEntryG<NB>(t + q0 * NB, gs);
					if (M == 2) addEntryG<NB>(t + (K + q1) * NB, gs);
				}
			} else {
				float w[8];
				const float *c0p = cent + (i64)q0 * V, *c1p = cent + ((i64)K + q1) * V;
#pragma unroll
				for (int k = 0; k < 8; k++) {
					if (k < V) {
						float a = MODE == 2 ? c0p[k] : __ldg(c0p + k);
						if (M == 2) a += MODE == 2 ? c1p[k] : __ldg(c1p + k);
						w[k] = a;
					}
				}
#pragma unroll
				for (int k = 0; k < 8; k++) {
					if (k < V) {
						float xv[NB];
						ldxv<NB>(x, pcols, j * V + k, xv);
#pragma unroll
						for (int v = 0; v < NB; v++) gs[v] = fmaf(w[k], xv[v], gs[v]);
					}
				}
			}
			if (j + 1 == fold) {
				float sc = __ldg(p.S + (j / p.spg) * p.prows + row);
#pragma unroll
				for (int v = 0; v < NB; v++) {
					acc[v] = fmaf(sc, gs[v], acc[v]);
					gs[v] = 0;
				}
				fold = min(s1, fold + p.spg);
			}
		}
	}
	if (active) storeRow<NB>(p, row, acc, y, ws, nb);
}

#define CB_PARAMS                                                                                                            \
	const uint32_t *W, const float *C, const float *S, const float *x, const float *gtab, float *y, float *ws, i64 rows, \
	    i64 prows, i64 pcols, i64 m, i64 v, i64 b, i64 spg, i64 nb, i64 cs
#define CB_CALL(MODE, NB)                                                                               \
	CB p{W, C, S, rows, prows, pcols / v, pcols / v * b / 32, m, v, b, spg}; \
	cbGemv<MODE, NB>(p, x, gtab, y, ws, pcols, nb, cs)

#define CB_KERNELS(NB)                                                                     \
	extern "C" __global__ void cb_psum_b##NB(CB_PARAMS) { PDL_ENTRY(); CB_CALL(0, NB); }  \
	extern "C" __global__ void cb_psumg_b##NB(CB_PARAMS) { PDL_ENTRY(); CB_CALL(1, NB); } \
	extern "C" __global__ void cb_deqs_b##NB(CB_PARAMS) { PDL_ENTRY(); CB_CALL(2, NB); }  \
	extern "C" __global__ void cb_deqg_b##NB(CB_PARAMS) { PDL_ENTRY(); CB_CALL(3, NB); }

CB_KERNELS(1)
CB_KERNELS(4)
CB_KERNELS(16)

// cb_table builds the global Psumbook of segments [0, nv) for NB vectors:
// tab[((s*M + i)*K + q)*NB + v], one thread per (s, i, q).
template <int NB>
__device__ __forceinline__ void cbTable(const float *C, const float *x, float *tab, i64 pcols, i64 m, i64 v, i64 b) {
	i64 n = (pcols / v * m) << b;
	i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (e >= n) return;
	int K = 1 << b, M = (int)m, V = (int)v;
	int q = (int)(e & (K - 1));
	i64 si = e >> b;
	int i = (int)(si % M);
	i64 s = si / M;
	const float *cq = C + ((i64)i * K + q) * V;
	float c[8];
#pragma unroll
	for (int k = 0; k < 8; k++) c[k] = k < V ? __ldg(cq + k) : 0.f;
	float *d = tab + e * NB;
#pragma unroll
	for (int vv = 0; vv < NB; vv++) {
		float a = 0;
#pragma unroll
		for (int k = 0; k < 8; k++)
			if (k < V) a = fmaf(c[k], __ldg(x + vv * pcols + s * V + k), a);
		d[vv] = a;
	}
}

extern "C" __global__ void cb_table_b1(const float *C, const float *x, float *tab, i64 pcols, i64 m, i64 v, i64 b) { PDL_ENTRY(); cbTable<1>(C, x, tab, pcols, m, v, b); }
extern "C" __global__ void cb_table_b4(const float *C, const float *x, float *tab, i64 pcols, i64 m, i64 v, i64 b) { PDL_ENTRY(); cbTable<4>(C, x, tab, pcols, m, v, b); }
extern "C" __global__ void cb_table_b16(const float *C, const float *x, float *tab, i64 pcols, i64 m, i64 v, i64 b) { PDL_ENTRY(); cbTable<16>(C, x, tab, pcols, m, v, b); }
