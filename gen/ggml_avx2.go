package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// llama.cpp block types with int8 activations on YMM (AVX2), the exact
// A8 definition of layout/ggml. The 32-element block types keep
// llama.cpp's column order, and so does IQ4_XS on the avxvnni set (a
// register of codes holds one 32-column sub-block, whose scale is one
// broadcast word; the sums run signedDot then VPDPWSSD with the scale
// words); the super-block types are otherwise read in pair order
// (gen/ggml_pairs.go).

// ggmlSuperA8AVX2 emits GgmlIQ4XSA8AvxVnni (signature ggmlSig;
// activations in column order, the sums one int16 per sub-block), the
// avxvnni set's one-vector kernel of IQ4_XS, which that set reads in
// column order for its VPDPBUSD batch kernels (the avx2 set reads it in
// pair order, gen/ggml_pairs.go). Per row, super-block and half: the four
// code registers of the half (columns 32i..32i+31) as signed KValues, then
// per vector the half's S in int32 (signedDot, then the scale words'
// multiply-add as VEX VPDPWSSD) and the definition's float step in scalar
// SSE.
func ggmlSuperA8AVX2(c ggmlSuper) {
	t := c.t
	if !c.dword {
		panic("gen: no column-order AVX2 kernel for " + t)
	}
	isa, what := ymmISA(true)
	name := "Ggml" + t + "A8" + isa
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s computes the exact A8 product of layout/ggml %s rows with %s: activations in column order, the sums one int16 per sub-block; each 32-byte register of codes is one sub-block of 32 columns or two of 16 (one per 128-bit lane).", name, ggmlTypeName(t), what))
	nib := nibbleMask(YMM())
	kvs := ggmlKValuesYMM(false)
	// frame: the scale words of each code register of both halves (8 x 32
	// bytes), the words the sums term multiplies by (32 bytes)
	sv := AllocLocal(8*32 + 32)
	mw := sv.Offset(8 * 32)

	wp, ak, sk, xk, nk := ggmlRowStart(name)
	{
		Label(name + "_sb")
		{
			ggmlScalesAVX2(c, Mem{Base: wp}, sv, mw)
			dd := ggmlDMinAVX2(t, Mem{Base: wp})
			for h := 0; h < 2; h++ {
				cr := iq4xsHalfCodesAVX2(Mem{Base: wp}, h, nib)
				for i := range cr { // KValues (signed, in [-127, 113])
					VPSHUFB(cr[i], kvs, cr[i])
				}
				av, sp, xv := GP64(), GP64(), GP64()
				MOVQ(ak, av)
				MOVQ(sk, sp)
				MOVQ(xk, xv)
				ov, vc := param("out"), param("nvec")
				lbl := fmt.Sprintf("%s_h%d_vec", name, h)
				Label(lbl)
				{
					acc := YMM()
					for i := 0; i < 4; i++ {
						pr := YMM()
						signedDot(cr[i], Mem{Base: av, Disp: 128*h + 32*i}, nil, pr) // kv*sign(x) times |x|
						if i == 0 {
							VPMADDWD(sv.Offset(32*(4*h+i)), pr, acc)
							continue
						}
						sc := YMM()
						VMOVDQU(sv.Offset(32*(4*h+i)), sc)
						vpdpwssdY(sc, pr, acc)
					}
					x4 := XMM()
					VEXTRACTI128(U8(1), acc, x4)
					VPADDD(acc.AsX(), x4, x4)
					g := XMM()
					VPHADDD(x4, x4, g)
					VPHADDD(g, g, g) // [S, S, S, S]
					f := XMM()
					VCVTDQ2PS(g, f)
					coef := XMM()
					VBROADCASTSS(Mem{Base: xv, Disp: 4 * h}, coef)
					VMULPS(dd, coef, coef) // [d*xs, d*xs]
					VMULPS(coef, f, f)
					a := XMM()
					VMOVSS(Mem{Base: ov}, a)
					VADDSS(f, a, a)
					VMOVSS(a, Mem{Base: ov})
					nextVec(lbl, av, sp, xv, ov, vc)
				}
			}
			ADDQ(U32(c.bytes), wp)
			ADDQ(U32(256), ak)
			ADDQ(U32(2*256/c.sub), sk)
			ADDQ(U32(8), xk)
			DECQ(nk)
			JNZ(LabelRef(name + "_sb"))
		}
		nextRow(name)
	}
	VZEROUPPER()
	RET()
}

// highBits ORs into code the bits of the bytes at m that start at bit s,
// moved to where mask keeps them (bit d): one word shift by d-s, then the
// mask (the bits a word shift brings from the neighbouring byte fall
// outside it, as s and d and the field stay within a byte).
func highBits(m Mem, s, d int, mask, code VecVirtual) {
	b := YMM()
	VMOVDQU(m, b)
	switch {
	case d > s:
		VPSLLW(U8(d-s), b, b)
	case s > d:
		VPSRLW(U8(s-d), b, b)
	}
	VPAND(mask, b, b)
	VPOR(b, code, code)
}

// ggmlDMinAVX2 returns the super-block's d and dmin as float32, [d, dmin]
// (types without mins: [d, d]), in the low lanes of an XMM.
func ggmlDMinAVX2(t string, base Mem) VecVirtual {
	dd := XMM()
	switch t {
	case "Q4K", "Q5K":
		VCVTPH2PS(base, dd)
	case "Q2K":
		h := XMM()
		VMOVD(base.Offset(80), h)
		VCVTPH2PS(h, dd)
	default:
		off := map[string]int{"Q3K": 108, "Q6K": 208, "IQ4XS": 0}[t]
		h := XMM()
		VPBROADCASTW(base.Offset(off), h)
		VCVTPH2PS(h, dd)
	}
	return dd
}

// iq4xsHalfCodesAVX2 returns the four code registers of half h of the
// IQ4_XS super-block at base (columns 32i..32i+31 of the half) as code
// indices.
func iq4xsHalfCodesAVX2(base Mem, h int, nib VecVirtual) (cr [4]VecVirtual) {
	for i := 0; i < 4; i++ { // sub-block 4h+i: 16 bytes, low nibbles then high
		cr[i] = nibbleLanes(base.Offset(8+16*(4*h+i)), nib)
	}
	return cr
}

