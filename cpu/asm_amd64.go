//go:build !noasm && !purego

package cpu

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/klauspost/cpuid/v2"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
)

// The assembly kernel sets, best first. Each requires list is every
// feature its instructions need (checked against the generated
// "// Requires:" lines by TestRequiresCoverKernels); cpuid reports the AVX
// families only when the OS saves their registers.
const (
	AVX512VNNI ISA = "avx512vnni" // AVX-512 VNNI (+GFNI) W4A8 on ZMM, AVX-512F W4A32
	AVXVNNI    ISA = "avxvnni"    // AVX-VNNI W4A8 (VEX VPDPBUSD on YMM), AVX2 W4A32
	AVX2       ISA = "avx2"       // AVX2 W4A8 (VPMADDUBSW), AVX2 W4A32
)

type kernelFunc func(w *byte, stride int, sc *float32, z *byte, groups int, act *byte, idx *int32, out *float32, nst int)

// family is one ISA's kernels for one activation type, by batch width M.
type family struct {
	lanes int                // result lanes per sub-tile (L)
	tileM int                // smallest M run in column tiles (0: never)
	rowsM int                // smallest M whose kernel has rows in the lanes (0: none)
	amx   bool               // AMX kernels: B-tile activations, row-major out for M > 1
	byM   map[int]kernelFunc // M = 1, 2, 4, ... <= L
	// tm, if set, is byM[1] reading the matrix's scales and zeros in
	// super-tile order (q4Meta) instead of the format's: batch 1 runs it
	// on matrices Load gave that copy (q4MetaTiles).
	tm kernelFunc
	// tmLead, if set, is tm prefetching each row ahead (...PfLead), run
	// on rows where leadFits.
	tmLead kernelFunc
	// b1, if set, runs batch 1 on such matrices instead (a family with tm
	// whose batch-1 activations are laid out as this family's: prepA8 of
	// one vector fills every lane of both); Load makes the copy in super
	// tiles of its lanes.
	b1   *family
	maxM int
	idx  map[int][]int32 // permutation tables by M
}

func newFamily(lanes, tileM int, kernels ...kernelFunc) *family {
	f := &family{lanes: lanes, tileM: tileM, byM: map[int]kernelFunc{}, idx: map[int][]int32{}}
	for i, k := range kernels {
		m := 1 << i
		f.byM[m] = k
		f.maxM = m
		r := lanes / m
		t := make([]int32, m*lanes)
		for u := 0; u < m; u++ {
			for k := 0; k < lanes; k++ {
				t[u*lanes+k] = int32(u*r + k/m)
			}
		}
		f.idx[m] = t
	}
	return f
}

// tileM is the smallest batch each family runs in column tiles (see
// colTileBytes): the batch from which tiles timed faster than whole rows.
// The AVX-512 W4A8 kernels (whose 16-vector kernel reads each group's
// activations once per 16 rows) gain nothing from tiles; AVX2 W4A8 runs
// its 8-vector kernel in them (two Zen 3 cores, 4096x14336, two
// alternating rounds: batch 16 11.4 -> 10.0 ms, batch 8 level), and its
// 4-vector kernel on whole rows (in tiles 1.22x the time).
// Batch 1 keeps whole rows: column tiles cut the weight rows into short
// runs the next-tile prefetch no longer covers.
var (
	a8Avx512 = newFamily(16, 0, asm.Q4A8Avx512VnniM1, asm.Q4A8Avx512VnniM2, asm.Q4A8Avx512VnniM4, asm.Q4A8Avx512VnniT8, asm.Q4A8Avx512VnniT16)
	a8AvxVnn = newFamily(8, 8, asm.Q4A8AvxVnniM1, asm.Q4A8AvxVnniM2, asm.Q4A8AvxVnniM4, asm.Q4A8AvxVnniM8)
	a8Avx2   = newFamily(8, 8, asm.Q4A8Avx2M1, asm.Q4A8Avx2M2, asm.Q4A8Avx2M4, asm.Q4A8Avx2M8)
	a32Av512 = newFamily(8, 4, asm.Q4A32Avx512M1, asm.Q4A32Avx512M2, asm.Q4A32Avx512M4, asm.Q4A32Avx512M8)
	a32Avx2  = newFamily(4, 4, asm.Q4A32Avx2M1, asm.Q4A32Avx2M2, asm.Q4A32Avx2M4)
)

