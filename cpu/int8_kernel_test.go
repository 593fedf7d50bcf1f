package cpu

import (
	"math/rand/v2"
	"testing"
)

// TestInt8Tails checks Int8Matrix.Mul on every kernel set against dotInt8
// for row and column counts around the kernels' tiles (4 rows; 32 or 64
// columns), with every int8 value (-128 in both operands included) and
// guard values around the output.
func TestInt8Tails(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	const guard = 8
	for _, rows := range []int{1, 3, 4, 5, 7, 8, 9, 66} {
		for _, cols := range []int{1, 31, 32, 33, 63, 64, 65, 96, 127, 130, 300} {
			w := make([]int8, rows*cols)
			v := make([]int8, cols)
			for i := range w {
				w[i] = int8(rng.IntN(256) - 128)
			}
			for i := range v {
				v[i] = int8(rng.IntN(256) - 128)
			}
			if rows*cols > 40 { // the extreme products: -128 * -128 in every pair
				for i := 0; i < cols/2; i++ {
					w[i], v[i] = -128, -128
				}
			}
			want := make([]int32, rows)
			for r := range want {
				want[r] = dotInt8(w[r*cols:(r+1)*cols], v)
			}
			for _, isa := range supportedSets() {
				be, err := New(Config{ISA: isa, Threads: 3})
				if err != nil {
					t.Fatal(err)
				}
				m, err := be.LoadInt8(w, rows, cols)
				if err != nil {
					t.Fatal(err)
				}
				buf := make([]int32, rows+2*guard)
				for i := range buf {
					buf[i] = 0x5a5a5a5a
				}
				if err := m.Mul(v, buf[guard:guard+rows]); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < guard; i++ {
					if buf[i] != 0x5a5a5a5a || buf[guard+rows+i] != 0x5a5a5a5a {
						t.Fatalf("%s %dx%d: write outside y", m.Kernel(), rows, cols)
					}
				}
				for r, got := range buf[guard : guard+rows] {
					if got != want[r] {
						t.Fatalf("%s %dx%d: row %d = %d, want %d", m.Kernel(), rows, cols, r, got, want[r])
					}
				}
			}
		}
	}
}
