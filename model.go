package qgemv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/qgemv/qgemv/internal/mmap"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/gguf"
	"github.com/qgemv/qgemv/layout/hfquant"
	"github.com/qgemv/qgemv/layout/safetensors"
)

// TensorInfo describes one weight matrix of a model file.
type TensorInfo struct {
	// Name is the tensor's name ("blk.0.attn_q.weight"), or for a GPTQ,
	// AWQ or HQQ layer the prefix of its tensors
	// ("model.layers.0.self_attn.q_proj").
	Name string
	// Rows and Cols are the outputs and inputs (0 when unknown).
	Rows, Cols int
	// Type is the stored type: a ggml type ("Q4_K", "Q6_K", "F16"), a
	// safetensors dtype ("F16", "BF16", "F32"), or "GPTQ", "AWQ", "HQQ".
	Type string
	// Bytes is what the file stores for it (a quantized layer: all its
	// tensors).
	Bytes int64
	// Layer is the block index in the name, -1 for none; Kind the role
	// (KindAttnQ, ..., KindOutput, KindTokenEmbd), "" when the name is
	// not a known one.
	Layer int
	Kind  string
	// ImportsAs says what loading makes of it, e.g. "Bits4G32 exact
	// (fp16 metadata)" or "quantized to q4g128".
	ImportsAs string
	// Err is why it cannot be loaded (a *TensorError), nil when it can.
	// Weights.Failed also lists tensors whose import failed on Load.
	Err error
}

// TensorError is the error of one tensor of a model file: a type no
// importer reads, a shape that disagrees with the config files, a failed
// import or load.
type TensorError struct {
	File, Tensor string
	Err          error
}

func (e *TensorError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return e.File + ": tensor " + e.Tensor + ": " + fmt.Sprint(e.Err)
}

