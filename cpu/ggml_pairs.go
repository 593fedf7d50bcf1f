package cpu

import (
	"encoding/binary"
	"unsafe"

	"github.com/qgemv/qgemv/layout/ggml"
)

// Orders of their own: the AVX2 kernels of the K types (Q2_K to Q6_K),
// IQ4_XS (the avx2 set), Q5_0 and Q5_1 read a copy of the matrix with its
// codes (or high bits) reordered within each block at load
// (ggmlKernel.repack).
//
// Pair order (the K types, IQ4_XS; see gen/ggml_pairs.go): position
// 32v + p (v: code register 0..7, p: its byte 0..31) holds a column such
// that each 16-bit word of a register is two columns of one sub-block,
// the same sub-block in every register. 16-column sub-blocks
// (q2kPairSrc): p = 16h + 2k + b holds column 128h + 16k + 2v + b, word k
// of lane h is sub-block 8h + k. Q2_K stores register v = 4H + i as bits
// 2i..2i+1 of the 32 code bytes at 16 + 32H, as llama.cpp stores its own
// 2-bit codes; Q3_K's codes plus 4 (3 bits) fill three planes of 32 bytes
// in place of hmask and qs (q3kPlanes); Q6_K's low nibbles as the
// 32-column types' (register H low, H + 4 high, in the 32 bytes at 32H)
// and its high two bits in two blocks of 32 bytes in place of qh (bits 2i
// of byte p of block G: register 4G + i), q6kPairs. 32-column sub-blocks
// (q4kPairSrc): p = 16h + 4s + j holds column 128h + 32s + 4v + j, words
// 2s and 2s+1 of lane h are sub-block 4h + s; the 32 code bytes at qs +
// 32H hold register H in their low nibbles and H + 4 in their high ones
// (q4kPairNibbles; IQ4_XS too, on the avx2 set only: iq4xsPairWords), and
// Q5_K's high bits, in place of qh, bit v of byte p for register v
// (q5kPairHigh). Scales, d and dmin keep their places.
//
// Lane order (Q5_0, Q5_1): the 32 high bits with column 4d+b's at bit
// 8b+d (repackQhLanes).

// q2kPairSrc[j] is the column at position j of the pair order.
var q2kPairSrc = func() (s [256]uint8) {
	for v := 0; v < 8; v++ {
		for p := 0; p < 32; p++ {
			h, k, b := p/16, p%16/2, p%2
			s[32*v+p] = uint8(128*h + 16*k + 2*v + b)
		}
	}
	return s
}()

// repackQ2KPairs rewrites the codes of every Q2_K super-block in data
// (whole blocks, in place) in pair order.
func repackQ2KPairs(data []byte) {
	eachBlock(data, ggml.Q2_K, func(b []byte) { pairLow(b[16:80]) })
}

// repackQ3KPairs rewrites the codes and high bits of every Q3_K
// super-block in data (whole blocks, in place) in pair order, as planes.
func repackQ3KPairs(data []byte) {
	eachBlock(data, ggml.Q3_K, func(b []byte) { q3kPlanes(b[:96]) })
}

// eachBlock calls fn for every whole block of type t in data.
func eachBlock(data []byte, t ggml.Type, fn func(b []byte)) {
	n := t.BlockBytes()
	for blk := data; len(blk) >= n; blk = blk[n:] {
		fn(blk[:n])
	}
}

