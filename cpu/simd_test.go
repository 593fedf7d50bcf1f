package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// shifted returns a copy of m whose slices start off bytes (weights and
// zeros) or off%16 elements (scales) into larger buffers, so kernels see
// every alignment.
func shifted(m *layout.Q4G128, off int) *layout.Q4G128 {
	c := *m
	w := make([]byte, len(m.Weights)+off)
	c.Weights = w[off:]
	copy(c.Weights, m.Weights)
	z := make([]byte, len(m.Zeros)+off)
	c.Zeros = z[off:]
	copy(c.Zeros, m.Zeros)
	s := make([]float32, len(m.Scales)+16)
	c.Scales = s[off%16 : off%16+len(m.Scales)]
	copy(c.Scales, m.Scales)
	return &c
}

// TestSliceOffsets runs every kernel set with the matrix, activation and
// output slices starting at every offset 0..63 bytes (0..15 elements for
// float32), against the exact (A8) and float64 (A32) references.
func TestSliceOffsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	base := randMatrix(t, rng, 129, 300)
	const batch = 3
	for _, isa := range supportedSets() {
		be, err := New(Config{ISA: isa, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < 64; off++ {
			mx, err := be.Load(shifted(base, off))
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s/offset%d", isa, off)
			checkA32(t, name, mx, rng, batch)
			checkA8(t, name, mx, rng, batch)
		}
	}
}

// spikeVec sets about one value in eight of x to zero and multiplies
// another eighth by 1000: exact zeros and large values for the fuzz tests.
func spikeVec(rng *rand.Rand, x []float32) {
	for i := range x {
		switch rng.IntN(8) {
		case 0:
			x[i] = 0
		case 1:
			x[i] *= 1000
		}
	}
}

// FuzzKernels runs the generic and every assembly kernel set this CPU
// supports on the same random matrix and activations in one process: W4A8
// results must be identical bit for bit, W4A32 results within the bound of
// the float64 reference.
func FuzzKernels(f *testing.F) {
	f.Add(uint64(1), uint16(1), uint16(1), uint8(1))
	f.Add(uint64(2), uint16(17), uint16(129), uint8(3))
	f.Add(uint64(3), uint16(300), uint16(260), uint8(16))
	f.Add(uint64(4), uint16(128), uint16(512), uint8(9))
	f.Fuzz(func(t *testing.T, seed uint64, rows16, cols16 uint16, batch8 uint8) {
		rows := 1 + int(rows16)%300
		cols := 1 + int(cols16)%700
		batch := 1 + int(batch8)%16
		m, err := synth.Q4G128(rows, cols, seed)
		if err != nil {
			t.Fatal(err)
		}
		x := synth.Vector(batch*cols, seed^0xabcdef)
		spikeVec(rand.New(rand.NewPCG(seed, 9)), x)
		var want []float32
		ref := make([]float64, rows)
		mag := make([]float64, rows)
		for _, isa := range supportedSets() {
			be, err := New(Config{ISA: isa, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			mx, err := be.Load(m)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, batch*rows)
			if err := mx.MulA8(got, x, batch); err != nil {
				t.Fatal(err)
			}
			if want == nil {
				want = slices.Clone(got) // got is reused for A32 below
			} else {
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s A8 %dx%d batch %d: element %d = %v, %s gave %v", isa, rows, cols, batch, i, got[i], supportedSets()[0], want[i])
					}
				}
			}
			if err := mx.MulF32(got, x, batch); err != nil {
				t.Fatal(err)
			}
			for b := 0; b < batch; b++ {
				xb := x[b*cols : (b+1)*cols]
				_ = m.DotRef(ref, xb)
				_ = m.DotRefMag(mag, xb)
				for r := range ref {
					g := float64(got[b*rows+r])
					if !(math.Abs(g-ref[r]) <= layout.A32Tolerance*mag[r]) {
						t.Fatalf("%s A32 %dx%d batch %d: vector %d row %d = %v, want %v (bound %v)", isa, rows, cols, batch, b, r, g, ref[r], layout.A32Tolerance*mag[r])
					}
				}
			}
		}
	})
}

