package main

import (
	"flag"
	"fmt"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

func cmdInfo(args []string) error {
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	backend := fs.String("backend", "", "backend to report as chosen (default: best, or $QGEMV_BACKEND)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	eng, err := qgemv.Open(qgemv.WithBackend(*backend))
	if err != nil {
		return err
	}
	defer eng.Close()
	fmt.Print(eng.Report())
	fmt.Println("kernels (A32, A16, A8), for 4096-row matrices:")
	for _, name := range []string{"q4g128", "bits8g128", "bits4g128", "bits3g128", "bits2g128", "bits1g128", "bits4g32", "sparse12g128", "cb-m1v4b8g128", "cb-m2v8b6g128", "cb-m1v4b12g128"} {
		spec, err := layout.ParseFormatSpec(name)
		if err != nil {
			return err
		}
		m, err := synth.Matrix(spec, 4096, 256, 1) // codebooks: the Psumbook pays off with enough rows
		if err != nil {
			return err
		}
		mat, err := eng.Load(m)
		if err != nil {
			return err
		}
		fmt.Printf("  %-15s %s\n", m.Name(), mat.Kernel())
		mat.Close()
	}
	return nil
}
