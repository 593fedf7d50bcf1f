// qgemv OpenCL kernels for codebook matrices (layout/codebook): the
// CodeGEMM Psumbook GEMV and the dequantize-then-multiply baseline
// (codebook.Baseline). Built as a program of its own per batch bound NB
// (see opencl/codebook.go).
//
// Work decomposition: work-item i of the range (work-groups of a
// multiple of 32 items) is row 32T + t of row tile T = i / 32, t = i % 32:
// the code words of a tile are 32 consecutive uints per word index, so
// 32 neighbouring work-items always load 32 consecutive words. The
// work-groups form `splits` column splits (group id / gx): split k covers
// segments (input vectors of V columns) [s0, s1) and, when splits > 1,
// writes partials to ws (split-major), which cb_reduce adds in split
// order (deterministic, no atomics).
//
// Each work-item walks its row's bit stream per codebook with a two-word
// window (codes may straddle two words), loading one word per 32 bits of
// codes and never past word WL of its stream (word WL is the next
// stream's first or one of the 32 trailing zero words).
//
// Modes (cb_gemv's first argument, a constant after inlining):
//  0 Psumbook in local memory: per chunk of cs segments of its range the
//    work-group stages the chunk's activations, then builds
//    tab[((s*M + i)*K + q)*NB + v] = sum_e C_i[q][e] * x_v[(c0+s)*V + e]
//    (each work-item one centroid held in registers across the chunk),
//    then every work-item adds one entry per code and vector;
//  1 Psumbook in global memory, built once per call by cb_table for the
//    whole row (same layout), gathered through the caches;
//  2 dequantize with the codebooks copied to local memory;
//  3 dequantize with the codebooks read from global memory.
// Per (row, group) scales are applied when a group (spg segments) or the
// split's range ends. Vectors v >= nb (the launch's count) read no
// activations and store nothing.

#ifndef NB
#define NB 1
#endif

inline uint cload(__global const uint *base, int k, int wl) { return k <= wl ? base[(size_t)k * 32] : 0u; }

inline uint peek(uint lo, uint hi, int off, uint mask) { return (uint)((((ulong)hi << 32) | (ulong)lo) >> off) & mask; }

