package gpuhost

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

// TestMMAOrderPermutes checks that MMAOrder moves every activation of the
// used vectors exactly once (tagging each value by its column and vector)
// and that the Bits block sums are the sums of the blocks.
func TestMMAOrderPermutes(t *testing.T) {
	const pc, nv, batch = 1024, 8, 3
	xp := make([]layout.FP16, nv*pc)
	for v := 0; v < batch; v++ {
		for c := 0; c < pc; c++ {
			xp[v*pc+c] = layout.FP16(1 + v*pc + c) // distinct bit patterns
		}
	}
	for _, n := range []int{0, 8, 4, 2} {
		xr, xsum, err := MMAOrder(n, xp, batch, pc, nv)
		if err != nil {
			t.Fatal(n, err)
		}
		seen := map[layout.FP16]int{}
		for i, h := range xr {
			if h != 0 {
				seen[h]++
				if v := (int(h) - 1) / pc; ((i/4)%(nv*4))/4 != v {
					t.Fatalf("n=%d: vector %d's value at %d, in the slot of vector %d", n, v, i, ((i/4)%(nv*4))/4)
				}
			}
		}
		if len(seen) != batch*pc {
			t.Fatalf("n=%d: %d distinct values placed, want %d", n, len(seen), batch*pc)
		}
		for h, k := range seen {
			if k != 1 {
				t.Fatalf("n=%d: value %d placed %d times", n, h, k)
			}
		}
		if (n == 0) != (xsum == nil) {
			t.Fatalf("n=%d: xsum %v", n, xsum != nil)
		}
		for v := 0; n != 0 && v < batch; v++ {
			for blk := 0; blk < pc/128; blk++ {
				var s float32
				for c := blk * 128; c < (blk+1)*128; c++ {
					s += xp[v*pc+c].Float32()
				}
				if xsum[v*(pc/128)+blk] != s {
					t.Fatalf("n=%d: block sum %d of vector %d = %v, want %v", n, blk, v, xsum[v*(pc/128)+blk], s)
				}
			}
		}
	}
	if _, _, err := MMAOrder(3, xp, batch, pc, nv); err == nil {
		t.Error("3-bit codes accepted")
	}
	if _, _, err := MMAOrder(4, xp[:pc], batch, pc, nv); err == nil {
		t.Error("short activations accepted")
	}
}

// TestSplitHiLo checks the hi/lo split's error bound, its scale and the
// refusal of non-finite activations.
func TestSplitHiLo(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const pc, batch = 256, 4
	x := make([]float32, batch*pc)
	scales := []float64{1, 1e-7, 3e4, 1e30}
	for v := 0; v < batch; v++ {
		for c := 0; c < pc; c++ {
			x[v*pc+c] = float32(rng.NormFloat64() * scales[v] * math.Pow(10, float64(rng.Intn(5)-2)))
		}
	}
	x[5] = 0
	xp, inv, ok := SplitHiLo(x, batch, pc, 8)
	if !ok {
		t.Fatal("finite activations refused")
	}
	for v := 0; v < batch; v++ {
		m := 0.0
		for _, f := range x[v*pc : (v+1)*pc] {
			m = math.Max(m, math.Abs(float64(f)))
		}
		if s := m / float64(inv[v]); s < 1<<14 || s >= 1<<15 {
			t.Errorf("vector %d: scaled maximum %g outside [2^14, 2^15)", v, s)
		}
		for c, f := range x[v*pc : (v+1)*pc] {
			hi, lo := xp[2*v*pc+c].Float32(), xp[(2*v+1)*pc+c].Float32()
			got := (float64(hi) + float64(lo)) * float64(inv[v])
			if d := math.Abs(got - float64(f)); d > math.Abs(float64(f))*math.Ldexp(1, -21)+m*math.Ldexp(1, -38) {
				t.Fatalf("vector %d column %d: %g split as %g + %g (error %g)", v, c, f, hi, lo, d)
			}
		}
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		x[7] = bad
		if _, _, ok := SplitHiLo(x, batch, pc, 8); ok {
			t.Errorf("%v accepted", bad)
		}
	}
	if _, _, ok := SplitHiLo(x, 5, pc, 8); ok {
		t.Error("5 vectors in 8 columns accepted")
	}
}

