//go:build noasm || purego || !amd64

package cpu

import "github.com/qgemv/qgemv/layout/ans"

// ansDecoderFor: no SIMD decoder on this build.
func ansDecoderFor(*Backend, *ans.Bits) *ansBitsDecoder { return nil }

// withoutLut returns a: this build has no table kernels.
func withoutLut(a *bitsA32) *bitsA32 { return a }