// ggmlScaleWordsAVX2 returns the scales of a Q3_K, Q6_K or IQ4_XS
// super-block as int16 words (8 in an XMM for 32-column sub-blocks, 16 in
// a YMM for 16-column ones), twice: the sums term multiplies the
// activation sums by the scales too.
func ggmlScaleWordsAVX2(c ggmlSuper, base Mem) (w, m VecVirtual) {
	// signed scales stored with an offset of 32 (Q3_K, IQ4_XS), or int8
	// (Q6_K)
	x := XMM()
	switch c.t {
	case "Q3K": // low nibbles of bytes 96..103 (scale j%8, nibble j/8),
		// bits 2*(j/4) of byte 104 + j%4 (a broadcast dword: byte j is
		// byte 104 + j%4, shifted per dword by 2*(j/4))
		l4, h := XMM(), XMM()
		VMOVQ(base.Offset(96), x)
		VPSRLW(U8(4), x, l4)
		VPUNPCKLQDQ(l4, x, x)
		VPAND(ggmlNibMem(), x, x)
		VPBROADCASTD(base.Offset(104), h)
		VPSRLVD(rodata("q3kHighShift", 4, 4, func(i int) uint64 { return uint64(2 * i) }), h, h)
		VPAND(rodata("ggmlThree16", 4, 4, func(int) uint64 { return 0x03030303 }), h, h)
		VPSLLW(U8(4), h, h)
		VPOR(h, x, x)
	case "IQ4XS":
		VMOVQ(iq4xsScaleBytes(base), x)
	case "Q6K":
		w = YMM()
		VPMOVSXBW(base.Offset(192), w)
		return w, w
	default:
		panic("gen: no AVX2 scale words for " + c.t)
	}
	VPSUBB(rodata("ggmlScaleBias", 4, 4, func(int) uint64 { return 0x20202020 }), x, x)
	if c.sub == 32 {
		w = XMM()
	} else {
		w = YMM()
	}
	VPMOVSXBW(x, w)
	return w, w
}

// ggmlScalesAVX2 stores the scale words of the eight code registers of an
// IQ4_XS super-block at sv (32 bytes each: a broadcast word) and the words
// the sums term multiplies the activation sums by (the scales) at mw: the
// multi-vector kernels read them once per vector.
func ggmlScalesAVX2(c ggmlSuper, base Mem, sv, mw Mem) {
	scale, m := ggmlScaleRegsAVX2(c, base)
	VMOVDQU(m.AsX(), mw)
	for j := 0; j < 8; j++ {
		VMOVDQU(scale(j/4, j%4), sv.Offset(32*j))
	}
}

// ggmlScaleRegsAVX2 returns an IQ4_XS super-block's scales for the code
// registers (see ggmlScalesAVX2) in registers: scale(h, i) emits the
// scale words of code register i of half h, sub-block 4h+i's word in
// every word; sumw holds the words the sums term multiplies the
// activation sums by.
func ggmlScaleRegsAVX2(c ggmlSuper, base Mem) (scale func(h, i int) VecVirtual, sumw VecVirtual) {
	if c.sub != 32 {
		panic("gen: no AVX2 scale registers for " + c.t)
	}
	w, sumw := ggmlScaleWordsAVX2(c, base)
	wb := YMM()
	VINSERTI128(U8(1), w, w.AsY(), wb)
	return func(h, i int) VecVirtual {
		j := 4*h + i
		y := YMM()
		VPSHUFB(rodata(fmt.Sprintf("ggmlWord%d", j), 32, 1, func(b int) uint64 { return uint64(2*j + b%2) }), wb, y)
		return y
	}, sumw
}

// ggmlBlockA8AVX2 emits Ggml<t>A8Avx2 for a 32-element block type:
// groups of four blocks (nsb counts groups), one register of 32 codes per
// block in column order; VPMADDUBSW and VPMADDWD with ones per block
// (Q8_0 and IQ4_NL: signedDot, the codes with the activations' signs
// times |x|), the four block sums reduced together, the codes' offset
// times each block's activation sum subtracted, and the definition's
// float steps in order. With vnni it emits
// Ggml<t>A8AvxVnni: one VEX VPDPBUSD per block, the signed types' codes
// as q + 128 (see ggmlSmallConstsAVX2).
func ggmlBlockA8AVX2(c ggmlSmall, vnni bool) {
	isa, what := ymmISA(vnni)
	name := "Ggml" + c.t + "A8" + isa
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s computes the exact A8 product of layout/ggml %s rows with %s: groups of four blocks (nsb counts groups), activations in column order, the sums one int16 per 32 columns.", name, c.name, what))
	signed, shift, nib, ones, kv, qhShifts, sixteen := ggmlSmallConstsAVX2(c, vnni)
	ggmlBlockRows(name, c, func(wp GPVirtual) func(av, sp, xv GPVirtual) (f, u VecVirtual) {
		var cr [4]VecVirtual
		for b := 0; b < 4; b++ {
			cr[b] = ggmlSmallCodesAVX2(c, Mem{Base: wp}, b, nib, kv, qhShifts, sixteen, vnni)
		}
		dh := XMM()
		VPXOR(dh, dh, dh)
		for b := 0; b < 4; b++ {
			VPINSRW(U8(b), Mem{Base: wp, Disp: b * c.bytes}, dh, dh)
		}
		d4 := XMM()
		VCVTPH2PS(dh, d4)
		var m4 VecVirtual
		if c.m {
			mh := XMM()
			VPXOR(mh, mh, mh)
			for b := 0; b < 4; b++ {
				VPINSRW(U8(b), Mem{Base: wp, Disp: b*c.bytes + 2}, mh, mh)
			}
			m4 = XMM()
			VCVTPH2PS(mh, m4)
		}
		return func(av, sp, xv GPVirtual) (f, u VecVirtual) {
			s4, sx := ggmlSmallDotsAVX2(c, func(b int) VecVirtual { return cr[b] }, av, sp, ones, signed, shift, vnni, nil, nil)
			f = XMM()
			VCVTDQ2PS(s4, f)
			xb := XMM()
			VBROADCASTSS(Mem{Base: xv}, xb)
			coef := XMM()
			VMULPS(d4, xb, coef)
			VMULPS(coef, f, f) // [t0 t1 t2 t3]
			if c.m {
				fm, cm := XMM(), XMM()
				VCVTDQ2PS(sx, fm)
				VMULPS(m4, xb, cm)
				VMULPS(cm, fm, fm) // [u0 u1 u2 u3]
				u = fm
			}
			return f, u
		}
	})
}

