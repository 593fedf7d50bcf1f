package ans

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

func gaussian(rows, cols int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	return w
}

// TestBitsRoundTrip: every width and group, with offsets and an act-order
// permutation, on tail shapes: the decoded words are the plain twin's,
// the .qgv file decodes to the same matrix, and the format's spec and
// name round-trip.
func TestBitsRoundTrip(t *testing.T) {
	for _, n := range BitsWidths {
		for _, g := range []int{32, 128, 0} {
			for _, sh := range [][2]int{{1, 1}, {33, 700}, {70, 300}} {
				b, err := layout.QuantizeBits(gaussian(sh[0], sh[1], uint64(n*g+sh[0])), sh[0], sh[1], n, g, layout.QuantOptions{Method: layout.Search, IntegerZero: true})
				if err != nil {
					t.Fatal(err)
				}
				if n == 4 && g == 32 {
					b.Perm = make([]int32, sh[1])
					for i, p := range rand.New(rand.NewPCG(1, 2)).Perm(sh[1]) {
						b.Perm[i] = int32(p)
					}
				}
				m, err := EncodeBits(b)
				if err != nil {
					t.Fatalf("%s %v: %v", b.Name(), sh, err)
				}
				p, err := m.Plain()
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(p.Words, b.Words) || !slices.Equal(p.Perm, b.Perm) {
					t.Fatalf("%s %v: decoded words differ from the plain twin's", b.Name(), sh)
				}
				var buf bytes.Buffer
				if _, err := m.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				f, err := layout.ReadFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
				if err != nil {
					t.Fatal(err)
				}
				d, err := layout.Decode(f)
				if err != nil {
					t.Fatal(err)
				}
				dm, ok := d.(*Bits)
				if !ok || dm.Name() != m.Name() {
					t.Fatalf("decoded %T %s, want %s", d, d.Name(), m.Name())
				}
				p2, err := dm.Plain()
				if err != nil || !slices.Equal(p2.Words, b.Words) || !slices.Equal(p2.Scales16, b.Scales16) || !slices.Equal(p2.Perm, b.Perm) {
					t.Fatalf("%s: the file decodes to another matrix (%v)", m.Name(), err)
				}
				spec, err := layout.ParseFormatSpec(m.Spec().String())
				if err != nil || spec != m.Spec() {
					t.Fatalf("%s: spec %v round-trips to %v, %v", m.Name(), m.Spec(), spec, err)
				}
			}
		}
	}
}

// studentT returns rows*cols draws of Student's t with 3 degrees of
// freedom: heavy-tailed, as LLM weights are.
func studentT(rows, cols int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 4))
	w := make([]float32, rows*cols)
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

// TestBitsCompression: heavy-tailed weights quantized to 4 and 2 bits
// stream fewer bytes coded than plain. 8-bit codes do not compress (their
// entropy, above 7 bits, is out of reach of a 128-symbol model with 7-bit
// probabilities): logged only.
func TestBitsCompression(t *testing.T) {
	w := studentT(256, 4096, 7)
	for _, n := range []int{8, 4, 2} {
		b, err := layout.QuantizeBits(w, 256, 4096, n, 128, layout.QuantOptions{Method: layout.MinMax, IntegerZero: true})
		if err != nil {
			t.Fatal(err)
		}
		m, err := EncodeBits(b)
		if err != nil {
			t.Fatal(err)
		}
		plain, coded := b.StreamBytes(), m.StreamBytes()
		t.Logf("%d-bit codes: %.3f bits/weight coded, %.3f plain", n, 8*float64(coded)/(256*4096), 8*float64(plain)/(256*4096))
		if n < 8 && coded >= plain {
			t.Errorf("%d-bit: coded %d bytes, plain %d", n, coded, plain)
		}
	}
}

// TestBitsBadInput: widths the coder refuses, a code of the wrong shape,
// words left in the header, and corrupted streams are errors.
func TestBitsBadInput(t *testing.T) {
	b3, err := layout.RandomBits(16, 640, 3, 128, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EncodeBits(b3); err == nil {
		t.Error("3-bit codes encoded")
	}
	if _, err := layout.ParseFormatSpec("ans3g128"); err == nil {
		t.Error("ans3g128 parsed")
	}
	m, err := RandomBits(40, 300, 4, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := *m
	bad.Code = &Matrix{}
	if bad.Validate() == nil {
		t.Error("empty code accepted")
	}
	bad = *m
	bad.Header.Words = make([]uint32, 10)
	if bad.Validate() == nil {
		t.Error("words in the header accepted")
	}
	other, err := RandomBits(80, 300, 4, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	bad = *m
	bad.Code = other.Code
	if bad.Validate() == nil {
		t.Error("a code of another shape accepted")
	}
	// Flip bits of the coded streams: each flip is an error wrapping
	// ErrCorrupt or decodes to some words, never a panic.
	rng := rand.New(rand.NewPCG(5, 5))
	corrupt := 0
	for i := 0; i < 200; i++ {
		c := *m.Code
		c.Words = slices.Clone(c.Words)
		c.Words[rng.IntN(len(c.Words))] ^= 1 << rng.IntN(32)
		cm := &Bits{Header: m.Header, Code: &c}
		if _, err := cm.Plain(); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip %d: %v does not wrap ErrCorrupt", i, err)
			}
			corrupt++
		}
	}
	if corrupt < 60 { // see cpu.TestANSBitsDecoders: flips between frequency-1 symbols go unseen
		t.Errorf("only %d of 200 single-bit flips detected", corrupt)
	}
	// A truncated or altered file is an error, never a panic.
	var buf bytes.Buffer
	if _, err := m.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	for cut := 0; cut < len(data); cut += 97 {
		if f, err := layout.ReadFile(bytes.NewReader(data[:cut]), int64(cut)); err == nil {
			if _, err := layout.Decode(f); err == nil {
				t.Fatalf("file cut at %d of %d bytes decoded", cut, len(data))
			}
		}
	}
}
