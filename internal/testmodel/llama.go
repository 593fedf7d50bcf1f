package testmodel

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/qgemv/qgemv/internal/outpath"
	"github.com/qgemv/qgemv/internal/par"
	"github.com/qgemv/qgemv/layout"
)

// Llama is the shape of a LLaMA-style model to generate: Layers blocks
// of attn_q and attn_output (Hidden x Hidden), attn_k and attn_v (KV x
// Hidden), ffn_gate and ffn_up (FFN x Hidden) and ffn_down (Hidden x FFN),
// each written as rows x cols with cols the inputs, plus the 1-D norms;
// with Vocab > 0 also token_embd and output (Vocab x Hidden). Weights
// are random (sane binary16 scales), drawn from Seed.
type Llama struct {
	Layers, Hidden, FFN, KV, Vocab int
	Seed                           uint64
}

// Llama3_8B returns LLaMA-3-8B's shape with the given number of layers
// (the real model has 32) and no vocabulary matrices.
func Llama3_8B(layers int) Llama {
	return Llama{Layers: layers, Hidden: 4096, FFN: 14336, KV: 1024, Seed: 1}
}

// The GGUF type mixes WriteGGUF writes, named as llama-quantize names them.
const (
	MixQ4KM = "q4_k_m"
	MixQ4_0 = "q4_0"
	MixQ8_0 = "q8_0"
	MixF16  = "f16"  // an unquantized checkpoint, as llama.cpp's converter writes it with --outtype f16
	MixBF16 = "bf16" // the same in bfloat16 (--outtype bf16)
)

// Mixes lists the GGUF type mixes.
var Mixes = []string{MixQ4KM, MixQ4_0, MixQ8_0, MixF16, MixBF16}

// ggml type ids (layout/gguf's numbering) and their blocks.
const (
	typeF32  = 0
	typeF16  = 1
	typeQ4_0 = 2
	typeQ8_0 = 8
	typeQ4_K = 12
	typeQ6_K = 14
	typeBF16 = 30
)

var blockOf = map[uint32][2]int{ // elements, bytes
	typeF32: {1, 4}, typeF16: {1, 2}, typeBF16: {1, 2}, typeQ4_0: {32, 18}, typeQ8_0: {32, 34}, typeQ4_K: {256, 144}, typeQ6_K: {256, 210},
}

// fileType is general.file_type (llama_ftype) of each mix.
var fileType = map[string]uint32{MixF16: 1, MixBF16: 32, MixQ4_0: 2, MixQ8_0: 7, MixQ4KM: 15}

// useMoreBits is llama.cpp's choice of the layers that get more bits in
// the _M mixes: the first and last eighth, and every third in between.
func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

// GGUFType returns the ggml type llama-quantize gives tensor kind (the
// name without "blk.N." and ".weight") of layer i under mix, following
// llama_tensor_get_type for a dense LLaMA (not 70B, no experts):
//
//	q4_k_m: Q4_K, except attn_v and ffn_down of the layers useMoreBits
//	        picks (with 4 layers: 2 and 3) and output, which are Q6_K
//	q4_0:   Q4_0, output Q6_K
//	q8_0:   Q8_0
//	f16:    F16 (every matrix; qgemv quantizes them on load)
//	bf16:   BF16 (likewise)
func GGUFType(mix, kind string, i, n int) (uint32, error) {
	switch mix {
	case MixQ4KM:
		if kind == "output" || (kind == "attn_v" || kind == "ffn_down") && useMoreBits(i, n) {
			return typeQ6_K, nil
		}
		return typeQ4_K, nil
	case MixQ4_0:
		if kind == "output" {
			return typeQ6_K, nil
		}
		return typeQ4_0, nil
	case MixQ8_0:
		return typeQ8_0, nil
	case MixF16:
		return typeF16, nil
	case MixBF16:
		return typeBF16, nil
	}
	return 0, fmt.Errorf("testmodel: unknown mix %q (want %s)", mix, strings.Join(Mixes, ", "))
}

func (l Llama) check() error {
	if l.Layers < 1 || l.Layers > 1024 || l.Hidden < 256 || l.FFN < 256 || l.KV < 1 || l.Vocab < 0 ||
		l.Hidden%256 != 0 || l.FFN%256 != 0 || l.Hidden > layout.MaxDim || l.FFN > layout.MaxDim || l.KV > l.Hidden || l.Vocab > layout.MaxDim {
		return fmt.Errorf("testmodel: shape %+v: want 1..1024 layers, Hidden and FFN multiples of 256, 1 <= KV <= Hidden", l)
	}
	return nil
}

