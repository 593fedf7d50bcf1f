package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Activation preparation (asm/act_amd64.s): binary16 widening and
// rounding, and the int8 quantizer of W4A8 and the low-bit A8 kernels.

// actKernels emits the activation preparation family.
func actKernels() {
	widenF16()
	narrowF16()
	quantA8(true)
	quantA8(false)
	swiGLU()
	interleave4x16()
}

// interleave4x16 emits Interleave4x16Avx: for each of n output blocks of
// 64 bytes, dst[64i + 4t + e] = src[offs[4i+e] + t] (t < 16, e < 4): four
// 16-byte runs of src interleaved byte by byte, the layout the Bits A8
// kernels read their activations in (cpu.gatherActs).
func interleave4x16() {
	TEXT("Interleave4x16Avx", NOSPLIT, "func(dst *byte, src *byte, offs *int32, n int)")
	Pragma("noescape")
	kernelDoc("Activation kernels", "Interleave4x16Avx interleaves, for each of n 64-byte output blocks, four 16-byte runs of src at the block's four offsets byte by byte (dst[64i+4t+e] = src[offs[4i+e]+t]), with AVX.")
	dst, src, offs, n := param("dst"), param("src"), param("offs"), param("n")
	TESTQ(n, n)
	JZ(LabelRef("il_done"))
	Label("il_loop")
	var x [4]VecVirtual
	for e := range x {
		o := GP64()
		MOVLQSX(Mem{Base: offs, Disp: 4 * e}, o)
		x[e] = XMM()
		VMOVDQU(Mem{Base: src, Index: o, Scale: 1}, x[e])
	}
	abLo, abHi, cdLo, cdHi := XMM(), XMM(), XMM(), XMM()
	VPUNPCKLBW(x[1], x[0], abLo) // a0 b0 a1 b1 ...
	VPUNPCKHBW(x[1], x[0], abHi)
	VPUNPCKLBW(x[3], x[2], cdLo)
	VPUNPCKHBW(x[3], x[2], cdHi)
	for k, pair := range [][2]VecVirtual{{abLo, cdLo}, {abLo, cdLo}, {abHi, cdHi}, {abHi, cdHi}} {
		o := XMM()
		if k%2 == 0 {
			VPUNPCKLWD(pair[1], pair[0], o) // a b c d per column
		} else {
			VPUNPCKHWD(pair[1], pair[0], o)
		}
		VMOVDQU(o, Mem{Base: dst, Disp: 16 * k})
	}
	ADDQ(U32(64), dst)
	ADDQ(U32(16), offs)
	DECQ(n)
	JNZ(LabelRef("il_loop"))
	Label("il_done")
	RET()
}

// swiGLUExp are the coefficients of cpu.expf's polynomial (Cephes expf):
// exp(r) = 1 + r + r^2*(((((c0 r + c1) r + c2) r + c3) r + c4) r + c5)
// on |r| <= ln(2)/2.
var swiGLUExp = [6]float32{1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1}

