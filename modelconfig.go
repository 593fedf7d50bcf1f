package qgemv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"sort"
	"strings"

	"github.com/qgemv/qgemv/internal/mmap"
)

// QuantConfig is what a quantized checkpoint's config files say about
// its GPTQ, AWQ or HQQ layers (Model.QuantConfig), or what
// WithQuantConfig says instead of them.
type QuantConfig struct {
	// Method is "gptq", "awq" or "hqq" ("" when no file names one).
	Method string
	// Bits is the code width (0: not given).
	Bits int
	// GroupSize is the columns per group: -1 for one group per row, 0
	// when not given.
	GroupSize int
	// ActOrder is GPTQ's desc_act (the importer follows g_idx either way;
	// a layer without g_idx under desc_act is an error).
	ActOrder bool
	// Format is the checkpoint format: "gptq" (zeros stored minus one,
	// the default) or "gptq_v2" (stored as they are) for GPTQ; AWQ's
	// version ("gemm").
	Format string
	// HQQRows and HQQCols give the shape of HQQ layers that store no
	// .shape tensor (0: not given).
	HQQRows, HQQCols int
	// Source names the files (or "WithQuantConfig") the values came
	// from, "" when none was found.
	Source string
}

// The config files read beside a .safetensors file: Hugging Face's
// config.json ("quantization_config"), AutoGPTQ's quantize_config.json
// and AutoAWQ's quant_config.json.
var quantConfigFiles = []string{"config.json", "quantize_config.json", "quant_config.json"}

// maxConfigBytes bounds a config file (a few KB in practice): a larger
// one is an error, not a read of whatever the path yields.
const maxConfigBytes = 16 << 20

// quantField is one value a config file gives.
type quantField struct {
	file string
	val  any // string, int or bool
}

// readQuantConfig reads the config files in dir. Files that are absent
// are skipped; a file that is not valid JSON, a value of the wrong type,
// or two files that disagree is an error naming the files and the key.
func readQuantConfig(dir string) (QuantConfig, error) {
	fields := map[string]quantField{} // normalized key -> first value
	var used []string
	for _, name := range quantConfigFiles {
		path := filepath.Join(dir, name)
		raw, err := mmap.ReadSmall(path, maxConfigBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return QuantConfig{}, err
		}
		var top map[string]any
		if err := json.Unmarshal(raw, &top); err != nil {
			return QuantConfig{}, fmt.Errorf("%s: %w", path, err)
		}
		obj := top
		if name == "config.json" {
			q, ok := top["quantization_config"]
			if !ok || q == nil {
				continue // a float model's config
			}
			if obj, ok = q.(map[string]any); !ok {
				return QuantConfig{}, fmt.Errorf("%s: quantization_config is %T, want an object", path, q)
			}
		}
		got, err := quantFields(obj)
		if err != nil {
			return QuantConfig{}, fmt.Errorf("%s: %w", path, err)
		}
		if len(got) == 0 {
			continue
		}
		used = append(used, name)
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := got[k]
			if prev, ok := fields[k]; ok && prev.val != v {
				return QuantConfig{}, fmt.Errorf("%s: inconsistent quantization config: %s says %s %v, %s says %v",
					dir, prev.file, k, prev.val, name, v)
			}
			if _, ok := fields[k]; !ok {
				fields[k] = quantField{name, v}
			}
		}
	}
	var c QuantConfig
	if len(used) == 0 {
		return c, nil
	}
	c.Source = strings.Join(used, ", ")
	if v, ok := fields["method"]; ok {
		c.Method = v.val.(string)
	}
	if v, ok := fields["bits"]; ok {
		c.Bits = v.val.(int)
	}
	if v, ok := fields["group_size"]; ok {
		c.GroupSize = v.val.(int)
	}
	if v, ok := fields["desc_act"]; ok {
		c.ActOrder = v.val.(bool)
	}
	if v, ok := fields["format"]; ok {
		c.Format = v.val.(string)
	}
	return c, nil
}

// quantFields normalizes one file's quantization keys: quant_method,
// bits (w_bit, nbits), group_size (q_group_size), desc_act,
// checkpoint_format (AWQ: version), including HQQ's nested
// quant_config.weight_quant_params.
func quantFields(obj map[string]any) (map[string]any, error) {
	out := map[string]any{}
	// a copy: the nested settings are merged into it below
	obj = maps.Clone(obj)
	if q, ok := obj["quant_config"].(map[string]any); ok { // transformers' HqqConfig
		// its settings inside (they win), quant_method beside them
		delete(obj, "quant_config")
		maps.Copy(obj, q)
	}
	if w, ok := obj["weight_quant_params"].(map[string]any); ok {
		for k, v := range w {
			if _, dup := obj[k]; !dup {
				obj[k] = v
			}
		}
		// HQQ groups along axis 1 (the input) or 0; the loader packs
		// axis 1 only, and an axis-0 layer's tensors can have the same
		// lengths.
		if a, ok := w["axis"]; ok && a != nil && a != float64(1) {
			return nil, fmt.Errorf("weight_quant_params.axis is %v: only axis 1 (groups along the input) is supported", a)
		}
	}
	str := func(key string, v any) (string, error) {
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s is %v (%T), want a string", key, v, v)
		}
		return strings.ToLower(s), nil
	}
	integer := func(key string, v any) (int, error) {
		f, ok := v.(float64)
		if !ok || f != float64(int(f)) || f < -1 || f > 1<<20 {
			return 0, fmt.Errorf("%s is %v (%T), want a whole number", key, v, v)
		}
		return int(f), nil
	}
	for _, k := range []struct{ key, norm string }{
		{"quant_method", "method"}, {"checkpoint_format", "format"}, {"version", "format"},
		{"bits", "bits"}, {"w_bit", "bits"}, {"nbits", "bits"},
		{"group_size", "group_size"}, {"q_group_size", "group_size"}, {"desc_act", "desc_act"},
	} {
		v, ok := obj[k.key]
		if !ok || v == nil {
			continue
		}
		var val any
		var err error
		switch k.norm {
		case "method", "format":
			val, err = str(k.key, v)
		case "desc_act":
			b, ok := v.(bool)
			if !ok {
				err = fmt.Errorf("%s is %v (%T), want true or false", k.key, v, v)
			}
			val = b
		default:
			val, err = integer(k.key, v)
		}
		if err != nil {
			return nil, err
		}
		if prev, dup := out[k.norm]; dup && prev != val {
			return nil, fmt.Errorf("%s is %v where another key says %v", k.key, val, prev)
		}
		out[k.norm] = val
	}
	return out, nil
}
