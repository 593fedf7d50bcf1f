// Package testmodel writes small GGUF and safetensors files with random
// quantized tensors, for the command's tests and the import benchmarks.
// (The reader packages test against writers of their own, so that reader
// and writer never share a mistake.)
package testmodel

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"sort"

	"github.com/qgemv/qgemv/layout"
)

// GGUFTensor is a tensor to write: Dims[0] is the innermost dimension.
type GGUFTensor struct {
	Name string
	Type uint32
	Dims []uint64
	Data []byte
}

func appendStr(b []byte, s string) []byte {
	return append(binary.LittleEndian.AppendUint64(b, uint64(len(s))), s...)
}

// GGUF returns a version-3 GGUF file with string metadata and the tensors
// (alignment 32).
func GGUF(meta map[string]string, ts []GGUFTensor) []byte {
	out := []byte("GGUF")
	out = binary.LittleEndian.AppendUint32(out, 3)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(ts)))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(meta)))
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = appendStr(out, k)
		out = binary.LittleEndian.AppendUint32(out, 8)
		out = appendStr(out, meta[k])
	}
	var data []byte
	for _, t := range ts {
		for len(data)%32 != 0 {
			data = append(data, 0)
		}
		out = appendStr(out, t.Name)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			out = binary.LittleEndian.AppendUint64(out, d)
		}
		out = binary.LittleEndian.AppendUint32(out, t.Type)
		out = binary.LittleEndian.AppendUint64(out, uint64(len(data)))
		data = append(data, t.Data...)
	}
	for len(out)%32 != 0 {
		out = append(out, 0)
	}
	return append(out, data...)
}

// STTensor is a safetensors tensor to write.
type STTensor struct {
	Name, DType string
	Shape       []int
	Data        []byte
}

// Safetensors returns a safetensors file holding the tensors in order.
func Safetensors(ts []STTensor) []byte {
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var body []byte
	for _, t := range ts {
		hdr[t.Name] = map[string]any{"dtype": t.DType, "shape": t.Shape, "data_offsets": []int{len(body), len(body) + len(t.Data)}}
		body = append(body, t.Data...)
	}
	j, _ := json.Marshal(hdr)
	for len(j)%8 != 0 {
		j = append(j, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(j)))
	return append(append(out, j...), body...)
}

func half(rng *rand.Rand, lo, hi float64) []byte {
	return binary.LittleEndian.AppendUint16(nil, uint16(layout.ToFP16(float32(lo+float64(rng.Float64()*(hi-lo))))))
}

// Blocks returns random ggml blocks of type typ (2 Q4_0, 3 Q4_1, 8 Q8_0,
// 12 Q4_K) for a rows x cols matrix, with sane binary16 fields.
func Blocks(rng *rand.Rand, typ uint32, rows, cols int) []byte {
	var out []byte
	var blk, head int
	switch typ {
	case 2:
		blk, head = 32, 1
	case 3:
		blk, head = 32, 2
	case 8:
		blk, head = 32, 1
	case 12:
		blk, head = 256, 2
	default:
		panic("testmodel: unsupported block type")
	}
	size := map[uint32]int{2: 18, 3: 20, 8: 34, 12: 144}[typ]
	for i := 0; i < rows*cols/blk; i++ {
		b := half(rng, 1e-3, 0.02)
		if head == 2 {
			b = append(b, half(rng, -0.02, 0.02)...)
		}
		for len(b) < size {
			b = append(b, byte(rng.Uint32()))
		}
		out = append(out, b...)
	}
	return out
}

// GPTQ returns the stored tensors of a random 4-bit GPTQ layer (in
// inputs, out outputs, group g), act-order when actOrder.
func GPTQ(rng *rand.Rand, in, out, g int, actOrder bool) []STTensor {
	groups := in / g
	i32 := func(v []uint32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, x)
		}
		return b
	}
	qw := make([]uint32, in/8*out)
	for i := range qw {
		qw[i] = rng.Uint32()
	}
	qz := make([]uint32, groups*out/8)
	for i := range qz {
		qz[i] = rng.Uint32() & 0x66666666 // stored zeros 0..6: z = 1..7
	}
	var sc []byte
	for i := 0; i < groups*out; i++ {
		sc = append(sc, half(rng, 1e-3, 0.02)...)
	}
	gidx := make([]uint32, in)
	perm := rng.Perm(in)
	for j := range gidx {
		if actOrder {
			gidx[perm[j]] = uint32(j / g)
		} else {
			gidx[j] = uint32(j / g)
		}
	}
	return []STTensor{
		{"qweight", "I32", []int{in / 8, out}, i32(qw)},
		{"qzeros", "I32", []int{groups, out / 8}, i32(qz)},
		{"scales", "F16", []int{groups, out}, sc},
		{"g_idx", "I32", []int{in}, i32(gidx)},
	}
}
