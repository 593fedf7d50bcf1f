package layout

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// This file registers the formats defined in this package: Q4G128, Bits
// and Sparse12 (and Int8, in int8.go).

func init() {
	RegisterFormat(Format{
		ID: FormatQ4G128, Name: "Q4G128", Syntax: "q4g128",
		Parse: func(name string) (FormatSpec, bool, error) {
			if name != "q4g128" {
				return FormatSpec{}, false, nil
			}
			return FormatSpec{Format: FormatQ4G128, N: 4, G: 128}, true, nil
		},
		String: func(FormatSpec) string { return "q4g128" },
		Decode: func(f *File) (Matrix, error) { return DecodeQ4G128(f) },
		Quantize: func(_ FormatSpec, w []float32, rows, cols int, opt QuantOptions) (Matrix, float64, error) {
			m, err := QuantizeQ4G128(w, rows, cols, opt.Method)
			return m, 0, err
		},
		QuantizeRows: func(_ FormatSpec, rows, cols int, opt QuantOptions, src RowSource) (Matrix, error) {
			m, err := QuantizeQ4G128Rows(rows, cols, opt.Method, src)
			if err != nil {
				return nil, err
			}
			return m, nil
		},
		Random:        func(_ FormatSpec, rows, cols int, seed uint64) (Matrix, error) { return RandomQ4G128(rows, cols, seed) },
		Examples:      []string{"q4g128"},
		ShortExamples: 1,
	})

	var bitsEx []string
	for _, g := range []string{"g32", "g128", "row", "g64", "g256"} {
		for _, n := range BitWidths {
			bitsEx = append(bitsEx, fmt.Sprintf("bits%d%s", n, g))
		}
	}
	RegisterFormat(Format{
		ID: FormatBits, Name: "Bits", Syntax: "bits<8|4|3|2|1>g<32|64|128|256>, bits<n>row",
		Parse: func(name string) (FormatSpec, bool, error) {
			rest, ok := strings.CutPrefix(name, "bits")
			if !ok || len(rest) < 2 {
				return FormatSpec{}, false, nil
			}
			n, err := strconv.Atoi(rest[:1])
			g, okG := ParseGroup(rest[1:])
			if err != nil || !okG {
				return FormatSpec{}, false, nil
			}
			if _, _, _, err := BitsShape(1, 1, n, g); err != nil {
				return FormatSpec{}, false, err
			}
			return FormatSpec{Format: FormatBits, N: n, G: g}, true, nil
		},
		String: func(s FormatSpec) string { return fmt.Sprintf("bits%d%s", s.N, GroupName(s.G)) },
		Decode: func(f *File) (Matrix, error) { return DecodeBits(f) },
		Quantize: func(s FormatSpec, w []float32, rows, cols int, opt QuantOptions) (Matrix, float64, error) {
			m, err := QuantizeBits(w, rows, cols, s.N, s.G, opt)
			return m, 0, err
		},
		QuantizeRows: func(s FormatSpec, rows, cols int, opt QuantOptions, src RowSource) (Matrix, error) {
			m, err := QuantizeBitsRows(rows, cols, s.N, s.G, opt, src)
			if err != nil {
				return nil, err
			}
			return m, nil
		},
		Random: func(s FormatSpec, rows, cols int, seed uint64) (Matrix, error) {
			return RandomBits(rows, cols, s.N, s.G, seed)
		},
		Examples:      bitsEx,
		ShortExamples: 3 * len(BitWidths),
	})

	RegisterFormat(Format{
		ID: FormatSparse12, Name: "Sparse12", Syntax: "sparse12g<32|64|128|256>, sparse12row",
		Parse: func(name string) (FormatSpec, bool, error) {
			rest, ok := strings.CutPrefix(name, "sparse12")
			if !ok {
				return FormatSpec{}, false, nil
			}
			g, okG := ParseGroup(rest)
			if !okG {
				return FormatSpec{}, false, nil
			}
			if _, _, _, err := Sparse12Shape(1, 1, g); err != nil {
				return FormatSpec{}, false, err
			}
			return FormatSpec{Format: FormatSparse12, N: 8, G: g}, true, nil
		},
		String: func(s FormatSpec) string { return "sparse12" + GroupName(s.G) },
		Decode: func(f *File) (Matrix, error) { return DecodeSparse12(f) },
		Quantize: func(s FormatSpec, w []float32, rows, cols int, opt QuantOptions) (Matrix, float64, error) {
			return QuantizeSparse12(w, rows, cols, s.G, opt)
		},
		ExtraName: "pruned energy",
		Random: func(s FormatSpec, rows, cols int, seed uint64) (Matrix, error) {
			return RandomSparse12(rows, cols, s.G, seed)
		},
		Examples:      []string{"sparse12g32", "sparse12g128", "sparse12row", "sparse12g64"},
		ShortExamples: 3,
	})
}

// NewRand returns the generator the Random constructors draw from for
// seed.
func NewRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// FillRandom fills b with bytes from rng, eight at a time.
func FillRandom(rng *rand.Rand, b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, rng.Uint64())
		b = b[8:]
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// RandomQ4G128 returns a rows x cols matrix with uniformly random 4-bit
// codes and zero points and scales in [0.001, 0.02), determined by seed.
func RandomQ4G128(rows, cols int, seed uint64) (*Q4G128, error) {
	m, err := NewQ4G128(rows, cols)
	if err != nil {
		return nil, err
	}
	rng := NewRand(seed)
	FillRandom(rng, m.Weights)
	FillRandom(rng, m.Zeros)
	for i := range m.Scales {
		m.Scales[i] = 0.001 + float32(0.019*rng.Float32())
	}
	return m, nil
}

// RandomBits returns a Bits matrix with random codes, binary16 scales in
// [0.001, 0.02) and integer zero points, determined by seed.
func RandomBits(rows, cols, n, g int, seed uint64) (*Bits, error) {
	b, err := NewBits(rows, cols, n, g, false)
	if err != nil {
		return nil, err
	}
	rng := NewRand(seed)
	for i := range b.Words {
		b.Words[i] = rng.Uint32()
		if n == 3 {
			b.Words[i] &^= 3 // spare bits are zero
		}
	}
	b.GroupMeta.fillRandom(rng, 1<<n-1)
	return b, nil
}

// RandomSparse12 returns a Sparse12 matrix with random values and
// positions, binary16 scales in [0.001, 0.02) and integer zero points,
// determined by seed.
func RandomSparse12(rows, cols, g int, seed uint64) (*Sparse12, error) {
	m, err := NewSparse12(rows, cols, g, false)
	if err != nil {
		return nil, err
	}
	rng := NewRand(seed)
	for i := range m.Words {
		m.Words[i] = rng.Uint32()
	}
	m.GroupMeta.fillRandom(rng, 127)
	return m, nil
}

// fillRandom draws binary16 scales in [0.001, 0.02) and integer zero
// points in [0, qmax].
func (m *GroupMeta) fillRandom(rng *rand.Rand, qmax int) {
	for i := range m.Scales16 {
		m.Scales16[i] = ToFP16(0.001 + float32(0.019*rng.Float32()))
		m.Zeros16[i] = ToFP16(float32(rng.IntN(qmax + 1)))
	}
}
