package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/layout"
)

// lowCase is a low-bit matrix under test with its references.
type lowCase struct {
	name string
	mx   *LowMatrix
	ref  func(out []float64, x []float32) error
	mag  func(out []float64, x []float32) error
	a8   func(out []float32, xq []int8, xs []float32) error
}

func lowCases(t *testing.T, rng *rand.Rand, rows, cols int, intZero bool, isa ISA) []lowCase {
	be, err := New(Config{ISA: isa, Threads: 3})
	if err != nil {
		t.Fatal(err)
	}
	w := randVec(rng, rows*cols)
	opt := layout.QuantOptions{Method: layout.Search, IntegerZero: intZero}
	var out []lowCase
	for _, n := range layout.BitWidths {
		for _, g := range layout.BitsGroups {
			b, err := layout.QuantizeBits(w, rows, cols, n, g, opt)
			if err != nil {
				t.Fatal(err)
			}
			mx, err := be.LoadBits(b)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, lowCase{b.Name() + "/" + mx.Kernel(), mx, b.DotRef, b.DotRefMag, b.DotA8Exact})
		}
	}
	for _, g := range []int{32, 64, 128, 0} {
		sp, _, err := layout.QuantizeSparse12(w, rows, cols, g, opt)
		if err != nil {
			t.Fatal(err)
		}
		mx, err := be.LoadSparse12(sp)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lowCase{sp.Name() + "/" + mx.Kernel(), mx, sp.DotRef, sp.DotRefMag, sp.DotA8Exact})
	}
	return out
}

// TestLowBitKernels checks every width, group and Sparse12 against the
// float64 reference (A32, A16) and the exact int8 reference (A8) on tails
// and batch sizes, with guard bands.
func TestLowBitKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	// 9000 columns: the float kernels' column tiles (a32TileBytes), the
	// last one partial.
	shapes := [][2]int{{1, 1}, {17, 300}, {70, 2100}, {20, 9000}}
	if testing.Short() {
		shapes = shapes[1:2]
	}
	for _, sh := range shapes {
		rows, cols := sh[0], sh[1]
		var cases []lowCase
		for _, isa := range supportedSets() {
			if isa == Generic && rows*cols > 40000 && Best() != Generic {
				continue // the large shape is for the assembly tiles and chunks
			}
			cases = append(cases, lowCases(t, rng, rows, cols, true, isa)...)
		}
		for _, c := range cases {
			for _, batch := range []int{1, 3, 16} {
				name := fmt.Sprintf("%s/%dx%d/b%d", c.name, rows, cols, batch)
				x := randVec(rng, batch*cols)
				full, dst := guarded(batch * rows)
				if err := c.mx.MulF32(dst, x, batch); err != nil {
					t.Fatal(err)
				}
				checkGuards(t, full, batch*rows)
				checkFloat(t, name+"/A32", c, dst, x, batch, rows, cols)
				h, xh := halfVec(x)
				if err := c.mx.MulF16(dst, h, batch); err != nil {
					t.Fatal(err)
				}
				checkFloat(t, name+"/A16", c, dst, xh, batch, rows, cols)
				if err := c.mx.MulA8(dst, x, batch); err != nil {
					t.Fatal(err)
				}
				checkA8Exact(t, name+"/A8", c.a8, nil, dst, x, batch, rows, cols, c.mx.pcols)
			}
		}
	}
}

// checkA8Exact checks dst (batch vectors of rows results) bit for bit against
// the exact int8 reference a8 of x (batch vectors of cols values, padded
// to pcols) quantized by layout.QuantizeA8; gather, if set, first puts
// each vector in stored column order (act order).
func checkA8Exact(t *testing.T, name string, a8 func(out []float32, xq []int8, xs []float32) error, gather func(dst, x []float32), dst, x []float32, batch, rows, cols, pcols int) {
	t.Helper()
	xq, xs := make([]int8, pcols), make([]float32, pcols/128)
	want := make([]float32, rows)
	xg := make([]float32, cols)
	for v := 0; v < batch; v++ {
		xv := x[v*cols : (v+1)*cols]
		if gather != nil {
			gather(xg, xv)
			xv = xg
		}
		if err := layout.QuantizeA8(xq, xs, xv); err != nil {
			t.Fatal(err)
		}
		if err := a8(want, xq, xs); err != nil {
			t.Fatal(err)
		}
		for r := range want {
			if math.Float32bits(dst[v*rows+r]) != math.Float32bits(want[r]) {
				t.Fatalf("%s: vector %d row %d = %v, want exactly %v", name, v, r, dst[v*rows+r], want[r])
			}
		}
	}
}

