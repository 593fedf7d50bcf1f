package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The streaming read (asm/stream_amd64.s): the read-bandwidth roofline
// the benchmarks compare the kernels with.

func streamRead() {
	for _, isa := range []string{"Avx512", "Avx2"} {
		name := "StreamRead" + isa
		TEXT(name, NOSPLIT, "func(b []uint64) uint64")
		Pragma("noescape")
		kernelDoc("Streaming read", name+" xors every 64-byte line of b into a checksum with "+map[string]string{"Avx512": "AVX-512", "Avx2": "AVX2"}[isa]+" loads: the read-bandwidth roofline.")
		base := Load(Param("b").Base(), GP64())
		n := Load(Param("b").Len(), GP64())
		SHRQ(U8(3), n)
		const unroll = 4
		var acc []VecVirtual
		for k := 0; k < unroll; k++ {
			if isa == "Avx512" {
				acc = append(acc, ZMM())
			} else {
				acc = append(acc, YMM(), YMM())
			}
		}
		for _, a := range acc {
			VPXOR(a.AsY(), a.AsY(), a.AsY())
		}
		Label(name + "_big")
		CMPQ(n, U32(unroll))
		JB(LabelRef(name + "_one"))
		for k := 0; k < unroll; k++ {
			if isa == "Avx512" {
				VPXORQ(Mem{Base: base, Disp: 64 * k}, acc[k], acc[k])
			} else {
				VPXOR(Mem{Base: base, Disp: 64 * k}, acc[2*k], acc[2*k])
				VPXOR(Mem{Base: base, Disp: 64*k + 32}, acc[2*k+1], acc[2*k+1])
			}
		}
		ADDQ(U32(64*unroll), base)
		SUBQ(U32(unroll), n)
		JMP(LabelRef(name + "_big"))
		Label(name + "_one")
		TESTQ(n, n)
		JZ(LabelRef(name + "_done"))
		if isa == "Avx512" {
			VPXORQ(Mem{Base: base}, acc[0], acc[0])
		} else {
			VPXOR(Mem{Base: base}, acc[0], acc[0])
			VPXOR(Mem{Base: base, Disp: 32}, acc[1], acc[1])
		}
		ADDQ(U32(64), base)
		DECQ(n)
		JMP(LabelRef(name + "_one"))
		Label(name + "_done")
		if isa == "Avx512" {
			for k := 1; k < len(acc); k++ {
				VPXORQ(acc[k], acc[0], acc[0])
			}
			h := YMM()
			VEXTRACTI64X4(U8(1), acc[0], h)
			VPXOR(h, acc[0].AsY(), h)
			acc = []VecVirtual{h}
		} else {
			for k := 1; k < len(acc); k++ {
				VPXOR(acc[k], acc[0], acc[0])
			}
		}
		// Fold 4 qwords to 1, lane by lane (any order: xor commutes).
		x := XMM()
		VEXTRACTI128(U8(1), acc[0], x)
		VPXOR(x, acc[0].AsX(), x)
		lo, hi := GP64(), GP64()
		VMOVQ(x, lo)
		VPEXTRQ(U8(1), x, hi)
		XORQ(hi, lo)
		Store(lo, ReturnIndex(0))
		VZEROUPPER()
		RET()
	}
}
