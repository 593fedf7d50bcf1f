// Package conformance is the backend-neutral test suite every qgemv
// backend passes: each format and activation type against the float64
// reference (within the format's named bound) and the exact int8
// reference (bit for bit), on tail shapes and batch sizes from 1 to 16
// (1, 2, 3, 4, 8 and 16 unless a backend asks for others), codebooks also
// with enough rows for the Psumbook kernels, with guard bands around every output and checks that inputs are not
// modified, plus bad input (wrong batch, short slices, non-finite
// activations, bad scales, closed matrices), which must be errors.
//
// The CPU kernel sets run it in package dispatch's tests; the GPU
// backends run it from their own tagged tests.
package conformance

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/dispatch"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// Activation names used by Options.Supports.
const (
	A32 = "A32" // MulF32
	A16 = "A16" // MulF16
	A8  = "A8"  // MulA8 and MulI8
	I32 = "I32" // MulI32 (the int8 formats)
)

// Options selects what the backend under test must run.
type Options struct {
	// Supports reports whether the backend implements matrix m with
	// activation act (A32, A16, A8 or I32), for the combinations the
	// format takes (Capable). For a combination it does not implement,
	// the suite requires an error (from Load or the multiply) instead of
	// a result. nil means every combination the format takes.
	Supports func(m layout.Matrix, act string) bool
	// Short runs one tail shape and fewer formats.
	Short bool
	// Batches overrides the batch sizes (default 1, 2, 3, 4, 8 and 16).
	Batches []int
}

// Capable reports whether the format of m takes act at all: float
// activations (A32, A16) every format but the int8 ones; A8 the formats
// with an exact int8 definition (layout.A8Matrix; one with fractional
// zero points must then say it needs integer zero points); I32 the int8
// formats (layout.Int32Matrix).
func Capable(m layout.Matrix, act string) bool {
	_, isInt := m.(layout.Int32Matrix)
	switch act {
	case A32, A16:
		return !isInt
	case A8:
		_, ok := m.(layout.A8Matrix)
		return ok
	case I32:
		return isInt
	}
	return false
}

func (o Options) supports(m layout.Matrix, act string) bool {
	return Capable(m, act) && (o.Supports == nil || o.Supports(m, act))
}

// Case is one matrix of the suite.
type Case struct {
	Name string
	M    layout.Matrix
}