// matrix is one weight of a block: its kind and rows x cols.
type matrix struct {
	kind       string
	rows, cols int
}

// blockGGUF lists a block's tensors in the order llama.cpp's converter
// writes a LLaMA checkpoint (the Hugging Face names' order: norms and MLP
// before attention), which is not the order a decode step runs them in.
func (l Llama) blockGGUF() []matrix {
	H, F, K := l.Hidden, l.FFN, l.KV
	return []matrix{{"attn_norm", 1, H}, {"ffn_down", H, F}, {"ffn_gate", F, H}, {"ffn_up", F, H}, {"ffn_norm", 1, H},
		{"attn_k", K, H}, {"attn_output", H, H}, {"attn_q", H, H}, {"attn_v", K, H}}
}

// ggufTensor is a tensor WriteGGUF streams: its info and a filler.
type ggufTensor struct {
	name string
	typ  uint32
	dims []uint64
}

func (t ggufTensor) size() int64 {
	b := blockOf[t.typ]
	n := int64(1)
	for _, d := range t.dims {
		n *= int64(d)
	}
	return n / int64(b[0]) * int64(b[1])
}

// kv is a typed GGUF metadata pair.
type kv struct {
	key string
	val any // string, uint32 or float32
}

// WriteGGUF writes the model as a GGUF version 3 file in mix's types
// (see GGUFType; norms F32) with llama.cpp's metadata keys, and returns
// the bytes written. Blocks are random, with sane binary16 scales.
func (l Llama) WriteGGUF(w io.Writer, mix string) (int64, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	var ts []ggufTensor
	add := func(name, kind string, layer, rows, cols int) error {
		typ := uint32(typeF32)
		if rows > 1 {
			var err error
			if typ, err = GGUFType(mix, kind, layer, l.Layers); err != nil {
				return err
			}
		}
		dims := []uint64{uint64(cols)}
		if rows > 1 {
			dims = append(dims, uint64(rows))
		}
		ts = append(ts, ggufTensor{name, typ, dims})
		return nil
	}
	if l.Vocab > 0 {
		if err := add("token_embd.weight", "token_embd", 0, l.Vocab, l.Hidden); err != nil {
			return 0, err
		}
	}
	for i := 0; i < l.Layers; i++ {
		for _, m := range l.blockGGUF() {
			if err := add(fmt.Sprintf("blk.%d.%s.weight", i, m.kind), m.kind, i, m.rows, m.cols); err != nil {
				return 0, err
			}
		}
	}
	if err := add("output_norm.weight", "output_norm", 0, 1, l.Hidden); err != nil {
		return 0, err
	}
	if l.Vocab > 0 {
		if err := add("output.weight", "output", 0, l.Vocab, l.Hidden); err != nil {
			return 0, err
		}
	}
	meta := []kv{
		{"general.architecture", "llama"},
		{"general.name", fmt.Sprintf("qgemv test model (LLaMA-3-8B shape, %d layers, %s, random weights)", l.Layers, mix)},
		{"general.file_type", fileType[mix]},
		{"general.quantization_version", uint32(2)},
		{"llama.block_count", uint32(l.Layers)},
		{"llama.context_length", uint32(8192)},
		{"llama.embedding_length", uint32(l.Hidden)},
		{"llama.feed_forward_length", uint32(l.FFN)},
		{"llama.attention.head_count", uint32(l.Hidden / 128)},
		{"llama.attention.head_count_kv", uint32(max(1, l.KV/128))},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.freq_base", float32(500000)},
	}
	return writeGGUF(w, meta, ts, l.Seed)
}

