package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ggmlT32Types are the 32-element block types with rows-in-lanes batch
// kernels on AVX-512.
var ggmlT32Types = map[string]bool{"Q40": true, "Q41": true, "Q50": true, "Q51": true, "Q80": true, "IQ4NL": true}

// ggmlT32AVX2Types are the 32-element block types with AVX2 rows-in-lanes
// batch kernels.
var ggmlT32AVX2Types = map[string]bool{"Q40": true, "Q41": true, "Q50": true, "Q51": true, "Q80": true, "IQ4NL": true}

// ggmlT32Row is the row in lane p of the 32-element rows-in-lanes
// kernels' vectors: four rows per 128-bit lane after the 4x4 dword
// transposes (lane p holds row 4*(p%4) + p/4; the map is its own
// inverse, so the same table puts the results back in row order).
func ggmlT32Row(p int) int { return 4*(p%4) + p/4 }

// ggmlBlockA8T emits Ggml<t>A8T<M>Avx512, the rows-in-lanes kernel of a
// 32-element block type for 16 rows and M vector slots: per block the 16
// rows' codes are loaded four rows to a ZMM (one per 128-bit lane) and
// transposed 4x4 by dwords, so that one register holds four codes of the
// block for all 16 rows (nibble types: in its low nibbles, and the four
// codes 16 columns on in its high nibbles); per vector, VPDPBUSD with the
// vector's four activations broadcast from memory gives S for 16 rows,
// started at the codes' offset times the block's activation sum (laid out
// by the caller), and the float step of the definition runs on 16 rows:
// out[v] = out[v] + float32(D*xs) * float32(S), the rows' D gathered.
// Q5_0 and Q5_1 add 16 to the codes whose qh bit is set (the rows' qh
// gathered, each step's bits spread to bytes by VPSHUFB and tested into
// a byte mask for VPADDB); Q4_1 and Q5_1 start S at 0 and add the M term
// after it, out[v] = out[v] + float32(M*xs) * float32(sx), with sx the
// block's activation sum: the start value is -sx for them (shift 0), so
// the kernel subtracts float32(M*xs) * float32(-sx), the same value.
// Activations per group of four blocks (128 columns), 148*M bytes: slot v's
// 128 int8 at 128v; its int32 start values (-2^shift * the block's sum)
// at 128M + 16v + 4b; its float32 scale at 144M + 4v (cpu ggmlT32Layout).
// nsb counts the groups; out (16 float32 per slot, rows in order) is
// written.
func ggmlBlockA8T(c ggmlSmall, M int) {
	name := fmt.Sprintf("Ggml%sA8T%dAvx512", c.t, M)
	TEXT(name, 0, ggmlSigT16)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s is %s for 16 rows and %d vector slots with the rows in the lanes.", name, "Ggml"+c.t+"A8Avx512", M))
	av512 := fvec{avx512: true}
	var mask, kv, flip VecVirtual
	if c.nib {
		mask = nibbleMask(ZMM())
	} else {
		flip = av512.broadcast(0x80808080)
	}
	if c.kv {
		kv = ZMM()
		VBROADCASTI32X4(ggmlKValues128(), kv)
	}
	rowTab := rodata("ggmlT32Rows", 16, 4, func(p int) uint64 { return uint64(ggmlT32Row(p)) })
	stride := param("stride")
	stride3 := GP64()
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)
	// rowOff lane p: row(p)*stride, the gather offsets of the rows' d.
	rowOff := ZMM()
	VPBROADCASTD(stride.As32(), rowOff)
	VPMULLD(rowTab, rowOff, rowOff)

	op := param("out")
	{
		zero := ZMM()
		VPXORD(zero, zero, zero)
		for v := 0; v < M; v++ {
			VMOVUPS(zero, Mem{Base: op, Disp: 64 * v})
		}
	}
	k := newT32Loop(c, stride)
	wp, ap := k.wp, k.ap

	// Registers shared by every block (fresh ones per block leave avo's
	// greedy allocator short of ZMM registers): the loads, the transposes,
	// the K steps' codes, the accumulators.
	zr := []VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}
	tr := []VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}
	stepRegs := make([]VecVirtual, 8)
	for i := range stepRegs {
		stepRegs[i] = ZMM()
	}
	accR := []VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}
	fR, d := ZMM(), ZMM()
	var mR, sxR, qh, hb, sixteen VecVirtual // the M term's, the high bits'
	if c.m {
		mR, sxR = ZMM(), ZMM()
	}
	if c.qh != 0 {
		qh, hb = ZMM(), ZMM()
		sixteen = av512.broadcast(0x10101010)
	}
	hk := K()
	// The qh spreading tables in registers (as 64-byte memory operands in
	// the loop they would be split loads wherever the linker places them
	// at 32 mod 64).
	// qhCtl by e0/8, qhBits by e0%8/4 (e0 a multiple of 4).
	var qhCtl [4]VecVirtual
	var qhBits [2]VecVirtual
	if c.qh != 0 {
		load := func(m Mem, r *VecVirtual) {
			if *r == nil {
				*r = ZMM()
				VMOVDQU64(m, *r)
			}
		}
		for e0 := 0; e0 < 32; e0 += 4 {
			ctl, bits := qhSpread(e0)
			load(ctl, &qhCtl[e0/8])
			load(bits, &qhBits[e0%8/4])
		}
	}

	Label(name + "_group")
	base := []GPVirtual{wp, GP64(), GP64(), GP64()} // rows 0, 4, 8, 12
	for q := 1; q < 4; q++ {
		LEAQ(Mem{Base: base[q-1], Index: stride, Scale: 4}, base[q])
	}
	for b := 0; b < 4; b++ {
		boff := b * c.bytes
		// D: the 16 rows' half-precision d of block b, lane p row(p)
		// (Q4_1, Q5_1: m in the dword's high half).
		{
			gatherDwords(Mem{Base: wp, Index: rowOff, Scale: 1, Disp: boff}, d)
			dy := YMM()
			if c.m {
				VPSRLD(U8(16), d, mR)
				VPMOVDW(mR, dy)
				VCVTPH2PS(dy, mR)
			}
			VPMOVDW(d, dy)
			VCVTPH2PS(dy, d)
		}
		if c.qh != 0 { // the 16 rows' qh, lane p row(p)
			gatherDwords(Mem{Base: wp, Index: rowOff, Scale: 1, Disp: boff + c.qh}, qh)
		}
		// highBits adds 16 to the codes of register r whose qh bit is set:
		// byte k of r's lane is element e0+k of the lane's row.
		highBits := func(r VecVirtual, e0 int) {
			if c.qh == 0 {
				return
			}
			VPSHUFB(qhCtl[e0/8], qh, hb)
			VPTESTMB(qhBits[e0%8/4], hb, hk)
			VPADDB(sixteen, r, hk, r)
		}
		// The codes: per 16 bytes (a half of Q8_0's 32), four rows per
		// ZMM, transposed so that W[j] lane p holds dword j of row(p).
		halves := 1
		if !c.nib {
			halves = 2
		}
		// The K steps: a register of codes and its activations' offset in
		// the block.
		type step struct {
			r   VecVirtual
			off int
		}
		var steps []step
		for hh := 0; hh < halves; hh++ {
			z := zr
			for q := 0; q < 4; q++ {
				src := Mem{Base: base[q], Disp: boff + c.qs + 16*hh}
				VMOVDQU32(src.Offset(0), z[q].AsX())
				VINSERTI32X4(U8(1), Mem{Base: base[q], Index: stride, Scale: 1, Disp: boff + c.qs + 16*hh}, z[q], z[q])
				VINSERTI32X4(U8(2), Mem{Base: base[q], Index: stride, Scale: 2, Disp: boff + c.qs + 16*hh}, z[q], z[q])
				VINSERTI32X4(U8(3), Mem{Base: base[q], Index: stride3, Scale: 1, Disp: boff + c.qs + 16*hh}, z[q], z[q])
			}
			t0, t1, t2, t3 := tr[0], tr[1], tr[2], tr[3]
			VPUNPCKLDQ(z[1], z[0], t0)
			VPUNPCKHDQ(z[1], z[0], t1)
			VPUNPCKLDQ(z[3], z[2], t2)
			VPUNPCKHDQ(z[3], z[2], t3)
			w := stepRegs[4*hh : 4*hh+4] // Q8_0: the codes themselves
			if c.nib {
				w = zr // consumed by the nibble split
			}
			VPUNPCKLQDQ(t2, t0, w[0])
			VPUNPCKHQDQ(t2, t0, w[1])
			VPUNPCKLQDQ(t3, t1, w[2])
			VPUNPCKHQDQ(t3, t1, w[3])
			for j := 0; j < 4; j++ {
				if !c.nib { // int8 codes as unsigned q+128
					VPXORD(flip, w[j], w[j])
					steps = append(steps, step{w[j], 16*hh + 4*j})
					continue
				}
				lo, hi := stepRegs[2*j], stepRegs[2*j+1]
				VPANDD(w[j], mask, lo)
				VPSRLW(U8(4), w[j], hi) // the high nibbles, masked below
				VPANDD(hi, mask, hi)
				if c.kv { // KValues+128, unsigned
					VPSHUFB(lo, kv, lo)
					VPSHUFB(hi, kv, hi)
				}
				highBits(lo, 4*j)
				highBits(hi, 16+4*j)
				steps = append(steps, step{lo, 4 * j}, step{hi, 16 + 4*j})
			}
		}
		k.prefetch(b)
		// Per quad of slots: four chains of VPDPBUSD interleaved.
		for v0 := 0; v0 < M; v0 += 4 {
			acc := accR
			for i := range acc {
				if c.m { // S from 0: the start value is the M term's
					VPXORD(acc[i], acc[i], acc[i])
					continue
				}
				VPBROADCASTD(Mem{Base: ap, Disp: 128*M + 16*(v0+i) + 4*b}, acc[i])
			}
			for _, s := range steps {
				for i := range acc {
					VPDPBUSD_BCST(Mem{Base: ap, Disp: 128*(v0+i) + 32*b + s.off}, s.r, acc[i])
				}
			}
			for i := range acc {
				v := v0 + i
				f := fR
				VMULPS_BCST(Mem{Base: ap, Disp: 144*M + 4*v}, d, f)
				VCVTDQ2PS(acc[i], acc[i])
				VMULPS(acc[i], f, f)
				VADDPS(Mem{Base: op, Disp: 64 * v}, f, f)
				if c.m { // f - float32(M*xs) * float32(-sx)
					g := acc[i]
					VMULPS_BCST(Mem{Base: ap, Disp: 144*M + 4*v}, mR, g)
					VCVTDQ2PS_BCST(Mem{Base: ap, Disp: 128*M + 16*v + 4*b}, sxR)
					VMULPS(sxR, g, g)
					VSUBPS(g, f, f)
				}
				VMOVUPS(f, Mem{Base: op, Disp: 64 * v})
			}
		}
	}
	k.next(name, M)

	// Rows back in order: lane r takes lane row(r) (the map is an
	// involution).
	perm := ZMM()
	VMOVDQU32(rowTab, perm)
	for v := 0; v < M; v++ {
		t := ZMM()
		VPERMD(Mem{Base: op, Disp: 64 * v}, perm, t)
		VMOVUPS(t, Mem{Base: op, Disp: 64 * v})
	}
	VZEROUPPER()
	RET()
}

