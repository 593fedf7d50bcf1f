package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/qgemv/qgemv/layout"
)

func cmdQuantize(args []string) error {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	rows := fs.Int("rows", 0, "rows (outputs) of the matrix")
	cols := fs.Int("cols", 0, "columns (inputs) of the matrix")
	format := fs.String("format", "q4g128", formatHelp("output format", quantizable))
	method := fs.String("method", "search", "scale/zero choice: minmax or search (error-minimizing)")
	intZero := fs.Bool("intzero", true, "integer zero points (Bits, Sparse12; needed for int8 activations)")
	fp32Meta := fs.Bool("fp32meta", false, "float32 scales and zeros instead of binary16 (Bits, Sparse12)")
	out := fs.String("o", "", "output .qgv file")
	seed := fs.Uint64("seed", 1, "codebook formats: k-means seed")
	iters := fs.Int("iters", 10, "codebook formats: Lloyd iterations per codebook")
	budget := fs.Duration("time-budget", 0, "codebook formats: stop Lloyd iterations after this long (0: no limit)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: qgemv quantize -rows R -cols C [-method search] -o OUT.qgv IN.f32\n\nIN.f32 holds R*C little-endian float32 values, row-major.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *out == "" {
		fs.Usage()
		return fmt.Errorf("quantize: need one input file and -o")
	}
	spec, err := layout.ParseFormatSpec(*format)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	if *iters < 1 {
		return fmt.Errorf("quantize: -iters %d must be >= 1", *iters)
	}
	if *budget < 0 {
		return fmt.Errorf("quantize: -time-budget %v must be >= 0 (0: no limit)", *budget)
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
	fm, _ := layout.LookupFormat(spec.Format)
	bar := newStageBar(os.Stderr)
	m, extra, err := spec.Quantize(w, *rows, *cols, layout.QuantOptions{Method: qm, IntegerZero: *intZero, FP32Meta: *fp32Meta,
		Seed: *seed, Iters: *iters, TimeBudget: *budget, Progress: bar.update})
	bar.done()
	if err != nil {
		return err
	}
	dq, ok := m.(interface{ Dequantize() []float32 })
	if !ok {
		return fmt.Errorf("quantize: format %s has no Dequantize to measure the error", m.Name())
	}
	rel := layout.RelRMSError(dq.Dequantize(), w)
	if err := layout.SaveMatrix(*out, m.(interface {
		layout.Matrix
		io.WriterTo
	})); err != nil {
		return err
	}
	how := "method " + qm.String()
	if fm.KMeans {
		how = fmt.Sprintf("k-means seed %d", *seed)
	}
	fmt.Printf("%s: %s %dx%d, %s, relative RMS error %.5f, %.3f bits/weight",
		*out, m.Name(), *rows, *cols, how, rel, 8*float64(m.StreamBytes())/float64(*rows**cols))
	if fm.ExtraName != "" {
		fmt.Printf(", %s %.4f", fm.ExtraName, extra)
	}
	fmt.Println()
	return nil
}

// stageBar draws a progress bar per stage of a long computation.
type stageBar struct {
	f     *os.File
	stage string
	last  time.Time
}

func newStageBar(f *os.File) *stageBar { return &stageBar{f: f} }

func (b *stageBar) update(stage string, done, total int) {
	if stage != b.stage {
		if b.stage != "" {
			fmt.Fprintln(b.f)
		}
		b.stage, b.last = stage, time.Time{}
	}
	if time.Since(b.last) < 100*time.Millisecond && done < total {
		return
	}
	b.last = time.Now()
	const width = 30
	n := 0
	if total > 0 {
		n = min(width, width*done/total)
	}
	fmt.Fprintf(b.f, "\r%-20s [%s%s] %3d%%", stage, strings.Repeat("#", n), strings.Repeat(".", width-n), 100*n/width)
}

func (b *stageBar) done() {
	if b.stage != "" {
		fmt.Fprintln(b.f)
	}
}
