package layout

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/qgemv/qgemv/internal/sysmem"
)

// GroupSize is the number of columns that share one scale and zero point in
// Q4G128, and the block edge of its block-contiguous metadata.
const GroupSize = 128

// MaxDim bounds R and C of any matrix. It keeps every index and every
// int32 accumulator of the integer paths far from overflow.
const MaxDim = 1 << 24

// Q4G128 is a 4-bit matrix with one float32 scale and one 4-bit zero point
// per (row, 128-column group), in the canonical block-contiguous layout
// described in the package documentation.
type Q4G128 struct {
	Rows, Cols   int       // true dimensions
	PRows, PCols int       // dimensions padded to multiples of 128
	Weights      []byte    // PRows*PCols/2 bytes, row-major, low nibble = even column
	Scales       []float32 // NumBlocks()*128
	Zeros        []byte    // NumBlocks()*64, u4, even index in low nibble
}

// Pad128 rounds n up to a multiple of 128.
func Pad128(n int) int { return (n + GroupSize - 1) / GroupSize * GroupSize }

// CheckDims returns an error naming the problem if rows x cols is not a
// valid matrix shape.
func CheckDims(rows, cols int) error {
	if rows <= 0 || cols <= 0 {
		return fmt.Errorf("layout: matrix shape %dx%d: dimensions must be positive", rows, cols)
	}
	if rows > MaxDim || cols > MaxDim {
		return fmt.Errorf("layout: matrix shape %dx%d: dimensions above the limit %d", rows, cols, MaxDim)
	}
	if int64(Pad128(rows))*int64(Pad128(cols)) > MaxElems {
		limit := "2^40"
		if MaxElems != 1<<40 {
			limit = fmt.Sprint(int64(MaxElems))
		}
		return fmt.Errorf("layout: matrix shape %dx%d: more than %s elements", rows, cols, limit)
	}
	return nil
}

// checkBytes returns an error naming the matrix (what, rows x cols) when
// its buffers, bytes in all, exceed the memory this process can have:
// CheckDims allows shapes whose allocation the Go runtime could only
// answer by ending the process.
func checkBytes(what string, rows, cols int, bytes uint64) error {
	if err := sysmem.Check(bytes); err != nil {
		return fmt.Errorf("layout: %s %dx%d: %w", what, rows, cols, err)
	}
	return nil
}

// q4g128Bytes is the size of a Q4G128 matrix's buffers: per 256 padded
// elements, 128 bytes of 4-bit codes, 8 of float32 scales (one per 128)
// and 1 of 4-bit zero points.
func q4g128Bytes(prows, pcols int) uint64 { return uint64(prows) * uint64(pcols) / 256 * 137 }

// MaxElems bounds a matrix's elements, padded to multiples of 128 in both
// dimensions: 2^40, and on 32-bit platforms just under 2^28, so that a format's
// sizes in bytes (up to 4 per element, with float32 weights to quantize)
// are ints there too.
const MaxElems = min(1<<40, math.MaxInt/8)

// NewQ4G128 allocates a zero matrix (all weights, zeros and scales zero) of
// the given true shape.
func NewQ4G128(rows, cols int) (*Q4G128, error) {
	if err := CheckDims(rows, cols); err != nil {
		return nil, err
	}
	m := &Q4G128{Rows: rows, Cols: cols, PRows: Pad128(rows), PCols: Pad128(cols)}
	if err := checkBytes("Q4G128", rows, cols, q4g128Bytes(m.PRows, m.PCols)); err != nil {
		return nil, err
	}
	m.Weights = make([]byte, m.PRows*m.PCols/2)
	m.Scales = make([]float32, m.NumBlocks()*GroupSize)
	m.Zeros = make([]byte, m.NumBlocks()*GroupSize/2)
	return m, nil
}

// Groups returns the number of 128-column groups per row, PCols/128.
func (m *Q4G128) Groups() int { return m.PCols / GroupSize }

// NumBlocks returns the number of 128x128 blocks.
func (m *Q4G128) NumBlocks() int { return (m.PRows / GroupSize) * (m.PCols / GroupSize) }

