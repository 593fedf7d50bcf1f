package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Exact int8 x int8 GEMV (asm/int8_amd64.s): the MatVANS int8 baseline.

// int8Kernels emits the int8 GEMV family.
func int8Kernels() {
	int8Gemv()
	int8GemvAVX2()
}

// int8Gemv emits Int8GemvAvx512: exact int8 x int8 dot products, four rows
// at a time, for the MatVANS int8 baseline.
func int8Gemv() {
	name := "Int8GemvAvx512"
	TEXT(name, NOSPLIT, "func(w *int8, stride int, x *uint8, n64 int, quads int, out *int32)")
	Pragma("noescape")
	kernelDoc("Int8 GEMV kernels", name+" computes int8 dot products of groups of 4 rows with AVX-512 VNNI (VPDPBUSD: unsigned x = v + 128 times signed w), 64 columns per step.")
	int8Quads(name, "n64", ZMM, func(a VecVirtual) { VPXORD(a, a, a) },
		func(rows [4]GPVirtual, xp GPVirtual, acc [4]VecVirtual) {
			xv := ZMM()
			VMOVDQU8(Mem{Base: xp}, xv)
			for k := 0; k < 4; k++ {
				VPDPBUSD(Mem{Base: rows[k]}, xv, acc[k])
				ADDQ(U32(64), rows[k])
			}
		},
		func(acc [4]VecVirtual, op GPVirtual) {
			for k := 0; k < 4; k++ {
				y := YMM()
				VEXTRACTI64X4(U8(1), acc[k], y)
				VPADDD(y, acc[k].AsY(), y)
				xx := XMM()
				VEXTRACTI128(U8(1), y, xx)
				VPADDD(xx, y.AsX(), xx)
				t := XMM()
				VPSHUFD(U8(0x4e), xx, t)
				VPADDD(t, xx, xx)
				VPSHUFD(U8(0xb1), xx, t)
				VPADDD(t, xx, xx)
				VMOVD(xx, Mem{Base: op, Disp: 4 * k})
			}
		})
}

// int8GemvAVX2 emits Int8GemvAvx2: exact int8 x int8 dot products, four
// rows at a time, with AVX2 only, for the MatVANS int8 baseline on the avx2
// and avxvnni kernel sets.
//
// VPMADDUBSW cannot be exact here: it needs an unsigned byte a in [0, 128]
// and a signed byte b with a*b = w*v, and its int16 pair sums saturate. The
// offset form (a = v+128 in [0, 255]) reaches 2*255*128 = 65280; the sign
// form (a = |v|, b = VPSIGNB(w, v)) cannot represent b = +128 when w = -128
// and v < 0 (the product 128*|v|), and the transposed form fails for
// v = -128, w < 0. So the weights are sign-extended to int16 (VPMOVSXBW
// from memory) and multiplied by the activations, sign-extended once per
// call by the caller, with VPMADDWD: each product is at most 2^14 in
// magnitude and the pair sums are exact int32; the int32 accumulation
// wraps exactly like the generic Go loop.
func int8GemvAVX2() {
	name := "Int8GemvAvx2"
	TEXT(name, NOSPLIT, "func(w *int8, stride int, x *int16, n32 int, quads int, out *int32)")
	Pragma("noescape")
	kernelDoc("Int8 GEMV kernels", name+" computes exact int8 dot products of groups of 4 rows with AVX2 (int16 activations, VPMOVSXBW + VPMADDWD), 32 columns per step.")
	int8Quads(name, "n32", YMM, func(a VecVirtual) { VPXOR(a, a, a) },
		func(rows [4]GPVirtual, xp GPVirtual, acc [4]VecVirtual) {
			xv := [2]VecVirtual{YMM(), YMM()}
			VMOVDQU(Mem{Base: xp}, xv[0])
			VMOVDQU(Mem{Base: xp, Disp: 32}, xv[1])
			for k := 0; k < 4; k++ {
				for h := 0; h < 2; h++ {
					t := YMM()
					VPMOVSXBW(Mem{Base: rows[k], Disp: 16 * h}, t)
					VPMADDWD(xv[h], t, t)
					VPADDD(t, acc[k], acc[k])
				}
				ADDQ(U32(32), rows[k])
			}
		},
		func(acc [4]VecVirtual, op GPVirtual) {
			regs := []Register{acc[0], acc[1], acc[2], acc[3]}
			addD := func(a, b, c Op) { VPADDD(a, b, c) }
			ymm := func() Register { return YMM() }
			s := pairLevel(pairLevel(regs, false, addD, ymm), true, addD, ymm)[0].(VecVirtual)
			hi := XMM()
			VEXTRACTI128(U8(1), s, hi)
			VPADDD(hi, s.AsX(), hi)
			VMOVDQU(hi, Mem{Base: op})
		})
}

// int8Quads emits the loop both int8 GEMV kernels share: for each group
// of 4 rows (w, w+stride, ...), accumulators made by newAcc and cleared by
// zero, the n-parameter's count of column steps (step consumes 64 bytes
// of x and advances the row pointers), then store writes the 4 sums at
// out; w moves 4 rows down and out 16 bytes.
func int8Quads(name, nParam string, newAcc func() VecVirtual, zero func(VecVirtual),
	step func(rows [4]GPVirtual, xp GPVirtual, acc [4]VecVirtual), store func(acc [4]VecVirtual, op GPVirtual)) {
	wp, xp0 := param("w"), param("x")
	stride := param("stride")
	op := param("out")
	q := param("quads")
	Label(name + "_quad")
	{
		acc := [4]VecVirtual{newAcc(), newAcc(), newAcc(), newAcc()}
		for _, a := range acc {
			zero(a)
		}
		rows := [4]GPVirtual{GP64(), GP64(), GP64(), GP64()}
		MOVQ(wp, rows[0])
		for k := 1; k < 4; k++ {
			LEAQ(Mem{Base: rows[k-1], Index: stride, Scale: 1}, rows[k])
		}
		xp := GP64()
		MOVQ(xp0, xp)
		n := param(nParam)
		Label(name + "_c")
		step(rows, xp, acc)
		ADDQ(U32(64), xp)
		DECQ(n)
		JNZ(LabelRef(name + "_c"))
		store(acc, op)
		LEAQ(Mem{Base: wp, Index: stride, Scale: 4}, wp)
		ADDQ(U32(16), op)
		DECQ(q)
		JNZ(LabelRef(name + "_quad"))
	}
	VZEROUPPER()
	RET()
}