// ggmlSmallConstsAVX2 loads the constants of the AVX2 kernels of a
// 32-element block type: whether its codes are signed (Q8_0, IQ4_NL:
// signedDot, no offset) and the offset shift otherwise, the nibble mask,
// int16 ones for VPMADDWD, IQ4_NL's KValues, and Q5_x's qh constants
// (ggmlCodeConstsAVX2: qh in lane order). With vnni (VPDPBUSD, no int16
// ones) the signed types take their codes as q + 128 instead, an offset
// like the unsigned ones'.
func ggmlSmallConstsAVX2(c ggmlSmall, vnni bool) (signed bool, shift int, nib, ones, kv, qhShifts, sixteen VecVirtual) {
	av2 := fvec{avx512: false}
	signed = !c.nib || c.kv
	switch {
	case !signed:
		shift = c.shift
	case vnni:
		signed, shift = false, 7
	}
	nib = nibbleMask(YMM())
	if !vnni {
		ones = av2.broadcast(0x00010001)
	}
	kv, qhShifts, sixteen = ggmlCodeConstsAVX2(c, vnni)
	return
}

// ggmlCodeConstsAVX2 loads what ggmlSmallCodesAVX2 needs besides the
// nibble mask: IQ4_NL's KValues (plus 128 where offset), and for Q5_x
// the dwords' shift counts for qh in lane order (7-d) and 16 per byte
// (nil otherwise).
func ggmlCodeConstsAVX2(c ggmlSmall, offset bool) (kv, qhShifts, sixteen VecVirtual) {
	if c.kv {
		kv = ggmlKValuesYMM(offset)
	}
	if c.qh != 0 {
		qhShifts = YMM()
		VMOVDQU(rodata("ggmlQhLaneShifts", 8, 4, func(d int) uint64 { return uint64(7 - d) }), qhShifts)
		sixteen = fvec{avx512: false}.broadcast(0x10101010)
	}
	return
}

// ggmlSmallCodesAVX2 returns block b's 32 codes of the group at base as
// bytes in column order (a YMM): nibbles low then high (Q5_x: the qh bit
// of each adding 16, qh in lane order; IQ4_NL: looked up in kv), or Q8_0's
// int8 codes (plus 128, bytes flipped, where offset).
func ggmlSmallCodesAVX2(c ggmlSmall, base Mem, b int, nib, kv, qhShifts, sixteen VecVirtual, offset bool) VecVirtual {
	var v VecVirtual
	off := b*c.bytes + c.qs
	if c.nib {
		v = nibbleLanes(base.Offset(off), nib)
		if c.kv {
			VPSHUFB(v, kv, v)
		}
	} else {
		v = YMM()
		VMOVDQU(base.Offset(off), v)
		if offset {
			VPXOR(ggmlFlip32(), v, v)
		}
	}
	if c.qh != 0 { // qh in lane order: bit 8b+d adds 16 to code 4d+b
		h, v16 := YMM(), YMM()
		VPBROADCASTD(base.Offset(b*c.bytes+c.qh), h)
		VPSLLVD(qhShifts, h, h) // dword d by 7-d: the bit in each byte's top bit
		VPOR(sixteen, v, v16)
		VPBLENDVB(h, v16, v, v)
	}
	return v
}

// nibbleLanes returns the 32 nibbles of the 16 bytes at m as bytes: the
// low nibbles in the low lane, the high ones in the high lane (the bytes
// broadcast to both lanes, the high lane's dwords shifted by 4, masked:
// one shift where a lane insert would take a shift and a shuffle).
func nibbleLanes(m Mem, nib VecVirtual) VecVirtual {
	v := YMM()
	VBROADCASTI128(m, v)
	VPSRLVD(rodata("ggmlNibbleShifts", 8, 4, func(i int) uint64 { return uint64(4 * (i / 4)) }), v, v)
	VPAND(nib, v, v)
	return v
}

// ggmlFlip32 is 32 bytes of 0x80: XOR makes int8 codes q into q + 128.
func ggmlFlip32() Mem { return rodata("ggmlFlip32", 8, 4, func(int) uint64 { return 0x80808080 }) }

// ggmlSmallDotsAVX2 returns the four block sums of a group of four
// 32-element blocks (codes(b) gives block b's code bytes, emitted when
// asked, so at most one block's codes are live) with the activations at
// ap: VPMADDUBSW then VPMADDWD with ones per block, VPHADDD and a lane
// add into [S0 S1 S2 S3], minus 2^shift times the blocks' activation sums
// (loaded from sp, and returned as sx where the caller needs them: shift
// > 0 or an m term).
// The signed types' products are signedDot's; absx (the four-row
// kernels: the four blocks' |x|, taken once for the rows) saves a row's
// VPABSB per block.
func ggmlSmallDotsAVX2(c ggmlSmall, codes func(b int) VecVirtual, ap, sp GPVirtual, ones VecVirtual, signed bool, shift int, vnni bool, absx []VecVirtual, sums *ggmlBlockSums) (s4, sx VecVirtual) {
	var d [4]VecVirtual
	for b := 0; b < 4; b++ {
		cr := codes(b)
		d[b] = YMM()
		if vnni { // unsigned codes (signed ones offset by 128): int32 at once
			x := YMM()
			VMOVDQU(Mem{Base: ap, Disp: 32 * b}, x)
			VPXOR(d[b], d[b], d[b])
			vpdpbusdY(x, cr, d[b])
			if b%2 == 1 {
				VPHADDD(d[b], d[b-1], d[b-1])
			}
			continue
		}
		switch {
		case signed:
			var a VecVirtual
			if absx != nil {
				a = absx[b]
			}
			signedDot(cr, Mem{Base: ap, Disp: 32 * b}, a, d[b])
		default:
			VPMADDUBSW(Mem{Base: ap, Disp: 32 * b}, cr, d[b])
			// Unsigned codes (at most 31): the pair sums stay exact in
			// int16 through two VPHADDW levels (at most 4*2*31*127 =
			// 31496), then one VPMADDWD widens all four blocks.
			if b%2 == 1 {
				VPHADDW(d[b], d[b-1], d[b-1])
			}
			continue
		}
		VPMADDWD(ones, d[b], d[b])
		if b%2 == 1 {
			VPHADDD(d[b], d[b-1], d[b-1])
		}
	}
	if signed || vnni {
		VPHADDD(d[2], d[0], d[0])
	} else {
		VPHADDW(d[2], d[0], d[0]) // lane: blocks 0..3, two words each
		VPMADDWD(ones, d[0], d[0])
	}
	s4 = XMM()
	VEXTRACTI128(U8(1), d[0], s4)
	VPADDD(d[0].AsX(), s4, s4) // [S0 S1 S2 S3]
	if sums != nil {           // loaded (and shifted) once for the rows
		if shift > 0 {
			VPSUBD(sums.off, s4, s4)
		}
		return s4, sums.sx
	}
	if shift > 0 || c.m {
		sx = XMM()
		VPMOVSXWD(Mem{Base: sp}, sx)
	}
	if shift > 0 {
		o := XMM()
		VPSLLD(U8(shift), sx, o)
		VPSUBD(o, s4, s4)
	}
	return s4, sx
}

