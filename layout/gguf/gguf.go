// Package gguf reads GGUF files (llama.cpp's model format, versions 2 and
// 3, little-endian) and imports their tensors into qgemv formats.
//
// # File layout
//
//	magic "GGUF", uint32 version, uint64 tensor count, uint64 key/value count
//	key/value pairs: string key, uint32 value type, value
//	tensor infos: string name, uint32 n_dims (1..4), uint64 ne[n_dims],
//	              uint32 ggml type, uint64 offset (relative to the data section)
//	padding to the alignment (key "general.alignment", default 32)
//	data section: each tensor at its offset, a multiple of the alignment
//
// Strings are a uint64 length and that many bytes (UTF-8, no NUL). ne[0]
// is the innermost (contiguous) dimension: a weight matrix has ne[0]
// columns (inputs) and ne[1] rows (outputs); quantized types pack blocks
// of ne[0]. Every count, length and offset is checked against the bytes
// actually present before anything proportional to it is allocated.
//
// # Imports
//
// Every block type of layout/ggml (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q4_0,
// Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, IQ4_XS) imports losslessly with
// ImportGGML: the file's blocks as they are (a ggml.Matrix takes the
// tensor's bytes), every Dequantize value equal to llama.cpp's reference
// dequantization bit for bit, and every activation type (A8, A16, A32).
// Import, what models load, takes that form for every type but Q4_0,
// which becomes Bits(4, 32) (the same 4.5 bits per weight, and the Bits
// family's SIMD kernels). F32, F16 and BF16 tensors are read as float32
// (Float32s) for quantizing to any format; Dequantize reads any of them.
//
// ImportBits keeps the older mapping into layout.Bits with groups of 32
// (each checked element by element against the ggml formula):
//
//	Q4_0  w = (q - 8) * d          Bits(4, 32), binary16 scale d, zero 8
//	Q8_0  w = q * d  (q int8)      Bits(8, 32), codes q+128, zero 128
//	Q4_1  w = q * d + m            Bits(4, 32) with Offsets, binary16 d and m
//	Q4_K  w = (d*sc) * q - dmin*m  Bits(4, 32) with Offsets and float32
//	                               metadata: s = d*sc, o = -(dmin*m), both
//	                               exact in float32 (fp16 times a 6-bit
//	                               integer), where binary16 would round
//
// Q4_0 and Q8_0 keep integer zero points and so run every activation type;
// Q4_1 and Q4_K as Bits need float activations (A32, A16).
package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"

	"github.com/qgemv/qgemv/internal/mmap"
)

// Type is a ggml tensor type.
type Type uint32

// The ggml types this package knows the size of.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q8_1 Type = 9
	Q2_K Type = 10
	Q3_K Type = 11
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	Q8_K Type = 15
	// IQ4_NL and IQ4_XS are the non-linear 4-bit types.
	IQ4_NL Type = 20
	IQ4_XS Type = 23
	I8     Type = 24
	I16    Type = 25
	I32    Type = 26
	I64    Type = 27
	F64    Type = 28
	BF16   Type = 30
)

type typeInfo struct {
	name       string
	block, siz int // elements per block, bytes per block
}

var types = map[Type]typeInfo{
	F32: {"F32", 1, 4}, F16: {"F16", 1, 2}, Q4_0: {"Q4_0", 32, 18}, Q4_1: {"Q4_1", 32, 20},
	Q5_0: {"Q5_0", 32, 22}, Q5_1: {"Q5_1", 32, 24}, Q8_0: {"Q8_0", 32, 34}, Q8_1: {"Q8_1", 32, 36},
	Q2_K: {"Q2_K", 256, 84}, Q3_K: {"Q3_K", 256, 110}, Q4_K: {"Q4_K", 256, 144}, Q5_K: {"Q5_K", 256, 176},
	Q6_K: {"Q6_K", 256, 210}, Q8_K: {"Q8_K", 256, 292}, IQ4_NL: {"IQ4_NL", 32, 18}, IQ4_XS: {"IQ4_XS", 256, 136},
	I8: {"I8", 1, 1}, I16: {"I16", 1, 2},
	I32: {"I32", 1, 4}, I64: {"I64", 1, 8}, F64: {"F64", 1, 8}, BF16: {"BF16", 1, 2},
}

