package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ggml"
)

// TestGGMLKernels: every type on every kernel set this CPU runs, at
// shapes with several super-blocks and rows not a multiple of the tiles,
// batches 1..16: A8 equal to DotA8Exact bit for bit, through MulA8 and
// MulI8; the SIMD types report their kernel set.
func TestGGMLKernels(t *testing.T) {
	// the four-row kernels' L1 and lead prefetch variants too, whatever the CPU
	// (under -race only this CPU's choice: the variants differ in
	// assembly alone, which the detector does not see)
	defer func(l1, lead bool) { ggmlR4L1, ggmlR4Lead = l1, lead }(ggmlR4L1, ggmlR4Lead)
	for _, pf := range [][2]bool{{false, false}, {true, false}, {true, true}} {
		if raceEnabled && (pf[0] != ggmlR4L1 || pf[0] && pf[1] != ggmlR4Lead) {
			continue
		}
		ggmlR4L1, ggmlR4Lead = pf[0], pf[1]
		t.Run(fmt.Sprintf("prefetchL1=%v/lead=%v", pf[0], pf[1]), testGGMLKernels)
	}
}

func testGGMLKernels(t *testing.T) {
	shapes := [][2]int{{37, 1024}, {5, 2304}}
	if ggmlR4Lead {
		shapes = append(shapes, [2]int{9, 8192}) // rows long enough for the lead variants (leadFits)
	}
	for _, be := range openSets(t, 2) {
		isa := be.ISA()
		for _, typ := range ggml.Types {
			for _, sh := range shapes {
				m, err := ggml.Random(typ, sh[0], sh[1], uint64(sh[0])+uint64(typ))
				if err != nil {
					t.Fatal(err)
				}
				mx, err := be.LoadGGML(m)
				if err != nil {
					t.Fatal(err)
				}
				if f := ggmlKernels[typ]; f != nil && f(isa) != nil && !strings.Contains(mx.Kernel(), string(isa)) {
					t.Errorf("%s on %s runs %s", typ, isa, mx.Kernel())
				}
				rows, cols, pc := m.Rows, m.Cols, m.PCols
				for bi, batch := range []int{1, 1, 2, 3, 4, 8, 9, 15, 16, 5, 7} {
					x := make([]float32, batch*cols)
					rng := layout.NewRand(uint64(batch))
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					if bi == 0 || batch == 3 || batch == 16 {
						// Constant vectors quantize to +-127 everywhere: the
						// int16 sums of the AVX2 kernels at their largest.
						for i := 0; i < cols; i++ {
							x[i] = 1
							if batch > 1 {
								x[cols+i] = -1
							}
						}
					}
					dst := make([]float32, batch*rows)
					if err := mx.MulA8(dst, x, batch); err != nil {
						t.Fatal(err)
					}
					xq, xs := make([]int8, batch*pc), make([]float32, batch*pc/128)
					for v := 0; v < batch; v++ {
						if err := layout.QuantizeA8(xq[v*pc:(v+1)*pc], xs[v*pc/128:(v+1)*pc/128], x[v*cols:(v+1)*cols]); err != nil {
							t.Fatal(err)
						}
					}
					d8 := make([]float32, batch*rows)
					if err := mx.MulI8(d8, xq, xs, batch); err != nil {
						t.Fatal(err)
					}
					if err := ggmlA8Exact(m, dst, xq, xs, batch); err != nil {
						t.Fatalf("%s %s %dx%d batch %d MulA8: %v", isa, typ, rows, cols, batch, err)
					}
					if err := ggmlA8Exact(m, d8, xq, xs, batch); err != nil {
						t.Fatalf("%s %s %dx%d batch %d MulI8: %v", isa, typ, rows, cols, batch, err)
					}
				}
				mx.Close()
			}
		}
	}
}

// BenchmarkGGML times each type's A8 multiply at batch 1 and 16 on the
// best kernel set, one matrix of 4096x14336 (its bytes exceed the VM's
// last-level cache) and 256x4096 (in L2, one thread: the kernels'
// compute cost); the roofline figures come from qgemv bench -format.
func BenchmarkGGML(b *testing.B) {
	for _, sh := range [][3]int{{4096, 14336, 0}, {256, 4096, 1}} {
		be, err := New(Config{Threads: sh[2]})
		if err != nil {
			b.Fatal(err)
		}
		benchGGML(b, be, sh[0], sh[1])
		be.Close()
	}
}