// halfVec returns x rounded to binary16 and those values widened back.
func halfVec(x []float32) ([]layout.FP16, []float32) {
	h, xh := make([]layout.FP16, len(x)), make([]float32, len(x))
	for i, v := range x {
		h[i] = layout.ToFP16(v)
		xh[i] = h[i].Float32()
	}
	return h, xh
}

func checkFloat(t *testing.T, name string, c lowCase, dst, x []float32, batch, rows, cols int) {
	t.Helper()
	ref, mag := make([]float64, rows), make([]float64, rows)
	for v := 0; v < batch; v++ {
		_ = c.ref(ref, x[v*cols:(v+1)*cols])
		_ = c.mag(mag, x[v*cols:(v+1)*cols])
		for r := range ref {
			if d := math.Abs(float64(dst[v*rows+r]) - ref[r]); !(d <= layout.BitsTolerance*mag[r]) {
				t.Fatalf("%s: vector %d row %d = %v, want %v (bound %v)", name, v, r, dst[v*rows+r], ref[r], layout.BitsTolerance*mag[r])
			}
		}
	}
}

func TestLowBitBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	cs := lowCases(t, rng, 5, 200, false, Generic) // fractional zeros
	c := cs[1]
	x := make([]float32, 200)
	dst := make([]float32, 5)
	if err := c.mx.MulA8(dst, x, 1); err == nil || !strings.Contains(err.Error(), "integer zero") {
		t.Errorf("A8 with fractional zeros: %v", err)
	}
	for _, err := range []error{
		c.mx.MulF32(dst, x[:199], 1),
		c.mx.MulF32(dst[:4], x, 1),
		c.mx.MulF32(dst, x, 0),
		c.mx.MulF16(dst, make([]layout.FP16, 199), 1),
		c.mx.MulI8(dst, make([]int8, 100), make([]float32, 2), 1),
	} {
		if err == nil {
			t.Error("bad input accepted")
		}
	}
	if err := c.mx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.mx.MulF32(dst, x, 1); err != ErrClosed {
		t.Errorf("closed: %v", err)
	}
	be, _ := New(Config{ISA: Generic})
	bad, _ := layout.NewBits(4, 100, 4, 64, false)
	bad.Words = bad.Words[1:]
	if _, err := be.LoadBits(bad); err == nil {
		t.Error("LoadBits accepted short words")
	}
}

