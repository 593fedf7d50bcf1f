package layout

import (
	"math"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/internal/sysmem"
)

// TestQuantizeBadSources: a nil source, rows past a SliceRows matrix and
// a source that panics are errors from the quantizers, whose goroutines
// call sources where a caller's recover cannot reach (each ended the
// process before).
func TestQuantizeBadSources(t *testing.T) {
	panics := func(int, []float32) ([]float32, error) { panic("boom") }
	for name, src := range map[string]RowSource{
		"nil": nil, "short slice": SliceRows(make([]float32, 5), 4), "panicking": panics,
	} {
		if _, err := QuantizeQ4G128Rows(2, 4, MinMax, src); err == nil {
			t.Errorf("QuantizeQ4G128Rows, %s source: no error", name)
		}
		if _, err := QuantizeBitsRows(2, 4, 4, 32, QuantOptions{}, src); err == nil {
			t.Errorf("QuantizeBitsRows, %s source: no error", name)
		}
		if _, err := (FormatSpec{Format: FormatSparse12, G: 128}).QuantizeRows(2, 4, QuantOptions{}, src); err == nil {
			t.Errorf("Sparse12 QuantizeRows, %s source: no error", name)
		}
		if _, err := RelRMSErrorRows(make([]float32, 8), 2, 4, src); err == nil {
			t.Errorf("RelRMSErrorRows, %s source: no error", name)
		}
	}
	if _, err := QuantizeQ4G128Rows(2, 4, MinMax, panics); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a panicking source: %v, want its panic in the error", err)
	}
	// rows*cols wrapping to len(a) passed the length check
	if _, err := RelRMSErrorRows(nil, 1<<24, 1<<40, SliceRows(nil, 1)); err == nil {
		t.Error("RelRMSErrorRows of 2^24 x 2^40: no error")
	}
	if v := RelRMSError([]float32{1}, []float32{1, 2}); !math.IsNaN(v) {
		t.Errorf("RelRMSError of different lengths: %v, want NaN", v)
	}
}

// TestHugeShapes: shapes CheckDims allows whose buffers exceed the
// machine's memory are errors before the allocation (the runtime's fatal
// out-of-memory error ended the process before).
func TestHugeShapes(t *testing.T) {
	if tot := sysmem.Total(); tot == 0 || tot > 1<<39 {
		t.Skipf("memory %d bytes: unknown, or enough for 2^40 elements", tot)
	}
	const r, c = 1 << 24, 1 << 16
	for name, f := range map[string]func() error{
		"NewQ4G128":    func() error { _, err := NewQ4G128(r, c); return err },
		"RandomQ4G128": func() error { _, err := RandomQ4G128(r, c, 1); return err },
		"NewBits":      func() error { _, err := NewBits(r, c, 8, 128, true); return err },
		"QuantizeBitsRows": func() error {
			_, err := QuantizeBitsRows(r, c, 4, 32, QuantOptions{}, SliceRows(nil, c))
			return err
		},
		"NewSparse12": func() error { _, err := NewSparse12(r, c, 128, true); return err },
		"RandomInt8":  func() error { _, err := RandomInt8(1<<23, MaxInt8Cols, 1); return err },
		"Sparse12 QuantizeRows": func() error {
			_, err := FormatSpec{Format: FormatSparse12, G: 128}.QuantizeRows(r, c, QuantOptions{}, SliceRows(nil, c))
			return err
		},
	} {
		if err := f(); err == nil || !strings.Contains(err.Error(), "of memory this process can have") {
			t.Errorf("%s: %v, want an error naming the memory", name, err)
		}
	}
}