func benchGGML(b *testing.B, be *Backend, rows, cols int) {
	for _, typ := range ggml.Types {
		m, err := ggml.Random(typ, rows, cols, 1)
		if err != nil {
			b.Fatal(err)
		}
		mx, err := be.LoadGGML(m)
		if err != nil {
			b.Fatal(err)
		}
		for _, batch := range []int{1, 16} {
			x := make([]float32, batch*m.Cols)
			for i := range x {
				x[i] = float32(i%7) - 3
			}
			dst := make([]float32, batch*m.Rows)
			b.Run(fmt.Sprintf("%s/a8/b%d/%dx%d/%s-%dthreads", typ, batch, rows, cols, mx.Kernel(), be.Threads()), func(b *testing.B) {
				b.SetBytes(int64(len(m.Data)))
				for i := 0; i < b.N; i++ {
					mx.MulA8(dst, x, batch)
				}
			})
		}
		mx.Close()
	}
}

// TestGGMLInt8Extremes: MulI8 with int8 activations at both ends, -128
// (which layout.QuantizeA8 never makes) and 127, is the exact product on
// every kernel set, type and batch path (one-row, four-row, rows-in-lanes
// and batch kernels), in the SIMD kernels themselves: the AVX2 kernels of
// the signed types (Q8_0, IQ4_NL, IQ4_XS) once multiplied |code| by x
// with the code's sign, which overflows for x = -128.
func TestGGMLInt8Extremes(t *testing.T) {
	for _, be := range openSets(t, 2) {
		isa := be.ISA()
		for _, typ := range ggml.Types {
			m, err := ggml.Random(typ, 37, 1024, uint64(typ)+5)
			if err != nil {
				t.Fatal(err)
			}
			mx, err := be.LoadGGML(m)
			if err != nil {
				t.Fatal(err)
			}
			if mx.goA8 {
				t.Fatalf("%s %s: random blocks run A8 in Go", isa, typ)
			}
			if err := ggmlExtremesExact(mx, m); err != nil {
				t.Fatalf("%s %s: %v", isa, typ, err)
			}
			mx.Close()
		}
	}
}

// TestGGMLQ8MinCode: a Q8_0 matrix with codes of -128 (valid, though
// llama.cpp's quantizer never writes one) multiplies exactly on every
// kernel set and batch path with extreme activations; only the sets whose
// kernels cannot take such a code (ggmlKernel.minCode) run it in Go.
func TestGGMLQ8MinCode(t *testing.T) {
	r, err := ggml.Random(ggml.Q8_0, 37, 1024, 11)
	if err != nil {
		t.Fatal(err)
	}
	if ggmlHasMinCode(r) {
		t.Fatal("random Q8_0 blocks hold a -128")
	}
	m, err := synth.Q8MinCodes(37, 1024, 11)
	if err != nil {
		t.Fatal(err)
	}
	if !ggmlHasMinCode(m) {
		t.Fatal("ggmlHasMinCode missed the -128 codes")
	}
	for _, be := range openSets(t, 2) {
		isa := be.ISA()
		mx, err := be.LoadGGML(m)
		if err != nil {
			t.Fatal(err)
		}
		if want := mx.kern != nil && mx.kern.minCode; mx.goA8 != want {
			t.Fatalf("%s: goA8 %v, want %v", isa, mx.goA8, want)
		}
		if got := strings.Contains(mx.Kernel(), "A8 in Go"); got != mx.goA8 {
			t.Fatalf("%s: Kernel() = %q, A8 in Go %v", isa, mx.Kernel(), mx.goA8)
		}
		if err := ggmlExtremesExact(mx, m); err != nil {
			t.Fatalf("%s: %v", isa, err)
		}
		mx.Close()
	}
}

