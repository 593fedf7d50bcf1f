// Package safetensors reads the safetensors format (Hugging Face): an
// 8-byte little-endian header length N, N bytes of JSON mapping tensor
// names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the byte after the header) plus an optional "__metadata__"
// object of strings, then the tensor bytes, little-endian, row-major.
//
// Everything is checked against the real file size before anything
// proportional to a claimed size is allocated: the header length, every
// offset pair, the byte count each dtype and shape imply, and overlaps
// between tensors. Open memory-maps the file where the platform allows;
// tensor Data slices alias the mapping until Close.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
	"unsafe"

	"github.com/qgemv/qgemv/internal/mmap"
	"github.com/qgemv/qgemv/layout"
)

// MaxHeader bounds the JSON header (100 MiB, the reference
// implementation's limit).
const MaxHeader = 100 << 20

// DType is a safetensors element type name, e.g. "F16" or "I32".
type DType string

// Size returns the bytes per element, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case "BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2":
		return 1
	case "I16", "U16", "F16", "BF16":
		return 2
	case "I32", "U32", "F32":
		return 4
	case "I64", "U64", "F64":
		return 8
	}
	return 0
}

// Tensor is one named tensor; Data aliases the file's bytes.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Elems returns the product of the shape (1 for a scalar).
func (t *Tensor) Elems() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a parsed safetensors file.
type File struct {
	Tensors  map[string]*Tensor
	Names    []string          // tensor names in file order (by offset)
	Metadata map[string]string // the "__metadata__" object
	m        *mmap.File
}

// ErrFormat is wrapped by every error about the bytes of a file.
var ErrFormat = errors.New("safetensors: malformed file")

func errf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, a...)...)
}

// Open maps and parses the file at path; Close releases it. The file must
// not be truncated while it is open: as with any memory map, touching a
// page past the new end raises SIGBUS. (It is mapped on Linux, macOS and
// the BSDs; elsewhere it is read whole.)
func Open(path string) (*File, error) {
	f, m, err := mmap.OpenParsed("safetensors", path, Parse)
	if err != nil {
		return nil, err
	}
	f.m = m
	return f, nil
}

// Close unmaps the file; tensors' Data must not be used afterwards.
func (f *File) Close() error { return f.m.Close() }

type entry struct {
	DType   string   `json:"dtype"`
	Shape   []int64  `json:"shape"`
	Offsets []uint64 `json:"data_offsets"`
}

// Parse parses a whole file held in data (Tensor.Data aliases it).
func Parse(data []byte) (*File, error) {
	if len(data) < 8 {
		return nil, errf("%d bytes: shorter than the 8-byte header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > MaxHeader {
		return nil, errf("header length %d above the %d-byte limit", n, MaxHeader)
	}
	if n > uint64(len(data)-8) {
		return nil, errf("header length %d, but only %d bytes follow (truncated?)", n, len(data)-8)
	}
	hdr, body := data[8:8+n], data[8+n:]
	raw, err := jsonObject(hdr)
	if err != nil {
		return nil, errf("header JSON: %v", err)
	}
	f := &File{Tensors: make(map[string]*Tensor, len(raw)), Metadata: map[string]string{}}
	type span struct {
		b, e uint64
		name string
	}
	var spans []span
	for _, kv := range raw {
		name, msg := kv.key, kv.val
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return nil, errf("__metadata__ must map strings to strings: %v", err)
			}
			continue
		}
		var e entry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, errf("tensor %q: %v", name, err)
		}
		dt := DType(e.DType)
		if dt.Size() == 0 {
			return nil, errf("tensor %q: unknown dtype %q", name, e.DType)
		}
		if len(e.Offsets) != 2 || e.Offsets[0] > e.Offsets[1] || e.Offsets[1] > uint64(len(body)) {
			return nil, errf("tensor %q: data_offsets %v outside the %d data bytes", name, e.Offsets, len(body))
		}
		if len(e.Shape) > 8 {
			return nil, errf("tensor %q: %d dimensions", name, len(e.Shape))
		}
		elems, shape := uint64(1), make([]int, len(e.Shape))
		for i, d := range e.Shape {
			if d < 0 {
				return nil, errf("tensor %q: negative dimension %d", name, d)
			}
			if d > math.MaxInt32 { // bounded alone too: after a zero dimension the product no longer is
				return nil, errf("tensor %q: dimension %d above 2^31-1", name, d)
			}
			hi, lo := bits.Mul64(elems, uint64(d))
			if hi != 0 || lo > uint64(len(body)) {
				return nil, errf("tensor %q: shape %v larger than the file", name, e.Shape)
			}
			elems, shape[i] = lo, int(d)
		}
		if want := elems * uint64(dt.Size()); e.Offsets[1]-e.Offsets[0] != want {
			return nil, errf("tensor %q: %s%v needs %d bytes, data_offsets %v hold %d", name, dt, e.Shape, want, e.Offsets, e.Offsets[1]-e.Offsets[0])
		}
		f.Tensors[name] = &Tensor{Name: name, DType: dt, Shape: shape, Data: body[e.Offsets[0]:e.Offsets[1]:e.Offsets[1]]}
		spans = append(spans, span{e.Offsets[0], e.Offsets[1], name})
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].b != spans[j].b {
			return spans[i].b < spans[j].b
		}
		return spans[i].name < spans[j].name
	})
	for i, s := range spans {
		if i > 0 && s.b < spans[i-1].e {
			return nil, errf("tensors %q and %q overlap", spans[i-1].name, s.name)
		}
		f.Names = append(f.Names, s.name)
	}
	return f, nil
}