// The 8- and 16-vector AVX-512 W4A8 kernels have rows in the lanes and
// vector-major output, which leaves them no horizontal sums. The batch-1
// kernels come in both metadata orders (tm, q4MetaTiles). Where
// l1PrefetchCPU (Zen 5) the AVX-512 set runs batch 1 on the AVX2 kernel
// (8-row super tiles) with the metadata in super-tile order: on a Zen 5
// VM, FFN block, alternating, two threads 2362-2374 -> 2110-2188 us
// (88-89% -> 93-96% of the read meter) and one thread 2881-2977 ->
// 2710-2993 us (78-81% -> 86-89%), three rounds; its AVX-512 batch-1
// kernel there is the variant that prefetches the next super tile with
// PREFETCHNTA (q4A8M1Variants). There the AVX2 batch-1 kernels are the
// variants that prefetch each row 2 KiB ahead instead of the next super
// tile (...PfLead): alternated call by call on the same matrices from
// DRAM (TestQ4PrefetchAB), two threads, 4096x14336 0.90x the time,
// 14336x4096 0.89-0.98x, 1024x4096 0.89x. With them one thread runs the
// same kernel: a four-row kernel it ran before (fewer rows at once had
// streamed faster from one core with the next-super-tile prefetch), with
// a lead prefetch too, took 1.27-1.38x its time (FFN block, one thread,
// five of six alternating rounds; the sixth level).
func init() {
	a8Avx512.rowsM = 8
	a8Avx512.tm = q4A8M1TmVariants[0]
	a8AvxVnn.tm = asm.Q4A8AvxVnniM1Tm
	a8Avx2.tm = asm.Q4A8Avx2M1Tm
	if l1PrefetchCPU() {
		a8Avx512.byM[1], a8Avx512.tm = q4A8M1Variants[1], q4A8M1TmVariants[1]
		a8Avx512.b1 = a8Avx2
		a8Avx2.tmLead = asm.Q4A8Avx2M1TmPfLead
	}
	a8Amx.b1, a8Amx.tm = a8Avx512, a8Avx512.tm
}

// q4A8M1Variants are the AVX-512 batch-1 W4A8 kernels: the next super
// tile prefetched with PREFETCHT1, or with PREFETCHNTA (on a Zen 5 VM,
// two threads, 0.87-0.92x the time on 4096x14336 and 14336x4096);
// q4A8M1TmVariants the same on the metadata in super-tile order.
var (
	q4A8M1Variants   = [2]kernelFunc{asm.Q4A8Avx512VnniM1, asm.Q4A8Avx512VnniM1PfNta}
	q4A8M1TmVariants = [2]kernelFunc{asm.Q4A8Avx512VnniM1Tm, asm.Q4A8Avx512VnniM1PfNtaTm}
)

// q4MetaTiles reports whether Load gives a matrix its metadata in
// super-tile order on a backend of threads threads: everywhere on Zen 5
// (l1PrefetchCPU); elsewhere with more than one thread. On the 16-core
// Xeon host (AVX-512, AMX disabled), FFN block, three alternating rounds,
// 16 threads took 746-1025 -> 678-803 us and one thread 6557-6900 ->
// 7943-8137 us that way.
var q4MetaTiles = func(threads int) bool { return l1PrefetchCPU() || threads > 1 }

// a8Amx is the W4A8 family of the AVX-512 VNNI set with AMX: on the
// 16-core Xeon it measured faster than a8Avx512 at every batch width with
// 16 threads, and from batch 2 with one (docs/KERNELS.md). Q4A8AmxT1
// keeps rows in the lanes (out vector-major, like the other M=1
// kernels); the wider ones write out row-major, 16 vector lanes a row.
//
// Batch 1 runs on the AVX-512 family (b1; at M = 1 both lay out the
// activations alike), on the metadata in super-tile order where Load made
// that copy: on the 16-core Xeon host, FFN block, 16 threads, three
// alternating rounds in one call, AMX 874, 890, 923 us against AVX-512
// 709, 723, 685 us per block; one thread 3.38 against 3.01 ms on
// 4096x14336 (medians, an earlier call).
var a8Amx = func() *family {
	f := newFamily(16, 0, asm.Q4A8AmxT1, asm.Q4A8AmxT2, asm.Q4A8AmxT4, asm.Q4A8AmxT8, asm.Q4A8AmxT16)
	f.amx = true
	return f
}()

