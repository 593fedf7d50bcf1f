package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Psumbook builders of the codebook family: float32, binary16 and int16
// tables of each input segment's inner products with every centroid.

// cbTable emits CbTableV<v><isa>: the Psumbook of one codebook for nseg
// segments of vector length v, out[s*k + q] = sum_e ct[e*k + q] * x[s*v + e].
// Per segment the v activations are broadcast once, then each vector of
// entries takes one multiply (e = 0, the same value as a multiply-add
// into zero) and v-1 multiply-adds in e order from the v rows of ct.
// Consecutive vectors of entries are independent, so out-of-order
// execution overlaps their chains. (One loop for every v, which
// broadcast each activation again for every vector of entries behind a
// loop per element, took about 4x as long.)
func cbTable(f cbVec, v int) {
	name := fmt.Sprintf("CbTableV%d%s", v, f.suffix())
	TEXT(name, NOSPLIT, "func(ct *float32, x *float32, out *float32, nseg int, k int)")
	Pragma("noescape")
	kernelDoc("Codebook kernels", fmt.Sprintf("%s builds the float32 Psumbook of one codebook of %d-vectors with %s (k a multiple of %d).", name, v, f.requires(), f.lanes()))
	kb, rows := ctRows(v)
	x, out, nseg := param("x"), param("out"), param("nseg")
	Label(name + "_seg")
	bx := make([]VecVirtual, v)
	for e := range bx {
		bx[e] = f.vec()
		VBROADCASTSS(Mem{Base: x, Disp: 4 * e}, bx[e])
	}
	q := GP64()
	XORQ(q, q)
	Label(name + "_q")
	acc := f.vec()
	VMULPS(Mem{Base: rows[0], Index: q, Scale: 1}, bx[0], acc)
	for e := 1; e < v; e++ {
		VFMADD231PS(Mem{Base: rows[e], Index: q, Scale: 1}, bx[e], acc)
	}
	VMOVUPS(acc, Mem{Base: out, Index: q, Scale: 1})
	ADDQ(U32(4*f.lanes()), q)
	CMPQ(q, kb)
	JB(LabelRef(name + "_q"))
	ADDQ(kb, out)
	ADDQ(U32(4*v), x)
	DECQ(nseg)
	JNZ(LabelRef(name + "_seg"))
	if !f.avx512 {
		VZEROUPPER()
	}
	RET()
}

// cbTableF16 emits CbTableF16V<v>Avx512: the Psumbook in binary16 for
// v-element centroids, scaled by inv (a power of two chosen by the caller
// so that every entry is finite).
func cbTableF16(v int) {
	name := fmt.Sprintf("CbTableF16V%dAvx512", v)
	TEXT(name, NOSPLIT, "func(ct *float32, x *float32, out *uint16, nseg int, k int, inv float32)")
	Pragma("noescape")
	kernelDoc("Codebook kernels", fmt.Sprintf("%s builds a binary16 Psumbook of one codebook of %d-vectors, scaled by inv, with AVX-512F (k a multiple of 16).", name, v))
	cbTable16Loop(name, v, 16, func(entries func(half int) VecVirtual, op, _ GPVirtual) {
		h := YMM()
		VCVTPS2PH(U8(0), entries(0), h)
		VMOVDQU(h, Mem{Base: op})
	})
}

// cbTable16Loop emits the segment and entry loops of the binary16 table
// kernels: per segment it broadcasts the v inputs, then per block of
// step entries (16 or 32) calls store with entries(half), the 16 scaled
// float32 entries of half 0 or 1 of the block, the output pointer of the
// block (2 bytes per entry from out) and k; out advances 2k bytes per
// segment.
func cbTable16Loop(name string, v, step int, store func(entries func(half int) VecVirtual, op, k GPVirtual)) {
	ct, x, out := param("ct"), param("x"), param("out")
	nseg := param("nseg")
	k := param("k")
	inv := ZMM()
	VBROADCASTSS(NewParamAddr("inv", 40), inv)
	kb := GP64() // row stride of ct in bytes
	MOVQ(k, kb)
	SHLQ(U8(2), kb)
	Label(name + "_seg")
	{
		bx := make([]VecVirtual, v)
		for e := range bx {
			bx[e] = ZMM()
			VBROADCASTSS(Mem{Base: x, Disp: 4 * e}, bx[e])
		}
		cp := GP64()
		MOVQ(ct, cp)
		op := GP64()
		MOVQ(out, op)
		q := GP64()
		MOVQ(k, q)
		Label(name + "_q")
		entries := func(half int) VecVirtual {
			acc := ZMM()
			VMULPS(Mem{Base: cp, Disp: 64 * half}, bx[0], acc)
			row := GP64()
			MOVQ(cp, row)
			for e := 1; e < v; e++ {
				ADDQ(kb, row)
				VFMADD231PS(Mem{Base: row, Disp: 64 * half}, bx[e], acc)
			}
			VMULPS(inv, acc, acc)
			return acc
		}
		store(entries, op, k)
		ADDQ(U32(4*step), cp)
		ADDQ(U32(step), op)
		if step == 16 { // binary16 entries: 2 bytes each
			ADDQ(U32(step), op)
		}
		SUBQ(U32(step), q)
		JNZ(LabelRef(name + "_q"))
		MOVQ(k, q)
		LEAQ(Mem{Base: out, Index: q, Scale: 2}, out)
		ADDQ(U32(4*v), x)
		DECQ(nseg)
		JNZ(LabelRef(name + "_seg"))
	}
	VZEROUPPER()
	RET()
}

// cbTableI16 emits CbTableI16V<v>Avx512: the Psumbook as int16 fixed
// point (the scaled entries rounded to integers), each segment's entries
// split into low bytes then high bytes, for the int16 64-row kernel.
func cbTableI16(v int) {
	name := fmt.Sprintf("CbTableI16V%dAvx512", v)
	TEXT(name, NOSPLIT, "func(ct *float32, x *float32, out *uint8, nseg int, k int, inv float32)")
	Pragma("noescape")
	kernelDoc("Codebook kernels", fmt.Sprintf("%s builds an int16 Psumbook of one codebook of %d-vectors, scaled by inv and stored as low and high bytes, with AVX-512F and VBMI (k a multiple of 32).", name, v))
	// VPERMT2B index over two vectors of 16 dwords: bytes 0 (low) of the
	// 32 dwords, then bytes 1 (high); the entries fit 16 bits, so these
	// are the int16's bytes.
	split := ZMM()
	VMOVDQU8(rodata("cbI16SplitBytes", 64, 1, func(i int) uint64 { return uint64(4*(i%32) + i/32) }), split)
	cbTable16Loop(name, v, 32, func(entries func(half int) VecVirtual, op, k GPVirtual) {
		var ds [2]VecVirtual
		for half := range ds {
			ds[half] = ZMM()
			VCVTPS2DQ(entries(half), ds[half])
		}
		w := ds[0]
		VPERMT2B(ds[1], split, w)
		VMOVDQU(w.AsY(), Mem{Base: op})
		hi := YMM()
		VEXTRACTI64X4(U8(1), w, hi)
		VMOVDQU(hi, Mem{Base: op, Index: k, Scale: 1})
	})
}
