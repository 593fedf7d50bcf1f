//go:build !noasm && !purego

package cpu

import "github.com/qgemv/qgemv/layout/ans"

// ansDecoderFor returns the SIMD decoder of m for b's kernel set, or nil.
func ansDecoderFor(*Backend, *ans.Bits) *ansBitsDecoder { return nil }

// withoutLut returns a unless it runs the table kernels, which read a
// packed copy of the words made at load: an entropy-coded matrix has no
// stored words to pack, and the one-row kernels do not exist for those
// shapes, so it multiplies float activations with the generic kernel.
func withoutLut(a *bitsA32) *bitsA32 {
	if a != nil && a.lut != nil {
		return nil
	}
	return a
}
