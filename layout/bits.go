package layout

import (
	"errors"
	"fmt"
	"math"
)

// Bits is the GemLite-style low-bit family: n-bit unsigned weights
// (n in 8, 4, 3, 2, 1) in a universal 32-bit packing, with one scale and
// one zero point per (row, group of G columns) in the HQQ/GPTQ convention
//
//	w = (q - z) * s    (exact in float64; z may be fractional)
//
// # Geometry
//
// step = 32/n elements per 32-bit word (3 bits: 10, the top 2 bits zero);
// a chunk is 32 words holding E = 32*step consecutive columns of a row.
// Cols is padded to PCols, the smallest multiple of E, of 128 and (unless
// the group is the whole row) of G. Rows are padded to PRows, a multiple of
// 16; padding rows and columns hold q = 0 and padding rows s = z = 0.
// Whole-row groups have G = PCols.
//
// # Weights
//
// Words: PRows*WordsPerRow uint32, row-major, WordsPerRow = 32*PCols/E.
// Column c of row r is in chunk k = c/E at o = c%E, i = o/32, t = o%32:
//
//	word  = Words[r*WordsPerRow + k*32 + t]
//	q     = (word >> (32 - n*(i+1))) & (1<<n - 1)
//
// so lane t of a 32-wide GPU warp reads word t of a chunk (coalesced), and
// for a fixed i, 16 adjacent words unpack to 16 consecutive columns.
//
// # Metadata
//
// Groups = PCols/G. Scales and zero points are stored group-major, rows
// contiguous: the value of (row r, group g) is at index g*PRows + r, as
// IEEE binary16 (Scales16, Zeros16) or, with FP32Meta, float32 (Scales32,
// Zeros32). A matrix used with int8 activations (A8) needs integer zero
// points.
//
// # Offsets and act-order (imported matrices)
//
// With Offsets the zero slots hold additive offsets o and
//
//	w = q * s + o      (exact in float64)
//
// the form of llama.cpp's Q4_1 and Q4_K blocks, which no zero point
// represents exactly. Such matrices multiply float activations only.
//
// Perm, when not nil, permutes the columns (GPTQ act-order): stored column
// j holds source column Perm[j], so that each group is contiguous.
// Multiplies gather x[Perm[j]] once per call; Dequantize, DotRef and
// DotRefMag work in source column order, DotA8Exact on the gathered
// (stored-order) activations.
type Bits struct {
	Rows, Cols   int
	PRows, PCols int
	N            int     // bits per weight: 8, 4, 3, 2 or 1
	G            int     // group size in columns (PCols for whole-row groups)
	WholeRow     bool    // G spans the (padded) row
	Offsets      bool    // zero slots hold offsets: w = q*s + o
	Perm         []int32 // act-order column permutation (nil: identity)

	Words []uint32
	GroupMeta
}

// GroupMeta stores one scale and one zero point per (row, group), group
// major: the pair of (row r, group g) is at index g*PRows + r, as binary16
// or, with FP32Meta, float32. Bits and Sparse12 embed it.
type GroupMeta struct {
	FP32Meta          bool      // float32 instead of binary16
	Scales16, Zeros16 []FP16    // without FP32Meta
	Scales32, Zeros32 []float32 // with FP32Meta
}

func newGroupMeta(n int, fp32 bool) GroupMeta {
	if fp32 {
		return GroupMeta{FP32Meta: true, Scales32: make([]float32, n), Zeros32: make([]float32, n)}
	}
	return GroupMeta{Scales16: make([]FP16, n), Zeros16: make([]FP16, n)}
}

func (m *GroupMeta) scale(i int) float32 {
	if m.FP32Meta {
		return m.Scales32[i]
	}
	return m.Scales16[i].Float32()
}

func (m *GroupMeta) zero(i int) float32 {
	if m.FP32Meta {
		return m.Zeros32[i]
	}
	return m.Zeros16[i].Float32()
}

// set stores scale and zero (already representable) at index i.
func (m *GroupMeta) set(i int, s, z float32) {
	if m.FP32Meta {
		m.Scales32[i], m.Zeros32[i] = s, z
	} else {
		m.Scales16[i], m.Zeros16[i] = ToFP16(s), ToFP16(z)
	}
}

