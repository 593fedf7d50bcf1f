// Package hfquant imports weights already quantized by GPTQ, AWQ and HQQ
// (as stored in Hugging Face safetensors checkpoints) into layout.Bits
// without re-quantizing: the codes, scales and zero points are copied, so
// the dequantized weights equal the source format's definition exactly.
//
// # GPTQ (AutoGPTQ / GPTQModel "gptq" checkpoints)
//
// For a linear layer with In inputs, Out outputs, b bits (2, 3, 4, 8) and
// group size G:
//
//	qweight int32 [In*b/32, Out]  codes packed along the input
//	qzeros  int32 [groups, Out*b/32]  zero points packed along the output
//	scales  fp16  [groups, Out]
//	g_idx   int32 [In]  (optional) group of each input column
//
//	w[o, i] = scales[g, o] * (q[i, o] - (z[g, o] + ZeroOffset)),  g = g_idx[i] (or i/G)
//
// For b in 2, 4, 8, code i of a column is bits b*(i mod 32/b) upwards of
// word i/(32/b); for b = 3, 32 codes fill 3 words as one little-endian bit
// stream (code j at bit 3j). qzeros use the same packing along the output.
// ZeroOffset is 1 for the original "gptq" checkpoint format (it stores
// z - 1) and 0 for "gptq_v2". The offset is added without wrapping, as
// the exllama and vLLM kernels that serve these checkpoints compute it:
// a stored 2^b - 1 means z = 2^b. (AutoGPTQ's Triton path masks it to 0
// instead. A v1 packer cannot store a true z = 0 cleanly: its z - 1 = -1
// sets the bits of the zeros packed above it, which is why gptq_v2
// exists.)
//
// Act-order (desc_act) checkpoints have a g_idx that is not i/G. The
// import sorts the input columns by group (stably), stores the weights in
// that order and records the permutation in Bits.Perm: multiplies permute
// the activation vector once per call, never the weights.
//
// # AWQ (llm-awq / AutoAWQ GEMM checkpoints)
//
//	qweight int32 [In, Out/8]  codes packed along the output
//	qzeros  int32 [groups, Out/8]
//	scales  fp16  [groups, Out]
//	w[o, i] = scales[i/G, o] * (q[i, o] - z[i/G, o])
//
// Word k of a row holds outputs 8k..8k+7 with output 8k+j in nibble
// AWQOrder[j] (bits 4*AWQOrder[j] upwards): AWQ's interleaved order.
//
// # HQQ (axis = 1)
//
// HQQ quantizes W (Rows x Cols, row-major) in groups of G consecutive
// elements: W reshaped to N x G, N = Rows*Cols/G, with per-row scale and
// zero (N values each, fp16/bf16/fp32; zero may be fractional):
//
//	w = (W_q - zero) * scale
//
// W_q is packed along its first dimension: with P codes per container
// (8-bit: 1 in a uint8, 4-bit: 2, 2-bit: 4, 1-bit: 8 in a uint8, 3-bit: 10
// in an int32) and S = ceil(N/P) packed rows, code (n, k) is field n/S of
// packed element (n mod S, k), field f at bit offset (P-1-f)*b (3-bit: 27,
// 24, ..., 0).
//
// # Exactness
//
// The Bits weight is the exact real value (q - z)*s, rounded once to
// float32 by Dequantize. Every product above is of a small integer and an
// fp16 (or bf16) value and is exact in float32, so Dequantize reproduces
// the formulas bit for bit; reference PyTorch code evaluating them in fp16
// rounds (HQQ's fractional zeros twice) and can differ by that rounding.
package hfquant

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/qgemv/qgemv/layout"
)

// AWQOrder maps output j of a packed word (0..7) to its nibble.
var AWQOrder = [8]int{0, 4, 1, 5, 2, 6, 3, 7}

// GPTQ is a GPTQ layer's tensors, as stored.
type GPTQ struct {
	In, Out    int
	Bits       int     // 2, 3, 4 or 8
	QWeight    []int32 // In*Bits/32 x Out
	QZeros     []int32 // groups x Out*Bits/32
	Scales     []layout.FP16
	GIdx       []int32 // In, or nil
	ZeroOffset int     // added to the stored zeros: 1 for "gptq", 0 for "gptq_v2"
	// Words, if set, supplies the result's code words
	// (layout.NewBitsWords); nil allocates them.
	Words func(n int) []uint32
}