// qhSpread returns the tables that spread the Q5_x qh bits of a K step
// whose byte j of each dword lane is element e0+j of the lane's row: ctl
// (for VPSHUFB) copies the qh byte holding bits e0..e0+3 of each dword to
// its four bytes, bits holds bit e0%8+j in byte j. 64 bytes each, for ZMM
// and (their first 32) YMM.
func qhSpread(e0 int) (ctl, bits Mem) {
	ctl = rodata(fmt.Sprintf("ggmlQhByte%d", e0/8), 64, 1, func(i int) uint64 { return uint64(i&^3%16 + e0/8) })
	bits = rodata(fmt.Sprintf("ggmlQhBit%d", e0%8), 64, 1, func(i int) uint64 { return 1 << (e0%8 + i%4) })
	return ctl, bits
}

// ggmlBlockA8TAVX2 emits Ggml<t>A8T<M>Avx2 for Q4_0, Q8_0 and IQ4_NL:
// ggmlBlockA8T's contract and layout on AVX2, 16 rows as two halves of 8
// (one row per dword lane, in order: the 4x4 transposes of two rows per
// YMM keep rows 0..3 in the low lane and 4..7 in the high one). Q4_0:
// VPMADDUBSW of the unsigned codes with a vector's broadcast activations,
// the four dwords' low and high nibble products summed in int16 (at most
// 8*2*15*127 = 30480, no saturation), one VPMADDWD, then the start value
// and the float step. Q8_0 and IQ4_NL (the nibbles looked up in the
// signed KValues): the codes with the activations' signs times |x|
// (signedDot), one VPMADDWD per step (pairs up to 2*128*127), started at
// 0 (the layout's start values are ignored). Q5_0 and Q5_1 add 16 to the
// codes whose qh bit is set (qh in lane order, cpu.repackQhLanes: the
// rows' qh words inserted into one YMM, shifted so that each step's bits
// are its bytes' top bits, VPBLENDVB of the codes plus 16) and sum four
// steps in int16 at a time (at most 4*2*31*127 = 31496); Q4_1 and Q5_1
// start at 0 and subtract float32(m*xs) * float32(-sx), their M term, as
// the AVX-512 kernels do. The rows' d (and m) come from VPINSRW and F16C.
//
// With vnni it emits Ggml<t>A8T<M>AvxVnni instead: each step one VEX
// VPDPBUSD into int32 sums that start at the block's start value (0 for
// Q4_1 and Q5_1), with no int16 runs and no sign trick (Q8_0 and IQ4_NL
// take their codes as q + 128, as on AVX-512).
func ggmlBlockA8TAVX2(c ggmlSmall, M int, vnni bool) {
	if !ggmlT32AVX2Types[c.t] {
		panic("gen: no AVX2 rows-in-lanes kernel for " + c.t)
	}
	q8 := c.t == "Q80"   // signed int8 codes
	signed := q8 || c.kv // signedDot's products, started at 0
	// With VNNI the signed codes become q + 128 instead (Q8_0's bytes
	// flipped, IQ4_NL's looked up in KValues + 128), started at the start
	// values (-128 times the blocks' activation sums) like the unsigned.
	offset := vnni && signed
	if offset {
		signed = false
	}
	isa, what := ymmISA(vnni)
	name := fmt.Sprintf("Ggml%sA8T%d%s", c.t, M, isa)
	TEXT(name, 0, ggmlSigT16)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s is %s for 16 rows and %d vector slots with the rows in the lanes, on %s.", name, "Ggml"+c.t+"A8Avx512", M, what))
	av2 := fvec{}
	var mask, kv VecVirtual
	var nibMask Op // the nibble mask: a register, or (Q4_1, Q5_x: short of them) memory
	switch {
	case c.m || c.qh != 0:
		nibMask = rodata("ggmlNib32", 8, 4, func(int) uint64 { return 0x0f0f0f0f })
	case !q8:
		mask = av2.broadcast(0x0f0f0f0f)
		nibMask = mask
	}
	if c.kv {
		kv = ggmlKValuesYMM(offset)
	}
	var ones VecVirtual
	if !vnni {
		ones = av2.broadcast(0x00010001)
	}
	stride := param("stride")
	stride3 := GP64()
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, stride3)
	op := param("out")
	{
		zero := YMM()
		VPXOR(zero, zero, zero)
		for v := 0; v < 2*M; v++ {
			VMOVUPS(zero, Mem{Base: op, Disp: 32 * v})
		}
	}
	k := newT32Loop(c, stride)
	wp, ap := k.wp, k.ap

	// Registers shared by every block (avo's greedy allocator).
	steps := make([]VecVirtual, 8)
	for i := range steps {
		steps[i] = YMM()
	}
	d, s16, t, xb := YMM(), YMM(), YMM(), YMM()
	dh := d.AsX() // the rows' d as binary16, widened in place
	var mR, s32 VecVirtual
	if c.m { // the rows' m
		mR = YMM()
	}
	run := 8 // K steps summed in int16 before VPMADDWD
	if c.qh != 0 && !vnni {
		run = 4
		s32 = YMM()
	}

	Label(name + "_group")
	for rh := 0; rh < 2; rh++ {
		b0, b4 := GP64(), GP64()
		if rh == 0 {
			MOVQ(wp, b0)
		} else {
			MOVQ(stride, b0)
			SHLQ(U8(3), b0)
			ADDQ(wp, b0)
		}
		LEAQ(Mem{Base: b0, Index: stride, Scale: 4}, b4)
		row := func(r int, disp int) Mem { // row r of the half
			base := b0
			if r >= 4 {
				base = b4
			}
			return []Mem{{Base: base, Disp: disp}, {Base: base, Index: stride, Scale: 1, Disp: disp},
				{Base: base, Index: stride, Scale: 2, Disp: disp}, {Base: base, Index: stride3, Scale: 1, Disp: disp}}[r%4]
		}
		for b := 0; b < 4; b++ {
			boff := b * c.bytes
			// Rows q and 4+q in one YMM, transposed 4x4 by dwords within
			// the lanes: W[j] lane r holds dword j of row r (Q8_0: two
			// halves of 16 code bytes, W[4h+j]).
			halves := 1
			if q8 {
				halves = 2
			}
			var lohi []VecVirtual // the K steps' codes, activations 4 bytes apart in column order
			for hh := 0; hh < halves; hh++ {
				z := steps[4:8]
				tt := steps[0:4]
				if q8 && hh == 0 { // the first half's results stay in steps[0:4]
					z, tt = steps[0:4], steps[4:8]
				}
				for q := 0; q < 4; q++ {
					VMOVDQU(row(q, boff+c.qs+16*hh), z[q].AsX())
					VINSERTI128(U8(1), row(4+q, boff+c.qs+16*hh), z[q], z[q])
				}
				if q8 && hh == 1 { // z is steps[4:8]; tt must not clobber the first half
					tt = []VecVirtual{s16, t, xb, d}
				}
				VPUNPCKLDQ(z[1], z[0], tt[0])
				VPUNPCKHDQ(z[1], z[0], tt[1])
				VPUNPCKLDQ(z[3], z[2], tt[2])
				VPUNPCKHDQ(z[3], z[2], tt[3])
				w := []VecVirtual{z[0], z[1], z[2], z[3]}
				VPUNPCKLQDQ(tt[2], tt[0], w[0])
				VPUNPCKHQDQ(tt[2], tt[0], w[1])
				VPUNPCKLQDQ(tt[3], tt[1], w[2])
				VPUNPCKHQDQ(tt[3], tt[1], w[3])
				if q8 {
					lohi = append(lohi, w...)
					continue
				}
				// lo/hi of dword j into steps[2j], steps[2j+1]: w[j] is
				// steps[4+j], so in order j = 0..3 each pair overwrites only
				// dwords already split (or, for j = 3, its own after its low
				// nibbles are taken).
				for j := 0; j < 4; j++ {
					lo, hi := steps[2*j], steps[2*j+1]
					VPAND(nibMask, w[j], lo)
					VPSRLW(U8(4), w[j], hi)
					VPAND(nibMask, hi, hi)
					if c.kv {
						VPSHUFB(lo, kv, lo)
						VPSHUFB(hi, kv, hi)
					}
				}
				lohi = []VecVirtual{steps[0], steps[2], steps[4], steps[6], steps[1], steps[3], steps[5], steps[7]}
				if c.qh != 0 {
					// The 8 rows' qh, lane r row r (s16 and t are free
					// until the vectors' sums).
					qh, hb := s16, t
					for r := 0; r < 8; r += 4 {
						x := qh.AsX()
						if r == 4 {
							x = hb.AsX()
						}
						VMOVD(row(r, boff+c.qh), x)
						for i := 1; i < 4; i++ {
							VPINSRD(U8(i), row(r+i, boff+c.qh), x, x)
						}
					}
					VINSERTI128(U8(1), hb.AsX(), qh, qh)
					// Step k's byte j of lane r is element 4k+j of row r
					// (e0 = 4(k%4) + 16(k/4) in the block: qh in lane order
					// holds its bit at bit 8j+k): shifted left by 7-k, the
					// bit is each byte's top bit, and VPBLENDVB takes the
					// code plus 16 there.
					for k, r := range lohi {
						v16 := xb
						VPSLLD(U8(7-k), qh, hb)
						VPOR(rodata("ggmlSixteen32", 8, 4, func(int) uint64 { return 0x10101010 }), r, v16)
						VPBLENDVB(hb, v16, r, r)
					}
				}
			}
			if q8 && offset {
				for _, r := range lohi {
					VPXOR(ggmlFlip32(), r, r)
				}
			}
			// d after the transposes (Q8_0's second half borrowed it).
			VPXOR(dh, dh, dh)
			for r := 0; r < 8; r++ {
				VPINSRW(U8(r), row(r, boff), dh, dh)
			}
			VCVTPH2PS(dh, d)
			if c.m {
				mh := mR.AsX()
				VPXOR(mh, mh, mh)
				for r := 0; r < 8; r++ {
					VPINSRW(U8(r), row(r, boff+2), mh, mh)
				}
				VCVTPH2PS(mh, mR)
			}
			if rh == 0 {
				k.prefetch(b)
			}
			for v := 0; v < M; v++ {
				// K step k: codes lohi[k], activations 4k on in the block
				// (Q4_0: steps 0..3 the low nibbles, 4..7 the high ones,
				// 16 columns on; Q8_0: the 8 dwords in order).
				if vnni { // every code unsigned: the sums start at the start value
					if c.m {
						VPXOR(s16, s16, s16)
					} else {
						VPBROADCASTD(Mem{Base: ap, Disp: 128*M + 16*v + 4*b}, s16)
					}
				}
				for k := 0; k < 8; k++ {
					if vnni {
						VPBROADCASTD(Mem{Base: ap, Disp: 128*v + 32*b + 4*k}, xb)
						vpdpbusdY(xb, lohi[k], s16)
						continue
					}
					VPBROADCASTD(Mem{Base: ap, Disp: 128*v + 32*b + 4*k}, xb)
					if signed {
						// pairs at most 2*128*127, so each step widens
						// to int32 at once
						signedDot(lohi[k], xb, nil, xb)
						VPMADDWD(ones, xb, xb)
						if k == 0 {
							VMOVDQA(xb, s16)
						} else {
							VPADDD(xb, s16, s16)
						}
						continue
					}
					if k%run == 0 {
						VPMADDUBSW(xb, lohi[k], s16)
					} else {
						VPMADDUBSW(xb, lohi[k], t)
						VPADDW(t, s16, s16)
					}
					if run == 4 && k == 3 { // the first run's dwords
						VPMADDWD(ones, s16, s32)
					}
				}
				if !signed && !vnni {
					VPMADDWD(ones, s16, s16)
					if run == 4 {
						VPADDD(s32, s16, s16)
					}
					if !c.m { // the codes' offset times the block's sum
						VPBROADCASTD(Mem{Base: ap, Disp: 128*M + 16*v + 4*b}, t)
						VPADDD(t, s16, s16)
					}
				}
				VBROADCASTSS(Mem{Base: ap, Disp: 144*M + 4*v}, xb)
				VMULPS(d, xb, xb) // float32(d*xs)
				VCVTDQ2PS(s16, s16)
				VMULPS(s16, xb, xb)
				VADDPS(Mem{Base: op, Disp: 64*v + 32*rh}, xb, xb)
				if c.m { // xb - float32(m*xs) * float32(-sx)
					VBROADCASTSS(Mem{Base: ap, Disp: 144*M + 4*v}, t)
					VMULPS(mR, t, t)
					VPBROADCASTD(Mem{Base: ap, Disp: 128*M + 16*v + 4*b}, s16)
					VCVTDQ2PS(s16, s16)
					VMULPS(s16, t, t)
					VSUBPS(t, xb, xb)
				}
				VMOVUPS(xb, Mem{Base: op, Disp: 64*v + 32*rh})
			}
		}
	}
	k.next(name, M)
	VZEROUPPER()
	RET()
}

