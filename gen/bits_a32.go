package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Bits(n, g) with float32 activations, one row at a time, AVX-512F or
// AVX2 + FMA (asm/bits_a32_amd64.s).

// bitsA32Kernels emits the Bits one-row float32 family, AVX-512F and
// AVX2, with float32 and binary16 metadata.
func bitsA32Kernels() {
	for _, f := range []fvec{{true}, {false}} {
		for _, meta16 := range []bool{false, true} {
			for _, n := range []int{8, 4, 2, 1} {
				for seg := 1; seg <= 32/n; seg *= 2 {
					if f.avx512 && n <= 2 && seg*n >= 4 {
						continue // the table kernels (bitsLut) run these
					}
					bitsA32(n, seg, f, meta16)
				}
			}
			for _, seg := range []int{1, 2, 10} { // 3 bits: gcd(G/32, 10 planes)
				bitsA32(3, seg, f, meta16)
			}
		}
	}
}

const bitsA32Sig = "func(w *byte, stride int, meta *float32, x *float32, xsum *float32, out *float32, rows int, chunks int)"

// bitsRuns returns the elements per shift of the one-row float kernel for
// n bits and segments of seg planes, and its VPERMPS tables (nil: the
// n-bit codes do not fit the 4 (ZMM) or 3 (YMM) index bits; mask and
// convert instead). A run fits the index bits and divides both the 32/n
// elements of a word and the segment.
func bitsRuns(n, seg int, f fvec) (int, []VecVirtual) {
	bits := map[bool]int{true: 4, false: 3}[f.avx512]
	if n > bits {
		return 1, nil
	}
	per := bits / n
	for (32/n)%per != 0 || seg%per != 0 {
		per--
	}
	tables := make([]VecVirtual, per)
	for j := range tables {
		tables[j] = f.reg()
		f.load(codeTable(n, j), tables[j])
	}
	return per, tables
}

