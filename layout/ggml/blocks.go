package ggml

import (
	"encoding/binary"

	"github.com/qgemv/qgemv/layout"
)

// KValues is the 16-entry non-linear code book of IQ4_NL and IQ4_XS
// (ggml's kvalues_iq4nl): code q stands for the integer KValues[q].
var KValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// Ints is one block in integer form: the integer weights and the
// sub-block scales and mins every kernel and reference works from.
//
//	w[e] = float32(float32(D[j] * float32(Q[e])) + O[j])   (j = e / SubLen)
//
// with D[j] = float32(d * float32(Sc[j])) and, for the types with
// offsets, O[j] = -float32(dmin * float32(Mn[j])) (K types) or O = m
// (Q4_1, Q5_1): exactly the reference dequantizers' float32 operations.
// For the 32-element types Sc[0] = 1 and D = d (not rounded again: d*1
// is d).
type Ints struct {
	Q      [256]int8 // integer weights, BlockElems of them
	Sc, Mn [16]int32 // integer sub-block scales and mins (SubBlocks of them)
	D, Dm  float32   // d (the block's float scale); dmin (K types) or m (Q4_1, Q5_1)
}

func f16(b []byte) float32 { return layout.FP16(binary.LittleEndian.Uint16(b)).Float32() }

// scaleMinK4 returns the 6-bit scale and min of sub-block j from the 12
// packed bytes of a Q4_K or Q5_K block (ggml's get_scale_min_k4).
func scaleMinK4(j int, s []byte) (sc, m int32) {
	if j < 4 {
		return int32(s[j] & 63), int32(s[j+4] & 63)
	}
	return int32(s[j+4]&0xF | (s[j-4]>>6)<<4), int32(s[j+4]>>4 | (s[j]>>6)<<4)
}

// Decode unpacks one block b (BlockBytes bytes) of type t into z. It
// reads only b's bytes and never fails: every bit pattern is a block
// (Validate rejects non-finite half-precision fields separately).
func (t Type) Decode(z *Ints, b []byte) {
	b = b[:t.BlockBytes()]
	switch t {
	case Q4_0, Q4_1, IQ4_NL:
		qs := b[2:18]
		z.D = f16(b)
		if t == Q4_1 {
			z.Dm, qs = f16(b[2:]), b[4:20]
		}
		for j := 0; j < 16; j++ {
			lo, hi := int8(qs[j]&15), int8(qs[j]>>4)
			switch t {
			case Q4_0:
				lo, hi = lo-8, hi-8
			case IQ4_NL:
				lo, hi = KValues[lo], KValues[hi]
			}
			z.Q[j], z.Q[j+16] = lo, hi
		}
		z.Sc[0] = 1
	case Q5_0, Q5_1:
		z.D = f16(b)
		qh, qs := binary.LittleEndian.Uint32(b[2:]), b[6:22]
		if t == Q5_1 {
			z.Dm = f16(b[2:])
			qh, qs = binary.LittleEndian.Uint32(b[4:]), b[8:24]
		}
		for j := 0; j < 16; j++ {
			lo := int8(qs[j]&15 | byte(qh>>j&1)<<4)
			hi := int8(qs[j]>>4 | byte(qh>>(j+16)&1)<<4)
			if t == Q5_0 {
				lo, hi = lo-16, hi-16
			}
			z.Q[j], z.Q[j+16] = lo, hi
		}
		z.Sc[0] = 1
	case Q8_0:
		z.D = f16(b)
		for j := 0; j < 32; j++ {
			z.Q[j] = int8(b[2+j])
		}
		z.Sc[0] = 1
	case Q2_K:
		sc, qs := b[0:16], b[16:80]
		z.D, z.Dm = f16(b[80:]), f16(b[82:])
		for j := 0; j < 16; j++ {
			z.Sc[j], z.Mn[j] = int32(sc[j]&15), int32(sc[j]>>4)
		}
		for e := 0; e < 256; e++ {
			c, s, l := e/128, e/32%4, e%32
			z.Q[e] = int8(qs[32*c+l] >> (2 * s) & 3)
		}
	case Q3_K:
		hm, qs, sc := b[0:32], b[32:96], b[96:108]
		z.D = f16(b[108:])
		for j := 0; j < 16; j++ {
			lo := sc[j%8] >> (4 * (j / 8)) & 15
			hi := sc[8+j%4] >> (2 * (j / 4)) & 3
			z.Sc[j] = int32(lo|hi<<4) - 32
		}
		for e := 0; e < 256; e++ {
			c, s, l := e/128, e/32%4, e%32
			q := int8(qs[32*c+l] >> (2 * s) & 3)
			if hm[l]>>(e/32)&1 == 0 {
				q -= 4
			}
			z.Q[e] = q
		}
	case Q4_K, Q5_K:
		z.D, z.Dm = f16(b), f16(b[2:])
		sc := b[4:16]
		for j := 0; j < 8; j++ {
			z.Sc[j], z.Mn[j] = scaleMinK4(j, sc)
		}
		qs, qh := b[16:144], []byte(nil)
		if t == Q5_K {
			qh, qs = b[16:48], b[48:176]
		}
		for e := 0; e < 256; e++ {
			c, h, l := e/64, e/32%2, e%32
			q := qs[32*c+l] >> (4 * h) & 15
			if qh != nil {
				q |= (qh[l] >> (e / 32) & 1) << 4
			}
			z.Q[e] = int8(q)
		}
	case Q6_K:
		ql, qh, sc := b[0:128], b[128:192], b[192:208]
		z.D = f16(b[208:])
		for j := 0; j < 16; j++ {
			z.Sc[j] = int32(int8(sc[j]))
		}
		for e := 0; e < 256; e++ {
			c, l := e/128, e%128
			lo := ql[64*c+l%64] >> (4 * (l / 64)) & 15
			hi := qh[32*c+l%32] >> (2 * (l / 32)) & 3
			z.Q[e] = int8(lo|hi<<4) - 32
		}
	case IQ4_XS:
		z.D = f16(b)
		sh, sl, qs := binary.LittleEndian.Uint16(b[2:]), b[4:8], b[8:136]
		for j := 0; j < 8; j++ {
			lo := sl[j/2] >> (4 * (j % 2)) & 15
			hi := byte(sh>>(2*j)) & 3
			z.Sc[j] = int32(lo|hi<<4) - 32
		}
		for e := 0; e < 256; e++ {
			k, h, l := e/32, e/16%2, e%16
			z.Q[e] = KValues[qs[16*k+l]>>(4*h)&15]
		}
	}
}