// writeGGUF streams the header and then each tensor's random data.
func writeGGUF(w io.Writer, meta []kv, ts []ggufTensor, seed uint64) (int64, error) {
	const align = 32
	cw := &countWriter{w: bufio.NewWriterSize(w, 1<<20)}
	hdr := []byte("GGUF")
	hdr = binary.LittleEndian.AppendUint32(hdr, 3)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(ts)))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(meta)))
	for _, p := range meta {
		hdr = appendStr(hdr, p.key)
		switch v := p.val.(type) {
		case string:
			hdr = binary.LittleEndian.AppendUint32(hdr, 8)
			hdr = appendStr(hdr, v)
		case uint32:
			hdr = binary.LittleEndian.AppendUint32(hdr, 4)
			hdr = binary.LittleEndian.AppendUint32(hdr, v)
		case float32:
			hdr = binary.LittleEndian.AppendUint32(hdr, 6)
			hdr = binary.LittleEndian.AppendUint32(hdr, math.Float32bits(v))
		default:
			return 0, fmt.Errorf("testmodel: metadata %s: unsupported type %T", p.key, v)
		}
	}
	off := int64(0)
	for _, t := range ts {
		hdr = appendStr(hdr, t.name)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(t.dims)))
		for _, d := range t.dims {
			hdr = binary.LittleEndian.AppendUint64(hdr, d)
		}
		hdr = binary.LittleEndian.AppendUint32(hdr, t.typ)
		hdr = binary.LittleEndian.AppendUint64(hdr, uint64(off))
		off = (off + t.size() + align - 1) / align * align
	}
	for len(hdr)%align != 0 {
		hdr = append(hdr, 0)
	}
	cw.Write(hdr)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var buf []byte
	for _, t := range ts {
		n := t.size()
		buf = grow(buf, int(n+align))
		fillBlocks(rng, t.typ, buf[:n])
		pad := (align - n%align) % align
		clear(buf[n : n+pad])
		cw.Write(buf[:n+pad])
	}
	if cw.err == nil {
		cw.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, cw.err
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
	return n, err
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// fillRandom fills b with random bytes, 8 at a time.
func fillRandom(rng *rand.Rand, b []byte) {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	for v := rng.Uint64(); i < len(b); i, v = i+1, v>>8 {
		b[i] = byte(v)
	}
}

// putHalf stores a binary16 value drawn uniformly from [lo, hi).
func putHalf(rng *rand.Rand, b []byte, lo, hi float64) {
	binary.LittleEndian.PutUint16(b, uint16(layout.ToFP16(float32(lo+float64(rng.Float64()*(hi-lo))))))
}

// fillBlocks fills b with random blocks of ggml type typ whose binary16
// fields are sane (finite, positive scales of weights around +-0.05):
//
//	Q4_0 (18 bytes): d, 16 bytes of nibbles
//	Q8_0 (34 bytes): d, 32 int8
//	Q4_K (144 bytes): d, dmin, 12 bytes of 6-bit scales and mins, 128 of nibbles
//	Q6_K (210 bytes): 128 bytes ql, 64 qh, 16 int8 scales, d (last)
//	F32: standard normal values
//	F16, BF16: normal values of standard deviation 0.02 (a trained LLaMA's
//	scale; BF16 truncated)
func fillBlocks(rng *rand.Rand, typ uint32, b []byte) {
	switch typ {
	case typeF32:
		for i := 0; i+4 <= len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(rng.NormFloat64())))
		}
		return
	case typeF16, typeBF16:
		fillHalves(rng, typ == typeBF16, b)
		return
	}
	fillRandom(rng, b)
	size := blockOf[typ][1]
	for o := 0; o+size <= len(b); o += size {
		blk := b[o : o+size]
		switch typ {
		case typeQ4_0, typeQ8_0:
			putHalf(rng, blk, 1e-3, 0.02)
		case typeQ4_K:
			putHalf(rng, blk, 1e-4, 2e-3)
			putHalf(rng, blk[2:], 1e-4, 2e-3)
		case typeQ6_K:
			putHalf(rng, blk[208:], 1e-5, 1e-4)
		}
	}
}

// halfChunk is the values per independently seeded chunk of fillHalves.
const halfChunk = 1 << 16

