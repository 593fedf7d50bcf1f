package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Codebook (layout/codebook) kernels. Codes live in lane bit streams of
// 32-row tiles: word w of rows t..t+15 (t = 0 or 16) is 16 consecutive
// uint32 at words + w*128 (+ 4*t), code j at bits j*B.. of the lane's
// stream, possibly straddling into word w+1.

// codebookKernels emits the codebook family: Psumbook builders, lookups
// and the quantizer's nearest-centroid assignment.
func codebookKernels() {
	for _, v := range []int{2, 4, 8} {
		cbTableF16(v)
		cbTableI16(v)
	}
	for _, packed := range []bool{false, true} {
		cbPsumI16(1, packed)
		cbPsumI16(2, packed)
	}
	cbPsumScalar(1)
	cbPsumScalar(2)
	for _, f := range []cbVec{{avx512: true}, {avx512: false}} {
		for _, v := range []int{2, 4, 8} {
			nearest(f, v)
		}
	}
	for _, b := range []int{4, 6, 8} {
		for _, m := range []int{1, 2} {
			cbPsumF16(b, m)
		}
	}
	for _, f := range []cbVec{{true}, {false}} {
		for _, v := range []int{2, 4, 8} {
			cbTable(f, v)
		}
		for _, b := range []int{4, 6, 8, 10, 12} {
			for _, m := range []int{1, 2} {
				cbLookup(f, b, m, false)
				cbLookup(f, b, m, true)
			}
		}
	}
}

// cbVec is one vector width: 16 lanes (AVX-512) or 8 (AVX2).
type cbVec struct {
	avx512 bool
}

func (v cbVec) lanes() int { return map[bool]int{true: 16, false: 8}[v.avx512] }

func (v cbVec) suffix() string {
	if v.avx512 {
		return "Avx512"
	}
	return "Avx2"
}

func (v cbVec) vec() VecVirtual {
	if v.avx512 {
		return ZMM()
	}
	return YMM()
}

func (v cbVec) requires() string {
	if v.avx512 {
		return "AVX-512F"
	}
	return "AVX2 and FMA"
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// ctRows loads the byte stride of the transposed centroids' rows (the
// argument k, in float32, times 4) and a pointer to each of their v rows
// (ct + e*stride).
func ctRows(v int) (kb GPVirtual, rows []GPVirtual) {
	kb = param("k")
	SHLQ(U8(2), kb)
	rows = make([]GPVirtual, v)
	rows[0] = param("ct")
	for e := 1; e < v; e++ {
		rows[e] = GP64()
		LEAQ(Mem{Base: rows[e-1], Index: kb, Scale: 1}, rows[e])
	}
	return kb, rows
}

// cbStreams loads the code-word and table pointers of each of the m
// codebooks (words + i*cbstride, tab + i*tabstride), which the lookup
// kernels advance together.
func cbStreams(m int) (wps, tps []GPVirtual) {
	wps, tps = []GPVirtual{param("words")}, []GPVirtual{param("tab")}
	for i := 1; i < m; i++ {
		w, t := param("cbstride"), param("tabstride")
		ADDQ(wps[0], w)
		ADDQ(tps[0], t)
		wps, tps = append(wps, w), append(tps, t)
	}
	return wps, tps
}

// cbNextPeriod advances the code pointers by stride bytes and loops back
// to the period label while the nper argument, decremented, is nonzero.
func cbNextPeriod(name string, wps []GPVirtual, stride int) {
	for _, w := range wps {
		ADDQ(U32(uint32(stride)), w)
	}
	bump("nper", I32(-1))
	nper := param("nper")
	TESTQ(nper, nper)
	JNZ(LabelRef(name + "_period"))
}

// cbNextTile advances the code pointer argument ptr by stride and the
// scales and acc arguments by step bytes, counts down the argument count
// and loops to label while it is not zero.
func cbNextTile(ptr string, stride Op, step uint32, count, label string) {
	bump(ptr, stride)
	bump("scales", U32(step))
	bump("acc", U32(step))
	bump(count, I32(-1))
	n := param(count)
	TESTQ(n, n)
	JNZ(LabelRef(label))
}