// String returns the ggml name, e.g. "Q4_K", or "type N".
func (t Type) String() string {
	if i, ok := types[t]; ok {
		return i.name
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// BlockSize returns elements per block and bytes per block (0, 0 if the
// type is unknown to this package).
func (t Type) BlockSize() (elems, bytes int) {
	i := types[t]
	return i.block, i.siz
}

// Tensor is one tensor's info and, when its type's size is known, its
// bytes (aliasing the file).
type Tensor struct {
	Name   string
	Dims   []uint64 // ne[0] first (innermost)
	Type   Type
	Offset uint64 // relative to the data section
	Data   []byte // nil for a type of unknown size
}

// Elems returns the number of elements.
func (t *Tensor) Elems() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// checkData returns an error unless t.Data holds exactly the bytes its
// type's blocks take for its dims (whole blocks along ne[0], no overflow):
// a Tensor built by hand rather than by Parse may not.
func (t *Tensor) checkData() error {
	blk, siz := t.Type.BlockSize()
	n, ok := uint64(1), blk > 0 && len(t.Dims) > 0 && t.Dims[0]%uint64(blk) == 0
	for _, d := range t.Dims {
		hi, lo := bits.Mul64(n, d)
		n, ok = lo, ok && hi == 0
	}
	if ok {
		var hi uint64
		hi, n = bits.Mul64(n/uint64(blk), uint64(siz))
		ok = hi == 0 && n == uint64(len(t.Data))
	}
	if !ok {
		return fmt.Errorf("gguf: tensor %q: %s%v in whole %d-element blocks does not take the %d bytes of its data", t.Name, t.Type, t.Dims, blk, len(t.Data))
	}
	return nil
}

// Shape2D returns (rows, cols) = (ne[1], ne[0]) of a matrix: ne[2..] must
// be 1.
func (t *Tensor) Shape2D() (rows, cols int, err error) {
	if len(t.Dims) < 1 {
		return 0, 0, fmt.Errorf("gguf: tensor %q has no dimensions", t.Name)
	}
	r := uint64(1)
	if len(t.Dims) > 1 {
		r = t.Dims[1]
	}
	for _, d := range t.Dims[min(2, len(t.Dims)):] {
		if d != 1 {
			return 0, 0, fmt.Errorf("gguf: tensor %q has shape %v: not a matrix", t.Name, t.Dims)
		}
	}
	if r > math.MaxInt32 || t.Dims[0] > math.MaxInt32 {
		return 0, 0, fmt.Errorf("gguf: tensor %q: shape %v too large", t.Name, t.Dims)
	}
	return int(r), int(t.Dims[0]), nil
}

// File is a parsed GGUF file.
type File struct {
	Version   uint32
	Alignment uint64
	Keys      []string       // metadata keys in file order
	Metadata  map[string]any // values: uint8..int64, float32/64, bool, string; arrays as []uint8..[]int64, []float32/64, []bool, []string, or []any of arrays
	Tensors   []*Tensor      // in file order
	DataStart uint64         // byte offset of the data section
	m         *mmap.File
}

// ErrFormat is wrapped by every error about the bytes of a file.
var ErrFormat = errors.New("gguf: malformed file")

func errf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, a...)...)
}

// Open maps and parses the file at path; Close releases it. The file must
// not be truncated while it is open: as with any memory map, touching a
// page past the new end raises SIGBUS. (It is mapped on Linux, macOS and
// the BSDs; elsewhere it is read whole.)
func Open(path string) (*File, error) {
	f, m, err := mmap.OpenParsed("gguf", path, Parse)
	if err != nil {
		return nil, err
	}
	f.m = m
	return f, nil
}

// Close unmaps the file; tensors' Data must not be used afterwards.
func (f *File) Close() error { return f.m.Close() }

// Tensor returns the named tensor.
func (f *File) Tensor(name string) (*Tensor, error) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("gguf: no tensor %q", name)
}

type reader struct {
	b   []byte
	off uint64
	err error
}

func (r *reader) left() uint64 { return uint64(len(r.b)) - r.off }

