package layout_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qgemv/qgemv/cpu" // installs the assembly encoders where the CPU has them
	"github.com/qgemv/qgemv/layout"
)

// encodeCases are groups and candidates the encoders must agree on:
// Gaussian values with range and least-squares-like scales, exact ties
// (v/s a half-integer, either sign) and their neighbouring floats, values
// far outside the range, subnormal and huge values and scales, and
// negative scales.
func encodeCases(rng *rand.Rand) (cases []struct {
	vals []float32
	s    float32
	z    uint8
}) {
	add := func(vals []float32, s float32, z uint8) {
		cases = append(cases, struct {
			vals []float32
			s    float32
			z    uint8
		}{vals, s, z})
	}
	for n := 8; n <= 128; n += 8 {
		for k := 0; k < 40; k++ {
			vals := make([]float32, n)
			scale := float32(math.Ldexp(1, rng.IntN(40)-20))
			for i := range vals {
				vals[i] = float32(rng.NormFloat64()) * scale
			}
			lo, hi := float32(0), float32(0)
			for _, v := range vals {
				lo, hi = min(lo, v), max(hi, v)
			}
			f := 1 - 0.02*float32(rng.IntN(25))
			s := (hi - lo) * f / 15
			z := uint8(rng.IntN(16))
			switch k % 8 {
			case 1: // a power-of-two scale and exact ties around it
				s = float32(math.Ldexp(1, rng.IntN(20)-10))
				for i := range vals {
					h := float32(rng.IntN(41)-20) + 0.5
					vals[i] = h * s
					switch rng.IntN(3) {
					case 1:
						vals[i] = math.Nextafter32(vals[i], float32(math.Inf(1)))
					case 2:
						vals[i] = math.Nextafter32(vals[i], float32(math.Inf(-1)))
					}
				}
			case 2:
				s = -s
			case 3: // tiny scale: most v/s beyond the codes, some infinite
				s = float32(math.Ldexp(1, -140+rng.IntN(20)))
			case 4: // huge values
				for i := range vals {
					vals[i] = float32(rng.NormFloat64()) * 1e38
				}
				s = float32(math.Ldexp(1, 124+rng.IntN(4)))
			case 5: // subnormal values
				for i := range vals {
					vals[i] = float32(rng.NormFloat64()) * 1e-42
				}
				s = float32(1e-43)
			case 6: // a scale whose dequantized values overflow
				s = math.MaxFloat32 / 4
			}
			add(vals, s, z)
		}
	}
	return cases
}

// forEncoder runs f with each assembly encoder set this CPU runs
// installed in layout (the best is installed again after).
func forEncoder(t *testing.T, f func(t *testing.T)) {
	es := cpu.Encoders()
	if len(es) == 0 {
		t.Skip("no assembly encoders on this CPU or build")
	}
	for _, e := range es {
		t.Run(e.Name, func(t *testing.T) {
			defer layout.WithEncodeKernels(e.Q4, e.Bits)()
			f(t)
		})
	}
}

// TestEncodeKernel: each assembly encoder writes the same codes and
// returns the same squared error, bit for bit, as the Go encoder.
func TestEncodeKernel(t *testing.T) { forEncoder(t, testEncodeKernel) }

func testEncodeKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for ci, c := range encodeCases(rng) {
		want := make([]uint8, len(c.vals))
		wantE := layout.EncodeGroupGo(c.vals, want, c.s, c.z)
		got := make([]uint8, len(c.vals))
		gotE := layout.EncodeGroupKernel(c.vals, got, c.s, c.z, math.Inf(1))
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d (n %d, s %g, z %d): codes %v, want %v (values %v)", ci, len(c.vals), c.s, c.z, got, want, c.vals)
		}
		if math.Float64bits(gotE) != math.Float64bits(wantE) && !(math.IsNaN(gotE) && math.IsNaN(wantE)) {
			t.Fatalf("case %d (n %d, s %g, z %d): error %v, want %v", ci, len(c.vals), c.s, c.z, gotE, wantE)
		}
		for _, best := range bests(rng, wantE) {
			clear(got)
			gotE := layout.EncodeGroupKernel(c.vals, got, c.s, c.z, best)
			checkEarlyExit(t, ci, best, gotE, wantE, bytes.Equal(got, want))
		}
	}
}

