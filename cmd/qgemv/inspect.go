package main

import (
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/qgemv/qgemv/internal/mmap"
	"github.com/qgemv/qgemv/layout"
)

func cmdInspect(args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	opt := importFlags(fs, false)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("inspect: usage: qgemv inspect [flags] FILE.qgv|FILE.gguf|FILE.safetensors|model.safetensors.index.json|DIR")
	}
	opt.finish()
	path := fs.Arg(0)
	if isModelFile(path) {
		return inspectModel(path, *opt)
	}
	if err := mmap.Regular(path); err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	f, err := layout.ReadFile(fh, st.Size())
	if err != nil {
		return err
	}
	fmt.Printf("%s: .qgv version %d, format %v, %dx%d, %d bytes\n", path, f.Version, f.Format, f.Rows, f.Cols, st.Size())
	for _, p := range f.Params {
		fmt.Printf("  param %d\n", p)
	}
	for _, s := range f.Sections {
		fmt.Printf("  section %q: %d bytes, CRC-32C ok\n", s.Tag[:], len(s.Data))
	}
	dm, err := layout.Decode(f)
	if err != nil {
		return err
	}
	rows, cols := dm.Shape()
	fmt.Printf("  %s, padded columns %d, %.3f bits/weight\n", dm.Name(), dm.PaddedCols(), 8*float64(dm.StreamBytes())/float64(rows*cols))
	m, ok := dm.(layout.Grouped)
	if !ok {
		return nil
	}
	smin, smax := float32(math.Inf(1)), float32(math.Inf(-1))
	zmin, zmax := float32(math.Inf(1)), float32(math.Inf(-1))
	zhist := map[float32]int{}
	for r := 0; r < rows; r++ {
		for g := 0; g < m.Groups(); g++ {
			s, _ := m.Affine(r, g)
			z := m.ZeroPoint(r, g)
			smin, smax = min(smin, s), max(smax, s)
			zmin, zmax = min(zmin, z), max(zmax, z)
			zhist[z]++
		}
	}
	fmt.Printf("  scales in [%g, %g]; zero points in [%g, %g]", smin, smax, zmin, zmax)
	if zmin >= 0 && zmax <= 15 && len(zhist) <= 16 {
		h := make([]int, 16)
		for z, n := range zhist {
			if z == float32(int(z)) {
				h[int(z)] += n
			}
		}
		fmt.Printf(", histogram %v", h)
	}
	fmt.Println()
	return nil
}
