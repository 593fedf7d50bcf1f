package cpu

import "unsafe"

// Pair order: the AVX2 kernels of Q2_K and Q3_K read a copy of the
// matrix whose codes are reordered within each super-block (see
// gen/ggml_pairs.go).
// Position 32v + p of the order (v: code register 0..7, p: its byte 0..31,
// p = 16h + 2k + b) holds column 128h + 16k + 2v + b: each 16-bit word of
// a register is two columns of one sub-block, and word k of lane h is
// sub-block 8h + k in every register. Register v = 4H + i is stored as
// bits 2i..2i+1 of the 32 code bytes at 16 + 32H (Q3_K: 32 + 32H), as
// llama.cpp stores its own 2-bit codes; Q3_K's high bit of register v is
// bit q3kPairHighBit[v] of hmask byte p; scales, d and dmin keep their
// places.

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

// q3kPairHighBit is the hmask bit of each code register in pair order:
// registers 2g and 2g+1 two bits apart, so that one shift brings both to
// bits 2 and 4 (gen's pairHighBit).
var q3kPairHighBit = [8]uint8{0, 2, 1, 3, 4, 6, 5, 7}

const (
	q2kBlockBytes = 84
	q3kBlockBytes = 110
)

// repackQ2KPairs rewrites the codes of every Q2_K super-block in data
// (whole blocks, in place) in pair order.
func repackQ2KPairs(data []byte) {
	var codes [256]byte
	for blk := data; len(blk) >= q2kBlockBytes; blk = blk[q2kBlockBytes:] {
		qs := blk[16:80]
		for c := range codes { // llama.cpp: column 128h + 32j + l at bits 2j of qs[32h + l]
			h, j, l := c/128, c%128/32, c%32
			codes[c] = qs[32*h+l] >> (2 * j) & 3
		}
		for H := 0; H < 2; H++ {
			for p := 0; p < 32; p++ {
				var b byte
				for i := 0; i < 4; i++ {
					b |= codes[q2kPairSrc[32*(4*H+i)+p]] << (2 * i)
				}
				qs[32*H+p] = b
			}
		}
	}
}

// q2kPairSrc2 is q2kPairSrc in two-column steps: position j of the order
// holds columns 2*q2kPairSrc2[j] and the next.
var q2kPairSrc2 = func() (s [128]uint8) {
	for j := range s {
		s[j] = q2kPairSrc[2*j] / 2
	}
	return s
}()

// repackQ3KPairs rewrites the codes and high bits of every Q3_K
// super-block in data (whole blocks, in place) in pair order.
func repackQ3KPairs(data []byte) {
	var low, high [256]byte
	for blk := data; len(blk) >= q3kBlockBytes; blk = blk[q3kBlockBytes:] {
		hm, qs := blk[:32], blk[32:96]
		for c := range low { // llama.cpp: column 128h + 32j + l at bits 2j of qs[32h + l], bit 4h + j of hmask[l]
			h, j, l := c/128, c%128/32, c%32
			low[c] = qs[32*h+l] >> (2 * j) & 3
			high[c] = hm[l] >> (4*h + j) & 1
		}
		for p := 0; p < 32; p++ {
			var b byte
			for v := 0; v < 8; v++ {
				b |= high[q2kPairSrc[32*v+p]] << q3kPairHighBit[v]
			}
			hm[p] = b
		}
		for H := 0; H < 2; H++ {
			for p := 0; p < 32; p++ {
				var b byte
				for i := 0; i < 4; i++ {
					b |= low[q2kPairSrc[32*(4*H+i)+p]] << (2 * i)
				}
				qs[32*H+p] = b
			}
		}
	}
}

// pairsInt8 writes x (whole super-blocks of 256 columns) to dst in pair
// order, two columns at a time.
func pairsInt8(dst, x []int8) {
	n := len(x) &^ 255
	d := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(dst[:n]))), n/2)
	s := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(x[:n]))), n/2)
	for o := 0; o < len(s); o += 128 {
		d, s := d[o:o+128], s[o:o+128]
		for j, c := range &q2kPairSrc2 {
			d[j] = s[c]
		}
	}
}
