package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/mmap"
	"github.com/qgemv/qgemv/layout"
)

// importOpts are the import flags shared by import, inspect and bench
// -model.
type importOpts struct {
	format string
	method string
	quant  qgemv.QuantConfig
	// quantSet: a quantization flag was given, so the flags replace the
	// config files beside the model.
	quantSet bool
	finish   func() // sets quantSet and quant.Format after parsing
}

// isModelFile reports whether path is a GGUF or safetensors file (by its
// magic, or else its extension), a sharded checkpoint's index or a
// directory (qgemv.OpenModel opens its model file).
func isModelFile(path string) bool {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return true
	}
	lower := strings.ToLower(path)
	return strings.HasSuffix(lower, ".gguf") || strings.HasSuffix(lower, ".safetensors") || strings.HasSuffix(lower, ".index.json") || isGGUF(path)
}

// isGGUF reports whether the file at path, a regular file, starts with
// the GGUF magic (a FIFO is not opened: its open waits for a writer).
func isGGUF(path string) bool {
	if mmap.Regular(path) != nil {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	return n == 4 && string(magic[:]) == "GGUF"
}

// openModel opens a model file with the import flags (and extra options).
func openModel(path string, opt importOpts, extra ...qgemv.ModelOption) (*qgemv.Model, error) {
	opts := extra
	if opt.format != "" {
		spec, err := layout.ParseFormatSpec(opt.format)
		if err != nil {
			return nil, err
		}
		opts = append(opts, qgemv.WithFloatFormat(spec))
	}
	if opt.method != "" {
		qm, err := layout.ParseQuantMethod(opt.method)
		if err != nil {
			return nil, err
		}
		opts = append(opts, qgemv.WithQuantMethod(qm))
	}
	if opt.quantSet {
		opts = append(opts, qgemv.WithQuantConfig(opt.quant))
	}
	return qgemv.OpenModel(path, opts...)
}

// shape formats a tensor's shape, "?" when unknown.
func shape(t qgemv.TensorInfo) string {
	if t.Rows == 0 {
		return "?"
	}
	return fmt.Sprintf("%dx%d", t.Rows, t.Cols)
}

func inspectModel(path string, opt importOpts) error {
	md, err := openModel(path, opt)
	if err != nil {
		return err
	}
	defer md.Close()
	ts := md.Tensors()
	n := 0
	for _, t := range ts {
		if t.Err == nil {
			n++
		}
	}
	fmt.Printf("%s: %s, %d bytes, %d weight matrices, %d loadable\n", path, md.Format(), md.Size(), len(ts), n)
	if c := md.QuantConfig(); c.Source != "" {
		fmt.Printf("  quantization config (%s): method %q, %d bits, group size %d, act-order %v, format %q\n",
			c.Source, c.Method, c.Bits, c.GroupSize, c.ActOrder, c.Format)
	}
	for _, t := range ts {
		if t.Err == nil {
			fmt.Printf("  %-48s %-6s %-13s -> %s\n", t.Name, t.Type, shape(t), t.ImportsAs)
		}
	}
	if n < len(ts) {
		fmt.Printf("  cannot be loaded (%d):\n", len(ts)-n)
		for _, t := range ts {
			if t.Err != nil {
				fmt.Printf("    %s\n", t.Err)
			}
		}
	}
	return nil
}
