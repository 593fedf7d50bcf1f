// qgemv OpenCL kernels for entropy-coded int8 matrices (layout/ans) and
// plain int8 matrices, multiplied by int8 vectors exactly in int32
// (wrapping arithmetic, as layout/ans's DotUnit and the CPU).
//
// ans_mul: one work-group of 32 work-items per unit (the warp: lane t is
// coder t), decoding step by step exactly as the reference decoder:
//   - the 128 digit entries (bits 0-7 value, 8-15 frequency, 16-22
//     digit - cum, 24 escape) live in local memory;
//   - per step, each lane decodes its quad, then one exclusive prefix sum
//     over the lanes of (needs a word) + 256 * (escapes in the quad)
//     hands out the refill words and escape bytes in lane order:
//     sub_group_scan_exclusive_add where the device has sub-groups and the
//     work-group is one sub-group (USE_SUBGROUPS), else a prefix over
//     32 packed counts in local memory (portable: PoCL, NVIDIA);
//   - every read is bounded by the unit's word and escape counts: a lane
//     that would read past them reads nothing and records the failure;
//     the unit's first failure in lane order (initial state out of range,
//     stream exhausted, escape list exhausted, final state != 2^31,
//     escapes left over) is written to status[u] (0: fine) for the host
//     to report. No atomics.
// Warp rows: y[u] = sum of the 32 lanes' products; warp stripes: y[32u+t].
//
// ans_decode: the same decoder writing an ans.Bits matrix's words (warp
// rows: lane t's four bytes of step j are word j*32+t of the unit) for the
// Bits kernels.
//
// int8_gemv: the plain int8 baseline, one row per work-group, 16 bytes
// per work-item and step (cols % 16 == 0) or bytewise, local-memory tree
// reduction.
//
// ans_requant: v = round_half_even(alpha * (float)y) clipped to int8
// (float32, as internal/matvans.Step), the step of the MatVANS chain.

#ifdef USE_SUBGROUPS
#ifdef USE_INTEL_SUBGROUPS
#pragma OPENCL EXTENSION cl_intel_subgroups : enable
#else
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#endif
#endif

#define STATE_LOW 0x80000000ul

#define ANS_BAD_STATE 1
#define ANS_STREAM_END 2
#define ANS_ESC_END 3
#define ANS_BAD_FINAL 4
#define ANS_ESC_LEFT 5

// scan32 returns the exclusive prefix of val over the 32 lanes and sets
// *total to the sum. sc holds 2 x 32 uints; par alternates per call so one
// barrier per call suffices.
inline uint scan32(uint val, uint *total, __local uint *sc, int lane, int par) {
#ifdef USE_SUBGROUPS
	if (get_num_sub_groups() == 1) {
		*total = sub_group_reduce_add(val);
		return sub_group_scan_exclusive_add(val);
	}
#endif
	__local uint *s = sc + 32 * par;
	s[lane] = val;
	barrier(CLK_LOCAL_MEM_FENCE);
	uint pre = 0, tot = 0;
	for (int i = 0; i < 32; i++) {
		uint e = s[i];
		pre += i < lane ? e : 0u;
		tot += e;
	}
	*total = tot;
	return pre;
}

inline int dot4(uint vals, char4 x) {
	return (int)(char)(vals & 255u) * (int)x.x + (int)(char)((vals >> 8) & 255u) * (int)x.y +
	       (int)(char)((vals >> 16) & 255u) * (int)x.z + (int)(char)(vals >> 24) * (int)x.w;
}