// swiGLU emits SwiGLUAvx512: d = g / (1 + exp(-g)) * u over n float32
// (a multiple of 16), exp as cpu.expf computes it: the argument clamped
// to [-104, 89] (NaN passes), n = round(y*log2(e)), r = y - n*ln2 in two
// parts, the polynomial, then VSCALEFPS for 2^n (overflow to +Inf,
// underflow to 0).
func swiGLU() {
	TEXT("SwiGLUAvx512", NOSPLIT, "func(d *float32, gate *float32, up *float32, n int)")
	Pragma("noescape")
	kernelDoc("Activation kernels", "SwiGLUAvx512 computes d = gate / (1 + exp(-gate)) * up for n float32 (a multiple of 16) with AVX-512F, exp by range reduction, a degree-7 polynomial and VSCALEFPS, as cpu.expf.")
	f := fvec{avx512: true}
	bc := func(v float32) VecVirtual { return f.broadcast(math.Float32bits(v)) }
	lo, hi, log2e := bc(-104), bc(89), bc(float32(math.Log2E))
	ln2hi, ln2lo, one := bc(0.693359375), bc(-2.12194440e-4), bc(1)
	var c [6]VecVirtual
	for i, v := range swiGLUExp {
		c[i] = bc(v)
	}
	dp, gp, up, n := param("d"), param("gate"), param("up"), param("n")
	SHRQ(U8(4), n)
	Label("SwiGLUAvx512_loop")
	x, y, k, r, p := ZMM(), ZMM(), ZMM(), ZMM(), ZMM()
	VMOVUPS(Mem{Base: gp}, x)
	VPXORD(y, y, y)
	VSUBPS(x, y, y)  // y = -x
	VMAXPS(y, lo, y) // NaN in y passes (the second source of VMAXPS)
	VMINPS(y, hi, y)
	VMULPS(log2e, y, k)
	VRNDSCALEPS(U8(0), k, k) // round to nearest even
	VMOVAPS(y, r)
	VFNMADD231PS(ln2hi, k, r) // r -= k*ln2hi
	VFNMADD231PS(ln2lo, k, r) // r -= k*ln2lo
	VMOVAPS(c[0], p)
	for i := 1; i < 6; i++ {
		VFMADD213PS(c[i], r, p) // p = p*r + c[i]
	}
	r2 := ZMM()
	VMULPS(r, r, r2)
	VFMADD213PS(r, r2, p) // p = p*r^2 + r
	VADDPS(one, p, p)     // exp(r)
	VSCALEFPS(k, p, p)    // * 2^k
	VADDPS(one, p, p)     // 1 + exp(-x)
	VDIVPS(p, x, x)       // x / (1 + exp(-x))
	VMULPS(Mem{Base: up}, x, x)
	VMOVUPS(x, Mem{Base: dp})
	ADDQ(U32(64), gp)
	ADDQ(U32(64), up)
	ADDQ(U32(64), dp)
	DECQ(n)
	JNZ(LabelRef("SwiGLUAvx512_loop"))
	VZEROUPPER()
	RET()
}

// widenF16 emits the binary16 to float32 widening of activations.
func widenF16() {
	f16Loop("WidenF16", "func(dst *float32, src *uint16, n int)",
		"WidenF16 widens n binary16 values at src to float32 at dst with F16C (VCVTPH2PS on YMM), 32 per iteration.",
		2, 4, func(s, d Mem) {
			y := YMM()
			VCVTPH2PS(s, y)
			VMOVUPS(y, d)
		})
}

// narrowF16 emits the float32 to binary16 rounding of activations.
func narrowF16() {
	f16Loop("NarrowF16", "func(dst *uint16, src *float32, n int)",
		"NarrowF16 rounds n float32 values at src to binary16 at dst, to nearest with ties to even (VCVTPS2PH with rounding control 0, whatever MXCSR says), with F16C on YMM, 32 per iteration; n is a multiple of 32.",
		4, 2, func(s, d Mem) {
			y, x := YMM(), XMM()
			VMOVUPS(s, y)
			VCVTPS2PH(U8(0), y, x)
			VMOVDQU(x, d)
		})
}

// f16Loop emits a conversion of n values (a multiple of 32) from src,
// of in bytes each, to dst, of out bytes each: four conversions of eight
// values (one) per iteration.
func f16Loop(name, sig, doc string, in, out int, one func(s, d Mem)) {
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	kernelDoc("Activation kernels", doc)
	d, s, n := param("dst"), param("src"), param("n")
	SHRQ(U8(5), n)
	Label(name + "_loop")
	for i := 0; i < 4; i++ {
		one(Mem{Base: s, Disp: 8 * in * i}, Mem{Base: d, Disp: 8 * out * i})
	}
	ADDQ(U32(32*in), s)
	ADDQ(U32(32*out), d)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	VZEROUPPER()
	RET()
}