// signedDot sets pr to the int16 pair sums of the signed codes cr times
// the 32 activations x (in memory or a register): VPMADDUBSW of |x| (absx, or VPABSB of x where
// nil) with the codes given the activations' signs (VPSIGNB into a new
// register; cr is kept). Exact for every int8 activation as long as no
// code is -128: a code in [-127, 127] stays within int8 with either sign,
// and |x| is at most 128 (VPABSB of -128 reads as 128 unsigned), so a
// pair sums to at most 2*128*127 in magnitude, within int16. IQ4 code
// values lie in [-127, 113]; Q8_0 matrices holding a code of -128 (which
// llama.cpp's quantizer never writes) run the Go kernel (cpu.LoadGGML).
func signedDot(cr VecVirtual, x Op, absx, pr VecVirtual) {
	if absx == nil {
		absx = YMM()
		VPABSB(x, absx)
	}
	s := YMM()
	VPSIGNB(x, cr, s)
	VPMADDUBSW(s, absx, pr)
}

// ggmlPairSpread returns the VPERMD/VPERMPS index table taking dwords
// 2k and 2k+1 to lanes 0..3 and 4..7.
func ggmlPairSpread(k int) Mem {
	return rodata(fmt.Sprintf("ggmlPairSpread%d", k), 8, 4, func(i int) uint64 { return uint64(2*k + i/4) })
}

// ggmlBlockSums are a group's four block sums of the activations as int32
// (sx) and, for the offset codes, times 2^shift (off), loaded once for
// the four rows of ggmlBlockA8R4AVX2.
type ggmlBlockSums struct{ sx, off VecVirtual }

// loadBlockSums returns the group's block sums at sp for ggmlSmallDotsAVX2
// (nil where neither an offset nor an m term takes them).
func loadBlockSums(c ggmlSmall, sp GPVirtual, shift int) *ggmlBlockSums {
	if shift == 0 && !c.m {
		return nil
	}
	b := &ggmlBlockSums{sx: XMM()}
	VPMOVSXWD(Mem{Base: sp}, b.sx)
	if shift > 0 {
		b.off = XMM()
		VPSLLD(U8(shift), b.sx, b.off)
	}
	return b
}

// ggmlBlockA8R4AVX2 emits Ggml<t>A8R4Avx2 for a 32-element block type:
// the one-vector AVX2 kernel for four rows at a time (rows a multiple of
// 4; nvec and the strides ignored). Q4_0, Q4_1 and IQ4_NL pair the rows
// (ggmlR4PairsAVX2); with vnni (Ggml<t>A8R4AvxVnni, those types alone)
// they multiply with VPDPBUSD. The others reduce their block sums with
// the rows in the lanes (ggmlR4LanesAVX2). Either way the definition's
// sequential additions are one VADDPS per block for the four rows
// together. The next four rows are prefetched in memory order.
func ggmlBlockA8R4AVX2(c ggmlSmall, vnni bool) {
	isa, _ := ymmISA(vnni)
	name := "Ggml" + c.t + "A8R4" + isa
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	if ggmlSplit(c) {
		how := "VPMADDUBSW"
		if vnni {
			how = "VPDPBUSD"
		}
		kernelDoc("GGML block kernels", fmt.Sprintf("%s computes Ggml%sA8Avx2's products for one vector and four rows at a time (rows a multiple of 4), two rows' codes per register, with %s, the float steps with the rows in the lanes.", name, c.t, how))
		var kv VecVirtual
		if c.kv {
			kv = ggmlKValuesYMM(vnni)
		}
		fourRowsFix(name, r4PfL2, 4*c.bytes, 128, 8, 4, func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual) {
			ggmlR4PairsAVX2(c, rows, ak, sk, xk, acc4.AsY().(VecVirtual), kv, vnni)
		}, pairRowsFix)
		return
	}
	if vnni {
		panic("gen: no AVX-VNNI four-row kernel for " + c.t)
	}
	kernelDoc("GGML block kernels", fmt.Sprintf("%s is Ggml%sA8%s for one vector and four rows at a time (rows a multiple of 4), the float steps with the rows in the lanes.", name, c.t, isa))
	signed, shift, nib, ones, kv, qhShifts, sixteen := ggmlSmallConstsAVX2(c, false)
	fourRows(name, r4PfL2, 4*c.bytes, 128, 8, 4, func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual) {
		ggmlR4LanesAVX2(c, rows, ak, sk, xk, acc4, signed, shift, nib, ones, kv, qhShifts, sixteen)
	})
}

// ggmlR4LanesAVX2 adds one group of four blocks of the four rows at
// rows to acc4 (the AVX2 kernel of ggmlBlockA8R4AVX2). Per block, the
// four rows' products (VPMADDUBSW words, or signedDot's widened by
// VPMADDWD) are reduced with the rows in the lanes (rowSums4) instead of
// per row with VPHADDW, which issues at one every two cycles on Zen 3 and
// was a quarter of the kernel's time there; two blocks' sums then fill
// one YMM, [rows of block 2k | rows of block 2k+1], for the float steps:
// (d*xs)*float(S - 2^shift*sum) and, with an m term, (m*xs)*float(sum),
// added in the definition's order (block by block, d term first).
func ggmlR4LanesAVX2(c ggmlSmall, rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual, signed bool, shift int, nib, ones, kv, qhShifts, sixteen VecVirtual) {
	xb, sx := groupScaleSums(c, sk, xk, shift)
	for k := 0; k < 2; k++ {
		var v [2]VecVirtual
		for j := range v {
			b := 2*k + j
			x := Mem{Base: ak, Disp: 32 * b}
			var absx VecVirtual
			if signed { // |x| once for the four rows
				absx = YMM()
				VPABSB(x, absx)
			}
			var p [4]VecVirtual
			for r := range p {
				cr := ggmlSmallCodesAVX2(c, rows[r], b, nib, kv, qhShifts, sixteen, false)
				p[r] = YMM()
				if signed {
					signedDot(cr, x, absx, p[r])
					VPMADDWD(ones, p[r], p[r])
				} else {
					VPMADDUBSW(x, cr, p[r])
				}
			}
			v[j] = rowSums4(p, !signed, ones)
		}
		s := YMM() // [S of rows 0..3, block 2k | block 2k+1]
		VINSERTI128(U8(1), v[1].AsX(), v[0], s)
		VPERM2I128(U8(0x31), v[1], v[0], v[1])
		VPADDD(v[1], s, s)
		var sk8 VecVirtual // the two blocks' sums, each in four lanes
		if sx != nil {
			sk8 = YMM()
			idx := YMM()
			VMOVDQU(ggmlPairSpread(k), idx)
			VPERMD(sx.AsY(), idx, sk8)
		}
		if shift > 0 {
			o := YMM()
			VPSLLD(U8(shift), sk8, o)
			VPSUBD(o, s, s)
		}
		f := YMM()
		VCVTDQ2PS(s, f)
		coef := YMM()
		VMULPS(halves8(rows, 2*k, c.bytes, 0), xb, coef)
		VMULPS(coef, f, f) // [t of block 2k | 2k+1]
		var u VecVirtual
		if c.m {
			sf, cm := YMM(), YMM()
			VCVTDQ2PS(sk8, sf)
			VMULPS(halves8(rows, 2*k, c.bytes, 2), xb, cm)
			u = YMM()
			VMULPS(cm, sf, u) // [u of block 2k | 2k+1]
		}
		VADDPS(f.AsX(), acc4, acc4)
		if c.m {
			VADDPS(u.AsX(), acc4, acc4)
		}
		h := XMM()
		VEXTRACTF128(U8(1), f, h)
		VADDPS(h, acc4, acc4)
		if c.m {
			VEXTRACTF128(U8(1), u, h)
			VADDPS(h, acc4, acc4)
		}
	}
}

