//go:build !noasm && !purego

package cpu

import (
	"sync"
	"unsafe"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/layout"
)

// bitsLutFunc is a lookup-table float kernel (gen/lut.go): 16 rows per
// vector, one VPERMPS and one VADDPS per nibble (four 1-bit or two 2-bit
// codes) of 16 rows. meta is float32 or binary16 metadata (bitsLut).
type bitsLutFunc = func(w *byte, meta *byte, metaStride int, tab *float32, xsum *float32, out *float32, tiles int, chunks int)

// bitsLutKernels are the AVX-512 lookup-table kernels for Bits1 and Bits2
// by [width, segment length in planes] (at least a nibble: groups of at
// least 128 columns): tiles of 64 and of 16 rows with float32 metadata,
// then the same with binary16 metadata.
var bitsLutKernels = map[[2]int][4]bitsLutFunc{
	{1, 4}: {asm.Bits1LutA32S4X4Avx512, asm.Bits1LutA32S4X1Avx512,
		asm.Bits1LutA32S4X4F16Avx512, asm.Bits1LutA32S4X1F16Avx512},
	{1, 8}: {asm.Bits1LutA32S8X4Avx512, asm.Bits1LutA32S8X1Avx512,
		asm.Bits1LutA32S8X4F16Avx512, asm.Bits1LutA32S8X1F16Avx512},
	{1, 16}: {asm.Bits1LutA32S16X4Avx512, asm.Bits1LutA32S16X1Avx512,
		asm.Bits1LutA32S16X4F16Avx512, asm.Bits1LutA32S16X1F16Avx512},
	{1, 32}: {asm.Bits1LutA32S32X4Avx512, asm.Bits1LutA32S32X1Avx512,
		asm.Bits1LutA32S32X4F16Avx512, asm.Bits1LutA32S32X1F16Avx512},
	{2, 2}: {asm.Bits2LutA32S2X4Avx512, asm.Bits2LutA32S2X1Avx512,
		asm.Bits2LutA32S2X4F16Avx512, asm.Bits2LutA32S2X1F16Avx512},
	{2, 4}: {asm.Bits2LutA32S4X4Avx512, asm.Bits2LutA32S4X1Avx512,
		asm.Bits2LutA32S4X4F16Avx512, asm.Bits2LutA32S4X1F16Avx512},
	{2, 8}: {asm.Bits2LutA32S8X4Avx512, asm.Bits2LutA32S8X1Avx512,
		asm.Bits2LutA32S8X4F16Avx512, asm.Bits2LutA32S8X1F16Avx512},
	{2, 16}: {asm.Bits2LutA32S16X4Avx512, asm.Bits2LutA32S16X1Avx512,
		asm.Bits2LutA32S16X4F16Avx512, asm.Bits2LutA32S16X1F16Avx512},
}

// bitsLutTables builds the tables of the table kernels, by width.
var bitsLutTables = map[int]func(tab *float32, sums *float32, x *float32, chunks int){
	1: asm.BitsLutTables1Avx512, 2: asm.BitsLutTables2Avx512,
}

var bitsLutRequires = []string{"AVX", "AVX512F"}

// lutTableFloats is the size of one chunk's tables: 32 words, 8 nibbles,
// 16 entries.
const lutTableFloats = 32 * 8 * 16

// lutAllOnes is, by width, the table index whose codes are all 1: its
// entry is the sum of the nibble's activations.
var lutAllOnes = map[int]int{1: 0b1111, 2: 0b0101}

// bitsLut is a Bits1 or Bits2 matrix's state for the table kernels:
// metadata laid out at load per 16-row block (PRows/16 of them, metaBlock
// bytes each) and segment, one value per row. Matrices with binary16 zero points (not
// offsets) get 16 binary16 scales s, then 16 zero points z (the kernel
// takes s*z as layout.(*Bits).Affine does; half the bytes, which the
// kernel, bound by memory, reads 15-30% faster). Others get 16 float32
// scales s, then 16 float32 m (s*z, or -o with offsets). Padding rows have
// s = m = 0.
type bitsLut struct {
	n, seg, sps, nseg, chunks int
	meta                      []byte
	metaBlock                 int
	kern                      [2]bitsLutFunc // 64-row and 16-row tiles
	// words is b.Words in the order the kernels read them (lutPack), so
	// each tile streams one contiguous block; packed on the first float
	// multiply, so matrices only multiplied with int8 activations never
	// hold the copy.
	words []uint32
	block *hugemem.Block // words' huge-page memory, or nil
	pack  sync.Once
	huge  bool // pack into huge pages (the backend's HugePages)
}