// quantA8 emits QuantizeA8Avx512 (zmm) or QuantizeA8Avx2 (ymm): the int8
// activation quantizer of layout.QuantizeA8 over whole groups of 128.
//
// The absolute values' bit patterns are compared as unsigned integers
// (for non-negative floats the orders agree), so one integer maximum gives
// the group's amax and flags NaN and Inf (patterns above MaxFloat32).
func quantA8(avx512 bool) {
	f := fvec{avx512}
	name, W := "QuantizeA8"+f.suffix(), f.lanes()
	isa := map[bool]string{true: "AVX-512F, BW and VL", false: "AVX2"}[avx512]
	n := 128 / W
	TEXT(name, NOSPLIT, "func(x *float32, groups int, q *int8, scales *float32) int")
	Pragma("noescape")
	kernelDoc("Activation kernels", name+" quantizes groups of 128 float32 at x to int8 at q with one scale per group, with "+isa+", exactly as layout.QuantizeA8 does, up to the first group it leaves to the caller.")
	xp, g, qp, sp := param("x"), param("groups"), param("q"), param("scales")
	abs := f.broadcast(0x7fffffff)
	lo, hi := f.broadcast(0xffffff81), f.broadcast(127) // -127, 127
	c127 := XMM()
	{
		t := GP32()
		MOVL(U32(0x42fe0000), t) // 127.0
		VMOVD(t, c127)
	}
	perm := f.reg() // the narrowing's lane order, loaded once
	if avx512 {
		VMOVDQU32(quantPerm512(), perm)
	} else {
		VMOVDQU(quantPerm(), perm)
	}
	i := GP64()
	XORQ(i, i)
	CMPQ(g, U8(0))
	JE(LabelRef(name + "_done"))
	if avx512 {
		quantA8Quads(name, xp, g, qp, sp, i, abs, perm, c127)
	} else {
		quantA8QuadsYMM(name, xp, g, qp, sp, i, abs, perm, c127)
	}

	Label(name + "_group")
	// Integer max of the |x| bit patterns, then across lanes. Four
	// running maxima keep the YMM form within 16 registers.
	m := []VecVirtual{groupAmax(f, Mem{Base: xp}, abs, 4)}
	a := XMM()
	if avx512 {
		t := YMM()
		VEXTRACTI64X4(U8(1), m[0], t)
		VPMAXUD(t, m[0].AsY(), t)
		VEXTRACTI128(U8(1), t, a)
		VPMAXUD(t.AsX(), a, a)
	} else {
		VEXTRACTI128(U8(1), m[0], a)
		VPMAXUD(m[0].AsX(), a, a)
	}
	t := XMM()
	VPSHUFD(U8(0x4e), a, t)
	VPMAXUD(t, a, a)
	VPSHUFD(U8(0xb1), a, t)
	VPMAXUD(t, a, a)
	bits := GP32()
	VMOVD(a, bits)
	TESTL(bits, bits)
	JE(LabelRef(name + "_zero"))
	CMPL(bits, U32(0x7f7fffff)) // NaN or Inf
	JA(LabelRef(name + "_out"))
	CMPL(bits, U32(27<<23)) // below 2^-100
	JB(LabelRef(name + "_out"))

	s := XMM()
	VDIVSS(c127, a, s) // amax / 127
	VMOVSS(s, Mem{Base: sp, Index: i, Scale: 4})
	inv := XMM()
	VDIVSS(a, c127, inv) // 127 / amax
	invv := f.reg()
	VBROADCASTSS(inv, invv)
	for k0 := 0; k0 < n; k0 += 4 {
		quantFour(f, Mem{Base: xp, Disp: 4 * W * k0}, invv, perm, Mem{Base: qp, Disp: W * k0}, lo, hi)
	}
	Label(name + "_next")
	ADDQ(U32(512), xp)
	SUBQ(I8(-128), qp)
	INCQ(i)
	CMPQ(i, g)
	JB(LabelRef(name + "_group"))
	Label(name + "_done")
	MOVQ(I64(-1), i)
	Label(name + "_out")
	Store(i, ReturnIndex(0))
	VZEROUPPER()
	RET()

	Label(name + "_zero")
	z := f.reg()
	f.zero(z)
	VMOVSS(z.AsX(), Mem{Base: sp, Index: i, Scale: 4})
	for k := 0; k < 128/(4*W); k++ {
		f.store(z, Mem{Base: qp, Disp: 4 * W * k})
	}
	JMP(LabelRef(name + "_next"))
}

