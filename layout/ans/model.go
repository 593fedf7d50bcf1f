package ans

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"sort"
)

// Model constants: 7-bit probabilities, quads of 4 symbols coded with
// 28-bit precision, 64-bit states renormalized by 32-bit words.
const (
	ProbBits  = 7
	ProbScale = 1 << ProbBits // 128
	QuadBits  = 4 * ProbBits  // 28
	StateLow  = 1 << 31       // L: decoder states live in [L, 2^63)
	MaxSyms   = ProbScale     // at most 128 symbols (escape included)
	noSymbol  = -1
)

// Model is the i.i.d. probability mass function of a matrix's elements:
// NSym symbols with frequencies Freq[k] >= 1 summing to 128 (probability
// Freq[k]/128), symbol k covering the slot digits Cum[k] .. Cum[k]+Freq[k]-1
// in symbol order. Symbol k stands for the int8 Value[k], except symbol
// Escape (when >= 0), which stands for "the next value of the escape list".
type Model struct {
	NSym   int
	Value  [MaxSyms]int8
	Freq   [MaxSyms]uint8 // 1..128
	Escape int            // index of the escape symbol, or -1

	Cum   [MaxSyms]uint8   // derived: Cum[k] = sum of Freq[j], j < k
	PPF   [ProbScale]uint8 // derived: slot digit -> symbol (the percent-point table)
	index [256]int16       // derived: int8 value + 128 -> symbol, or -1 (escaped)
}

// ErrModel is wrapped by every error about an invalid model.
var ErrModel = errors.New("ans: invalid model")

// checkCounts checks the symbol count and the escape symbol's index.
func (m *Model) checkCounts() error {
	if m.NSym < 1 || m.NSym > MaxSyms {
		return fmt.Errorf("%w: %d symbols (1..%d)", ErrModel, m.NSym, MaxSyms)
	}
	if m.Escape < -1 || m.Escape >= m.NSym {
		return fmt.Errorf("%w: escape symbol %d of %d", ErrModel, m.Escape, m.NSym)
	}
	return nil
}

// finish checks the model and derives Cum, PPF and the value index. It
// writes them only where they differ from the model's, so that validating
// a model already in use (loaded by another engine, or decoded by a
// multiply) only reads it.
func (m *Model) finish() error {
	if err := m.checkCounts(); err != nil {
		return err
	}
	var (
		cum   [MaxSyms]uint8
		ppf   [ProbScale]uint8
		index [256]int16
	)
	for i := range index {
		index[i] = noSymbol
	}
	sum := 0
	for k := 0; k < m.NSym; k++ {
		f := int(m.Freq[k])
		if f < 1 {
			return fmt.Errorf("%w: symbol %d has frequency 0", ErrModel, k)
		}
		cum[k] = uint8(sum)
		for d := sum; d < sum+f && d < ProbScale; d++ {
			ppf[d] = uint8(k)
		}
		sum += f
		if k == m.Escape {
			continue
		}
		v := int(m.Value[k]) + 128
		if index[v] != noSymbol {
			return fmt.Errorf("%w: value %d appears twice", ErrModel, m.Value[k])
		}
		index[v] = int16(k)
	}
	if sum != ProbScale {
		return fmt.Errorf("%w: frequencies sum to %d, want %d", ErrModel, sum, ProbScale)
	}
	if m.Cum != cum || m.PPF != ppf || m.index != index {
		m.Cum, m.PPF, m.index = cum, ppf, index
	}
	return nil
}

// Check verifies, reading only (multiplies may run concurrently), that
// the model is valid and that its derived tables Cum and PPF are the ones
// its frequencies give: what the decoders index by. A model changed after
// Validate (or never validated) is an error wrapping ErrModel, not an
// index out of range.
func (m *Model) Check() error {
	if err := m.checkCounts(); err != nil {
		return err
	}
	sum := 0
	for k := 0; k < m.NSym; k++ {
		if m.Freq[k] < 1 || int(m.Cum[k]) != sum {
			return fmt.Errorf("%w: symbol %d: frequency %d, cumulative %d, want >= 1 and %d", ErrModel, k, m.Freq[k], m.Cum[k], sum)
		}
		sum += int(m.Freq[k])
	}
	if sum != ProbScale {
		return fmt.Errorf("%w: frequencies sum to %d, want %d", ErrModel, sum, ProbScale)
	}
	for d, k := range m.PPF {
		if int(k) >= m.NSym || d < int(m.Cum[k]) || d >= int(m.Cum[k])+int(m.Freq[k]) {
			return fmt.Errorf("%w: slot %d maps to symbol %d, outside its range", ErrModel, d, k)
		}
	}
	return nil
}

// symbolOf returns the symbol coding value v (the escape symbol for an
// escaped value).
func (m *Model) symbolOf(v int8) int {
	if k := m.index[int(v)+128]; k != noSymbol {
		return int(k)
	}
	return m.Escape
}

