package layout

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
)

// QuantMethod selects how scales and zero points are chosen per group.
type QuantMethod int

const (
	// MinMax maps each group's [min, max] range onto the codes: [0, 15]
	// for Q4G128, [0, 2^n-1] for QuantizeBits.
	MinMax QuantMethod = iota
	// Search tries shrunken ranges and least-squares scale refinement per
	// group and keeps the candidate with the least squared error. It is
	// never worse than MinMax on any group.
	Search
)

// String returns the method's name as the CLI spells it.
func (q QuantMethod) String() string {
	switch q {
	case MinMax:
		return "minmax"
	case Search:
		return "search"
	}
	return fmt.Sprintf("QuantMethod(%d)", int(q))
}

// ParseQuantMethod parses "minmax" or "search".
func ParseQuantMethod(s string) (QuantMethod, error) {
	switch s {
	case "minmax":
		return MinMax, nil
	case "search":
		return Search, nil
	}
	return 0, fmt.Errorf("layout: unknown quantization method %q (want minmax or search)", s)
}

// QuantizeQ4G128 quantizes the rows x cols row-major float32 matrix w.
// Non-finite values and a short w are errors.
func QuantizeQ4G128(w []float32, rows, cols int, method QuantMethod) (*Q4G128, error) {
	if err := checkQuantShape(w, rows, cols, method); err != nil {
		return nil, err
	}
	return QuantizeQ4G128Rows(rows, cols, method, SliceRows(w, cols))
}

// RowSource gives row r (0 <= r < rows) of a float matrix of cols columns:
// buf (cols values, the caller's scratch) filled, or a slice of its own.
// The quantizers call it from several goroutines, each row once.
type RowSource func(r int, buf []float32) ([]float32, error)

// SliceRows is the RowSource of the row-major matrix w; a row past its
// end (w shorter than the rows asked for) is an error.
func SliceRows(w []float32, cols int) RowSource {
	return func(r int, _ []float32) ([]float32, error) {
		if r < 0 || cols < 0 || r >= len(w)/max(cols, 1) {
			return nil, fmt.Errorf("row %d of %d columns is past the end of %d values", r, cols, len(w))
		}
		return w[r*cols : (r+1)*cols], nil
	}
}

// callRow returns src(r, buf), a nil src or a panic in it as an error: the
// quantizers call sources on their own goroutines, where a panic would end
// the process whatever the caller recovers.
func callRow(src RowSource, r int, buf []float32) (row []float32, err error) {
	if src == nil {
		return nil, errors.New("nil RowSource")
	}
	defer func() {
		if p := recover(); p != nil {
			row, err = nil, fmt.Errorf("the row source panicked: %v", p)
		}
	}()
	return src(r, buf)
}

// readRow reads row r from src and checks it: the source's error, a short
// row or a non-finite value names the row (and column).
func readRow(src RowSource, r, cols int, buf []float32) ([]float32, error) {
	row, err := callRow(src, r, buf)
	if err != nil {
		return nil, fmt.Errorf("layout: quantize: row %d: %w", r, err)
	}
	if len(row) != cols {
		return nil, fmt.Errorf("layout: quantize: row %d has %d values, want %d", r, len(row), cols)
	}
	for c, v := range row {
		if isBad(v) {
			return nil, fmt.Errorf("layout: quantize: row %d, column %d is %v", r, c, v)
		}
	}
	return row, nil
}

