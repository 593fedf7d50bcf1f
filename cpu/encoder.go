package cpu

import "github.com/qgemv/qgemv/layout"

// Encoder is a set of assembly candidate encoders for layout's quantizers
// (QuantizeQ4G128; QuantizeBits and QuantizeSparse12): Encoders lists
// those this CPU runs.
type Encoder struct {
	Name string
	Q4   layout.EncodeKernel
	Bits layout.BitsEncodeKernel
}
