package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/qgemv/qgemv/layout"
)

// importFlags registers the flags shared by import, inspect and bench
// -model (bench has its own -format, which it copies into format). The
// quantization flags replace the config files beside a safetensors
// model (config.json, quantize_config.json, quant_config.json) when any
// is given; call finish after parsing.
func importFlags(fs *flag.FlagSet, withFormat bool) *importOpts {
	o := &importOpts{}
	if withFormat {
		fs.StringVar(&o.format, "format", "q4g128", formatHelp("format for float (F32/F16/BF16) tensors, which are quantized", quantizable))
	}
	fs.StringVar(&o.method, "method", "search", "quantizer for float tensors: minmax or search")
	fs.IntVar(&o.quant.Bits, "bits", 0, "GPTQ or HQQ bits, instead of the config files")
	fs.IntVar(&o.quant.GroupSize, "group", 0, "GPTQ, AWQ or HQQ group size (-1: one group per row), instead of the config files")
	v2 := fs.Bool("gptq-v2", false, "GPTQ zeros stored as is (gptq_v2 checkpoints), not minus one, instead of the config files")
	fs.IntVar(&o.quant.HQQRows, "hqq-rows", 0, "HQQ rows when a layer stores no .shape")
	fs.IntVar(&o.quant.HQQCols, "hqq-cols", 0, "HQQ columns when a layer stores no .shape")
	o.finish = func() {
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "bits", "group", "gptq-v2", "hqq-rows", "hqq-cols":
				o.quantSet = true
			}
		})
		if *v2 {
			o.quant.Format = "gptq_v2"
		}
	}
	return o
}

// flagError is a flag parsing error, which the flag package has printed
// with the command's usage: main exits 2 without printing it again.
type flagError struct{ err error }

func (e flagError) Error() string { return e.err.Error() }
func (e flagError) Unwrap() error { return e.err }

// parseFlags parses args into fs, its errors (but -h's flag.ErrHelp) as
// flagError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return flagError{err}
	}
	return err
}

// parseInterspersed parses fs from args, flags before and after the
// positional arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
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
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *tensor == "" || *out == "" {
		fs.Usage()
		return fmt.Errorf("import: need one model file, -tensor and -o")
	}
	opt.finish()
	md, err := openModel(pos[0], *opt)
	if err != nil {
		return err
	}
	defer md.Close()
	mat, how, err := md.Import(*tensor)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	wt, ok := mat.(interface {
		layout.Matrix
		io.WriterTo
	})
	if !ok {
		return fmt.Errorf("import: %s: format %s has no container writer", *tensor, mat.Name())
	}
	if err := layout.SaveMatrix(*out, wt); err != nil {
		return err
	}
	rows, cols := mat.Shape()
	var src string
	for _, t := range md.Tensors() {
		if t.Name == *tensor {
			src = t.Type
		}
	}
	fmt.Printf("%s: %s %s %dx%d -> %s (%s), %.3f bits/weight\n", *out, *tensor, src, rows, cols, mat.Name(), how,
		8*float64(mat.StreamBytes())/float64(rows*cols))
	return nil
}