// Tensor returns the named tensor or an error naming what is missing.
func (f *File) Tensor(name string) (*Tensor, error) {
	if t, ok := f.Tensors[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("safetensors: no tensor %q", name)
}

// want checks the dtype and rank of t.
func (t *Tensor) want(rank int, dts ...DType) error {
	ok := false
	for _, d := range dts {
		ok = ok || t.DType == d
	}
	if !ok {
		return fmt.Errorf("safetensors: tensor %q is %s, want %v", t.Name, t.DType, dts)
	}
	if rank >= 0 && len(t.Shape) != rank {
		return fmt.Errorf("safetensors: tensor %q has shape %v, want %d dimensions", t.Name, t.Shape, rank)
	}
	return nil
}

// Int32s returns an I32 or U32 tensor's values (U32 reinterpreted).
func (t *Tensor) Int32s() ([]int32, error) {
	if err := t.want(-1, "I32", "U32"); err != nil {
		return nil, err
	}
	out := make([]int32, len(t.Data)/4)
	if littleEndian && len(out) > 0 { // the file's order: one copy
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 4*len(out)), t.Data)
		return out, nil
	}
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out, nil
}

// Int32sView is Int32s without the copy where the machine is
// little-endian and the data 4-byte aligned: the values alias the file's
// bytes, valid while the file is open, and must not be written.
func (t *Tensor) Int32sView() ([]int32, error) {
	if err := t.want(-1, "I32", "U32"); err != nil {
		return nil, err
	}
	n := len(t.Data) / 4
	if !littleEndian || n == 0 || uintptr(unsafe.Pointer(&t.Data[0]))%4 != 0 {
		return t.Int32s()
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&t.Data[0])), n), nil
}

// littleEndian reports whether this machine stores integers as
// safetensors files do.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Ints returns an integer tensor's values (I8..I64, U8..U64, BOOL).
func (t *Tensor) Ints() ([]int64, error) {
	if err := t.want(-1, "BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64"); err != nil {
		return nil, err
	}
	sz := t.DType.Size()
	out := make([]int64, len(t.Data)/sz)
	for i := range out {
		b := t.Data[i*sz:]
		switch t.DType {
		case "BOOL", "U8":
			out[i] = int64(b[0])
		case "I8":
			out[i] = int64(int8(b[0]))
		case "I16":
			out[i] = int64(int16(binary.LittleEndian.Uint16(b)))
		case "U16":
			out[i] = int64(binary.LittleEndian.Uint16(b))
		case "I32":
			out[i] = int64(int32(binary.LittleEndian.Uint32(b)))
		case "U32":
			out[i] = int64(binary.LittleEndian.Uint32(b))
		default: // I64, U64 (as the same bits)
			out[i] = int64(binary.LittleEndian.Uint64(b))
		}
	}
	return out, nil
}

// Float32s returns an F32, F16 or BF16 tensor's values, widened exactly.
func (t *Tensor) Float32s() ([]float32, error) {
	if err := t.want(-1, "F32", "F16", "BF16"); err != nil {
		return nil, err
	}
	var out []float32
	switch t.DType {
	case "F32":
		out = make([]float32, len(t.Data)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case "F16":
		out = make([]float32, len(t.Data)/2)
		for i := range out {
			out[i] = layout.FP16(binary.LittleEndian.Uint16(t.Data[2*i:])).Float32()
		}
	default:
		out = make([]float32, len(t.Data)/2)
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16)
		}
	}
	return out, nil
}

// FP16s returns an F16 tensor's raw binary16 values.
func (t *Tensor) FP16s() ([]layout.FP16, error) {
	if err := t.want(-1, "F16"); err != nil {
		return nil, err
	}
	out := make([]layout.FP16, len(t.Data)/2)
	for i := range out {
		out[i] = layout.FP16(binary.LittleEndian.Uint16(t.Data[2*i:]))
	}
	return out, nil
}

// Matrix2D returns the shape of a 2-D tensor, or an error.
func (t *Tensor) Matrix2D() (rows, cols int, err error) {
	if len(t.Shape) != 2 {
		return 0, 0, fmt.Errorf("safetensors: tensor %q has shape %v, want 2 dimensions", t.Name, t.Shape)
	}
	return t.Shape[0], t.Shape[1], nil
}

// member is one name and value of a JSON object.
type member struct {
	key string
	val json.RawMessage
}

// jsonObject returns the members of the JSON object in data in their
// order. A name given twice is an error: json.Unmarshal into a map keeps
// the last silently, so a header could hold two descriptions of one
// tensor and be read by another tool as the first.
func jsonObject(data []byte) ([]member, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	if t, err := d.Token(); err != nil {
		return nil, err
	} else if t != json.Delim('{') {
		return nil, fmt.Errorf("not an object (%v)", t)
	}
	var out []member
	seen := map[string]bool{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string) // the decoder returns only strings as names
		if seen[k] {
			return nil, fmt.Errorf("name %q given twice", k)
		}
		seen[k] = true
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{k, v})
	}
	if _, err := d.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the object")
	}
	return out, nil
}
