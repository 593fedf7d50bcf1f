package layout

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func gaussian(rng *rand.Rand, n int) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	return w
}

// studentT draws heavy-tailed values (3 degrees of freedom).
func studentT(rng *rand.Rand, n int) []float32 {
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

// TestQuantizeError reports the relative RMS error of both methods on a
// Gaussian and a heavy-tailed matrix and checks Search never loses to
// MinMax and both stay within what 4 bits can do.
func TestQuantizeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, cols = 64, 1000
	for _, dist := range []struct {
		name string
		w    []float32
	}{{"gaussian", gaussian(rng, rows*cols)}, {"student-t3", studentT(rng, rows*cols)}} {
		var errs [2]float64
		for i, method := range []QuantMethod{MinMax, Search} {
			m, err := QuantizeQ4G128(dist.w, rows, cols, method)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			errs[i] = RelRMSError(m.Dequantize(), dist.w)
			t.Logf("%s %v: relative RMS error %.4f", dist.name, method, errs[i])
		}
		if errs[1] > errs[0] {
			t.Errorf("%s: search (%.4f) is worse than minmax (%.4f)", dist.name, errs[1], errs[0])
		}
		// Uniform 4-bit quantization of a Gaussian group of 128 with its
		// range set by the extremes gives about 0.10; heavy tails stretch
		// the range and give about 0.16.
		if limit := map[string]float64{"gaussian": 0.11, "student-t3": 0.18}[dist.name]; errs[0] > limit {
			t.Errorf("%s: minmax error %.4f above %.2f", dist.name, errs[0], limit)
		}
	}
}

// TestQuantizeExact: a matrix whose groups take at most 16 evenly spaced
// values including 0 quantizes losslessly; padding dequantizes to zero.
func TestQuantizeExact(t *testing.T) {
	const rows, cols = 3, 130
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(i%16-5) * 0.25
	}
	for _, method := range []QuantMethod{MinMax, Search} {
		m, err := QuantizeQ4G128(w, rows, cols, method)
		if err != nil {
			t.Fatal(err)
		}
		if e := RelRMSError(m.Dequantize(), w); e != 0 {
			t.Errorf("%v: error %v, want 0", method, e)
		}
		for r := 0; r < rows; r++ {
			for c := cols; c < m.PCols; c++ {
				if m.Q(r, c) != m.Zero(r, c/GroupSize) {
					t.Fatalf("%v: padding (%d,%d) does not dequantize to 0", method, r, c)
				}
			}
		}
	}
}

func TestDotRefMatchesDequantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	m, _ := QuantizeQ4G128(gaussian(rng, 5*300), 5, 300, MinMax)
	x := gaussian(rng, 300)
	ref := make([]float64, 5)
	if err := m.DotRef(ref, x); err != nil {
		t.Fatal(err)
	}
	w := m.Dequantize()
	for r := range ref {
		var acc float64
		for c := 0; c < 300; c++ {
			g := c / GroupSize
			exact := float64(int(m.Q(r, c))-int(m.Zero(r, g))) * float64(m.Scale(r, g))
			if float32(exact) != w[r*300+c] {
				t.Fatalf("Dequantize(%d,%d) = %v, want float32(%v)", r, c, w[r*300+c], exact)
			}
			acc += exact * float64(x[c])
		}
		if math.Abs(acc-ref[r]) > 1e-12*math.Abs(acc)+1e-12 {
			t.Errorf("row %d: DotRef %v, dequantized dot %v", r, ref[r], acc)
		}
	}
	if err := m.DotRef(ref, x[:299]); err == nil {
		t.Error("DotRef accepted a short x")
	}
}