// MetaIndex returns the index into Scales (and the nibble index into Zeros)
// of row r, column group g.
func (m *Q4G128) MetaIndex(r, g int) int {
	return ((r/GroupSize)*m.Groups()+g)*GroupSize + r%GroupSize
}

// Scale returns the scale of row r, column group g.
func (m *Q4G128) Scale(r, g int) float32 { return m.Scales[m.MetaIndex(r, g)] }

// Zero returns the zero point of row r, column group g.
func (m *Q4G128) Zero(r, g int) uint8 { return nib(m.Zeros, m.MetaIndex(r, g)) }

// Q returns the 4-bit weight at row r, column c (padded coordinates).
func (m *Q4G128) Q(r, c int) uint8 { return nib(m.Weights, r*m.PCols+c) }

// StreamBytes returns the bytes a GEMV reads from the matrix: weights,
// scales and zeros.
func (m *Q4G128) StreamBytes() int64 {
	return int64(len(m.Weights)) + 4*int64(len(m.Scales)) + int64(len(m.Zeros))
}

func nib(b []byte, i int) uint8 {
	v := b[i>>1]
	if i&1 != 0 {
		return v >> 4
	}
	return v & 15
}

func setNib(b []byte, i int, v uint8) {
	if i&1 != 0 {
		b[i>>1] = b[i>>1]&0x0f | v<<4
	} else {
		b[i>>1] = b[i>>1]&0xf0 | v&15
	}
}

// Validate checks every dimension and slice length and that every scale is
// finite. It returns an error naming the first problem found.
func (m *Q4G128) Validate() error {
	if m == nil {
		return errors.New("layout: Q4G128 is nil")
	}
	if err := CheckDims(m.Rows, m.Cols); err != nil {
		return err
	}
	if m.PRows != Pad128(m.Rows) || m.PCols != Pad128(m.Cols) {
		return fmt.Errorf("layout: Q4G128 padded shape %dx%d does not match true shape %dx%d padded to 128 (%dx%d)",
			m.PRows, m.PCols, m.Rows, m.Cols, Pad128(m.Rows), Pad128(m.Cols))
	}
	if want := m.PRows * m.PCols / 2; len(m.Weights) != want {
		return fmt.Errorf("layout: Q4G128 weights: %d bytes, want %d", len(m.Weights), want)
	}
	nb := m.NumBlocks()
	if len(m.Scales) != nb*GroupSize {
		return fmt.Errorf("layout: Q4G128 scales: %d values, want %d", len(m.Scales), nb*GroupSize)
	}
	if len(m.Zeros) != nb*GroupSize/2 {
		return fmt.Errorf("layout: Q4G128 zeros: %d bytes, want %d", len(m.Zeros), nb*GroupSize/2)
	}
	for i, s := range m.Scales {
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("layout: Q4G128 scale %d (block %d, row %d of block) is %v", i, i/GroupSize, i%GroupSize, s)
		}
	}
	return nil
}

// Dequantize returns the Rows x Cols float32 matrix (row-major, true shape)
// that m represents: each weight is (q - z) * s computed exactly and
// rounded once to float32 (the exact product can need 28 significant
// bits; it is exact in float64, which DotRef uses).
func (m *Q4G128) Dequantize() []float32 {
	out := make([]float32, m.Rows*m.Cols)
	for r := 0; r < m.Rows; r++ {
		for c := 0; c < m.Cols; c++ {
			g := c / GroupSize
			out[r*m.Cols+c] = float32(float64(int(m.Q(r, c))-int(m.Zero(r, g))) * float64(m.Scale(r, g)))
		}
	}
	return out
}

// DotRef computes out[r] = sum_c w[r,c] * x[c] in float64 for every true row
// r, with w the exact dequantized weights. x has Cols elements and out Rows.
// It is the oracle for the float paths of every kernel.
func (m *Q4G128) DotRef(out []float64, x []float32) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if len(x) != m.Cols {
		return fmt.Errorf("layout: DotRef: x has %d elements, want %d", len(x), m.Cols)
	}
	if len(out) != m.Rows {
		return fmt.Errorf("layout: DotRef: out has %d elements, want %d", len(out), m.Rows)
	}
	for r := 0; r < m.Rows; r++ {
		var acc float64
		for c := 0; c < m.Cols; c++ {
			g := c / GroupSize
			w := float64(int(m.Q(r, c))-int(m.Zero(r, g))) * float64(m.Scale(r, g))
			acc += float64(w * float64(x[c]))
		}
		out[r] = acc
	}
	return nil
}

