package layout

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSparse12(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const rows, cols = 20, 700
	for _, dist := range []struct {
		name string
		w    []float32
	}{{"gaussian", gaussian(rng, rows*cols)}, {"student-t3", studentT(rng, rows*cols)}} {
		for _, g := range []int{32, 128, 0} {
			m, dropped, err := QuantizeSparse12(dist.w, rows, cols, g, QuantOptions{Method: Search})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			d := m.Dequantize()
			// Exactly one of each pair survives, the larger in magnitude.
			var pruned []float32
			for r := 0; r < rows; r++ {
				for c := 0; c+1 < cols; c += 2 {
					a, b := dist.w[r*cols+c], dist.w[r*cols+c+1]
					if d[r*cols+c] != 0 && d[r*cols+c+1] != 0 {
						t.Fatalf("row %d pair %d: both weights nonzero", r, c/2)
					}
					if math.Abs(float64(b)) > math.Abs(float64(a)) {
						a = 0
					} else {
						b = 0
					}
					pruned = append(pruned, a, b)
				}
				if cols%2 == 1 {
					pruned = append(pruned, dist.w[r*cols+cols-1])
				}
			}
			// Dropped energy matches the pruned matrix.
			var e, tot float64
			for i, v := range dist.w {
				tot += float64(v) * float64(v)
				dd := float64(v) - float64(pruned[i])
				e += dd * dd
			}
			if math.Abs(e/tot-dropped) > 1e-9 {
				t.Errorf("reported dropped energy %v, want %v", dropped, e/tot)
			}
			t.Logf("%s Sparse12 g=%d: dropped energy %.4f, 7-bit error vs pruned %.4f, vs dense %.4f",
				dist.name, g, dropped, RelRMSError(d, pruned), RelRMSError(d, dist.w))
			// 7 bits over a whole heavy-tailed row reach about 0.025.
			if q := RelRMSError(d, pruned); q > 0.03 {
				t.Errorf("7-bit quantization error %.4f too large", q)
			}
		}
	}
	// Pair packing follows the 8-bit universal layout.
	m, _ := NewSparse12(1, 300, 64, false)
	m.SetPair(0, 131, 1, 77)
	w := 1*32 + 3 // pair 131: chunk 1, o = 3: i = 0 (top byte), t = 3
	if pos, q := m.Pair(0, 131); pos != 1 || q != 77 {
		t.Fatalf("pair 131 = %d, %d", pos, q)
	}
	if m.Words[w]>>24 != 1<<7|77 {
		t.Fatalf("pair 131 not in word %d top byte: %08x", w, m.Words[w])
	}
	if _, _, err := QuantizeSparse12(make([]float32, 4), 2, 2, 100, QuantOptions{}); err == nil {
		t.Error("group 100 accepted")
	}
}

// TestSparse12PaddingOutOfFit: the padding pairs of a group (columns past
// Cols) take no part in its fit and stay 0, as the type documents (found
// by review: their zeros widened a [5, 6] group's range to [0, 6], 7x the
// RMS error of the same values in full groups).
func TestSparse12PaddingOutOfFit(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	for _, g := range []int{0, 128} {
		w := make([]float32, 256)
		for i := range w {
			w[i] = 5 + float32(rng.Float64())
		}
		full, _, err := QuantizeSparse12(w, 1, 256, g, QuantOptions{Method: Search})
		if err != nil {
			t.Fatal(err)
		}
		part, _, err := QuantizeSparse12(w[:100], 1, 100, g, QuantOptions{Method: Search})
		if err != nil {
			t.Fatal(err)
		}
		kept := func(m *Sparse12, cols int) float64 { // relative squared error over kept weights
			d := m.Dequantize()
			var num, den float64
			for c := 0; c < cols; c++ {
				if d[c] != 0 {
					e := float64(d[c] - w[c])
					num, den = num+e*e, den+float64(w[c])*float64(w[c])
				}
			}
			return num / den
		}
		ef, ep := kept(full, 100), kept(part, 100)
		if ep > 2*ef+1e-9 {
			t.Errorf("g %d: 100 columns: kept-weight error %.3g, against %.3g in full groups", g, ep, ef)
		}
		for p := 50; p < part.PCols/2; p++ {
			if pos, q := part.Pair(0, p); pos != 0 || q != 0 {
				t.Fatalf("g %d: padding pair %d = (%d, %d), want 0", g, p, pos, q)
			}
		}
	}
}
