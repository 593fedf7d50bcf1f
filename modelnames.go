package qgemv

import (
	"strconv"
	"strings"
)

// The tensor kinds TensorInfo.Kind names, in llama.cpp's spelling, in the
// order a decode step runs a layer's weights.
const (
	KindAttnQ      = "attn_q"
	KindAttnK      = "attn_k"
	KindAttnV      = "attn_v"
	KindAttnQKV    = "attn_qkv"
	KindAttnOutput = "attn_output"
	KindFFNGate    = "ffn_gate"
	KindFFNUp      = "ffn_up"
	KindFFNDown    = "ffn_down"
	KindOutput     = "output"     // the LM head
	KindTokenEmbd  = "token_embd" // the embedding table: a lookup, not multiplied
)

// kindOrder ranks kinds within a layer; kinds of the same tens read the
// same input (q, k and v; gate and up).
var kindOrder = map[string]int{
	KindAttnQ: 10, KindAttnK: 11, KindAttnV: 12, KindAttnQKV: 13,
	KindAttnOutput: 20,
	KindFFNGate:    30, KindFFNUp: 31,
	KindFFNDown: 40,
}

// hfKinds maps Hugging Face module names to kinds.
var hfKinds = map[string]string{
	"q_proj": KindAttnQ, "k_proj": KindAttnK, "v_proj": KindAttnV, "qkv_proj": KindAttnQKV, "o_proj": KindAttnOutput,
	"gate_proj": KindFFNGate, "up_proj": KindFFNUp, "down_proj": KindFFNDown,
	"lm_head": KindOutput, "embed_tokens": KindTokenEmbd,
}

// classify returns the layer (-1 for none) and kind ("" when not
// recognized) of a tensor name in llama.cpp's ("blk.3.attn_q.weight",
// "output.weight") or Hugging Face's ("model.layers.3.self_attn.q_proj",
// "lm_head.weight") convention.
func classify(name string) (layer int, kind string) {
	parts := strings.Split(strings.TrimSuffix(name, ".weight"), ".")
	layer = -1
	for i := 0; i+1 < len(parts); i++ {
		if p := parts[i]; p == "blk" || p == "layers" || p == "h" {
			if n, err := strconv.Atoi(parts[i+1]); err == nil && n >= 0 {
				layer = n
				parts = parts[i+2:]
				break
			}
		}
	}
	if len(parts) == 0 {
		return layer, ""
	}
	last := parts[len(parts)-1]
	if _, ok := kindOrder[last]; ok {
		return layer, last
	}
	if k, ok := hfKinds[last]; ok {
		return layer, k
	}
	if layer < 0 && (last == KindOutput || last == KindTokenEmbd) {
		return layer, last
	}
	return layer, ""
}