// amxRequires is what the AMX kernels need besides the AVX-512 set's
// features (OS permission for the tile data is asked separately).
var amxRequires = []string{"AMXTILE", "AMXINT8"}

func init() {
	type def struct {
		isa         ISA
		requires    []string
		fam8, fam32 *family
	}
	var sets []*kernelSet
	for _, d := range []def{
		{AVX512VNNI, []string{"AVX", "AVX2", "FMA3", "AVX512F", "AVX512BW", "AVX512VL", "AVX512VNNI", "GFNI"}, a8Avx512, a32Av512},
		{AVXVNNI, []string{"AVX", "AVX2", "FMA3", "AVXVNNI"}, a8AvxVnn, a32Avx2},
		{AVX2, []string{"AVX", "AVX2", "FMA3"}, a8Avx2, a32Avx2},
	} {
		f8, f32 := d.fam8, d.fam32
		set := newKernelSet(d.isa, d.requires, f8, f32)
		if d.isa == AVX512VNNI {
			for _, k := range append(q4A8M1Variants[:], q4A8M1TmVariants[0], q4A8M1TmVariants[1], asm.Q4A8Avx2M1Tm, asm.Q4A8Avx2M1TmPfLead) {
				set.kernels = append(set.kernels, k)
			}
			set.amx = newKernelSet(d.isa, append(slices.Clip(d.requires), amxRequires...), a8Amx, f32)
			set.amx.label = string(d.isa) + "+amx"
			set.amx.tiles = true
		}
		sets = append(sets, set)
	}
	kernelSets = append(sets, kernelSets...)
	if hasAll(streamTilesRequires) {
		streamTiles = asm.StreamReadTilesAvx512
	}
	for _, s := range streamReaders {
		if hasAll(s.requires) {
			for i, fn := range s.shapes {
				read := fn
				if streamShapes[i].name == "nt" { // VMOVNTDQA needs aligned lines
					streamShapes[i].fn = func(b []uint64) uint64 {
						h := min(len(b), int(-uintptr(unsafe.Pointer(unsafe.SliceData(b)))%64/8))
						b, sum := b[h:], streamReadGeneric(b[:h])
						return streamTail(b, sum^read(b))
					}
				} else {
					streamShapes[i].fn = func(b []uint64) uint64 { return streamTail(b, read(b)) }
				}
			}
			break
		}
	}
}

// newKernelSet returns the kernel set of isa that runs the W4A8 family f8
// and the W4A32 family f32.
func newKernelSet(isa ISA, requires []string, f8, f32 *family) *kernelSet {
	var kernels []any
	for _, f := range []*family{f8, f32} {
		for _, k := range f.byM {
			kernels = append(kernels, k)
		}
		if f.tm != nil {
			kernels = append(kernels, f.tm)
		}
	}
	return &kernelSet{
		isa:      isa,
		requires: requires,
		kernels:  kernels,
		metaRows: func(threads int) int {
			switch {
			case f8.tm == nil || !q4MetaTiles(threads):
				return 0
			case f8.b1 != nil:
				return f8.b1.lanes
			}
			return f8.lanes
		},
		alloc8:  func(c *call) { c.sc.act = grow(c.sc.act, actBytes(f8, c, true)) },
		alloc32: func(c *call) { c.sc.actf = grow(c.sc.actf, actBytes(f32, c, false)/4) },
		prep8:   f8.prepA8,
		prep32:  f32.prepA32,
		a8: func(c *call, r0, r1 int) {
			_, mpad, _ := f8.chunks(c.batch)
			f := f8
			if c.batch == 1 && f8.b1 != nil && (c.tm != nil || f8.amx) {
				f = f8.b1
			}
			f.run(c.m, c.tm, unsafe.Pointer(&c.sc.act[0]), c.m.Groups()*(128*mpad+128), c.batch, c.dst, r0, r1)
		},
		a32: func(c *call, r0, r1 int) {
			_, mpad, _ := f32.chunks(c.batch)
			f32.run(c.m, nil, unsafe.Pointer(&c.sc.actf[0]), 4*c.m.Groups()*(128*mpad+16), c.batch, c.dst, r0, r1)
		},
	}
}