// groupAmax returns, lane by lane, the unsigned maximum of the |x| bit
// patterns (abs clears the sign) of the 128 float32 at x: chains running
// maxima over every chains-th vector (independent, for the core to
// overlap), then combined pairwise.
func groupAmax(f fvec, x Mem, abs VecVirtual, chains int) VecVirtual {
	m := make([]VecVirtual, chains)
	for k := 0; k < 128/f.lanes(); k++ {
		at := x.Offset(4 * f.lanes() * k)
		if k < chains {
			m[k] = f.reg()
			f.and(at, abs, m[k])
			continue
		}
		t := f.reg()
		f.and(at, abs, t)
		VPMAXUD(t, m[k%chains], m[k%chains])
	}
	for len(m) > 1 {
		for k := 0; k < len(m)/2; k++ {
			VPMAXUD(m[2*k+1], m[2*k], m[k])
		}
		m = m[:len(m)/2]
	}
	return m[0]
}

// quantFour multiplies the four vectors of float32 at x by inv, rounds
// them to int32 half to even (the MXCSR default), clamps them to [lo,
// hi] where given, and stores them as bytes at q. VPACKSSDW and VPACKSSWB
// interleave the 128-bit lanes and VPERMD (perm) restores the order: on
// ZMM one 64-byte store where four VPMOVDB stores took 0.5x-0.6x of a
// group's time on Zen 4 (those stores are slow there).
func quantFour(f fvec, x Mem, inv, perm VecVirtual, q Mem, clamp ...VecVirtual) {
	xs := make([]VecVirtual, 4)
	for j := range xs {
		xs[j] = f.reg()
		VMULPS(x.Offset(4*f.lanes()*j), inv, xs[j])
		VCVTPS2DQ(xs[j], xs[j])
		if clamp != nil {
			VPMAXSD(clamp[0], xs[j], xs[j])
			VPMINSD(clamp[1], xs[j], xs[j])
		}
	}
	VPACKSSDW(xs[1], xs[0], xs[0])
	VPACKSSDW(xs[3], xs[2], xs[2])
	VPACKSSWB(xs[2], xs[0], xs[0])
	VPERMD(xs[0], perm, xs[0])
	f.store(xs[0], q)
}

// quadHead opens a quantizer's loop over four groups at a time (label
// name+"_quad"), leaving it for name+"_tail" when fewer than four of the
// g groups remain after group i.
func quadHead(name string, g, i Register) {
	left := GP64()
	Label(name + "_quad")
	MOVQ(g, left)
	SUBQ(i, left)
	CMPQ(left, U8(4))
	JB(LabelRef(name + "_tail"))
}

// quadTail closes it: x, q and i move on four groups; past the loop the
// remaining groups go to the single-group loop (label name+"_group") or,
// with none left, to name+"_done".
func quadTail(name string, xp, qp, g, i Register) {
	ADDQ(U32(2048), xp)
	ADDQ(U32(512), qp)
	ADDQ(U8(4), i)
	JMP(LabelRef(name + "_quad"))
	Label(name + "_tail")
	CMPQ(i, g)
	JAE(LabelRef(name + "_done"))
}