// ggmlExtremesExact multiplies mx (loaded from m) by synth.ExtremeA8
// activations at batches that reach every batch path (one-row, four-row,
// rows-in-lanes and batch kernels) and returns an error unless each
// result is m.DotA8Exact's bit for bit.
func ggmlExtremesExact(mx *GGMLMatrix, m *ggml.Matrix) error {
	for _, batch := range []int{1, 2, 3, 4, 9, 16} {
		xq, xs := synth.ExtremeA8(batch*m.PCols, uint64(batch))
		dst := make([]float32, batch*m.Rows)
		if err := mx.MulI8(dst, xq, xs, batch); err != nil {
			return err
		}
		if err := ggmlA8Exact(m, dst, xq, xs, batch); err != nil {
			return fmt.Errorf("batch %d: %w", batch, err)
		}
	}
	return nil
}

// ggmlA8Exact returns an error naming the first output of dst (batch
// vectors of m.Rows) that differs in any bit from m.DotA8Exact on the
// same activations.
func ggmlA8Exact(m *ggml.Matrix, dst []float32, xq []int8, xs []float32, batch int) error {
	rows, pc := m.Rows, m.PCols
	want := make([]float32, rows)
	for v := 0; v < batch; v++ {
		if err := m.DotA8Exact(want, xq[v*pc:(v+1)*pc], xs[v*pc/128:(v+1)*pc/128]); err != nil {
			return err
		}
		for r := range want {
			if g := dst[v*rows+r]; math.Float32bits(g) != math.Float32bits(want[r]) {
				return fmt.Errorf("vector %d row %d: %v, want %v", v, r, g, want[r])
			}
		}
	}
	return nil
}

// TestGGMLHasMinCode: ggmlHasMinCode finds a code of -128 at every code
// position of a Q8_0 block (first, middle and last block of a matrix) and
// nothing where only the binary16 d fields hold 0x80 bytes or the codes
// are -127 and 127.
func TestGGMLHasMinCode(t *testing.T) {
	m, err := ggml.New(ggml.Q8_0, 3, 64)
	if err != nil {
		t.Fatal(err)
	}
	n := m.Type.BlockBytes()
	blocks := len(m.Data) / n
	for b := 0; b < blocks; b++ {
		m.Data[b*n], m.Data[b*n+1] = 0x80, 0x80 // d = -0: bytes of 0x80 outside the codes
		for i := 2; i < n; i++ {
			m.Data[b*n+i] = []byte{0x7f, 0x81, 0x00, 0xff}[i%4]
		}
	}
	if ggmlHasMinCode(m) {
		t.Fatal("found a -128 code in a matrix without one")
	}
	for _, b := range []int{0, blocks / 2, blocks - 1} {
		for i := 2; i < n; i++ {
			old := m.Data[b*n+i]
			m.Data[b*n+i] = 0x80
			if !ggmlHasMinCode(m) {
				t.Fatalf("block %d: a -128 code at byte %d not found", b, i)
			}
			m.Data[b*n+i] = old
		}
	}
	q4, err := ggml.New(ggml.Q4_0, 3, 64)
	if err != nil {
		t.Fatal(err)
	}
	for i := range q4.Data {
		q4.Data[i] = 0x80
	}
	if ggmlHasMinCode(q4) {
		t.Fatal("a Q4_0 matrix reported")
	}
}

