package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/testmodel"
)

// cmdGenModel writes a LLaMA-shaped model with random weights: GGUF in
// one of llama.cpp's type mixes, or a GPTQ checkpoint directory.
func cmdGenModel(args []string) error {
	fs := flag.NewFlagSet("genmodel", flag.ContinueOnError)
	mix := fs.String("mix", testmodel.MixQ4KM, "GGUF type mix ("+strings.Join(testmodel.Mixes, ", ")+") or gptq (a safetensors checkpoint with config.json and quantize_config.json)")
	out := fs.String("o", "", "output file (GGUF) or directory (gptq; created)")
	l := testmodel.Llama3_8B(4)
	fs.IntVar(&l.Layers, "layers", l.Layers, "transformer blocks")
	fs.IntVar(&l.Hidden, "hidden", l.Hidden, "model dimension (a multiple of 256)")
	fs.IntVar(&l.FFN, "ffn", l.FFN, "feed-forward dimension (a multiple of 256)")
	fs.IntVar(&l.KV, "kv", l.KV, "rows of attn_k and attn_v (key/value heads x head size)")
	fs.IntVar(&l.Vocab, "vocab", 0, "vocabulary: with > 0, also token_embd and output matrices")
	seed := fs.Uint64("seed", 1, "random seed")
	var q testmodel.GPTQConfig
	fs.IntVar(&q.Bits, "bits", 4, "gptq: bits (2, 4, 8)")
	fs.IntVar(&q.Group, "group", 128, "gptq: group size (-1: one group per row)")
	fs.BoolVar(&q.ActOrder, "act-order", false, "gptq: desc_act (random g_idx permutation)")
	fs.BoolVar(&q.V2, "gptq-v2", false, "gptq: checkpoint_format gptq_v2")
	fs.IntVar(&q.Shards, "shards", 1, "gptq: split the checkpoint into up to this many shards with a model.safetensors.index.json")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: qgemv genmodel [flags] -o FILE.gguf | -mix gptq -o DIR\n\nWrites a LLaMA-3-8B-shaped model (4 layers by default) with random weights, for qgemv bench -model.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *out == "" {
		fs.Usage()
		return fmt.Errorf("genmodel: need -o and no arguments")
	}
	l.Seed = *seed
	if q.Shards != 1 && *mix != "gptq" {
		return fmt.Errorf("genmodel: -shards is for -mix gptq")
	}
	if q.Shards < 1 {
		return fmt.Errorf("genmodel: -shards %d: want 1 or more", q.Shards)
	}
	if q.Group == 0 || q.Group < -1 {
		return fmt.Errorf("genmodel: -group %d: want a group size above 0, or -1 for one group per row", q.Group)
	}
	t0 := time.Now()
	if *mix == "gptq" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		p, err := l.WriteGPTQ(*out, q)
		if err != nil {
			return fmt.Errorf("genmodel: %w", err)
		}
		md, err := qgemv.OpenModel(p) // the size of every shard, and a check of what was written
		if err != nil {
			return fmt.Errorf("genmodel: %w", err)
		}
		defer md.Close()
		fmt.Printf("%s: GPTQ %d-bit group %d, %d layers, %d bytes (and config.json, quantize_config.json) in %.1f s\n", p, q.Bits, q.Group, l.Layers, md.Size(), time.Since(t0).Seconds())
		return nil
	}
	n, err := l.WriteGGUFFile(*out, *mix)
	if err != nil {
		return fmt.Errorf("genmodel: %w", err)
	}
	fmt.Printf("%s: GGUF %s, %d layers, %d bytes in %.1f s\n", *out, *mix, l.Layers, n, time.Since(t0).Seconds())
	return nil
}
