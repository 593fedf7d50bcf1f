package layout

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzQuantize runs the float quantizers (Q4G128 with both methods, Bits
// of every width, group and option, Sparse12) on weights and shapes drawn
// from the input: NaN, infinities, subnormals, huge and tiny values, rows
// and columns that do not match the data. Each returns an error or a
// matrix that validates and whose rows sum to finite values, and never
// panics.
func FuzzQuantize(f *testing.F) {
	seed := make([]byte, 4*64)
	for i := 0; i < 64; i++ {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(float32(i-30)/7))
	}
	f.Add(uint8(0), uint8(3), uint16(2), uint16(32), uint8(0), seed)
	f.Add(uint8(1), uint8(2), uint16(4), uint16(16), uint8(3), seed)
	f.Add(uint8(2), uint8(0), uint16(1), uint16(64), uint8(1), seed)
	f.Fuzz(func(t *testing.T, kind, nsel uint8, rows, cols uint16, flags uint8, data []byte) {
		r, c := int(rows)%40, int(cols)%300
		w := make([]float32, max(0, r*c+int(flags%3)-1)) // one value short, exact, or one long
		for i := range w {
			if len(data) >= 4 {
				o := 4 * (i % (len(data) / 4))
				w[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[o:]))
			}
		}
		opt := QuantOptions{Method: QuantMethod(flags >> 2 % 3), IntegerZero: flags&32 != 0, FP32Meta: flags&64 != 0}
		var m Matrix
		var err error
		switch kind % 3 {
		case 0:
			m, err = QuantizeQ4G128(w, r, c, QuantMethod(flags>>2%3))
		case 1:
			n := []int{1, 2, 3, 4, 8}[int(nsel)%5]
			g := []int{0, 32, 64, 128, 256}[int(nsel/5)%5]
			m, err = QuantizeBits(w, r, c, n, g, opt)
		default:
			g := []int{0, 32, 64, 128, 256}[int(nsel)%5]
			m, _, err = QuantizeSparse12(w, r, c, g, opt)
		}
		if err != nil {
			return
		}
		if len(w) != r*c {
			t.Fatalf("%s: %d weights for %dx%d accepted", m.Name(), len(w), r, c)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("%s: the quantizer's matrix does not validate: %v", m.Name(), err)
		}
		ones, out := make([]float32, c), make([]float64, r)
		for i := range ones {
			ones[i] = 1
		}
		if err := m.DotRef(out, ones); err != nil {
			t.Fatalf("%s: DotRef: %v", m.Name(), err)
		}
		for i, v := range out {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%s: row %d sums to %v", m.Name(), i, v)
			}
		}
	})
}