// metaBytes returns the bytes of n (scale, zero) pairs.
func (m *GroupMeta) metaBytes(n int) int64 {
	if m.FP32Meta {
		return 8 * int64(n)
	}
	return 4 * int64(n)
}

// validate checks the lengths (prows*groups pairs) and that every value
// is finite.
func (m *GroupMeta) validate(name string, groups, prows int) error {
	n := groups * prows
	if m.FP32Meta {
		if len(m.Scales32) != n || len(m.Zeros32) != n || m.Scales16 != nil || m.Zeros16 != nil {
			return fmt.Errorf("layout: %s: float32 metadata: %d scales, %d zeros, want %d each (and no binary16 metadata)", name, len(m.Scales32), len(m.Zeros32), n)
		}
	} else if len(m.Scales16) != n || len(m.Zeros16) != n || m.Scales32 != nil || m.Zeros32 != nil {
		return fmt.Errorf("layout: %s: binary16 metadata: %d scales, %d zeros, want %d each (and no float32 metadata)", name, len(m.Scales16), len(m.Zeros16), n)
	}
	for i := 0; i < n; i++ {
		if s, z := m.scale(i), m.zero(i); isBad(s) || isBad(z) {
			return fmt.Errorf("layout: %s: row %d group %d: scale %v, zero %v (want finite)", name, i%prows, i/prows, s, z)
		}
	}
	return nil
}

// integerZeros returns an error naming the first fractional zero point of
// the true rows.
func (m *GroupMeta) integerZeros(name string, groups, prows, rows int) error {
	for g := 0; g < groups; g++ {
		for r := 0; r < rows; r++ {
			if z := m.zero(g*prows + r); z != float32(math.Round(float64(z))) || math.Abs(float64(z)) > 1<<16 {
				return fmt.Errorf("layout: %s: int8 activations need integer zero points; row %d group %d has zero %v (quantize with IntegerZero)", name, r, g, z)
			}
		}
	}
	return nil
}

// BitWidths lists the supported weight widths.
var BitWidths = []int{8, 4, 3, 2, 1}

// BitsGroups lists the supported group sizes; 0 means the whole row.
var BitsGroups = []int{32, 64, 128, 256, 0}

// BitsStep returns the elements per 32-bit word for n-bit weights, n one
// of BitWidths (0 for another n).
func BitsStep(n int) int {
	if n < 1 || n > 32 {
		return 0
	}
	return 32 / n
}

// BitsChunk returns E, the columns one 32-word chunk holds.
func BitsChunk(n int) int { return 32 * BitsStep(n) }

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }

// BitsShape checks n, g (0 = whole row) and the shape, and returns the
// padded shape and the group size.
func BitsShape(rows, cols, n, g int) (prows, pcols, group int, err error) {
	if err := CheckDims(rows, cols); err != nil {
		return 0, 0, 0, err
	}
	okN := false
	for _, v := range BitWidths {
		okN = okN || v == n
	}
	if !okN {
		return 0, 0, 0, fmt.Errorf("layout: Bits: %d-bit weights unsupported (want 8, 4, 3, 2 or 1)", n)
	}
	okG := false
	for _, v := range BitsGroups {
		okG = okG || v == g
	}
	if !okG {
		return 0, 0, 0, fmt.Errorf("layout: Bits: group size %d unsupported (want 32, 64, 128, 256, or 0 for the whole row)", g)
	}
	unit := lcm(BitsChunk(n), GroupSize)
	if g != 0 {
		unit = lcm(unit, g)
	}
	pcols = (cols + unit - 1) / unit * unit
	prows = (rows + 15) / 16 * 16
	group = g
	if g == 0 {
		group = pcols
	}
	return prows, pcols, group, nil
}

// NewBits allocates a zero Bits matrix.
func NewBits(rows, cols, n, g int, fp32Meta bool) (*Bits, error) {
	return NewBitsWords(rows, cols, n, g, fp32Meta, nil)
}

