package codebook

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/internal/sysmem"
	"github.com/qgemv/qgemv/layout"
)

func gaussian(rng *rand.Rand, n int) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	return w
}

func spec(t *testing.T, name string) layout.FormatSpec {
	t.Helper()
	s, err := layout.ParseFormatSpec(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCodes stores random codes at every width (straddling words for 6,
// 10 and 12 bits) and reads them back, and checks the word index formula
// of the package doc.
func TestCodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, b := range Bs {
		for _, m := range Ms {
			c, err := New(40, 300, m, 4, b, 64, false)
			if err != nil {
				t.Fatal(err)
			}
			want := map[[3]int]uint32{}
			for r := 0; r < c.PRows; r++ {
				for i := 0; i < m; i++ {
					for j := 0; j < c.NV(); j++ {
						q := uint32(rng.IntN(1 << b))
						c.SetCode(r, i, j, q)
						want[[3]int{r, i, j}] = q
					}
				}
			}
			for k, q := range want {
				if got := c.Code(k[0], k[1], k[2]); got != q {
					t.Fatalf("b%d m%d: code %v = %d, want %d", b, m, k, got, q)
				}
			}
			// The doc's formula: bit j*B of lane t's stream.
			r, i, j := 37, m-1, c.NV()-1
			bit := j * b
			w := ((r/32*m+i)*c.WL()+bit/32)*32 + r%32
			v := uint64(c.Words[w]) | uint64(c.Words[w+32])<<32
			if got := uint32(v>>(bit%32)) & (1<<b - 1); got != want[[3]int{r, i, j}] {
				t.Fatalf("b%d: doc formula reads %d, want %d", b, got, want[[3]int{r, i, j}])
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func relErr(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i] - b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(num / den)
}

// TestQuantize quantizes every supported configuration and checks the
// error is what vector quantization at that rate should reach, that two
// codebooks beat one, and that the result is deterministic.
func TestQuantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 48, 520
	w := gaussian(rng, rows*cols)
	errs := map[string]float64{}
	bs := Bs
	if testing.Short() {
		bs = []int{4, 6, 8}
	}
	for _, m := range []int{1, 2} {
		for _, v := range []int{4, 8} {
			for _, b := range bs {
				name := "cb-m" + itoa(m) + "v" + itoa(v) + "b" + itoa(b) + "g128"
				opt := Options{Seed: 1, Iters: 6}
				if b >= 10 {
					opt.Iters = 2
				}
				c, err := Quantize(w, rows, cols, spec(t, name), opt)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				e := relErr(c.Dequantize(), w)
				errs[name] = e
				// Rate m*b/v bits per weight; a Gaussian source at R bits has
				// distortion 2^-2R at best. Allow a generous factor (small
				// sample, few iterations, binary16 centroids).
				rate := float64(m*b) / float64(v)
				if bound := 3.5 * math.Pow(2, -rate); e > bound || e == 0 {
					t.Errorf("%s: relative RMS error %.4f, want (0, %.4f]", name, e, bound)
				}
			}
		}
	}
	if errs["cb-m2v8b8g128"] >= errs["cb-m1v8b8g128"] {
		t.Errorf("two codebooks (%.4f) not better than one (%.4f)", errs["cb-m2v8b8g128"], errs["cb-m1v8b8g128"])
	}
	a, _ := Quantize(w[:8*520], 8, 520, spec(t, "cb-m2v4b6row"), Options{Seed: 9})
	b, _ := Quantize(w[:8*520], 8, 520, spec(t, "cb-m2v4b6row"), Options{Seed: 9})
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different result")
	}
	// Every stage reports done <= total, never going back, and ends at its
	// total, also when Lloyd converges early (50 iterations on 4160
	// vectors) or runs out of time (a 1 ns budget).
	for _, o := range []Options{{Iters: 50}, {TimeBudget: 1}} {
		var stages []string
		last := map[string][2]int{}
		o.Progress = func(s string, d, n int) {
			if len(stages) == 0 || stages[len(stages)-1] != s {
				stages = append(stages, s)
			}
			if p, ok := last[s]; d > n || ok && (d < p[0] || n != p[1]) {
				t.Fatalf("%s: progress %d of %d after %d of %d", s, d, n, p[0], p[1])
			}
			last[s] = [2]int{d, n}
		}
		if _, err := Quantize(w[:8*520], 8, 520, spec(t, "cb-m2v4b8g4"), o); err != nil {
			t.Fatal(err)
		}
		if strings.Join(stages, ",") != "fit codebook 1,assign codebook 1,fit codebook 2,assign codebook 2,refine codebook 1" {
			t.Fatalf("stages %v", stages)
		}
		for s, p := range last {
			if p[0] != p[1] {
				t.Errorf("%+v: %s ended at %d of %d", o.TimeBudget, s, p[0], p[1])
			}
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestBadInput(t *testing.T) {
	w := make([]float32, 4*128)
	for _, name := range []string{"cb-m3v4b8g128", "cb-m1v3b8g128", "cb-m1v4b7g128", "cb-m1v4b8g6", "cb-m1v8b8g4", "cb-m1v4b8g512", "cb-m1v4b8"} {
		if _, err := layout.ParseFormatSpec(name); err == nil {
			t.Errorf("%s parsed", name)
		}
	}
	s := spec(t, "cb-m1v4b8g128")
	w[5] = float32(math.NaN())
	if _, err := Quantize(w, 4, 128, s, Options{}); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN weight: %v", err)
	}
	w[5] = 1e30
	if _, err := Quantize(w, 4, 128, s, Options{}); err == nil || !strings.Contains(err.Error(), "binary16") {
		t.Errorf("huge weight: %v", err)
	}
	if _, err := Quantize(w[:100], 4, 128, s, Options{}); err == nil {
		t.Error("short weights accepted")
	}
	if _, err := Quantize(w, 4, 128, layout.FormatSpec{Format: layout.FormatBits}, Options{}); err == nil {
		t.Error("Bits spec accepted")
	}
	c, _ := New(4, 128, 1, 4, 8, 128, false)
	c.Words[len(c.Words)-1] = 1
	if err := c.Validate(); err == nil {
		t.Error("nonzero trailing word accepted")
	}
	c.Words[len(c.Words)-1] = 0
	c.Scales16[0] = 0x7c00 // +Inf
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "row 0 group 0 scale is +Inf") {
		t.Errorf("infinite scale: %v", err)
	}
	c.Scales16[0] = 0
	last := len(c.Scales16) - 1
	c.Scales16[last] = 0xfe00 // NaN
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("row %d group %d scale is NaN", last%c.PRows, last/c.PRows)) {
		t.Errorf("NaN scale: %v", err)
	}
	c.Scales16[last] = 0x7bff // the largest finite binary16
	if err := c.Validate(); err != nil {
		t.Errorf("finite scale 65504: %v", err)
	}
	c32, _ := New(4, 128, 1, 4, 8, 128, true)
	c32.Scales32[1] = float32(math.Inf(-1))
	if err := c32.Validate(); err == nil || !strings.Contains(err.Error(), "row 1 group 0 scale is -Inf") {
		t.Errorf("float32 infinite scale: %v", err)
	}
}

func TestContainer(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	w := gaussian(rng, 20*300)
	dir := t.TempDir()
	for _, name := range []string{"cb-m1v4b8g128", "cb-m2v8b6row", "cb-m1v4b10g4"} {
		for _, fp32 := range []bool{false, true} {
			c, err := Quantize(w, 20, 300, spec(t, name), Options{FP32: fp32, Iters: 2})
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, c.Name()+".qgv")
			if err := layout.SaveMatrix(p, c); err != nil {
				t.Fatal(err)
			}
			got, err := layout.LoadMatrix(p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, layout.Matrix(c)) {
				t.Fatalf("%s fp32=%v: round trip differs", name, fp32)
			}
			var buf bytes.Buffer
			n, err := c.WriteTo(&buf)
			if err != nil || n != int64(buf.Len()) {
				t.Fatalf("WriteTo: %d, %v (%d bytes)", n, err, buf.Len())
			}
			data := buf.Bytes()
			for cut := 0; cut < len(data); cut += 1 + len(data)/61 {
				if f, err := layout.ReadFile(bytes.NewReader(data[:cut]), int64(cut)); err == nil {
					if _, err := layout.Decode(f); err == nil {
						t.Fatalf("truncated to %d bytes: decoded", cut)
					}
				}
			}
			f, _ := layout.ReadFile(bytes.NewReader(data), int64(len(data)))
			for pi, bad := range []uint64{3, 3, 7, 48, 2} {
				g := *f
				g.Params = append([]uint64(nil), f.Params...)
				g.Params[pi] = bad
				if _, err := layout.Decode(&g); err == nil {
					t.Fatalf("%s: parameter %d = %d decoded", name, pi, bad)
				}
			}
		}
	}
}

var fullTable = flag.Bool("full", false, "TestErrorTable on 256x4096 matrices (the README table)")

func studentT3(rng *rand.Rand, n int) []float32 {
	w := make([]float32, n)
	for i := range w {
		var chi float64
		for k := 0; k < 3; k++ {
			g := rng.NormFloat64()
			chi += g * g
		}
		w[i] = float32(rng.NormFloat64() / math.Sqrt(chi/3))
	}
	return w
}

// TestErrorTable reports bits per weight (codebooks and scales included)
// and relative RMS error of the codebook configurations against
// Bits(2,128), Bits(3,128) and Q4G128 on the same Gaussian and Student-t
// (3 degrees of freedom) matrices, and checks the orderings that must
// hold. go test -v -run TestErrorTable ./layout/codebook -args -full
// prints the docs/FORMATS.md table (256x4096; 64x4096 without -full).
func TestErrorTable(t *testing.T) {
	if testing.Short() {
		t.Skip("k-means on 2 x 262144 weights: not in -short runs")
	}
	rows, cols := 64, 4096
	if *fullTable {
		rows = 256
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for _, dist := range []struct {
		name string
		w    []float32
	}{{"Gaussian", gaussian(rng, rows*cols)}, {"Student-t3", studentT3(rng, rows*cols)}} {
		errs := map[string]float64{}
		t.Logf("%s %dx%d:", dist.name, rows, cols)
		t.Logf("| format | bits/weight | relative RMS error |")
		for _, name := range []string{"cb-m1v4b8g128", "cb-m2v8b8g128", "cb-m1v8b8g128", "cb-m1v4b12g128", "cb-m2v4b8g128", "bits2g128", "bits3g128", "q4g128"} {
			s := spec(t, name)
			var m interface {
				layout.Matrix
				Dequantize() []float32
			}
			var err error
			if s.Format == layout.FormatCodebook {
				opt := Options{Seed: 1}
				if !*fullTable {
					opt.Iters = 3
				}
				m, err = Quantize(dist.w, rows, cols, s, opt)
			} else {
				var lm layout.Matrix
				lm, _, err = s.Quantize(dist.w, rows, cols, layout.QuantOptions{Method: layout.Search, IntegerZero: true})
				if err == nil {
					m = lm.(interface {
						layout.Matrix
						Dequantize() []float32
					})
				}
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			e := relErr(m.Dequantize(), dist.w)
			errs[name] = e
			t.Logf("| %s | %.3f | %.4f |", m.Name(), 8*float64(m.StreamBytes())/float64(rows*cols), e)
		}
		// About 2.1 bits per weight: vector quantization must beat uniform
		// 2-bit (and 3 bits with 12-bit codes beat uniform 3-bit).
		if errs["cb-m1v4b8g128"] >= errs["bits2g128"] || errs["cb-m2v8b8g128"] >= errs["bits2g128"] {
			t.Errorf("%s: 2-bit codebooks (%.4f, %.4f) not better than Bits2G128 (%.4f)", dist.name, errs["cb-m1v4b8g128"], errs["cb-m2v8b8g128"], errs["bits2g128"])
		}
		if errs["cb-m1v4b12g128"] >= errs["bits3g128"] {
			t.Errorf("%s: cb-m1v4b12 (%.4f) not better than Bits3G128 (%.4f)", dist.name, errs["cb-m1v4b12g128"], errs["bits3g128"])
		}
	}
}

// TestNearest compares nearest with the plain loop it unrolls (dot
// products from 0, the first of equal distances) for V = 2, 4, 8 and a
// V it does not unroll, with repeated centroids (ties), zero vectors,
// infinite and NaN points and centroids.
func TestNearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	ref := func(x, cent, norm []float32) int {
		v := len(x)
		best, bestD := 0, float32(math.Inf(1))
		for q := range norm {
			var dot float32
			for e := 0; e < v; e++ {
				dot += x[e] * cent[q*v+e]
			}
			if d := norm[q] - 2*dot; d < bestD {
				best, bestD = q, d
			}
		}
		return best
	}
	for _, v := range []int{2, 3, 4, 8} {
		const k = 64
		cent := make([]float32, k*v)
		for i := range cent {
			cent[i] = float32(rng.IntN(5) - 2) // few values: many equal distances
		}
		copy(cent[5*v:6*v], cent[40*v:41*v])
		cent[7*v] = float32(math.NaN())
		norm := make([]float32, k)
		for q := range norm {
			for e := 0; e < v; e++ {
				norm[q] += cent[q*v+e] * cent[q*v+e]
			}
		}
		for i := 0; i < 2000; i++ {
			x := make([]float32, v)
			for e := range x {
				x[e] = float32(rng.IntN(7) - 3)
			}
			switch i % 50 {
			case 1:
				x[0] = float32(math.Inf(1))
			case 2:
				x[v-1] = float32(math.NaN())
			case 3:
				clear(x)
			}
			if got, want := nearest(x, cent, norm), ref(x, cent, norm); got != want {
				t.Fatalf("v %d, x %v: nearest %d, want %d", v, x, got, want)
			}
		}
	}
}

// TestSetCodeOverwrites: a second SetCode replaces the code, also where
// codes straddle words, and leaves the neighbours alone (mutation testing
// found an OR without clearing unnoticed).
func TestSetCodeOverwrites(t *testing.T) {
	for _, b := range []int{4, 6, 10, 12} {
		c, err := New(40, 256, 2, 4, b, 128, false)
		if err != nil {
			t.Fatal(err)
		}
		k := uint32(1)<<b - 1
		for j := 0; j < c.NV(); j++ {
			c.SetCode(7, 1, j, uint32(j)&k)
		}
		for j := 0; j < c.NV(); j += 5 {
			c.SetCode(7, 1, j, ^uint32(j)&k)
		}
		for j := 0; j < c.NV(); j++ {
			want := uint32(j) & k
			if j%5 == 0 {
				want = ^uint32(j) & k
			}
			if got := c.Code(7, 1, j); got != want {
				t.Fatalf("b %d: Code(7, 1, %d) = %d, want %d", b, j, got, want)
			}
			if got := c.Code(7, 0, j); got != 0 {
				t.Fatalf("b %d: codebook 0's code %d changed to %d", b, j, got)
			}
		}
	}
}

// TestNewHuge: a shape beyond the machine's memory is an error before
// the allocation.
func TestNewHuge(t *testing.T) {
	if tot := sysmem.Total(); tot == 0 || tot > 1<<39 {
		t.Skip("memory unknown, or enough")
	}
	if _, err := New(1<<24, 1<<16, 2, 2, 12, 2, true); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Errorf("New of 2^40 elements: %v, want an error naming the memory", err)
	}
}

// TestNearestBadSlices: slices that do not fit give -1, not a panic.
func TestNearestBadSlices(t *testing.T) {
	for _, c := range [][3][]float32{{{1, 2}, nil, {1}}, {nil, nil, {1}}, {{1, 2, 3}, {1, 2}, {1}}, {{1}, {1}, nil}} {
		if q := Nearest(c[0], c[1], c[2]); q != -1 {
			t.Errorf("Nearest(%v, %v, %v) = %d, want -1", c[0], c[1], c[2], q)
		}
	}
	if q := Nearest([]float32{1}, []float32{0, 1}, []float32{0, 1}); q != 1 {
		t.Errorf("Nearest = %d, want 1", q)
	}
}
