package hfquant

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/safetensors"
)

// Kind is a quantized checkpoint convention.
type Kind string

// The conventions Load recognizes.
const (
	KindGPTQ Kind = "gptq"
	KindAWQ  Kind = "awq"
	KindHQQ  Kind = "hqq"
)

// Options carries what a checkpoint's config (not its tensors) says.
type Options struct {
	Kind       Kind // "" detects from the tensor names and shapes
	Bits       int  // GPTQ bits (0: 4); HQQ bits when no .nbits tensor
	V2         bool // GPTQ "gptq_v2": stored zeros are the zeros (default "gptq": zeros - 1)
	Rows, Cols int  // HQQ: the matrix shape when no .shape tensor
	Group      int  // HQQ: the group size when no .group_size tensor
	// Words, if set, supplies the imported matrix's code words
	// (layout.NewBitsWords): a loader that keeps the matrix in memory of
	// its own imports straight into it. Nil allocates them.
	Words func(n int) []uint32
}

// Detect names the convention of the layer with tensor prefix p (e.g.
// "model.layers.0.mlp.down_proj"), or "" if it is none of them.
func Detect(f *safetensors.File, p string) Kind {
	if f == nil {
		return ""
	}
	if _, ok := f.Tensors[p+".W_q"]; ok {
		return KindHQQ
	}
	qw, ok1 := f.Tensors[p+".qweight"]
	sc, ok2 := f.Tensors[p+".scales"]
	if !ok1 || !ok2 || len(qw.Shape) != 2 || len(sc.Shape) != 2 {
		return ""
	}
	switch {
	case qw.Shape[1] == sc.Shape[1]:
		return KindGPTQ
	case qw.Shape[1]*8 == sc.Shape[1]:
		return KindAWQ
	}
	return ""
}

// Layers lists the prefixes of the quantized layers of f with their
// conventions, in file order.
func Layers(f *safetensors.File) (prefixes []string, kinds []Kind) {
	if f == nil {
		return nil, nil
	}
	seen := map[string]bool{}
	for _, name := range f.Names {
		for _, suf := range []string{".qweight", ".W_q"} {
			if len(name) > len(suf) && name[len(name)-len(suf):] == suf {
				p := name[:len(name)-len(suf)]
				if k := Detect(f, p); k != "" && !seen[p] {
					seen[p] = true
					prefixes, kinds = append(prefixes, p), append(kinds, k)
				}
			}
		}
	}
	return prefixes, kinds
}

func int32s(f *safetensors.File, name string, rank int) (*safetensors.Tensor, []int32, error) {
	t, err := f.Tensor(name)
	if err != nil {
		return nil, nil, err
	}
	if len(t.Shape) != rank {
		return nil, nil, fmt.Errorf("hfquant: %s has shape %v, want %d dimensions", name, t.Shape, rank)
	}
	v, err := t.Int32sView() // read during the import only, the file open
	return t, v, err
}

func fp16s(f *safetensors.File, name string) (*safetensors.Tensor, []layout.FP16, error) {
	t, err := f.Tensor(name)
	if err != nil {
		return nil, nil, err
	}
	if len(t.Shape) != 2 {
		return nil, nil, fmt.Errorf("hfquant: %s has shape %v, want 2 dimensions", name, t.Shape)
	}
	v, err := t.FP16s()
	return t, v, err
}

// ints reads an optional integer tensor of one or more values.
func ints(f *safetensors.File, name string) ([]int64, bool, error) {
	t, ok := f.Tensors[name]
	if !ok {
		return nil, false, nil
	}
	v, err := t.Ints()
	return v, true, err
}

// Load imports the quantized layer with tensor prefix p into Bits.
func Load(f *safetensors.File, p string, opt Options) (*layout.Bits, Kind, error) {
	if f == nil {
		return nil, "", errors.New("hfquant: the safetensors file is nil")
	}
	k := opt.Kind
	if k == "" {
		if k = Detect(f, p); k == "" {
			return nil, "", fmt.Errorf("hfquant: %q is not a GPTQ, AWQ or HQQ layer (no %[1]s.qweight + %[1]s.scales or %[1]s.W_q tensors of matching shapes)", p)
		}
	}
	var b *layout.Bits
	var err error
	switch k {
	case KindGPTQ, KindAWQ:
		b, err = loadPacked(f, p, k, opt)
	case KindHQQ:
		b, err = loadHQQ(f, p, opt)
	default:
		return nil, "", fmt.Errorf("hfquant: unknown kind %q (gptq, awq, hqq)", k)
	}
	if err != nil {
		return nil, k, fmt.Errorf("%s layer %q: %w", k, p, err)
	}
	return b, k, nil
}