// quantA8Quads emits QuantizeA8Avx512's loop over four groups at a time,
// while four remain: one group's loop is bound by the latency of its
// amax reduction and division, and a Zen 4 core overlapped too little of
// the next group with it (1.79 us for 14336 values against 1.06 with
// four).
// Each group's amax is the unsigned maximum of the |x| bit patterns (a
// NaN or Inf above every finite value, flagged by one unsigned compare),
// the four are reduced together to one 128-bit lane each, and one
// division gives the four scales and one the four inverses. A quad with
// a group the single-group loop treats apart (amax zero, below 2^-100,
// NaN or Inf) goes to that loop, which then takes the rest. The rounded
// products lie in [-127, 127] without clamps (|x| <= amax, so x*inv is
// at most 127(1+2^-24)^2), which the packs' saturation leaves as they are.
func quantA8Quads(name string, xp, g, qp, sp, i Register, abs, perm, c127 VecVirtual) {
	c127v, c27, lim, sidx := ZMM(), ZMM(), ZMM(), ZMM()
	VBROADCASTSS(c127, c127v)
	{
		t := GP32()
		MOVL(U32(27<<23), t) // 2^-100
		VPBROADCASTD(t, c27)
		MOVL(U32(0x7f7fffff-27<<23), t) // MaxFloat32 - 2^-100 (bit patterns)
		VPBROADCASTD(t, lim)
		VMOVDQU32(rodata("quantScaleIdx", 16, 4, func(k int) uint64 { return uint64(4 * (k % 4)) }), sidx)
	}
	quadHead(name, g, i)
	m := make([]VecVirtual, 4)
	for j := range m {
		m[j] = groupAmax(fvec{true}, Mem{Base: xp, Disp: 512 * j}, abs, 2)
	}
	// 256-bit halves of groups 0 and 1 (2 and 3) side by side, then
	// 128-bit quarters: lane j of r holds group j's four partial maxima.
	u, v := ZMM(), ZMM()
	VSHUFI64X2(U8(0x44), m[1], m[0], u)
	VSHUFI64X2(U8(0xee), m[1], m[0], v)
	VPMAXUD(v, u, m[0])
	VSHUFI64X2(U8(0x44), m[3], m[2], u)
	VSHUFI64X2(U8(0xee), m[3], m[2], v)
	VPMAXUD(v, u, m[2])
	VSHUFI64X2(U8(0x88), m[2], m[0], u)
	VSHUFI64X2(U8(0xdd), m[2], m[0], v)
	r := ZMM()
	VPMAXUD(v, u, r)
	VPSHUFD(U8(0x4e), r, u)
	VPMAXUD(u, r, r)
	VPSHUFD(U8(0xb1), r, u)
	VPMAXUD(u, r, r) // lane j: group j's amax in every dword
	VPSUBD(c27, r, u)
	k := K()
	VPCMPUD(U8(6), lim, u, k) // amax - 2^-100 above the range (unsigned): zero, tiny, NaN or Inf
	KORTESTW(k, k)
	JNZ(LabelRef(name + "_group"))
	sc, inv := ZMM(), ZMM()
	VDIVPS(c127v, r, sc) // amax / 127
	VPERMD(sc, sidx, sc)
	VMOVDQU32(sc.AsX(), Mem{Base: sp, Index: i, Scale: 4})
	VDIVPS(r, c127v, inv) // 127 / amax
	for j := 0; j < 4; j++ {
		iv := ZMM()
		VSHUFI32X4(U8(uint8(0x55*j)), inv, inv, iv)
		for k0 := 0; k0 < 8; k0 += 4 {
			quantFour(fvec{true}, Mem{Base: xp, Disp: 512*j + 64*k0}, iv, perm, Mem{Base: qp, Disp: 128*j + 16*k0})
		}
	}
	quadTail(name, xp, qp, g, i)
}