// ggmlR4PairsAVX2 adds one group of four blocks of the four rows at rows
// to acc (the AVX2 kernel of ggmlBlockA8R4AVX2 for the types whose codes
// are a block's 16 bytes of nibbles, ggmlSplit: Q4_0, Q4_1, IQ4_NL). A
// block's code bytes of two rows share one YMM (row 0 or 2 in the low
// lane, row 1 or 3 in the high one), so one shift and two masks give
// both rows' low nibbles (columns 0..15) and high nibbles (columns
// 16..31), multiplied by the block's activation halves broadcast to both
// lanes. Adding the two products leaves each lane one row's partial sums,
// and a block's two registers reduce with three shuffles to [rows 0 2 0 2
// | rows 1 3 1 3], where ggmlR4LanesAVX2's four per-row registers take
// six and a lane insert per pair of blocks; it also saves the variable
// shift per row and block, and the shuffle ports are what these kernels
// wait on. Two blocks' sums are blended into [rows 0 2 of block 2k, of
// 2k+1 | rows 1 3 ...] for the float steps, and the second block's terms
// reach the accumulator's lanes of the first through one in-lane swap,
// so each row still adds its terms in the definition's order (block by
// block, d term first). The accumulator keeps row 0 in lane 0, row 2 in
// lane 1, rows 1 and 3 in lanes 4 and 5 (pairRowsFix puts them in
// order). With words (the unsigned codes), a word after the reduction
// sums 16 products of a code of at most 15 and an activation of at most
// 128 in magnitude, 30720, exact in int16, before one VPMADDWD with ones.
// With vnni (the avxvnni set) both halves go into one dword accumulator
// per register with VPDPBUSD.
func ggmlR4PairsAVX2(c ggmlSmall, rows [4]Mem, ak, sk, xk GPVirtual, acc, kv VecVirtual, vnni bool) {
	// IQ4_NL: signed codes (signedDot), no offset; with vnni (VPDPBUSD, no
	// int16 step) its codes plus 128, like the unsigned types' offsets
	signed, shift := c.kv && !vnni, c.shift
	if signed {
		shift = 0
	}
	// the masks as memory operands: sixteen registers hold the rest
	nib, ones := ggmlNibMem(), onesWords()
	xb, sx := groupScaleSums(c, sk, xk, shift)
	words := !signed && !vnni // VPMADDUBSW products of unsigned codes
	add := VPADDD
	if words {
		add = VPADDW
	}
	for k := 0; k < 2; k++ {
		var R [2]VecVirtual
		for j := range R {
			b := 2*k + j
			var x, ax [2]VecVirtual // the block's activations 0..15 and 16..31 in both lanes; |x|
			for h := range x {
				x[h] = YMM()
				VBROADCASTI128(Mem{Base: ak, Disp: 32*b + 16*h}, x[h])
				if signed {
					ax[h] = YMM()
					VPABSB(x[h], ax[h])
				}
			}
			var P [2]VecVirtual
			for pr := range P {
				off := b*c.bytes + c.qs
				v := YMM()
				VBROADCASTI128(rows[2*pr].Offset(off), v) // a whole-register write: a VMOVDQU to v's XMM would leave v live before it to the allocator
				VINSERTI128(U8(1), rows[2*pr+1].Offset(off), v, v)
				var q, p [2]VecVirtual // low and high nibbles; their products
				q[0], q[1] = YMM(), YMM()
				VPSRLW(U8(4), v, q[1])
				VPAND(nib, v, q[0])
				VPAND(nib, q[1], q[1])
				for h := range q {
					if c.kv {
						VPSHUFB(q[h], kv, q[h])
					}
				}
				if vnni { // both halves into one accumulator
					P[pr] = YMM()
					VPXOR(P[pr], P[pr], P[pr])
					for h := range q {
						vpdpbusdY(x[h], q[h], P[pr])
					}
					continue
				}
				for h := range q {
					p[h] = YMM()
					if signed {
						signedDot(q[h], x[h], ax[h], p[h])
						VPMADDWD(ones, p[h], p[h])
					} else {
						VPMADDUBSW(x[h], q[h], p[h])
					}
				}
				add(p[1], p[0], p[0])
				P[pr] = p[0]
			}
			lo, hi := YMM(), YMM()
			VPUNPCKLDQ(P[1], P[0], lo) // [a0 c0 a1 c1 | b0 d0 b1 d1]
			VPUNPCKHDQ(P[1], P[0], hi) // [a2 c2 a3 c3 | b2 d2 b3 d3]
			add(hi, lo, lo)
			VPSHUFD(U8(0x4e), lo, hi)
			add(hi, lo, lo) // [A C A C | B D B D]
			if words {
				VPMADDWD(ones, lo, lo)
			}
			R[j] = lo
		}
		s := YMM()
		VPBLENDD(U8(0xcc), R[1], R[0], s) // [A C A' C' | B D B' D']
		var sk8 VecVirtual
		if sx != nil { // each lane's block's activation sum
			sk8 = YMM()
			VMOVDQU(rodata(fmt.Sprintf("ggmlPairRows%d", k), 8, 4, func(i int) uint64 { return uint64(2*k + i/2%2) }), sk8)
			VPERMD(sx.AsY(), sk8, sk8)
		}
		if shift > 0 {
			o := YMM()
			VPSLLD(U8(shift), sk8, o)
			VPSUBD(o, s, s)
		}
		f, coef := YMM(), YMM()
		VCVTDQ2PS(s, f)
		VMULPS(halvesPairRows(rows, 2*k, c.bytes, 0), xb, coef)
		VMULPS(coef, f, f)
		var u VecVirtual
		if c.m {
			sf, cm := YMM(), YMM()
			VCVTDQ2PS(sk8, sf)
			VMULPS(halvesPairRows(rows, 2*k, c.bytes, 2), xb, cm)
			u = YMM()
			VMULPS(cm, sf, u)
		}
		VADDPS(f, acc, acc)
		if c.m {
			VADDPS(u, acc, acc)
		}
		t := YMM()
		VPERMILPS(U8(0x4e), f, t) // block 2k+1's terms into block 2k's lanes
		VADDPS(t, acc, acc)
		if c.m {
			VPERMILPS(U8(0x4e), u, t)
			VADDPS(t, acc, acc)
		}
	}
}

