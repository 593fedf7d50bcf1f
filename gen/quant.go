package main

import (
	"math/bits"

	"github.com/mmcloughlin/avo/gotypes"
	. "github.com/mmcloughlin/avo/reg"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
)

// Weight quantization (asm/quant_amd64.s): the candidate encoders of
// layout.QuantizeQ4G128 and of the Bits and Sparse12 quantizers, which try
// about 75 scale and zero candidates per group when quantizing float
// tensors on load.

// quantKernels emits the weight quantization family.
func quantKernels() {
	q4Encode()
	q4EncodeAvx512()
	bitsEncode()
	bitsEncodeAvx512()
}

// paramAddr is the stack address of a scalar argument or result.
func paramAddr(c gotypes.Component) Mem {
	b, err := c.Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// q4Encode emits Q4EncodeAvx2: the codes of n float32 values for one
// candidate (s, z) and the squared error of the dequantized values, in
// layout's definition (encodeGroupGo): per value
//
//	c = clamp(round(v/s) + z, 0, 15)   (round: halves away from zero)
//	d = float64(float32(c - z) * s) - float64(v)
//
// and d*d summed in float64 in eight lanes (value i in lane i mod 8),
// combined as ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).
//
// The rounding: v/s clamped to [-16, 16] (every value beyond takes the
// same clamped code), rounded to nearest even (VROUNDPS), and where that
// left exactly 1/2 (a tie; x - round(x) is exact here) x + copysign(1/2,
// x) instead, which is an exact integer.
func q4Encode() {
	TEXT("Q4EncodeAvx2", NOSPLIT, "func(vals *float32, n int, q *uint8, s float32, z float32, best float64) float64")
	Pragma("noescape")
	kernelDoc("Weight quantization kernels", "Q4EncodeAvx2 writes the 4-bit codes of n float32 values for scale s and zero z and returns the squared error of their dequantized values, with AVX2, exactly as layout's Go encoder.")
	vp, n, qp := param("vals"), param("n"), param("q")
	// VEX forms only: avo's Load and Store of a float32 or float64 write
	// legacy MOVSS/MOVSD, and mixing those with dirty upper YMM halves
	// stalls (docs/KERNELS.md).
	s, z := YMM(), YMM()
	VBROADCASTSS(paramAddr(Param("s")), s)
	VBROADCASTSS(paramAddr(Param("z")), z)
	f32 := func(name string, bits uint32) Mem {
		return rodata("q4enc"+name, 8, 4, func(int) uint64 { return uint64(bits) })
	}
	lo, hi, half, abs, sign := f32("Lo", 0xc1800000), f32("Hi", 0x41800000), f32("Half", 0x3f000000), f32("Abs", 0x7fffffff), f32("Sign", 0x80000000)
	zero, fifteen := f32("Zero", 0), f32("Fifteen", 0x41700000)
	accLo, accHi := YMM(), YMM() // lanes 0-3 and 4-7, as float64
	VXORPD(accLo, accLo, accLo)
	VXORPD(accHi, accHi, accHi)

	// encode8 returns the steps that encode the eight values at byte
	// offset 4*o of vals: the loop interleaves two such streams, whose
	// dependency chains (about 60 cycles from the load to the sums) would
	// otherwise fill the scheduler one group of eight at a time.
	encode8 := func(o int) []func() {
		v, x, r, tie, away := YMM(), YMM(), YMM(), YMM(), YMM()
		dh, vh := YMM(), YMM()
		var steps []func()
		step := func(f func()) { steps = append(steps, f) }
		step(func() { VMOVUPS(Mem{Base: vp, Disp: 4 * o}, v) })
		step(func() { VDIVPS(s, v, x) })
		step(func() { VMAXPS(lo, x, x) })
		step(func() { VMINPS(hi, x, x) })
		step(func() { VROUNDPS(U8(8), x, r) }) // nearest even, no precision exception
		step(func() { VSUBPS(r, x, tie) })
		step(func() { VANDPS(sign, x, away) }) // x's sign bit
		step(func() { VANDPS(abs, tie, tie) })
		step(func() { VORPS(half, away, away) })
		step(func() { VCMPPS(U8(0), half, tie, tie) }) // |x - r| == 1/2
		step(func() { VADDPS(x, away, away) })
		step(func() { VBLENDVPS(tie, away, r, r) })
		step(func() { VADDPS(z, r, r) })
		step(func() { VMAXPS(zero, r, r) })
		step(func() { VMINPS(fifteen, r, r) }) // the code as a float
		// codes to bytes (x and tie reused)
		step(func() { VCVTTPS2DQ(r, x) })
		step(func() { VSUBPS(z, r, r) })
		step(func() { VEXTRACTI128(U8(1), x, tie.AsX()) })
		step(func() { VMULPS(s, r, r) }) // (c - z) * s in float32
		step(func() { VPACKSSDW(tie.AsX(), x.AsX(), tie.AsX()) })
		step(func() { VCVTPS2PD(r.AsX(), dh) })
		step(func() { VCVTPS2PD(v.AsX(), vh) })
		step(func() { VPACKUSWB(tie.AsX(), tie.AsX(), tie.AsX()) })
		step(func() { VSUBPD(vh, dh, dh) })
		step(func() { VEXTRACTF128(U8(1), r, r.AsX()) })
		step(func() { VEXTRACTF128(U8(1), v, v.AsX()) })
		step(func() { VMOVQ(tie.AsX(), Mem{Base: qp, Disp: o}) })
		step(func() { VMULPD(dh, dh, dh) })
		step(func() { VCVTPS2PD(r.AsX(), r) })
		step(func() { VCVTPS2PD(v.AsX(), v) })
		step(func() { VADDPD(dh, accLo, accLo) })
		step(func() { VSUBPD(v, r, r) })
		step(func() { VMULPD(r, r, r) })
		step(func() { VADDPD(r, accHi, accHi) })
		return steps
	}

	encoderLoop("q4enc", n, 8, encode8, 0, vp, qp, 1, func() { sumAbove(accLo, accHi, "q4enc_ret") }, "q4enc_sum")
	Label("q4enc_sum")
	laneSumReturn(accLo, accHi, "q4enc_ret")
}

// bitsEncode emits BitsEncodeAvx2: the codes of n float32 values for one
// candidate (s, z) of the Bits quantizer (layout's fitter) and the
// squared error of the dequantized values, all in float64: per value
//
//	c = clamp(round(float64(v)/s + z), 0, qmax)   (round: halves away from zero)
//	d = (c - z)*s - float64(v)
//
// and d*d summed in eight lanes as in Q4EncodeAvx2. The rounding is
// VROUNDPD's nearest even, and y + copysign(1/2, y) where y - round(y) is
// exactly 1/2 (exact: y and its nearest integer are close); y = v/s + z
// is infinite only when v/s overflows, and clamps to 0 or qmax as in Go.
func bitsEncode() {
	TEXT("BitsEncodeAvx2", NOSPLIT, "func(vals *float32, n int, q *uint32, s, z, qmax, best float64) float64")
	Pragma("noescape")
	kernelDoc("Weight quantization kernels", "BitsEncodeAvx2 writes the codes in [0, qmax] of n float32 values for scale s and zero z and returns the squared error of their dequantized values, in float64 with AVX2, exactly as layout's Go fitter.")
	vp, n, qp := param("vals"), param("n"), param("q")
	s, z, qmax := YMM(), YMM(), YMM()
	VBROADCASTSD(paramAddr(Param("s")), s)
	VBROADCASTSD(paramAddr(Param("z")), z)
	VBROADCASTSD(paramAddr(Param("qmax")), qmax)
	f64 := func(name string, bits uint64) Mem {
		return rodata("bitsenc"+name, 4, 8, func(int) uint64 { return bits })
	}
	half, abs, sign := f64("Half", 0x3fe0000000000000), f64("Abs", 0x7fffffffffffffff), f64("Sign", 0x8000000000000000)
	accLo, accHi := YMM(), YMM() // lanes 0-3 and 4-7
	VXORPD(accLo, accLo, accLo)
	VXORPD(accHi, accHi, accHi)
	zero := YMM()
	VXORPD(zero, zero, zero)

	// encode4 returns the steps that encode the four values at byte offset
	// 4*o of vals into acc; the loop interleaves the two halves of eight.
	encode4 := func(o int, acc VecVirtual) []func() {
		v, y, r, tie, away := YMM(), YMM(), YMM(), YMM(), YMM()
		var steps []func()
		step := func(f func()) { steps = append(steps, f) }
		step(func() { VCVTPS2PD(Mem{Base: vp, Disp: 4 * o}, v) })
		step(func() { VDIVPD(s, v, y) })
		step(func() { VADDPD(z, y, y) })
		step(func() { VROUNDPD(U8(8), y, r) }) // nearest even, no precision exception
		step(func() { VSUBPD(r, y, tie) })
		step(func() { VANDPD(sign, y, away) }) // y's sign bit
		step(func() { VANDPD(abs, tie, tie) })
		step(func() { VORPD(half, away, away) })
		step(func() { VCMPPD(U8(0), half, tie, tie) }) // |y - r| == 1/2
		step(func() { VADDPD(y, away, away) })
		step(func() { VBLENDVPD(tie, away, r, r) })
		step(func() { VMAXPD(zero, r, r) })
		step(func() { VMINPD(qmax, r, r) }) // the code as a float64
		step(func() { VCVTTPD2DQY(r, y.AsX()) })
		step(func() { VSUBPD(z, r, r) })
		step(func() { VMOVDQU(y.AsX(), Mem{Base: qp, Disp: 4 * o}) })
		step(func() { VMULPD(s, r, r) })
		step(func() { VSUBPD(v, r, r) })
		step(func() { VMULPD(r, r, r) })
		step(func() { VADDPD(r, acc, acc) })
		return steps
	}
	// n a multiple of 8: the two groups of four are each eight's halves
	halves := func(o int) []func() { return encode4(o, map[bool]VecVirtual{true: accLo, false: accHi}[o%8 == 0]) }
	encoderLoop("bitsenc", n, 4, halves, 0, vp, qp, 4, func() { sumAbove(accLo, accHi, "bitsenc_ret") }, "")
	laneSumReturn(accLo, accHi, "bitsenc_ret")
}

// encoderLoop emits an encoder's loop over n values: two groups of group
// values per iteration, their steps (encode(o): the group at value o)
// interleaved, except that the last held steps of the second group (its
// additions to an accumulator the first group's also add to) follow all
// of the first group's, so that every lane adds its values in order; vp
// and qp move on by the two groups' values (4 bytes each) and codes
// (qSize bytes each); above checks for the early exit. Where n holds an
// odd number of groups, one more follows the loop, skipped by a jump to
// done ("": n never does).
func encoderLoop(name string, n GPVirtual, group int, encode func(o int) []func(), held int, vp, qp GPVirtual, qSize int, above func(), done string) {
	pairs := GP64()
	MOVQ(n, pairs)
	SHRQ(U8(bits.TrailingZeros(uint(2*group))), pairs)
	JZ(LabelRef(name + "_one"))
	Label(name + "_loop")
	a, b := encode(0), encode(group)
	for k := range a {
		a[k]()
		if k < len(a)-held {
			b[k]()
		}
	}
	for _, st := range b[len(b)-held:] {
		st()
	}
	ADDQ(imm(8*group), vp)
	ADDQ(imm(2*group*qSize), qp)
	above()
	DECQ(pairs)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_one")
	if done == "" {
		return
	}
	TESTQ(U32(group), n)
	JZ(LabelRef(done))
	for _, st := range encode(0) {
		st()
	}
}

// imm is v as the shortest immediate.
func imm(v int) Constant {
	if v < 128 {
		return U8(v)
	}
	return U32(v)
}

// laneSum returns the eight float64 lanes of accLo (0-3) and accHi (4-7)
// summed as ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)), in the low double
// of an XMM.
func laneSum(accLo, accHi VecVirtual) VecVirtual {
	a := YMM()
	VADDPD(accHi, accLo, a) // lane j: l_j + l_{j+4}
	t := XMM()
	VEXTRACTF128(U8(1), a, t)
	VADDPD(t, a.AsX(), t) // (l0+l4) + (l2+l6), (l1+l5) + (l3+l7)
	u := XMM()
	VUNPCKHPD(t, t, u)
	VADDSD(u, t, t)
	return t
}

// sumAbove jumps to ret (which returns the sum) once the lanes' sum so
// far exceeds best: every later value only adds a square to a lane, and
// rounding to nearest keeps each addition and the sum monotone, so the
// whole group's error would exceed best too and the candidate cannot win.
// A NaN sum runs on, and so does any sum with best infinite (the caller
// wants every code).
func sumAbove(accLo, accHi VecVirtual, ret string) {
	jumpAbove(laneSum(accLo, accHi), ret)
}

// jumpAbove jumps to ret if the sum t exceeds the best argument.
func jumpAbove(t VecVirtual, ret string) {
	VUCOMISD(paramAddr(Param("best")), t)
	JA(LabelRef(ret))
}

// laneSumReturn returns the lanes' sum; ret labels it for sumAbove.
func laneSumReturn(accLo, accHi VecVirtual, ret string) {
	Label(ret)
	returnSum(laneSum(accLo, accHi))
}

// returnSum returns the float64 in t's low lane.
func returnSum(t VecVirtual) {
	VMOVSD(t, paramAddr(ReturnIndex(0)))
	VZEROUPPER()
	RET()
}

// sumAbove8 and laneSum8Return are sumAbove and laneSumReturn for one
// accumulator of eight lanes (laneSum8).
func sumAbove8(acc VecVirtual, ret string) { jumpAbove(laneSum8(acc), ret) }

func laneSum8Return(acc VecVirtual, ret string) {
	Label(ret)
	returnSum(laneSum8(acc))
}

// zmmConst is a 64-byte table of one 32- or 64-bit value.
func zmmConst(name string, width int, bits uint64) Mem {
	return rodata(name, 64/width, width, func(int) uint64 { return bits })
}

// laneSum8 returns the eight float64 lanes of acc summed as laneSum sums
// two YMM halves: the upper four added to the lower four first.
func laneSum8(acc VecVirtual) VecVirtual {
	hi := YMM()
	VEXTRACTF64X4(U8(1), acc, hi)
	a := YMM()
	VADDPD(hi, acc.AsY(), a) // lane j: l_j + l_{j+4}
	t := XMM()
	VEXTRACTF128(U8(1), a, t)
	VADDPD(t, a.AsX(), t)
	u := XMM()
	VUNPCKHPD(t, t, u)
	VADDSD(u, t, t)
	return t
}

// q4EncodeAvx512 emits Q4EncodeAvx512: Q4EncodeAvx2 on ZMM, sixteen values
// a step (n a multiple of 16), the ties found with a compare into a mask
// and fixed with a masked add, the codes narrowed by VPMOVDB. Each group of
// eight values' squares adds into one accumulator of eight float64 lanes,
// value i in lane i mod 8 as before.
func q4EncodeAvx512() {
	TEXT("Q4EncodeAvx512", NOSPLIT, "func(vals *float32, n int, q *uint8, s float32, z float32, best float64) float64")
	Pragma("noescape")
	kernelDoc("Weight quantization kernels", "Q4EncodeAvx512 is Q4EncodeAvx2 with AVX-512F, for n a multiple of 16.")
	vp, n, qp := param("vals"), param("n"), param("q")
	s, z := ZMM(), ZMM()
	VBROADCASTSS(paramAddr(Param("s")), s)
	VBROADCASTSS(paramAddr(Param("z")), z)
	f32 := func(name string, bits uint32) Mem { return zmmConst("q4enc512"+name, 4, uint64(bits)) }
	lo, hi, half, abs, sign := f32("Lo", 0xc1800000), f32("Hi", 0x41800000), f32("Half", 0x3f000000), f32("Abs", 0x7fffffff), f32("Sign", 0x80000000)
	zero, fifteen := f32("Zero", 0), f32("Fifteen", 0x41700000)
	acc := ZMM()
	VPXORQ(acc, acc, acc)

	encode16 := func(o int) []func() {
		v, x, r, t, away, dq := ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM()
		k := K()
		dl, dh, vl, vh := ZMM(), ZMM(), ZMM(), ZMM()
		yd, yv := YMM(), YMM()
		var steps []func()
		step := func(f func()) { steps = append(steps, f) }
		step(func() { VMOVUPS(Mem{Base: vp, Disp: 4 * o}, v) })
		step(func() { VDIVPS(s, v, x) })
		step(func() { VMAXPS(lo, x, x) })
		step(func() { VMINPS(hi, x, x) })
		step(func() { VRNDSCALEPS(U8(8), x, r) }) // nearest even, no precision exception
		step(func() { VSUBPS(r, x, t) })
		step(func() { VPANDD(sign, x, away) }) // x's sign bit
		step(func() { VPANDD(abs, t, t) })
		step(func() { VPORD(half, away, away) })
		step(func() { VCMPPS(U8(0), half, t, k) }) // |x - r| == 1/2
		step(func() { VADDPS(x, away, k, r) })     // ties: x + copysign(1/2, x)
		step(func() { VADDPS(z, r, r) })
		step(func() { VMAXPS(zero, r, r) })
		step(func() { VMINPS(fifteen, r, r) }) // the code as a float
		step(func() { VCVTTPS2DQ(r, t) })
		step(func() { VSUBPS(z, r, dq) })
		step(func() { VPMOVDB(t, Mem{Base: qp, Disp: o}) })
		step(func() { VMULPS(s, dq, dq) }) // (c - z) * s in float32
		step(func() { VEXTRACTF64X4(U8(1), dq, yd) })
		step(func() { VEXTRACTF64X4(U8(1), v, yv) })
		step(func() { VCVTPS2PD(dq.AsY(), dl) })
		step(func() { VCVTPS2PD(v.AsY(), vl) })
		step(func() { VCVTPS2PD(yd, dh) })
		step(func() { VCVTPS2PD(yv, vh) })
		step(func() { VSUBPD(vl, dl, dl) })
		step(func() { VSUBPD(vh, dh, dh) })
		step(func() { VMULPD(dl, dl, dl) })
		step(func() { VMULPD(dh, dh, dh) })
		step(func() { VADDPD(dl, acc, acc) }) // values o..o+7
		step(func() { VADDPD(dh, acc, acc) }) // then o+8..o+15, lane by lane
		return steps
	}
	encoderLoop("q4enc512", n, 16, encode16, 2, vp, qp, 1, func() { sumAbove8(acc, "q4enc512_ret") }, "q4enc512_ret")
	laneSum8Return(acc, "q4enc512_ret")
}

// bitsEncodeAvx512 emits BitsEncodeAvx512: BitsEncodeAvx2 on ZMM, eight
// float64 values a step (n a multiple of 8), into one accumulator.
func bitsEncodeAvx512() {
	TEXT("BitsEncodeAvx512", NOSPLIT, "func(vals *float32, n int, q *uint32, s, z, qmax, best float64) float64")
	Pragma("noescape")
	kernelDoc("Weight quantization kernels", "BitsEncodeAvx512 is BitsEncodeAvx2 with AVX-512F.")
	vp, n, qp := param("vals"), param("n"), param("q")
	s, z, qmax := ZMM(), ZMM(), ZMM()
	VBROADCASTSD(paramAddr(Param("s")), s)
	VBROADCASTSD(paramAddr(Param("z")), z)
	VBROADCASTSD(paramAddr(Param("qmax")), qmax)
	f64 := func(name string, bits uint64) Mem { return zmmConst("bitsenc512"+name, 8, bits) }
	half, abs, sign := f64("Half", 0x3fe0000000000000), f64("Abs", 0x7fffffffffffffff), f64("Sign", 0x8000000000000000)
	zero := ZMM()
	VPXORQ(zero, zero, zero)
	acc := ZMM()
	VPXORQ(acc, acc, acc)

	encode8 := func(o int) []func() {
		v, y, r, t, away := ZMM(), ZMM(), ZMM(), ZMM(), ZMM()
		k := K()
		c := YMM()
		var steps []func()
		step := func(f func()) { steps = append(steps, f) }
		step(func() { VCVTPS2PD(Mem{Base: vp, Disp: 4 * o}, v) })
		step(func() { VDIVPD(s, v, y) })
		step(func() { VADDPD(z, y, y) })
		step(func() { VRNDSCALEPD(U8(8), y, r) }) // nearest even, no precision exception
		step(func() { VSUBPD(r, y, t) })
		step(func() { VPANDQ(sign, y, away) }) // y's sign bit
		step(func() { VPANDQ(abs, t, t) })
		step(func() { VPORQ(half, away, away) })
		step(func() { VCMPPD(U8(0), half, t, k) }) // |y - r| == 1/2
		step(func() { VADDPD(y, away, k, r) })     // ties: y + copysign(1/2, y)
		step(func() { VMAXPD(zero, r, r) })
		step(func() { VMINPD(qmax, r, r) }) // the code as a float64
		step(func() { VCVTTPD2DQ(r, c) })
		step(func() { VSUBPD(z, r, r) })
		step(func() { VMOVDQU(c, Mem{Base: qp, Disp: 4 * o}) })
		step(func() { VMULPD(s, r, r) })
		step(func() { VSUBPD(v, r, r) })
		step(func() { VMULPD(r, r, r) })
		step(func() { VADDPD(r, acc, acc) })
		return steps
	}
	encoderLoop("bitsenc512", n, 8, encode8, 1, vp, qp, 4, func() { sumAbove8(acc, "bitsenc512_ret") }, "bitsenc512_ret")
	laneSum8Return(acc, "bitsenc512_ret")
}
