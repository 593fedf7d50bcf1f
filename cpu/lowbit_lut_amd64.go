//go:build !noasm && !purego

package cpu

import (
	"sync"
	"unsafe"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
)

// bitsLutFunc is a lookup-table float kernel (gen/lut.go): 16 rows per
// vector, one VPERMPS and one VADDPS per nibble of 4 one-bit codes of 16
// rows. meta is float32 or binary16 metadata (bitsLut).
type bitsLutFunc = func(w *byte, stride int, meta *byte, metaStride int, tab *float32, xsum *float32, out *float32, tiles int, chunks int)

// bitsLutKernels are the AVX-512 lookup-table kernels for Bits1 by the
// segment length in planes (at least a nibble: groups of at least 128
// columns): tiles of 64 and of 16 rows with float32 metadata, then the
// same with binary16 metadata.
var bitsLutKernels = map[int][4]bitsLutFunc{
	4: {asm.Bits1LutA32S4X4Avx512, asm.Bits1LutA32S4X1Avx512,
		asm.Bits1LutA32S4X4F16Avx512, asm.Bits1LutA32S4X1F16Avx512},
	8: {asm.Bits1LutA32S8X4Avx512, asm.Bits1LutA32S8X1Avx512,
		asm.Bits1LutA32S8X4F16Avx512, asm.Bits1LutA32S8X1F16Avx512},
	16: {asm.Bits1LutA32S16X4Avx512, asm.Bits1LutA32S16X1Avx512,
		asm.Bits1LutA32S16X4F16Avx512, asm.Bits1LutA32S16X1F16Avx512},
	32: {asm.Bits1LutA32S32X4Avx512, asm.Bits1LutA32S32X1Avx512,
		asm.Bits1LutA32S32X4F16Avx512, asm.Bits1LutA32S32X1F16Avx512},
}

var bitsLutRequires = []string{"AVX", "AVX512F"}

// lutTableFloats is the size of one chunk's tables: 32 words, 8 nibbles,
// 16 entries.
const lutTableFloats = 32 * 8 * 16

// lutAllOnes is the table index whose four codes are all 1: its entry is
// the sum of the nibble's activations.
const lutAllOnes = 15

// bitsLut is a Bits1 matrix's state for the table kernels: metadata laid
// out at load per 16-row block (PRows/16 of them, metaBlock bytes each)
// and segment, one value per row. Matrices with binary16 zero points (not
// offsets) get 16 binary16 scales s, then 16 zero points z (the kernel
// takes s*z as layout.(*Bits).Affine does; half the bytes, which the
// kernel, bound by memory, reads 15-30% faster). Others get 16 float32
// scales s, then 16 float32 m (s*z, or -o with offsets). Padding rows have
// s = m = 0.
type bitsLut struct {
	seg, sps, nseg, chunks int
	meta                   []byte
	metaBlock              int
	kern                   [2]bitsLutFunc // 64-row and 16-row tiles
}

// newBitsLut returns the table kernels' state for b with segments of seg
// planes, or nil where they do not apply: widths other than 1, groups
// below 128 columns, kernel sets other than avx512vnni.
func newBitsLut(be *Backend, b *layout.Bits, seg int) *bitsLut {
	ks, ok := bitsLutKernels[seg]
	if b.N != 1 || !ok || be.set.isa != AVX512VNNI || !hasAll(bitsLutRequires) {
		return nil
	}
	l := &bitsLut{seg: seg, sps: 32 / seg, nseg: b.PCols / (32 * seg), chunks: b.PCols / layout.BitsChunk(1), kern: [2]bitsLutFunc{ks[0], ks[1]}}
	f16 := !b.FP32Meta && !b.Offsets
	var m16 []layout.FP16
	var m32 []float32
	if f16 {
		l.kern = [2]bitsLutFunc{ks[2], ks[3]}
		m16 = make([]layout.FP16, b.PRows/16*l.nseg*32)
	} else {
		m32 = make([]float32, b.PRows/16*l.nseg*32)
	}
	for r := 0; r < b.PRows; r++ {
		for j := 0; j < l.nseg; j++ {
			g := j * 32 * seg / b.G
			o := (r/16*l.nseg+j)*32 + r%16
			if f16 {
				i := g*b.PRows + r // group-major, as layout.Bits keeps them
				m16[o], m16[o+16] = b.Scales16[i], b.Zeros16[i]
			} else {
				m32[o], m32[o+16] = b.Affine(r, g)
			}
		}
	}
	if f16 {
		l.meta, l.metaBlock = unsafe.Slice((*byte)(unsafe.Pointer(&m16[0])), 2*len(m16)), 2*32*l.nseg
	} else {
		l.meta, l.metaBlock = unsafe.Slice((*byte)(unsafe.Pointer(&m32[0])), 4*len(m32)), 4*32*l.nseg
	}
	return l
}