// TestSparse12ZeroRange: zero points outside 0..127 cannot use the
// assembly (q-z must fit a signed byte); the matrix falls back to the
// generic kernel and stays exact.
func TestSparse12ZeroRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	w := randVec(rng, 20*256)
	sp, _, err := layout.QuantizeSparse12(w, 20, 256, 128, layout.QuantOptions{IntegerZero: true})
	if err != nil {
		t.Fatal(err)
	}
	sp.Zeros16[3] = layout.ToFP16(200)
	be, err := New(Config{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	mx, err := be.LoadSparse12(sp)
	if err != nil {
		t.Fatal(err)
	}
	if mx.simd != nil {
		t.Fatal("zero point 200 accepted by the assembly path")
	}
	x := randVec(rng, 256)
	got := make([]float32, 20)
	if err := mx.MulA8(got, x, 1); err != nil {
		t.Fatal(err)
	}
	xq, xs := make([]int8, 256), make([]float32, 2)
	_ = layout.QuantizeA8(xq, xs, x)
	want := make([]float32, 20)
	if err := sp.DotA8Exact(want, xq, xs); err != nil {
		t.Fatal(err)
	}
	for r := range want {
		if got[r] != want[r] {
			t.Fatalf("row %d = %v, want %v", r, got[r], want[r])
		}
	}
}

// importedBits returns a Bits matrix as the model importers build them:
// offsets instead of zero points (Q4_1/Q4_K) and/or an act-order column
// permutation (GPTQ), with random codes and metadata.
func importedBits(t testing.TB, rng *rand.Rand, rows, cols, n, g int, offsets, perm, fp32 bool) *layout.Bits {
	t.Helper()
	b, err := layout.NewBits(rows, cols, n, g, fp32)
	if err != nil {
		t.Fatal(err)
	}
	b.Offsets = offsets
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			b.SetQ(r, c, uint32(rng.IntN(1<<n)))
		}
		for gi := 0; gi < b.Groups(); gi++ {
			s := float32(rng.Float64()*0.02 + 0.001)
			z := float32(rng.IntN(1 << n))
			if offsets {
				z = float32(rng.NormFloat64() * 0.05)
			}
			i := gi*b.PRows + r
			if fp32 {
				b.Scales32[i], b.Zeros32[i] = s, z
			} else {
				b.Scales16[i], b.Zeros16[i] = layout.ToFP16(s), layout.ToFP16(z)
			}
		}
	}
	if perm {
		b.Perm = make([]int32, cols)
		for i, p := range rng.Perm(cols) {
			b.Perm[i] = int32(p)
		}
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImportedBitsKernels runs offset-form and act-order matrices through
// every kernel set: float paths against the float64 reference in source
// column order, A8 exact on the gathered activations, and A8 with offsets
// an error that says why.
func TestImportedBitsKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const rows, cols = 37, 512
	for _, isa := range supportedSets() {
		be, err := New(Config{ISA: isa, Threads: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{8, 4, 2, 1} {
			for _, g := range []int{32, 128} {
				for _, mode := range []struct{ offsets, perm, fp32 bool }{{true, false, false}, {true, false, true}, {false, true, false}, {true, true, true}} {
					b := importedBits(t, rng, rows, cols, n, g, mode.offsets, mode.perm, mode.fp32)
					mx, err := be.LoadBits(b)
					if err != nil {
						t.Fatal(err)
					}
					c := lowCase{fmt.Sprintf("%s/%s/off%v/perm%v/fp32%v", isa, b.Name(), mode.offsets, mode.perm, mode.fp32), mx, b.DotRef, b.DotRefMag, b.DotA8Exact}
					for _, batch := range []int{1, 5} {
						x := randVec(rng, batch*cols)
						full, dst := guarded(batch * rows)
						if err := mx.MulF32(dst, x, batch); err != nil {
							t.Fatal(err)
						}
						checkGuards(t, full, batch*rows)
						checkFloat(t, c.name+"/A32", c, dst, x, batch, rows, cols)
						err := mx.MulA8(dst, x, batch)
						if mode.offsets {
							if err == nil || !strings.Contains(err.Error(), "offsets") {
								t.Fatalf("%s: A8 with offsets: err %v, want an error about offsets", c.name, err)
							}
							continue
						}
						if err != nil {
							t.Fatal(err)
						}
						checkA8Exact(t, c.name+"/A8", b.DotA8Exact, func(d, x []float32) { b.Gather(d, x) }, dst, x, batch, rows, cols, b.PCols)
					}
				}
			}
		}
	}
}

// FuzzLowBitKernels runs the generic and every assembly kernel set this
// CPU supports on one random low-bit matrix (a width and group, or
// Sparse12 with a group) and batch: int8 activations must give the exact
// int8 reference bit for bit on every set, float32 and binary16 ones must
// stay within layout.BitsTolerance of the float64 reference, with guard
// bands around the results. Fractional zero points must make the int8
// path fail with an error that says so.
func FuzzLowBitKernels(f *testing.F) {
	f.Add(uint64(1), uint16(1), uint16(1), uint8(1), uint8(0), false)
	f.Add(uint64(2), uint16(17), uint16(300), uint8(3), uint8(17), false)   // Bits2G128: table kernels, 16-row tail
	f.Add(uint64(3), uint16(70), uint16(1100), uint8(16), uint8(24), false) // Bits1 whole row
	f.Add(uint64(4), uint16(33), uint16(640), uint8(2), uint8(27), false)   // Sparse12G128
	f.Add(uint64(5), uint16(64), uint16(700), uint8(5), uint8(12), true)    // Bits3G128, fractional zeros
	f.Add(uint64(6), uint16(200), uint16(2048), uint8(1), uint8(18), false) // Bits2G256
	nb := len(layout.BitWidths) * len(layout.BitsGroups)
	sparseGroups := []int{32, 64, 128, 0}
	f.Fuzz(func(t *testing.T, seed uint64, rows16, cols16 uint16, batch8, format uint8, fractional bool) {
		rows := 1 + int(rows16)%300
		cols := 1 + int(cols16)%2100
		batch := 1 + int(batch8)%16
		rng := rand.New(rand.NewPCG(seed, 13))
		w := randVec(rng, rows*cols)
		x := randVec(rng, batch*cols)
		spikeVec(rng, x)
		h, xh := halfVec(x)
		opt := layout.QuantOptions{Method: layout.MinMax, IntegerZero: !fractional}
		var c lowCase
		var load func(be *Backend) (*LowMatrix, error)
		switch k := int(format) % (nb + len(sparseGroups)); {
		case k < nb:
			n, g := layout.BitWidths[k/len(layout.BitsGroups)], layout.BitsGroups[k%len(layout.BitsGroups)]
			b, err := layout.QuantizeBits(w, rows, cols, n, g, opt)
			if err != nil { // a group too narrow for binary16 metadata
				opt.FP32Meta = true
				b, err = layout.QuantizeBits(w, rows, cols, n, g, opt)
			}
			if err != nil {
				t.Fatal(err)
			}
			c = lowCase{name: b.Name(), ref: b.DotRef, mag: b.DotRefMag, a8: b.DotA8Exact}
			load = func(be *Backend) (*LowMatrix, error) { return be.LoadBits(b) }
		default:
			sp, _, err := layout.QuantizeSparse12(w, rows, cols, sparseGroups[k-nb], opt)
			if err != nil {
				opt.FP32Meta = true
				sp, _, err = layout.QuantizeSparse12(w, rows, cols, sparseGroups[k-nb], opt)
			}
			if err != nil {
				t.Fatal(err)
			}
			c = lowCase{name: sp.Name(), ref: sp.DotRef, mag: sp.DotRefMag, a8: sp.DotA8Exact}
			load = func(be *Backend) (*LowMatrix, error) { return be.LoadSparse12(sp) }
		}
		for _, isa := range supportedSets() {
			be, err := New(Config{ISA: isa, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			mx, err := load(be)
			if err != nil {
				t.Fatal(err)
			}
			c.mx = mx
			name := fmt.Sprintf("%s/%s/%dx%d/b%d", c.name, mx.Kernel(), rows, cols, batch)
			full, dst := guarded(batch * rows)
			if err := mx.MulF32(dst, x, batch); err != nil {
				t.Fatal(err)
			}
			checkGuards(t, full, batch*rows)
			checkFloat(t, name+"/A32", c, dst, x, batch, rows, cols)
			if err := mx.MulF16(dst, h, batch); err != nil {
				t.Fatal(err)
			}
			checkGuards(t, full, batch*rows)
			checkFloat(t, name+"/A16", c, dst, xh, batch, rows, cols)
			// Without IntegerZero a tiny matrix's zero points can still
			// come out whole; the int8 path must then be exact.
			switch err := mx.MulA8(dst, x, batch); {
			case err != nil && (!fractional || !strings.Contains(err.Error(), "integer zero points")):
				t.Fatalf("%s/A8: %v", name, err)
			case err == nil:
				checkGuards(t, full, batch*rows)
				checkA8Exact(t, name+"/A8", c.a8, nil, dst, x, batch, rows, cols, mx.pcols)
			}
			_ = mx.Close()
		}
	})
}

// TestLoadOwned: a Bits matrix whose words lie in a huge-page block
// handed over with it is loaded without a copy (the matrix reads the
// block, with or without HugePages) and multiplies as LoadBits does, bit
// for bit; Close frees the block, so does the collector when the matrix
// is dropped unclosed, and every failed load frees it at once.
func TestLoadOwned(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 37, 300 // tails of rows, groups and chunks
	b, err := layout.QuantizeBits(randVec(rng, rows*cols), rows, cols, 4, 128, layout.QuantOptions{IntegerZero: true})
	if err != nil {
		t.Fatal(err)
	}
	owned := func(m *layout.Bits) (*layout.Bits, *hugemem.Block) {
		blk := hugemem.Alloc(4 * len(m.Words))
		c := *m
		c.Words = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(blk.Bytes))), len(m.Words))
		copy(c.Words, m.Words)
		return &c, blk
	}
	for _, huge := range []bool{false, true} {
		be, err := New(Config{Threads: 2, HugePages: huge})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := be.LoadBits(b)
		if err != nil {
			t.Fatal(err)
		}
		c, blk := owned(b)
		m, err := be.LoadOwned(c, blk)
		if err != nil {
			t.Fatalf("huge %v: %v", huge, err)
		}
		if w := m.(*LowMatrix).bits.Words; &w[0] != &c.Words[0] {
			t.Fatalf("huge %v: the words were copied", huge)
		}
		for _, batch := range []int{1, 3} {
			sameA8(t, fmt.Sprintf("huge %v batch %d", huge, batch), ref, m, randVec(rng, batch*cols), batch, rows)
		}
		if err := m.Close(); err != nil || blk.Bytes != nil {
			t.Fatalf("huge %v: Close: %v, block freed %v", huge, err, blk.Bytes == nil)
		}
		ref.Close()
		checkDroppedFrees(t, fmt.Sprintf("huge %v", huge), func() (layout.Matrix, *hugemem.Block) { return owned(b) }, be)
		// Failed loads free the block.
		q := randMatrix(t, rng, 16, 128)
		bad := *b
		bad.Scales16 = append([]layout.FP16(nil), b.Scales16...)
		bad.Scales16[0] = layout.ToFP16(float32(math.NaN()))
		_, other := owned(b)
		for name, load := range map[string]func() (Mat, *hugemem.Block, error){
			"not Bits": func() (Mat, *hugemem.Block, error) {
				blk := hugemem.Alloc(64)
				m, err := be.LoadOwned(q, blk)
				return m, blk, err
			},
			"other memory": func() (Mat, *hugemem.Block, error) {
				blk := hugemem.Alloc(4 * len(b.Words))
				m, err := be.LoadOwned(b, blk)
				return m, blk, err
			},
			"invalid matrix": func() (Mat, *hugemem.Block, error) {
				c, blk := owned(&bad)
				m, err := be.LoadOwned(c, blk)
				return m, blk, err
			},
		} {
			m, blk, err := load()
			if err == nil || m != nil || blk.Bytes != nil {
				t.Errorf("huge %v, %s: matrix %v, error %v, block freed %v", huge, name, m != nil, err, blk.Bytes == nil)
			}
		}
		if _, err := be.LoadOwned(b, nil); err == nil {
			t.Errorf("huge %v: no block accepted", huge)
		}
		be.Close()
		c, blk = owned(b)
		if _, err := be.LoadOwned(c, blk); !errors.Is(err, ErrClosed) || blk.Bytes != nil {
			t.Errorf("huge %v: closed backend: %v, block freed %v", huge, err, blk.Bytes == nil)
		}
		other.Free()
	}
}

// checkDroppedFrees: a matrix loaded by be.LoadOwned from what owned
// returns and dropped without Close frees its block once collected.
func checkDroppedFrees(t *testing.T, name string, owned func() (layout.Matrix, *hugemem.Block), be *Backend) {
	t.Helper()
	if raceEnabled { // the cleanup's write of Bytes is not ordered before the reads below
		return
	}
	m, blk := owned()
	if _, err := be.LoadOwned(m, blk); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200 && blk.Bytes != nil; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if blk.Bytes != nil {
		t.Errorf("%s: a dropped matrix kept its block", name)
	}
}

// sameA8 checks that got multiplies x (batch vectors, int8 activations)
// as ref does, bit for bit.
func sameA8(t *testing.T, name string, ref, got Mat, x []float32, batch, rows int) {
	t.Helper()
	want, out := make([]float32, batch*rows), make([]float32, batch*rows)
	if err := ref.MulA8(want, x, batch); err != nil {
		t.Fatal(err)
	}
	if err := got.MulA8(out, x, batch); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if math.Float32bits(out[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: out[%d] = %v, the reference load gives %v", name, i, out[i], want[i])
		}
	}
}