// SubScale returns D[j] and O[j] of the block (see Ints): the float32
// scale and offset of sub-block j exactly as the reference dequantizer
// computes them.
func (t Type) SubScale(z *Ints, j int) (d, o float32) {
	switch t.off() {
	case offPlus:
		return z.D, z.Dm
	case offMinus:
		return float32(z.D * float32(z.Sc[j])), -float32(z.Dm * float32(z.Mn[j]))
	}
	if t.BlockElems() == 32 {
		return z.D, 0
	}
	return float32(z.D * float32(z.Sc[j])), 0
}

// DequantizeBlock writes the block's BlockElems weights to dst, bit for
// bit as llama.cpp's reference dequantizer (gguf-py's dequantize) does.
func (t Type) DequantizeBlock(dst []float32, b []byte) {
	var z Ints
	t.Decode(&z, b)
	t.dequantizeInts(dst, &z)
}

func (t Type) dequantizeInts(dst []float32, z *Ints) {
	n, sub := t.BlockElems(), t.SubLen()
	dst = dst[:n]
	off := t.off() != offNone
	for j := 0; j < n/sub; j++ {
		d, o := t.SubScale(z, j)
		for e := j * sub; e < (j+1)*sub; e++ {
			w := float32(d * float32(z.Q[e]))
			if off {
				w = float32(w + o)
			}
			dst[e] = w
		}
	}
}

type halfField struct {
	name string
	off  int
}

// The binary16 fields of the block types (halfFields), made once: Validate
// checks them in every block.
var (
	halfD     = []halfField{{"d", 0}}
	halfDM    = []halfField{{"d", 0}, {"m", 2}}
	halfDDmin = []halfField{{"d", 0}, {"dmin", 2}}
	halfQ2K   = []halfField{{"d", 80}, {"dmin", 82}}
	halfQ3K   = []halfField{{"d", 108}}
	halfQ6K   = []halfField{{"d", 208}}
)

// halfFields lists the binary16 fields of a block of type t.
func (t Type) halfFields() []halfField {
	switch t {
	case Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS:
		return halfD
	case Q4_1, Q5_1:
		return halfDM
	case Q4_K, Q5_K:
		return halfDDmin
	case Q2_K:
		return halfQ2K
	case Q3_K:
		return halfQ3K
	case Q6_K:
		return halfQ6K
	}
	return nil
}