// Cases returns the matrices the suite multiplies at one shape: every
// registered format's examples (layout.Format.Examples; Short: its
// ShortExamples) except the int8 formats (RunInt32 checks those); Bits
// with float32 metadata, with fractional zero points, with offsets
// (Q4_1/Q4_K form) and with an act-order permutation; Q8_0 with codes of
// -128.
func Cases(rows, cols int, short bool, seed uint64) ([]Case, error) {
	var out []Case
	add := func(m layout.Matrix, err error, suffix string) error {
		if err != nil {
			return err
		}
		out = append(out, Case{m.Name() + suffix, m})
		return nil
	}
	i := 0
	for _, f := range layout.Formats() {
		if f.Int8Values {
			continue
		}
		names := f.Examples
		if short {
			names = names[:f.ShortExamples]
		}
		for _, name := range names {
			spec, err := layout.ParseFormatSpec(name)
			if err != nil {
				return nil, err
			}
			m, err := synth.Matrix(spec, rows, cols, seed+uint64(i))
			i++
			if err := add(m, err, ""); err != nil {
				return nil, err
			}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
		if (i/64)%3 == 1 {
			w[i] += 1.5
		}
	}
	// float32 metadata with integer zeros; binary16 with fractional zeros
	for _, v := range []struct {
		n, g   int
		opt    layout.QuantOptions
		suffix string
	}{
		{4, 128, layout.QuantOptions{Method: layout.Search, IntegerZero: true, FP32Meta: true}, "/fp32meta"},
		{3, 64, layout.QuantOptions{Method: layout.Search, IntegerZero: false}, "/fraczero"},
		{2, 32, layout.QuantOptions{Method: layout.MinMax, IntegerZero: true, FP32Meta: true}, "/fp32meta"},
	} {
		b, err := layout.QuantizeBits(w, rows, cols, v.n, v.g, v.opt)
		if err := add(b, err, v.suffix); err != nil {
			return nil, err
		}
	}
	// offsets: w = q*s + o (imported Q4_1 / Q4_K form)
	off, err := layout.RandomBits(rows, cols, 4, 32, seed+77)
	if err != nil {
		return nil, err
	}
	off.Offsets = true
	for i := range off.Zeros16 {
		off.Zeros16[i] = layout.ToFP16(float32(rng.NormFloat64() * 0.05))
	}
	out = append(out, Case{off.Name() + "/offsets", off})
	// act-order permutation (imported GPTQ)
	perm, err := layout.RandomBits(rows, cols, 4, 128, seed+78)
	if err != nil {
		return nil, err
	}
	perm.Perm = make([]int32, cols)
	for i, p := range rng.Perm(cols) {
		perm.Perm[i] = int32(p)
	}
	out = append(out, Case{perm.Name() + "/actorder", perm})
	q8, err := synth.Q8MinCodes(rows, cols, seed+79)
	if err != nil {
		return nil, err
	}
	out = append(out, Case{q8.Name() + "/mincode", q8})
	for _, c := range out {
		if err := c.M.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return out, nil
}

const (
	guard    = 8
	sentinel = float32(-1234.5)
)

func guarded(n int) (full, inner []float32) {
	full = make([]float32, n+2*guard)
	for i := range full {
		full[i] = sentinel
	}
	return full, full[guard : guard+n]
}

func checkGuards(full []float32, n int) error {
	for i := range guard {
		if math.Float32bits(full[i]) != math.Float32bits(sentinel) || math.Float32bits(full[guard+n+i]) != math.Float32bits(sentinel) {
			return fmt.Errorf("guard band around the output overwritten at offset %d", i)
		}
	}
	return nil
}

// Run runs the suite against be.
func Run(t *testing.T, be dispatch.Backend, o Options) {
	shapes := [][2]int{{1, 1}, {33, 700}, {70, 2100}, {130, 300}}
	if o.Short {
		shapes = [][2]int{{33, 700}}
	}
	batches := o.Batches
	if batches == nil {
		// 2, 4 and 8 reach the CPU's two- and eight-vector kernels.
		batches = []int{1, 2, 3, 4, 8, 16}
	}
	for si, sh := range shapes {
		cases, err := Cases(sh[0], sh[1], o.Short, uint64(100*si+1))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%dx%d", c.Name, sh[0], sh[1]), func(t *testing.T) {
				runCase(t, be, o, c, batches)
			})
		}
	}
	// Codebooks with at least 2^B * V rows, so that backends that
	// dequantize smaller ones (the CPU) run their Psumbook kernels.
	for i, name := range []string{"cb-m1v4b8g128", "cb-m2v8b6g128"} {
		spec, err := layout.ParseFormatSpec(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := synth.Matrix(spec, 1056, 320, uint64(900+i))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(m.Name()+"/1056x320", func(t *testing.T) { runCase(t, be, o, Case{m.Name(), m}, batches) })
	}
	t.Run("Int32", func(t *testing.T) { runInt32(t, be, o, batches) })
	if c, ok := be.(dispatch.Chainer); ok {
		t.Run("Chain", func(t *testing.T) { runChain(t, be, c, o) })
	}
	t.Run("BadInput", func(t *testing.T) { badInput(t, be, o) })
}

