package gpuhost

import (
	"fmt"
	"math"
	"reflect"

	"github.com/qgemv/qgemv/layout/ans"
)

// ANSTable packs md's ProbScale (128) slot digits into the words the GPU
// ANS kernels look up: bits 0-7 the value, 8-15 the symbol frequency,
// 16-22 digit - cum, bit 24 set (and the value bits clear) for the
// escape symbol.
func ANSTable(md *ans.Model) []uint32 {
	t := make([]uint32, ans.ProbScale)
	for d := range t {
		k := int(md.PPF[d])
		e := uint32(uint8(md.Value[k])) | uint32(md.Freq[k])<<8 | (uint32(d)-uint32(md.Cum[k]))<<16
		if k == md.Escape {
			e = e&^0xff | 1<<24
		}
		t[d] = e
	}
	return t
}

// ansStatus names the status codes the GPU ANS kernels write for a unit
// whose stream is corrupt (0 is success).
var ansStatus = map[uint32]string{
	1: "initial state out of range",
	2: "stream exhausted",
	3: "escape list exhausted",
	4: "final state is not 2^31",
	5: "escape bytes left unused",
}

// ANSStatus returns the message for a non-zero status code written by
// the GPU ANS kernels ("status N" for a code it does not know).
func ANSStatus(code uint32) string {
	if msg, ok := ansStatus[code]; ok {
		return msg
	}
	return fmt.Sprintf("status %d", code)
}

// ANSCorrupt returns the error for a unit whose decode failed with the
// status code: it wraps ans.ErrCorrupt and names what (the matrix or
// kernel) and the unit.
func ANSCorrupt(prefix, what string, unit, code uint32) error {
	return fmt.Errorf("%s: %s unit %d: %w: %s", prefix, what, unit, ans.ErrCorrupt, ANSStatus(code))
}

// Shape is what chain checks need of a device matrix: its rows (outputs)
// and columns (inputs).
type Shape interface {
	Rows() int
	Cols() int
}

// CheckMul checks one int8 multiply y = W v of the matrix kernel names:
// len(v) = cols, len(y) = rows.
func CheckMul(prefix, kernel string, nv, ny, rows, cols int) error {
	if nv != cols || ny != rows {
		return fmt.Errorf("%s: %s multiply: v %d, y %d, want %d, %d", prefix, kernel, nv, ny, cols, rows)
	}
	return nil
}

// CheckChain checks a MatVANS chain v = round(alpha[i] * W_i v) from a
// vector of n0 values: at least one matrix, one scale per matrix, each
// scale finite, and each matrix's columns equal to the previous one's
// rows (matrix 0's: n0). usable (nil: none) is called first for each
// matrix and rejects one the backend cannot run (nil, closed, on another
// device) before its shape is read. CheckChain returns the length of the
// result (the last matrix's rows) and the longest vector of the chain
// (what the scratch vectors must hold).
func CheckChain[M Shape](prefix string, mats []M, alpha []float32, n0 int, usable func(i int, m M) error) (n, width int, err error) {
	if len(mats) == 0 || len(alpha) != len(mats) {
		return 0, 0, fmt.Errorf("%s: RunChain: %d matrices and %d scales", prefix, len(mats), len(alpha))
	}
	n, width = n0, n0
	for i, m := range mats {
		// A nil interface or a nil pointer in one: either would panic in
		// the first method call.
		if v := reflect.ValueOf(m); !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil() {
			return 0, 0, fmt.Errorf("%s: RunChain: matrix %d is nil", prefix, i)
		}
		if usable != nil {
			if err := usable(i, m); err != nil {
				return 0, 0, err
			}
		}
		if m.Cols() != n {
			return 0, 0, fmt.Errorf("%s: RunChain: matrix %d has %d columns, the vector %d values", prefix, i, m.Cols(), n)
		}
		if math.IsNaN(float64(alpha[i])) || math.IsInf(float64(alpha[i]), 0) {
			return 0, 0, fmt.Errorf("%s: RunChain: scale %d is %v", prefix, i, alpha[i])
		}
		n = m.Rows()
		width = max(width, n)
	}
	return n, width, nil
}
