//go:build !noasm && !purego

package cpu

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/klauspost/cpuid/v2"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/layout"
)

// bitsLutFunc is a lookup-table float kernel (gen/bits_lut.go): 16 rows per
// vector, one VPERMPS and one VADDPS per nibble (four 1-bit or two 2-bit
// codes) of 16 rows, over words packed by lutPack.
type bitsLutFunc = func(w *byte, tab *float32, xsum *float32, out *float32, blocks int, chunks int, stride int)

// bitsLutKernels are the AVX-512 lookup-table kernels for Bits1 and Bits2
// by [width, segment length in planes] (at least a nibble: groups of at
// least 128 columns for 1 bit, 64 for 2): with float32 metadata, then
// with binary16 metadata; both prefetching with PREFETCHT1 (VPSRLD), then
// both with PREFETCHNTA (VPMULTISHIFTQB; lutNTA).
var bitsLutKernels = map[[2]int][4]bitsLutFunc{
	{1, 4}:  {asm.Bits1LutA32S4Avx512, asm.Bits1LutA32S4F16Avx512, asm.Bits1LutA32S4NtaAvx512, asm.Bits1LutA32S4F16NtaAvx512},
	{1, 8}:  {asm.Bits1LutA32S8Avx512, asm.Bits1LutA32S8F16Avx512, asm.Bits1LutA32S8NtaAvx512, asm.Bits1LutA32S8F16NtaAvx512},
	{1, 16}: {asm.Bits1LutA32S16Avx512, asm.Bits1LutA32S16F16Avx512, asm.Bits1LutA32S16NtaAvx512, asm.Bits1LutA32S16F16NtaAvx512},
	{1, 32}: {asm.Bits1LutA32S32Avx512, asm.Bits1LutA32S32F16Avx512, asm.Bits1LutA32S32NtaAvx512, asm.Bits1LutA32S32F16NtaAvx512},
	{2, 2}:  {asm.Bits2LutA32S2Avx512, asm.Bits2LutA32S2F16Avx512, asm.Bits2LutA32S2NtaAvx512, asm.Bits2LutA32S2F16NtaAvx512},
	{2, 4}:  {asm.Bits2LutA32S4Avx512, asm.Bits2LutA32S4F16Avx512, asm.Bits2LutA32S4NtaAvx512, asm.Bits2LutA32S4F16NtaAvx512},
	{2, 8}:  {asm.Bits2LutA32S8Avx512, asm.Bits2LutA32S8F16Avx512, asm.Bits2LutA32S8NtaAvx512, asm.Bits2LutA32S8F16NtaAvx512},
	{2, 16}: {asm.Bits2LutA32S16Avx512, asm.Bits2LutA32S16F16Avx512, asm.Bits2LutA32S16NtaAvx512, asm.Bits2LutA32S16F16NtaAvx512},
}

// lutNTA selects the table kernels that prefetch with PREFETCHNTA and
// take nibbles with VPMULTISHIFTQB: on AMD cores, not on Intel's, where
// NTA lines skip L2 and are gone before use, and VPMULTISHIFTQB would
// share port 5 with VPERMPS (the others shift with VPSRLD).
var lutNTA = cpuid.CPU.VendorID == cpuid.AMD || cpuid.CPU.VendorID == cpuid.Hygon

// bitsLutTables builds the tables of the table kernels, by width.
var bitsLutTables = map[int]func(tab *float32, sums *float32, x *float32, chunks int){
	1: asm.BitsLutTables1Avx512, 2: asm.BitsLutTables2Avx512,
}

var bitsLutRequires = []string{"AVX", "AVX512F", "AVX512VBMI"}

// lutTableFloats is the size of one chunk's tables: 32 words, 8 nibbles,
// 16 entries.
const lutTableFloats = 32 * 8 * 16

// lutAllOnes is, by width, the table index whose codes are all 1: its
// entry is the sum of the nibble's activations.
var lutAllOnes = map[int]int{1: 0b1111, 2: 0b0101}

// bitsLut is a Bits1 or Bits2 matrix's state for the table kernels.
// Matrices with binary16 zero points (not offsets) get per row and
// segment binary16 s and z (the kernel takes s*z as layout.(*Bits).Affine
// does; half the bytes, and the kernel is bound by memory). Others get
// float32 s and m (s*z, or -o with offsets). Padding
// rows have s = m = 0.
type bitsLut struct {
	n, seg, sps, nseg, chunks int
	f16                       bool
	unit                      int // bytes per 16-row block and chunk in words
	kern                      bitsLutFunc
	// words is b.Words and the metadata in the order the kernels read
	// them (lutPack); packed on the first float multiply, so matrices
	// only multiplied with int8 activations never hold the copy.
	words []uint32
	block *hugemem.Block // words' huge-page memory, or nil
	// unclosed frees block if the matrix is dropped without Close.
	unclosed runtime.Cleanup
	pack     sync.Once
	huge     bool // pack into huge pages (the backend's HugePages)
}