// runInt32 checks the int8 formats (layout.Int32Matrix: Int8 and the
// entropy-coded ones) at shapes every layout holds: MulI32 equals
// DotInt32 exactly for each vector of every batch, with guard bands and
// untouched inputs; the float and A8 multiplies are errors wrapping
// ErrFormatNotImplemented; bad lengths and batches are errors.
func runInt32(t *testing.T, be dispatch.Backend, o Options, batches []int) {
	for si, sh := range [][2]int{{32, 128}, {64, 384}, {96, 1024}} {
		for _, f := range layout.Formats() {
			if !f.Int8Values {
				continue
			}
			for ei, name := range f.Examples {
				spec, err := layout.ParseFormatSpec(name)
				if err != nil {
					t.Fatal(err)
				}
				m, err := synth.Matrix(spec, sh[0], sh[1], uint64(10*si+ei+1))
				if err != nil {
					t.Fatal(err)
				}
				im, ok := m.(layout.Int32Matrix)
				if !ok {
					continue
				}
				t.Run(fmt.Sprintf("%s/%dx%d", m.Name(), sh[0], sh[1]), func(t *testing.T) {
					checkInt32(t, be, o, im, batches)
				})
			}
		}
	}
}

// runChain checks a backend's device-side MatVANS chain: three layers of
// each int8 format (128x128), their scales chosen from the reference so
// that every layer's values span int8, against the chain computed with
// DotInt32 and layout.Requantize; and that a chain with a closed matrix
// is an error.
func runChain(t *testing.T, be dispatch.Backend, c dispatch.Chainer, o Options) {
	const d = 128
	for _, f := range layout.Formats() {
		if !f.Int8Values {
			continue
		}
		for ei, name := range f.Examples {
			spec, err := layout.ParseFormatSpec(name)
			if err != nil {
				t.Fatal(err)
			}
			var ms []layout.Int32Matrix
			var mats []dispatch.Matrix
			for i := 0; i < 3; i++ {
				m, err := synth.Matrix(spec, d, d, uint64(31*ei+i+1))
				if err != nil {
					t.Fatal(err)
				}
				mx, err := be.Load(m)
				if err != nil {
					if o.supports(m, I32) {
						t.Fatalf("%s: Load: %v", name, err)
					}
					return
				}
				defer mx.Close()
				ms, mats = append(ms, m.(layout.Int32Matrix)), append(mats, mx)
			}
			rng := rand.New(rand.NewPCG(uint64(ei), 3))
			v := make([]int8, d)
			for i := range v {
				v[i] = int8(rng.IntN(256) - 128)
			}
			want := append([]int8(nil), v...)
			y := make([]int32, d)
			alpha := make([]float32, len(ms))
			for i, m := range ms {
				if err := m.DotInt32(y, want); err != nil {
					t.Fatal(err)
				}
				var amax int32 = 1
				for _, x := range y {
					amax = max(amax, x, -x)
				}
				alpha[i] = 127 / float32(amax)
				if err := layout.Requantize(want, y, alpha[i]); err != nil {
					t.Fatal(err)
				}
			}
			got := make([]int8, d)
			if err := c.Chain(got, mats, alpha, v); err != nil {
				t.Fatalf("%s: Chain: %v", name, err)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s: chain result %d = %d, want %d", name, i, got[i], want[i])
				}
			}
			if err := mats[1].Close(); err != nil {
				t.Fatal(err)
			}
			if err := c.Chain(got, mats, alpha, v); err == nil {
				t.Errorf("%s: a chain with a closed matrix: no error", name)
			}
		}
	}
}

