package main

import (
	"flag"
	"fmt"

	"github.com/qgemv/qgemv"
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
	fmt.Println("kernels:")
	for _, act := range []qgemv.Activation{qgemv.A32, qgemv.A8} {
		fmt.Printf("  Q4G128/%-4v %s\n", act, eng.Backend())
	}
	return nil
}