// AWQ is an AWQ (GEMM) layer's tensors, as stored; 4-bit.
type AWQ struct {
	In, Out int
	QWeight []int32 // In x Out/8
	QZeros  []int32 // groups x Out/8
	Scales  []layout.FP16
	Words   func(n int) []uint32 // as GPTQ.Words
}

// HQQ is an HQQ layer quantized along axis 1.
type HQQ struct {
	Rows, Cols int
	Bits       int // 8, 4, 3, 2 or 1
	Group      int
	WQ         []uint32  // packed W_q elements (uint8 or int32 values), S x Group
	Scale      []float32 // N = Rows*Cols/Group
	Zero       []float32
	Words      func(n int) []uint32 // as GPTQ.Words
}

func errf(format string, a ...any) error { return fmt.Errorf("hfquant: "+format, a...) }

// unpack returns code j of a packed sequence of b-bit codes stored in
// 32-bit words (b in 2, 4, 8: 32/b per word from bit 0; b = 3: a bit
// stream of 32 codes per 3 words). words(k) returns word k.
func unpack(words func(k int) uint32, b, j int) uint32 {
	mask := uint32(1)<<b - 1
	if b != 3 {
		per := 32 / b
		return words(j/per) >> (b * (j % per)) & mask
	}
	base, bit := j/32*3, 3*(j%32)
	w, off := base+bit/32, bit%32
	v := words(w) >> off
	if off > 29 {
		v |= words(w+1) << (32 - off)
	}
	return v & mask
}

// packedLen returns the words holding n codes of b bits.
func packedLen(n, b int) (int, error) {
	switch b {
	case 2, 4, 8:
		if n%(32/b) != 0 {
			return 0, errf("%d values are not a whole number of %d-bit words", n, b)
		}
		return n * b / 32, nil
	case 3:
		if n%32 != 0 {
			return 0, errf("3-bit packing needs a multiple of 32 values, got %d", n)
		}
		return n / 32 * 3, nil
	}
	return 0, errf("%d-bit GPTQ is not supported (2, 3, 4, 8)", b)
}

// bitsGroup maps a group size to the Bits group parameter.
func bitsGroup(in, groups int) (int, error) {
	if groups < 1 || in%groups != 0 {
		return 0, errf("%d input columns do not split into %d groups", in, groups)
	}
	g := in / groups
	if groups == 1 {
		return 0, nil // whole row
	}
	for _, ok := range layout.BitsGroups {
		if ok == g {
			return g, nil
		}
	}
	return 0, errf("group size %d is not supported by Bits (32, 64, 128, 256 or the whole row)", g)
}

func checkLen(name string, got, want int) error {
	if got != want {
		return errf("%s has %d values, want %d", name, got, want)
	}
	return nil
}

func checkDims(in, out int) error {
	if in < 1 || out < 1 || in > layout.MaxDim || out > layout.MaxDim {
		return errf("shape %d inputs x %d outputs out of range", in, out)
	}
	// the element bound too: the layer's sizes (out*in/group codes and
	// groups) are ints, 32-bit ones on some platforms
	if err := layout.CheckDims(out, in); err != nil {
		return errf("shape %d inputs x %d outputs: %v", in, out, err)
	}
	return nil
}

