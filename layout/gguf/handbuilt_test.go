package gguf

import "testing"

// TestHandBuiltTensors: a Tensor whose Data does not hold its Dims (built
// by hand, not by Parse) is an error from Float32s and ImportBits, not an
// index out of range or a huge allocation.
func TestHandBuiltTensors(t *testing.T) {
	for _, tt := range []*Tensor{
		{Name: "f32", Type: F32, Dims: []uint64{4}, Data: make([]byte, 4)},
		{Name: "f16", Type: F16, Dims: []uint64{1 << 62}, Data: make([]byte, 2)},
		{Name: "wrap", Type: F32, Dims: []uint64{1 << 62, 4}, Data: []byte{}},
	} {
		if _, err := tt.Float32s(); err == nil {
			t.Errorf("%s: Float32s: no error", tt.Name)
		}
	}
	q := &Tensor{Name: "q", Type: Q4_0, Dims: []uint64{32, 1}, Data: make([]byte, 1)}
	if _, err := q.ImportBits(); err == nil {
		t.Error("Q4_0 32x1 in 1 byte: ImportBits: no error")
	}
	if _, err := q.ImportGGML(); err == nil {
		t.Error("Q4_0 32x1 in 1 byte: ImportGGML: no error")
	}
}