// DotRefMag computes mag[r] = sum_c |s| * (|q| + |z|) * |x[c]| in float64,
// the magnitude against which float-path errors are normalized (it bounds
// the size of every partial sum a kernel may form, including the
// sum(q*x) - z*sum(x) split).
func (m *Q4G128) DotRefMag(mag []float64, x []float32) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if len(x) != m.Cols || len(mag) != m.Rows {
		return fmt.Errorf("layout: DotRefMag: x has %d, mag %d elements, want %d, %d", len(x), len(mag), m.Cols, m.Rows)
	}
	for r := 0; r < m.Rows; r++ {
		var acc float64
		for c := 0; c < m.Cols; c++ {
			g := c / GroupSize
			acc += float64(math.Abs(float64(m.Scale(r, g))) * float64(int(m.Q(r, c))+int(m.Zero(r, g))) * math.Abs(float64(x[c])))
		}
		mag[r] = acc
	}
	return nil
}

// A32Tolerance is the float-path error bound for Q4G128 with float32
// activations: every backend's result y[r] satisfies
// |y[r] - ref[r]| <= A32Tolerance * mag[r], with ref from DotRef and mag
// from DotRefMag, for rows of up to MaxBoundGroups groups (65536 columns).
// The kernels add the groups' partial results in float32, one after the
// other, so a longer row adds up to 2^-24 * mag[r] per further group:
// |y[r] - ref[r]| <= (A32Tolerance + (groups - MaxBoundGroups) * 2^-24) * mag[r].
// (A row of 2^20 columns built to round every addition the same way
// measured 6.9e-5 * mag on every CPU kernel set, against 4.9e-4.)
const A32Tolerance = 3e-5

// MaxBoundGroups is the number of groups per row up to which the float
// tolerances (A32Tolerance, BitsTolerance) hold as constants; see
// A32Tolerance for longer rows.
const MaxBoundGroups = 512

// DotA8Exact computes the exact W4A8 result defined in the package
// documentation for every true row: out[r] from the int8 activations xq
// (PCols values) and their per-group scales xs (PCols/128 values). It is
// the bit-exact oracle for the integer paths.
func (m *Q4G128) DotA8Exact(out []float32, xq []int8, xs []float32) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if len(xq) != m.PCols || len(xs) != m.Groups() {
		return fmt.Errorf("layout: DotA8Exact: xq has %d values and xs %d, want %d and %d", len(xq), len(xs), m.PCols, m.Groups())
	}
	if len(out) != m.Rows {
		return fmt.Errorf("layout: DotA8Exact: out has %d elements, want %d", len(out), m.Rows)
	}
	for r := 0; r < m.Rows; r++ {
		var acc float32
		for g := 0; g < m.Groups(); g++ {
			var dot, sx int32
			for c := g * GroupSize; c < (g+1)*GroupSize; c++ {
				dot += int32(m.Q(r, c)) * int32(xq[c])
				sx += int32(xq[c])
			}
			isum := dot - int32(m.Zero(r, g))*sx
			f := float32(m.Scale(r, g) * xs[g])
			acc = float32(acc + float32(f*float32(isum)))
		}
		out[r] = acc
	}
	return nil
}

// roundMagic is 1.5 * 2^23: for |v| <= 2^22, (v + roundMagic) - roundMagic
// is v rounded to an integer, half to even, in float32 arithmetic.
const roundMagic = 12582912

// roundClamp127 rounds v half to even and clamps it to [-127, 127]. The
// product x*inv of QuantizeA8 is within a few ulps of [-127, 127], so the
// clamp only absorbs those ulps.
func roundClamp127(v float32) int32 {
	r := float32(float32(v+roundMagic) - roundMagic)
	return int32(max(-127, min(127, r)))
}