var lutPool = sync.Pool{New: func() any { return new([]float32) }}

// lutMaxTableFloats bounds the tables one pass of mulF32Lut builds (4
// floats per column and vector): wider matrices take the batch's vectors
// in groups (a variable so a test can force the groups).
var lutMaxTableFloats = 4 << 20

// mulF32Lut runs the table kernels on padded activations xp: the tables of
// every vector first (threads over chunks), then threads over row tiles,
// each tile over whole rows (its chunks in order).
func (mx *LowMatrix) mulF32Lut(dst, xp []float32, batch int) {
	l, b := mx.a32.lut, mx.bits
	pc, cc := mx.pcols, layout.BitsChunk(1)
	tabLen, sumLen := l.chunks*lutTableFloats, l.chunks*8*16
	if g := max(1, lutMaxTableFloats/tabLen); batch > g {
		for v0 := 0; v0 < batch; v0 += g {
			n := min(g, batch-v0)
			mx.mulF32Lut(dst[v0*mx.rows:(v0+n)*mx.rows], xp[v0*pc:(v0+n)*pc], n)
		}
		return
	}
	bufp := lutPool.Get().(*[]float32)
	defer lutPool.Put(bufp)
	*bufp = grow(*bufp, batch*(tabLen+sumLen+l.nseg))
	buf := *bufp
	tab, sums, xsum := buf[:batch*tabLen], buf[batch*tabLen:batch*(tabLen+sumLen)], buf[batch*(tabLen+sumLen):]
	_ = mx.b.parallelFor(l.chunks, 1, func(k0, k1 int) error {
		for v := 0; v < batch; v++ {
			asm.BitsLutTables1Avx512(&tab[v*tabLen+k0*lutTableFloats], &sums[v*sumLen+k0*128], &xp[v*pc+k0*cc], k1-k0)
		}
		return nil
	})
	// Segment sums: a segment of seg planes is seg/4 nibble columns.
	nps := l.seg / 4
	for v := 0; v < batch; v++ {
		for s := 0; s < l.nseg; s++ {
			k, j0 := s/l.sps, s%l.sps*nps
			var a float32
			for j := j0; j < j0+nps; j++ {
				a += sums[v*sumLen+(k*8+j)*16+lutAllOnes]
			}
			xsum[v*l.nseg+s] = a
		}
	}
	wpr := b.WordsPerRow()
	stride := 4 * wpr
	mx.b.parallelRows(mx.rows, stride*batch, func(r0, r1 int) {
		nt := (r1 - r0 + 15) / 16 // 16-row blocks; padding rows exist (PRows)
		out := make([]float32, 16*nt)
		for v := 0; v < batch; v++ {
			for t0 := 0; t0 < nt; {
				kern, n, per := l.kern[0], (nt-t0)/4, 4
				if n == 0 {
					kern, n, per = l.kern[1], nt-t0, 1
				}
				r := r0 + 16*t0
				w := (*byte)(unsafe.Pointer(&b.Words[r*wpr]))
				kern(w, stride, &l.meta[r/16*l.metaBlock], l.metaBlock, &tab[v*tabLen], &xsum[v*l.nseg], &out[16*t0], n, l.chunks)
				t0 += per * n
			}
			copy(dst[v*mx.rows+r0:v*mx.rows+r1], out)
		}
	})
}