// fillHalves fills b with binary16 (bf16: bfloat16, truncated) normal
// values of standard deviation 0.02, in chunks of halfChunk values filled
// in parallel, each from its own generator seeded by rng in chunk order:
// the bytes do not depend on the schedule.
func fillHalves(rng *rand.Rand, bf16 bool, b []byte) {
	n := len(b) / 2
	seeds := make([]uint64, (n+halfChunk-1)/halfChunk)
	for i := range seeds {
		seeds[i] = rng.Uint64()
	}
	_ = par.Each(len(seeds), func() func(int) error {
		f := make([]float32, halfChunk)
		h := make([]layout.FP16, halfChunk)
		return func(c int) error {
			r := rand.New(rand.NewPCG(seeds[c], uint64(c)))
			f := f[:min(halfChunk, n-c*halfChunk)]
			for i := range f {
				f[i] = float32(r.NormFloat64() * 0.02)
			}
			out := b[2*c*halfChunk:]
			if bf16 {
				for i, v := range f {
					binary.LittleEndian.PutUint16(out[2*i:], uint16(math.Float32bits(v)>>16))
				}
				return nil
			}
			layout.ToFP16s(h, f)
			for i, v := range h[:len(f)] {
				binary.LittleEndian.PutUint16(out[2*i:], uint16(v))
			}
			return nil
		}
	})
}

// GPTQConfig is the quantization WriteGPTQ writes.
type GPTQConfig struct {
	Bits     int  // 4 (8 and 2 also pack; 3 does not here)
	Group    int  // 128, or -1 for one group per row
	ActOrder bool // desc_act: g_idx is a random permutation of the groups
	V2       bool // checkpoint_format gptq_v2: zeros stored as is (else minus one)
	Shards   int  // above 1: that many shards and an index, as save_pretrained splits a large checkpoint
}

// WriteGPTQ writes the model as a GPTQ checkpoint into dir:
// model.safetensors (qweight, qzeros, scales, g_idx per projection,
// model.layers.N.self_attn.{q,k,v,o}_proj and mlp.{gate,up,down}_proj;
// binary16 norms; embed_tokens and lm_head in binary16 when Vocab > 0),
// config.json with a quantization_config and quantize_config.json, as
// AutoGPTQ and GPTQModel save them. Tensors are in the order the
// safetensors library writes them (by dtype, widest first, then name).
// Codes are random, zeros symmetric (8 for 4 bits), scales sane. It
// returns the model file's path. With Shards > 1 the tensors, in the
// model's order, are split into up to that many runs of about equal bytes
// (a layer's tensors may straddle two), written as
// model-0000i-of-0000n.safetensors, and the path returned is that of
// their index, model.safetensors.index.json.
func (l Llama) WriteGPTQ(dir string, q GPTQConfig) (string, error) {
	if err := l.check(); err != nil {
		return "", err
	}
	if q.Bits != 2 && q.Bits != 4 && q.Bits != 8 {
		return "", fmt.Errorf("testmodel: GPTQ %d bits: want 2, 4 or 8", q.Bits)
	}
	g := q.Group
	if g == -1 {
		g = 0
	}
	if g != 0 && (g%32 != 0 || l.Hidden%g != 0 || l.FFN%g != 0) {
		return "", fmt.Errorf("testmodel: GPTQ group %d does not divide %d and %d", q.Group, l.Hidden, l.FFN)
	}
	H, F, K := l.Hidden, l.FFN, l.KV
	if K*q.Bits%32 != 0 {
		return "", fmt.Errorf("testmodel: GPTQ: %d outputs do not pack into %d-bit words", K, q.Bits)
	}
	var ts []stTensor
	for i := 0; i < l.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		for _, m := range []struct {
			name    string
			out, in int
		}{{"self_attn.q_proj", H, H}, {"self_attn.k_proj", K, H}, {"self_attn.v_proj", K, H}, {"self_attn.o_proj", H, H},
			{"mlp.gate_proj", F, H}, {"mlp.up_proj", F, H}, {"mlp.down_proj", H, F}} {
			ts = append(ts, gptqLayer(p+m.name, m.in, m.out, q.Bits, g, q.ActOrder, q.V2)...)
		}
		ts = append(ts, stTensor{name: p + "input_layernorm.weight", dtype: "F16", shape: []int{H}, fill: fillHalfOnes},
			stTensor{name: p + "post_attention_layernorm.weight", dtype: "F16", shape: []int{H}, fill: fillHalfOnes})
	}
	ts = append(ts, stTensor{name: "model.norm.weight", dtype: "F16", shape: []int{H}, fill: fillHalfOnes})
	if l.Vocab > 0 {
		ts = append(ts, stTensor{name: "model.embed_tokens.weight", dtype: "F16", shape: []int{l.Vocab, H}, fill: fillF16Normal},
			stTensor{name: "lm_head.weight", dtype: "F16", shape: []int{l.Vocab, H}, fill: fillF16Normal})
	}
	path, err := writeShards(dir, ts, max(q.Shards, 1), l.Seed)
	if err != nil {
		return "", err
	}
	format := "gptq"
	if q.V2 {
		format = "gptq_v2"
	}
	qc := map[string]any{"bits": q.Bits, "group_size": q.Group, "desc_act": q.ActOrder, "sym": true, "damp_percent": 0.01,
		"static_groups": false, "true_sequential": true, "quant_method": "gptq", "checkpoint_format": format,
		"model_name_or_path": nil, "model_file_base_name": "model"}
	cfg := map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama", "torch_dtype": "float16",
		"hidden_size": H, "intermediate_size": F, "num_hidden_layers": l.Layers, "num_attention_heads": H / 128,
		"num_key_value_heads": max(1, K/128), "vocab_size": max(l.Vocab, 128256), "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
		"quantization_config": map[string]any{"quant_method": "gptq", "bits": q.Bits, "group_size": q.Group, "desc_act": q.ActOrder,
			"sym": true, "checkpoint_format": format},
	}
	for name, v := range map[string]any{"config.json": cfg, "quantize_config.json": qc} {
		j, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, name), append(j, '\n'), 0o644); err != nil {
			return "", err
		}
	}
	return path, nil
}