// halvesPairRows returns as float32 the binary16 at byte off of blocks b
// and b+1 (bytes apart) of the four rows at rows in ggmlR4PairsAVX2's
// order: [rows 0 2 of block b, of b+1 | rows 1 3 of block b, of b+1],
// gathered into two qwords with scalar loads, shifts and ORs: these
// kernels wait on the vector ports, which VPINSRW takes (one Zen 5 core in
// L2: 0.88x the time for Q4_0 and Q4_1, 0.93x for IQ4_NL).
func halvesPairRows(rows [4]Mem, b, bytes, off int) VecVirtual {
	var q [2]GPVirtual
	for i := range q {
		q[i] = GP64()
		t := GP64()
		for w := 0; w < 4; w++ { // word w of qword i: position p = 4i+w
			p := 4*i + w
			r, j := p/4+2*(p%2), p%4/2
			dst := q[i]
			if w > 0 {
				dst = t
			}
			MOVWQZX(rows[r].Offset((b+j)*bytes+off), dst)
			if w > 0 {
				SHLQ(U8(16*w), t)
				ORQ(t, q[i])
			}
		}
	}
	x := XMM()
	VMOVQ(q[0], x)
	VPINSRQ(U8(1), q[1], x, x)
	y := YMM()
	VCVTPH2PS(x, y)
	return y
}

// pairRowsFix returns ggmlR4PairsAVX2's accumulator (rows 0 and 2 in
// lanes 0 and 1, rows 1 and 3 in lanes 4 and 5) as [rows 0 1 2 3].
func pairRowsFix(acc4 VecVirtual) VecVirtual {
	h, r := XMM(), XMM()
	VEXTRACTF128(U8(1), acc4.AsY(), h)
	VUNPCKLPS(h, acc4, r)
	return r
}

// groupScaleSums loads what the four-row YMM kernels' float steps take
// per group: the activation scale at xk broadcast (xb) and, where the
// codes are offset (shift > 0) or there is an m term, the four block
// sums at sk as int32 (sx; nil otherwise).
func groupScaleSums(c ggmlSmall, sk, xk GPVirtual, shift int) (xb, sx VecVirtual) {
	xb = YMM()
	VBROADCASTSS(Mem{Base: xk}, xb)
	if shift > 0 || c.m {
		sx = XMM()
		VPMOVSXWD(Mem{Base: sk}, sx)
	}
	return xb, sx
}

// rowSums4 returns the sums of p[0..3] per 128-bit lane as [S0 S1 S2 S3]
// in each lane (a lane's part of each register's sum): two levels of
// dword (VPUNPCK[LH]DQ) and qword interleaves, each followed by one add,
// leave each dword holding one register's part. With words, p holds
// int16 pair sums of unsigned codes of at most 31 times int8 activations
// (MulI8 takes -128 too): a word after both levels sums four of them, at
// most 4*2*31*128 = 31744, exact in int16, and one VPMADDWD with ones
// widens the last pair; otherwise p holds int32 sums.
func rowSums4(p [4]VecVirtual, words bool, ones VecVirtual) VecVirtual {
	add := VPADDD
	if words {
		add = VPADDW
	}
	var z [2]VecVirtual
	for i := range z {
		lo, hi := YMM(), YMM()
		VPUNPCKLDQ(p[2*i+1], p[2*i], lo) // [a0 b0 a1 b1]
		VPUNPCKHDQ(p[2*i+1], p[2*i], hi) // [a2 b2 a3 b3]
		add(hi, lo, lo)
		z[i] = lo
	}
	s, h := YMM(), YMM()
	VPUNPCKLQDQ(z[1], z[0], s) // [a02 b02 c02 d02]
	VPUNPCKHQDQ(z[1], z[0], h) // [a13 b13 c13 d13]
	add(h, s, s)
	if words {
		VPMADDWD(ones, s, s)
	}
	return s
}

// halves8 returns as float32 the binary16 at byte off of blocks b and b+1
// (bytes apart) of the four rows at rows: [rows 0..3 of block b | of
// block b+1], gathered with VPINSRW: in these kernels, which leave the
// shuffle ports room, scalar loads, shifts and ORs cost more front-end
// slots (Q4_0, then on this kernel, on one Zen 3 core in L2: VPINSRW
// 0.88x the time).
func halves8(rows [4]Mem, b, bytes, off int) VecVirtual {
	x := XMM()
	VPXOR(x, x, x)
	for j := 0; j < 2; j++ {
		for r := 0; r < 4; r++ {
			VPINSRW(U8(4*j+r), rows[r].Offset((b+j)*bytes+off), x, x)
		}
	}
	y := YMM()
	VCVTPH2PS(x, y)
	return y
}

