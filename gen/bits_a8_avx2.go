package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ---------------------------------------------------------------------------
// Bits(n, g) with int8 activations on YMM: AVX2 (VPMADDUBSW + VPMADDWD)
//
// A chunk of a row (32 words, 128 bytes) is read as four quarters of 8
// words. Without VPMULTISHIFTQB, codes are regrouped by bytes: VPSHUFB
// transposes each 128-bit lane's 4 words x 4 bytes, so dword d of a lane
// holds byte 3-d of 4 adjacent words, whose n-bit fields (shift j*n, masked
// with VPSRLW/VPAND) all belong to one plane. The activations are laid out
// per call in that order, so VPMADDUBSW pairs only codes of one unit (a
// block of U = min(G, 128) columns). 8-bit codes are split into nibbles
// (a product of a byte and an int8 would saturate int16); without groups
// below 128 they need no transposition (the chunk is one block).
//
// Per row and chunk the int16 products are summed over all quarters in
// int16 (at most 16 products of 15*128, or 32 of 3*128: never overflowing)
// and widened once with VPMADDWD. The units per chunk (nu = 128*(8/n)/U,
// at most 8) and the tile of R = 8/nu rows fill the 8 lanes of one YMM:
// lane i*nu + u is row i, unit u.

// bitsA8YMM emits the YMM W(n)A8 kernel for Bits with n bits and blocks
// of U columns: AVX2 (modeAVX2) or AVX-VNNI (modeAVXVNNI: VEX VPDPBUSD
// accumulates each field straight into int32, the 8-bit codes unsplit; the
// activation layout is the same). The metadata of a tile's chunk is 8
// float32 scales and 8 int32 zeros, or with meta16 8 binary16 scales
// (F16C widens them) and 8 int16 zeros: half the bytes, as the format
// stores them, so a matrix keeps one copy (cpu's dropMeta).
func bitsA8YMM(n, U int, mode a8Mode, meta16 bool) {
	s := newBitsYMMShape(n, U)
	vnni := mode == modeAVXVNNI
	isa, what := "Avx2", "AVX2 (VPMADDUBSW, VPMADDWD)"
	if vnni {
		isa, what = "AvxVnni", "AVX-VNNI (VEX VPDPBUSD)"
	}
	group, meta, metaBlock := "", "", 64
	if U < 128 {
		group = fmt.Sprintf("G%d", U)
	}
	if meta16 {
		meta, metaBlock = "Meta16", 32
	}
	name := fmt.Sprintf("Bits%dA8%s%s%s", n, group, meta, isa)
	actCodes := 128 * s.bpc
	actChunk := actCodes + 64
	TEXT(name, NOSPLIT, bitsKernelSig)
	Pragma("noescape")
	kernelDoc("Bits int8 kernels", fmt.Sprintf("%s computes W%dA8 dot products of Bits matrices with %s, blocks of %d columns (groups of %s): tiles of R = %d rows, nu = %d units per chunk, %d act bytes per chunk, %d meta bytes per tile and chunk (%s).",
		name, n, what, U, map[int]string{128: "at least 128", 64: "64", 32: "32"}[U], s.R, s.nu, actChunk, metaBlock, map[bool]string{false: "float32 scales, int32 zeros", true: "binary16 scales, int16 zeros"}[meta16]))
	fieldMask := uint32(1)<<n - 1
	if n == 8 {
		fieldMask = 15
	}
	mask := YMM()
	{
		t := GP32()
		MOVL(U32(0x01010101*fieldMask), t)
		VMOVD(t, mask.AsX())
		VPBROADCASTD(mask.AsX(), mask)
	}
	var shuf VecVirtual
	if s.shuffle {
		shuf = YMM()
		// Output byte 4d+e of a lane = input byte 4e+3-d: dword d holds
		// byte 3-d of the lane's 4 words.
		VMOVDQU(lowConst("bitsYMMShuf", func(i int) byte { d, e := (i%16)/4, i%4; return byte(4*e + 3 - d) }), shuf)
	}
	ones := lowConst("bitsYMMOnes", func(i int) byte { return byte(1 - i%2) })
	sixteens := lowConst("bitsYMMSixteens", func(i int) byte { return byte(16 * (1 - i%2)) })

	// rowSums emits chunk k's rows and returns their integer sums and the
	// chunk's activation pointer
	rowSums := func(k, pf GPVirtual) (VecVirtual, GPVirtual) {
		ap, _, wp := chunkPtrs(k, actChunk, 0, 128)
		stride := param("stride")
		rows := make([]Register, 0, 2*s.R) // int32 per row (two per row with nu = 8)
		for i := 0; i < s.R; i++ {
			PREFETCHT1(Mem{Base: pf, Disp: 128 * i})
			PREFETCHT1(Mem{Base: pf, Disp: 128*i + 64})
			if vnni {
				rows = append(rows, bitsRowVNNI(s, i, wp, ap, mask, shuf)...)
				if i != s.R-1 {
					ADDQ(stride, wp)
				}
				continue
			}
			a16 := make([]VecVirtual, s.classes())
			for h := 0; h < 4; h++ {
				d := YMM()
				VMOVDQU(Mem{Base: wp, Disp: 32 * h}, d)
				if s.shuffle {
					VPSHUFB(shuf, d, d)
				}
				for _, f := range s.fields(h) {
					c := YMM()
					if f.shift == 0 {
						VPAND(mask, d, c)
					} else {
						VPSRLW(U8(f.shift), d, c)
						VPAND(mask, c, c)
					}
					t := YMM()
					VPMADDUBSW(Mem{Base: ap, Disp: f.act}, c, t)
					if a16[f.class] == nil {
						a16[f.class] = t
					} else {
						VPADDW(t, a16[f.class], a16[f.class])
					}
				}
			}
			v := YMM()
			VPMADDWD(ones, a16[0], v)
			switch {
			case n == 8:
				VPMADDWD(sixteens, a16[1], a16[1])
				VPADDD(a16[1], v, v)
				rows = append(rows, v)
			case s.nu == 8:
				w := YMM()
				VPMADDWD(ones, a16[1], w)
				rows = append(rows, v, w)
			default:
				rows = append(rows, v)
			}
			if i != s.R-1 {
				ADDQ(stride, wp)
			}
		}
		return bitsYMMReduce(s, rows), ap
	}
	// tail adds chunk k's float terms; ap is its activation pointer or nil
	tail := func(k, ap GPVirtual, isum, accRow VecVirtual) {
		if ap == nil {
			ap = GP64()
			IMUL3Q(U32(actChunk), k, ap)
			ADDQ(param("act"), ap)
		}
		mp := GP64()
		IMUL3Q(U32(metaBlock), k, mp)
		ADDQ(param("meta"), mp)
		zl, f := YMM(), YMM()
		if meta16 {
			VPMOVSXWD(Mem{Base: mp, Disp: 16}, zl)
		} else {
			VMOVDQU(Mem{Base: mp, Disp: 32}, zl)
		}
		VPMULLD(Mem{Base: ap, Disp: actCodes + 32}, zl, zl)
		VPSUBD(zl, isum, isum)
		if meta16 {
			VCVTPH2PS(Mem{Base: mp}, f)
		} else {
			VMOVUPS(Mem{Base: mp}, f)
		}
		VMULPS(Mem{Base: ap, Disp: actCodes}, f, f)
		VCVTDQ2PS(isum, isum)
		VMULPS(isum, f, f)
		ymmUnitsAdd(f, accRow, s.nu)
	}
	zero := func(a VecVirtual) { VPXOR(a, a, a) }
	finish := func(accRow VecVirtual) { ymmUnitsOut(accRow, s.nu) }
	if s.R == 1 {
		// one-row tiles (nu = 8) stay unpipelined: level on Zen 3 in L2,
		// slower in most rounds on the Xeon's avx2 set
		tileChunksThen(name, 1, metaBlock, 128, YMM, zero, func(k, pf GPVirtual, accRow VecVirtual) {
			isum, ap := rowSums(k, pf)
			tail(k, ap, isum, accRow)
		}, finish)
		return
	}
	tileChunksPiped(name, s.R, metaBlock, 128, YMM, zero, func(k, pf GPVirtual) VecVirtual {
		isum, _ := rowSums(k, pf)
		return isum
	}, func(k GPVirtual, isum, accRow VecVirtual) { tail(k, nil, isum, accRow) }, finish)
}

