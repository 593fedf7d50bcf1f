package testmodel

import (
	"fmt"
	"math/rand/v2"

	"github.com/qgemv/qgemv/layout/ggml"
)

// GGMLBlocks returns random blocks of any ggml block type layout/ggml
// imports (Q2_K..Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, IQ4_XS, by
// ggml type id) for a rows x cols matrix: random codes and scales with
// finite binary16 fields of realistic size (ggml.RandomBlocks). cols must
// be a multiple of the type's block.
func GGMLBlocks(rng *rand.Rand, typ uint32, rows, cols int) ([]byte, error) {
	t := ggml.Type(typ)
	if !t.Known() {
		return nil, fmt.Errorf("testmodel: ggml type %d is not a block type layout/ggml knows", typ)
	}
	if rows < 0 || cols < 0 || cols%t.BlockElems() != 0 {
		return nil, fmt.Errorf("testmodel: %s: %dx%d is not whole blocks of %d", t, rows, cols, t.BlockElems())
	}
	b := make([]byte, rows*cols/t.BlockElems()*t.BlockBytes())
	ggml.RandomBlocks(t, rng, b)
	return b, nil
}
