//go:build !noasm && !purego

package cpu

import (
	"unsafe"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
)

// bitsA8Kernels are the AVX-512 W(n)A8 kernels for Bits, by width, and
// the features they need (checked against their Requires lines by
// TestRequiresCoverKernels).
var bitsA8Kernels = struct {
	byN      map[int]func(w *byte, stride int, meta *byte, act *byte, chunks int, out *float32, ntiles int, ctrl *byte, idx *int32)
	requires []string
}{
	byN: map[int]func(w *byte, stride int, meta *byte, act *byte, chunks int, out *float32, ntiles int, ctrl *byte, idx *int32){
		8: asm.Bits8A8Avx512, 4: asm.Bits4A8Avx512, 2: asm.Bits2A8Avx512, 1: asm.Bits1A8Avx512,
	},
	requires: []string{"AVX", "AVX512F", "AVX512VNNI", "AVX512VBMI"},
}

// bitsSIMD is a Bits matrix's state for the assembly A8 kernel: metadata
// rearranged once at load into lane order, and the kernel's constants.
type bitsSIMD struct {
	n, bpc, r int
	chunks    int
	meta      []byte // per tile, per chunk: 16 float32 scales, 16 int32 zeros
	ctrl      []byte
	idx       []int32
	kern      func(w *byte, stride int, meta *byte, act *byte, chunks int, out *float32, ntiles int, ctrl *byte, idx *int32)
}

// newBitsSIMD returns the assembly state for b, or nil where the kernel
// does not apply: widths other than 8/4/2/1, groups below 128 columns,
// fractional zeros, a CPU without the features, or a backend forced to a
// narrower kernel set than avx512vnni.
func newBitsSIMD(be *Backend, b *layout.Bits) *bitsSIMD {
	kern, ok := bitsA8Kernels.byN[b.N]
	if !ok || b.G < 128 || be.set.isa != AVX512VNNI || !hasAll(bitsA8Kernels.requires) || b.IntegerZeros() != nil { // checked once, at load
		return nil
	}
	bpc := 8 / b.N
	s := &bitsSIMD{n: b.N, bpc: bpc, r: 16 / bpc, chunks: b.PCols / layout.BitsChunk(b.N), kern: kern}
	tiles := b.PRows / s.r
	s.meta = make([]byte, tiles*s.chunks*128)
	for t := 0; t < tiles; t++ {
		for k := 0; k < s.chunks; k++ {
			blk := s.meta[(t*s.chunks+k)*128:]
			for i := 0; i < s.r; i++ {
				for bb := 0; bb < bpc; bb++ {
					lane := i*bpc + bb
					g := (k*bpc + bb) * 128 / b.G
					putF32(blk[4*lane:], b.Scale(t*s.r+i, g))
					putI32(blk[64+4*lane:], int32(b.Zero(t*s.r+i, g)))
				}
			}
		}
	}
	s.ctrl = make([]byte, bpc*64)
	for bb := 0; bb < bpc; bb++ {
		for j := 0; j < 64; j++ {
			d, jj := (j%8)/4, j%4 // dword within the qword, byte within it
			plane := 4*bb + jj
			s.ctrl[bb*64+j] = byte(32*d + 32 - b.N*(plane+1))
		}
	}
	s.idx = make([]int32, bpc*16)
	for bb := 0; bb < bpc; bb++ {
		for i := 0; i < s.r; i++ {
			s.idx[bb*16+i] = int32(i*bpc + bb)
		}
	}
	return s
}

func (s *bitsSIMD) kernelName() string { return "cpu-" + string(AVX512VNNI) + "-a8+generic" }

// plane returns the plane whose code is byte j of a regrouped dword of
// block b (n = 8 keeps the word's bytes: byte j is plane 3-j).
func (s *bitsSIMD) plane(b, j int) int {
	if s.n == 8 {
		return 3 - j
	}
	return 4*b + j
}

// prepAct lays out one vector's int8 activations for the kernel.
func (s *bitsSIMD) prepAct(act []byte, xq []int8, xs []float32) {
	step := 32 / s.n
	block := s.bpc*128 + 128
	for k := 0; k < s.chunks; k++ {
		a := act[k*block : (k+1)*block]
		for b := 0; b < s.bpc; b++ {
			for h := 0; h < 2; h++ {
				for t := 0; t < 16; t++ {
					for j := 0; j < 4; j++ {
						col := (k*step+s.plane(b, j))*32 + 16*h + t
						a[(b*2+h)*64+4*t+j] = byte(xq[col])
					}
				}
			}
		}
		for lane := 0; lane < 16; lane++ { // lane i*bpc+b: block b of the chunk
			blk := k*s.bpc + lane%s.bpc
			var sum int32
			for _, v := range xq[blk*128 : blk*128+128] {
				sum += int32(v)
			}
			putF32(a[s.bpc*128+4*lane:], xs[blk])
			putI32(a[s.bpc*128+64+4*lane:], sum)
		}
	}
}

// mulI8SIMD runs the assembly kernel for one vector.
func (mx *LowMatrix) mulI8SIMD(dst []float32, xq []int8, xs []float32) {
	s, b := mx.simd, mx.bits
	act := make([]byte, s.chunks*(s.bpc*128+128))
	s.prepAct(act, xq, xs)
	stride := b.WordsPerRow() * 4
	mx.b.parallelRows(mx.rows, stride, func(r0, r1 int) {
		t0 := r0 / s.r
		nt := (r1 - r0 + s.r - 1) / s.r
		out := make([]float32, 16*nt)
		w := (*byte)(unsafe.Pointer(&b.Words[r0*b.WordsPerRow()]))
		s.kern(w, stride, &s.meta[t0*s.chunks*128], &act[0], s.chunks, &out[0], nt, &s.ctrl[0], &s.idx[0])
		for t := 0; t < nt; t++ {
			for i := 0; i < s.r; i++ {
				if r := r0 + t*s.r + i; r < r1 {
					dst[r] = out[16*t+i]
				}
			}
		}
	})
}
