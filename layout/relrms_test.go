package layout

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestRelRMSErrorRows: the row-by-row error is RelRMSError's value bit
// for bit, and a failing or short row is an error naming it.
func TestRelRMSErrorRows(t *testing.T) {
	const rows, cols = 7, 300
	a, b := make([]float32, rows*cols), make([]float32, rows*cols)
	for i := range a {
		b[i] = float32(math.Sin(float64(i)*0.37)) * float32(1+i%11)
		a[i] = b[i] + float32(math.Cos(float64(i)*1.3))*1e-3
	}
	want := RelRMSError(a, b)
	got, err := RelRMSErrorRows(a, rows, cols, func(r int, buf []float32) ([]float32, error) {
		return append(buf[:0], b[r*cols:(r+1)*cols]...), nil
	})
	if err != nil || math.Float64bits(got) != math.Float64bits(want) {
		t.Errorf("RelRMSErrorRows = %v, %v; RelRMSError = %v", got, err, want)
	}
	if _, err := RelRMSErrorRows(a, rows, cols, func(r int, buf []float32) ([]float32, error) {
		if r == 4 {
			return nil, errors.New("truncated")
		}
		return b[r*cols : (r+1)*cols], nil
	}); err == nil || !strings.Contains(err.Error(), "row 4: truncated") {
		t.Errorf("failing row: %v", err)
	}
	if _, err := RelRMSErrorRows(a, rows, cols, func(r int, buf []float32) ([]float32, error) { return b[:cols-1], nil }); err == nil || !strings.Contains(err.Error(), "row 0 has 299 values") {
		t.Errorf("short row: %v", err)
	}
	if _, err := RelRMSErrorRows(a[1:], rows, cols, SliceRows(b, cols)); err == nil {
		t.Error("short a: no error")
	}
}