// TestToFP16s checks layout.ToFP16s (this package installs the F16C
// rounding where the CPU has it) against layout.ToFP16 for float32
// values around every binary16 rounding boundary (each pattern of the
// upper 19 bits with the lower 13 just below, at, and just above a half
// step, and zero and all ones), random patterns, at every length tail and
// slice offset; NaN stays NaN. A short dst takes what fits, as copy.
func TestToFP16s(t *testing.T) {
	short := make([]layout.FP16, 40)
	if n := layout.ToFP16s(short, make([]float32, 100)); n != 40 {
		t.Fatalf("ToFP16s into 40 of 100 values converted %d", n)
	}
	var src []float32
	for hi := uint32(0); hi < 1<<19; hi++ {
		for _, lo := range []uint32{0, 0x0fff, 0x1000, 0x1001, 0x1fff} {
			src = append(src, math.Float32frombits(hi<<13|lo))
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 1<<16; i++ {
		src = append(src, math.Float32frombits(r.Uint32()))
	}
	dst := make([]layout.FP16, len(src)+1)
	for _, off := range []int{0, 1, 7} {
		for _, n := range []int{0, 1, 31, 32, 33, 95, len(src) - off} {
			const guard = layout.FP16(0x1234)
			for i := range dst {
				dst[i] = guard
			}
			if got := layout.ToFP16s(dst[off:], src[off:off+n]); got != n {
				t.Fatalf("offset %d length %d: ToFP16s converted %d values", off, n, got)
			}
			for i, got := range dst {
				if i < off || i >= off+n {
					if got != guard {
						t.Fatalf("offset %d length %d: wrote dst[%d] outside the range", off, n, i)
					}
					continue
				}
				want := layout.ToFP16(src[i])
				if math.IsNaN(float64(want.Float32())) {
					if !math.IsNaN(float64(got.Float32())) {
						t.Fatalf("ToFP16s(%#08x) = %#04x, want NaN", math.Float32bits(src[i]), uint16(got))
					}
				} else if got != want {
					t.Fatalf("offset %d length %d: ToFP16s(%#08x) = %#04x, want %#04x", off, n, math.Float32bits(src[i]), uint16(got), uint16(want))
				}
			}
		}
	}
}

// TestWidenF16 checks layout.FromFP16s (this package installs the F16C
// widening where the CPU has it, and its binary16 paths call it) against
// layout.FP16.Float32 for every binary16 value, at every length tail and
// slice offset; a short dst takes what fits, as copy.
func TestWidenF16(t *testing.T) {
	if n := layout.FromFP16s(make([]float32, 40), make([]layout.FP16, 100)); n != 40 {
		t.Fatalf("FromFP16s into 40 of 100 values converted %d", n)
	}
	src := make([]layout.FP16, 1<<16)
	for i := range src {
		src[i] = layout.FP16(i)
	}
	dst := make([]float32, len(src)+1)
	for _, off := range []int{0, 1, 7} {
		for _, n := range []int{0, 1, 31, 32, 33, 95, len(src) - off} {
			const guard = float32(-12345)
			for i := range dst {
				dst[i] = guard
			}
			if got := layout.FromFP16s(dst[off:], src[off:off+n]); got != n {
				t.Fatalf("offset %d length %d: FromFP16s converted %d values", off, n, got)
			}
			for i := 0; i < len(dst); i++ {
				got := dst[i]
				if i < off || i >= off+n {
					if got != guard {
						t.Fatalf("offset %d length %d: wrote dst[%d] outside the range", off, n, i)
					}
					continue
				}
				want := src[i].Float32()
				if math.IsNaN(float64(want)) {
					if !math.IsNaN(float64(got)) {
						t.Fatalf("widen(%#04x) = %v, want NaN", uint16(src[i]), got)
					}
				} else if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("offset %d length %d: widen(%#04x) = %v, want %v", off, n, uint16(src[i]), got, want)
				}
			}
		}
	}
}
