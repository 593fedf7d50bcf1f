package qgemv_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
	"github.com/qgemv/qgemv/layout/codebook"
	"github.com/qgemv/qgemv/layout/ggml"
)

// fuzzMatrix builds a matrix of kind k (Bits, Q4G128, Sparse12, a GGML
// block type, a codebook, Int8, or entropy-coded Int8 or Bits whose
// streams corruptANS damages) whose every stored byte (codes, scales,
// zeros, centroids; NaN and infinite values among them) comes from data,
// with flags breaking it: bit 0 a column permutation read from data
// (Bits; often not a permutation), bit 1 one weight word or byte too few,
// bit 2 offsets instead of zero points (Bits), bit 3 float32 metadata.
// It returns nil where the shape or parameters do not make a matrix.
func fuzzMatrix(k, n uint8, rows, cols, g uint16, flags uint8, data []byte) layout.Matrix {
	if len(data) == 0 {
		data = []byte{0}
	}
	r, c := int(rows)%300+1, int(cols)%700+1
	at := 0
	next := func() byte { b := data[at%len(data)]; at++; return b }
	u16 := func() uint16 { return uint16(next()) | uint16(next())<<8 }
	u32 := func() uint32 { return uint32(u16()) | uint32(u16())<<16 }
	short := flags&2 != 0
	switch k % 8 {
	case 4: // a codebook matrix
		cb, err := codebook.New(r, c, codebook.Ms[int(n)%len(codebook.Ms)], codebook.Vs[int(n/4)%len(codebook.Vs)],
			codebook.Bs[int(n/16)%len(codebook.Bs)], []int{0, 32, 64, 128, 256}[int(g)%5], flags&8 != 0)
		if err != nil {
			return nil
		}
		for i := range cb.Words[:len(cb.Words)-min(len(cb.Words), 32)] { // the 32 trailing words stay zero, as the format needs
			cb.Words[i] = u32()
		}
		for i := range cb.Centroids16 {
			cb.Centroids16[i] = layout.FP16(u16())
		}
		for i := range cb.Centroids32 {
			cb.Centroids32[i] = math.Float32frombits(u32())
		}
		for i := range cb.Scales16 {
			cb.Scales16[i] = layout.FP16(u16())
		}
		for i := range cb.Scales32 {
			cb.Scales32[i] = math.Float32frombits(u32())
		}
		if short && len(cb.Words) > 0 {
			cb.Words = cb.Words[:len(cb.Words)-1]
		}
		return cb
	case 5, 6: // an int8 matrix, plain or entropy-coded with corrupted streams
		l := ans.Layout(n % 2)
		switch {
		case k%8 == 5:
		case l == ans.WarpStripes: // stripes of 32 rows, columns in fours
			r, c = (r+ans.Lanes-1)/ans.Lanes*ans.Lanes, (c+3)/4*4
		default: // rows of whole 128-column units
			c = (c + 127) / 128 * 128
		}
		w := make([]int8, r*c)
		for i := range w {
			w[i] = int8(next())
		}
		if k%8 == 5 {
			m, err := layout.NewInt8(w, r, c)
			if err != nil {
				return nil
			}
			return m
		}
		m, err := ans.Encode(w, r, c, l)
		if err != nil {
			return nil
		}
		corruptANS(m, flags, next)
		return m
	case 7: // entropy-coded Bits with corrupted streams
		width := []int{1, 2, 4, 8}[int(n)%4]
		b, err := layout.NewBits(r, c, width, []int{0, 32, 64, 128, 256}[int(g)%5], false)
		if err != nil {
			return nil
		}
		for i := range b.Words {
			b.Words[i] = u32()
		}
		fillMeta(&b.GroupMeta, u16, u32)
		m, err := ans.EncodeBits(b)
		if err != nil {
			return nil
		}
		corruptANS(m.Code, flags, next)
		return m
	}
	switch k % 4 {
	case 0, 2:
		var b *layout.Bits
		var err error
		width := []int{1, 2, 3, 4, 8}[int(n)%5]
		grp := []int{0, 32, 64, 128, 256}[int(g)%5]
		if k%4 == 2 {
			sp, e := layout.NewSparse12(r, c, grp, flags&8 != 0)
			if e != nil {
				return nil
			}
			for i := range sp.Words {
				sp.Words[i] = u32()
			}
			fillMeta(&sp.GroupMeta, u16, u32)
			if short && len(sp.Words) > 0 {
				sp.Words = sp.Words[:len(sp.Words)-1]
			}
			return sp
		}
		if b, err = layout.NewBits(r, c, width, grp, flags&8 != 0); err != nil {
			return nil
		}
		for i := range b.Words {
			b.Words[i] = u32()
		}
		fillMeta(&b.GroupMeta, u16, u32)
		b.Offsets = flags&4 != 0
		if flags&1 != 0 {
			b.Perm = make([]int32, c)
			for i := range b.Perm {
				b.Perm[i] = int32(u16()) % int32(c+1)
			}
		}
		if short && len(b.Words) > 0 {
			b.Words = b.Words[:len(b.Words)-1]
		}
		return b
	case 1:
		m, err := layout.NewQ4G128(r, c)
		if err != nil {
			return nil
		}
		for i := range m.Weights {
			m.Weights[i] = next()
		}
		for i := range m.Scales {
			m.Scales[i] = math.Float32frombits(u32())
		}
		for i := range m.Zeros {
			m.Zeros[i] = next()
		}
		if short {
			m.Weights = m.Weights[:len(m.Weights)-1]
		}
		return m
	}
	types := []ggml.Type{ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0, ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K, ggml.IQ4_NL, ggml.IQ4_XS}
	m, err := ggml.New(types[int(n)%len(types)], r, c)
	if err != nil {
		return nil
	}
	for i := range m.Data {
		m.Data[i] = next()
	}
	if short {
		m.Data = m.Data[:len(m.Data)-1]
	}
	return m
}