// bitsRowVNNI emits row i of a tile for the AVX-VNNI kernel and returns
// its int32 vectors (one, or two with nu = 8), in physical registers: the
// VEX VPDPBUSD macro takes no virtual ones. Accumulators are Y0..Y7 (at
// most 8 per tile: R*classes), codes Y8, activations Y9.
func bitsRowVNNI(s bitsYMMShape, i int, wp, ap GPVirtual, mask, shuf VecVirtual) []Register {
	phys := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}
	cl := 1
	if s.nu == 8 {
		cl = 2
	}
	acc := phys[i*cl : i*cl+cl]
	for _, a := range acc {
		VPXOR(a, a, a)
	}
	codes, xt := Y8, Y9
	for h := 0; h < 4; h++ {
		if s.n == 8 { // whole bytes: u8 codes need no mask
			VMOVDQU(Mem{Base: wp, Disp: 32 * h}, codes)
			if s.shuffle {
				VPSHUFB(shuf, codes, codes)
			}
			VMOVDQU(Mem{Base: ap, Disp: 32 * h}, xt)
			vpdpbusdY(xt, codes, acc[0])
			continue
		}
		d := YMM()
		VMOVDQU(Mem{Base: wp, Disp: 32 * h}, d)
		VPSHUFB(shuf, d, d)
		for _, f := range s.fields(h) {
			if f.shift == 0 {
				VPAND(mask, d, codes)
			} else {
				VPSRLW(U8(f.shift), d, codes)
				VPAND(mask, codes, codes)
			}
			VMOVDQU(Mem{Base: ap, Disp: f.act}, xt)
			vpdpbusdY(xt, codes, acc[f.class])
		}
	}
	out := make([]Register, cl)
	for c := range out {
		out[c] = acc[c]
	}
	return out
}