// q3kPlanes rewrites a Q3_K super-block's hmask and qs (b[:32], b[32:96])
// as three planes of the codes plus 4 in pair order: position p of plane
// A (b[:32]) holds registers 0 and 1 in bits 0-2 and 3-5, B (b[32:64])
// registers 2 and 3, C (b[64:96]) registers 4 and 5; bits 6-7 of A and B
// hold the low two bits of registers 6 and 7, bits 6 and 7 of C their
// third.
func q3kPlanes(b []byte) {
	var hb [32]byte
	pairHigh(&hb, b[:32])
	qs := b[32:96]
	pairLow(qs)
	const ones, threes = 0x0101010101010101, 0x0303030303030303
	le := binary.LittleEndian
	_ = b[95]
	for g := 0; g < 32; g += 8 { // eight positions at a time, a byte each
		l0, l1, h := le.Uint64(qs[g:]), le.Uint64(qs[32+g:]), le.Uint64(hb[g:])
		// register v's codes: 2 bits of l0 (v < 4) or l1, its high bit
		k0, k1 := l0&threes|h&ones<<2, l0>>2&threes|h>>1&ones<<2
		k2, k3 := l0>>4&threes|h>>2&ones<<2, l0>>6&threes|h>>3&ones<<2
		k4, k5 := l1&threes|h>>4&ones<<2, l1>>2&threes|h>>5&ones<<2
		k6, k7 := l1>>4&threes|h>>6&ones<<2, l1>>6&threes|h>>7&ones<<2
		le.PutUint64(b[g:], k0|k1<<3|k6&threes<<6)
		le.PutUint64(b[32+g:], k2|k3<<3|k7&threes<<6)
		le.PutUint64(b[64+g:], k4|k5<<3|k6>>2&ones<<6|k7>>2&ones<<7)
	}
}

// pairHigh gathers Q3_K's hmask bits in pair order: bit v of hb[p] is the
// high bit of register v's code at position p. Bit 4h + j of hm[l]
// (column 128h + 32j + l) belongs to register v = (l%16)/2 at position
// 16h + 4j + c, c = 2(l/16) + l%2; a[c] holds the old bytes 16(c/2) +
// c%2 + 2v (byte v) bit-transposed, so that its byte 4h + j is new byte
// 16h + 4j + c.
func pairHigh(hb *[32]byte, hm []byte) {
	le := binary.LittleEndian
	_ = hm[31]
	// the bytes 2i + p of r (i = 0..3; p = 0 or 1) packed into 32 bits
	half := func(r uint64, p uint) uint64 {
		e := r >> (8 * p) & 0x00ff00ff00ff00ff
		e = (e | e>>8) & 0x0000ffff0000ffff
		return (e | e>>16) & 0xffffffff
	}
	var a [4]uint64
	for c := range a {
		r0, r1 := le.Uint64(hm[16*(c/2):]), le.Uint64(hm[16*(c/2)+8:])
		a[c] = transpose8x8(half(r0, uint(c%2)) | half(r1, uint(c%2))<<32)
	}
	for h := 0; h < 2; h++ {
		var a32 [4]uint32
		for c := range a {
			a32[c] = uint32(a[c] >> (32 * h))
		}
		for j, v := range transpose4x4(a32) {
			binary.LittleEndian.PutUint32(hb[16*h+4*j:], v)
		}
	}
}

// pairLow reorders a super-block's 64 bytes of 2-bit codes. llama.cpp
// keeps column 128h + 32j + l in bits 2j of byte 32h + l; in pair order
// that code is register v = (l%16)/2 (H = v/4, i = v%4), position 16h +
// 4j + c with c = 2(l/16) + l%2. So new byte 32H + 16h + 4j + c holds at
// bits 2i field j of old byte 32h + l0 + 2i, l0 = 16(c/2) + 8H + c%2:
// with u the eight old bytes from 32h + 16(c/2) + 8H and f = u>>2j & 3
// per byte, bytes 0 and 1 of f | f>>14 | f>>28 | f>>42 are new bytes c =
// 2(c/2) and 2(c/2) + 1 of word j.
func pairLow(qs []byte) {
	le := binary.LittleEndian
	_ = qs[63]
	var u [8]uint64 // u[4h + 2(c/2) + H]: old bytes 32h + 16(c/2) + 8H ..
	for k := range u {
		u[k] = le.Uint64(qs[8*k:])
	}
	const threes = 0x0303030303030303
	gather := func(x uint64, j uint) uint64 {
		f := x >> (2 * j) & threes
		return (f | f>>14 | f>>28 | f>>42) & 0xffff
	}
	for h := 0; h < 2; h++ {
		for H := 0; H < 2; H++ {
			u0, u1 := u[4*h+H], u[4*h+2+H]
			var w [4]uint64 // word j: new bytes 4j .. 4j+3 of this 16
			for j := range w {
				w[j] = gather(u0, uint(j)) | gather(u1, uint(j))<<16
			}
			o := 32*H + 16*h
			le.PutUint64(qs[o:], w[0]|w[1]<<32)
			le.PutUint64(qs[o+8:], w[2]|w[3]<<32)
		}
	}
}