// bests are the bounds an encoder is run with beside +Inf: the error
// itself, just above and below it, and fractions of it.
func bests(rng *rand.Rand, e float64) []float64 {
	return []float64{e, math.Nextafter(e, math.Inf(1)), math.Nextafter(e, 0), e * 0.5, e * rng.Float64(), e * 0.01, 0}
}

// checkEarlyExit: an encoder run with a bound returns the exact error and
// codes when the error is at most the bound, and stops (returning more)
// only where the error exceeds it.
func checkEarlyExit(t *testing.T, ci int, best, got, want float64, codesEqual bool) {
	t.Helper()
	if got <= best {
		if math.Float64bits(got) != math.Float64bits(want) || !codesEqual {
			t.Fatalf("case %d, best %v: error %v at most the bound, want %v and the codes", ci, best, got, want)
		}
		return
	}
	if want <= best {
		t.Fatalf("case %d, best %v: stopped at %v though the error %v is at most the bound", ci, best, got, want)
	}
	if got > want { // a sum so far never exceeds the whole
		t.Fatalf("case %d, best %v: stopped at %v, above the error %v", ci, best, got, want)
	}
}

// TestQuantizeQ4G128Kernel: QuantizeQ4G128 builds the same matrix with
// each assembly encoder as with Go alone, for both methods, on shapes
// whose last group is whole, a multiple of sixteen, of eight and neither.
func TestQuantizeQ4G128Kernel(t *testing.T) { forEncoder(t, testQuantizeQ4G128Kernel) }

func testQuantizeQ4G128Kernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, sh := range [][2]int{{7, 256}, {5, 296}, {5, 288}, {6, 300}, {3, 1000}} {
		w := make([]float32, sh[0]*sh[1])
		for i := range w {
			w[i] = float32(rng.NormFloat64())
			if i%97 == 0 {
				w[i] *= 30 // an outlier now and then
			}
		}
		for _, m := range []layout.QuantMethod{layout.MinMax, layout.Search} {
			got, err := layout.QuantizeQ4G128(w, sh[0], sh[1], m)
			if err != nil {
				t.Fatal(err)
			}
			restore := layout.WithEncodeKernels(nil, nil)
			want, err := layout.QuantizeQ4G128(w, sh[0], sh[1], m)
			restore()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Weights, want.Weights) || !bytes.Equal(got.Zeros, want.Zeros) || !equalBits(got.Scales, want.Scales) {
				t.Fatalf("%dx%d %v: the kernel's matrix differs from Go's", sh[0], sh[1], m)
			}
		}
	}
}

