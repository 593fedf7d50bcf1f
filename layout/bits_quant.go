package layout

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// QuantOptions configures the quantizers FormatSpec.Quantize runs: Method,
// IntegerZero and FP32Meta those of the scalar formats (QuantizeBits,
// QuantizeSparse12; QuantizeQ4G128 takes Method only), FP32Meta and the
// k-means fields those of the formats registered with KMeans (codebooks).
type QuantOptions struct {
	Method      QuantMethod // MinMax, or Search (never worse per group, in the exact weights (q-z)*s)
	IntegerZero bool        // round zero points to integers (needed for A8)
	FP32Meta    bool        // store scales and zeros (codebooks: centroids too) as float32, not binary16

	Seed       uint64        // k-means++ seeding and sampling (deterministic)
	Iters      int           // Lloyd iterations (0: the format's default)
	TimeBudget time.Duration // stop iterating early when exceeded (0: none)
	// Progress, if set, is called with a stage name and done/total units
	// of that stage.
	Progress func(stage string, done, total int)
}

// metaRound rounds a scale or zero to its stored precision.
func metaRound(v float32, fp32 bool) float32 {
	if fp32 {
		return v
	}
	return ToFP16(v).Float32()
}

// groupFit is a candidate (scale, zero) for one group.
type groupFit struct {
	s, z float32
	sse  float64
}

// fitter quantizes one group of values to n-bit codes.
type fitter struct {
	qmax float64
	opt  QuantOptions
	tmp  []uint32
}

// stored rounds a candidate to what the matrix stores; ok is false if the
// scale cannot be stored (non-finite or lost to underflow).
func (f *fitter) stored(s, z float64) (float32, float32, bool) {
	if f.opt.IntegerZero { // an integer zero that is a code, so 0 is exact
		z = max(0, min(f.qmax, math.Round(z)))
	}
	ss, zz := metaRound(float32(s), f.opt.FP32Meta), metaRound(float32(z), f.opt.FP32Meta)
	if isBad(ss) || isBad(zz) || (s != 0 && ss == 0) {
		return 0, 0, false
	}
	return ss, zz, true
}

// encode writes the nearest codes for (s, z) into q and returns the
// squared error of the dequantized group (bitsEncodeGo), on the installed
// BitsEncodeKernel where there is one: that may stop once the error
// exceeds best, returning a value above best and leaving the codes
// incomplete.
func (f *fitter) encode(vals []float32, q []uint32, s, z float32, best float64) float64 {
	if k := bitsEncodeKernel.Load(); k != nil && len(vals) > 0 && len(vals)%8 == 0 && len(q) >= len(vals) && s != 0 && !isBad(s) && !isBad(z) {
		return (*k)(vals, q[:len(vals)], float64(s), float64(z), f.qmax, best)
	}
	return bitsEncodeGo(vals, q, float64(s), float64(z), f.qmax)
}

// bitsEncodeGo writes the codes of vals for scale s and zero z into q
// (len(q) >= len(vals)) and returns the group's squared error, in Go: the
// candidate encoder of the Bits and Sparse12 quantizers and the definition
// every BitsEncodeKernel reproduces bit for bit. In float64, each value's
// code is
//
//	c = clamp(round(v/s + z), 0, qmax)   (round halves away from zero; 0 if s is 0)
//
// its error d = (c - z)*s - v, and d*d is summed in eight lanes as
// encodeGroupGo sums them.
func bitsEncodeGo(vals []float32, q []uint32, s, z, qmax float64) float64 {
	var acc [8]float64
	q = q[:len(vals)]
	for i, v := range vals {
		c := 0.0
		if s != 0 {
			c = math.Round(float64(v)/s + z)
		}
		c = max(0, min(qmax, c))
		q[i] = uint32(c)
		d := float64((c-z)*s) - float64(v)
		acc[i&7] += float64(d * d)
	}
	return sum8(&acc)
}

// BitsEncodeKernel writes the codes of vals for scale s and zero z into q
// (len(q) == len(vals)) and returns the group's squared error, exactly as
// the Bits quantizer's Go encoder does (in float64: each code clamp(round(v/s
// + z), 0, qmax), rounding halves away from zero; each error (code - z)*s
// - v, squared and summed in eight lanes as for EncodeKernel). Like
// EncodeKernel it may stop once the error so far exceeds best. It is
// called only for a whole number of eight values, a finite nonzero s, a
// finite z and qmax in [1, 255].
type BitsEncodeKernel func(vals []float32, q []uint32, s, z, qmax, best float64) float64

var bitsEncodeKernel atomic.Pointer[BitsEncodeKernel]

// SetBitsEncodeKernel makes QuantizeBits and QuantizeSparse12 encode their
// candidates with k (nil: Go only). Package cpu installs its assembly
// encoder at init.
func SetBitsEncodeKernel(k BitsEncodeKernel) { installKernel(&bitsEncodeKernel, k) }

