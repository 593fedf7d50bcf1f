package layout

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// TestBitsPacking writes random codes with SetQ and checks every word
// against the packing formula of the package doc, written independently.
func TestBitsPacking(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range BitWidths {
		b, err := NewBits(3, 700, n, 64, false)
		if err != nil {
			t.Fatal(err)
		}
		codes := make([]uint32, b.PRows*b.PCols)
		for r := 0; r < b.PRows; r++ {
			for c := 0; c < b.PCols; c++ {
				q := rng.Uint32() & (1<<n - 1)
				codes[r*b.PCols+c] = q
				b.SetQ(r, c, q)
			}
		}
		step := 32 / n
		for r := 0; r < b.PRows; r++ {
			for wi := 0; wi < b.WordsPerRow(); wi++ {
				k, tl := wi/32, wi%32
				var want uint32
				for i := 0; i < step; i++ {
					col := (k*step+i)*32 + tl
					want |= codes[r*b.PCols+col] << (32 - n*(i+1))
				}
				if got := b.Words[r*b.WordsPerRow()+wi]; got != want {
					t.Fatalf("n=%d row %d word %d: %08x, want %08x", n, r, wi, got, want)
				}
			}
		}
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBitsShapes(t *testing.T) {
	for _, c := range []struct{ rows, cols, n, g, prows, pcols, group int }{
		{1, 1, 4, 128, 16, 256, 128},
		{17, 4096, 4, 128, 32, 4096, 128},
		{4096, 14336, 3, 128, 4096, 14720, 128},
		{5, 100, 1, 0, 16, 1024, 1024},
		{5, 100, 8, 256, 16, 256, 256},
		{5, 300, 2, 32, 16, 512, 32},
	} {
		pr, pc, g, err := BitsShape(c.rows, c.cols, c.n, c.g)
		if err != nil || pr != c.prows || pc != c.pcols || g != c.group {
			t.Errorf("BitsShape(%d, %d, n=%d, g=%d) = %d, %d, %d, %v; want %d, %d, %d", c.rows, c.cols, c.n, c.g, pr, pc, g, err, c.prows, c.pcols, c.group)
		}
	}
	for _, c := range []struct{ rows, cols, n, g int }{{4, 4, 5, 128}, {4, 4, 4, 100}, {0, 4, 4, 128}, {4, MaxDim + 1, 4, 128}} {
		if _, _, _, err := BitsShape(c.rows, c.cols, c.n, c.g); err == nil {
			t.Errorf("BitsShape(%v) accepted", c)
		}
	}
}

// TestBitsQuantizeError reports the relative RMS error per width and group
// on Gaussian and Student-t matrices, and checks it falls with more bits,
// that Search never loses to MinMax, and that dequantization matches the
// codes and metadata.
func TestBitsQuantizeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 32, 512
	for _, dist := range []struct {
		name string
		w    []float32
	}{{"gaussian", gaussian(rng, rows*cols)}, {"student-t3", studentT(rng, rows*cols)}} {
		prev := map[QuantMethod]float64{}
		for _, n := range BitWidths {
			var line []string
			for _, method := range []QuantMethod{MinMax, Search} {
				b, err := QuantizeBits(dist.w, rows, cols, n, 128, QuantOptions{Method: method})
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Validate(); err != nil {
					t.Fatal(err)
				}
				e := RelRMSError(b.Dequantize(), dist.w)
				line = append(line, fmt.Sprintf("%v %.4f", method, e))
				if p, ok := prev[method]; ok && e < p {
					t.Errorf("%s %v: %d bits error %.4f below the wider width's %.4f", dist.name, method, n, e, p)
				}
				prev[method] = e
				if method == Search {
					mm, _ := QuantizeBits(dist.w, rows, cols, n, 128, QuantOptions{Method: MinMax})
					if em := RelRMSError(mm.Dequantize(), dist.w); e > em*1.0001 {
						t.Errorf("%s n=%d: search %.4f worse than minmax %.4f", dist.name, n, e, em)
					}
				}
			}
			b, _ := NewBits(rows, 4096, n, 128, false)
			t.Logf("%s Bits%dG128 (%.3f bits/weight at 4096 columns): %s", dist.name, n, b.BitsPerWeight(), strings.Join(line, ", "))
		}
	}
}

func TestBitsIntegerZeros(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	w := gaussian(rng, 4*300)
	for i := range w {
		w[i] += 3 // an offset makes fractional zeros likely
	}
	frac, err := QuantizeBits(w, 4, 300, 4, 64, QuantOptions{Method: Search})
	if err != nil {
		t.Fatal(err)
	}
	if err := frac.IntegerZeros(); err == nil || !strings.Contains(err.Error(), "integer zero") {
		t.Errorf("fractional zeros accepted for A8: %v", err)
	}
	xq, xs := make([]int8, frac.PCols), make([]float32, frac.PCols/128)
	if err := frac.DotA8Exact(make([]float32, 4), xq, xs); err == nil {
		t.Error("DotA8Exact accepted fractional zeros")
	}
	ints, err := QuantizeBits(w, 4, 300, 4, 64, QuantOptions{Method: Search, IntegerZero: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ints.IntegerZeros(); err != nil {
		t.Error(err)
	}
	t.Logf("offset Gaussian 4-bit g64: fractional zeros %.4f, integer zeros %.4f",
		RelRMSError(frac.Dequantize(), w), RelRMSError(ints.Dequantize(), w))
}

func TestBitsBadInput(t *testing.T) {
	if _, err := QuantizeBits([]float32{1e-9, 2e-9}, 1, 2, 4, 128, QuantOptions{}); err == nil || !strings.Contains(err.Error(), "FP32Meta") {
		t.Errorf("tiny range with binary16 metadata: %v", err)
	}
	if b, err := QuantizeBits([]float32{1e-9, 2e-9}, 1, 2, 4, 128, QuantOptions{FP32Meta: true}); err != nil || RelRMSError(b.Dequantize(), []float32{1e-9, 2e-9}) > 1e-6 {
		t.Errorf("tiny range with float32 metadata: %v", err)
	}
	// A narrow range far from 0 (z ~ -2.55e8 for binary16) falls back to
	// the range widened to include 0, with MinMax as with Search.
	for _, m := range []QuantMethod{MinMax, Search} {
		w := []float32{1e6, 1e6 + 1}
		if b, err := QuantizeBits(w, 1, 2, 8, 128, QuantOptions{Method: m}); err != nil || RelRMSError(b.Dequantize(), w) > 3e-3 {
			t.Errorf("%v: narrow range far from 0: %v", m, err)
		}
	}
	if _, err := QuantizeBits([]float32{1e9, 1e9 + 1}, 1, 2, 4, 128, QuantOptions{}); err == nil { // s ~ 6.7e7
		t.Error("range beyond binary16 accepted")
	}
	if _, err := QuantizeBits([]float32{0x1p-148, 0}, 1, 2, 8, 128, QuantOptions{FP32Meta: true}); err == nil || strings.Contains(err.Error(), "use FP32Meta") {
		t.Errorf("subnormal range with float32 metadata: %v, want an error that does not suggest FP32Meta", err)
	}
	if _, err := QuantizeBits([]float32{float32(math.NaN())}, 1, 1, 4, 128, QuantOptions{}); err == nil {
		t.Error("NaN weight accepted")
	}
	if _, err := QuantizeBits(make([]float32, 3), 2, 2, 4, 128, QuantOptions{}); err == nil {
		t.Error("short w accepted")
	}
	b, _ := NewBits(4, 300, 3, 128, false)
	for name, mut := range map[string]func(b *Bits){
		"short words":  func(b *Bits) { b.Words = b.Words[1:] },
		"short scales": func(b *Bits) { b.Scales16 = b.Scales16[1:] },
		"mixed meta":   func(b *Bits) { b.Scales32 = make([]float32, 1) },
		"spare bits":   func(b *Bits) { b.Words[3] |= 1 },
		"inf scale":    func(b *Bits) { b.Scales16[2] = 0x7c00 },
		"bad width":    func(b *Bits) { b.N = 5 },
		"bad pad":      func(b *Bits) { b.PCols += 320 },
	} {
		c := *b
		c.Words = append([]uint32(nil), b.Words...)
		c.Scales16 = append([]FP16(nil), b.Scales16...)
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}

// TestQuantizeParallel: the quantizers' rows run in parallel (quantRows)
// and give the same matrix with GOMAXPROCS 1 as with 4, odd row counts
// and Q4G128's shared zero-point bytes included, and report the error of
// the first failing row and group.
func TestQuantizeParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	rows, cols := 77, 300
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	bad := append([]float32(nil), w...)
	for _, r := range []int{70, 40} { // two failing rows; 40 must be reported
		for c := 0; c < 128; c++ {
			bad[r*cols+c] = 1e30
		}
	}
	run := func(procs int) (q4 *Q4G128, b2, b3 *Bits, sp *Sparse12, frac float64, err error) {
		prev := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(prev)
		if q4, err = QuantizeQ4G128(w, rows, cols, Search); err != nil {
			return
		}
		if b2, err = QuantizeBits(w, rows, cols, 2, 32, QuantOptions{Method: Search, IntegerZero: true}); err != nil {
			return
		}
		if b3, err = QuantizeBits(w, rows, cols, 3, 0, QuantOptions{Method: Search}); err != nil {
			return
		}
		if sp, frac, err = QuantizeSparse12(w, rows, cols, 64, QuantOptions{Method: Search}); err != nil {
			return
		}
		if _, err = QuantizeBits(bad, rows, cols, 4, 128, QuantOptions{Method: Search}); err == nil {
			return
		}
		_, _, err2 := QuantizeSparse12(bad, rows, cols, 32, QuantOptions{Method: Search})
		err = errors.Join(err, err2)
		return
	}
	q1, b21, b31, s1, f1, err1 := run(1)
	q4, b24, b34, s4, f4, err4 := run(4)
	if !reflect.DeepEqual(q1, q4) || !reflect.DeepEqual(b21, b24) || !reflect.DeepEqual(b31, b34) || !reflect.DeepEqual(s1, s4) {
		t.Error("GOMAXPROCS 1 and 4 quantize differently")
	}
	if f1 != f4 || f1 <= 0 {
		t.Errorf("Sparse12's dropped energy fraction: %v with GOMAXPROCS 1, %v with 4", f1, f4)
	}
	for _, err := range []error{err1, err4} {
		if err == nil || strings.Count(err.Error(), "row 40 group 0") != 2 {
			t.Errorf("error %v, want row 40 group 0's from QuantizeBits and QuantizeSparse12", err)
		}
	}
}

// TestQuantizeEdgeRanges: ranges that overflow float32 arithmetic or
// whose least-squares zero point falls outside the codes still quantize
// sensibly (found by review: a Q4G128 group spanning -3.2e38..3.15e38
// quantized to all zeros with MinMax, without an error; IntegerZero with
// Search stored zero points of -1, -2 or 4 at 2 bits).
func TestQuantizeEdgeRanges(t *testing.T) {
	w := make([]float32, 128)
	for i := range w {
		w[i] = float32(-3.2e38 + float64(i)*(6.35e38/127))
	}
	for _, m := range []QuantMethod{MinMax, Search} {
		q, err := QuantizeQ4G128(w, 1, 128, m)
		if err != nil {
			t.Fatal(err)
		}
		if e := RelRMSError(q.Dequantize()[:128], w); e > 0.2 {
			t.Errorf("%v: a group spanning -3.2e38..3.15e38: relative error %.3f", m, e)
		}
	}
	rng := rand.New(rand.NewPCG(51, 52))
	x := make([]float32, 200*64)
	for trial := 0; trial < 15; trial++ {
		n := 1 + trial%3
		for i := range x { // offset groups of mixed widths: 20 zero points in 50 trials fell outside
			x[i] = float32(rng.NormFloat64()*3 + rng.NormFloat64()*float64(i%7) + float64(trial%5))
		}
		b, err := QuantizeBits(x, 200, 64, n, 32, QuantOptions{Method: Search, IntegerZero: true})
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < 200; r++ {
			for g := 0; g < b.Groups(); g++ {
				if z := b.Zero(r, g); z < 0 || z > float32(int(1)<<n-1) || z != float32(int(z)) {
					t.Fatalf("%d bits: row %d group %d: zero point %v, want an integer code", n, r, g, z)
				}
			}
		}
	}
}

// TestNewBitsWords: the matrix takes the words the function supplies
// (asked once, for the padded shape's count), and a wrong count is an
// error naming both counts.
func TestNewBitsWords(t *testing.T) {
	ref, err := NewBits(20, 300, 3, 64, false)
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	var given []uint32
	b, err := NewBitsWords(20, 300, 3, 64, false, func(n int) []uint32 {
		calls++
		given = make([]uint32, n)
		return given
	})
	if err != nil || calls != 1 || &b.Words[0] != &given[0] || len(b.Words) != len(ref.Words) || b.PRows != ref.PRows || b.PCols != ref.PCols || len(b.Scales16) != len(ref.Scales16) {
		t.Fatalf("err %v, %d calls, %d words (NewBits: %d)", err, calls, len(b.Words), len(ref.Words))
	}
	_, err = NewBitsWords(20, 300, 3, 64, false, func(n int) []uint32 { return make([]uint32, n-1) })
	if want := fmt.Sprintf("returned %d words, want %d", len(ref.Words)-1, len(ref.Words)); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("short words: %v, want an error saying %q", err, want)
	}
}