inline void cb_gemv(const int mode, __global const uint *W, __global const float *C, __global const float *S,
                    __global const float *x, __global const float *gtab, __global float *y, __global float *ws,
                    int rows, int prows, int pcols, int M, int V, int B, int spg, int nb, int cs, int splits,
                    __local float *sh) {
	int lid = get_local_id(0), wg = get_local_size(0);
	int gx = get_num_groups(0) / splits;
	int split = get_group_id(0) / gx, bx = get_group_id(0) % gx;
	int T = (bx * wg + lid) >> 5, lane = lid & 31;
	int row = T * 32 + lane;
	bool active = row < prows;
	int nv = pcols / V, wl = nv * B / 32, K = 1 << B;
	uint mask = (1u << B) - 1u;
	int per = (nv + splits - 1) / splits;
	int s0 = min(nv, split * per), s1 = min(nv, s0 + per);
	if (mode == 2) {
		for (int e = lid; e < M * K * V; e += wg) sh[e] = C[e];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	float acc[NB], gs[NB];
	for (int v = 0; v < NB; v++) acc[v] = gs[v] = 0.0f;
	if (s0 < s1) {
		__global const uint *b0 = W + (size_t)T * M * wl * 32 + lane;
		__global const uint *b1 = b0 + (size_t)wl * 32;
		int w = (s0 * B) >> 5, off = (s0 * B) & 31;
		uint lo0 = 0, hi0 = 0, lo1 = 0, hi1 = 0;
		if (active) {
			lo0 = cload(b0, w, wl);
			hi0 = cload(b0, w + 1, wl);
			if (M == 2) {
				lo1 = cload(b1, w, wl);
				hi1 = cload(b1, w + 1, wl);
			}
		}
		int fold = min(s1, (s0 / spg + 1) * spg); // the next group end
		int step = mode == 0 ? cs : s1 - s0;
		for (int c0 = s0; c0 < s1; c0 += step) {
			int ns = min(step, s1 - c0);
			__local float *tab = sh;
			if (mode == 0) {
				__local float *xs = sh + cs * M * K * NB;
				barrier(CLK_LOCAL_MEM_FENCE); // the previous chunk's lookups are done
				for (int e = lid; e < ns * V * NB; e += wg) {
					int v = e % NB, se = e / NB;
					xs[e] = v < nb ? x[(size_t)v * pcols + c0 * V + se] : 0.0f;
				}
				barrier(CLK_LOCAL_MEM_FENCE);
				for (int iq = lid; iq < M * K; iq += wg) {
					float c[8];
					for (int k = 0; k < 8; k++) c[k] = k < V ? C[iq * V + k] : 0.0f;
					for (int s = 0; s < ns; s++) {
						__local const float *xv = xs + s * V * NB;
						__local float *d = tab + (s * M * K + iq) * NB;
						for (int v = 0; v < NB; v++) {
							float a = 0.0f;
							for (int k = 0; k < 8; k++)
								if (k < V) a = fma(c[k], xv[k * NB + v], a);
							d[v] = a;
						}
					}
				}
				barrier(CLK_LOCAL_MEM_FENCE);
			}
			if (!active) continue;
			for (int s = 0; s < ns; s++) {
				int j = c0 + s;
				uint q0 = peek(lo0, hi0, off, mask), q1 = M == 2 ? peek(lo1, hi1, off, mask) : 0u;
				off += B;
				if (off >= 32) {
					off -= 32;
					w++;
					lo0 = hi0;
					hi0 = cload(b0, w + 1, wl);
					if (M == 2) {
						lo1 = hi1;
						hi1 = cload(b1, w + 1, wl);
					}
				}
				if (mode == 0) {
					__local const float *t = tab + s * M * K * NB;
					for (int v = 0; v < NB; v++) gs[v] += t[q0 * NB + v];
					if (M == 2)
						for (int v = 0; v < NB; v++) gs[v] += t[(K + q1) * NB + v];
				} else if (mode == 1) {
					__global const float *t = gtab + (size_t)j * M * K * NB;
					for (int v = 0; v < NB; v++) gs[v] += t[q0 * NB + v];
					if (M == 2)
						for (int v = 0; v < NB; v++) gs[v] += t[(K + q1) * NB + v];
				} else {
					float wv[8];
					for (int k = 0; k < 8; k++) {
						if (k < V) {
							float a = mode == 2 ? sh[q0 * V + k] : C[q0 * V + k];
							if (M == 2) a += mode == 2 ? sh[(K + q1) * V + k] : C[(K + q1) * V + k];
							wv[k] = a;
						}
					}
					for (int v = 0; v < NB; v++) {
						if (v < nb) {
							__global const float *xv = x + (size_t)v * pcols + j * V;
							float a = gs[v];
							for (int k = 0; k < 8; k++)
								if (k < V) a = fma(wv[k], xv[k], a);
							gs[v] = a;
						}
					}
				}
				if (j + 1 == fold) {
					float sc = S[(size_t)(j / spg) * prows + row];
					for (int v = 0; v < NB; v++) {
						acc[v] = fma(sc, gs[v], acc[v]);
						gs[v] = 0.0f;
					}
					fold = min(s1, fold + spg);
				}
			}
		}
	}
	if (row >= rows) return;
	for (int v = 0; v < NB; v++) {
		if (v < nb) {
			size_t o = (size_t)v * rows + row;
			if (splits == 1) y[o] = acc[v];
			else ws[(size_t)split * nb * rows + o] = acc[v];
		}
	}
}

#define CB_PARAMS                                                                                              \
	__global const uint *W, __global const float *C, __global const float *S, __global const float *x,        \
	    __global const float *gtab, __global float *y, __global float *ws, int rows, int prows, int pcols,    \
	    int M, int V, int B, int spg, int nb, int cs, int splits, int xoff, int yoff, __local float *sh
#define CB_ARGS W, C, S, x + xoff, gtab, y + yoff, ws, rows, prows, pcols, M, V, B, spg, nb, cs, splits, sh

__kernel void cb_psum(CB_PARAMS) { cb_gemv(0, CB_ARGS); }
__kernel void cb_psumg(CB_PARAMS) { cb_gemv(1, CB_ARGS); }
__kernel void cb_deqs(CB_PARAMS) { cb_gemv(2, CB_ARGS); }
__kernel void cb_deqg(CB_PARAMS) { cb_gemv(3, CB_ARGS); }

// cb_table builds the global Psumbook of segments [0, nv) for NB vectors
// (nb of them read, the rest zero): tab[((s*M + i)*K + q)*NB + v], one
// work-item per (s, i, q).
__kernel void cb_table(__global const float *C, __global const float *x, __global float *tab, int pcols, int M,
                       int V, int B, int nb, int xoff) {
	int nv = pcols / V, K = 1 << B;
	size_t n = (size_t)nv * M * K;
	size_t e = get_global_id(0);
	if (e >= n) return;
	int q = (int)(e & (size_t)(K - 1));
	size_t si = e >> B;
	int i = (int)(si % M);
	int s = (int)(si / M);
	float c[8];
	for (int k = 0; k < 8; k++) c[k] = k < V ? C[(i * K + q) * V + k] : 0.0f;
	x += xoff;
	for (int v = 0; v < NB; v++) {
		float a = 0.0f;
		if (v < nb) {
			__global const float *xv = x + (size_t)v * pcols + s * V;
			for (int k = 0; k < 8; k++)
				if (k < V) a = fma(c[k], xv[k], a);
		}
		tab[e * NB + v] = a;
	}
}

// cb_reduce adds the split partials in split order: y[yoff + o] =
// sum_k ws[k*n + o] for o < n.
__kernel void cb_reduce(__global const float *ws, __global float *y, int n, int splits, int yoff) {
	int o = get_global_id(0);
	if (o >= n) return;
	float s = 0.0f;
	for (int k = 0; k < splits; k++) s += ws[(size_t)k * n + o];
	y[yoff + o] = s;
}