// ggmlF32AVX2 emits a float-activation kernel on YMM (signature
// ggmlSigF32): per unit of unitCols columns, prep stores the codes in
// column order at tmp (bytes, sign-extended when signed) and each
// sub-block's D and E (w = D*u + E) at tmp+256 and tmp+384; then per
// quarter of 64 columns the eight 8-column chunks become float32 weights
// in registers and every vector's activations are multiplied in (FMA).
//
// With pairs (a type in pair order, see gen/ggml_pairs.go: 32-byte code
// registers whose words each belong to one sub-block) tmp+256 and tmp+384
// hold D and E per code position in that order, and each 8-column chunk
// loads its eight.
func ggmlF32AVX2(name, doc string, unitBytes, unitCols, sub int, signed, pairs bool, prep func(wp, tp GPVirtual)) {
	TEXT(name, NOSPLIT, ggmlSigF32)
	Pragma("noescape")
	kernelDoc("GGML block kernels", doc)
	w := make([]VecVirtual, 8)
	for i := range w {
		w[i] = YMM()
	}
	Label(name + "_row")
	{
		{
			ap, n := param("accs"), param("nvec")
			z := YMM()
			VXORPS(z, z, z)
			Label(name + "_zero")
			VMOVUPS(z, Mem{Base: ap})
			ADDQ(U32(32), ap)
			DECQ(n)
			JNZ(LabelRef(name + "_zero"))
		}
		wp, xk, nk := param("w"), param("x"), param("nsb")
		Label(name + "_unit")
		{
			tp := param("tmp")
			prep(wp, tp)
			for q := 0; q < unitCols/64; q++ {
				order := []int{0, 1, 2, 3, 4, 5, 6, 7}
				if pairs { // chunks i and i+4 take the same D and E
					order = []int{0, 4, 1, 5, 2, 6, 3, 7}
				}
				var d, e VecVirtual
				for _, i := range order {
					col := 64*q + 8*i
					j := col / sub
					if signed {
						VPMOVSXBD(Mem{Base: tp, Disp: col}, w[i])
					} else {
						VPMOVZXBD(Mem{Base: tp, Disp: col}, w[i])
					}
					VCVTDQ2PS(w[i], w[i])
					switch {
					case !pairs:
						d, e = YMM(), YMM()
						VBROADCASTSS(Mem{Base: tp, Disp: 256 + 4*j}, d)
						VBROADCASTSS(Mem{Base: tp, Disp: 384 + 4*j}, e)
					case i < 4:
						d, e = YMM(), YMM()
						VMOVUPS(Mem{Base: tp, Disp: 256 + col%32*4}, d)
						VMOVUPS(Mem{Base: tp, Disp: 384 + col%32*4}, e)
					}
					VFMADD213PS(e, d, w[i])
				}
				xv, ap, vc := GP64(), param("accs"), param("nvec")
				MOVQ(xk, xv)
				lbl := fmt.Sprintf("%s_q%d", name, q)
				Label(lbl)
				{
					p := []VecVirtual{YMM(), YMM()}
					for i := 0; i < 8; i++ {
						if i < 2 {
							VMULPS(Mem{Base: xv, Disp: 4 * (64*q + 8*i)}, w[i], p[i])
						} else {
							VFMADD231PS(Mem{Base: xv, Disp: 4 * (64*q + 8*i)}, w[i], p[i%2])
						}
					}
					VADDPS(p[1], p[0], p[0])
					VADDPS(Mem{Base: ap}, p[0], p[0])
					VMOVUPS(p[0], Mem{Base: ap})
					ADDQ(U32(4*unitCols), xv)
					ADDQ(U32(32), ap)
					DECQ(vc)
					JNZ(LabelRef(lbl))
				}
			}
			ADDQ(U32(unitBytes), wp)
			n := param("nvec")
			SHLQ(U8(log2(4*unitCols)), n)
			ADDQ(n, xk)
			DECQ(nk)
			JNZ(LabelRef(name + "_unit"))
		}
		{
			ap, op, n := param("accs"), param("out"), param("nvec")
			Label(name + "_out")
			a := YMM()
			VMOVUPS(Mem{Base: ap}, a)
			x := XMM()
			VEXTRACTF128(U8(1), a, x)
			VADDPS(a.AsX(), x, x)
			t := XMM()
			VMOVHLPS(x, x, t)
			VADDPS(t, x, x)
			VMOVSHDUP(x, t)
			VADDSS(t, x, x)
			VMOVSS(x, Mem{Base: op})
			ADDQ(U32(32), ap)
			ADDQ(param("ostride"), op)
			DECQ(n)
			JNZ(LabelRef(name + "_out"))
		}
		nextRow(name)
	}
	VZEROUPPER()
	RET()
}

// ggmlSuperF32AVX2 emits GgmlIQ4XSF32Avx2 for IQ4_XS (the codes as
// KValues + 128, E = -128*D), the one super-block type read in column
// order by an AVX2 set (avxvnni). With pairs it emits Ggml<t>PF32Avx2 for a type in pair
// order (see gen/ggml_pairs.go; the activations come in that order): the
// same code registers, stored as they are, and D and E spread to the
// words.
func ggmlSuperF32AVX2(c ggmlSuper, pairs bool) {
	t := c.t
	name := "Ggml" + t + "F32Avx2"
	av2 := fvec{avx512: false}
	doc := fmt.Sprintf("%s multiplies layout/ggml %s rows by float32 activations with AVX2 and FMA, each super-block dequantized once per 64 columns for every vector.", name, ggmlTypeName(t))
	if pairs {
		name = "Ggml" + t + "PF32Avx2"
		doc = fmt.Sprintf("%s multiplies layout/ggml %s rows in pair order by float32 activations in the same order with AVX2 and FMA, each super-block dequantized once per 64 columns for every vector.", name, ggmlTypeName(t))
	}
	ggmlF32AVX2(name, doc, c.bytes, 256, c.sub, false, pairs, func(wp, tp GPVirtual) {
		if pairs {
			pairsF32Prep(pairTypes[t], wp, tp)
			return
		}
		if !c.dword {
			panic("gen: no column-order AVX2 float kernel for " + t)
		}
		nib := nibbleMask(YMM())
		for h := 0; h < 2; h++ {
			cr := iq4xsHalfCodesAVX2(Mem{Base: wp}, h, nib)
			for i, v := range cr { // KValues + 128
				tab := ggmlKValuesYMM(true)
				VPSHUFB(v, tab, v)
				VMOVDQU(v, Mem{Base: tp, Disp: 128*h + 32*i})
			}
		}
		// D = d * sc, E = -128*D per sub-block
		w, _ := ggmlScaleWordsAVX2(c, Mem{Base: wp})
		dz, h := YMM(), XMM()
		VPBROADCASTW(Mem{Base: wp}, h)
		VCVTPH2PS(h, dz)
		d, e := YMM(), YMM()
		VPMOVSXWD(w, d)
		VCVTDQ2PS(d, d)
		VMULPS(dz, d, d)
		VMULPS(av2.broadcast(math32bits(-float32(int(1)<<c.shift))), d, e)
		VMOVUPS(d, Mem{Base: tp, Disp: 256})
		VMOVUPS(e, Mem{Base: tp, Disp: 384})
	})
}