// TestMMAOrderIndex checks MMAOrder (built on MMAIndex, which the device
// gather uses) against the direct construction of the fragment order
// below, for every width and slot count.
func TestMMAOrderIndex(t *testing.T) {
	const pc = 2048
	for _, nv := range []int{8, 16} {
		xp := make([]layout.FP16, nv*pc)
		for i := range xp[:3*pc] {
			xp[i] = layout.FP16(1 + i)
		}
		for _, n := range []int{0, 8, 4, 2} {
			got, gs, err := MMAOrder(n, xp, 3, pc, nv)
			if err != nil {
				t.Fatal(err)
			}
			want, ws, err := mmaOrderRef(n, xp, 3, pc, nv)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) || !slices.Equal(gs, ws) {
				t.Fatalf("n=%d nv=%d: MMAOrder differs from the direct construction", n, nv)
			}
		}
	}
}

// mmaOrderRef builds the fragment order directly (the construction
// MMAIndex factors out), as the reference for TestMMAOrderIndex.
func mmaOrderRef(n int, xp []layout.FP16, batch, pc, nv int) (xr []layout.FP16, xsum []float32, err error) {
	if pc%128 != 0 || batch > nv || len(xp) != nv*pc {
		return nil, nil, fmt.Errorf("gpuhost: MMAOrder: %d columns, batch %d, %d vectors, %d values: want PCols a multiple of the chunk and nv*PCols values", pc, batch, nv, len(xp))
	}
	xr = make([]layout.FP16, len(xp))
	put4 := func(u, v, t int, src []layout.FP16, c0 int, cols [4]int) {
		o := ((u*nv+v)*4 + t) * 4
		for i, c := range cols {
			xr[o+i] = src[c0+c]
		}
	}
	if n == 0 {
		for v := 0; v < batch; v++ {
			src := xp[v*pc : (v+1)*pc]
			for gg := 0; gg < pc/128; gg++ {
				for st := 0; st < 8; st++ {
					cols := [4]int{0, 4, 1, 5}
					if st%2 == 1 {
						cols = [4]int{2, 6, 3, 7}
					}
					for t := 0; t < 4; t++ {
						put4(gg*8+st, v, t, src, gg*128+32*t+8*(st/2), cols)
					}
				}
			}
		}
		return xr, nil, nil
	}
	if n != 8 && n != 4 && n != 2 {
		return nil, nil, fmt.Errorf("gpuhost: MMAOrder: %d-bit codes have no tensor-core kernel", n)
	}
	e := 32 * (32 / n)
	if pc%e != 0 {
		return nil, nil, fmt.Errorf("gpuhost: MMAOrder: %d columns are not whole %d-column chunks", pc, e)
	}
	gpc := e / 128
	for v := 0; v < batch; v++ {
		src := xp[v*pc : (v+1)*pc]
		for k := 0; k < pc/e; k++ {
			for jj := 0; jj < 8; jj++ {
				for q := 0; q < gpc; q++ {
					planes := [4]int{4*q + 3, 4*q + 1, 4*q + 2, 4 * q}
					if n == 8 {
						planes = [4]int{3, 2, 1, 0}
					}
					for t := 0; t < 4; t++ {
						j := 8*t + jj
						put4((k*8+jj)*gpc+q, v, t, src, k*e+j, [4]int{32 * planes[0], 32 * planes[1], 32 * planes[2], 32 * planes[3]})
					}
				}
			}
		}
	}
	xsum = make([]float32, nv*(pc/128))
	for v := 0; v < batch; v++ {
		for c, h := range xp[v*pc : (v+1)*pc] {
			xsum[v*(pc/128)+c/128] += h.Float32()
		}
	}
	return xr, xsum, nil
}