// bits3Window returns, for the 3-bit plane i of a word (bit offset
// o = 29 - 3i), the byte B starting the 16-bit window that holds it and
// its shift k within the window (1 <= k <= 13, so that VPMULHUW by
// 2^(16-k) shifts it down).
func bits3Window(i int) (B, k int) {
	o := 29 - 3*i
	B = min((o-1)/8, 2)
	return B, o - 8*B
}

// bits3A8YMM emits the AVX2 W3A8 kernel for Bits(3, g >= 128). Ten 3-bit
// planes per word do not fall on byte boundaries, so for each pair of
// planes (i, i+1) of a chunk VPSHUFB copies, per 16-bit lane, the two
// bytes holding one code of 8 words (lane 2w+e: word w of the 128-bit
// lane, plane i+e), VPMULHUW by per-lane powers of two shifts each code
// down (bits3Window), VPAND keeps it, and VPMADDWD multiplies by the
// int16 activations. A period of two chunks (256 bytes of a row) holds
// five 128-column blocks; per block (two plane pairs) a tile of 8 rows sums
// over the 32 words into one int32 vector per row, reduced to lane i =
// row i.
func bits3A8YMM() {
	const name, R, nb = "Bits3A8Avx2", 8, 5
	const actCodes = 10 * 4 * 32 // 10 plane pairs x 4 quarters x 16 int16
	actChunk, metaBlock := actCodes+nb*64, nb*64
	TEXT(name, NOSPLIT, bitsKernelSig)
	Pragma("noescape")
	kernelDoc("Bits int8 kernels", fmt.Sprintf("%s computes W3A8 dot products of Bits matrices with AVX2 (VPSHUFB, VPMULHUW, VPMADDWD), blocks of 128 columns (groups of at least 128): tiles of %d rows, periods of two chunks holding %d blocks (act %d bytes per period, meta %d bytes per tile and period).",
		name, R, nb, actChunk, metaBlock))
	// per pair of planes (2q, 2q+1) of a chunk (q < 5): the shuffle and the
	// multipliers
	shuf := make([]Mem, 5)
	mul := make([]Mem, 5)
	for q := range shuf {
		shuf[q] = lowConst(fmt.Sprintf("bits3Shuf%d", q), func(i int) byte {
			b := i % 16
			w, e := b/4, (b/2)%2
			B, _ := bits3Window(2*q + e)
			return byte(4*w + B + b%2)
		})
		mul[q] = lowConst(fmt.Sprintf("bits3Mul%d", q), func(i int) byte {
			e := (i / 2) % 2
			_, k := bits3Window(2*q + e)
			return byte(int(1) << (16 - k) >> (8 * (i % 2))) // int: an untyped 1 would be a byte here
		})
	}
	mask := fvec{}.broadcast(0x00070007)
	tileChunks(name, R, metaBlock, 256, YMM, func(a VecVirtual) { VPXOR(a, a, a) }, func(k, pf GPVirtual, accRow VecVirtual) {
		ap, mp, wp := chunkPtrs(k, actChunk, metaBlock, 256)
		stride := param("stride")
		for b := 0; b < nb; b++ {
			rows := make([]Register, R)
			rp := GP64()
			MOVQ(wp, rp)
			for i := 0; i < R; i++ {
				if b < 4 { // the next tile's period, one line per row and block
					PREFETCHT1(Mem{Base: pf, Disp: 256*i + 64*b})
				}
				acc := YMM()
				VPXOR(acc, acc, acc)
				for h := 0; h < 4; h++ {
					var d VecVirtual
					chunk := -1
					for p := 4 * b; p < 4*b+4; p += 2 { // plane pairs of the block
						if p/10 != chunk { // the pair's chunk: load its quarter
							chunk = p / 10
							d = YMM()
							VMOVDQU(Mem{Base: rp, Disp: 128*chunk + 32*h}, d)
						}
						c := YMM()
						VPSHUFB(shuf[(p%10)/2], d, c)
						VPMULHUW(mul[(p%10)/2], c, c)
						VPAND(mask, c, c)
						VPMADDWD(Mem{Base: ap, Disp: (p/2*4 + h) * 32}, c, c)
						VPADDD(c, acc, acc)
					}
				}
				rows[i] = acc
				if i != R-1 {
					ADDQ(stride, rp)
				}
			}
			isum := reduce8Y(rows, func(a, b, c Op) { VPADDD(a, b, c) }, func() Register { return YMM() }, false).(VecVirtual)
			blockTerm(fvec{}, isum, accRow, Mem{Base: mp, Disp: b * 64}, Mem{Base: ap, Disp: actCodes + b*64})
		}
	})
}
