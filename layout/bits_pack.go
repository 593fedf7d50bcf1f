package layout

import "fmt"

// PackRow stores the codes of row r, columns 0..Cols-1 (each masked to N
// bits), and zeros in its padding columns: what SetQ does column by
// column, a word at a time, for importers that convert whole rows.
func (b *Bits) PackRow(r int, codes []uint8) error {
	if r < 0 || r >= b.PRows || len(codes) != b.Cols {
		return fmt.Errorf("layout: %s: PackRow(%d) with %d codes, want a row below %d and %d codes", b.Name(), r, len(codes), b.PRows, b.Cols)
	}
	n := b.N
	step := BitsStep(n)
	e, wpr, mask := 32*step, b.WordsPerRow(), uint32(1)<<n-1
	row := b.Words[r*wpr : (r+1)*wpr]
	for k := 0; k < wpr/32; k++ {
		base := k * e
		if base+e <= len(codes) { // a whole chunk of true columns
			chunk := codes[base : base+e]
			for t := 0; t < 32; t++ {
				var w uint32
				for i := 0; i < step; i++ {
					w |= uint32(chunk[i*32+t]) & mask << (32 - n*(i+1))
				}
				row[k*32+t] = w
			}
			continue
		}
		for t := 0; t < 32; t++ {
			var w uint32
			for i := 0; i < step; i++ {
				if c := base + i*32 + t; c < len(codes) {
					w |= uint32(codes[c]) & mask << (32 - n*(i+1))
				}
			}
			row[k*32+t] = w
		}
	}
	return nil
}