// FromGPTQ converts a GPTQ layer into Bits(Bits, G) with binary16
// metadata (integer zero points, so int8 activations work).
func FromGPTQ(q GPTQ) (*layout.Bits, error) {
	if err := checkDims(q.In, q.Out); err != nil {
		return nil, err
	}
	wr, err := packedLen(q.In, q.Bits)
	if err != nil {
		return nil, fmt.Errorf("%w (qweight rows)", err)
	}
	zc, err := packedLen(q.Out, q.Bits)
	if err != nil {
		return nil, fmt.Errorf("%w (qzeros columns)", err)
	}
	if err := checkLen("qweight", len(q.QWeight), wr*q.Out); err != nil {
		return nil, err
	}
	if len(q.Scales) == 0 || len(q.Scales)%q.Out != 0 {
		return nil, errf("scales has %d values, not a multiple of %d outputs", len(q.Scales), q.Out)
	}
	groups := len(q.Scales) / q.Out
	if err := checkLen("qzeros", len(q.QZeros), groups*zc); err != nil {
		return nil, err
	}
	g, err := bitsGroup(q.In, groups)
	if err != nil {
		return nil, err
	}
	if q.ZeroOffset < 0 || q.ZeroOffset > 1 {
		return nil, errf("zero offset %d (want 0 or 1)", q.ZeroOffset)
	}
	perm, err := groupOrder(q.GIdx, q.In, groups)
	if err != nil {
		return nil, err
	}
	b, err := layout.NewBitsWords(q.Out, q.In, q.Bits, g, false, q.Words)
	if err != nil {
		return nil, err
	}
	b.Perm = perm
	whole := q.In%layout.BitsChunk(q.Bits) == 0 && b.PCols == q.In // every row whole chunks
	if perm == nil && q.Bits != 3 && whole {
		for o := 0; o < q.Out; o += gptqTile {
			gptqRows(b.Words, b.WordsPerRow(), q.QWeight, q.Out, o, q.Bits)
		}
	} else {
		// Codes of unpackTile outputs at a time (each qweight line read
		// once), then per output the words, through the permutation.
		tile, codes := make([]uint8, unpackTile*q.In), make([]uint8, q.In)
		wpr := b.WordsPerRow()
		for o0 := 0; o0 < q.Out; o0 += unpackTile {
			n := min(unpackTile, q.Out-o0)
			unpackColumns(tile, q.QWeight, q.Out, o0, n, q.In, q.Bits)
			for v := 0; v < n; v++ {
				row := tile[v*q.In : (v+1)*q.In]
				if perm != nil && whole {
					packPermuted(b.Words[(o0+v)*wpr:(o0+v+1)*wpr], row, perm, q.Bits)
					continue
				}
				if perm != nil {
					for j, p := range perm {
						codes[j] = row[p]
					}
					row = codes
				}
				if err := b.PackRow(o0+v, row); err != nil {
					return nil, err
				}
			}
		}
	}
	// Group by group, output by output: each walks the tensors' rows in
	// order.
	for gi := 0; gi < groups; gi++ {
		row := func(k int) uint32 { return uint32(q.QZeros[gi*zc+k]) }
		for o := 0; o < q.Out; o++ {
			z := float32(unpack(row, q.Bits, o)) + float32(q.ZeroOffset)
			s := q.Scales[gi*q.Out+o]
			if !finite(s.Float32()) {
				return nil, errf("scale of output %d group %d is %v", o, gi, s.Float32())
			}
			// Stored columns are sorted by group: group gi is Bits group gi.
			b.Scales16[gi*b.PRows+o] = s
			b.Zeros16[gi*b.PRows+o] = layout.ToFP16(z)
		}
	}
	return b, b.Validate()
}

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// gptqTile is how many outputs gptqRows converts at once. (Output by
// output, the qweight rows' power-of-two stride kept a row's words from
// staying in cache for the next output.)
const gptqTile = 256

// gptqRows writes the Bits words (n = 2, 4 or 8 bits, step = 32/n codes
// a word, chunks of E = 32*step columns, wpr words a row) of outputs
// o0.. o0+gptqTile-1 (those below out) into words straight from n-bit
// GPTQ words, as unpackColumn and Bits.PackRow would: in chunk k, Bits
// word t holds columns 32i + t (i < step) with column 32i + t in element
// step-1-i (bits 32-n(i+1) up), and GPTQ word 32k + n*i + t/step holds
// them in element t%step. For each t/step = q the step GPTQ words i =
// step-1..0 are a step x step matrix of n-bit elements whose transpose
// is Bits words step*q ..step*q+step-1.
func gptqRows(words []uint32, wpr int, qw []int32, out, o0, n int) {
	m := min(gptqTile, out-o0)
	step := 32 / n
	var h [gptqTile][16]uint32 // h[v][j]: output o0+v's GPTQ word i = step-1-j
	for k := 0; k < wpr/32; k++ {
		for q := 0; q < n; q++ {
			for j := 0; j < step; j++ {
				src := qw[(32*k+n*(step-1-j)+q)*out+o0:][:m]
				for v, w := range src {
					h[v][j] = uint32(w)
				}
			}
			for v := 0; v < m; v++ {
				hv := h[v][:step]
				transposeBits(hv, n)
				copy(words[(o0+v)*wpr+32*k+step*q:][:step], hv)
			}
		}
	}
}