// transpose4x4 returns w with byte c of w[j] = byte j of a[c].
func transpose4x4(a [4]uint32) (w [4]uint32) {
	const lo, hi = 0x00ff00ff, 0xff00ff00
	t0 := a[0]&lo | a[1]&lo<<8 // a0.b0 a1.b0 a0.b2 a1.b2
	t1 := a[0]>>8&lo | a[1]&hi // a0.b1 a1.b1 a0.b3 a1.b3
	t2 := a[2]&lo | a[3]&lo<<8
	t3 := a[2]>>8&lo | a[3]&hi
	w[0] = t0&0xffff | t2<<16
	w[1] = t1&0xffff | t3<<16
	w[2] = t0>>16 | t2&0xffff0000
	w[3] = t1>>16 | t3&0xffff0000
	return w
}

// repackQ6KPairs rewrites the codes of every Q6_K super-block in data
// (whole blocks, in place) in pair order.
func repackQ6KPairs(data []byte) {
	eachBlock(data, ggml.Q6_K, func(b []byte) { q6kPairs(b[:192]) })
}

// q6kPairs reorders a Q6_K super-block's codes, ql (b[:128]) and qh
// (b[128:192]), two columns (16 bits) at a time. llama.cpp keeps column
// 128h + 32q + l in byte 64h + 32(q%2) + l of ql (nibble q/2) and bits
// 2q of byte 32h + l of qh; in pair order the columns 128h + 16k + 2v and
// the next (q = k/2, l = 16(k%2) + 2v) are position p = 16h + 2k of
// register v: nibble v/4 of ql's byte 32(v%4) + p, bits 2(v%4) of byte
// 32(v/4) + p of the new qh. The eight registers' columns at p are 16
// adjacent bytes of ql and of qh, taken as two 64-bit words each (g: the
// registers 4g..4g+3, one 16-bit word each): the new ql words of
// registers i and 4 + i are one word of n0 | n1<<4, and the new qh word
// of registers 4g..4g+3 folds t_g's four words at bits 2i.
func q6kPairs(b []byte) {
	le := binary.LittleEndian
	_ = b[191]
	var nl [64]uint16
	var nh [32]uint16
	for h := 0; h < 2; h++ {
		for k := 0; k < 8; k++ {
			q, w := k/2, 8*h+k // w: the word of position p = 16h + 2k
			lo := 64*h + 32*(q%2) + 16*(k%2)
			hb := 128 + 32*h + 16*(k%2)
			ns, ts := uint(4*(q/2)), uint(2*q)
			n0 := le.Uint64(b[lo:]) >> ns & 0x0f0f0f0f0f0f0f0f
			n1 := le.Uint64(b[lo+8:]) >> ns & 0x0f0f0f0f0f0f0f0f
			c := n0 | n1<<4
			nl[w], nl[16+w], nl[32+w], nl[48+w] = uint16(c), uint16(c>>16), uint16(c>>32), uint16(c>>48)
			t0 := le.Uint64(b[hb:]) >> ts & 0x0303030303030303
			t1 := le.Uint64(b[hb+8:]) >> ts & 0x0303030303030303
			nh[w] = uint16(t0) | uint16(t0>>16)<<2 | uint16(t0>>32)<<4 | uint16(t0>>48)<<6
			nh[16+w] = uint16(t1) | uint16(t1>>16)<<2 | uint16(t1>>32)<<4 | uint16(t1>>48)<<6
		}
	}
	for i := 0; i < 64; i += 4 {
		le.PutUint64(b[2*i:], uint64(nl[i])|uint64(nl[i+1])<<16|uint64(nl[i+2])<<32|uint64(nl[i+3])<<48)
	}
	for i := 0; i < 32; i += 4 {
		le.PutUint64(b[128+2*i:], uint64(nh[i])|uint64(nh[i+1])<<16|uint64(nh[i+2])<<32|uint64(nh[i+3])<<48)
	}
}