// fit chooses (s, z) for a group and writes its codes into q.
func (f *fitter) fit(vals []float32, q []uint32) (float32, float32, error) {
	lo, hi := float64(vals[0]), float64(vals[0])
	for _, v := range vals {
		lo, hi = min(lo, float64(v)), max(hi, float64(v))
	}
	if len(f.tmp) < len(vals) {
		f.tmp = make([]uint32, len(vals))
	}
	tmp := f.tmp[:len(vals)]
	best := groupFit{sse: math.Inf(1)}
	try := func(s, z float64) {
		ss, zz, ok := f.stored(s, z)
		if !ok {
			return
		}
		if e := f.encode(vals, tmp, ss, zz, best.sse); e < best.sse {
			best = groupFit{ss, zz, e}
			copy(q, tmp)
		}
	}
	rangeFit := func(lo, hi float64) (float64, float64) {
		if f.opt.IntegerZero { // the integer zero must be a code: include 0
			lo, hi = min(lo, 0), max(hi, 0)
		}
		if hi == lo {
			if lo == 0 {
				return 0, 0
			}
			return math.Abs(lo), -math.Copysign(1, lo) // q = 0 gives lo
		}
		s := (hi - lo) / f.qmax
		return s, -lo / s
	}
	try(rangeFit(lo, hi))
	if f.opt.Method == Search && hi > lo {
		for step := 1; step <= 20; step++ {
			k := 1 - float64(float64(step)*0.025)
			mid := float64((lo + hi) / 2)
			for _, p := range [3][2]float64{{mid - float64((mid-lo)*k), mid + float64((hi-mid)*k)}, {float64(lo * k), hi}, {lo, float64(hi * k)}} {
				try(rangeFit(p[0], p[1]))
			}
		}
		// Alternate: least-squares (s, z) for the best codes, re-encode.
		for iter := 0; iter < 4; iter++ {
			var sq, sv, sqq, sqv float64
			for i, v := range vals {
				c := float64(q[i])
				sq, sv, sqq, sqv = sq+c, sv+float64(v), sqq+float64(c*c), sqv+float64(c*float64(v))
			}
			n := float64(len(vals))
			den := float64(n*sqq) - float64(sq*sq)
			if den == 0 {
				break
			}
			a := (float64(n*sqv) - float64(sq*sv)) / den // w ~ a*q + b = (q - z)*s
			b := (sv - float64(a*sq)) / n
			if a <= 0 {
				break
			}
			try(a, -b/a)
		}
	}
	if math.IsInf(best.sse, 1) && !f.opt.IntegerZero {
		// The range's zero point could not be stored (a narrow range far
		// from 0 in binary16): the range widened to include 0 has its
		// zero point in [0, qmax].
		try(rangeFit(min(lo, 0), max(hi, 0)))
	}
	if math.IsInf(best.sse, 1) {
		if f.opt.FP32Meta {
			return 0, 0, fmt.Errorf("values in [%g, %g] need a scale or zero point float32 cannot store", lo, hi)
		}
		return 0, 0, fmt.Errorf("values in [%g, %g] need a scale or zero point binary16 cannot store (use FP32Meta)", lo, hi)
	}
	return best.s, best.z, nil
}

// QuantizeBits quantizes the rows x cols row-major matrix w to n-bit
// weights with groups of g columns (0: the whole row).
func QuantizeBits(w []float32, rows, cols, n, g int, opt QuantOptions) (*Bits, error) {
	if err := checkQuantShape(w, rows, cols, opt.Method); err != nil {
		return nil, err
	}
	return QuantizeBitsRows(rows, cols, n, g, opt, SliceRows(w, cols))
}

// QuantizeBitsRows is QuantizeBits of a matrix read row by row (the same
// matrix; see QuantizeQ4G128Rows).
func QuantizeBitsRows(rows, cols, n, g int, opt QuantOptions, src RowSource) (*Bits, error) {
	if err := CheckDims(rows, cols); err != nil {
		return nil, err
	}
	if opt.Method != MinMax && opt.Method != Search {
		return nil, fmt.Errorf("layout: quantize: unknown method %v", opt.Method)
	}
	b, err := NewBits(rows, cols, n, g, opt.FP32Meta)
	if err != nil {
		return nil, err
	}
	// Rows in parallel: a row's codes are words of its own and its
	// metadata elements of their own.
	err = quantRows(rows, func() func(r0, r1 int) error {
		f := &fitter{qmax: float64(int(1)<<n - 1), opt: opt}
		q := make([]uint32, b.G)
		buf := make([]float32, cols)
		return func(r0, r1 int) error {
			for r := r0; r < r1; r++ {
				row, err := readRow(src, r, cols, buf)
				if err != nil {
					return err
				}
				for gi := 0; gi < b.Groups(); gi++ {
					c0 := gi * b.G
					if c0 >= cols {
						break // padding groups keep s = z = 0, q = 0
					}
					vals := row[c0:min(cols, c0+b.G)]
					s, z, err := f.fit(vals, q[:len(vals)])
					if err != nil {
						return fmt.Errorf("layout: quantize %s: row %d group %d: %w", b.Name(), r, gi, err)
					}
					b.set(gi*b.PRows+r, s, z)
					for i := range vals {
						b.SetQ(r, c0+i, q[i])
					}
				}
			}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// checkQuantInput validates a quantizer's float input: its shape and
// method (checkQuantShape) and its values.
func checkQuantInput(w []float32, rows, cols int, method QuantMethod) error {
	if err := checkQuantShape(w, rows, cols, method); err != nil {
		return err
	}
	for i, v := range w {
		if isBad(v) {
			return fmt.Errorf("layout: quantize: w[%d] (row %d, column %d) is %v", i, i/cols, i%cols, v)
		}
	}
	return nil
}

// checkQuantShape validates a quantizer's dimensions, w's length and the
// method; the row-by-row quantizers check the values as they read each
// row (readRow), so their whole-matrix entry points scan them once.
func checkQuantShape(w []float32, rows, cols int, method QuantMethod) error {
	if err := CheckDims(rows, cols); err != nil {
		return err
	}
	if int64(len(w)) != int64(rows)*int64(cols) {
		return fmt.Errorf("layout: quantize: w has %d values, want %d x %d = %d", len(w), rows, cols, int64(rows)*int64(cols))
	}
	if method != MinMax && method != Search {
		return fmt.Errorf("layout: quantize: unknown method %v", method)
	}
	return nil
}