// lutPack returns b's words and metadata in the order the table kernels
// read them: chunk-major (chunk k's region at byte k*stride, stride =
// PRows/16 units), each chunk's 16-row blocks in turn as units of l.unit
// bytes: the block's 32 words transposed (word t of the 16 rows as 16
// consecutive words, row i's at i), so a vector load gives the kernel 16
// rows' word t, then the block's metadata for the chunk's segments (per
// segment 16 scales, then 16 zero points or m). A task's rows are then
// one stream per chunk, and the chunk's tables serve all of them from L1.
// The kernels stream faster from the packed copy than from b.Words in
// place, at the cost of a second copy of the words for matrices multiplied
// with float activations (made on the first such multiply), in huge-page
// memory on HugePages backends like the words themselves.
func lutPack(b *layout.Bits, l *bitsLut) ([]uint32, *hugemem.Block) {
	wpr, nb := b.WordsPerRow(), b.PRows/16
	out, blk := newWords(l.chunks*nb*l.unit/4, l.huge)
	for k := 0; k < l.chunks; k++ {
		for B := 0; B < nb; B++ {
			u := out[(k*nb+B)*l.unit/4:][:l.unit/4]
			m16 := unsafe.Slice((*layout.FP16)(unsafe.Pointer(&u[512])), 2*(len(u)-512))
			m32 := unsafe.Slice((*float32)(unsafe.Pointer(&u[512])), len(u)-512)
			for i := 0; i < 16; i++ {
				r := 16*B + i
				for t, w := range b.Words[r*wpr+k*32:][:32] {
					u[t*16+i] = w
				}
				for s := 0; s < l.sps; s++ {
					g := (k*l.sps + s) * 32 * l.seg / b.G
					if l.f16 {
						j := g*b.PRows + r // group-major, as layout.Bits keeps them
						m16[s*32+i], m16[s*32+16+i] = b.Scales16[j], b.Zeros16[j]
					} else {
						m32[s*32+i], m32[s*32+16+i] = b.Affine(r, g)
					}
				}
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
	l := &bitsLut{n: b.N, seg: seg, sps: layout.BitsStep(b.N) / seg, nseg: b.PCols / (32 * seg), chunks: b.PCols / layout.BitsChunk(b.N), f16: !b.FP32Meta && !b.Offsets, huge: be.huge}
	if lutNTA {
		ks[0], ks[1] = ks[2], ks[3]
	}
	segBytes := 128
	if l.kern = ks[0]; l.f16 {
		l.kern, segBytes = ks[1], 64
	}
	l.unit = 2048 + segBytes*l.sps
	return l
}

// lutTasksPerThread is the row tasks per thread of the table kernels: each
// task reads every chunk's tables and jumps from chunk to chunk, so fewer,
// longer tasks stream better, down to a point: one task per thread with
// the AMD kernels, four with the others (parallelRows' default of 16 is
// slower for both).
var lutTasksPerThread = map[bool]int{true: 1, false: 4}[lutNTA]

var lutPool = sync.Pool{New: func() any { return new([]float32) }}

// lutMaxTableFloats bounds the tables one pass of mulF32Lut builds (4
// floats per column and vector): wider matrices take the batch's vectors
// in groups (a variable so a test can force the groups).
var lutMaxTableFloats = 4 << 20

// mulF32Lut runs the table kernels on padded activations xp: the tables of
// every vector first (threads over chunks), then lutTasksPerThread tasks
// per thread over 16-row blocks, each walking lutPack's chunk regions for
// its blocks, vector by vector.
func (mx *LowMatrix) mulF32Lut(dst, xp []float32, batch int) {
	l, b := mx.a32.lut, mx.bits
	l.pack.Do(func() {
		if l.words, l.block = lutPack(b, l); l.block != nil {
			// Close frees it (freeKernels); this, for a matrix dropped
			// unclosed.
			l.unclosed = runtime.AddCleanup(mx, (*hugemem.Block).Free, l.block)
		}
	})
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
	nb := b.PRows / 16
	// Tasks start and end on 16-row blocks, or at PRows.
	align := func(r int) int { return min((r+15)/16*16, b.PRows) }
	mx.b.parallelRowsPer(mx.rows, 4*b.WordsPerRow()*batch, lutTasksPerThread, func(r0, r1 int) {
		a, e := align(r0), align(r1)
		if a >= e {
			return
		}
		out := make([]float32, e-a)
		for v := 0; v < batch; v++ {
			clear(out)
			l.kern((*byte)(unsafe.Pointer(&l.words[a/16*l.unit/4])), &tab[v*tabLen], &xsum[v*l.nseg], &out[0], (e-a)/16, l.chunks, nb*l.unit)
			copy(dst[v*mx.rows+a:v*mx.rows+min(e, mx.rows)], out)
		}
	})
}

// freeKernels releases memory the kernels' state holds outside the Go
// heap (Close).
func (mx *LowMatrix) freeKernels() {
	if mx.a32 != nil && mx.a32.lut != nil && mx.a32.lut.block != nil {
		mx.a32.lut.unclosed.Stop()
		mx.a32.lut.block.Free()
	}
}
