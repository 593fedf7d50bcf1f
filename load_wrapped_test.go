package qgemv_test

import (
	"strings"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ggml"
)

// wrapped is a caller's type embedding a layout matrix: it reports the
// matrix's format but is not the layout's own type.
type wrapped struct{ layout.Matrix }

// TestLoadWrappedMatrix: loading a matrix of a caller's type that
// reports a built-in format is an error naming both types, on every
// format's CPU loader. The loaders asserted the layout type unchecked
// before (Q4G128, Bits, Sparse12, Int8, GGML, ANS): a panic.
func TestLoadWrappedMatrix(t *testing.T) {
	eng, err := qgemv.Open(qgemv.WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	q4, _ := layout.RandomQ4G128(16, 256, 1)
	bits, _ := layout.RandomBits(16, 256, 4, 128, 2)
	sp, _ := layout.RandomSparse12(16, 256, 128, 3)
	i8, _ := layout.RandomInt8(16, 256, 4)
	g, _ := ggml.Random(ggml.Q4_0, 16, 256, 5)
	for _, m := range []layout.Matrix{q4, bits, sp, i8, g} {
		if m == nil {
			t.Fatal("no matrix made")
		}
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("%s wrapped: Load panicked: %v", m.Name(), v)
				}
			}()
			mat, err := eng.Load(wrapped{m})
			if err == nil {
				mat.Close()
				t.Errorf("%s wrapped: loaded", m.Name())
			} else if !strings.Contains(err.Error(), "must be a") {
				t.Errorf("%s wrapped: %v, want an error naming the types", m.Name(), err)
			}
		}()
	}
}