// streamReaders are the vector streaming reads, best first, with the
// features their instructions need: per instruction set one function per
// loop shape, in the order of streamShapes.
var streamReaders = []struct {
	shapes   []func([]uint64) uint64
	requires []string
}{
	{[]func([]uint64) uint64{asm.StreamReadAvx512, asm.StreamReadX4Avx512, asm.StreamReadPfAvx512, asm.StreamReadNtAvx512, asm.StreamReadPfAvx512}, []string{"AVX", "AVX2", "AVX512F"}},
	{[]func([]uint64) uint64{asm.StreamReadAvx2, asm.StreamReadX4Avx2, asm.StreamReadPfAvx2, asm.StreamReadNtAvx2, asm.StreamReadPfAvx2}, []string{"AVX", "AVX2"}},
}

// streamTilesRequires is what StreamReadTilesAvx512 needs.
var streamTilesRequires = []string{"AVX", "AVX2", "AVX512F"}

// streamTail folds the words the vector loop leaves (len%8) into sum.
func streamTail(b []uint64, sum uint64) uint64 {
	for _, v := range b[len(b)&^7:] {
		sum ^= v
	}
	return sum
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// chunks splits batch vectors into runs of at most maxM; each run uses the
// kernel for the next power of two.
func (f *family) chunks(batch int) (per, mpad int, n int) { return batchRuns(batch, f.maxM) }

// batchRuns splits batch vectors into n balanced runs of at most maxM,
// per vectors each (the last may have fewer), run by the kernel for mpad,
// the next power of two.
func batchRuns(batch, maxM int) (per, mpad int, n int) {
	per = min(batch, maxM)
	n = (batch + per - 1) / per
	per = (batch + n - 1) / n // balance the runs
	return per, nextPow2(per), n
}

// actBytes returns the size of the call's kernel-layout activations.
func actBytes(f *family, c *call, a8 bool) int {
	_, mpad, n := f.chunks(c.batch)
	g := c.m.Groups()
	if a8 {
		return n * g * (128*mpad + 128)
	}
	return n * g * 4 * (128*mpad + 16)
}

// prepA8 lays out groups [g0, g1) of the int8 activations as the A8
// kernels read them (see the asm package): per vector chunk, per group, M
// blocks of 128 bytes (even columns, then odd columns), then 16 lane scales
// and 16 lane sums.
func (f *family) prepA8(c *call, g0, g1 int) {
	per, mpad, n := f.chunks(c.batch)
	m := c.m
	g := m.Groups()
	block := 128*mpad + 128
	act := c.sc.act
	for ch := 0; ch < n; ch++ {
		base := act[ch*g*block : (ch+1)*g*block]
		for gi := g0; gi < g1; gi++ {
			blk := base[gi*block : (gi+1)*block]
			if f.amx {
				amxActs(blk[:128*mpad], c, ch*per, min(per, c.batch-ch*per), mpad, gi)
			} else {
				for v := 0; v < mpad; v++ {
					dst := blk[v*128 : v*128+128]
					b := ch*per + v
					if v >= per || b >= c.batch {
						clear(dst)
						continue
					}
					splitEvenOdd(dst[:64], dst[64:], c.xq[b*m.PCols+gi*128:b*m.PCols+gi*128+128])
				}
			}
			// Lane k: vector k%mpad's scale and sum (zero past the batch
			// and the family's lanes).
			var sl [16]float32
			var tl [16]int32
			for v := 0; v < min(per, c.batch-ch*per); v++ {
				i := (ch*per+v)*g + gi
				for k := v; k < f.lanes; k += mpad {
					sl[k], tl[k] = c.xs[i], c.isum[i]
				}
			}
			lanes := blk[128*mpad : 128*mpad+128]
			copy(lanes[:64], unsafe.Slice((*byte)(unsafe.Pointer(&sl[0])), 64))
			copy(lanes[64:], unsafe.Slice((*byte)(unsafe.Pointer(&tl[0])), 64))
		}
	}
}

// prepA32 lays out groups [g0, g1) of the float32 activations for the A32
// kernels: per vector chunk, per group, M blocks of 128 float32 (even, then
// odd columns), then 16 lane sums.
func (f *family) prepA32(c *call, g0, g1 int) {
	per, mpad, n := f.chunks(c.batch)
	m := c.m
	g := m.Groups()
	block := 128*mpad + 16 // in float32
	act := c.sc.actf
	for ch := 0; ch < n; ch++ {
		base := act[ch*g*block : (ch+1)*g*block]
		for gi := g0; gi < g1; gi++ {
			blk := base[gi*block : (gi+1)*block]
			for v := 0; v < mpad; v++ {
				dst := blk[v*128 : v*128+128]
				b := ch*per + v
				if v >= per || b >= c.batch {
					clear(dst)
					continue
				}
				src := c.x[b*m.PCols+gi*128 : b*m.PCols+gi*128+128]
				for j := 0; j < 64; j++ {
					dst[j] = src[2*j]
					dst[64+j] = src[2*j+1]
				}
			}
			lanes := blk[128*mpad:]
			for k := range lanes {
				v := k % mpad
				b := ch*per + v
				lanes[k] = 0
				if k < f.lanes && v < per && b < c.batch {
					lanes[k] = c.xsum[b*g+gi]
				}
			}
		}
	}
}

// amxActs lays out group gi of vectors v0..v0+nv-1 (padded with zeros to
// mpad) as the AMX kernels' two B tiles: row k of the first holds the even
// columns 8k, 8k+2, 8k+4, 8k+6 of each vector in turn (4 bytes a vector),
// row k of the second the odd columns 8k+1..8k+7.
func amxActs(dst []byte, c *call, v0, nv, mpad, gi int) {
	pc := c.m.PCols
	even, odd := dst[:64*mpad], dst[64*mpad:128*mpad]
	for v := 0; v < mpad; v++ {
		if v >= nv {
			for k := 0; k < 16; k++ {
				clear(even[k*4*mpad+4*v : k*4*mpad+4*v+4])
				clear(odd[k*4*mpad+4*v : k*4*mpad+4*v+4])
			}
			continue
		}
		src := c.xq[(v0+v)*pc+gi*128 : (v0+v)*pc+gi*128+128]
		for k := 0; k < 16; k++ {
			e, o := even[k*4*mpad+4*v:k*4*mpad+4*v+4], odd[k*4*mpad+4*v:k*4*mpad+4*v+4]
			for t := 0; t < 4; t++ {
				e[t] = byte(src[8*k+2*t])
				o[t] = byte(src[8*k+2*t+1])
			}
		}
	}
}

func putF32(b []byte, v float32) { *(*float32)(unsafe.Pointer(&b[0])) = v }
func putI32(b []byte, v int32)   { *(*int32)(unsafe.Pointer(&b[0])) = v }
func putU16(b []byte, v uint16)  { *(*uint16)(unsafe.Pointer(&b[0])) = v }
func getU16(b []byte) uint16     { return *(*uint16)(unsafe.Pointer(&b[0])) }

// tilePool holds the kernels' output tiles (one call's results before the
// scatter); a local array would escape through the kernel's function value.
var tilePool = sync.Pool{New: func() any { return new([16 * 128]float32) }}

// rowChunk is the rows one kernel call covers when the batch needs several
// vector chunks: small enough that the chunk's weights stay in L2 between
// the chunks' passes.
var rowChunk = 32

// colTileBytes bounds the activations one kernel call reads in a column
// tile. Batched kernels that take their activations from memory re-read a
// group's activations for every row, so for runs of tileM vectors or more
// the groups are split into column tiles whose activations stay in L1
// while all the call's rows pass over them (the kernels add to their
// output, so each tile continues the sums of the one before). The budget
// is the Psumbook kernel's (l1Budget), the fastest of the sizes tried for
// the 16-vector W4A32 kernel.
var colTileBytes = l1Budget(cpuid.CPU.Cache.L1D)

// run computes rows [r0, r1) (r0 a multiple of 16) for every vector: act
// holds n chunks of chunkBytes each; per vector chunk the kernel writes
// sub-tile results that are scattered into dst. tm, if not nil, is the
// matrix's metadata in super-tile order, which batch 1 then reads with
// f.tm.
func (f *family) run(m *layout.Q4G128, tm *q4Meta, act unsafe.Pointer, chunkBytes int, batch int, dst []float32, r0, r1 int) {
	per, mpad, n := f.chunks(batch)
	kern := f.byM[mpad]
	stride := m.PCols / 2
	if f.tm == nil || mpad != 1 || tm == nil || tm.rows != f.lanes {
		tm = nil // the format's order
	} else {
		kern = f.tm
		if f.tmLead != nil && leadFits(f.lanes, stride, 4096) {
			kern = f.tmLead
		}
	}
	idx := &f.idx[mpad][0]
	L := f.lanes
	groups := m.Groups()
	groupBytes := chunkBytes / groups
	tile := groups
	if f.tileM > 0 && mpad >= f.tileM && chunkBytes > colTileBytes {
		tile = max(1, colTileBytes/groupBytes)
	}
	out := tilePool.Get().(*[16 * 128]float32)
	defer tilePool.Put(out)
	step := 128
	if n > 1 {
		step = rowChunk
	}
	for a := r0; a < r1; {
		// Stay inside one 128-row block and one row chunk.
		b := min(r1, (a/128+1)*128, a+step)
		rows := b - a
		nst := (rows + L - 1) / L
		mi := m.MetaIndex(a, 0)
		for c := 0; c < n; c++ {
			ap := unsafe.Add(act, c*chunkBytes)
			// The kernels add to their output.
			amx := f.amx && mpad > 1
			res := out[:nst*mpad*L]
			if amx { // row-major, 16 vector lanes a row
				res = out[:nst*L*16]
			}
			direct := n == 1 && mpad == 1 && rows%L == 0
			if direct {
				res = dst[a:b]
			}
			clear(res)
			if tm != nil { // whole rows (batch 1 runs no column tiles)
				o := a * groups // super tile a/L's first scale
				kern(&m.Weights[a*stride], stride, &tm.scales[o], &tm.zeros[o/2], groups, (*byte)(ap), idx, &res[0], nst)
			}
			for g0 := 0; tm == nil && g0 < groups; g0 += tile {
				g1 := min(groups, g0+tile)
				kern(&m.Weights[a*stride+64*g0], stride, &m.Scales[mi+128*g0], &m.Zeros[mi/2+64*g0], g1-g0,
					(*byte)(unsafe.Add(ap, g0*groupBytes)), idx, &res[0], nst)
			}
			if direct {
				continue
			}
			if amx { // out[(st*L+i)*16+v] = row st*L+i, vector v
				for i := 0; i < rows; i++ {
					o := out[i*16 : i*16+per]
					for v, x := range o {
						if c*per+v < batch {
							dst[(c*per+v)*m.Rows+a+i] = x
						}
					}
				}
				continue
			}
			if f.rowsM > 0 && mpad >= f.rowsM { // per super tile, out[v*L+i] = row i, vector v
				for t := 0; t < nst*mpad; t++ {
					v := t % mpad
					if v >= per || c*per+v >= batch {
						continue
					}
					o := out[t*L : t*L+L]
					d := dst[(c*per+v)*m.Rows:]
					for k, row := 0, a+t/mpad*L; k < L && row < b; k, row = k+1, row+1 {
						d[row] = o[k]
					}
				}
				continue
			}
			r := L / mpad
			for t := 0; t < nst*mpad; t++ {
				for k := 0; k < L; k++ {
					row := a + t*r + k/mpad
					v := c*per + k%mpad
					if row < b && k%mpad < per && v < batch {
						dst[v*m.Rows+row] = out[t*L+k]
					}
				}
			}
		}
		a = b
	}
}