// transposeBits transposes the len(h) x len(h) matrix of n-bit elements
// in h (element c of row r at bits n*c of h[r]; len(h) = 32/n): swaps of
// blocks of 1, 2, 4.. elements between rows 1, 2, 4.. apart.
func transposeBits(h []uint32, n int) {
	switch n {
	case 4:
		transposeNibbles((*[8]uint32)(h))
		return
	case 8:
		h := (*[4]uint32)(h)
		swapBlocks(&h[0], &h[1], 8, 0x00ff00ff)
		swapBlocks(&h[2], &h[3], 8, 0x00ff00ff)
		swapBlocks(&h[0], &h[2], 16, 0x0000ffff)
		swapBlocks(&h[1], &h[3], 16, 0x0000ffff)
		return
	}
	for d := 1; d < len(h); d *= 2 {
		s := uint(n * d)
		m := blockMask[s]
		for r := 0; r < len(h); r++ {
			if r&d == 0 {
				swapBlocks(&h[r], &h[r+d], s, m)
			}
		}
	}
}

// swapBlocks swaps the high s bits of each 2s-bit block of *a with the
// low s bits of the same block of *b (m: blockMask[s]).
func swapBlocks(a, b *uint32, s uint, m uint32) {
	t := (*a>>s ^ *b) & m
	*b ^= t
	*a ^= t << s
}

// blockMask[s] has the low s bits of every 2s-bit block set.
var blockMask = [17]uint32{1: 0x55555555, 2: 0x33333333, 4: 0x0f0f0f0f, 8: 0x00ff00ff, 16: 0x0000ffff}

// transposeNibbles is transposeBits(h, 4), unrolled (the common case).
func transposeNibbles(h *[8]uint32) {
	for r := 0; r < 8; r += 2 {
		swapBlocks(&h[r], &h[r+1], 4, 0x0f0f0f0f)
	}
	for _, r := range [4]int{0, 1, 4, 5} {
		swapBlocks(&h[r], &h[r+2], 8, 0x00ff00ff)
	}
	for r := 0; r < 4; r++ {
		swapBlocks(&h[r], &h[r+4], 16, 0x0000ffff)
	}
}

// unpackTile is how many outputs unpackColumns unpacks at once: a
// cache line of each qweight row.
const unpackTile = 16

// unpackColumns writes the in codes of outputs o0..o0+n-1 into dst
// (output by output, in apart), as unpackColumn does for each: for 2, 4
// and 8 bits a qweight row's n words at a time, in order.
func unpackColumns(dst []uint8, qw []int32, out, o0, n, in, b int) {
	if b == 3 {
		for v := 0; v < n; v++ {
			unpackColumn(dst[v*in:(v+1)*in], qw, out, o0+v, b)
		}
		return
	}
	per, mask := 32/b, uint32(1)<<b-1
	for k := 0; k*per < in; k++ {
		for v, w := range qw[k*out+o0:][:n] {
			at := v*in + k*per
			if b == 4 && at+8 <= len(dst) && (k+1)*per <= in { // the nibbles spread to bytes
				x := uint64(uint32(w))
				x = (x | x<<16) & 0x0000ffff0000ffff
				x = (x | x<<8) & 0x00ff00ff00ff00ff
				x = (x | x<<4) & 0x0f0f0f0f0f0f0f0f
				binary.LittleEndian.PutUint64(dst[at:], x)
				continue
			}
			seg := dst[at : v*in+min(in, (k+1)*per)]
			for s := range seg {
				seg[s] = uint8(uint32(w) >> (b * s) & mask)
			}
		}
	}
}

// packPermuted writes row's Bits words (n bits, whole chunks) from the
// codes in source column order: stored column j is source column
// perm[j], and word t of chunk k holds stored columns 32i + t (i < 32/n)
// in element 32/n-1-i, as Bits.PackRow of the permuted codes would.
func packPermuted(row []uint32, codes []uint8, perm []int32, n int) {
	step := 32 / n
	mask := uint32(1)<<n - 1
	for k := 0; k < len(row)/32; k++ {
		pk := perm[32*step*k : 32*step*(k+1)]
		for t := 0; t < 32; t++ {
			var w uint32
			for i := 0; i < step; i++ {
				w = w<<n | uint32(codes[pk[32*i+t]])&mask
			}
			row[32*k+t] = w
		}
	}
}

// unpackColumn writes the len(dst) codes of output o into dst: column o
// of qw (out columns), b-bit codes packed along the input as unpack
// reads them, a word at a time for 2, 4 and 8 bits.
func unpackColumn(dst []uint8, qw []int32, out, o, b int) {
	if b == 3 {
		col := func(k int) uint32 { return uint32(qw[k*out+o]) }
		for j := range dst {
			dst[j] = uint8(unpack(col, 3, j))
		}
		return
	}
	per, mask := 32/b, uint32(1)<<b-1
	for k := 0; k*per < len(dst); k++ {
		w := uint32(qw[k*out+o])
		seg := dst[k*per : min(len(dst), (k+1)*per)]
		for s := range seg {
			seg[s] = uint8(w >> (b * s) & mask)
		}
	}
}

