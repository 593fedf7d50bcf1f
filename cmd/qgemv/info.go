package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// infoFormats are the formats "qgemv info" loads to show their kernels:
// every Bits width, then each other registered format's examples (its
// short list), and a 12-bit codebook (dequantized on the CPU).
var infoFormats = func() []string {
	out := []string{"q4g128", "bits8g128", "bits4g128", "bits3g128", "bits2g128", "bits1g128"}
	for _, f := range layout.Formats() {
		for _, e := range f.Examples[:f.ShortExamples] {
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
	}
	return append(out, "cb-m1v4b12g128")
}()

// formatHelp is the -format flag help: the registered formats' spec
// syntaxes, filtered by keep (nil keeps all); "qgemv formats" has details.
func formatHelp(what string, keep func(*layout.Format) bool) string {
	var syn []string
	for _, f := range layout.Formats() {
		if keep == nil || keep(f) {
			syn = append(syn, f.Syntax)
		}
	}
	return what + ": " + strings.Join(syn, ", ") + " (qgemv formats lists them)"
}

// quantizable keeps the formats float weights quantize to.
func quantizable(f *layout.Format) bool { return f.Quantize != nil }

// runFormats lists the registered formats: name, container id, spec
// syntax, whether float weights quantize to it, and example names.
func runFormats(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("formats", flag.ContinueOnError)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("formats: unexpected argument %q", fs.Arg(0))
	}
	for _, f := range layout.Formats() {
		how := "quantize from float weights"
		switch {
		case f.Int8Values:
			how = "int8 values (MulInt32)"
		case f.Quantize == nil:
			how = "not made from float weights"
		}
		fmt.Fprintf(w, "%-9s id %d  %s\n          %s; e.g. %s\n", f.Name, f.ID, f.Syntax, how, strings.Join(f.Examples, ", "))
	}
	return nil
}

func cmdInfo(args []string) error { return runInfo(os.Stdout, args) }

// runInfo prints the probe report (every candidate, GPU devices with their
// details) and the kernel each format runs on the chosen backend; a
// format the backend does not implement is listed as such.
func runInfo(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	backend := fs.String("backend", "", "backend to report as chosen (default: best, or $QGEMV_BACKEND)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("info: unexpected argument %q", fs.Arg(0))
	}
	eng, err := qgemv.Open(qgemv.WithBackend(*backend))
	if err != nil {
		return err
	}
	defer eng.Close()
	fmt.Fprint(w, eng.Report()) // every candidate, GPU devices with their details
	return printKernels(w, eng.Backend(), func(m layout.Matrix) (string, error) {
		mat, err := eng.Load(m)
		if err != nil {
			return "", err
		}
		defer mat.Close()
		return mat.Kernel(), nil
	})
}

// printKernels prints the kernel that load reports for each of
// infoFormats on backend; a format whose load fails with
// qgemv.ErrFormatNotImplemented is listed as not supported, any other
// failure stops with an error.
func printKernels(w io.Writer, backend string, load func(layout.Matrix) (string, error)) error {
	fmt.Fprintf(w, "kernels (A32, A16, A8) on %s, for 4096-row matrices:\n", backend)
	for _, name := range infoFormats {
		spec, err := layout.ParseFormatSpec(name)
		if err != nil {
			return err
		}
		m, err := synth.Matrix(spec, 4096, 256, 1) // codebooks: the Psumbook pays off with enough rows
		if err != nil {
			return err
		}
		kernel, err := load(m)
		if errors.Is(err, qgemv.ErrFormatNotImplemented) {
			fmt.Fprintf(w, "  %-15s not supported by %s\n", m.Name(), backend)
			continue
		}
		if err != nil {
			return fmt.Errorf("info: %s on %s: %w", m.Name(), backend, err)
		}
		fmt.Fprintf(w, "  %-15s %s\n", m.Name(), kernel)
	}
	return nil
}