func fillMeta(m *layout.GroupMeta, u16 func() uint16, u32 func() uint32) {
	for i := range m.Scales16 {
		m.Scales16[i], m.Zeros16[i] = layout.FP16(u16()), layout.FP16(u16())
	}
	for i := range m.Scales32 {
		m.Scales32[i], m.Zeros32[i] = math.Float32frombits(u32()), math.Float32frombits(u32())
	}
}

// FuzzLoadMul loads matrices of arbitrary stored bytes (every format
// family, see fuzzMatrix, with broken shapes, permutations, slice lengths
// and streams) on every CPU kernel set (and GPU backend, with
// $QGEMV_FUZZ_GPU=1) and multiplies them at batch 1 and 3 with float32,
// binary16 and int8 activations and exact int8 products: Load and Mul
// either succeed or return an error, no kernel reads outside the matrix
// (the assembly kernels would fault), and a canary matrix on each backend
// multiplies as before every input.
func FuzzLoadMul(f *testing.F) {
	seed := make([]byte, 64)
	binary.LittleEndian.PutUint64(seed, 0x3c003c003c003c00) // binary16 ones
	for k := uint8(0); k < 8; k++ {
		for n := uint8(0); n < 12; n++ {
			f.Add(k, n, uint16(37), uint16(300), uint16(3), uint8(0), seed)
		}
	}
	// the GGML types on whole super-blocks (256 columns), stored bytes
	// without bit 6 (so every binary16 field is finite) and a Q8_0 code of
	// -128 among them
	ramp := make([]byte, 256)
	for i := range ramp {
		ramp[i] = byte(i*7+3) &^ 0x40
	}
	for n := uint8(0); n < 12; n++ {
		f.Add(uint8(3), n, uint16(36), uint16(255), uint16(3), uint8(0), ramp)
	}
	f.Add(uint8(0), uint8(3), uint16(15), uint16(256), uint16(3), uint8(1), seed) // a broken permutation
	f.Add(uint8(1), uint8(0), uint16(17), uint16(129), uint16(0), uint8(2), seed) // a byte too few
	// Every available backend, each with a canary matrix multiplied after
	// every input: a kernel that wrote out of bounds or left a GPU context
	// faulted shows there.
	var engs []*qgemv.Engine
	var canaries []fuzzCanary
	x := synth.Vector(3*1024, 2)
	spec, err := layout.ParseFormatSpec("q4g128")
	if err != nil {
		f.Fatal(err)
	}
	cm, err := synth.Matrix(spec, 64, 256, 9)
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range fuzzBackends() {
		e, err := qgemv.Open(qgemv.WithBackend(name), qgemv.WithThreads(2))
		if err != nil {
			f.Fatal(err)
		}
		engs = append(engs, e)
		mx, err := e.Load(cm)
		if err != nil {
			f.Fatal(err)
		}
		canaries = append(canaries, newFuzzCanary(f, mx, x[:256]))
	}
	// The best CPU kernel set on one thread, plain and with huge pages
	// (where Load copies matrices, some into a layout of their own): the
	// same bits.
	pairAt := len(engs) // engs[pairAt:]: the pair, in place then huge pages
	for i := range 2 {
		e, err := qgemv.Open(qgemv.WithBackend("cpu"), qgemv.WithThreads(1), qgemv.WithHugePages(i == 1))
		if err != nil {
			f.Fatal(err)
		}
		engs = append(engs, e)
	}
	f.Cleanup(func() {
		for _, e := range engs {
			e.Close()
		}
	})
	f.Fuzz(func(t *testing.T, k, n uint8, rows, cols, g uint16, flags uint8, data []byte) {
		m := fuzzMatrix(k, n, rows, cols, g, flags, data)
		if m == nil {
			return
		}
		r, c := m.Shape()
		defer func() {
			for _, cn := range canaries {
				cn.check(t, "this input")
			}
		}()
		var res [2][]fuzzResult // the pair's, in place and in huge pages
		for ei, e := range engs {
			p := ei - pairAt // the pair's index, or negative
			mx, err := e.Load(m)
			if err != nil {
				if p >= 0 {
					res[p] = []fuzzResult{{err: err}}
				}
				continue
			}
			for _, batch := range []int{1, 3} {
				out := fuzzMuls(mx, x[:batch*c], batch)
				if p >= 0 {
					res[p] = append(res[p], out...)
				}
				xi := make([]int8, batch*c)
				for i := range xi {
					xi[i] = int8(i*5 - 60)
				}
				_ = mx.MulInt32(make([]int32, batch*r), xi, batch) // the int8 formats; an error for the others
				if err := fuzzInt8Exact(mx, m, batch); err != nil {
					t.Fatalf("%s on %s, batch %d, MulInt8: %v", m.Name(), mx.Kernel(), batch, err)
				}
			}
			mx.Close()
		}
		if len(res[0]) != len(res[1]) { // one of them failed to load
			t.Fatalf("%s: loads in place and in huge pages differ: %v, %v", m.Name(), res[0][0].err, res[1][0].err)
		}
		for j := range res[0] {
			a, b := res[0][j], res[1][j]
			if (a.err == nil) != (b.err == nil) {
				t.Fatalf("%s: result %d: error %v in place, %v in huge pages", m.Name(), j, a.err, b.err)
			}
			for i := range a.y {
				if math.Float32bits(a.y[i]) != math.Float32bits(b.y[i]) {
					t.Fatalf("%s: result %d, value %d: %g in place, %g in huge pages", m.Name(), j, i, a.y[i], b.y[i])
				}
			}
		}
	})
}