// t32Loop is the group loop the 32-element rows-in-lanes kernels share:
// the rows, activations and group pointers, and the next 16 rows' run
// (16 rows of nsb groups, contiguous), prefetched into L2 a group's share
// at a time.
type t32Loop struct {
	wp, ap, g, pf GPVirtual
	groupBytes    int
	pfLines       int
}

func newT32Loop(c ggmlSmall, stride GPVirtual) *t32Loop {
	k := &t32Loop{wp: param("w"), ap: param("act"), g: param("nsb"), pf: GP64(), groupBytes: 4 * c.bytes}
	MOVQ(stride, k.pf)
	SHLQ(U8(4), k.pf)
	ADDQ(k.wp, k.pf)
	k.pfLines = (16*k.groupBytes + 63) / 64
	return k
}

// prefetch issues block b's quarter of the group's prefetches.
func (k *t32Loop) prefetch(b int) {
	per := k.pfLines/4 + 1
	for l := 0; l < per && b*per+l < k.pfLines; l++ {
		PREFETCHT1(Mem{Base: k.pf, Disp: 64 * (b*per + l)})
	}
}

// next moves to the next group (M slots' activations) and loops.
func (k *t32Loop) next(name string, M int) {
	ADDQ(U32(k.groupBytes), k.wp)
	ADDQ(U32(148*M), k.ap)
	ADDQ(U32(16*k.groupBytes), k.pf)
	DECQ(k.g)
	JNZ(LabelRef(name + "_group"))
}