// TestPairOrder: the pair order is a permutation of each super-block's
// columns that keeps the two columns of every 16-bit word adjacent and in
// one sub-block, the same for every register, and repackQ2KPairs,
// repackQ3KPairs and repackQ6KPairs move each code to the place of its
// column.
func TestPairOrder(t *testing.T) {
	var seen [256]bool
	for j, c := range q2kPairSrc {
		if seen[c] {
			t.Fatalf("column %d twice", c)
		}
		seen[c] = true
		if j%2 == 1 && c != q2kPairSrc[j-1]+1 {
			t.Fatalf("position %d: column %d after %d", j, c, q2kPairSrc[j-1])
		}
		if want := 8*(j%32/16) + j%16/2; int(c)/16 != want {
			t.Fatalf("position %d (word %d): column %d is not in sub-block %d", j, j%32/2, c, want)
		}
	}
	m, err := ggml.Random(ggml.Q2_K, 3, 512, 9)
	if err != nil {
		t.Fatal(err)
	}
	rp := append([]byte(nil), m.Data...)
	repackQ2KPairs(rp)
	var z ggml.Ints
	for r := 0; r < m.Rows; r++ {
		for k := 0; k < m.Blocks(); k++ {
			ggml.Q2_K.Decode(&z, m.Block(r, k))
			blk := rp[(r*m.Blocks()+k)*m.Type.BlockBytes():]
			if string(blk[:16]) != string(m.Block(r, k)[:16]) || string(blk[80:84]) != string(m.Block(r, k)[80:84]) {
				t.Fatalf("row %d block %d: scales, d or dmin moved", r, k)
			}
			for j, c := range q2kPairSrc {
				v, p := j/32, j%32
				got := blk[16+32*(v/4)+p] >> (2 * (v % 4)) & 3
				if int(got) != int(z.Q[c]) {
					t.Fatalf("row %d block %d position %d: code %d, column %d has %d", r, k, j, got, c, z.Q[c])
				}
			}
		}
	}
	m3, err := ggml.Random(ggml.Q3_K, 3, 512, 10)
	if err != nil {
		t.Fatal(err)
	}
	rp = append([]byte(nil), m3.Data...)
	repackQ3KPairs(rp)
	for r := 0; r < m3.Rows; r++ {
		for k := 0; k < m3.Blocks(); k++ {
			ggml.Q3_K.Decode(&z, m3.Block(r, k))
			blk := rp[(r*m3.Blocks()+k)*m3.Type.BlockBytes():]
			if string(blk[96:110]) != string(m3.Block(r, k)[96:110]) {
				t.Fatalf("Q3_K row %d block %d: scales or d moved", r, k)
			}
			for j, c := range q2kPairSrc {
				v, p := j/32, j%32
				var code byte // plus 4
				switch {
				case v < 6:
					code = blk[32*(v/2)+p] >> (3 * (v % 2)) & 7
				default:
					code = blk[32*(v-6)+p]>>6 | blk[64+p]>>v&1<<2
				}
				if got := int(code) - 4; got != int(z.Q[c]) {
					t.Fatalf("Q3_K row %d block %d position %d: code %d, column %d has %d", r, k, j, got, c, z.Q[c])
				}
			}
		}
	}
	m6, err := ggml.Random(ggml.Q6_K, 3, 512, 12)
	if err != nil {
		t.Fatal(err)
	}
	rp = append([]byte(nil), m6.Data...)
	repackQ6KPairs(rp)
	for r := 0; r < m6.Rows; r++ {
		for k := 0; k < m6.Blocks(); k++ {
			ggml.Q6_K.Decode(&z, m6.Block(r, k))
			blk := rp[(r*m6.Blocks()+k)*m6.Type.BlockBytes():]
			if string(blk[192:210]) != string(m6.Block(r, k)[192:210]) {
				t.Fatalf("Q6_K row %d block %d: scales or d moved", r, k)
			}
			for j, c := range q2kPairSrc {
				v, p := j/32, j%32
				code := blk[32*(v%4)+p]>>(4*(v/4))&15 | blk[128+32*(v/4)+p]>>(2*(v%4))&3<<4
				if got := int(code) - 32; got != int(z.Q[c]) {
					t.Fatalf("Q6_K row %d block %d position %d: code %d, column %d has %d", r, k, j, got, c, z.Q[c])
				}
			}
		}
	}
	x := make([]int8, 512)
	for i := range x {
		x[i] = int8(i * 7)
	}
	got := make([]int8, 512)
	pairsInt8(got, x)
	for o := 0; o < 512; o += 256 {
		for j, c := range q2kPairSrc {
			if got[o+j] != x[o+int(c)] {
				t.Fatalf("activation position %d: %d, want column %d's %d", o+j, got[o+j], c, x[o+int(c)])
			}
		}
	}
}