func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// BenchmarkQuantize times quantizing a 1024x4096 float32 matrix (16 MiB)
// to Q4G128 and Bits4G128 (integer zero points) with both methods, on each
// assembly encoder set and in Go alone (GOMAXPROCS threads; MB/s of
// float32 input).
func BenchmarkQuantize(b *testing.B) {
	rows, cols := 1024, 4096
	rng := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	formats := []struct {
		name     string
		quantize func(m layout.QuantMethod) error
	}{
		{"Q4G128", func(m layout.QuantMethod) error {
			_, err := layout.QuantizeQ4G128(w, rows, cols, m)
			return err
		}},
		{"Bits4G128", func(m layout.QuantMethod) error {
			_, err := layout.QuantizeBits(w, rows, cols, 4, 128, layout.QuantOptions{Method: m, IntegerZero: true})
			return err
		}},
	}
	sets := append(cpu.Encoders(), cpu.Encoder{Name: "go"})
	for _, f := range formats {
		for _, m := range []layout.QuantMethod{layout.MinMax, layout.Search} {
			for _, e := range sets {
				b.Run(f.name+"/"+m.String()+"/"+e.Name, func(b *testing.B) {
					defer layout.WithEncodeKernels(e.Q4, e.Bits)()
					b.SetBytes(int64(4 * len(w)))
					for i := 0; i < b.N; i++ {
						if err := f.quantize(m); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// TestBitsEncodeKernel: each assembly Bits encoder writes the same codes
// and returns the same squared error, bit for bit, as the Go encoder, for
// every code range the Bits and Sparse12 quantizers use and fractional
// zero points too.
func TestBitsEncodeKernel(t *testing.T) { forEncoder(t, testBitsEncodeKernel) }

func testBitsEncodeKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for ci, c := range encodeCases(rng) {
		for _, qmax := range []float64{1, 3, 7, 15, 127, 255} {
			z := float64(c.z) * qmax / 15
			if ci%3 == 1 {
				z += 0.5 // a fractional zero point, and ties at other codes
			}
			if ci%3 == 2 {
				z = math.Round(z)
			}
			want := make([]uint32, len(c.vals))
			wantE := layout.BitsEncodeGo(c.vals, want, float64(c.s), z, qmax)
			got := make([]uint32, len(c.vals))
			gotE := layout.BitsEncodeKernelRun(c.vals, got, float64(c.s), z, qmax, math.Inf(1))
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("case %d (n %d, s %g, z %g, qmax %g): code %d is %d, want %d (value %g)", ci, len(c.vals), c.s, z, qmax, i, got[i], want[i], c.vals[i])
				}
			}
			if math.Float64bits(gotE) != math.Float64bits(wantE) && !(math.IsNaN(gotE) && math.IsNaN(wantE)) {
				t.Fatalf("case %d (n %d, s %g, z %g, qmax %g): error %v, want %v", ci, len(c.vals), c.s, z, qmax, gotE, wantE)
			}
			for _, best := range bests(rng, wantE) {
				clear(got)
				gotE := layout.BitsEncodeKernelRun(c.vals, got, float64(c.s), z, qmax, best)
				checkEarlyExit(t, ci, best, gotE, wantE, equalWords(got, want))
			}
		}
	}
}

// TestQuantizeBitsKernel: QuantizeBits and QuantizeSparse12 build the same
// matrices with each assembly encoder as with Go alone.
func TestQuantizeBitsKernel(t *testing.T) { forEncoder(t, testQuantizeBitsKernel) }

func testQuantizeBitsKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, sh := range [][2]int{{5, 256}, {4, 300}, {3, 1000}} {
		w := make([]float32, sh[0]*sh[1])
		for i := range w {
			w[i] = float32(rng.NormFloat64())
			if i%97 == 0 {
				w[i] *= 30
			}
		}
		for _, m := range []layout.QuantMethod{layout.MinMax, layout.Search} {
			for _, opt := range []layout.QuantOptions{{Method: m, IntegerZero: true}, {Method: m}, {Method: m, FP32Meta: true}} {
				for _, nb := range []int{8, 4, 3, 2, 1} {
					for _, g := range []int{32, 128, 0} {
						got, err := layout.QuantizeBits(w, sh[0], sh[1], nb, g, opt)
						if err != nil {
							t.Fatal(err)
						}
						restore := layout.WithEncodeKernels(nil, nil)
						want, err := layout.QuantizeBits(w, sh[0], sh[1], nb, g, opt)
						restore()
						if err != nil {
							t.Fatal(err)
						}
						if !equalWords(got.Words, want.Words) || !equalMeta(got.GroupMeta, want.GroupMeta) {
							t.Fatalf("%dx%d bits%dg%d %+v: the kernel's matrix differs from Go's", sh[0], sh[1], nb, g, opt)
						}
					}
				}
				got, _, err := layout.QuantizeSparse12(w, sh[0], sh[1], 128, opt)
				if err != nil {
					t.Fatal(err)
				}
				restore := layout.WithEncodeKernels(nil, nil)
				want, _, err := layout.QuantizeSparse12(w, sh[0], sh[1], 128, opt)
				restore()
				if err != nil {
					t.Fatal(err)
				}
				if !equalWords(got.Words, want.Words) || !equalMeta(got.GroupMeta, want.GroupMeta) {
					t.Fatalf("%dx%d sparse12g128 %+v: the kernel's matrix differs from Go's", sh[0], sh[1], opt)
				}
			}
		}
	}
}

func equalWords(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalMeta(a, b layout.GroupMeta) bool {
	if a.FP32Meta != b.FP32Meta || !equalBits(a.Scales32, b.Scales32) || !equalBits(a.Zeros32, b.Zeros32) || len(a.Scales16) != len(b.Scales16) || len(a.Zeros16) != len(b.Zeros16) {
		return false
	}
	for i := range a.Scales16 {
		if a.Scales16[i] != b.Scales16[i] || a.Zeros16[i] != b.Zeros16[i] {
			return false
		}
	}
	return true
}

// FuzzEncodeKernels: for any values (NaN and infinities too), any finite
// nonzero scale and zero point, every assembly encoder set writes the Go
// encoders' codes and returns their error, bit for bit (NaN for NaN), for
// Q4G128 and for the Bits fitter's code ranges; with a bound, at most the
// bound means the exact error.
func FuzzEncodeKernels(f *testing.F) {
	f.Add(make([]byte, 4*16), uint32(0x3e800000), uint8(8), uint8(15), 0.5)
	f.Add([]byte{0, 0, 0xc0, 0x3f, 0, 0, 0x20, 0x40, 0, 0, 0xc0, 0xbf, 0, 0, 0x7f, 0x7f, 0, 0, 0x80, 0x7f, 1, 0, 0, 0, 0, 0, 0xc0, 0x7f, 0, 0, 0, 0x80},
		uint32(0x3f800000), uint8(3), uint8(7), 1e30)
	es := cpu.Encoders()
	f.Fuzz(func(t *testing.T, raw []byte, sBits uint32, z, qmax uint8, best float64) {
		n := len(raw) / 4 / 8 * 8
		if len(es) == 0 || n == 0 || n > 256 {
			return
		}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = math.Float32frombits(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
		}
		s := math.Float32frombits(sBits)
		if s == 0 || s != s || math.IsInf(float64(s), 0) {
			return
		}
		z %= 16
		qm := float64(max(qmax, 1))
		want := make([]uint8, n)
		wantE := layout.EncodeGroupGo(vals, want, s, z)
		wantB := make([]uint32, n)
		wantBE := layout.BitsEncodeGo(vals, wantB, float64(s), float64(z)/2, qm)
		same := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) || a != a && b != b }
		for _, e := range es {
			restore := layout.WithEncodeKernels(e.Q4, e.Bits)
			got := make([]uint8, n)
			gotE := layout.EncodeGroupKernel(vals, got, s, z, math.Inf(1))
			gotB := make([]uint32, n)
			gotBE := layout.BitsEncodeKernelRun(vals, gotB, float64(s), float64(z)/2, qm, math.Inf(1))
			bounded := make([]uint8, n)
			bE := layout.EncodeGroupKernel(vals, bounded, s, z, best)
			restore()
			if !bytes.Equal(got, want) || !same(gotE, wantE) {
				t.Fatalf("%s Q4: codes %v error %v, want %v %v (s %v z %d vals %v)", e.Name, got, gotE, want, wantE, s, z, vals)
			}
			if !equalWords(gotB, wantB) || !same(gotBE, wantBE) {
				t.Fatalf("%s Bits: codes %v error %v, want %v %v (s %v z %v qmax %v vals %v)", e.Name, gotB, gotBE, wantB, wantBE, s, float64(z)/2, qm, vals)
			}
			if bE <= best && (!same(bE, wantE) || !bytes.Equal(bounded, want)) {
				t.Fatalf("%s Q4, bound %v: error %v, want %v", e.Name, best, bE, wantE)
			}
		}
	})
}