// lutPack returns b's words (PRows rows of wpr words, chunks of 32) in the
// order the table kernels read them: the 16-row block B starts at word
// B*16*wpr as in b.Words, but inside every 64-row tile (rows below
// PRows/64*64; past them, every 16-row block alone) the rows are stored
// chunk by chunk, and each chunk's 16-row blocks transposed: word t of
// the block's 16 rows as 16 consecutive words (row i's at i), so a vector
// load gives the kernel 16 rows' word t. A tile is then one stream in
// address order. Measured on the 2-core Zen 5 VM, Bits1G128 A32
// 4096x14336, alternating binaries, with each layout's best prefetch
// distance: 0.38-0.50 ms (2 threads) and 0.61-0.63 (1 thread) reading
// b.Words in place, 0.28-0.31 and 0.41-0.42 packed. It costs a second
// copy of the words for matrices multiplied with float activations (made
// on the first such multiply), in huge-page memory on HugePages backends
// like the words themselves (packed into ordinary memory it had measured
// 0.32-0.54 ms against 0.26-0.38 in huge pages, alternating runs).
func lutPack(b *layout.Bits, huge bool) ([]uint32, *hugemem.Block) {
	wpr := b.WordsPerRow()
	full := b.PRows / 64 * 64
	out, blk := newWords(b.PRows*wpr, huge)
	for r := 0; r < b.PRows; r++ {
		R, base := 64, r/64*64
		if r >= full {
			R, base = 16, r/16*16
		}
		i := r - base
		for k := 0; k < wpr/32; k++ {
			blk := out[base*wpr+(k*R+i/16*16)*32:][:512] // chunk k of 16-row block i/16
			for t, w := range b.Words[r*wpr+k*32:][:32] {
				blk[t*16+i%16] = w
			}
		}
	}
	return out, blk
}

// newBitsLut returns the table kernels' state for b with segments of seg
// planes, or nil where they do not apply: widths other than 1 and 2,
// segments below a nibble (groups below 128 columns for 1 bit, 64 for 2),
// kernel sets other than avx512vnni.
func newBitsLut(be *Backend, b *layout.Bits, seg int) *bitsLut {
	ks, ok := bitsLutKernels[[2]int{b.N, seg}]
	if !ok || be.set.isa != AVX512VNNI || !hasAll(bitsLutRequires) {
		return nil
	}
	l := &bitsLut{n: b.N, seg: seg, sps: layout.BitsStep(b.N) / seg, nseg: b.PCols / (32 * seg), chunks: b.PCols / layout.BitsChunk(b.N), kern: [2]bitsLutFunc{ks[0], ks[1]}}
	l.huge = be.huge
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
	l.pack.Do(func() { l.words, l.block = lutPack(b, l.huge) })
	pc, cc := mx.pcols, layout.BitsChunk(l.n)
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
			bitsLutTables[l.n](&tab[v*tabLen+k0*lutTableFloats], &sums[v*sumLen+k0*128], &xp[v*pc+k0*cc], k1-k0)
		}
		return nil
	})
	// Segment sums: a segment of seg planes is seg*n/4 nibble columns.
	nps, ones := l.seg*l.n/4, lutAllOnes[l.n]
	for v := 0; v < batch; v++ {
		for s := 0; s < l.nseg; s++ {
			k, j0 := s/l.sps, s%l.sps*nps
			var a float32
			for j := j0; j < j0+nps; j++ {
				a += sums[v*sumLen+(k*8+j)*16+ones]
			}
			xsum[v*l.nseg+s] = a
		}
	}
	wpr := b.WordsPerRow()
	full := b.PRows / 64 * 64
	// Tasks start and end on 64-row tiles (lutPack), or at PRows.
	align := func(r int) int { return min((r+63)/64*64, b.PRows) }
	mx.b.parallelRows(mx.rows, 4*wpr*batch, func(r0, r1 int) {
		a, e := align(r0), align(r1)
		if a >= e {
			return
		}
		out := make([]float32, e-a)
		m := max(a, min(e, full)) // 64-row tiles below m, 16-row ones from it
		for v := 0; v < batch; v++ {
			for _, p := range [2]struct {
				r, n int
				kern bitsLutFunc
			}{{a, (m - a) / 64, l.kern[0]}, {m, (e - m) / 16, l.kern[1]}} {
				if p.n > 0 {
					p.kern((*byte)(unsafe.Pointer(&l.words[p.r*wpr])), &l.meta[p.r/16*l.metaBlock], l.metaBlock, &tab[v*tabLen], &xsum[v*l.nseg], &out[p.r-a], p.n, l.chunks)
				}
			}
			copy(dst[v*mx.rows+a:v*mx.rows+min(e, mx.rows)], out)
		}
	})
}

// freeKernels releases memory the kernels' state holds outside the Go
// heap (Close).
func (mx *LowMatrix) freeKernels() {
	if mx.a32 != nil && mx.a32.lut != nil && mx.a32.lut.block != nil {
		mx.a32.lut.block.Free()
	}
}