func loadPacked(f *safetensors.File, p string, k Kind, opt Options) (*layout.Bits, error) {
	qwT, qw, err := int32s(f, p+".qweight", 2)
	if err != nil {
		return nil, err
	}
	_, qz, err := int32s(f, p+".qzeros", 2)
	if err != nil {
		return nil, err
	}
	scT, sc, err := fp16s(f, p+".scales")
	if err != nil {
		return nil, err
	}
	out := scT.Shape[1]
	if k == KindAWQ {
		return FromAWQ(AWQ{In: qwT.Shape[0], Out: out, QWeight: qw, QZeros: qz, Scales: sc, Words: opt.Words})
	}
	bits := opt.Bits
	if bits == 0 {
		bits = 4
	}
	in := qwT.Shape[0] * 32 / bits
	if bits == 3 {
		in = qwT.Shape[0] / 3 * 32
	}
	var gidx []int32
	if _, ok := f.Tensors[p+".g_idx"]; ok {
		if _, gidx, err = int32s(f, p+".g_idx", 1); err != nil {
			return nil, err
		}
	}
	off := 1
	if opt.V2 {
		off = 0
	}
	b, err := FromGPTQ(GPTQ{In: in, Out: out, Bits: bits, QWeight: qw, QZeros: qz, Scales: sc, GIdx: gidx, ZeroOffset: off, Words: opt.Words})
	if err != nil && opt.Bits == 0 {
		err = fmt.Errorf("%w (read as 4-bit: the bit width is in the checkpoint's quantize config; qgemv -bits, Options.Bits)", err)
	}
	return b, err
}

func loadHQQ(f *safetensors.File, p string, opt Options) (*layout.Bits, error) {
	q := HQQ{Rows: opt.Rows, Cols: opt.Cols, Bits: opt.Bits, Group: opt.Group, Words: opt.Words}
	if v, ok, err := ints(f, p+".shape"); err != nil {
		return nil, err
	} else if ok {
		if len(v) != 2 || v[0] < 1 || v[1] < 1 || v[0] > layout.MaxDim || v[1] > layout.MaxDim {
			return nil, fmt.Errorf("hfquant: %s.shape is %v, want two dimensions within 1..%d", p, v, layout.MaxDim)
		}
		q.Rows, q.Cols = int(v[0]), int(v[1])
	}
	for _, m := range []struct {
		name string
		dst  *int
	}{{".nbits", &q.Bits}, {".group_size", &q.Group}} {
		if v, ok, err := ints(f, p+m.name); err != nil {
			return nil, err
		} else if ok {
			if len(v) != 1 || v[0] < 1 || v[0] > layout.MaxDim {
				return nil, fmt.Errorf("hfquant: %s%s is %v, want one positive value", p, m.name, v)
			}
			if *m.dst != 0 && *m.dst != int(v[0]) { // the options (the config files) say otherwise
				return nil, fmt.Errorf("hfquant: %s%s is %d, the quantization config (or options) %d", p, m.name, v[0], *m.dst)
			}
			*m.dst = int(v[0])
		}
	}
	// HQQ quantizes along axis 1 (groups of input columns) or axis 0; the
	// packing below is axis 1's, and an axis-0 layer's tensors can have
	// the same lengths, so its axis, where stored, must be 1.
	if v, ok, err := ints(f, p+".axis"); err != nil {
		return nil, err
	} else if ok && (len(v) != 1 || v[0] != 1) {
		return nil, fmt.Errorf("hfquant: HQQ layer %q: axis %v, only axis 1 (groups along the input) is supported", p, v)
	}
	if q.Rows == 0 || q.Cols == 0 || q.Bits == 0 || q.Group == 0 {
		return nil, fmt.Errorf("hfquant: HQQ layer %q: shape %dx%d, %d bits, group %d: give what the checkpoint does not store as options", p, q.Rows, q.Cols, q.Bits, q.Group)
	}
	wq, err := f.Tensor(p + ".W_q")
	if err != nil {
		return nil, err
	}
	// Axis-1 packing stores W_q as [packed rows, group]: a tensor of
	// the right length in another shape (transposed) is not this layer.
	if len(wq.Shape) != 2 || wq.Shape[1] != q.Group {
		return nil, fmt.Errorf("hfquant: %s.W_q has shape %v; HQQ's axis-1 packing of groups of %d stores [packed rows, %d]", p, wq.Shape, q.Group, q.Group)
	}
	want := safetensors.DType("U8")
	if q.Bits == 3 {
		want = "I32"
	}
	if wq.DType != want && !(q.Bits == 8 && wq.DType == "I8") {
		return nil, fmt.Errorf("hfquant: %s.W_q is %s, HQQ's %d-bit packing stores %s", p, wq.DType, q.Bits, want)
	}
	if wq.DType == "I32" { // the words read in place (the file is open for the import)
		v, err := wq.Int32sView()
		if err != nil {
			return nil, err
		}
		q.WQ = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(v))), len(v))
	} else { // U8, or I8 for 8 bits: a code is the byte's bits
		q.WQ = make([]uint32, len(wq.Data))
		for i, x := range wq.Data {
			q.WQ[i] = uint32(x)
		}
	}
	for _, m := range []struct {
		name string
		dst  *[]float32
	}{{".scale", &q.Scale}, {".zero", &q.Zero}} {
		t, err := f.Tensor(p + m.name)
		if err != nil {
			return nil, err
		}
		if *m.dst, err = t.Float32s(); err != nil {
			return nil, err
		}
	}
	return FromHQQ(q)
}