// NewBitsWords is NewBits with the code words taken from words: it is
// called once with their count and must return that many zero words,
// which the matrix then uses (memory the caller manages, such as a
// backend's huge pages, so that filling the matrix is its only copy).
// A nil words allocates them on the Go heap.
func NewBitsWords(rows, cols, n, g int, fp32Meta bool, words func(n int) []uint32) (*Bits, error) {
	b, err := newBitsHeader(rows, cols, n, g, fp32Meta)
	if err != nil {
		return nil, err
	}
	cnt := b.PRows * b.WordsPerRow()
	if words == nil {
		if err := checkBytes(b.Name(), rows, cols, 4*uint64(cnt)+uint64(b.metaBytes(b.Groups()*b.PRows))); err != nil {
			return nil, err
		}
		b.Words = make([]uint32, cnt)
		return b, nil
	}
	if b.Words = words(cnt); len(b.Words) != cnt {
		return nil, fmt.Errorf("layout: %s %dx%d: the words function returned %d words, want %d", b.Name(), rows, cols, len(b.Words), cnt)
	}
	return b, nil
}

// newBitsHeader is NewBits without the words (Words nil).
func newBitsHeader(rows, cols, n, g int, fp32Meta bool) (*Bits, error) {
	prows, pcols, group, err := BitsShape(rows, cols, n, g)
	if err != nil {
		return nil, err
	}
	b := &Bits{Rows: rows, Cols: cols, PRows: prows, PCols: pcols, N: n, G: group, WholeRow: g == 0, GroupMeta: GroupMeta{FP32Meta: fp32Meta}}
	if err := checkBytes(b.Name(), rows, cols, uint64(b.metaBytes(b.Groups()*prows))); err != nil {
		return nil, err
	}
	b.GroupMeta = newGroupMeta(b.Groups()*prows, fp32Meta)
	return b, nil
}

// WordsPerRow returns the 32-bit words of one row.
func (b *Bits) WordsPerRow() int { return 32 * b.PCols / max(1, BitsChunk(b.N)) }

// Groups returns the groups per row.
func (b *Bits) Groups() int { return b.PCols / max(1, b.G) }

// Name returns the format's name, e.g. "Bits4G128" or "Bits2Row".
func (b *Bits) Name() string {
	if b.WholeRow {
		return fmt.Sprintf("Bits%dRow", b.N)
	}
	return fmt.Sprintf("Bits%dG%d", b.N, b.G)
}

// wordIndex returns the word and bit shift of column c in row r.
func (b *Bits) wordIndex(r, c int) (int, uint) {
	e := BitsChunk(b.N)
	k, o := c/e, c%e
	i, t := o/32, o%32
	return r*b.WordsPerRow() + k*32 + t, uint(32 - b.N*(i+1))
}

// Q returns the code at row r, column c (padded coordinates).
func (b *Bits) Q(r, c int) uint32 {
	w, sh := b.wordIndex(r, c)
	return b.Words[w] >> sh & (1<<b.N - 1)
}

// SetQ stores code q (< 2^n) at row r, column c.
func (b *Bits) SetQ(r, c int, q uint32) {
	w, sh := b.wordIndex(r, c)
	mask := uint32(1<<b.N-1) << sh
	b.Words[w] = b.Words[w]&^mask | q<<sh&mask
}

// Scale returns the scale of row r, group g.
func (b *Bits) Scale(r, g int) float32 { return b.scale(g*b.PRows + r) }

// Zero returns the zero point of row r, group g (with Offsets: the
// offset o).
func (b *Bits) Zero(r, g int) float32 { return b.zero(g*b.PRows + r) }

// Affine returns s and m with w = q*s - m for row r, group g, the form
// float kernels use: m = float32(s*z) (rounded once) for zero points,
// m = -o exactly for Offsets.
func (b *Bits) Affine(r, g int) (s, m float32) {
	s, z := b.Scale(r, g), b.Zero(r, g)
	if b.Offsets {
		return s, -z
	}
	return s, s * z
}

// SourceCol returns the source column of stored column c (Perm[c], or c).
func (b *Bits) SourceCol(c int) int {
	if b.Perm != nil {
		return int(b.Perm[c])
	}
	return c
}