// TestFP16Fast: fastFP16 and fastF32 equal layout's conversions wherever
// they report ok, and do so for every normal binary16 result (ties,
// carries into the exponent and to infinity included), on every binary16
// and on float32s across every exponent.
func TestFP16Fast(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		x := layout.FP16(h)
		a, ok := fastF32(x)
		if e := h >> 10 & 0x1f; ok != (e != 0 && e != 0x1f) {
			t.Fatalf("fastF32(%#04x): ok %v", h, ok)
		}
		if b := x.Float32(); ok && math.Float32bits(a) != math.Float32bits(b) {
			t.Fatalf("fastF32(%#04x) = %v, want %v", h, a, b)
		}
	}
	rng := rand.New(rand.NewSource(3))
	check := func(bits uint32) {
		f := math.Float32frombits(bits)
		got, ok := fastFP16(f)
		if exp := bits >> 23 & 0xff; ok != (exp >= 113 && exp <= 142) {
			t.Fatalf("fastFP16(%#08x): ok %v", bits, ok)
		}
		if want := layout.ToFP16(f); ok && got != want {
			t.Fatalf("fastFP16(%#08x) = %#04x, want %#04x", bits, got, want)
		}
	}
	for exp := uint32(0); exp < 256; exp++ {
		for _, frac := range []uint32{0, 1, 0x1000, 0x1fff, 0x2000, 0x3000, 0x7fe000, 0x7ff000, 0x7fefff, 0x7fffff} {
			check(exp<<23 | frac)
			check(1<<31 | exp<<23 | frac)
		}
		for range 2000 {
			check(exp<<23 | rng.Uint32()&0x807fffff)
		}
	}
}

// TestA8FragOrder checks the int8 fragment order against a model of the
// kernel's unpacking (cuda/kernels.cu a8Frag, written again here from
// its description): every position's code is the code of the column the
// order names, each block's positions are a permutation of its 128
// columns, and widths without a kernel are errors.
func TestA8FragOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(56))
	bp := func(a, b uint32, sel uint32) uint32 { // __byte_perm
		x := uint64(b)<<32 | uint64(a)
		var r uint32
		for i := range 4 {
			r |= uint32(x>>(8*((sel>>(4*i))&7))&0xFF) << (8 * i)
		}
		return r
	}
	for _, n := range []int{0, 8, 4, 2} {
		idx, err := A8FragOrder(n)
		if err != nil {
			t.Fatal(err)
		}
		e := len(idx)
		words := make([]uint32, 32) // a Bits chunk, or a Q4G128 group's 64 bytes as 16 words
		for i := range words {
			words[i] = rng.Uint32()
		}
		code := func(c int) uint32 {
			if n == 0 {
				return words[c/8] >> (4 * (c % 8)) & 15
			}
			w, i := c%32, c/32
			return words[w] >> (32 - n*(i+1)) & (1<<n - 1)
		}
		frag := func(tl, q, s, half int) uint32 {
			lw := words[8*tl:][:8]
			const m4 = 0x0F0F0F0F
			switch n {
			case 0:
				v := words[4*tl+s]
				if half == 1 {
					return v >> 4 & m4
				}
				return v & m4
			case 8:
				return lw[2*s+half]
			case 4:
				v := lw[2*s+half]
				sel := uint32(0x7632)
				if q == 1 {
					sel = 0x5410
				}
				return bp(v&m4, v>>4&m4, sel)
			}
			h, f := s/2, 2*(s%2)+half
			w := lw[4*h:][:4]
			sel := uint32(0x6273)
			if q >= 2 {
				sel = 0x4051
			}
			a, c := bp(w[0], w[1], sel), bp(w[2], w[3], sel)
			sel = 0x5410
			if q&1 == 1 {
				sel = 0x7632
			}
			return bp(a, c, sel) >> (2 * f) & 0x03030303
		}
		for q := range e / 128 {
			seen := make([]bool, 128)
			for tl := range 4 {
				for s := range 4 {
					for half := range 2 {
						a := frag(tl, q, s, half)
						for bb := range 4 {
							c := int(idx[q*128+32*tl+8*s+4*half+bb])
							if c < q*128 || c >= q*128+128 || seen[c-q*128] {
								t.Fatalf("n=%d: position %d names column %d: outside block %d or twice", n, q*128+32*tl+8*s+4*half+bb, c, q)
							}
							seen[c-q*128] = true
							if got, want := a>>(8*bb)&0xFF, code(c); got != want {
								t.Fatalf("n=%d block %d lane %d k-step %d half %d byte %d: code %d, column %d holds %d", n, q, tl, s, half, bb, got, c, want)
							}
						}
					}
				}
			}
		}
	}
	for _, n := range []int{1, 3, 5, 16} {
		if _, err := A8FragOrder(n); err == nil {
			t.Errorf("A8FragOrder(%d): no error", n)
		}
	}
}