// bitsA32 emits the W(n)A32 kernel for Bits with n in 8, 4, 3, 2, 1 and
// segments of seg planes (seg*32 columns, within one group).
//
// Without meta16 the metadata is the float32 pair (s, s*z) per row and
// segment (8 bytes). With meta16 (kernels named ...Meta16..., emitted for
// up to meta16MaxSlots(f) segments per chunk) it is the format's own 4
// bytes: per row and chunk P binary16 scales then P binary16 zeros, P the
// segments per chunk rounded up to a power of two (slots past them zero).
// One VCVTPH2PS per half widens them (exact); m = s*z is rounded to
// float32 as layout.(*Bits).Affine does and its correction m*xsum taken
// for the whole chunk in one FMA; the scales go through a stack slot so
// each segment's scaling stays one broadcast FMA. A single segment per
// chunk (P = 1) converts its pair in a register instead.
func bitsA32(n, seg int, f fvec, meta16 bool) {
	step := 32 / n
	W := f.lanes()
	sp := step / seg // segments per chunk
	P := 1
	for P < sp {
		P *= 2
	}
	if meta16 && P > meta16MaxSlots(f) {
		return
	}
	m16 := map[bool]string{true: "Meta16"}[meta16]
	name := fmt.Sprintf("Bits%dA32S%d%s%s", n, seg, m16, f.suffix())
	TEXT(name, NOSPLIT, bitsA32Sig)
	Pragma("noescape")
	meta := "(s, s*z) float32 metadata"
	if meta16 {
		meta = fmt.Sprintf("binary16 metadata with P = %d slots per chunk (%d segments)", P, sp)
	}
	kernelDoc("Bits float32 kernels", fmt.Sprintf("%s computes W%dA32 dot products of Bits matrices one row at a time with %s%s, segments of %d planes (%d columns), %s.",
		name, n, map[bool]string{true: "AVX-512F", false: "AVX2 and FMA"}[f.avx512], map[bool]string{true: " (and F16C)"}[meta16], seg, seg*32, meta))
	// VPERMPS reads only the low 4 (ZMM) or 3 (YMM) bits of each index, so
	// one shift brings a run of per elements into an index and a table per
	// element of the run (tables[j][e] = the code at bits n*j of e) turns
	// it into floats with no mask: per 16 weights a shift per run, a
	// VPERMPS and an FMA, where a mask and a shift per element cost more.
	per, tables := bitsRuns(n, seg, f)
	var mask VecVirtual
	if tables == nil {
		mask = f.broadcast(uint32(1)<<n - 1)
	}
	wp, mp := param("w"), param("meta")
	pfo := rowPrefetchOffset()
	var scales Mem // meta16, P > 1: the chunk's scales as float32
	if meta16 && P > 1 {
		scales = AllocLocal(4 * max(P, 4)) // slotVec(P) is at least an XMM: 16 bytes are stored
	}
	Label(name + "_row")
	acc := f.reg()
	f.zero(acc)
	slots := 1 // of the correction m*xsum
	if meta16 {
		slots = P
	}
	corr := slotVec(slots)
	f.zero(corr)
	xk, xs := param("x"), param("xsum")
	row := GP64()
	MOVQ(wp, row)
	k := param("chunks")
	Label(name + "_chunk")
	rowPrefetch(row, pfo)
	parts := 32 / W
	data := make([]VecVirtual, parts)
	for h := range data {
		data[h] = f.reg()
		f.load(Mem{Base: row, Disp: 4 * W * h}, data[h])
	}
	var sv VecVirtual // meta16: the chunk's scales (slot j: segment j)
	if meta16 {
		var mv VecVirtual
		sv, mv = meta16Chunk(Mem{Base: mp}, P)
		switch P {
		case 1:
			VFMADD231SS(Mem{Base: xs}, mv, corr)
		case 2:
			t := XMM()
			VMOVQ(Mem{Base: xs}, t)
			VFMADD231PS(t, mv, corr)
		default:
			VFMADD231PS(Mem{Base: xs}, mv, corr)
		}
		if P > 1 {
			VMOVUPS(sv, scales)
		}
		ADDQ(U32(4*P), mp)
		ADDQ(U32(4*P), xs)
	}
	for s0 := 0; s0 < step; s0 += seg {
		dots := newChains(f, seg*parts, chainsMax)
		for i0 := s0; i0 < s0+seg; i0 += per {
			for h := 0; h < parts; h++ {
				sh := 32 - n*(i0+per) // the run's last element to bit 0
				var idx VecVirtual
				switch {
				case tables == nil:
				case sh == 0:
					idx = data[h]
				default:
					idx = f.reg()
					VPSRLD(U8(sh), data[h], idx)
				}
				for j := 0; j < per; j++ {
					i := i0 + per - 1 - j // at bits n*j of idx
					c := f.reg()
					switch sh := 32 - n*(i+1); {
					case tables != nil:
						VPERMPS(tables[j], idx, c)
					case sh == 32-n: // the top element: the shift leaves n bits
						VPSRLD(U8(sh), data[h], c)
						VCVTDQ2PS(c, c)
					case sh != 0:
						VPSRLD(U8(sh), data[h], c)
						f.and(c, mask, c)
						VCVTDQ2PS(c, c)
					default:
						f.and(data[h], mask, c)
						VCVTDQ2PS(c, c)
					}
					xm := Mem{Base: xk, Disp: (i*32 + W*h) * 4}
					if d, first := dots.next(); first {
						VMULPS(xm, c, d)
					} else {
						VFMADD231PS(xm, c, d)
					}
				}
			}
		}
		switch {
		case !meta16:
			f.fmaScale(Mem{Base: mp}, dots.sum(), acc)
			sz := XMM()
			VMOVSS(Mem{Base: mp, Disp: 4}, sz)
			VFMADD231SS(Mem{Base: xs}, sz, corr)
			ADDQ(U32(8), mp)
			ADDQ(U32(4), xs)
		case P > 1:
			f.fmaScale(scales.Offset(4*(s0/seg)), dots.sum(), acc)
		default: // one segment per chunk: its scale stays in a register
			b := f.reg()
			VBROADCASTSS(sv, b)
			VFMADD231PS(dots.sum(), b, acc)
		}
	}
	ADDQ(U32(128), row)
	ADDQ(U32(step*128), xk)
	DECQ(k)
	JNZ(LabelRef(name + "_chunk"))
	rowEnd(name, acc, slotSum(corr, slots, f), wp, f)
}

// meta16MaxSlots is the most segments per chunk (P) a Meta16 float kernel
// widens at once: a ZMM of scales, or a YMM on AVX2.
func meta16MaxSlots(f fvec) int { return map[bool]int{true: 16, false: 8}[f.avx512] }
