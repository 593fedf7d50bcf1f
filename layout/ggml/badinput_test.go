package ggml

import (
	"strings"
	"testing"

	"github.com/qgemv/qgemv/internal/sysmem"
	"github.com/qgemv/qgemv/layout"
)

// TestBadInput: an unknown type and a short destination are errors, an
// unknown type's RandomBlocks returns (it looped for ever), and a shape
// beyond the machine's memory is an error before the allocation.
func TestBadInput(t *testing.T) {
	bad := &Matrix{Type: 99, Rows: 1, Cols: 32, Data: make([]byte, 64)}
	if err := bad.CheckFinite(0, 0); err == nil {
		t.Error("CheckFinite of type 99: no error")
	}
	if err := bad.CopyChecked(make([]byte, 64)); err == nil {
		t.Error("CopyChecked of type 99: no error")
	}
	m, err := New(Q4_0, 1, 128)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CopyChecked(make([]byte, 3)); err == nil {
		t.Error("CopyChecked into 3 bytes: no error")
	}
	RandomBlocks(99, layout.NewRand(1), make([]byte, 30))
	if CheckedRows(0) < 1 {
		t.Error("CheckedRows(0) < 1")
	}
	if tot := sysmem.Total(); tot != 0 && tot < 1<<39 {
		if _, err := New(Q8_0, 1<<24, 1<<16); err == nil || !strings.Contains(err.Error(), "memory") {
			t.Errorf("New Q8_0 of 2^40 elements: %v, want an error naming the memory", err)
		}
	}
}