// groupOrder checks g_idx and returns the column permutation that makes
// every group contiguous, group gi at columns gi*G.., or nil when g_idx
// is absent or already i/G.
func groupOrder(gidx []int32, in, groups int) ([]int32, error) {
	if gidx == nil {
		return nil, nil
	}
	if len(gidx) != in {
		return nil, errf("g_idx has %d entries, want %d", len(gidx), in)
	}
	g := in / groups
	count := make([]int, groups)
	trivial := true
	for i, v := range gidx {
		if v < 0 || int(v) >= groups {
			return nil, errf("g_idx[%d] = %d outside 0..%d", i, v, groups-1)
		}
		count[v]++
		trivial = trivial && int(v) == i/g
	}
	for gi, c := range count {
		if c != g {
			return nil, errf("g_idx puts %d columns in group %d, want %d in each", c, gi, g)
		}
	}
	if trivial {
		return nil, nil
	}
	perm := make([]int32, in)
	for i := range perm {
		perm[i] = int32(i)
	}
	sort.SliceStable(perm, func(a, b int) bool { return gidx[perm[a]] < gidx[perm[b]] })
	return perm, nil
}

// FromAWQ converts an AWQ layer into Bits(4, G) with binary16 metadata.
func FromAWQ(q AWQ) (*layout.Bits, error) {
	if err := checkDims(q.In, q.Out); err != nil {
		return nil, err
	}
	if q.Out%8 != 0 {
		return nil, errf("AWQ needs outputs in multiples of 8, got %d", q.Out)
	}
	wc := q.Out / 8
	if err := checkLen("qweight", len(q.QWeight), q.In*wc); err != nil {
		return nil, err
	}
	if len(q.Scales) == 0 || len(q.Scales)%q.Out != 0 {
		return nil, errf("scales has %d values, not a multiple of %d outputs", len(q.Scales), q.Out)
	}
	groups := len(q.Scales) / q.Out
	if err := checkLen("qzeros", len(q.QZeros), groups*wc); err != nil {
		return nil, err
	}
	g, err := bitsGroup(q.In, groups)
	if err != nil {
		return nil, err
	}
	b, err := layout.NewBitsWords(q.Out, q.In, 4, g, false, q.Words)
	if err != nil {
		return nil, err
	}
	nib := func(w int32, o int) uint32 { return uint32(w) >> (4 * AWQOrder[o%8]) & 15 }
	if q.In%256 == 0 && b.PCols == q.In {
		for w := 0; w < wc; w += awq4Tile {
			awq4Rows(b.Words, b.WordsPerRow(), q.QWeight, wc, w)
		}
	} else {
		codes := make([]uint8, q.In)
		for o := 0; o < q.Out; o++ {
			sh := 4 * AWQOrder[o%8]
			for i := range codes {
				codes[i] = uint8(uint32(q.QWeight[i*wc+o/8]) >> sh & 15)
			}
			if err := b.PackRow(o, codes); err != nil {
				return nil, err
			}
		}
	}
	for gi := 0; gi < groups; gi++ {
		for o := 0; o < q.Out; o++ {
			s := q.Scales[gi*q.Out+o]
			if !finite(s.Float32()) {
				return nil, errf("scale of output %d group %d is %v", o, gi, s.Float32())
			}
			b.Scales16[gi*b.PRows+o] = s
			b.Zeros16[gi*b.PRows+o] = layout.ToFP16(float32(nib(q.QZeros[gi*wc+o/8], o)))
		}
	}
	return b, b.Validate()
}

// awq4Tile is how many AWQ words of a qweight row (8 outputs each)
// awq4Rows converts at once.
const awq4Tile = 32

// awq4Rows writes the Bits words (256-column chunks, wpr a row) of the
// outputs of AWQ words w0.. w0+awq4Tile-1 of each qweight row (those
// below wc) into words: Bits word t of chunk k holds inputs 256k + 32i + t
// (i = 0..7) in nibble 7 - i, and qweight word (input, w) holds output
// 8w + j in nibble AWQOrder[j]. The eight words of inputs i = 7..0 at t
// are an 8x8 matrix of nibbles whose transpose's row AWQOrder[j] is
// output 8w + j's Bits word (gptqRows does the same along the input).
func awq4Rows(words []uint32, wpr int, qw []int32, wc, w0 int) {
	n := min(awq4Tile, wc-w0)
	var h [awq4Tile][8]uint32
	for k := 0; k < wpr/32; k++ {
		for t := 0; t < 32; t++ {
			for j := 0; j < 8; j++ {
				src := qw[(256*k+32*(7-j)+t)*wc+w0:][:n]
				for v, w := range src {
					h[v][j] = uint32(w)
				}
			}
			for v := 0; v < n; v++ {
				transposeNibbles(&h[v])
				for j, p := range AWQOrder {
					words[(8*(w0+v)+j)*wpr+32*k+t] = h[v][p]
				}
			}
		}
	}
}