// writeShards writes ts as dir/model.safetensors (n = 1), or split in
// order into up to n shards of about equal bytes with their index, and
// returns the path to open.
func writeShards(dir string, ts []stTensor, n int, seed uint64) (string, error) {
	// a checkpoint written before in the other layout would shadow this
	// one (OpenModel on the directory prefers the index)
	old, _ := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
	for _, p := range append(old, filepath.Join(dir, "model.safetensors"), filepath.Join(dir, "model.safetensors.index.json")) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	write := func(name string, part []stTensor, seed uint64) error {
		_, err := writeFile(filepath.Join(dir, name), func(w io.Writer) (int64, error) { return writeSafetensors(w, part, seed) })
		return err
	}
	if n == 1 {
		return filepath.Join(dir, "model.safetensors"), write("model.safetensors", ts, seed)
	}
	var total int64
	for _, t := range ts {
		total += t.size()
	}
	// a shard ends where the bytes so far reach its share, one tensor at
	// least each (a large tensor can leave fewer shards than n)
	bounds, cum := []int{0}, int64(0)
	for i, t := range ts[:len(ts)-1] {
		cum += t.size()
		if k := len(bounds); k < n && cum >= total*int64(k)/int64(n) {
			bounds = append(bounds, i+1)
		}
	}
	bounds = append(bounds, len(ts))
	weights := map[string]string{}
	var written []string // removed if a later shard or the index fails: no checkpoint without its index
	fail := func(err error) (string, error) {
		for _, p := range written {
			os.Remove(p)
		}
		return "", err
	}
	for k := 0; k+1 < len(bounds); k++ {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", k+1, len(bounds)-1)
		part := slices.Clone(ts[bounds[k]:bounds[k+1]])
		for _, t := range part {
			weights[t.name] = name
		}
		if err := write(name, part, seed+uint64(k)); err != nil {
			return fail(err)
		}
		written = append(written, filepath.Join(dir, name))
	}
	j, err := json.MarshalIndent(map[string]any{"metadata": map[string]int64{"total_size": total}, "weight_map": weights}, "", "  ")
	if err != nil {
		return fail(err)
	}
	path := filepath.Join(dir, "model.safetensors.index.json")
	if _, err := writeFile(path, func(w io.Writer) (int64, error) {
		n, err := w.Write(append(j, '\n'))
		return int64(n), err
	}); err != nil {
		return fail(err)
	}
	return path, nil
}

// stTensor is a safetensors tensor WriteGPTQ streams.
type stTensor struct {
	name, dtype string
	shape       []int
	fill        func(rng *rand.Rand, b []byte)
}

func (t stTensor) size() int64 {
	n := int64(map[string]int{"I32": 4, "F16": 2, "F32": 4}[t.dtype])
	for _, d := range t.shape {
		n *= int64(d)
	}
	return n
}