// Bits returns the ideal coded size in bits of counts (per int8 value + 128)
// under m, escapes costing their symbol plus 8 raw bits.
func (m *Model) Bits(counts *[256]int64) float64 {
	if m == nil || counts == nil {
		return 0
	}
	var bits float64
	for v, n := range counts {
		if n == 0 {
			continue
		}
		k := int(m.index[v])
		raw := 0.0
		if k == noSymbol {
			k, raw = m.Escape, 8
		}
		bits += float64(float64(n) * (float64(7-log2Int[m.Freq[k]]) + raw)) // log2(128/f)
	}
	return bits
}

// Entropy returns the empirical entropy in bits of counts.
func Entropy(counts *[256]int64) float64 {
	if counts == nil {
		return 0
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	var h float64
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(n)
			h -= float64(float64(c) * math.Log2(p))
		}
	}
	return h
}

type gainHeap struct {
	n    []float64
	f    []int
	keys []int
}

func (h gainHeap) gain(k int) float64 {
	return h.n[k] * float64(log2Int[h.f[k]+1]-log2Int[h.f[k]])
}

func (h gainHeap) Len() int           { return len(h.keys) }
func (h gainHeap) Less(i, j int) bool { return h.gain(h.keys[i]) > h.gain(h.keys[j]) }
func (h gainHeap) Swap(i, j int)      { h.keys[i], h.keys[j] = h.keys[j], h.keys[i] }
func (h *gainHeap) Push(x any)        { h.keys = append(h.keys, x.(int)) }
func (h *gainHeap) Pop() any {
	k := h.keys[len(h.keys)-1]
	h.keys = h.keys[:len(h.keys)-1]
	return k
}

// log2Int[i] is log2(i) for i in 1..ProbScale+1 (index 0 unused), the
// model choice's only transcendental: computed with basic operations each
// rounded on its own (no library logarithm, no fused multiply-add), so
// that FitModel makes the same choice, and Encode writes the same bytes,
// on every architecture (math.Log2 is an assembly routine on some and Go
// on others, and need not round alike).
var log2Int = func() (t [ProbScale + 2]float64) {
	for i := 1; i < len(t); i++ {
		// i = 2^e * m, m in [1, 2); ln m = 2 atanh(z), z = (m-1)/(m+1) < 1/3.
		e, m := 0, float64(i)
		for m >= 2 {
			m, e = m/2, e+1
		}
		z := float64((m - 1) / (m + 1))
		z2 := float64(z * z)
		var ln float64
		term := z
		for k := 1; k < 80; k += 2 {
			ln = float64(ln + float64(term/float64(k)))
			term = float64(term * z2)
		}
		t[i] = float64(float64(e) + float64(float64(2*ln)/math.Ln2))
	}
	return t
}()

// allocate returns the frequencies (>= 1, summing to 128) minimizing
// sum n_k log(128/f_k): greedy unit increments by marginal gain, optimal
// for this separable concave objective.
func allocate(n []float64) []int {
	f := make([]int, len(n))
	h := &gainHeap{n: n, f: f}
	for k := range f {
		f[k] = 1
		h.keys = append(h.keys, k)
	}
	heap.Init(h)
	for left := ProbScale - len(n); left > 0; left-- {
		k := h.keys[0]
		f[k]++
		heap.Fix(h, 0)
	}
	return f
}

// FitModel returns the model minimizing the coded size of values: the K
// most frequent values get symbols, the others share one escape symbol
// (plus 8 raw bits each), with K chosen to minimize the total (escapes are
// needed with more than 128 distinct values, and pay off for rare
// outliers); frequencies are then allocated optimally.
func FitModel(values []int8) (*Model, [256]int64, error) {
	var counts [256]int64
	for _, v := range values {
		counts[int(v)+128]++
	}
	m, err := fitCounts(&counts)
	return m, counts, err
}

func fitCounts(counts *[256]int64) (*Model, error) {
	type vc struct {
		v int
		n int64
	}
	var used []vc
	for v, n := range counts {
		if n > 0 {
			used = append(used, vc{v, n})
		}
	}
	if len(used) == 0 {
		used = append(used, vc{128, 1}) // an empty matrix: any one-symbol model
	}
	sort.SliceStable(used, func(i, j int) bool { return used[i].n > used[j].n })
	var best *Model
	bestBits := math.Inf(1)
	for K := min(len(used), MaxSyms); K >= 1; K-- {
		esc := len(used) > K
		if esc && K == MaxSyms {
			continue // the escape symbol needs a slot
		}
		n := make([]float64, 0, K+1)
		for _, u := range used[:K] {
			n = append(n, float64(u.n))
		}
		var escN int64
		for _, u := range used[K:] {
			escN += u.n
		}
		if esc {
			n = append(n, float64(escN))
		}
		f := allocate(n)
		m := &Model{NSym: len(n), Escape: -1}
		for k := 0; k < K; k++ {
			m.Value[k], m.Freq[k] = int8(used[k].v-128), uint8(f[k])
		}
		if esc {
			m.Escape, m.Freq[K] = K, uint8(f[K])
		}
		if err := m.finish(); err != nil {
			return nil, err
		}
		if b := m.Bits(counts); b < bestBits {
			best, bestBits = m, b
		}
	}
	return best, nil
}
