package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/qgemv/qgemv/layout"
)

// importFlags registers the flags shared by import and bench -model
// (bench has its own -format, which it copies into format).
func importFlags(fs *flag.FlagSet, withFormat bool) *importOpts {
	o := &importOpts{}
	if withFormat {
		fs.StringVar(&o.format, "format", "q4g128", "format for float (F32/F16/BF16) tensors, which are quantized: q4g128, bits<n>g<g>, bits<n>row, sparse12g<g>, sparse12row")
	}
	fs.StringVar(&o.method, "method", "search", "quantizer for float tensors: minmax or search")
	fs.IntVar(&o.hq.Bits, "bits", 0, "GPTQ bits (default 4) or HQQ bits (when the file has no .nbits)")
	fs.BoolVar(&o.hq.V2, "gptq-v2", false, "GPTQ zeros stored as is (gptq_v2 checkpoints), not minus one")
	fs.IntVar(&o.hq.Group, "hqq-group", 0, "HQQ group size when the file has no .group_size")
	fs.IntVar(&o.hq.Rows, "hqq-rows", 0, "HQQ rows when the file has no .shape")
	fs.IntVar(&o.hq.Cols, "hqq-cols", 0, "HQQ columns when the file has no .shape")
	return o
}

func cmdImport(args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	tensor := fs.String("tensor", "", "tensor (GGUF) or layer prefix (GPTQ/AWQ/HQQ, e.g. model.layers.0.mlp.down_proj) or float tensor (safetensors) to import")
	out := fs.String("o", "", "output .qgv file")
	opt := importFlags(fs, true)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: qgemv import [flags] -tensor NAME -o OUT.qgv FILE.gguf|FILE.safetensors\n\nGGUF block types (K-quants, Q4_x, Q5_x, Q8_0, IQ4), GPTQ, AWQ and HQQ import exactly; float tensors are quantized to -format.")
		fs.PrintDefaults()
	}
	// Flags may follow the file name.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) != 1 || *tensor == "" || *out == "" {
		fs.Usage()
		return fmt.Errorf("import: need one model file, -tensor and -o")
	}
	m, err := openModel(pos[0], *opt)
	if err != nil {
		return err
	}
	defer m.close()
	t, err := m.find(*tensor)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	mat, how, err := t.matrix(*opt)
	if err != nil {
		return fmt.Errorf("import: %s: %w", t.name, err)
	}
	if err := layout.SaveMatrix(*out, mat.(interface {
		layout.Matrix
		io.WriterTo
	})); err != nil {
		return err
	}
	rows, cols := mat.Shape()
	fmt.Printf("%s: %s %s %dx%d -> %s (%s), %.3f bits/weight\n", *out, t.name, t.source, rows, cols, mat.Name(), how,
		8*float64(mat.StreamBytes())/float64(rows*cols))
	return nil
}