// TestPairOrder32: the pair order of the 32-column sub-block types is a
// permutation of each super-block's columns whose 16-bit words hold two
// adjacent columns of one sub-block (words 2s, 2s+1 of lane h: sub-block
// 4h + s) in every register; repackQ4KPairs, repackQ5KPairs and
// repackIQ4XSPairs move each code (and Q5_K's high bit) to the place of
// its column, pairsInt8By4 each activation.
func TestPairOrder32(t *testing.T) {
	var seen [256]bool
	for j, c := range q4kPairSrc {
		if seen[c] {
			t.Fatalf("column %d twice", c)
		}
		seen[c] = true
		if j%2 == 1 && c != q4kPairSrc[j-1]+1 {
			t.Fatalf("position %d: column %d after %d", j, c, q4kPairSrc[j-1])
		}
		if want := 4*(j%32/16) + j%16/4; int(c)/32 != want {
			t.Fatalf("position %d (word %d): column %d is not in sub-block %d", j, j%32/2, c, want)
		}
	}
	for _, typ := range []ggml.Type{ggml.Q4_K, ggml.Q5_K, ggml.IQ4_XS} {
		m, err := ggml.Random(typ, 3, 512, 11)
		if err != nil {
			t.Fatal(err)
		}
		rp := append([]byte(nil), m.Data...)
		qs, keep := 16, 16 // the codes' offset; d, dmin and scales before
		switch typ {
		case ggml.Q4_K:
			repackQ4KPairs(rp)
		case ggml.Q5_K:
			qs = 48
			repackQ5KPairs(rp)
		case ggml.IQ4_XS:
			qs, keep = 8, 8
			repackIQ4XSPairs(rp)
		}
		var z ggml.Ints
		for r := 0; r < m.Rows; r++ {
			for k := 0; k < m.Blocks(); k++ {
				typ.Decode(&z, m.Block(r, k))
				blk := rp[(r*m.Blocks()+k)*typ.BlockBytes():]
				if string(blk[:keep]) != string(m.Block(r, k)[:keep]) {
					t.Fatalf("%v row %d block %d: scales, d or dmin moved", typ, r, k)
				}
				for j, c := range q4kPairSrc {
					v, p := j/32, j%32
					code := blk[qs+32*(v%4)+p] >> (4 * (v / 4)) & 15
					want := int(z.Q[c])
					switch typ {
					case ggml.Q5_K:
						code |= blk[16+p] >> v & 1 << 4
					case ggml.IQ4_XS:
						want = int(slices.Index(ggml.KValues[:], z.Q[c]))
					}
					if int(code) != want {
						t.Fatalf("%v row %d block %d position %d: code %d, column %d has %d", typ, r, k, j, code, c, z.Q[c])
					}
				}
			}
		}
	}
	x := make([]int8, 512)
	for i := range x {
		x[i] = int8(i * 7)
	}
	got := make([]int8, 512)
	pairsInt8By4(got, x)
	for o := 0; o < 512; o += 256 {
		for j, c := range q4kPairSrc {
			if got[o+j] != x[o+int(c)] {
				t.Fatalf("activation position %d: %d, want column %d's %d", o+j, got[o+j], c, x[o+int(c)])
			}
		}
	}
}

// BenchmarkPairRepack times the load-time reordering of the pair-order
// types' matrices for the AVX2 kernels (bytes of the matrix per second).
func BenchmarkPairRepack(b *testing.B) {
	for _, typ := range []ggml.Type{ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K, ggml.IQ4_XS} {
		m, err := ggml.Random(typ, 256, 4096, 1)
		if err != nil {
			b.Fatal(err)
		}
		repack := map[ggml.Type]func([]byte){ggml.Q2_K: repackQ2KPairs, ggml.Q3_K: repackQ3KPairs, ggml.Q4_K: repackQ4KPairs, ggml.Q5_K: repackQ5KPairs, ggml.Q6_K: repackQ6KPairs, ggml.IQ4_XS: repackIQ4XSPairs}[typ]
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(m.Data)))
			for b.Loop() {
				repack(m.Data)
			}
		})
	}
}

// TestQhLanes: repackQhLanes moves the high bit of column 4d+b of each
// Q5_0/Q5_1 block to bit 8b+d of the block's qh word and leaves the other
// bytes alone.
func TestQhLanes(t *testing.T) {
	for _, typ := range []ggml.Type{ggml.Q5_0, ggml.Q5_1} {
		m, err := ggml.Random(typ, 2, 256, 3)
		if err != nil {
			t.Fatal(err)
		}
		n, off := typ.BlockBytes(), map[ggml.Type]int{ggml.Q5_0: 2, ggml.Q5_1: 4}[typ]
		rp := append([]byte(nil), m.Data...)
		repackQhLanes(rp, n, off)
		for o := 0; o < len(rp); o += n {
			old, got := m.Data[o:o+n], rp[o:o+n]
			if string(old[:off]) != string(got[:off]) || string(old[off+4:]) != string(got[off+4:]) {
				t.Fatalf("%s block at %d: bytes other than qh changed", typ, o)
			}
			q, g := binary.LittleEndian.Uint32(old[off:]), binary.LittleEndian.Uint32(got[off:])
			for e := 0; e < 32; e++ {
				d, b := e/4, e%4
				if q>>e&1 != g>>(8*b+d)&1 {
					t.Fatalf("%s block at %d: column %d's bit not at bit %d", typ, o, e, 8*b+d)
				}
			}
		}
	}
}

