package layout

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Format is what a matrix format registers, once, from the init function
// of the package that defines it (this package registers Q4G128, Bits,
// Sparse12 and Int8; layout/codebook and layout/ans theirs). Everything
// that handles formats generically (the container's Decode, spec names,
// quantizing to a named format, the conformance suite, benchmarks, the
// CLI) looks formats up here instead of naming their types.
type Format struct {
	// ID is the format's .qgv container id.
	ID FormatID
	// Name is the family's name, as FormatID.String prints it.
	Name string
	// Syntax lists the spec names Parse reads, for help and errors,
	// e.g. "bits<8|4|3|2|1>g<32|64|128|256>|bits<n>row".
	Syntax string
	// Parse parses a lower-case spec name; ok is false when the name is
	// not of this format (err is then nil).
	Parse func(name string) (spec FormatSpec, ok bool, err error)
	// String spells spec as Parse reads it.
	String func(spec FormatSpec) string
	// Decode builds a matrix from a container of this format.
	Decode func(f *File) (Matrix, error)
	// Quantize quantizes a row-major float32 matrix to spec; extra is a
	// format-specific figure the CLI prints (Sparse12: the fraction of
	// the energy pruning dropped), 0 when the format has none. nil when
	// the format is not made from float weights.
	Quantize func(spec FormatSpec, w []float32, rows, cols int, opt QuantOptions) (m Matrix, extra float64, err error)
	// QuantizeRows, if set, is Quantize of a matrix read row by row
	// (RowSource), without all of it in memory; FormatSpec.QuantizeRows
	// gathers the rows for formats without it.
	QuantizeRows func(spec FormatSpec, rows, cols int, opt QuantOptions, src RowSource) (Matrix, error)
	// ExtraName names Quantize's extra figure ("" when it has none).
	ExtraName string
	// Random builds a matrix of spec with random codes and metadata
	// drawn from seed, fast enough to fill hundreds of MiB: for tests,
	// benchmarks and calibration. Metadata keeps every activation type
	// the format has usable (integer zero points).
	Random func(spec FormatSpec, rows, cols int, seed uint64) (Matrix, error)
	// KMeans marks the formats quantized by k-means: QuantOptions' Seed,
	// Iters, TimeBudget and Progress apply to them, Method does not.
	KMeans bool
	// Int8Values marks the formats of plain int8 values without scales
	// (layout.Int32Matrix: multiplied by int8 vectors into exact int32).
	Int8Values bool
	// Examples are spec names that exercise the format's kernels: the
	// conformance suite runs them all (short: the first ShortExamples).
	Examples      []string
	ShortExamples int
}

var (
	registryMu sync.RWMutex
	registry   = map[FormatID]*Format{}
)

// RegisterFormat registers a format; it panics on a zero or duplicate id
// or on missing functions (a programming error, found at init).
func RegisterFormat(f Format) {
	if f.ID == 0 || f.Name == "" || f.Parse == nil || f.String == nil || f.Decode == nil || f.Random == nil {
		panic(fmt.Sprintf("layout: RegisterFormat(%d, %q): id, name, Parse, String, Decode and Random are required", f.ID, f.Name))
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[f.ID]; dup {
		panic(fmt.Sprintf("layout: format %d (%s) registered twice", f.ID, f.Name))
	}
	registry[f.ID] = &f
}

// LookupFormat returns the registered format id.
func LookupFormat(id FormatID) (*Format, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	f, ok := registry[id]
	return f, ok
}

// Formats returns every registered format, by id.
func Formats() []*Format {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]*Format, 0, len(registry))
	for _, f := range registry {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// syntax lists every registered format's spec syntax, for errors.
func syntax() string {
	var s []string
	for _, f := range Formats() {
		s = append(s, f.Syntax)
	}
	return strings.Join(s, ", ")
}

// Random returns a random matrix of spec (see Format.Random).
func Random(spec FormatSpec, rows, cols int, seed uint64) (Matrix, error) {
	f, ok := LookupFormat(spec.Format)
	if !ok {
		return nil, fmt.Errorf("layout: format %v is not registered (its package not linked in?)", spec.Format)
	}
	return f.Random(spec, rows, cols, seed)
}