func checkInt32(t *testing.T, be dispatch.Backend, o Options, m layout.Int32Matrix, batches []int) {
	mx, err := be.Load(m)
	if err != nil {
		if o.supports(m, I32) {
			t.Fatalf("Load: %v", err)
		}
		return
	}
	defer mx.Close()
	rows, cols := m.Shape()
	rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	want := make([]int32, rows)
	for _, batch := range batches {
		x := make([]int8, batch*cols)
		for i := range x {
			x[i] = int8(rng.IntN(256) - 128)
		}
		xcopy := append([]int8(nil), x...)
		full := make([]int32, batch*rows+2*guard)
		for i := range full {
			full[i] = -12345
		}
		dst := full[guard : guard+batch*rows]
		err := mx.MulI32(dst, x, batch)
		if !o.supports(m, I32) {
			if err == nil {
				t.Errorf("batch %d: not supported by this backend but returned no error", batch)
			}
			return
		}
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		for i := range guard {
			if full[i] != -12345 || full[guard+batch*rows+i] != -12345 {
				t.Fatalf("batch %d: guard band around the output overwritten", batch)
			}
		}
		for i := range x {
			if x[i] != xcopy[i] {
				t.Fatalf("batch %d: the input was modified at %d", batch, i)
			}
		}
		for v := 0; v < batch; v++ {
			if err := m.DotInt32(want, x[v*cols:(v+1)*cols]); err != nil {
				t.Fatal(err)
			}
			for r, w := range want {
				if got := dst[v*rows+r]; got != w {
					t.Fatalf("batch %d vector %d row %d = %d, want %d", batch, v, r, got, w)
				}
			}
		}
	}
	xf, df := make([]float32, cols), make([]float32, rows)
	for name, err := range map[string]error{
		"MulF32": mx.MulF32(df, xf, 1),
		"MulF16": mx.MulF16(df, make([]layout.FP16, cols), 1),
		"MulA8":  mx.MulA8(df, xf, 1),
	} {
		if !errors.Is(err, dispatch.ErrFormatNotImplemented) {
			t.Errorf("%s on an int8 matrix: %v, want an error wrapping ErrFormatNotImplemented", name, err)
		}
	}
	x, y := make([]int8, cols), make([]int32, rows)
	for name, err := range map[string]error{
		"batch 0":   mx.MulI32(y, x, 0),
		"batch 17":  mx.MulI32(make([]int32, 17*rows), make([]int8, 17*cols), 17),
		"short x":   mx.MulI32(y, x[:cols-1], 1),
		"short dst": mx.MulI32(y[:rows-1], x, 1),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := mx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mx.MulI32(y, x, 1); err == nil {
		t.Error("multiply after Close: accepted")
	}
}

func anySupported(o Options, m layout.Matrix) bool {
	return o.supports(m, A32) || o.supports(m, A16) || o.supports(m, A8)
}

func runCase(t *testing.T, be dispatch.Backend, o Options, c Case, batches []int) {
	mx, err := be.Load(c.M)
	if err != nil {
		if anySupported(o, c.M) {
			t.Fatalf("Load: %v", err)
		}
		return // an error for an unsupported format is what is wanted
	}
	defer mx.Close()
	rows, cols := c.M.Shape()
	rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	for _, batch := range batches {
		x := make([]float32, batch*cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			if i%97 == 5 {
				x[i] *= 30 // a few large activations exercise the A8 scales
			}
		}
		xcopy := append([]float32(nil), x...)
		full, dst := guarded(batch * rows)
		for _, act := range []string{A32, A16, A8} {
			for i := range dst {
				dst[i] = float32(math.NaN())
			}
			xin := x
			var err error
			switch act {
			case A32:
				err = mx.MulF32(dst, x, batch)
			case A16:
				h := make([]layout.FP16, len(x))
				xin = make([]float32, len(x))
				for i, v := range x {
					h[i] = layout.ToFP16(v)
					xin[i] = h[i].Float32()
				}
				err = mx.MulF16(dst, h, batch)
			case A8:
				err = mx.MulA8(dst, x, batch)
			}
			name := fmt.Sprintf("batch %d %s", batch, act)
			if !o.supports(c.M, act) {
				if err == nil {
					t.Errorf("%s: not supported by this backend but returned no error", name)
				}
				continue
			}
			if err != nil {
				if act == A8 && !hasIntegerZeros(c.M) {
					if !strings.Contains(err.Error(), "integer zero") {
						t.Errorf("%s: fractional zeros or offsets: error %q does not say integer zero points are needed", name, err)
					}
					continue
				}
				t.Fatalf("%s: %v", name, err)
			}
			if act == A8 && !hasIntegerZeros(c.M) {
				t.Fatalf("%s: accepted a matrix without integer zero points", name)
			}
			if err := checkGuards(full, len(dst)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(xcopy[i]) {
					t.Fatalf("%s: the activations were modified at %d", name, i)
				}
			}
			if act == A8 {
				if err := checkA8(c.M, dst, x, batch, rows, cols); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if err := checkI8(mx, c.M, dst, x, batch, rows, cols); err != nil {
					t.Fatalf("batch %d MulI8: %v", batch, err)
				}
				if err := checkI8Extremes(mx, c.M, batch, rows); err != nil {
					t.Fatalf("batch %d MulI8, activations at -128 and 127: %v", batch, err)
				}
				continue
			}
			if err := checkFloat(c.M, dst, xin, batch, rows, cols); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
}

// hasIntegerZeros reports whether m can multiply int8 activations.
func hasIntegerZeros(m layout.Matrix) bool {
	a, ok := m.(layout.A8Matrix)
	return ok && a.IntegerZeros() == nil
}

// gathered returns x in stored column order (act-order matrices).
func gathered(m layout.Matrix, x []float32) []float32 {
	p, ok := m.(layout.Permuted)
	if !ok || p.ColumnPerm() == nil {
		return x
	}
	g := make([]float32, len(x))
	for j, src := range p.ColumnPerm() {
		g[j] = x[src]
	}
	return g
}

func checkA8(m layout.Matrix, dst, x []float32, batch, rows, cols int) error {
	ref, ok := m.(layout.A8Matrix)
	if !ok {
		return fmt.Errorf("format %s has no exact int8 reference", m.Name())
	}
	pc := m.PaddedCols()
	xq, xs := make([]int8, pc), make([]float32, pc/layout.GroupSize)
	want := make([]float32, rows)
	for v := 0; v < batch; v++ {
		if err := layout.QuantizeA8(xq, xs, gathered(m, x[v*cols:(v+1)*cols])); err != nil {
			return err
		}
		if err := ref.DotA8Exact(want, xq, xs); err != nil {
			return err
		}
		for r := range want {
			if math.Float32bits(dst[v*rows+r]) != math.Float32bits(want[r]) {
				return fmt.Errorf("vector %d row %d = %v, want exactly %v", v, r, dst[v*rows+r], want[r])
			}
		}
	}
	return nil
}

// checkI8 runs MulI8 on activations quantized here and requires the same
// bits as MulA8 gave.
func checkI8(mx dispatch.Matrix, m layout.Matrix, a8 []float32, x []float32, batch, rows, cols int) error {
	pc := m.PaddedCols()
	xq, xs := make([]int8, batch*pc), make([]float32, batch*pc/layout.GroupSize)
	for v := 0; v < batch; v++ {
		if err := layout.QuantizeA8(xq[v*pc:(v+1)*pc], xs[v*pc/128:(v+1)*pc/128], gathered(m, x[v*cols:(v+1)*cols])); err != nil {
			return err
		}
	}
	full, dst := guarded(batch * rows)
	if err := mx.MulI8(dst, xq, xs, batch); err != nil {
		return err
	}
	if err := checkGuards(full, len(dst)); err != nil {
		return err
	}
	for i := range dst {
		if math.Float32bits(dst[i]) != math.Float32bits(a8[i]) {
			return fmt.Errorf("output %d = %v, MulA8 gave %v", i, dst[i], a8[i])
		}
	}
	return nil
}

// checkI8Extremes runs MulI8 on int8 activations that no quantizer
// makes, a third at -128, a third at 127, the rest at random, and requires
// the reference's exact product: MulI8 takes any int8.
func checkI8Extremes(mx dispatch.Matrix, m layout.Matrix, batch, rows int) error {
	ref, ok := m.(layout.A8Matrix)
	if !ok {
		return fmt.Errorf("format %s has no exact int8 reference", m.Name())
	}
	pc := m.PaddedCols()
	xq, xs := synth.ExtremeA8(batch*pc, uint64(batch))
	full, dst := guarded(batch * rows)
	if err := mx.MulI8(dst, xq, xs, batch); err != nil {
		return err
	}
	if err := checkGuards(full, len(dst)); err != nil {
		return err
	}
	want := make([]float32, rows)
	for v := 0; v < batch; v++ {
		if err := ref.DotA8Exact(want, xq[v*pc:(v+1)*pc], xs[v*pc/128:(v+1)*pc/128]); err != nil {
			return err
		}
		for r := range want {
			if math.Float32bits(dst[v*rows+r]) != math.Float32bits(want[r]) {
				return fmt.Errorf("vector %d row %d = %v, want exactly %v", v, r, dst[v*rows+r], want[r])
			}
		}
	}
	return nil
}

func checkFloat(m layout.Matrix, dst, x []float32, batch, rows, cols int) error {
	ref, mag := make([]float64, rows), make([]float64, rows)
	for v := 0; v < batch; v++ {
		xv := x[v*cols : (v+1)*cols]
		if err := m.DotRef(ref, xv); err != nil {
			return err
		}
		if err := m.DotRefMag(mag, xv); err != nil {
			return err
		}
		rel, abs := m.Tolerance(xv)
		for i := range ref {
			got := float64(dst[v*rows+i])
			if bound := float64(rel*mag[i]) + abs; !(math.Abs(got-ref[i]) <= bound) {
				return fmt.Errorf("vector %d row %d = %v, want %v within %v (|error| %v)", v, i, got, ref[i], bound, math.Abs(got-ref[i]))
			}
		}
	}
	return nil
}

// badInput: every malformed call is an error, never a panic, and a
// closed matrix refuses work.
func badInput(t *testing.T, be dispatch.Backend, o Options) {
	const rows, cols = 20, 300
	m, err := layout.RandomQ4G128(rows, cols, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !o.supports(m, A32) || !o.supports(m, A8) {
		t.Skip("the backend does not run Q4G128")
	}
	mx, err := be.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	pc := m.PaddedCols()
	x, dst := make([]float32, cols), make([]float32, rows)
	nan := make([]float32, cols)
	nan[17] = float32(math.NaN())
	inf := make([]float32, cols)
	inf[3] = float32(math.Inf(-1))
	xq, xs := make([]int8, pc), make([]float32, pc/128)
	badScale := []float32{-1, 1, 1}[:pc/128]
	nanScale := make([]float32, pc/128)
	nanScale[0] = float32(math.NaN())
	for name, err := range map[string]error{
		"batch 0":          mx.MulF32(dst, x, 0),
		"batch 17":         mx.MulF32(make([]float32, 17*rows), make([]float32, 17*cols), 17),
		"short x":          mx.MulF32(dst, x[:cols-1], 1),
		"short dst":        mx.MulF32(dst[:rows-1], x, 1),
		"long dst":         mx.MulF32(make([]float32, rows+1), x, 1),
		"short fp16 x":     mx.MulF16(dst, make([]layout.FP16, cols-1), 1),
		"A8 batch 0":       mx.MulA8(dst, x, 0),
		"A8 short x":       mx.MulA8(dst, x[:1], 1),
		"A8 NaN":           mx.MulA8(dst, nan, 1),
		"A8 Inf":           mx.MulA8(dst, inf, 1),
		"I8 short xq":      mx.MulI8(dst, xq[:pc-1], xs, 1),
		"I8 short xs":      mx.MulI8(dst, xq, xs[:len(xs)-1], 1),
		"I8 negative xs":   mx.MulI8(dst, xq, badScale, 1),
		"I8 NaN xs":        mx.MulI8(dst, xq, nanScale, 1),
		"I8 batch 2 short": mx.MulI8(make([]float32, 2*rows), xq, xs, 2),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := mx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mx.MulF32(dst, x, 1); err == nil {
		t.Error("multiply after Close: accepted")
	}
	// Invalid matrices are refused at Load.
	bad := *m
	bad.Weights = bad.Weights[1:]
	if _, err := be.Load(&bad); err == nil {
		t.Error("Load accepted a matrix with a short weight slice")
	}
	bad = *m
	bad.Scales = append([]float32(nil), bad.Scales...)
	bad.Scales[3] = float32(math.Inf(1))
	if _, err := be.Load(&bad); err == nil {
		t.Error("Load accepted a matrix with an infinite scale")
	}
}