// QuantizeA8 quantizes the activation vector x (at most dst's length, the
// rest treated as zero) to int8 per group of 128, as the package
// documentation specifies. len(dst) must be a multiple of 128 and
// len(scales) == len(dst)/128. Non-finite inputs are an error. It runs
// the installed A8Kernel (SetA8Kernel) over the groups x covers fully,
// and QuantizeA8Go's loop elsewhere: the same bytes either way.
func QuantizeA8(dst []int8, scales []float32, x []float32) error {
	k := a8Kernel.Load()
	if k == nil || len(dst)%GroupSize != 0 || len(scales) != len(dst)/GroupSize || len(x) > len(dst) {
		return QuantizeA8Go(dst, scales, x)
	}
	full := len(x) / GroupSize
	for g := 0; g < full; g++ {
		g += (*k)(dst[g*GroupSize:full*GroupSize], scales[g:full], x[g*GroupSize:full*GroupSize])
		if g == full {
			break
		}
		if err := QuantizeA8Go(dst[g*GroupSize:g*GroupSize+GroupSize], scales[g:g+1], x[g*GroupSize:g*GroupSize+GroupSize]); err != nil {
			return QuantizeA8Go(dst, scales, x) // the error, counted from x[0]
		}
	}
	if full < len(scales) {
		if err := QuantizeA8Go(dst[full*GroupSize:], scales[full:], x[full*GroupSize:]); err != nil {
			return QuantizeA8Go(dst, scales, x)
		}
	}
	return nil
}

// A8Kernel quantizes the leading whole groups of 128 of x (len(x) a
// multiple of 128, len(dst) == len(x), len(scales) == len(x)/128) exactly
// as QuantizeA8Go does, and returns how many groups it quantized; it
// stops at the first group it leaves to Go (a NaN or infinity, an amax
// below 2^-100).
type A8Kernel func(dst []int8, scales []float32, x []float32) int

var a8Kernel atomic.Pointer[A8Kernel]

// SetA8Kernel makes QuantizeA8 run k (nil: the Go loop only). Package cpu
// installs its assembly quantizer at init.
func SetA8Kernel(k A8Kernel) { installKernel(&a8Kernel, k) }

// HasA8Kernel reports whether QuantizeA8 runs an installed kernel.
func HasA8Kernel() bool { return a8Kernel.Load() != nil }

// QuantizeA8Go is QuantizeA8 in Go only: the reference every A8Kernel
// reproduces.
func QuantizeA8Go(dst []int8, scales []float32, x []float32) error {
	if len(dst)%GroupSize != 0 || len(scales) != len(dst)/GroupSize || len(x) > len(dst) {
		return fmt.Errorf("layout: QuantizeA8: dst %d, scales %d, x %d: want dst a multiple of 128, scales dst/128, x at most dst",
			len(dst), len(scales), len(x))
	}
	for g := range scales {
		lo := g * GroupSize
		hi := min(lo+GroupSize, len(x))
		var amax float32
		for i := lo; i < hi; i++ {
			v := x[i]
			if v != v || v > math.MaxFloat32 || v < -math.MaxFloat32 {
				return fmt.Errorf("layout: QuantizeA8: activation %d is %v", i, v)
			}
			if v < 0 {
				v = -v
			}
			if v > amax {
				amax = v
			}
		}
		q := dst[lo : lo+GroupSize]
		if amax == 0 {
			scales[g] = 0
			clear(q)
			continue
		}
		scales[g] = amax / 127
		// Below 2^-100, x and amax are scaled by 2^64 first (exact), so that
		// 127/amax cannot overflow (it did below about 3.7e-37); where it
		// does not, the scaled product x*inv rounds to the same value.
		pre := float32(1)
		if amax < 0x1p-100 {
			pre = 0x1p64
		}
		inv := 127 / (amax * pre)
		for i := range q {
			if lo+i >= hi {
				q[i] = 0
				continue
			}
			q[i] = int8(roundClamp127(float32(float32(x[lo+i]*pre) * inv)))
		}
	}
	return nil
}