// hqqPack returns the codes per container of HQQ's packing for b bits.
func hqqPack(b int) (int, error) {
	switch b {
	case 8:
		return 1, nil
	case 4:
		return 2, nil
	case 3:
		return 10, nil
	case 2:
		return 4, nil
	case 1:
		return 8, nil
	}
	return 0, errf("%d-bit HQQ is not supported (8, 4, 3, 2, 1)", b)
}

// HQQPackedRows returns S, the packed rows of W_q for n rows of codes.
func HQQPackedRows(n, bits int) (int, error) {
	p, err := hqqPack(bits)
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, errf("HQQ packing of %d code rows (want at least 1)", n)
	}
	if bits == 3 {
		return (n + 9) / 10, nil
	}
	if n%p != 0 {
		return 0, errf("HQQ %d-bit packing needs a multiple of %d code rows, got %d", bits, p, n)
	}
	return n / p, nil
}

// FromHQQ converts an HQQ layer into Bits(Bits, Group): binary16
// metadata when every scale and zero is exactly a binary16 value, float32
// otherwise (bf16 and fp32 checkpoints).
func FromHQQ(q HQQ) (*layout.Bits, error) {
	if err := checkDims(q.Cols, q.Rows); err != nil {
		return nil, err
	}
	p, err := hqqPack(q.Bits)
	if err != nil {
		return nil, err
	}
	if q.Group < 1 || q.Cols%q.Group != 0 {
		return nil, errf("group size %d does not divide the %d columns (only axis=1 grouping within rows is supported)", q.Group, q.Cols)
	}
	n := q.Rows * q.Cols / q.Group
	s, err := HQQPackedRows(n, q.Bits)
	if err != nil {
		return nil, err
	}
	if err := checkLen("W_q", len(q.WQ), s*q.Group); err != nil {
		return nil, err
	}
	if err := checkLen("scale", len(q.Scale), n); err != nil {
		return nil, err
	}
	if err := checkLen("zero", len(q.Zero), n); err != nil {
		return nil, err
	}
	g, err := bitsGroup(q.Cols, q.Cols/q.Group)
	if err != nil {
		return nil, err
	}
	fp16 := true
	for i := range q.Scale {
		if !finite(q.Scale[i]) || !finite(q.Zero[i]) {
			return nil, errf("group %d: scale %v, zero %v (want finite)", i, q.Scale[i], q.Zero[i])
		}
		fp16 = fp16 && layout.ToFP16(q.Scale[i]).Float32() == q.Scale[i] && layout.ToFP16(q.Zero[i]).Float32() == q.Zero[i]
	}
	b, err := layout.NewBitsWords(q.Rows, q.Cols, q.Bits, g, !fp16, q.Words)
	if err != nil {
		return nil, err
	}
	mask := uint32(1)<<q.Bits - 1
	gpr := q.Cols / q.Group
	codes := make([]uint8, q.Cols)
	for r := 0; r < q.Rows; r++ {
		for gi := 0; gi < gpr; gi++ {
			nn := r*gpr + gi
			f := nn / s
			sh := (p - 1 - f) * q.Bits
			wq := q.WQ[(nn%s)*q.Group : (nn%s+1)*q.Group]
			for k, v := range wq {
				codes[gi*q.Group+k] = uint8(v >> sh & mask)
			}
		}
		if err := b.PackRow(r, codes); err != nil {
			return nil, err
		}
		for gi := 0; gi < gpr; gi++ {
			i, nn := gi*b.PRows+r, r*gpr+gi
			if fp16 {
				b.Scales16[i], b.Zeros16[i] = layout.ToFP16(q.Scale[nn]), layout.ToFP16(q.Zero[nn])
			} else {
				b.Scales32[i], b.Zeros32[i] = q.Scale[nn], q.Zero[nn]
			}
		}
	}
	return b, b.Validate()
}