// TestLoadGGMLNonFinite: LoadGGML checks the half-precision fields of
// every block, on the copying path (huge pages or a kernel set's own
// order, a piece at a time) and in place, past the first piece too, and
// names the row and block.
func TestLoadGGMLNonFinite(t *testing.T) {
	for _, huge := range []bool{false, true} {
		for _, isa := range supportedSets() {
			be, err := New(Config{ISA: isa, Threads: 1, HugePages: huge})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			for _, typ := range ggml.Types {
				const rows = 700 // over 64 KiB of blocks for every type
				m, err := ggml.Random(typ, rows, 512, uint64(typ))
				if err != nil {
					t.Fatal(err)
				}
				nb := typ.BlockBytes()
				off := map[ggml.Type]int{ggml.Q2_K: 80, ggml.Q3_K: 108, ggml.Q6_K: 208}[typ]
				binary.LittleEndian.PutUint16(m.Data[len(m.Data)-nb+off:], 0x7e00)
				want := fmt.Sprintf("row %d block %d", rows-1, m.RowBytes()/nb-1)
				if _, err := be.LoadGGML(m); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s %s huge=%v: a NaN d in the last block: %v (want %q)", isa, typ, huge, err, want)
				}
			}
		}
	}
}

// TestLoadOwnedGGML: a ggml matrix whose blocks lie in a huge-page block
// handed over with it loads without a copy on every kernel set (the sets
// that reorder a type's blocks do it in the block) and multiplies as
// LoadGGML does, bit for bit; Close frees the block, and a non-finite
// scale fails the load and frees it.
func TestLoadOwnedGGML(t *testing.T) {
	owned := func(m *ggml.Matrix) (*ggml.Matrix, *hugemem.Block) {
		blk := hugemem.Alloc(len(m.Data))
		c := *m
		c.Data = blk.Bytes
		copy(c.Data, m.Data)
		return &c, blk
	}
	for _, isa := range supportedSets() {
		be, err := New(Config{ISA: isa, Threads: 2, HugePages: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range ggml.Types {
			m, err := ggml.Random(typ, 37, 1024, uint64(typ))
			if err != nil {
				t.Fatal(err)
			}
			ref, err := be.LoadGGML(m)
			if err != nil {
				t.Fatal(err)
			}
			c, blk := owned(m)
			got, err := be.LoadOwned(c, blk)
			if err != nil {
				t.Fatalf("%s %s: %v", isa, typ, err)
			}
			if d := got.(*GGMLMatrix).m.Data; &d[0] != &blk.Bytes[0] {
				t.Fatalf("%s %s: the blocks were copied", isa, typ)
			}
			for _, batch := range []int{1, 4} {
				x := make([]float32, batch*m.Cols)
				rng := layout.NewRand(uint64(batch))
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				sameA8(t, fmt.Sprintf("%s %s batch %d", isa, typ, batch), ref, got, x, batch, m.Rows)
			}
			if err := got.Close(); err != nil || blk.Bytes != nil {
				t.Fatalf("%s %s: Close: %v, block freed %v", isa, typ, err, blk.Bytes == nil)
			}
			ref.Close()
			checkDroppedFrees(t, fmt.Sprintf("%s %s", isa, typ), func() (layout.Matrix, *hugemem.Block) { return owned(m) }, be)
			c, blk = owned(m)
			binary.LittleEndian.PutUint16(c.Data[len(c.Data)-typ.BlockBytes()+map[ggml.Type]int{ggml.Q2_K: 80, ggml.Q3_K: 108, ggml.Q6_K: 208}[typ]:], 0x7c00)
			if _, err := be.LoadOwned(c, blk); err == nil || !strings.Contains(err.Error(), "want finite") || blk.Bytes != nil {
				t.Fatalf("%s %s: an infinite d: %v, block freed %v", isa, typ, err, blk.Bytes == nil)
			}
		}
		be.Close()
	}
}
