package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
)

// TestInt8AndANS checks the int8 baseline (every kernel set) and the ANS
// multiply (both layouts) against the exact reference on tails.
func TestInt8AndANS(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, sh := range [][2]int{{1, 1}, {5, 63}, {37, 200}, {64, 256}, {70, 1280}} {
		rows, cols := sh[0], sh[1]
		w := matvans.Draw(rng, rows*cols, 20)
		if rows%2 == 1 { // every int8 value: escapes (and, for stripes, more than the kernel's buffer)
			for i := range w {
				w[i] = int8(rng.IntN(256) - 128)
			}
		}
		v := matvans.Draw(rng, cols, 40)
		want := make([]int32, rows)
		matvans.Dot(w, rows, cols, v, want)
		for _, isa := range supportedSets() {
			be, err := New(Config{ISA: isa, Threads: 3})
			if err != nil {
				t.Fatal(err)
			}
			m, err := be.LoadInt8(w, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			y := make([]int32, rows)
			if err := m.Mul(v, y); err != nil {
				t.Fatal(err)
			}
			for r := range y {
				if y[r] != want[r] {
					t.Fatalf("%s %dx%d: row %d = %d, want %d", m.Kernel(), rows, cols, r, y[r], want[r])
				}
			}
			for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
				if ans.CheckShape(l, rows, cols) != nil {
					continue
				}
				a, err := ans.Encode(w, rows, cols, l)
				if err != nil {
					t.Fatal(err)
				}
				clear(y)
				if err := be.MulANS(a, v, y); err != nil {
					t.Fatal(err)
				}
				for r := range y {
					if y[r] != want[r] {
						t.Fatal(fmt.Sprintf("ANS %s %dx%d: row %d = %d, want %d", l, rows, cols, r, y[r], want[r]))
					}
				}
			}
		}
	}
}