// ggmlBlockF32AVX2 emits Ggml<t>F32Avx2 for a 32-element block type
// (units of four blocks).
func ggmlBlockF32AVX2(c ggmlSmall) {
	name := "Ggml" + c.t + "F32Avx2"
	av2 := fvec{avx512: false}
	signed := !c.nib || c.kv
	doc := fmt.Sprintf("%s multiplies layout/ggml %s rows by float32 activations with AVX2 and FMA, groups of four blocks dequantized once per 64 columns for every vector.", name, c.name)
	ggmlF32AVX2(name, doc, 4*c.bytes, 128, 32, signed, false, func(wp, tp GPVirtual) {
		nib := nibbleMask(YMM())
		kv, qhShifts, sixteen := ggmlCodeConstsAVX2(c, false)
		for b := 0; b < 4; b++ {
			v := ggmlSmallCodesAVX2(c, Mem{Base: wp}, b, nib, kv, qhShifts, sixteen, false)
			VMOVDQU(v, Mem{Base: tp, Disp: 32 * b})
		}
		dh := XMM()
		VPXOR(dh, dh, dh)
		for b := 0; b < 4; b++ {
			VPINSRW(U8(b), Mem{Base: wp, Disp: b * c.bytes}, dh, dh)
		}
		d, e := XMM(), XMM()
		VCVTPH2PS(dh, d)
		if c.m {
			mh := XMM()
			VPXOR(mh, mh, mh)
			for b := 0; b < 4; b++ {
				VPINSRW(U8(b), Mem{Base: wp, Disp: b*c.bytes + 2}, mh, mh)
			}
			VCVTPH2PS(mh, e)
		} else {
			off := c.shift
			if signed {
				off = -1
			}
			if off < 0 {
				VXORPS(e, e, e)
			} else {
				cneg := av2.broadcast(math32bits(-float32(int(1) << off)))
				VMULPS(cneg.AsX(), d, e)
			}
		}
		VMOVUPS(d, Mem{Base: tp, Disp: 256})
		VMOVUPS(e, Mem{Base: tp, Disp: 384})
	})
}

// ggmlSuperA8R4AVX2 emits GgmlIQ4XSA8R4AvxVnni, the avxvnni set's
// one-vector kernel of IQ4_XS (column order) for four rows at a time (rows
// a multiple of 4; nvec and the strides ignored): each row's halves are
// summed as in ggmlSuperA8AVX2 into four partial lanes kept on the stack,
// then the four rows' S are reduced together with VPHADDD (lanes = rows)
// and the definition's float steps run on the four rows at once. The next
// four rows are prefetched in memory order.
func ggmlSuperA8R4AVX2(c ggmlSuper) {
	t := c.t
	isa, _ := ymmISA(true)
	name := "Ggml" + t + "A8R4" + isa
	TEXT(name, NOSPLIT, ggmlSig)
	Pragma("noescape")
	kernelDoc("GGML block kernels", fmt.Sprintf("%s is Ggml%sA8%s for one vector and four rows at a time (rows a multiple of 4), the reductions and float steps with the rows in the lanes.", name, t, isa))
	if !c.dword {
		panic("gen: no column-order AVX2 kernel for " + t)
	}
	// frame: per row the partial sums of both halves (48 bytes, as
	// r4PartSteps reads them)
	part := AllocLocal(4 * 48)
	nib := nibbleMask(YMM())
	kvs := ggmlKValuesYMM(false)
	fourRows(name, r4PfL2, c.bytes, 256, 2*256/c.sub, 8, func(rows [4]Mem, ak, sk, xk GPVirtual, acc4 VecVirtual) {
		dh := XMM()
		VPXOR(dh, dh, dh)
		for i, rm := range rows {
			VPINSRW(U8(i), rm, dh, dh)
			scale, _ := ggmlScaleRegsAVX2(c, rm)
			for h := 0; h < 2; h++ {
				cr := iq4xsHalfCodesAVX2(rm, h, nib)
				acc := YMM()
				for k := 0; k < 4; k++ {
					pr := YMM()
					VPSHUFB(cr[k], kvs, cr[k])
					signedDot(cr[k], Mem{Base: ak, Disp: 128*h + 32*k}, nil, pr)
					if k == 0 {
						VPMADDWD(scale(h, k), pr, acc)
					} else {
						vpdpwssdY(scale(h, k), pr, acc)
					}
				}
				x4 := XMM()
				VEXTRACTI128(U8(1), acc, x4)
				VPADDD(acc.AsX(), x4, x4)
				VMOVDQU(x4, part.Offset(48*i+16*h))
			}
		}
		r4PartSteps(part, false, 0, dh, nil, xk, acc4, false)
	})
}

// r4PartSteps finishes a super-block of the AVX2 four-row kernels: part
// holds per row (48 bytes) four partial dwords of S for each half, then
// (types with a sums term: mins, or shift > 0) two partial dwords of M
// for each half; it reduces them with the rows in the lanes and runs the
// definition's float steps (superFloatSteps). With lanes (the pair-order
// kernels, whose rows store both halves' S with one 32-byte store) it
// reduces S with rowSums4, both halves at once, instead of VPHADDD, which
// issues once every two cycles on Zen 3 (one Zen 3 core in L2, eight
// alternating rounds, best: Q2_K 2.80 -> 2.73, Q3_K 3.28 -> 3.18 ns per
// 128 columns; the column-order kernels, which store each half apart,
// measured 3-9% slower with it).
func r4PartSteps(part Mem, mins bool, shift int, dh, mh VecVirtual, xk GPVirtual, acc4 VecVirtual, lanes bool) {
	var S, M [2]VecVirtual
	if lanes {
		var p [4]VecVirtual
		for i := range p {
			p[i] = YMM()
			VMOVDQU(part.Offset(48*i), p[i])
		}
		s := rowSums4(p, false, nil) // lane h: half h's S of rows 0..3
		S[0], S[1] = XMM(), XMM()
		VEXTRACTI128(U8(1), s, S[1])
		VMOVDQA(s.AsX(), S[0])
	} else {
		for h := 0; h < 2; h++ {
			p := [4]VecVirtual{XMM(), XMM(), XMM(), XMM()}
			for i := range p {
				VMOVDQU(part.Offset(48*i+16*h), p[i])
			}
			VPHADDD(p[1], p[0], p[0])
			VPHADDD(p[3], p[2], p[2])
			S[h] = XMM()
			VPHADDD(p[2], p[0], S[h])
		}
	}
	if mins || shift > 0 {
		p := [4]VecVirtual{XMM(), XMM(), XMM(), XMM()}
		for i := range p {
			VMOVDQU(part.Offset(48*i+32), p[i])
		}
		VPHADDD(p[1], p[0], p[0]) // [r0h0 r0h1 r1h0 r1h1]
		VPHADDD(p[3], p[2], p[2])
		M[0], M[1] = XMM(), XMM()
		VSHUFPS(U8(0x88), p[2], p[0], M[0])
		VSHUFPS(U8(0xdd), p[2], p[0], M[1])
	}
	superFloatSteps(mins, shift, S, M, dh, mh, xk, acc4)
}
