package layout

import (
	"math/rand/v2"
	"testing"
)

// TestPackRow: PackRow stores what SetQ stores, for every width and
// ragged column counts, and zeros the padding.
func TestPackRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range BitWidths {
		for _, cols := range []int{1, 31, 128, 300, 1000, 4096} {
			want, err := NewBits(3, cols, n, 0, false)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := NewBits(3, cols, n, 0, false)
			for i := range got.Words {
				got.Words[i] = rng.Uint32() // PackRow overwrites every word of the row
			}
			codes := make([]uint8, cols)
			for r := 0; r < 3; r++ {
				for c := range codes {
					codes[c] = uint8(rng.Uint32())
					want.SetQ(r, c, uint32(codes[c])&(1<<n-1))
				}
				if err := got.PackRow(r, codes); err != nil {
					t.Fatal(err)
				}
			}
			wpr := got.WordsPerRow()
			for i := 0; i < 3*wpr; i++ {
				if got.Words[i] != want.Words[i] {
					t.Fatalf("%d bits, %d columns: word %d is %#x, want %#x", n, cols, i, got.Words[i], want.Words[i])
				}
			}
			if err := got.PackRow(0, codes[:cols-1]); err == nil {
				t.Fatal("short row: no error")
			}
			if err := got.PackRow(got.PRows, codes); err == nil {
				t.Fatal("row past the padding: no error")
			}
		}
	}
}
