package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/qgemv/qgemv/internal/outpath"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/gguf"
)

// cmdDequantize writes one tensor's dequantized values as raw
// little-endian float32, row-major (rows = outputs), so that they can be
// compared with any other tool's: a GGUF tensor of any type qgemv imports
// (block types bit for bit as llama.cpp dequantizes them, F32/F16/BF16
// exactly), or the matrix of a .qgv file.
func cmdDequantize(args []string) error {
	fs := flag.NewFlagSet("dequantize", flag.ContinueOnError)
	tensor := fs.String("tensor", "", "tensor to dequantize (GGUF; not needed for .qgv)")
	out := fs.String("o", "", "output file: raw little-endian float32, row-major")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: qgemv dequantize [-tensor NAME] -o OUT.f32 FILE.gguf|FILE.qgv\n\nWrites the tensor's values as raw little-endian float32, row-major (rows = outputs).")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *out == "" {
		fs.Usage()
		return fmt.Errorf("dequantize: need one file and -o")
	}
	dst, err := outpath.Resolve(*out) // before the work
	if err != nil {
		return fmt.Errorf("dequantize: -o: %w", err)
	}
	var vals []float32
	var what string
	switch path := pos[0]; {
	case strings.ToLower(filepath.Ext(path)) == ".gguf" || isGGUF(path):
		if *tensor == "" {
			return fmt.Errorf("dequantize: %s: -tensor is required for a GGUF file", path)
		}
		f, err := gguf.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		t, err := f.Tensor(*tensor)
		if err != nil {
			return fmt.Errorf("dequantize: %w", err)
		}
		if vals, err = t.Dequantize(); err != nil {
			return fmt.Errorf("dequantize: %w", err)
		}
		what = fmt.Sprintf("%s %s %v", t.Name, t.Type, t.Dims)
	default:
		if *tensor != "" {
			return fmt.Errorf("dequantize: %s: -tensor is for GGUF files; a .qgv file holds one matrix", path)
		}
		m, err := layout.LoadMatrix(path)
		if err != nil {
			return err
		}
		d, ok := m.(interface{ Dequantize() []float32 })
		if !ok {
			return fmt.Errorf("dequantize: %s: a %s matrix has no dequantized form", path, m.Name())
		}
		vals = d.Dequantize()
		r, c := m.Shape()
		what = fmt.Sprintf("%s %dx%d", m.Name(), r, c)
	}
	if err := writeRawF32(dst, vals); err != nil {
		return fmt.Errorf("dequantize: %w", err)
	}
	fmt.Printf("%s: %s, %d float32 values\n", *out, what, len(vals))
	return nil
}

// writeRawF32 writes vals to path (resolved by outpath.Resolve) as raw
// little-endian float32 (through a temporary file renamed into place).
func writeRawF32(path string, vals []float32) error {
	return outpath.Write(path, false, func(f io.Writer) error {
		w := bufio.NewWriterSize(f, 1<<20)
		var b [4]byte
		for _, v := range vals {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			if _, err := w.Write(b[:]); err != nil {
				return err
			}
		}
		return w.Flush()
	})
}