// q4kPairSrc[j] is the column at position j of the pair order of the
// 32-column sub-block types.
var q4kPairSrc = func() (s [256]uint8) {
	for v := 0; v < 8; v++ {
		for p := 0; p < 32; p++ {
			h, sb, j := p/16, p%16/4, p%4
			s[32*v+p] = uint8(128*h + 32*sb + 4*v + j)
		}
	}
	return s
}()

// repackQ4KPairs rewrites the codes of every Q4_K super-block in data
// (whole blocks, in place) in pair order.
func repackQ4KPairs(data []byte) {
	eachBlock(data, ggml.Q4_K, func(b []byte) { q4kPairNibbles(b[16:144]) })
}

// repackQ5KPairs rewrites the codes and high bits of every Q5_K
// super-block in data (whole blocks, in place) in pair order.
func repackQ5KPairs(data []byte) {
	eachBlock(data, ggml.Q5_K, func(b []byte) {
		q4kPairNibbles(b[48:176])
		q5kPairHigh(b[16:48])
	})
}

// repackIQ4XSPairs rewrites the codes of every IQ4_XS super-block in data
// (whole blocks, in place) in pair order.
func repackIQ4XSPairs(data []byte) {
	eachBlock(data, ggml.IQ4_XS, func(b []byte) { iq4xsPairWords(b[8:136]) })
}

// iq4xsPairWords reorders an IQ4_XS super-block's 128 bytes of 4-bit
// codes: llama.cpp keeps column 32j + l in byte 16j + l%16 of them, the
// low nibble for l < 16, so the 32-bit word 4j + H holds columns 32j +
// 4H .. +3 in its low nibbles and the 16 columns on in its high ones:
// registers H and H + 4 of pair order at sub-block j = 4h + s, which is
// word 8H + 4h + s there. A permutation of words.
func iq4xsPairWords(qs []byte) {
	le := binary.LittleEndian
	var old [32]uint32
	for i := range old {
		old[i] = le.Uint32(qs[4*i:])
	}
	for H := 0; H < 4; H++ {
		for j := 0; j < 8; j++ {
			le.PutUint32(qs[4*(8*H+j):], old[4*j+H])
		}
	}
}

// q4kPairNibbles reorders a super-block's 128 bytes of 4-bit codes.
// llama.cpp keeps column c in byte 32(c/64) + c%32, the low nibble for
// even c/32; four columns 4u..4u+3 of a 32 are one 32-bit word. In pair
// order word 8H + 4h + s holds in its low nibbles register H's columns
// 128h + 32s + 4H .. +3 (word 8(2h + s/2) + H of the old codes, nibble
// s%2) and in its high nibbles register H + 4's, the old word 4 further.
func q4kPairNibbles(qs []byte) {
	const nib = 0x0f0f0f0f
	le := binary.LittleEndian
	_ = qs[127]
	var old [32]uint32
	for i := 0; i < 32; i += 2 {
		w := le.Uint64(qs[4*i:])
		old[i], old[i+1] = uint32(w), uint32(w>>32)
	}
	// words 8H + 2m and 8H + 2m + 1 (h = m/2, s = 2(m%2) and the next)
	// take the low and the high nibbles of old words 8m + H and 8m + H + 4
	for H := 0; H < 4; H++ {
		for m := 0; m < 4; m++ {
			a, c := old[8*m+H], old[8*m+H+4]
			lo := a&nib | c&nib<<4
			hi := a>>4&nib | c>>4&nib<<4
			le.PutUint64(qs[4*(8*H+2*m):], uint64(lo)|uint64(hi)<<32)
		}
	}
}