// quantA8QuadsYMM is quantA8Quads for QuantizeA8Avx2: the same four
// groups at a time in 16 YMM registers. Two groups share a register in
// the reduction (one 128-bit lane each), the special groups are found by
// a signed compare of the amax bit patterns with their top bits flipped
// (AVX2 has no unsigned one), and VPERM2I128 broadcasts a group's inverse.
func quantA8QuadsYMM(name string, xp, g, qp, sp, i Register, abs, perm, c127 VecVirtual) {
	quadHead(name, g, i)
	m := make([]VecVirtual, 4)
	for j := range m {
		m[j] = groupAmax(fvec{false}, Mem{Base: xp, Disp: 512 * j}, abs, 2)
	}
	// 128-bit halves of groups 0 and 2 (1 and 3) side by side: lane h
	// of r[p] holds group 2h+p's four partial maxima.
	r := []VecVirtual{YMM(), YMM()}
	for p := 0; p < 2; p++ {
		u, v := YMM(), YMM()
		VPERM2I128(U8(0x20), m[p+2], m[p], u)
		VPERM2I128(U8(0x31), m[p+2], m[p], v)
		VPMAXUD(v, u, r[p])
		VPSHUFD(U8(0x4e), r[p], u)
		VPMAXUD(u, r[p], r[p])
		VPSHUFD(U8(0xb1), r[p], u)
		VPMAXUD(u, r[p], r[p]) // every dword of lane h: the group's amax
	}
	// amax - 2^-100 above MaxFloat32 - 2^-100 (unsigned): zero, tiny, NaN or Inf
	c27 := rodata("quantTiny8", 8, 4, func(int) uint64 { return 27 << 23 })
	flip := rodata("quantFlip8", 8, 4, func(int) uint64 { return 0x80000000 })
	lim := rodata("quantLim8", 8, 4, func(int) uint64 { return (0x7f7fffff - 27<<23) ^ 0x80000000 })
	sp0, sp1 := YMM(), YMM()
	for p, t := range []VecVirtual{sp0, sp1} {
		VPSUBD(c27, r[p], t)
		VPXOR(flip, t, t)
		VPCMPGTD(lim, t, t)
	}
	VPOR(sp1, sp0, sp0)
	VPTEST(sp0, sp0)
	JNZ(LabelRef(name + "_group"))
	c127v := YMM()
	VBROADCASTSS(c127, c127v)
	// the scales amax/127: s0 = [g0 x4 | g2 x4], s1 = [g1 x4 | g3 x4]
	s0, s1 := YMM(), YMM()
	VDIVPS(c127v, r[0], s0)
	VDIVPS(c127v, r[1], s1)
	VPUNPCKLDQ(s1, s0, s0)   // [g0 g1 g0 g1 | g2 g3 g2 g3]
	VPERMQ(U8(0x08), s0, s0) // qwords 0 and 2: g0 g1 g2 g3
	VMOVDQU(s0.AsX(), Mem{Base: sp, Index: i, Scale: 4})
	inv := []VecVirtual{YMM(), YMM()}
	VDIVPS(r[0], c127v, inv[0]) // 127 / amax
	VDIVPS(r[1], c127v, inv[1])
	for j := 0; j < 4; j++ {
		iv := YMM()
		VPERM2I128(U8(uint8(0x11*(j/2))), inv[j%2], inv[j%2], iv)
		for k0 := 0; k0 < 16; k0 += 4 {
			quantFour(fvec{false}, Mem{Base: xp, Disp: 512*j + 32*k0}, iv, perm, Mem{Base: qp, Disp: 128*j + 8*k0})
		}
	}
	quadTail(name, xp, qp, g, i)
}

// quantPerm512 is quantPerm for ZMM: after the packs, dword 4l+j holds
// bytes 4l..4l+3 of vector j (l the 128-bit lane); vector j's 16 bytes go
// to dwords 4j..4j+3.
func quantPerm512() Mem {
	return rodata("quantPerm512", 16, 4, func(k int) uint64 { return uint64(k%4*4 + k/4) })
}

// quantPerm is the VPERMD order that undoes the lane interleaving of two
// VPACKSSDW and a VPACKSSWB on YMM: dwords 0 4 1 5 2 6 3 7.
func quantPerm() Mem {
	order := []uint64{0, 4, 1, 5, 2, 6, 3, 7}
	return rodata("quantPerm", 8, 4, func(k int) uint64 { return order[k] })
}