func TestQuantizeBadInput(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		w          []float32
		rows, cols int
		method     QuantMethod
		want       string
	}{
		{make([]float32, 6), 2, 3, MinMax, ""},
		{make([]float32, 5), 2, 3, MinMax, "want 2 x 3"},
		{make([]float32, 0), 0, 3, MinMax, "positive"},
		{make([]float32, 6), 2, 3, QuantMethod(9), "unknown method"},
		{[]float32{0, 0, 0, 0, nan, 0}, 2, 3, MinMax, "row 1, column 1"},
		{[]float32{float32(math.Inf(1)), 0}, 1, 2, Search, "is +Inf"},
		{nil, MaxDim + 1, 1, MinMax, "limit"},
	}
	for _, c := range cases {
		_, err := QuantizeQ4G128(c.w, c.rows, c.cols, c.method)
		if c.want == "" {
			if err != nil {
				t.Errorf("%dx%d: %v", c.rows, c.cols, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%dx%d: error %v, want it to mention %q", c.rows, c.cols, err, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	good, _ := NewQ4G128(130, 129)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	mut := []struct {
		name string
		f    func(m *Q4G128)
	}{
		{"short weights", func(m *Q4G128) { m.Weights = m.Weights[1:] }},
		{"short scales", func(m *Q4G128) { m.Scales = m.Scales[1:] }},
		{"short zeros", func(m *Q4G128) { m.Zeros = m.Zeros[1:] }},
		{"wrong padding", func(m *Q4G128) { m.PCols = 128 }},
		{"zero rows", func(m *Q4G128) { m.Rows = 0 }},
		{"NaN scale", func(m *Q4G128) { m.Scales[5] = float32(math.NaN()) }},
		{"Inf scale", func(m *Q4G128) { m.Scales[7] = float32(math.Inf(-1)) }},
	}
	for _, c := range mut {
		m, _ := NewQ4G128(130, 129)
		c.f(m)
		if err := m.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", c.name)
		}
	}
	var nilM *Q4G128
	if err := nilM.Validate(); err == nil {
		t.Error("nil matrix validated")
	}
}

// quantizeA8Ref is the definition of QuantizeA8 in float64 terms.
func quantizeA8Ref(x []float32, pc int) ([]int8, []float32) {
	q := make([]int8, pc)
	s := make([]float32, pc/GroupSize)
	for g := range s {
		var amax float32
		for i := g * GroupSize; i < min(len(x), (g+1)*GroupSize); i++ {
			amax = max(amax, float32(math.Abs(float64(x[i]))))
		}
		if amax == 0 {
			continue
		}
		s[g] = amax / 127
		inv := 127 / amax
		for i := g * GroupSize; i < min(len(x), (g+1)*GroupSize); i++ {
			v := math.RoundToEven(float64(x[i] * inv))
			q[i] = int8(max(-127, min(127, v)))
		}
	}
	return q, s
}

func TestQuantizeA8(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{1, 127, 128, 129, 1000} {
		x := gaussian(rng, n)
		// Exact halfway cases: amax 127 makes inv 1, so x itself rounds.
		x[0] = 127
		for i := 1; i < min(n, 40); i++ {
			x[i] = float32(i%9-4) + 0.5
		}
		pc := Pad128(n)
		q, s := make([]int8, pc), make([]float32, pc/GroupSize)
		if err := QuantizeA8(q, s, x); err != nil {
			t.Fatal(err)
		}
		wq, ws := quantizeA8Ref(x, pc)
		for i := range q {
			if q[i] != wq[i] {
				t.Fatalf("n=%d: q[%d] = %d, want %d (x = %v)", n, i, q[i], wq[i], x[min(i, n-1)])
			}
		}
		for g := range s {
			if s[g] != ws[g] {
				t.Fatalf("n=%d: scale %d = %v, want %v", n, g, s[g], ws[g])
			}
		}
	}
	if n := 2; true { // 0.5 rounds to 0, 1.5 and 2.5 to 2, -2.5 to -2
		x := []float32{127, 0.5, 1.5, 2.5, -2.5, -0.5}
		q, s := make([]int8, 128), make([]float32, 1)
		_ = QuantizeA8(q, s, x)
		if got := q[:n+4]; got[1] != 0 || got[2] != 2 || got[3] != 2 || got[4] != -2 || got[5] != 0 {
			t.Errorf("halfway cases rounded to %v, want [127 0 2 2 -2 0]", q[:6])
		}
	}
	bad := []struct {
		q  []int8
		s  []float32
		x  []float32
		ok bool
	}{
		{make([]int8, 128), make([]float32, 1), []float32{1, float32(math.NaN())}, false},
		{make([]int8, 128), make([]float32, 1), []float32{float32(math.Inf(1))}, false},
		{make([]int8, 127), make([]float32, 1), nil, false},
		{make([]int8, 128), make([]float32, 2), nil, false},
		{make([]int8, 128), make([]float32, 1), make([]float32, 129), false},
		{make([]int8, 256), make([]float32, 2), make([]float32, 3), true},
	}
	for i, c := range bad {
		if err := QuantizeA8(c.q, c.s, c.x); (err == nil) != c.ok {
			t.Errorf("case %d: err = %v", i, err)
		}
	}
}

// TestQuantizeA8Tiny: groups whose amax is below 2^-100 quantize as the
// same group scaled up by a power of two does (the pre-scaling is exact),
// and below about 3.7e-37, where 127/amax overflows to +Inf, they still
// give the right codes (before: 2^-126 next to 2^-125 became 127, not 64).
func TestQuantizeA8Tiny(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	x := gaussian(rng, 128)
	q0, s0 := make([]int8, 128), make([]float32, 1)
	if err := QuantizeA8(q0, s0, x); err != nil {
		t.Fatal(err)
	}
	for _, e := range []int{-90, -101, -110, -125} { // the last makes some inputs subnormal
		xs := make([]float32, len(x))
		for i, v := range x {
			xs[i] = float32(math.Ldexp(float64(v), e))
		}
		q, sc := make([]int8, 128), make([]float32, 1)
		if err := QuantizeA8(q, sc, xs); err != nil {
			t.Fatal(err)
		}
		wq, _ := quantizeA8Ref(xs, 128) // the unscaled formula, finite down to 2^-121
		for i := range q {
			if e > -120 && q[i] != q0[i] || e > -120 && q[i] != wq[i] {
				t.Fatalf("x * 2^%d: q[%d] = %d, want %d (unscaled %d)", e, i, q[i], q0[i], wq[i])
			}
			if e <= -120 && abs8(q[i]-q0[i]) > 1 { // subnormal inputs lost bits
				t.Fatalf("x * 2^%d: q[%d] = %d, want within 1 of %d", e, i, q[i], q0[i])
			}
		}
	}
	q, sc := make([]int8, 128), make([]float32, 1)
	x = []float32{0x1p-125, 0x1p-126, 0, -0x1p-125, 0x1p-140}
	if err := QuantizeA8(q, sc, x); err != nil {
		t.Fatal(err)
	}
	if want := []int8{127, 64, 0, -127, 0}; !slices.Equal(q[:5], want) || sc[0] != float32(0x1p-125)/127 {
		t.Errorf("amax 2^-125: q %v, scale %v; want %v, %v", q[:5], sc[0], want, float32(0x1p-125)/127)
	}
	if err := QuantizeA8(q, sc, []float32{0x1p-149}); err != nil || q[0] != 127 {
		t.Errorf("the smallest subnormal alone: q %d, %v; want 127", q[0], err)
	}
}

func abs8(v int8) int8 {
	if v < 0 {
		return -v
	}
	return v
}

func BenchmarkQuantizeA8(b *testing.B) {
	x := gaussian(rand.New(rand.NewPCG(4, 4)), 14336)
	q, s := make([]int8, 14336), make([]float32, 112)
	b.SetBytes(4 * 14336)
	for i := 0; i < b.N; i++ {
		_ = QuantizeA8(q, s, x)
	}
}

func TestParseFormatSpec(t *testing.T) {
	for _, s := range []string{"q4g128", "bits4g64", "bits2row", "bits3g128", "bits1g32", "bits8g256", "sparse12g128", "sparse12row"} {
		f, err := ParseFormatSpec(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if f.String() != s {
			t.Errorf("%s parsed and printed as %s", s, f)
		}
		m, _, err := f.Quantize(make([]float32, 2*300), 2, 300, QuantOptions{IntegerZero: true})
		if err != nil || m.Validate() != nil {
			t.Errorf("%s: quantize: %v", s, err)
		}
	}
	for _, s := range []string{"", "q4", "bits5g64", "bits4g100", "bits4", "bits4x64", "sparse12g7", "sparse12", "bitsxg64"} {
		if _, err := ParseFormatSpec(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// TestSurvivingMutants pins behaviour that mutation testing found no test
// for: DotRefMag's formulas (the error bounds' denominators), setters
// overwriting a value, Validate's padded-row check and binary16's
// subnormal rounding.
func TestSurvivingMutants(t *testing.T) {
	// Q4G128 DotRefMag = sum |s| (q + z) |x|: q 3, z 5, s -2, x -1.5 on
	// every column of one row gives 128 * 2 * 8 * 1.5.
	m, err := NewQ4G128(1, 128)
	if err != nil {
		t.Fatal(err)
	}
	for c := 0; c < 128; c++ {
		setNib(m.Weights, c, 3)
	}
	setNib(m.Zeros, m.MetaIndex(0, 0), 5)
	m.Scales[m.MetaIndex(0, 0)] = -2
	x := make([]float32, 128)
	for i := range x {
		x[i] = -1.5
	}
	mag, ref := make([]float64, 1), make([]float64, 1)
	if err := m.DotRefMag(mag, x); err != nil || mag[0] != 128*2*8*1.5 {
		t.Errorf("Q4G128 DotRefMag = %v, %v; want %v", mag[0], err, 128*2*8*1.5)
	}
	if err := m.DotRef(ref, x); err != nil || ref[0] != 128*(3-5)*-2*-1.5 {
		t.Errorf("Q4G128 DotRef = %v, %v; want %v", ref[0], err, 128*(3-5)*-2*-1.5)
	}
	// Bits: sum |s| (q + |z|) |x|, or with offsets (w = q s + o)
	// sum (|s| q + |o|) |x|.
	for _, offsets := range []bool{false, true} {
		b, err := NewBits(1, 128, 4, 128, true)
		if err != nil {
			t.Fatal(err)
		}
		b.Offsets = offsets
		for c := 0; c < 128; c++ {
			b.SetQ(0, c, 3)
		}
		b.set(0, -2, -5)
		want := 128 * 2 * (3 + 5) * 1.5
		if offsets {
			want = 128 * (2*3 + 5) * 1.5
		}
		if err := b.DotRefMag(mag, x); err != nil || mag[0] != want {
			t.Errorf("Bits offsets %v: DotRefMag = %v, %v; want %v", offsets, mag[0], err, want)
		}
	}
	// Setters overwrite: a second SetQ replaces the first, neighbours kept.
	b, err := NewBits(2, 256, 3, 128, false)
	if err != nil {
		t.Fatal(err)
	}
	for c := 0; c < 256; c++ {
		b.SetQ(1, c, uint32(c%8))
	}
	b.SetQ(1, 37, 2)
	for c := 0; c < 256; c++ {
		want := uint32(c % 8)
		if c == 37 {
			want = 2
		}
		if got := b.Q(1, c); got != want {
			t.Fatalf("after overwriting column 37: Q(1, %d) = %d, want %d", c, got, want)
		}
	}
	// Validate: a padded row count that is not Rows padded to 128, with
	// slices sized to match it.
	bad, err := NewQ4G128(100, 128)
	if err != nil {
		t.Fatal(err)
	}
	bad.PRows = 256
	bad.Weights = make([]byte, 256*128/2)
	bad.Scales = make([]float32, bad.NumBlocks()*GroupSize)
	bad.Zeros = make([]byte, bad.NumBlocks()*GroupSize/2)
	if err := bad.Validate(); err == nil {
		t.Error("Validate accepted PRows 256 for 100 rows")
	}
	// binary16 subnormals (below 2^-14, steps of 2^-24) round to nearest,
	// ties to even, like normal values.
	for k := 0; k < 1024; k++ {
		for _, frac := range []float64{0.25, 0.5, 0.75} {
			v := (float64(k) + frac) * 0x1p-24
			want := math.RoundToEven(float64(k) + frac)
			if got := ToFP16(float32(v)); float64(got) != want || ToFP16(float32(-v)) != got|0x8000 {
				t.Fatalf("ToFP16(%g) = %#04x, want %#04x (and the sign bit for %g)", v, uint16(got), uint16(want), -v)
			}
		}
	}
}

// TestNearestCode: the branch-free rounding equals math.Round's
// definition, clamp(math.Round(x) + z, 0, 15), on the floats around every
// half-integer in [-20, 20] (64 on each side), on infinities and the
// largest floats, and on two million random ones (any bits, and uniform in
// [-40, 40]), for every zero point.
func TestNearestCode(t *testing.T) {
	want := func(x float32, z int) uint8 {
		return uint8(max(0, min(15, math.Round(float64(x))+float64(z))))
	}
	var xs []float32
	for h := -40; h <= 40; h++ {
		x := float32(h) / 2
		lo, hi := x, x
		xs = append(xs, x)
		for k := 0; k < 64; k++ {
			lo = math.Nextafter32(lo, float32(math.Inf(-1)))
			hi = math.Nextafter32(hi, float32(math.Inf(1)))
			xs = append(xs, lo, hi)
		}
	}
	xs = append(xs, float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32, 1e-45, -1e-45)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 1_000_000; i++ {
		if x := math.Float32frombits(rng.Uint32()); x == x { // any float but NaN
			xs = append(xs, x)
		}
		xs = append(xs, float32(rng.Float64()*80-40))
	}
	for _, x := range xs {
		for z := 0; z < 16; z++ {
			if got, w := nearestCode(x, z), want(x, z); got != w {
				t.Fatalf("nearestCode(%v, %d) = %d, want %d", x, z, got, w)
			}
		}
	}
}