// TestHelpersBadInput: short slices and nil inputs to exported helpers
// are errors.
func TestHelpersBadInput(t *testing.T) {
	b, err := NewBits(2, 200, 4, 32, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Gather(make([]float32, 1), make([]float32, 200)); err == nil {
		t.Error("Gather into 1 value: no error")
	}
	if err := b.Gather(make([]float32, 200), nil); err == nil {
		t.Error("Gather from nil: no error")
	}
	b.Perm = make([]int32, 200)
	b.Perm[3] = 500
	if err := b.Gather(make([]float32, 200), make([]float32, 200)); err == nil {
		t.Error("Gather with Perm[3] = 500: no error")
	}
	if err := Requantize(make([]int8, 1), make([]int32, 2), 1); err == nil {
		t.Error("Requantize of 2 into 1: no error")
	}
	if err := Requantize(make([]int8, 2), make([]int32, 2), float32(math.Inf(1))); err == nil {
		t.Error("Requantize by +Inf: no error")
	}
	if _, err := DecodeInt8(nil); err == nil {
		t.Error("DecodeInt8(nil): no error")
	}
	if err := SaveMatrix(t.TempDir()+"/m.qgv", nil); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Errorf("SaveMatrix(nil): %v", err)
	}
}

// TestHandBuiltMatrices: the reference products of a matrix built by hand
// without its buffers (exported fields, no New) are errors, not index
// out of range.
func TestHandBuiltMatrices(t *testing.T) {
	x := make([]float32, 128)
	out := make([]float64, 1)
	xq, xs, o32 := make([]int8, 128), make([]float32, 1), make([]float32, 1)
	for name, m := range map[string]interface {
		DotRef([]float64, []float32) error
		DotRefMag([]float64, []float32) error
		DotA8Exact([]float32, []int8, []float32) error
	}{
		"Q4G128":   &Q4G128{Rows: 1, Cols: 128, PRows: 128, PCols: 128},
		"Bits":     &Bits{Rows: 1, Cols: 128, PRows: 128, PCols: 128, N: 4, G: 128},
		"Sparse12": &Sparse12{Rows: 1, Cols: 128, PRows: 128, PCols: 128, G: 128},
	} {
		if err := m.DotRef(out, x); err == nil {
			t.Errorf("%s: DotRef: no error", name)
		}
		if err := m.DotRefMag(out, x); err == nil {
			t.Errorf("%s: DotRefMag: no error", name)
		}
		if err := m.DotA8Exact(o32, xq, xs); err == nil {
			t.Errorf("%s: DotA8Exact: no error", name)
		}
	}
	i8 := &Int8{Rows: 2, Cols: 2}
	if err := i8.DotInt32(make([]int32, 2), make([]int8, 2)); err == nil {
		t.Error("Int8 without values: DotInt32: no error")
	}
	if err := i8.DotRef(make([]float64, 2), make([]float32, 2)); err == nil {
		t.Error("Int8 without values: DotRef: no error")
	}
}

// TestZeroValueSizes: the size methods of zero-value matrices are numbers,
// not divisions by zero.
func TestZeroValueSizes(t *testing.T) {
	var b Bits
	var s Sparse12
	_ = b.Groups() + b.WordsPerRow() + int(b.StreamBytes()) + s.Groups()
	if BitsStep(0) != 0 || BitsChunk(0) != 0 {
		t.Error("BitsStep(0) or BitsChunk(0) not 0")
	}
	_ = b.IntegerZeros() // no groups: nothing to check, and no panic
}

// TestAllocEstimates: the sizes the constructors check against the
// machine's memory are the sizes of the buffers they make.
func TestAllocEstimates(t *testing.T) {
	for _, sh := range [][2]int{{1, 1}, {130, 300}, {4096, 1024}} {
		m, err := NewQ4G128(sh[0], sh[1])
		if err != nil {
			t.Fatal(err)
		}
		if got, want := q4g128Bytes(m.PRows, m.PCols), uint64(len(m.Weights)+4*len(m.Scales)+len(m.Zeros)); got != want {
			t.Errorf("Q4G128 %dx%d: estimate %d bytes, buffers %d", sh[0], sh[1], got, want)
		}
	}
}