// QuantizeQ4G128Rows is QuantizeQ4G128 of a matrix read row by row (the
// same bytes), holding a row per goroutine instead of the whole matrix:
// a float tensor of a model file converts as it quantizes. A source error
// or a non-finite value is an error naming the first such row.
func QuantizeQ4G128Rows(rows, cols int, method QuantMethod, src RowSource) (*Q4G128, error) {
	if err := CheckDims(rows, cols); err != nil {
		return nil, err
	}
	if method != MinMax && method != Search {
		return nil, fmt.Errorf("layout: quantize: unknown method %v", method)
	}
	m, err := NewQ4G128(rows, cols)
	if err != nil {
		return nil, err
	}
	// Rows in parallel, in even chunks: rows 2i and 2i+1 share the bytes
	// of their zero points, a row's weights are bytes of its own.
	err = quantRows(rows, func() func(r0, r1 int) error {
		var q [GroupSize]uint8
		buf := make([]float32, cols)
		return func(r0, r1 int) error {
			for r := r0; r < r1; r++ {
				row, err := readRow(src, r, cols, buf)
				if err != nil {
					return err
				}
				for g := 0; g < m.Groups(); g++ {
					lo := g * GroupSize
					hi := min(lo+GroupSize, cols)
					vals := row[lo:hi]
					s, z := quantGroup(vals, q[:len(vals)], method)
					mi := m.MetaIndex(r, g)
					m.Scales[mi] = s
					setNib(m.Zeros, mi, z)
					base := r*m.PCols + lo // even: two codes a byte
					i := 0
					for ; i+1 < len(vals); i += 2 {
						m.Weights[(base+i)>>1] = q[i] | q[i+1]<<4
					}
					if i < len(vals) {
						setNib(m.Weights, base+i, q[i])
					}
					for c := hi; c < lo+GroupSize; c++ { // padding columns dequantize to 0
						setNib(m.Weights, r*m.PCols+c, z)
					}
				}
			}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// quantGroup picks the scale and zero of one group and writes its codes.
func quantGroup(vals []float32, q []uint8, method QuantMethod) (float32, uint8) {
	lo, hi := float32(0), float32(0)
	for i, v := range vals {
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	if method == MinMax { // one candidate: its codes, no error to compare
		s, z := rangeToScaleZero(lo, hi)
		encodeCodes(vals, q, s, z)
		return s, z
	}
	best := math.Inf(1)
	var bs float32
	var bz uint8
	var tmp [GroupSize]uint8
	try := func(s float32, z uint8) {
		e := encodeGroup(vals, tmp[:len(vals)], s, z, best)
		if e < best {
			best, bs, bz = e, s, z
			copy(q, tmp[:len(vals)])
		}
	}
	try(rangeToScaleZero(lo, hi))
	if method == Search && hi > lo {
		for step := 1; step <= 24; step++ {
			f := 1 - float32(float32(step)*0.02)
			for _, p := range [3][2]float32{{lo * f, hi * f}, {lo * f, hi}, {lo, hi * f}} {
				s, z := rangeToScaleZero(p[0], p[1])
				try(s, z)
			}
		}
		// Least-squares refinement of the scale with the best codes and zero.
		for iter := 0; iter < 2; iter++ {
			var num, den float64
			for i, v := range vals {
				d := float64(int(q[i]) - int(bz))
				num += float64(d * float64(v))
				den += float64(d * d)
			}
			if den == 0 {
				break
			}
			try(float32(num/den), bz)
		}
	}
	return bs, bz
}

// rangeToScaleZero maps [lo, hi] (widened to include 0) onto codes 0..15.
func rangeToScaleZero(lo, hi float32) (float32, uint8) {
	lo = min(lo, 0)
	hi = max(hi, 0)
	if hi == lo {
		return 0, 0
	}
	s := (hi - lo) / 15
	if math.IsInf(float64(s), 0) { // hi - lo overflows float32; (hi - lo)/15 does not
		s = float32((float64(hi) - float64(lo)) / 15)
	}
	z := math.Round(float64(-lo / s))
	return s, uint8(max(0, min(15, z)))
}

// encodeGroup writes the nearest codes for scale s and zero z and returns
// the squared error of the dequantized group (encodeGroupGo), on the
// installed EncodeKernel where there is one: that may stop once the error
// exceeds best, returning a value above best and leaving the codes
// incomplete.
func encodeGroup(vals []float32, q []uint8, s float32, z uint8, best float64) float64 {
	if k := encodeKernel.Load(); k != nil && kernelEncodes(vals, q, s) {
		return (*k)(vals, q[:len(vals)], s, z, best)
	}
	return encodeGroupGo(vals, q, s, z)
}

// encodeCodes writes the nearest codes for scale s and zero z (encode).
func encodeCodes(vals []float32, q []uint8, s float32, z uint8) {
	if k := encodeKernel.Load(); k != nil && kernelEncodes(vals, q, s) {
		(*k)(vals, q[:len(vals)], s, z, math.Inf(1))
		return
	}
	for i, v := range vals {
		q[i] = encode(v, s, z)
	}
}

// kernelEncodes says whether an EncodeKernel takes the group: a whole
// number of eight values, and a finite, nonzero scale.
func kernelEncodes(vals []float32, q []uint8, s float32) bool {
	return len(vals) > 0 && len(vals)%8 == 0 && len(q) >= len(vals) && s != 0 && !math.IsInf(float64(s), 0) && s == s
}

// encodeGroupGo writes the nearest 4-bit codes of vals for scale s and zero
// z into q (len(q) >= len(vals)) and returns the group's squared error, in
// Go: the candidate encoder of QuantizeQ4G128 and the definition every
// EncodeKernel reproduces bit for bit. Each value's code is
//
//	clamp(round(v/s) + z, 0, 15)   (round halves away from zero; 0 if s is 0)
//
// its error
//
//	d = float64(float32(code - z) * s) - float64(v)
//
// and d*d is summed in float64 in eight lanes, value i in lane i mod 8
// (so that SIMD kernels sum in the same order), which combine as
// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).
func encodeGroupGo(vals []float32, q []uint8, s float32, z uint8) float64 {
	var acc [8]float64
	q = q[:len(vals)]
	// deq[c] is code c's dequantized value as the error takes it
	var deq [16]float64
	for c := range deq {
		deq[c] = float64(float32(c-int(z)) * s)
	}
	if s == 0 { // every code 0 (encode)
		for i, v := range vals {
			q[i] = 0
			d := deq[0] - float64(v)
			acc[i&7] += float64(d * d)
		}
	} else {
		for i, v := range vals {
			c := nearestCode(v/s, int(z))
			q[i] = c
			d := deq[c&15] - float64(v)
			acc[i&7] += float64(d * d)
		}
	}
	return sum8(&acc)
}

// sum8 is the encoders' combination of their eight lanes of squared
// errors: ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)), the order in which
// a SIMD kernel adds its halves and then its neighbours.
func sum8(l *[8]float64) float64 {
	return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

// EncodeKernel writes the codes of vals for scale s and zero z into q
// (len(q) == len(vals)) and returns the group's squared error, exactly as
// QuantizeQ4G128's Go encoder does (each code clamp(round(v/s) + z, 0,
// 15), rounding halves away from zero; each error float64(float32(code -
// z) * s) - float64(v), squared and summed in float64 in eight lanes,
// value i in lane i mod 8, which combine as ((l0+l4) + (l2+l6)) +
// ((l1+l5) + (l3+l7))). It may stop once the error so far (the lanes
// summed the same way) exceeds best, and return that: the group's error
// would exceed best too, and the caller keeps only a candidate whose error
// is below best. With best +Inf it writes every code. It is called only
// for a whole number of eight values, a finite nonzero s and z in [0, 15].
type EncodeKernel func(vals []float32, q []uint8, s float32, z uint8, best float64) float64

var encodeKernel atomic.Pointer[EncodeKernel]

// SetEncodeKernel makes QuantizeQ4G128 encode its candidates with k (nil:
// Go only). Package cpu installs its assembly encoder at init.
func SetEncodeKernel(k EncodeKernel) { installKernel(&encodeKernel, k) }

// encode is the nearest code of v for scale s and zero z: round(v/s)
// (halves away from zero) + z, clamped to [0, 15].
func encode(v, s float32, z uint8) uint8 {
	if s == 0 {
		return 0
	}
	return nearestCode(v/s, int(z))
}

// nearestCode is math.Round(float64(x)) + z clamped to [0, 15] (z in [0,
// 15]), without a branch on the sign of x, which random data would
// mispredict half the time: x clamped to [-16, 16] (every value beyond
// clamps to the same code) plus 32.5 is positive and exact in float64 for
// |x| >= 2^-24 (below that it rounds to 32.5, which truncates the same),
// so its truncation is floor(x + 1/2) + 32, which rounds halves up; a
// negative x exactly halfway rounds away from zero, one less. codeOf
// clamps.
func nearestCode(x float32, z int) uint8 {
	x = max(-16, min(16, x))
	t := float64(x) + 32.5
	r := int(t)
	if float64(r) == t && x < 0 {
		r--
	}
	return codeOf[(r+z)&63]
}

// codeOf[i] is i - 32 clamped to [0, 15].
var codeOf = func() (t [64]uint8) {
	for i := range t {
		t[i] = uint8(max(0, min(15, i-32)))
	}
	return t
}()

// RelRMSError returns sqrt(sum (a-b)^2 / sum b^2), the relative RMS error of
// a against the reference b, in float64. It is 0 when both are all zero,
// NaN when their lengths differ.
func RelRMSError(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.NaN()
	}
	var num, den float64
	relRMSAdd(a, b, &num, &den)
	return relRMS(num, den)
}

// RelRMSErrorRows is RelRMSError(a, b) with b (rows x cols, row-major)
// read row by row from src, the same value: a float tensor's
// quantization error measured without converting it whole.
func RelRMSErrorRows(a []float32, rows, cols int, src RowSource) (float64, error) {
	if err := CheckDims(rows, cols); err != nil {
		return 0, fmt.Errorf("layout: relative RMS error: %w", err)
	}
	if len(a) != rows*cols {
		return 0, fmt.Errorf("layout: relative RMS error: %d values against a %dx%d source", len(a), rows, cols)
	}
	var num, den float64
	buf := make([]float32, cols)
	for r := 0; r < rows; r++ {
		row, err := callRow(src, r, buf)
		if err != nil {
			return 0, fmt.Errorf("layout: relative RMS error: row %d: %w", r, err)
		}
		if len(row) != cols {
			return 0, fmt.Errorf("layout: relative RMS error: row %d has %d values, want %d", r, len(row), cols)
		}
		relRMSAdd(a[r*cols:(r+1)*cols], row, &num, &den)
	}
	return relRMS(num, den), nil
}

// relRMSAdd adds the squared differences of a and b to num and the
// squares of b to den, in order.
func relRMSAdd(a, b []float32, num, den *float64) {
	for i := range b {
		d := float64(a[i]) - float64(b[i])
		*num += float64(d * d)
		*den += float64(float64(b[i]) * float64(b[i]))
	}
}

func relRMS(num, den float64) float64 {
	if den == 0 {
		if num == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Sqrt(num / den)
}