// fuzzInt8Exact multiplies mx by int8 activations spread over the whole
// range (-128 included: MulInt8 takes any int8) and returns an error if a
// result differs from m's exact A8 product (layout.A8Matrix.DotA8Exact)
// in any bit (any NaN matches any NaN). Formats without int8 activations,
// and multiplies or references that refuse the input, are skipped.
func fuzzInt8Exact(mx *qgemv.Matrix, m layout.Matrix, batch int) error {
	ref, ok := m.(layout.A8Matrix)
	if !ok || !mx.TakesA8() {
		return nil
	}
	rows, pc := mx.Rows(), mx.PaddedCols()
	xq := make([]int8, batch*pc)
	for i := range xq {
		xq[i] = int8(uint8(i*37 + 11))
	}
	xs := make([]float32, batch*pc/128)
	for i := range xs {
		xs[i] = float32(i%5+1) / 64
	}
	dst := make([]float32, batch*rows)
	if err := mx.MulInt8(dst, xq, xs, batch); err != nil {
		return nil
	}
	want := make([]float32, rows)
	for v := 0; v < batch; v++ {
		if err := ref.DotA8Exact(want, xq[v*pc:(v+1)*pc], xs[v*pc/128:(v+1)*pc/128]); err != nil {
			return nil
		}
		for r, w := range want {
			g := dst[v*rows+r]
			if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
				return fmt.Errorf("vector %d row %d: %v, want exactly %v", v, r, g, w)
			}
		}
	}
	return nil
}