// Gather writes the Cols activations of x in stored column order into dst
// (dst[j] = x[Perm[j]]; a copy without Perm). dst or x shorter than Cols,
// or a Perm entry outside them, is an error.
func (b *Bits) Gather(dst, x []float32) error {
	if len(dst) < b.Cols || len(x) < b.Cols {
		return fmt.Errorf("layout: %s: Gather of %d columns into %d from %d values", b.Name(), b.Cols, len(dst), len(x))
	}
	if b.Perm == nil {
		copy(dst[:b.Cols], x[:b.Cols])
		return nil
	}
	x = x[:b.Cols]
	for j, p := range b.Perm {
		if j >= len(dst) || p < 0 || int(p) >= len(x) {
			return fmt.Errorf("layout: %s: Perm[%d] = %d outside the %d columns", b.Name(), j, p, b.Cols)
		}
		dst[j] = x[p]
	}
	return nil
}

// StreamBytes returns the bytes a GEMV reads from the matrix.
func (b *Bits) StreamBytes() int64 {
	return 4*int64(len(b.Words)) + b.metaBytes(b.Groups()*b.PRows)
}

// BitsPerWeight returns the storage cost per true weight, metadata
// included.
func (b *Bits) BitsPerWeight() float64 {
	return 8 * float64(b.StreamBytes()) / float64(b.Rows*b.Cols)
}

// Validate checks every dimension, slice length and metadata value.
func (b *Bits) Validate() error {
	if err := b.ValidateHeader(); err != nil {
		return err
	}
	if want := b.PRows * b.WordsPerRow(); len(b.Words) != want {
		return fmt.Errorf("layout: %s: %d weight words, want %d", b.Name(), len(b.Words), want)
	}
	if b.N == 3 { // the spare top 2 bits of each word must be zero
		for i, w := range b.Words {
			if w&3 != 0 {
				return fmt.Errorf("layout: %s: word %d has nonzero spare bits", b.Name(), i)
			}
		}
	}
	return nil
}

// ValidateHeader checks everything Validate does but the words: the
// shape, the group, the metadata and the permutation. Formats that store
// the words in another form (layout/ans's entropy-coded Bits) use it.
func (b *Bits) ValidateHeader() error {
	if b == nil {
		return errors.New("layout: Bits is nil")
	}
	g := b.G
	if b.WholeRow {
		g = 0
	}
	prows, pcols, group, err := BitsShape(b.Rows, b.Cols, b.N, g)
	if err != nil {
		return err
	}
	if prows != b.PRows || pcols != b.PCols || group != b.G {
		return fmt.Errorf("layout: %s: padded shape %dx%d group %d, want %dx%d group %d", b.Name(), b.PRows, b.PCols, b.G, prows, pcols, group)
	}
	if err := b.validate(b.Name(), b.Groups(), b.PRows); err != nil {
		return err
	}
	if b.Perm != nil {
		if len(b.Perm) != b.Cols {
			return fmt.Errorf("layout: %s: column permutation has %d entries, want %d", b.Name(), len(b.Perm), b.Cols)
		}
		seen := make([]bool, b.Cols)
		for j, p := range b.Perm {
			if p < 0 || int(p) >= b.Cols || seen[p] {
				return fmt.Errorf("layout: %s: column permutation entry %d is %d: not a permutation of 0..%d", b.Name(), j, p, b.Cols-1)
			}
			seen[p] = true
		}
	}
	return nil
}

func isBad(f float32) bool { return f != f || f > math.MaxFloat32 || f < -math.MaxFloat32 }

// IntegerZeros returns an error naming the first fractional zero point:
// int8 activations (A8) need integer zero points.
func (b *Bits) IntegerZeros() error {
	if b.Offsets {
		return fmt.Errorf("layout: %s: int8 activations need integer zero points; this matrix stores offsets (w = q*s + o, as imported from Q4_1/Q4_K): use float activations", b.Name())
	}
	return b.integerZeros(b.Name(), b.Groups(), b.PRows, b.Rows)
}

// Dequantize returns the Rows x Cols float32 matrix: (q - z) * s rounded
// once to float32.
func (b *Bits) Dequantize() []float32 {
	out := make([]float32, b.Rows*b.Cols)
	for r := 0; r < b.Rows; r++ {
		for c := 0; c < b.Cols; c++ {
			out[r*b.Cols+b.SourceCol(c)] = float32(b.weight64(r, c))
		}
	}
	return out
}

