package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The streaming reads (asm/stream_amd64.s): the read-bandwidth roofline
// the benchmarks compare the kernels with. Several loop shapes, because
// which one streams fastest depends on the machine, and the roofline is
// the best of them: one sequential stream (unrolled four lines), four
// interleaved streams over the quarters of the buffer, one stream with
// software prefetches 4 KiB ahead, and one with non-temporal loads.

// streamShapes are the loop shapes, by name suffix.
var streamShapes = []string{"", "X4", "Pf", "Nt"}

func streamRead() {
	for _, shape := range streamShapes {
		for _, isa := range []string{"Avx512", "Avx2"} {
			streamReadShape(shape, isa)
		}
	}
	streamReadTiles()
}

// streamReadTiles emits StreamReadTilesAvx512: a read in the order the
// batch-1 A8 kernels read a row-major matrix, tiles of rows rows chunk by
// chunk across the rows, the next tile prefetched in order; set beside
// one sequential stream it measures what reading that way costs
// (cpu.StreamReadTiles, BenchmarkReadPatterns).
func streamReadTiles() {
	const name = "StreamReadTilesAvx512"
	TEXT(name, NOSPLIT, "func(b []uint64, rows int, rowBytes int) uint64")
	Pragma("noescape")
	kernelDoc("Streaming read", name+" xors the whole tiles of b (rows rows of rowBytes bytes, a multiple of 128) into a checksum with AVX-512 loads, a tile read 128 bytes of each row in turn from the rows' starts to their ends while PREFETCHT1 fetches the next tile 128 bytes per row and chunk in order: the A8 kernels' read order.")
	base, n := GP64(), GP64()
	Load(Param("b").Base(), base)
	Load(Param("b").Len(), n)
	SHLQ(U8(3), n) // bytes
	rows, rb := GP64(), GP64()
	Load(Param("rows"), rows)
	Load(Param("rowBytes"), rb)
	tile := GP64()
	MOVQ(rows, tile)
	IMULQ(rb, tile)
	acc := []VecVirtual{ZMM(), ZMM()}
	for _, a := range acc {
		VPXORQ(a, a, a)
	}
	Label(name + "_tile")
	CMPQ(n, tile)
	JB(LabelRef(name + "_done"))
	pf := GP64()
	LEAQ(Mem{Base: base, Index: tile, Scale: 1}, pf)
	c := GP64()
	XORQ(c, c)
	Label(name + "_chunk")
	p, r := GP64(), GP64()
	LEAQ(Mem{Base: base, Index: c, Scale: 1}, p)
	MOVQ(rows, r)
	Label(name + "_row")
	PREFETCHT1(Mem{Base: pf})
	PREFETCHT1(Mem{Base: pf, Disp: 64})
	VPXORQ(Mem{Base: p}, acc[0], acc[0])
	VPXORQ(Mem{Base: p, Disp: 64}, acc[1], acc[1])
	ADDQ(U32(128), pf)
	ADDQ(rb, p)
	DECQ(r)
	JNZ(LabelRef(name + "_row"))
	ADDQ(U32(128), c)
	CMPQ(c, rb)
	JB(LabelRef(name + "_chunk"))
	ADDQ(tile, base)
	SUBQ(tile, n)
	JMP(LabelRef(name + "_tile"))
	Label(name + "_done")
	storeXor(acc, true)
}

func streamReadShape(shape, isa string) {
	name := "StreamRead" + shape + isa
	TEXT(name, NOSPLIT, "func(b []uint64) uint64")
	Pragma("noescape")
	what := map[string]string{
		"":   "in one sequential stream",
		"X4": "in four interleaved streams (the quarters of b's whole lines, then the rest in order)",
		"Pf": "in one stream with PREFETCHT0 4 KiB ahead",
		"Nt": "in one stream of non-temporal loads (VMOVNTDQA)",
	}[shape]
	kernelDoc("Streaming read", name+" xors every 64-byte line of b into a checksum with "+map[string]string{"Avx512": "AVX-512", "Avx2": "AVX2"}[isa]+" loads "+what+": a read-bandwidth roofline shape.")
	base, n := GP64(), GP64()
	Load(Param("b").Base(), base)
	Load(Param("b").Len(), n)
	SHRQ(U8(3), n) // whole lines
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
	// line xors the 64-byte line at m into accumulator k.
	line := func(m Mem, k int) {
		switch {
		case shape == "Nt" && isa == "Avx512":
			t := ZMM()
			VMOVNTDQA(m, t)
			VPXORQ(t, acc[k], acc[k])
		case shape == "Nt":
			t, u := YMM(), YMM()
			VMOVNTDQA(m, t)
			VMOVNTDQA(m.Offset(32), u)
			VPXOR(t, acc[2*k], acc[2*k])
			VPXOR(u, acc[2*k+1], acc[2*k+1])
		case isa == "Avx512":
			VPXORQ(m, acc[k], acc[k])
		default:
			VPXOR(m, acc[2*k], acc[2*k])
			VPXOR(m.Offset(32), acc[2*k+1], acc[2*k+1])
		}
	}
	if shape == "X4" {
		q, stride := GP64(), GP64()
		MOVQ(n, q)
		SHRQ(U8(2), q) // lines per quarter
		MOVQ(q, stride)
		SHLQ(U8(6), stride) // bytes per quarter
		SUBQ(q, n)
		SUBQ(q, n)
		SUBQ(q, n)
		SUBQ(q, n) // the lines after the four quarters
		p1, p2, p3 := GP64(), GP64(), GP64()
		LEAQ(Mem{Base: base, Index: stride, Scale: 1}, p1)
		LEAQ(Mem{Base: p1, Index: stride, Scale: 1}, p2)
		LEAQ(Mem{Base: p2, Index: stride, Scale: 1}, p3)
		Label(name + "_x4")
		TESTQ(q, q)
		JZ(LabelRef(name + "_x4done"))
		for k, p := range []GPVirtual{base, p1, p2, p3} {
			line(Mem{Base: p}, k)
			ADDQ(U32(64), p)
		}
		DECQ(q)
		JMP(LabelRef(name + "_x4"))
		Label(name + "_x4done")
		MOVQ(p3, base) // the rest follows the last quarter
	}
	Label(name + "_big")
	CMPQ(n, U32(unroll))
	JB(LabelRef(name + "_one"))
	if shape == "Pf" {
		PREFETCHT0(Mem{Base: base, Disp: 4096})
		PREFETCHT0(Mem{Base: base, Disp: 4096 + 64})
		PREFETCHT0(Mem{Base: base, Disp: 4096 + 128})
		PREFETCHT0(Mem{Base: base, Disp: 4096 + 192})
	}
	for k := 0; k < unroll; k++ {
		line(Mem{Base: base, Disp: 64 * k}, k)
	}
	ADDQ(U32(64*unroll), base)
	SUBQ(U32(unroll), n)
	JMP(LabelRef(name + "_big"))
	Label(name + "_one")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	line(Mem{Base: base}, 0)
	ADDQ(U32(64), base)
	DECQ(n)
	JMP(LabelRef(name + "_one"))
	Label(name + "_done")
	storeXor(acc, isa == "Avx512")
}

// storeXor folds the accumulators (ZMM with avx512, else YMM) into one
// qword by xor and returns it as the function's result.
func storeXor(acc []VecVirtual, avx512 bool) {
	if avx512 {
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
