package qgemv_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

// BenchmarkGGML times llama.cpp's block types (layout/ggml) like
// BenchmarkGEMV: 4096x14336 and 14336x4096 streaming from DRAM, A8 and
// A32, on every CPU kernel set, batch 1 (and 4 and 16 for the super-block
// types); names BenchmarkGGML/<type>/<activation>/b<M>/<R>x<C>/<backend>,
// with read-GB/s and %read from the same run.
func BenchmarkGGML(b *testing.B) {
	for _, name := range []string{"q4_k", "q5_k", "q6_k", "q2_k", "q3_k", "iq4_xs", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "iq4_nl"} {
		spec, err := layout.ParseFormatSpec(name)
		if err != nil {
			b.Fatal(err)
		}
		batches := []int{1}
		if strings.HasSuffix(name, "_k") || name == "iq4_xs" { // the super-block types
			batches = []int{1, 4, 16}
		}
		for _, s := range benchShapes[:2] {
			for _, be := range benchBackends() {
				if be == "cpu-generic" && len(benchBackends()) > 1 {
					continue
				}
				for _, act := range []benchAct{a8, a32} {
					for _, batch := range batches {
						b.Run(fmt.Sprintf("%s/%v/b%d/%v/%s", formatName(spec), act, batch, s, be), func(b *testing.B) {
							benchGEMV(b, be, 0, spec, s, act, batch)
						})
					}
				}
			}
		}
	}
}
