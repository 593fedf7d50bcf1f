package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/qgemv/qgemv/layout"
)

func cmdQuantize(args []string) error {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	rows := fs.Int("rows", 0, "rows (outputs) of the matrix")
	cols := fs.Int("cols", 0, "columns (inputs) of the matrix")
	format := fs.String("format", "q4g128", "output format")
	method := fs.String("method", "search", "scale/zero choice: minmax or search (error-minimizing)")
	out := fs.String("o", "", "output .qgv file")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: qgemv quantize -rows R -cols C [-method search] -o OUT.qgv IN.f32\n\nIN.f32 holds R*C little-endian float32 values, row-major.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *out == "" {
		fs.Usage()
		return fmt.Errorf("quantize: need one input file and -o")
	}
	if *format != "q4g128" {
		return fmt.Errorf("quantize: unknown format %q (supported: q4g128)", *format)
	}
	qm, err := layout.ParseQuantMethod(*method)
	if err != nil {
		return err
	}
	if err := layout.CheckDims(*rows, *cols); err != nil {
		return fmt.Errorf("quantize: -rows/-cols: %w", err)
	}
	in := fs.Arg(0)
	st, err := os.Stat(in)
	if err != nil {
		return err
	}
	want := int64(*rows) * int64(*cols) * 4
	if st.Size() != want {
		return fmt.Errorf("quantize: %s has %d bytes, want %d x %d x 4 = %d", in, st.Size(), *rows, *cols, want)
	}
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	w := make([]float32, len(raw)/4)
	for i := range w {
		w[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	m, err := layout.QuantizeQ4G128(w, *rows, *cols, qm)
	if err != nil {
		return err
	}
	rel := layout.RelRMSError(m.Dequantize(), w)
	if err := layout.SaveQ4G128(*out, m); err != nil {
		return err
	}
	fmt.Printf("%s: Q4G128 %dx%d, method %v, relative RMS error %.5f, %.3f bits/weight\n",
		*out, *rows, *cols, qm, rel, 8*float64(m.StreamBytes())/float64(*rows**cols))
	return nil
}