// ans_unit decodes unit u (the caller has checked u < units) step by
// step. With out == 0 it multiplies: each lane's int32 dot with v, the
// lanes' sum (warp rows) or each lane's (warp stripes) written to y.
// Otherwise (warp rows) it writes lane t's four decoded bytes of step j,
// each XOR 0x80 (the byte an ans.Bits code holds), as word j*32+t of the
// unit's words in out. Either way the unit's first failure goes to
// status[u]. tab must hold the 128 entries; sc, errs and accs are the
// work-group's scratch.
inline void ans_unit(__global const uint *words, __global const ulong *offs, __global const char *esc,
                     __global const ulong *escOffs, __local const uint *tab, __global const char *v, __global int *y,
                     __global uint *out, __global uint *status, int u, int steps, int stripes,
                     __local uint *sc, __local uint *errs, __local uint *accs) {
	int lane = get_local_id(0);
	ulong w0 = offs[u], n = offs[u + 1] - w0; // >= 64 words (checked at load)
	ulong e0 = escOffs[u], ne = escOffs[u + 1] - e0;
	__global const uint *wu = words + w0;
	__global const char *eu = esc + e0;
	__global uint *ou = out ? out + (size_t)u * steps * 32 : 0;
	ulong x = (ulong)wu[2 * lane] | ((ulong)wu[2 * lane + 1] << 32);
	uint err = 0;
	if (x < STATE_LOW || (x >> 63) != 0) err = ANS_BAD_STATE;
	ulong p = 64, ep = 0;
	uint acc = 0;
	for (int step = 0; step < steps; step++) {
		uint lo = (uint)x;
		uint a = tab[lo & 127u], b = tab[(lo >> 7) & 127u], c = tab[(lo >> 14) & 127u], d = tab[(lo >> 21) & 127u];
		uint fa = (a >> 8) & 255u, fb = (b >> 8) & 255u, fc = (c >> 8) & 255u, fd = (d >> 8) & 255u;
		uint rank = ((a >> 16) & 127u) + fa * (((b >> 16) & 127u) + fb * (((c >> 16) & 127u) + fc * ((d >> 16) & 127u)));
		x = (ulong)(fa * fb * fc * fd) * (x >> 28) + rank;
		uint need = x < STATE_LOW ? 1u : 0u;
		uint ne4 = ((a >> 24) & 1u) + ((b >> 24) & 1u) + ((c >> 24) & 1u) + ((d >> 24) & 1u);
		uint tot;
		uint pre = scan32(need + (ne4 << 8), &tot, sc, lane, step & 1);
		if (need) {
			ulong k = p + (pre & 255u);
			if (k < n) {
				x = (x << 32) | (ulong)wu[k];
			} else if (err == 0) {
				err = ANS_STREAM_END;
			}
		}
		uint vals = (a & 255u) | (b & 255u) << 8 | (c & 255u) << 16 | (d & 255u) << 24;
		if (ne4) {
			ulong k = ep + (pre >> 8);
			uint ent[4] = {a, b, c, d};
			for (int e = 0; e < 4; e++) {
				if (ent[e] & (1u << 24)) {
					if (k < ne) {
						vals = (vals & ~(255u << (8 * e))) | ((uint)(uchar)eu[k] << (8 * e));
					} else if (err == 0) {
						err = ANS_ESC_END;
					}
					k++;
				}
			}
		}
		p += tot & 255u;
		ep += tot >> 8;
		if (ou) {
			ou[step * 32 + lane] = vals ^ 0x80808080u;
		} else {
			char4 xv = stripes ? vload4(step, v) : vload4(step * 32 + lane, v);
			acc += (uint)dot4(vals, xv);
		}
	}
	if (err == 0 && x != STATE_LOW) err = ANS_BAD_FINAL;
	if (err == 0 && ep != ne) err = ANS_ESC_LEFT;
	errs[lane] = err;
	if (!ou && stripes) {
		y[32 * u + lane] = (int)acc;
	} else {
		accs[lane] = acc;
	}
	barrier(CLK_LOCAL_MEM_FENCE);
	if (lane == 0) {
		uint first = 0, sum = 0;
		for (int i = 0; i < 32; i++) {
			if (first == 0) first = errs[i];
			sum += accs[i];
		}
		status[u] = first;
		if (!ou && !stripes) y[u] = (int)sum;
	}
}

__kernel __attribute__((reqd_work_group_size(32, 1, 1))) void
ans_mul(__global const uint *words, __global const ulong *offs, __global const char *esc,
        __global const ulong *escOffs, __global const uint *table, __global const char *v, __global int *y,
        __global uint *status, int units, int steps, int stripes) {
	__local uint tab[128];
	__local uint sc[64];
	__local uint errs[32], accs[32];
	int lane = get_local_id(0);
	for (int i = lane; i < 128; i += 32) tab[i] = table[i];
	barrier(CLK_LOCAL_MEM_FENCE);
	int u = get_group_id(0);
	if (u >= units) return; // uniform per work-group
	ans_unit(words, offs, esc, escOffs, tab, v, y, 0, status, u, steps, stripes, sc, errs, accs);
}

// ans_decode: the words of ans.Bits units (warp rows) into out, unit u at
// u*steps*32, for the Bits kernels to multiply.
__kernel __attribute__((reqd_work_group_size(32, 1, 1))) void
ans_decode(__global const uint *words, __global const ulong *offs, __global const char *esc,
           __global const ulong *escOffs, __global const uint *table, __global uint *out,
           __global uint *status, int units, int steps) {
	__local uint tab[128];
	__local uint sc[64];
	__local uint errs[32], accs[32];
	int lane = get_local_id(0);
	for (int i = lane; i < 128; i += 32) tab[i] = table[i];
	barrier(CLK_LOCAL_MEM_FENCE);
	int u = get_group_id(0);
	if (u >= units) return; // uniform per work-group
	ans_unit(words, offs, esc, escOffs, tab, 0, 0, out, status, u, steps, 0, sc, errs, accs);
}

__kernel void int8_gemv(__global const char *w, __global const char *v, __global int *y, int rows, int cols,
                        __local int *red) {
	int r = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
	__global const char *wr = w + (size_t)r * cols;
	uint acc = 0;
	if (cols % 16 == 0) {
		for (int k = lid; k < cols / 16; k += wg) {
			char16 a = vload16(k, wr), b = vload16(k, v);
			int16 p = convert_int16(a) * convert_int16(b);
			acc += (uint)(((p.s0 + p.s1) + (p.s2 + p.s3)) + ((p.s4 + p.s5) + (p.s6 + p.s7)) +
			              ((p.s8 + p.s9) + (p.sa + p.sb)) + ((p.sc + p.sd) + (p.se + p.sf)));
		}
	} else {
		for (int k = lid; k < cols; k += wg) acc += (uint)((int)wr[k] * (int)v[k]);
	}
	red[lid] = (int)acc;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int s = wg / 2; s > 0; s >>= 1) {
		if (lid < s) red[lid] = (int)((uint)red[lid] + (uint)red[lid + s]);
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (lid == 0) y[r] = red[0];
}

__kernel void ans_requant(__global const int *y, __global char *v, int n, float alpha) {
	int i = get_global_id(0);
	if (i >= n) return;
	float f = rint(alpha * (float)y[i]);
	v[i] = (char)clamp(f, -128.0f, 127.0f);
}
