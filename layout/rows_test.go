package layout

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestQuantizeRows: the row-by-row quantizers make the same matrices as
// the whole-matrix ones (Q4G128 and Bits directly, Sparse12 through
// FormatSpec.QuantizeRows' gathering), from a source that fills the
// caller's buffer; errors name the first bad row.
func TestQuantizeRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	rows, cols := 37, 300
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	copying := func(w []float32) RowSource {
		return func(r int, buf []float32) ([]float32, error) {
			copy(buf, w[r*cols:(r+1)*cols])
			return buf[:cols], nil
		}
	}
	for _, name := range []string{"q4g128", "bits4g128", "bits3g64", "bits2row", "sparse12g128"} {
		spec, err := ParseFormatSpec(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []QuantMethod{MinMax, Search} {
			opt := QuantOptions{Method: m, IntegerZero: true}
			want, _, err := spec.Quantize(w, rows, cols, opt)
			if err != nil {
				t.Fatal(err)
			}
			got, err := spec.QuantizeRows(rows, cols, opt, copying(w))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(encodeFile(t, got), encodeFile(t, want)) {
				t.Fatalf("%s %v: the row-by-row matrix differs", name, m)
			}
		}
		opt := QuantOptions{Method: MinMax, IntegerZero: true}
		bad := append([]float32(nil), w...)
		bad[9*cols+7], bad[20*cols+3] = float32(math.NaN()), float32(math.Inf(1))
		if _, err := spec.QuantizeRows(rows, cols, opt, copying(bad)); err == nil || !strings.Contains(err.Error(), "row 9, column 7") {
			t.Errorf("%s: a NaN: %v", name, err)
		}
		boom := errors.New("boom")
		failing := func(r int, buf []float32) ([]float32, error) {
			if r == 30 || r == 12 {
				return nil, boom
			}
			return copying(w)(r, buf)
		}
		if _, err := spec.QuantizeRows(rows, cols, opt, failing); !errors.Is(err, boom) || !strings.Contains(err.Error(), "row 12") {
			t.Errorf("%s: a source error: %v", name, err)
		}
		short := func(r int, buf []float32) ([]float32, error) { return buf[:cols-1], nil }
		if _, err := spec.QuantizeRows(rows, cols, opt, short); err == nil || !strings.Contains(err.Error(), "row 0 has") {
			t.Errorf("%s: a short row: %v", name, err)
		}
	}
}

// encodeFile is m's container bytes.
func encodeFile(t *testing.T, m Matrix) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := m.(io.WriterTo).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