// fuzzResult is one multiply's result or error.
type fuzzResult struct {
	y   []float32
	err error
}

// fuzzMuls multiplies mx by x (batch vectors) with float32, binary16 and,
// where it takes them, int8 activations.
func fuzzMuls(mx *qgemv.Matrix, x []float32, batch int) []fuzzResult {
	out := make([]fuzzResult, 3)
	for i := range out {
		out[i].y = make([]float32, batch*mx.Rows())
	}
	out[0].err = mx.Mul(out[0].y, x, batch, qgemv.A32)
	xh := make([]layout.FP16, len(x))
	for i, v := range x {
		xh[i] = layout.ToFP16(v)
	}
	out[1].err = mx.MulFP16(out[1].y, xh, batch)
	if mx.TakesA8() {
		out[2].err = mx.Mul(out[2].y, x, batch, qgemv.A8)
	}
	return out
}

// fuzzBackends lists the available backends the fuzz targets run on: the
// CPU kernel sets, and with $QGEMV_FUZZ_GPU=1 the GPU backends too (a GPU
// per input makes a run far slower).
func fuzzBackends() []string {
	var names []string
	for _, c := range qgemv.Probe().Candidates {
		if c.Available && (strings.HasPrefix(c.Name, "cpu") || os.Getenv("QGEMV_FUZZ_GPU") == "1") {
			names = append(names, c.Name)
		}
	}
	return names
}

// fuzzCanary is a matrix multiplied before and after each fuzz input on
// its engine: a kernel that wrote outside its memory, or a faulted GPU
// context, changes its result or fails it.
type fuzzCanary struct {
	m       *qgemv.Matrix
	x, want []float32
}

// newFuzzCanary multiplies m by x (float32 activations) for the result to
// compare with.
func newFuzzCanary(tb testing.TB, m *qgemv.Matrix, x []float32) fuzzCanary {
	tb.Helper()
	c := fuzzCanary{m: m, x: x, want: make([]float32, m.Rows())}
	if err := m.Mul(c.want, x, 1, qgemv.A32); err != nil {
		tb.Fatal(err)
	}
	return c
}

// check multiplies again and fails t unless every bit is as before
// (after names what ran in between).
func (c fuzzCanary) check(t *testing.T, after string) {
	t.Helper()
	got := make([]float32, len(c.want))
	if err := c.m.Mul(got, c.x, 1, qgemv.A32); err != nil {
		t.Fatalf("%s: the canary matrix fails after %s: %v", c.m.Kernel(), after, err)
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(c.want[i]) {
			t.Fatalf("%s: the canary matrix's row %d changed after %s: %g, was %g", c.m.Kernel(), i, after, got[i], c.want[i])
		}
	}
}

// corruptANS damages an entropy-coded matrix as flags say: words of the
// streams changed (bit 4), escape bytes changed (bit 5), an offset moved
// (bit 6), the last word dropped (bit 7).
func corruptANS(m *ans.Matrix, flags uint8, next func() byte) {
	if flags&16 != 0 && len(m.Words) > 0 {
		for i := 0; i < 4; i++ {
			m.Words[int(next())*int(next()+1)%len(m.Words)] ^= uint32(next()) << (next() % 25)
		}
	}
	if flags&32 != 0 && len(m.Esc) > 0 {
		m.Esc[int(next())%len(m.Esc)] ^= int8(next() | 1)
	}
	if flags&64 != 0 && len(m.Offsets) > 1 {
		i := 1 + int(next())%(len(m.Offsets)-1)
		m.Offsets[i] += uint64(next()) - 128
	}
	if flags&128 != 0 && len(m.Words) > 0 {
		m.Words = m.Words[:len(m.Words)-1]
	}
}