// q5kPairHigh reorders a Q5_K super-block's 32 high-bit bytes: bit i of
// qh[l] is the high bit of column 32i + l; in pair order bit v of byte
// 4i + j (i = 4h + s) is register v's at position 16h + 4s + j, column
// 128h + 32s + 4v + j = 32i + 4v + j, bit i of qh[4v + j]. For each j
// that is the 8x8 bit transpose of the bytes 4v + j.
func q5kPairHigh(qh []byte) {
	le := binary.LittleEndian
	_ = qh[31]
	var rows [8]uint32 // row v: bytes 4v .. 4v+3
	for v := range rows {
		rows[v] = le.Uint32(qh[4*v:])
	}
	lo, hi := transpose4x4([4]uint32(rows[:4])), transpose4x4([4]uint32(rows[4:]))
	var x [4]uint64 // x[j]: byte v = qh[4v + j], bits transposed
	for j := range x {
		x[j] = transpose8x8(uint64(lo[j]) | uint64(hi[j])<<32)
	}
	lo = transpose4x4([4]uint32{uint32(x[0]), uint32(x[1]), uint32(x[2]), uint32(x[3])})
	hi = transpose4x4([4]uint32{uint32(x[0] >> 32), uint32(x[1] >> 32), uint32(x[2] >> 32), uint32(x[3] >> 32)})
	for i := 0; i < 4; i++ { // qh[4i + j] = byte i of x[j]
		le.PutUint32(qh[4*i:], lo[i])
		le.PutUint32(qh[16+4*i:], hi[i])
	}
}

// transpose8x8 returns x with bit c of byte r moved to bit r of byte c.
func transpose8x8(x uint64) uint64 {
	t := (x ^ x>>7) & 0x00aa00aa00aa00aa
	x ^= t ^ t<<7
	t = (x ^ x>>14) & 0x0000cccc0000cccc
	x ^= t ^ t<<14
	t = (x ^ x>>28) & 0x00000000f0f0f0f0
	return x ^ t ^ t<<28
}

// q2kPairSrc2 and q4kPairSrc4 are the pair orders in runs of two and four
// columns (pairRuns).
var q2kPairSrc2, q4kPairSrc4 = pairRuns(&q2kPairSrc, 2), pairRuns(&q4kPairSrc, 4)

// pairRuns returns order (position -> column) in runs of w columns: run j
// holds columns w*r[j] .. w*r[j]+w-1.
func pairRuns(order *[256]uint8, w int) []uint8 {
	r := make([]uint8, 256/w)
	for j := range r {
		r[j] = order[w*j] / uint8(w)
	}
	return r
}

// pairsInt8By4 writes x (whole super-blocks of 256 columns) to dst in the
// pair order of 32-column sub-blocks, four columns at a time.
func pairsInt8By4(dst, x []int8) { permuteRuns[uint32](dst, x, q4kPairSrc4) }

// pairsInt8 writes x (whole super-blocks of 256 columns) to dst in the
// pair order of 16-column sub-blocks, two columns at a time.
func pairsInt8(dst, x []int8) { permuteRuns[uint16](dst, x, q2kPairSrc2) }

// permuteRuns writes x (whole super-blocks of 256 columns) to dst in runs
// of T: run j of each super-block of dst is its run src[j] of x.
func permuteRuns[T uint16 | uint32](dst, x []int8, src []uint8) {
	var z T
	w := int(unsafe.Sizeof(z))
	n := len(x) &^ 255
	d := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(dst[:n]))), n/w)
	s := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(x[:n]))), n/w)
	per := 256 / w
	for o := 0; o < len(s); o += per {
		d, s := d[o:o+per], s[o:o+per]
		for j, c := range src {
			d[j] = s[c]
		}
	}
}

// qhLane[o] spreads the eight bits of qh byte k (columns 8k..8k+7 of a
// Q5_0 or Q5_1 block) to their places in lane order, shifted left by 2k:
// column 4d+b goes to bit 8b+d, so that the AVX2 kernels' VPSLLVD by 7-d
// of the broadcast word leaves it in the top bit of byte 4d+b.
var qhLane = func() (t [256]uint32) {
	for o := range t {
		for j := 0; j < 8; j++ { // column 8k+j = 4d+b: d = 2k + j/4, b = j%4
			t[o] |= uint32(o>>j&1) << (8*(j%4) + j/4)
		}
	}
	return t
}()

// repackQhLanes rewrites the 32 high bits at offset qh of every block of
// n bytes in data (whole blocks, in place) in lane order (qhLane).
func repackQhLanes(data []byte, n, qh int) {
	for blk := data; len(blk) >= n; blk = blk[n:] {
		q := blk[qh : qh+4]
		v := qhLane[q[0]] | qhLane[q[1]]<<2 | qhLane[q[2]]<<4 | qhLane[q[3]]<<6
		binary.LittleEndian.PutUint32(q, v)
	}
}