// Unwrap returns the underlying error.
func (e *TensorError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// ModelOption configures OpenModel.
type ModelOption func(*modelOptions)

type modelOptions struct {
	float    layout.FormatSpec
	method   layout.QuantMethod
	quant    *QuantConfig
	floatSet bool
	progress func(done, total int64)
}

// WithFloatFormat sets the format float tensors (F32, F16, BF16) are
// quantized to on load (default q4g128, integer zero points so that int8
// activations work).
func WithFloatFormat(spec layout.FormatSpec) ModelOption {
	return func(o *modelOptions) { o.float, o.floatSet = spec, true }
}

// WithLoadProgress has Load report its progress to f: after each tensor
// is loaded (or fails), the file bytes of the tensors done so far and of
// all it loads. Calls are serialized and done only grows; f must not call
// the Model.
func WithLoadProgress(f func(done, total int64)) ModelOption {
	return func(o *modelOptions) { o.progress = f }
}

// WithQuantMethod sets the quantizer float tensors use (default
// layout.Search).
func WithQuantMethod(m layout.QuantMethod) ModelOption {
	return func(o *modelOptions) { o.method = m }
}

// WithQuantConfig gives the quantization settings of GPTQ, AWQ and HQQ
// layers instead of the config files beside the model.
func WithQuantConfig(c QuantConfig) ModelOption {
	return func(o *modelOptions) { c.Source = "WithQuantConfig"; o.quant = &c }
}

// Model is an opened model file (GGUF, or safetensors with GPTQ, AWQ,
// HQQ or float weights; a sharded checkpoint's shards), memory-mapped. Its methods are safe for
// concurrent use; Close unmaps the file (weights already loaded stay
// loaded).
type Model struct {
	path   string
	format string
	size   int64
	opt    modelOptions
	quant  QuantConfig

	mu      sync.RWMutex
	closed  bool
	maps    []*mmap.File      // the file, or a sharded checkpoint's shards in index order
	shardOf map[string]string // a sharded checkpoint's tensors: their shard's path
	tensors []modelTensor
}

// modelTensor is a TensorInfo and how to import it.
type modelTensor struct {
	info  TensorInfo
	parts [][]byte // the file's bytes it reads
	// load imports exactly; mem, if set, supplies the memory of the
	// matrix's codes (ggml.NewData, layout.NewBitsWords).
	load   func(mem func(n int) []byte) (layout.Matrix, error)
	floats func() ([]float32, error) // float tensors, whole
	rows   layout.RowSource          // float tensors, row by row
}

// OpenModel memory-maps a .gguf or .safetensors file and lists its
// weight matrices (Tensors). For safetensors, config.json,
// quantize_config.json and quant_config.json beside the file give the
// GPTQ/AWQ/HQQ settings (QuantConfig). The file is recognized by its
// content. A sharded safetensors checkpoint opens through its index
// (model.safetensors.index.json) as one model; a directory opens its
// index, or else the one .gguf or .safetensors file it holds. Errors name
// the file (and the tensor); a tensor that cannot be loaded is not an
// error here but listed with its reason (TensorInfo.Err).
func OpenModel(path string, opts ...ModelOption) (*Model, error) {
	o := modelOptions{float: layout.FormatSpec{Format: layout.FormatQ4G128, N: 4, G: 128}, method: layout.Search}
	for _, f := range opts {
		if f != nil { // a nil option (a conditional one left unset) changes nothing
			f(&o)
		}
	}
	if o.floatSet && !o.float.Quantizable() {
		return nil, fmt.Errorf("qgemv: open model: float format %v does not quantize float weights", o.float)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("qgemv: open model: %w", err)
	}
	if st.IsDir() {
		if path, err = modelInDir(path); err != nil {
			return nil, fmt.Errorf("qgemv: open model: %w", err)
		}
		if st, err = os.Stat(path); err != nil {
			return nil, fmt.Errorf("qgemv: open model: %w", err)
		}
	}
	md := &Model{path: path, size: st.Size(), opt: o}
	if strings.HasSuffix(strings.ToLower(path), ".index.json") {
		err = md.openSharded()
	} else {
		var mf *mmap.File
		if mf, err = mmap.Open(path); err != nil {
			return nil, fmt.Errorf("qgemv: open model %s: %w", path, err)
		}
		md.maps = []*mmap.File{mf}
		// By the magic; a .gguf file without it (empty, truncated or not
		// a GGUF file) gets the GGUF parser's error, not safetensors'.
		if bytes.HasPrefix(mf.Data, []byte("GGUF")) || strings.EqualFold(filepath.Ext(path), ".gguf") {
			err = md.openGGUF()
		} else {
			var f *safetensors.File
			if f, err = safetensors.Parse(mf.Data); err == nil {
				err = md.openSafetensors(f)
			}
		}
	}
	if err != nil {
		md.closeMaps()
		return nil, fmt.Errorf("qgemv: open model %s: %w", path, err)
	}
	return md, nil
}

// modelInDir returns the model file of directory dir: its sharded
// checkpoint's index, or else its one .gguf or .safetensors file.
func modelInDir(dir string) (string, error) {
	if p := filepath.Join(dir, safetensors.IndexFile); fileExists(p) {
		return p, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var found []string
	for _, e := range ents {
		if n := e.Name(); (strings.HasSuffix(n, ".gguf") || strings.HasSuffix(n, ".safetensors")) && fileExists(filepath.Join(dir, n)) {
			found = append(found, filepath.Join(dir, n))
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%s holds no %s, .gguf or .safetensors file", dir, safetensors.IndexFile)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s holds %d model files and no %s: name one", dir, len(found), safetensors.IndexFile)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// openSharded opens the sharded checkpoint whose index is md.path: every
// shard mapped and parsed, checked against the index, and merged into
// one file in index order.
func (md *Model) openSharded() error {
	data, err := mmap.ReadSmall(md.path, safetensors.MaxIndex)
	if err != nil {
		return err
	}
	ix, err := safetensors.ParseIndex(data)
	if err != nil {
		return err
	}
	dir := filepath.Dir(md.path)
	var files []*safetensors.File
	md.size = 0
	md.shardOf = map[string]string{}
	for _, name := range ix.Shards() {
		p := filepath.Join(dir, name)
		mf, err := mmap.Open(p)
		if err != nil {
			return fmt.Errorf("shard %s: %w", p, err)
		}
		md.maps = append(md.maps, mf)
		md.size += int64(len(mf.Data))
		f, err := safetensors.Parse(mf.Data)
		if err != nil {
			return fmt.Errorf("shard %s: %w", p, err)
		}
		for _, n := range f.Names {
			md.shardOf[n] = p
		}
		files = append(files, f)
	}
	f, err := ix.Merge(files)
	if err != nil {
		return err
	}
	return md.openSafetensors(f)
}

// closeMaps unmaps the file or shards.
func (md *Model) closeMaps() error {
	var first error
	for _, m := range md.maps {
		if err := m.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// release drops b (bytes of the file or a shard) from the resident set
// (mmap.File.Release; a no-op on the maps b is not in).
func (md *Model) release(b []byte) {
	for _, m := range md.maps {
		m.Release(b)
	}
}

// nameShards records, in a sharded checkpoint, the shards that hold the
// tensors of layer p (p + each suffix) as the layer's file: one path, or
// two or more joined with " and " when the layer straddles shards.
func (md *Model) nameShards(p string, suffixes []string) {
	if md.shardOf == nil {
		return
	}
	var files []string
	for _, suf := range suffixes {
		if f, ok := md.shardOf[p+suf]; ok && !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	if len(files) > 0 {
		md.shardOf[p] = strings.Join(files, " and ")
	}
}

func (md *Model) tensorErr(name string, err error) error {
	file := md.path
	if p, ok := md.shardOf[name]; ok {
		file = p
	}
	return &TensorError{File: file, Tensor: name, Err: err}
}

func (md *Model) openGGUF() error {
	f, err := gguf.Parse(md.maps[0].Data)
	if err != nil {
		return err
	}
	md.format = "gguf"
	unsupported := map[gguf.Type]error{} // by type: why it does not load
	for _, t := range f.Tensors {
		if len(t.Dims) < 2 {
			continue // norms, biases
		}
		mt := modelTensor{info: TensorInfo{Name: t.Name, Type: t.Type.String(), Bytes: int64(len(t.Data)), ImportsAs: t.ImportsAs()}, parts: [][]byte{t.Data}}
		mt.info.Layer, mt.info.Kind = classify(t.Name)
		rows, cols, err := t.Shape2D()
		if err == nil {
			err = layout.CheckDims(rows, cols)
		}
		switch {
		case err != nil:
			mt.info.Err = md.tensorErr(t.Name, fmt.Errorf("shape %v: not a matrix: %w", t.Dims, err))
		case gguf.Float(t.Type):
			mt.info.Rows, mt.info.Cols = rows, cols
			mt.info.ImportsAs = "quantized to " + md.opt.float.String()
			mt.floats = t.Float32s
			mt.rows = floatRows(t.Data, t.Type.String(), cols)
		case gguf.Lossless(t.Type):
			mt.info.Rows, mt.info.Cols = rows, cols
			file := md.maps[0]
			mt.load = func(mem func(int) []byte) (layout.Matrix, error) {
				// The blocks read from the file (pread), not through the
				// mapping: no 4 KiB fault per page of it.
				m, err := t.ImportGGMLWith(gguf.ImportOptions{Data: mem, Read: file.ReadInto})
				if err != nil {
					return nil, err
				}
				return m, nil
			}
		default:
			mt.info.Rows, mt.info.Cols = rows, cols
			// The importer's own reason, found once per type (it lists
			// the supported types: a file of many small tensors of an
			// unknown type would hold a copy per tensor).
			ierr, ok := unsupported[t.Type]
			if !ok {
				if _, ierr = t.Import(); ierr == nil {
					ierr = fmt.Errorf("%s: %s", t.Type, mt.info.ImportsAs)
				}
				unsupported[t.Type] = ierr
			}
			mt.info.Err = md.tensorErr(t.Name, ierr)
		}
		md.tensors = append(md.tensors, mt)
	}
	return nil
}

// hfSuffixes are the tensors of a GPTQ, AWQ or HQQ layer.
var hfSuffixes = []string{".qweight", ".qzeros", ".scales", ".g_idx", ".W_q", ".scale", ".zero", ".shape", ".nbits", ".group_size", ".axis"}

func (md *Model) openSafetensors(f *safetensors.File) error {
	md.format = "safetensors"
	var err error
	if md.opt.quant != nil {
		md.quant = *md.opt.quant
	} else if md.quant, err = readQuantConfig(filepath.Dir(md.path)); err != nil {
		return err
	}
	prefixes, kinds := hfquant.Layers(f)
	part := map[string]bool{}
	first := map[string]int{} // a layer's position: its first tensor in the file
	pos := map[string]int{}
	for i, n := range f.Names {
		pos[n] = i
	}
	var list []modelTensor
	for i, p := range prefixes {
		var parts [][]byte
		var n int64
		first[p] = len(f.Names)
		for _, suf := range hfSuffixes {
			if t, ok := f.Tensors[p+suf]; ok {
				part[p+suf] = true
				parts = append(parts, t.Data)
				n += int64(len(t.Data))
				first[p] = min(first[p], pos[p+suf])
			}
		}
		md.nameShards(p, hfSuffixes)
		mt := modelTensor{info: TensorInfo{Name: p, Type: strings.ToUpper(string(kinds[i])), Bytes: n}, parts: parts}
		mt.info.Layer, mt.info.Kind = classify(p)
		md.describeQuantized(&mt, f, p, kinds[i])
		list = append(list, mt)
	}
	for _, name := range f.Names {
		t := f.Tensors[name]
		if part[name] || len(t.Shape) < 2 {
			continue // a quantized layer's, or a norm or bias
		}
		mt := modelTensor{info: TensorInfo{Name: name, Type: string(t.DType), Bytes: int64(len(t.Data))}, parts: [][]byte{t.Data}}
		mt.info.Layer, mt.info.Kind = classify(name)
		first[name] = pos[name]
		switch {
		case len(t.Shape) != 2:
			mt.info.Err = md.tensorErr(name, fmt.Errorf("%s shape %v: not a matrix", t.DType, t.Shape))
		case t.DType != "F32" && t.DType != "F16" && t.DType != "BF16":
			mt.info.Rows, mt.info.Cols = t.Shape[0], t.Shape[1]
			mt.info.Err = md.tensorErr(name, fmt.Errorf("%s %v is neither a float matrix nor part of a GPTQ, AWQ or HQQ layer", t.DType, t.Shape))
		default:
			mt.info.Rows, mt.info.Cols = t.Shape[0], t.Shape[1]
			if err := layout.CheckDims(t.Shape[0], t.Shape[1]); err != nil {
				mt.info.Err = md.tensorErr(name, err)
				break
			}
			mt.info.ImportsAs = "quantized to " + md.opt.float.String()
			mt.floats = t.Float32s
			mt.rows = floatRows(t.Data, string(t.DType), t.Shape[1])
		}
		list = append(list, mt)
	}
	sort.SliceStable(list, func(i, j int) bool { return first[list[i].info.Name] < first[list[j].info.Name] })
	md.tensors = list
	return nil
}

// describeQuantized fills in the shape of a GPTQ, AWQ or HQQ layer from
// its tensors' shapes and the quantization config, checks that they
// agree, and sets its importer (or its error).
func (md *Model) describeQuantized(mt *modelTensor, f *safetensors.File, p string, k hfquant.Kind) {
	q := md.quant
	fail := func(format string, a ...any) { mt.info.Err = md.tensorErr(p, fmt.Errorf(format, a...)) }
	src := q.Source
	if src == "" {
		src = "no config file"
	}
	if q.Method != "" && q.Method != string(k) {
		fail("its tensors are %s-shaped, the quantization config (%s) says %s", strings.ToUpper(string(k)), src, q.Method)
		return
	}
	opt := hfquant.Options{Kind: k, Bits: q.Bits, Group: max(q.GroupSize, 0), Rows: q.HQQRows, Cols: q.HQQCols}
	groupsWant := func(in int) (int, bool) { // groups the config implies for in inputs
		switch {
		case q.GroupSize == -1:
			return 1, true
		case q.GroupSize > 0 && in%q.GroupSize == 0:
			return in / q.GroupSize, true
		case q.GroupSize > 0:
			return -1, true
		}
		return 0, false
	}
	switch k {
	case hfquant.KindGPTQ:
		if q.Source == "" {
			fail("GPTQ layer, but no %s beside the file gives its bits and checkpoint format (or pass WithQuantConfig)", strings.Join(quantConfigFiles, ", "))
			return
		}
		switch q.Format {
		case "", "gptq":
		case "gptq_v2":
			opt.V2 = true
		default:
			fail("checkpoint format %q (%s) is not supported (gptq, gptq_v2)", q.Format, src)
			return
		}
		b := q.Bits
		if b == 0 {
			fail("the quantization config (%s) gives no bits", src)
			return
		}
		qw, sc, qz := f.Tensors[p+".qweight"], f.Tensors[p+".scales"], f.Tensors[p+".qzeros"]
		if qz == nil || len(qz.Shape) != 2 {
			fail("%s.qzeros is missing or not 2-D", p)
			return
		}
		out, groups := sc.Shape[1], sc.Shape[0]
		var in, zc int
		switch b {
		case 2, 4, 8:
			in, zc = qw.Shape[0]*32/b, out*b/32
		case 3:
			in, zc = qw.Shape[0]/3*32, out/32*3
		default:
			fail("%d-bit GPTQ (%s) is not supported (2, 3, 4, 8)", b, src)
			return
		}
		if qz.Shape[1] != zc {
			fail("%s.qzeros has %d columns; %d outputs at %d bits (%s) need %d", p, qz.Shape[1], out, b, src, zc)
			return
		}
		if want, ok := groupsWant(in); ok && want != groups {
			fail("%s.scales has %d groups for %d inputs; group size %d (%s) needs %d", p, groups, in, q.GroupSize, src, want)
			return
		}
		if g, ok := f.Tensors[p+".g_idx"]; ok && (len(g.Shape) != 1 || g.Shape[0] != in) {
			fail("%s.g_idx has shape %v; %d inputs (%d rows of %d-bit codes, %s) need [%d]", p, g.Shape, in, qw.Shape[0], b, src, in)
			return
		} else if !ok && q.ActOrder {
			fail("the quantization config (%s) says desc_act (act order), but %s.g_idx, the column order, is missing", src, p)
			return
		}
		mt.info.Rows, mt.info.Cols = out, in
		mt.info.ImportsAs = bitsName(b, gptqGroup(in, groups)) + " exact (fp16 metadata)"
		if g, ok := f.Tensors[p+".g_idx"]; ok && !trivialGIdx(g, in, groups) {
			mt.info.ImportsAs += ", act-order permutation"
		}
	case hfquant.KindAWQ:
		if q.Bits != 0 && q.Bits != 4 {
			fail("AWQ layer, the quantization config (%s) says %d bits; AWQ GEMM checkpoints are 4-bit", src, q.Bits)
			return
		}
		if q.Format != "" && q.Format != "gemm" {
			fail("AWQ version %q (%s) is not supported (gemm)", q.Format, src)
			return
		}
		qw, sc := f.Tensors[p+".qweight"], f.Tensors[p+".scales"]
		in, out, groups := qw.Shape[0], sc.Shape[1], sc.Shape[0]
		if want, ok := groupsWant(in); ok && want != groups {
			fail("%s.scales has %d groups for %d inputs; group size %d (%s) needs %d", p, groups, in, q.GroupSize, src, want)
			return
		}
		mt.info.Rows, mt.info.Cols = out, in
		mt.info.ImportsAs = bitsName(4, gptqGroup(in, groups)) + " exact (fp16 metadata)"
	case hfquant.KindHQQ:
		rows, cols := q.HQQRows, q.HQQCols
		if t, ok := f.Tensors[p+".shape"]; ok {
			if v, err := t.Ints(); err == nil && len(v) == 2 {
				rows, cols = int(v[0]), int(v[1])
			}
		}
		mt.info.Rows, mt.info.Cols = rows, cols
		mt.info.ImportsAs = "Bits exact (HQQ: binary16 or float32 metadata, as stored)"
	}
	// The shape the tensors imply must be a matrix (an HQQ layer without
	// one is the loader's to explain: it asks for the options).
	if r, c := mt.info.Rows, mt.info.Cols; r != 0 || c != 0 {
		if err := layout.CheckDims(r, c); err != nil {
			fail("%v", err)
			return
		}
	}
	mt.load = func(mem func(int) []byte) (layout.Matrix, error) {
		opt := opt
		if mem != nil {
			opt.Words = func(n int) []uint32 {
				b := mem(4 * n)
				return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), n)
			}
		}
		b, _, err := hfquant.Load(f, p, opt)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}

// bitsName is layout.Bits.Name of n bits and groups of g columns (0: a
// row).
func bitsName(n, g int) string {
	if g == 0 {
		return fmt.Sprintf("Bits%dRow", n)
	}
	return fmt.Sprintf("Bits%dG%d", n, g)
}

// gptqGroup is the Bits group of in inputs in groups groups (0: a row).
func gptqGroup(in, groups int) int {
	if groups <= 1 || in%groups != 0 {
		return 0
	}
	return in / groups
}

// trivialGIdx reports whether g_idx is i/G (no act-order).
func trivialGIdx(t *safetensors.Tensor, in, groups int) bool {
	v, err := t.Int32s()
	if err != nil || len(v) != in || groups < 1 {
		return true
	}
	g := in / groups
	for i, x := range v {
		if g == 0 || int(x) != i/g {
			return false
		}
	}
	return true
}

// Path returns the file's path (a sharded checkpoint's: its index).
func (md *Model) Path() string {
	if md == nil {
		return ""
	}
	return md.path
}

// Format returns "gguf" or "safetensors".
func (md *Model) Format() string {
	if md == nil {
		return ""
	}
	return md.format
}

// Size returns the file's size in bytes (a sharded checkpoint's: its
// shards' together).
func (md *Model) Size() int64 {
	if md == nil {
		return 0
	}
	return md.size
}

// QuantConfig returns the quantization settings read from the config
// files beside a safetensors file (or given with WithQuantConfig);
// Source is "" when there were none.
func (md *Model) QuantConfig() QuantConfig {
	if md == nil {
		return QuantConfig{}
	}
	return md.quant
}

// Tensors returns the file's weight matrices (tensors of two or more
// dimensions; for GPTQ, AWQ and HQQ one entry per layer) in file order.
// Those that cannot be loaded carry the reason in Err.
func (md *Model) Tensors() []TensorInfo {
	if md == nil {
		return nil
	}
	out := make([]TensorInfo, len(md.tensors))
	for i, t := range md.tensors {
		out[i] = t.info
	}
	return out
}

func (md *Model) find(name string) (int, error) {
	for i, t := range md.tensors {
		if t.info.Name == name {
			return i, nil
		}
	}
	return -1, fmt.Errorf("qgemv: %s: no weight matrix %q (Model.Tensors lists them)", md.path, name)
}

// Import converts the named tensor into a matrix: exactly for the
// quantized types the importers read, by quantizing for float tensors.
// how says which ("exact", or the quantizer and its relative RMS error).
// The matrix does not alias the file.
func (md *Model) Import(name string) (m layout.Matrix, how string, err error) {
	if md == nil {
		return nil, "", ErrInvalid
	}
	md.mu.RLock()
	defer md.mu.RUnlock()
	if md.closed {
		return nil, "", ErrClosed
	}
	i, err := md.find(name)
	if err != nil {
		return nil, "", err
	}
	return md.importTensor(&md.tensors[i], true, nil)
}

// importTensor converts t (the read lock held); measure computes a
// float tensor's quantization error; mem, if set, supplies the memory of
// an exact import's codes (see modelTensor.load). A float tensor with a row source is
// read row by row as it is quantized (formats without a row quantizer of
// their own gather the rows), and again as the error is measured against
// the dequantized matrix: it is never held as float32 twice (a
// source-less one is converted whole).
func (md *Model) importTensor(t *modelTensor, measure bool, mem func(int) []byte) (layout.Matrix, string, error) {
	if t.info.Err != nil {
		return nil, "", t.info.Err
	}
	if t.load != nil {
		m, err := t.load(mem)
		if err != nil {
			return nil, "", md.tensorErr(t.info.Name, err)
		}
		if r, c := m.Shape(); t.info.Rows != 0 && (r != t.info.Rows || c != t.info.Cols) {
			return nil, "", md.tensorErr(t.info.Name, fmt.Errorf("imported as %dx%d, listed as %dx%d", r, c, t.info.Rows, t.info.Cols))
		}
		return m, "exact", nil
	}
	opt := layout.QuantOptions{Method: md.opt.method, IntegerZero: true}
	if t.rows != nil { // read row by row as the quantizer goes
		m, err := md.opt.float.QuantizeRows(t.info.Rows, t.info.Cols, opt, t.rows)
		if err != nil {
			return nil, "", md.tensorErr(t.info.Name, err)
		}
		how := "quantized to " + m.Name()
		if dq, ok := m.(interface{ Dequantize() []float32 }); ok && measure {
			e, err := layout.RelRMSErrorRows(dq.Dequantize(), t.info.Rows, t.info.Cols, t.rows)
			if err != nil {
				return nil, "", md.tensorErr(t.info.Name, err)
			}
			how += fmt.Sprintf(", relative RMS error %.5f", e)
		}
		return m, how, nil
	}
	w, err := t.floats()
	if err != nil {
		return nil, "", md.tensorErr(t.info.Name, err)
	}
	m, _, err := md.opt.float.Quantize(w, t.info.Rows, t.info.Cols, opt)
	if err != nil {
		return nil, "", md.tensorErr(t.info.Name, err)
	}
	how := "quantized to " + m.Name()
	if dq, ok := m.(interface{ Dequantize() []float32 }); ok && measure {
		how += fmt.Sprintf(", relative RMS error %.5f", layout.RelRMSError(dq.Dequantize(), w))
	}
	return m, how, nil
}

// Close unmaps the file (or the shards). Weights loaded from it stay
// loaded (they do not alias the file); a second Close returns ErrClosed.
func (md *Model) Close() error {
	if md == nil {
		return ErrInvalid
	}
	md.mu.Lock()
	defer md.mu.Unlock()
	if md.closed {
		return ErrClosed
	}
	md.closed = true
	return md.closeMaps()
}

// floatRows is the RowSource of a row-major matrix of cols columns stored
// as little-endian F32, F16 or BF16 (dtype, as GGUF and safetensors name
// them) in data: each row converted into the caller's buffer, exactly.
func floatRows(data []byte, dtype string, cols int) layout.RowSource {
	size := map[string]int{"F32": 4, "F16": 2, "BF16": 2}[dtype]
	return func(r int, buf []float32) ([]float32, error) {
		if size == 0 {
			return nil, fmt.Errorf("%s is not a float type", dtype)
		}
		if r < 0 || (r+1)*cols*size > len(data) || len(buf) < cols {
			return nil, fmt.Errorf("row %d of %d columns: outside the tensor's %d bytes", r, cols, len(data))
		}
		buf = buf[:cols]
		switch dtype {
		case "F32":
			b := data[4*r*cols : 4*(r+1)*cols]
			for i := range buf {
				buf[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		case "F16":
			b := data[2*r*cols : 2*(r+1)*cols]
			for i := range buf {
				buf[i] = layout.FP16(binary.LittleEndian.Uint16(b[2*i:])).Float32()
			}
		case "BF16":
			b := data[2*r*cols : 2*(r+1)*cols]
			for i := range buf {
				buf[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
			}
		}
		return buf, nil
	}
}