func (r *reader) take(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > r.left() {
		r.err = errf("%s: %d bytes needed at offset %d, %d left (truncated?)", what, n, r.off, r.left())
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) u8(what string) uint8 {
	if s := r.take(1, what); s != nil {
		return s[0]
	}
	return 0
}
func (r *reader) u16(what string) uint16 {
	if s := r.take(2, what); s != nil {
		return binary.LittleEndian.Uint16(s)
	}
	return 0
}
func (r *reader) u32(what string) uint32 {
	if s := r.take(4, what); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}
func (r *reader) u64(what string) uint64 {
	if s := r.take(8, what); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}
func (r *reader) str(what string) string {
	n := r.u64(what + " length")
	return string(r.take(n, what))
}

// Value types of metadata.
const (
	vU8, vI8, vU16, vI16, vU32, vI32, vF32, vBool, vString, vArray, vU64, vI64, vF64 = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12
)

// minSize is the least bytes a value of type vt occupies.
func minSize(vt uint32) uint64 {
	switch vt {
	case vU8, vI8, vBool:
		return 1
	case vU16, vI16:
		return 2
	case vU32, vI32, vF32:
		return 4
	case vArray:
		return 12
	}
	return 8 // U64, I64, F64, string
}

func (r *reader) value(vt uint32, what string, depth int) any {
	switch vt {
	case vU8:
		return r.u8(what)
	case vI8:
		return int8(r.u8(what))
	case vU16:
		return r.u16(what)
	case vI16:
		return int16(r.u16(what))
	case vU32:
		return r.u32(what)
	case vI32:
		return int32(r.u32(what))
	case vF32:
		return math.Float32frombits(r.u32(what))
	case vBool:
		b := r.u8(what)
		if b > 1 && r.err == nil {
			r.err = errf("%s: bool byte %d", what, b)
		}
		return b == 1
	case vString:
		return r.str(what)
	case vU64:
		return r.u64(what)
	case vI64:
		return int64(r.u64(what))
	case vF64:
		return math.Float64frombits(r.u64(what))
	case vArray:
		if depth > 2 {
			r.err = errf("%s: arrays nested deeper than 3", what)
			return nil
		}
		et := r.u32(what + " element type")
		n := r.u64(what + " element count")
		if r.err != nil {
			return nil
		}
		if et > vF64 {
			r.err = errf("%s: unknown array element type %d", what, et)
			return nil
		}
		if n > r.left()/minSize(et) {
			r.err = errf("%s: %d elements cannot fit in the %d bytes left", what, n, r.left())
			return nil
		}
		// Typed slices: one element costs its own size (a string its
		// header and bytes), not a 16-byte interface, so a file's arrays
		// take about the memory their bytes do.
		switch et {
		case vU8:
			return array(r, n, func() uint8 { return r.u8(what) })
		case vI8:
			return array(r, n, func() int8 { return int8(r.u8(what)) })
		case vU16:
			return array(r, n, func() uint16 { return r.u16(what) })
		case vI16:
			return array(r, n, func() int16 { return int16(r.u16(what)) })
		case vU32:
			return array(r, n, func() uint32 { return r.u32(what) })
		case vI32:
			return array(r, n, func() int32 { return int32(r.u32(what)) })
		case vF32:
			return array(r, n, func() float32 { return math.Float32frombits(r.u32(what)) })
		case vU64:
			return array(r, n, func() uint64 { return r.u64(what) })
		case vI64:
			return array(r, n, func() int64 { return int64(r.u64(what)) })
		case vF64:
			return array(r, n, func() float64 { return math.Float64frombits(r.u64(what)) })
		case vBool:
			return array(r, n, func() bool { return r.value(vBool, what, depth+1).(bool) })
		case vString:
			return array(r, n, func() string { return r.str(what) })
		}
		return array(r, n, func() any { return r.value(et, what, depth+1) })
	}
	if r.err == nil {
		r.err = errf("%s: unknown value type %d", what, vt)
	}
	return nil
}

// array reads n elements with next, nil at the first error.
func array[T any](r *reader, n uint64, next func() T) []T {
	out := make([]T, n)
	for i := range out {
		if out[i] = next(); r.err != nil {
			return nil
		}
	}
	return out
}

// maxKey is the longest metadata key GGUF allows (the format's keys are
// at most 2^16-1 bytes).
const maxKey = 1<<16 - 1

// Parse parses a whole file held in data (Tensor.Data aliases it).
func Parse(data []byte) (*File, error) {
	r := &reader{b: data}
	magic := r.take(4, "magic")
	if r.err != nil {
		return nil, r.err
	}
	if string(magic) != "GGUF" {
		return nil, errf("magic %q, want \"GGUF\"", magic)
	}
	f := &File{Version: r.u32("version"), Alignment: 32, Metadata: map[string]any{}}
	if r.err != nil {
		return nil, r.err
	}
	if f.Version != 2 && f.Version != 3 {
		if bits.ReverseBytes32(f.Version) == 2 || bits.ReverseBytes32(f.Version) == 3 {
			return nil, errf("big-endian GGUF is not supported")
		}
		return nil, errf("version %d unsupported (2 and 3 are)", f.Version)
	}
	nt, nkv := r.u64("tensor count"), r.u64("key/value count")
	if r.err != nil {
		return nil, r.err
	}
	// Each pair needs at least 8+4+1 bytes, each tensor info 8+4+8+4+8.
	if nkv > r.left()/13 || nt > r.left()/32 {
		return nil, errf("%d tensors and %d keys cannot fit in %d bytes", nt, nkv, len(data))
	}
	for i := uint64(0); i < nkv; i++ {
		k := r.str(fmt.Sprintf("key %d", i))
		if len(k) > maxKey { // before the labels below quote it
			return nil, errf("key %d is %d bytes long (GGUF keys are at most %d)", i, len(k), maxKey)
		}
		vt := r.u32(fmt.Sprintf("key %q type", k))
		v := r.value(vt, fmt.Sprintf("key %q", k), 0)
		if r.err != nil {
			return nil, r.err
		}
		if _, dup := f.Metadata[k]; dup {
			return nil, errf("key %q appears twice", k)
		}
		f.Keys = append(f.Keys, k)
		f.Metadata[k] = v
	}
	if a, ok := f.Metadata["general.alignment"]; ok {
		u, ok := a.(uint32)
		if !ok || u == 0 || u&(u-1) != 0 || u > 1<<20 {
			return nil, errf("general.alignment is %v (%T), want a power of two uint32", a, a)
		}
		f.Alignment = uint64(u)
	}
	seen := map[string]bool{}
	for i := uint64(0); i < nt; i++ {
		t := &Tensor{Name: r.str(fmt.Sprintf("tensor %d name", i))}
		nd := r.u32("n_dims")
		if r.err != nil {
			return nil, r.err
		}
		if nd < 1 || nd > 4 {
			return nil, errf("tensor %q: %d dimensions (1..4)", t.Name, nd)
		}
		elems := uint64(1)
		for j := uint32(0); j < nd; j++ {
			d := r.u64("dimension")
			hi, lo := bits.Mul64(elems, d)
			if hi != 0 || lo > 1<<50 {
				return nil, errf("tensor %q: dimensions overflow", t.Name)
			}
			elems = lo
			t.Dims = append(t.Dims, d)
		}
		t.Type = Type(r.u32("type"))
		t.Offset = r.u64("offset")
		if r.err != nil {
			return nil, r.err
		}
		if seen[t.Name] {
			return nil, errf("tensor %q appears twice", t.Name)
		}
		seen[t.Name] = true
		f.Tensors = append(f.Tensors, t)
	}
	start := (r.off + f.Alignment - 1) / f.Alignment * f.Alignment
	if start > uint64(len(data)) {
		return nil, errf("data section at %d beyond the %d-byte file", start, len(data))
	}
	f.DataStart = start
	body := data[start:]
	type span struct {
		b, e uint64
		name string
	}
	var spans []span
	for _, t := range f.Tensors {
		if t.Offset%f.Alignment != 0 {
			return nil, errf("tensor %q: offset %d not a multiple of the alignment %d", t.Name, t.Offset, f.Alignment)
		}
		if t.Offset > uint64(len(body)) {
			return nil, errf("tensor %q: offset %d beyond the %d data bytes", t.Name, t.Offset, len(body))
		}
		blk, siz := t.Type.BlockSize()
		if blk == 0 {
			continue // unknown type: bytes not checked, not importable
		}
		if t.Dims[0]%uint64(blk) != 0 {
			return nil, errf("tensor %q: ne[0] = %d not a multiple of the %s block of %d", t.Name, t.Dims[0], t.Type, blk)
		}
		n := t.Elems() / uint64(blk) * uint64(siz)
		if n > uint64(len(body))-t.Offset {
			return nil, errf("tensor %q: %s %v needs %d bytes at offset %d, the data section has %d (truncated?)", t.Name, t.Type, t.Dims, n, t.Offset, len(body))
		}
		t.Data = body[t.Offset : t.Offset+n : t.Offset+n]
		spans = append(spans, span{t.Offset, t.Offset + n, t.Name})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].b < spans[j].b })
	for i := 1; i < len(spans); i++ {
		if spans[i].b < spans[i-1].e {
			return nil, errf("tensors %q and %q overlap", spans[i-1].name, spans[i].name)
		}
	}
	return f, nil
}