// gptqLayer returns the stored tensors of a random GPTQ layer with in
// inputs, out outputs, b bits and groups of g (0: one per row).
func gptqLayer(p string, in, out, b, g int, actOrder, v2 bool) []stTensor {
	groups := 1
	if g != 0 {
		groups = in / g
	}
	zero := uint32(1)<<(b-1) - 1 // symmetric: z = 2^(b-1), stored minus one
	if v2 {
		zero++
	}
	var zw uint32
	for k := 0; k < 32/b; k++ {
		zw |= zero << (b * k)
	}
	return []stTensor{
		{p + ".qweight", "I32", []int{in * b / 32, out}, fillRandom},
		{p + ".qzeros", "I32", []int{groups, out * b / 32}, func(_ *rand.Rand, d []byte) {
			for i := 0; i+4 <= len(d); i += 4 {
				binary.LittleEndian.PutUint32(d[i:], zw)
			}
		}},
		{p + ".scales", "F16", []int{groups, out}, func(rng *rand.Rand, d []byte) {
			for i := 0; i+2 <= len(d); i += 2 {
				putHalf(rng, d[i:], 1e-3, 0.02)
			}
		}},
		{p + ".g_idx", "I32", []int{in}, func(rng *rand.Rand, d []byte) {
			gs := in / groups
			perm := make([]int, in)
			for j := range perm {
				perm[j] = j
			}
			if actOrder {
				rng.Shuffle(in, func(a, c int) { perm[a], perm[c] = perm[c], perm[a] })
			}
			for j := 0; j < in; j++ { // column perm[j] is the j-th in quantization order
				binary.LittleEndian.PutUint32(d[4*perm[j]:], uint32(j/gs))
			}
		}},
	}
}

func fillHalfOnes(_ *rand.Rand, b []byte) {
	for i := 0; i+2 <= len(b); i += 2 {
		binary.LittleEndian.PutUint16(b[i:], uint16(layout.ToFP16(1)))
	}
}

func fillF16Normal(rng *rand.Rand, b []byte) { fillHalves(rng, false, b) }

// dtypeRank orders dtypes as the safetensors library does when it
// serializes (widest first).
var dtypeRank = map[string]int{"F32": 3, "I32": 2, "F16": 1}

// writeSafetensors streams a safetensors file: the JSON header (padded
// to 8 bytes), then each tensor's data in the library's order.
func writeSafetensors(w io.Writer, ts []stTensor, seed uint64) (int64, error) {
	sort.SliceStable(ts, func(i, j int) bool {
		if dtypeRank[ts[i].dtype] != dtypeRank[ts[j].dtype] {
			return dtypeRank[ts[i].dtype] > dtypeRank[ts[j].dtype]
		}
		return ts[i].name < ts[j].name
	})
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	off := int64(0)
	for _, t := range ts {
		hdr[t.name] = map[string]any{"dtype": t.dtype, "shape": t.shape, "data_offsets": []int64{off, off + t.size()}}
		off += t.size()
	}
	j, err := json.Marshal(hdr)
	if err != nil {
		return 0, err
	}
	for len(j)%8 != 0 {
		j = append(j, ' ')
	}
	cw := &countWriter{w: bufio.NewWriterSize(w, 1<<20)}
	cw.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(j))))
	cw.Write(j)
	rng := rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d))
	var buf []byte
	for _, t := range ts {
		buf = grow(buf, int(t.size()))
		t.fill(rng, buf)
		cw.Write(buf)
	}
	if cw.err == nil {
		cw.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, cw.err
}

// WriteGGUFFile writes the model to path (see WriteGGUF).
func (l Llama) WriteGGUFFile(path, mix string) (int64, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	if _, err := GGUFType(mix, "attn_q", 0, 1); err != nil {
		return 0, err
	}
	return writeFile(path, func(w io.Writer) (int64, error) { return l.WriteGGUF(w, mix) })
}

// writeFile writes a file at path through a temporary file beside it,
// renamed over path once complete: a failed write (a full disk, a file
// size limit) leaves what was at path as it was and no partial file.
// An existing path that is not a regular file (a directory, a device)
// is an error before anything is written.
func writeFile(path string, write func(io.Writer) (int64, error)) (n int64, err error) {
	err = outpath.Write(path, false, func(w io.Writer) error {
		n, err = write(w)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("testmodel: %w", err)
	}
	return n, nil
}
