package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ---------------------------------------------------------------------------
// Sparse12 with int8 activations on YMM: AVX2 (VPMADDUBSW + VPMADDWD) and
// AVX-VNNI (VEX VPDPBUSD)
//
// A chunk of a row (32 words, 128 pairs, 256 columns) is read as four
// quarters of 8 words, transposed by VPSHUFB as in the Bits YMM kernels
// (bitsYMMShuf): dword d of each 128-bit lane then holds plane d (pairs
// d*32 + w) of 4 adjacent words. The pair's position bit is the byte's
// sign bit, so VPBLENDVB picks per byte the even- or odd-column activation
// (both laid out per call in the transposed order): the dropped column
// costs no multiply. The code is q - z (z per byte from the tile's zero
// bytes by VPSHUFB).
//
// AVX2: VPMADDUBSW(|x|, sign(x)*(q-z)) (no saturation: |pair sum| <=
// 2*128*127), VPMADDWD(1) per quarter, so isum = sum (q-z)*x directly.
// AVX-VNNI: VPDPBUSD(x+128, q-z) and, per (row, unit), the load-time
// correction 128*sum(q-z) subtracted, as the AVX-512 kernel does.
//
// Units (blocks of U = min(G, 128) columns of the exact sum) per chunk:
// nu = 256/U (2, 4 or 8), tiles of R = 8/nu rows, lane i*nu + u is row i,
// unit u; the same lane order and reduction as the Bits YMM kernels.

// sparseA8YMM emits the YMM W(1:2, 7-bit)A8 kernel for Sparse12 with
// blocks of U columns.
func sparseA8YMM(U int, mode a8Mode) {
	nu := 256 / U
	R := 8 / nu
	s := bitsYMMShape{n: 8, U: U, bpc: 2, nu: nu, R: R, shuffle: true}
	vnni := mode == modeAVXVNNI
	isa, what := "Avx2", "AVX2 (VPBLENDVB, VPSIGNB, VPMADDUBSW, VPMADDWD)"
	metaBlock, zOff := 40, 32
	if vnni {
		isa, what = "AvxVnni", "AVX-VNNI (VPBLENDVB, VEX VPDPBUSD)"
		metaBlock, zOff = 72, 64
	}
	name := "Sparse12A8" + isa
	if U < 128 {
		name = fmt.Sprintf("Sparse12A8G%d%s", U, isa)
	}
	const actCodes = 256
	const actChunk = actCodes + 32
	TEXT(name, NOSPLIT, bitsKernelSig)
	Pragma("noescape")
	kernelDoc("Sparse12 kernels", fmt.Sprintf("%s computes the exact W(1:2, 7-bit)A8 dot products of Sparse12 matrices with %s, blocks of %d columns (groups of %s): tiles of R = %d rows, nu = %d units per chunk, meta %d bytes per tile and chunk.",
		name, what, U, map[int]string{128: "at least 128", 64: "64", 32: "32"}[U], R, nu, metaBlock))
	mask7f := YMM()
	{
		t := GP32()
		MOVL(U32(0x7f7f7f7f), t)
		VMOVD(t, mask7f.AsX())
		VPBROADCASTD(mask7f.AsX(), mask7f)
	}
	shuf := YMM()
	VMOVDQU(lowConst("bitsYMMShuf", func(i int) byte { d, e := (i%16)/4, i%4; return byte(4*e + 3 - d) }), shuf)
	ones := lowConst("bitsYMMOnes", func(i int) byte { return byte(1 - i%2) })
	halves := 1
	if nu == 8 {
		halves = 2
	}
	// zsel[i][hh]: VPSHUFB control putting zero byte i*nu + unit into
	// every byte of dword d (plane d; with nu = 8, quarters 2hh, 2hh+1).
	zsel := make([][]Mem, R)
	for i := range zsel {
		for hh := 0; hh < halves; hh++ {
			zsel[i] = append(zsel[i], lowConst(fmt.Sprintf("sparseYMMZ%d_%d_%d", nu, i, hh), func(j int) byte {
				d := (j % 16) / 4
				u := map[int]int{2: d / 2, 4: d, 8: 2*d + hh}[nu]
				return byte(i*nu + u)
			}))
		}
	}

	tileChunksThen(name, R, metaBlock, 128, YMM, func(a VecVirtual) { VPXOR(a, a, a) }, func(k, pf GPVirtual, accRow VecVirtual) {
		ap, mp, wp := chunkPtrs(k, actChunk, metaBlock, 128)
		stride := param("stride")
		zall := YMM()
		VPBROADCASTQ(Mem{Base: mp, Disp: zOff}, zall)
		phys := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}
		rows := make([]Register, 0, 2*R)
		for i := 0; i < R; i++ {
			PREFETCHT1(Mem{Base: pf, Disp: 128 * i})
			PREFETCHT1(Mem{Base: pf, Disp: 128*i + 64})
			zv := make([]VecVirtual, halves)
			for hh := range zv {
				zv[hh] = YMM()
				VPSHUFB(zsel[i][hh], zall, zv[hh])
			}
			acc := make([]Register, halves)
			if vnni {
				for c := range acc {
					acc[c] = phys[i*halves+c]
					VPXOR(acc[c], acc[c], acc[c])
				}
			}
			for h := 0; h < 4; h++ {
				c := 0
				if nu == 8 {
					c = h / 2
				}
				d := YMM()
				VMOVDQU(Mem{Base: wp, Disp: 32 * h}, d)
				VPSHUFB(shuf, d, d)
				if vnni {
					codes, xt := Y8, Y9
					VMOVDQU(Mem{Base: ap, Disp: 64 * h}, xt)
					VPBLENDVB(d, Mem{Base: ap, Disp: 64*h + 32}, xt, xt)
					VPAND(mask7f, d, codes)
					VPSUBB(zv[c], codes, codes)
					vpdpbusdY(codes, xt, acc[c])
					continue
				}
				x := YMM()
				VMOVDQU(Mem{Base: ap, Disp: 64 * h}, x)
				VPBLENDVB(d, Mem{Base: ap, Disp: 64*h + 32}, x, x)
				q := YMM()
				VPAND(mask7f, d, q)
				VPSUBB(zv[c], q, q)
				VPSIGNB(x, q, q)
				VPABSB(x, x)
				t := YMM()
				VPMADDUBSW(q, x, t)
				VPMADDWD(ones, t, t)
				if acc[c] == nil {
					acc[c] = t
				} else {
					VPADDD(t, acc[c], acc[c])
				}
			}
			rows = append(rows, acc...)
			if i != R-1 {
				ADDQ(stride, wp)
			}
		}
		isum := bitsYMMReduce(s, rows)
		if vnni {
			VPSUBD(Mem{Base: mp, Disp: 32}, isum, isum)
		}
		f := YMM()
		VMOVUPS(Mem{Base: mp}, f)
		VMULPS(Mem{Base: ap, Disp: actCodes}, f, f)
		VCVTDQ2PS(isum, isum)
		VMULPS(isum, f, f)
		ymmUnitsAdd(f, accRow, nu)
	}, func(accRow VecVirtual) { ymmUnitsOut(accRow, nu) })
}
