package safetensors

import (
	"encoding/json"
	"slices"
	"strings"
)

// IndexFile is the name Hugging Face gives a sharded checkpoint's index,
// beside its shards (model-00001-of-00004.safetensors, ...).
const IndexFile = "model.safetensors.index.json"

// MaxIndex bounds an index file (it lists tensor names and file names;
// an 8B model's is about 25 KB, a 405B model's under 1 MB).
const MaxIndex = 64 << 20

// Index is a sharded checkpoint's index: the shard file of every tensor
// ("weight_map"; the "metadata" object is not read).
type Index struct {
	WeightMap map[string]string
}

// ParseIndex parses an index file's bytes. Every shard must be a plain
// file name (no directory, so that an index cannot point outside its own
// directory), and there must be at least one tensor.
func ParseIndex(data []byte) (*Index, error) {
	if len(data) > MaxIndex {
		return nil, errf("index: %d bytes, above the %d-byte limit", len(data), MaxIndex)
	}
	var raw struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, errf("index JSON: %v", err)
	}
	if len(raw.WeightMap) == 0 {
		return nil, errf("index: no weight_map (or an empty one)")
	}
	for name, shard := range raw.WeightMap {
		if shard == "" || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) || strings.ContainsRune(shard, 0) {
			return nil, errf("index: tensor %q is in %q, which is not a file name beside the index", name, shard)
		}
	}
	return &Index{WeightMap: raw.WeightMap}, nil
}

// Shards returns the index's shard file names, sorted (the order of
// Hugging Face's numbered shards).
func (ix *Index) Shards() []string {
	var s []string
	for _, f := range ix.WeightMap {
		s = append(s, f)
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// Merge joins shards, parsed from the files Shards names and in that
// order, into one File: Tensors holds every tensor, Names runs shard by
// shard in each shard's file order, Metadata is the first shard's. Each
// tensor must be in the shard the index names (so none is in two) and
// each shard's tensors in the index. The merged File's Close does
// nothing: the caller closes the shards.
func (ix *Index) Merge(shards []*File) (*File, error) {
	names := ix.Shards()
	if len(names) == 0 {
		return nil, errf("index: no tensors")
	}
	if len(shards) != len(names) {
		return nil, errf("index names %d shards, %d given", len(names), len(shards))
	}
	for i, f := range shards {
		if f == nil {
			return nil, errf("shard %s: not parsed", names[i])
		}
	}
	out := &File{Tensors: map[string]*Tensor{}, Metadata: shards[0].Metadata}
	for i, f := range shards {
		for _, n := range f.Names {
			want, ok := ix.WeightMap[n]
			switch {
			case !ok:
				return nil, errf("shard %s holds tensor %q, which the index does not list", names[i], n)
			case want != names[i]:
				return nil, errf("shard %s holds tensor %q, which the index puts in %s", names[i], n, want)
			}
			out.Tensors[n] = f.Tensors[n]
			out.Names = append(out.Names, n)
		}
	}
	for n, shard := range ix.WeightMap {
		if out.Tensors[n] == nil {
			return nil, errf("the index puts tensor %q in %s, which does not hold it", n, shard)
		}
	}
	return out, nil
}