// weight64 returns the exact weight at stored column c.
func (b *Bits) weight64(r, c int) float64 {
	g := c / b.G
	if b.Offsets {
		return float64(float64(b.Q(r, c))*float64(b.Scale(r, g))) + float64(b.Zero(r, g))
	}
	return (float64(b.Q(r, c)) - float64(b.Zero(r, g))) * float64(b.Scale(r, g))
}

// DotRef computes out[r] = sum_c w[r,c]*x[c] in float64 with the exact
// weights, for every true row.
func (b *Bits) DotRef(out []float64, x []float32) error {
	if err := b.Validate(); err != nil {
		return err
	}
	if len(x) != b.Cols || len(out) != b.Rows {
		return fmt.Errorf("layout: %s: DotRef: x %d, out %d elements, want %d, %d", b.Name(), len(x), len(out), b.Cols, b.Rows)
	}
	for r := 0; r < b.Rows; r++ {
		var acc float64
		for c := 0; c < b.Cols; c++ {
			acc += float64(b.weight64(r, c) * float64(x[b.SourceCol(c)]))
		}
		out[r] = acc
	}
	return nil
}

// DotRefMag computes mag[r] = sum_c |s|(|q| + |z|)|x[c]|, the magnitude
// float-path errors are normalized by.
func (b *Bits) DotRefMag(mag []float64, x []float32) error {
	if err := b.Validate(); err != nil {
		return err
	}
	if len(x) != b.Cols || len(mag) != b.Rows {
		return fmt.Errorf("layout: %s: DotRefMag: x %d, mag %d elements, want %d, %d", b.Name(), len(x), len(mag), b.Cols, b.Rows)
	}
	for r := 0; r < b.Rows; r++ {
		var acc float64
		for c := 0; c < b.Cols; c++ {
			g := c / b.G
			s, z := math.Abs(float64(b.Scale(r, g))), math.Abs(float64(b.Zero(r, g)))
			t := s * (float64(b.Q(r, c)) + z)
			if b.Offsets {
				t = float64(s*float64(b.Q(r, c))) + z
			}
			acc += float64(t * math.Abs(float64(x[b.SourceCol(c)])))
		}
		mag[r] = acc
	}
	return nil
}

// BitsTolerance bounds the float paths (A32, A16 after widening) of every
// backend for Bits and Sparse12: |y - ref| <= BitsTolerance * mag, for
// rows of up to MaxBoundGroups groups; a longer row adds up to 2^-24 * mag
// per further group, as for A32Tolerance.
const BitsTolerance = 3e-5

// A8Block returns the column block of the exact int8-activation result:
// min(G, 128) columns, so each block lies in one weight group and one
// activation group.
func (b *Bits) A8Block() int { return min(b.G, GroupSize) }

// DotA8Exact computes the exact W(n)A8 result for every true row: over the
// blocks of A8Block columns in order,
//
//	isum = sum q*xq - z*sum xq                (int32, z integer)
//	acc  = acc + float32(s*xs[a]) * float32(isum)
//
// each float operation rounded to float32, with a the block's activation
// group (column/128). xq has PCols values, xs PCols/128, in stored
// column order (quantized from the Gathered activations).
func (b *Bits) DotA8Exact(out []float32, xq []int8, xs []float32) error {
	if err := b.Validate(); err != nil {
		return err
	}
	if len(xq) != b.PCols || len(xs) != b.PCols/GroupSize || len(out) != b.Rows {
		return fmt.Errorf("layout: %s: DotA8Exact: xq %d, xs %d, out %d, want %d, %d, %d", b.Name(), len(xq), len(xs), len(out), b.PCols, b.PCols/GroupSize, b.Rows)
	}
	if err := b.IntegerZeros(); err != nil {
		return err
	}
	blk := b.A8Block()
	for r := 0; r < b.Rows; r++ {
		var acc float32
		for c0 := 0; c0 < b.PCols; c0 += blk {
			g := c0 / b.G
			var dot, sx int32
			for c := c0; c < c0+blk; c++ {
				dot += int32(b.Q(r, c)) * int32(xq[c])
				sx += int32(xq[c])
			}
			isum := dot - int32(b.Zero(r, g))*sx
			f := float32(b.Scale(r, g) * xs[c0/GroupSize])
			acc = float32(acc + float32(f*float32(isum)))
		}
		out[r] = acc
	}
	return nil
}
