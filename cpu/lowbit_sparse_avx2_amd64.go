//go:build !noasm && !purego

package cpu

import (
	"unsafe"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
)

// sparseA8YMM are the YMM W(1:2, 7-bit)A8 kernels for Sparse12 by kernel
// set: AVX2 (VPMADDUBSW + VPMADDWD) for avx2, AVX-VNNI (VEX VPDPBUSD) for
// avxvnni; by unit = min(G, 128) columns, with the features they need
// (checked against their Requires lines by TestRequiresCoverKernels).
var sparseA8YMM = map[ISA]*sparseYMMKernels{
	AVX2: {
		kernels:  map[int]bitsA8Func{128: asm.Sparse12A8Avx2, 64: asm.Sparse12A8G64Avx2, 32: asm.Sparse12A8G32Avx2},
		requires: []string{"AVX", "AVX2"},
	},
	AVXVNNI: {
		kernels:  map[int]bitsA8Func{128: asm.Sparse12A8AvxVnni, 64: asm.Sparse12A8G64AvxVnni, 32: asm.Sparse12A8G32AvxVnni},
		requires: []string{"AVX", "AVX2", "AVXVNNI"},
		vnni:     true,
	},
}

type sparseYMMKernels struct {
	kernels  map[int]bitsA8Func
	requires []string
	vnni     bool // activations +128 and per-lane corrections 128*sum(q-z)
}

// newSparseYMM returns the YMM kernel state for m, or nil where no kernel
// applies (zero points outside the integers 0..127; a CPU without the
// kernel set's features).
//
// The kernel (see gen/sparse12_avx2.go) reads a chunk of a row (128 pairs)
// as 4 quarters of 8 words, transposed so that byte v of quarter h is
// plane d = (v%16)/4 of word 8h + 4(v/16) + v%4, pair d*32 + word of the
// chunk. Per quarter the activations are the 32 even-column bytes then the
// 32 odd-column bytes of those pairs (the pair byte's sign bit, its
// position, picks one); unit u of the chunk is lane i*nu + u of row i.
func newSparseYMM(be *Backend, m *layout.Sparse12) *bitsSIMD {
	ks := sparseA8YMM[be.set.isa]
	if ks == nil {
		return nil
	}
	unit := min(m.G, 128)
	kern, ok := ks.kernels[unit]
	if !ok || !hasAll(ks.requires) {
		return nil
	}
	for g := 0; g < m.Groups(); g++ {
		for r := 0; r < m.PRows; r++ {
			if z := m.Zero(r, g); z < 0 || z > 127 || z != float32(int32(z)) {
				return nil
			}
		}
	}
	nu := 256 / unit
	R := 8 / nu
	metaBlock, zOff := 40, 32
	if ks.vnni {
		metaBlock, zOff = 72, 64
	}
	s := &bitsSIMD{n: 8, bpc: 2, r: R, lanes: 8, isa: be.set.isa, chunks: m.PCols / 256, kern: kern,
		metaBlock: metaBlock, words: m.Words, stride: 4 * m.WordsPerRow(), actChunk: 256 + 32}
	tiles := m.PRows / R
	s.meta = make([]byte, tiles*s.chunks*metaBlock)
	for t := 0; t < tiles; t++ {
		for k := 0; k < s.chunks; k++ {
			blk := s.meta[(t*s.chunks+k)*metaBlock:]
			for lane := 0; lane < 8; lane++ {
				r, u := t*R+lane/nu, lane%nu
				c0 := k*256 + u*unit
				g := c0 / m.G
				z := int32(m.Zero(r, g))
				putF32(blk[4*lane:], m.Scale(r, g))
				if ks.vnni {
					var sq int32
					for p := c0 / 2; p < (c0+unit)/2; p++ {
						_, q := m.Pair(r, p)
						sq += int32(q) - z
					}
					putI32(blk[32+4*lane:], 128*sq)
				}
				blk[zOff+lane] = byte(z)
			}
		}
	}
	s.idx, s.ctrl = make([]int32, 1), make([]byte, 64) // unused by the YMM kernels
	// the AVX-VNNI kernel's x+128: the sign bits flipped
	var flip uint32
	if ks.vnni {
		flip = 0x80808080
	}
	s.prep = func(act []byte, xq []int8, xs []float32, k0, k1 int) {
		for k := k0; k < k1; k++ {
			a := act[k*s.actChunk : (k+1)*s.actChunk]
			sparseActs(a, xq[k*256:(k+1)*256], flip)
			for lane := 0; lane < 8; lane++ {
				putF32(a[256+4*lane:], xs[(k*256+(lane%nu)*unit)/128])
			}
		}
	}
	return s
}

// sparseActs lays out one chunk's activations x (128 pairs) for the YMM
// Sparse12 kernels: byte v of quarter h's 32 is pair d*32 + 8h + 4(v/16)
// + v%4, d = (v%16)/4, its even column's activation at a[64h+v] and its
// odd column's at a[64h+32+v], each byte xored with a byte of flip. Four
// consecutive v are four consecutive pairs: one 8-byte load, split into
// its even and odd bytes (as splitEvenOdd).
func sparseActs(a []byte, x []int8, flip uint32) {
	_, _ = a[255], x[255] // every offset below is inside these
	ap, xp := unsafe.Pointer(&a[0]), unsafe.Pointer(&x[0])
	for h := 0; h < 4; h++ {
		for l := 0; l < 2; l++ {
			for d := 0; d < 4; d++ {
				v, p := 16*l+4*d, d*32+8*h+4*l
				u := *(*uint64)(unsafe.Add(xp, 2*p))
				*(*uint32)(unsafe.Add(ap, 64*h+v)) = pack4(u&0x00ff00ff00ff00ff) ^ flip
				*(*uint32)(unsafe.Add(ap, 64*h+32+v)) = pack4(u>>8&0x00ff00ff00ff00ff) ^ flip
			}
		}
	}
}
