package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// modelResult is one tensor of "qgemv bench -model".
type modelResult struct {
	Tensor        string  `json:"tensor"`
	Source        string  `json:"source"`
	Rows          int     `json:"rows"`
	Cols          int     `json:"cols"`
	Format        string  `json:"format"`
	Import        string  `json:"import"`
	Activation    string  `json:"activation"`
	Kernel        string  `json:"kernel"`
	ImportedUS    float64 `json:"imported_median_us"`
	NativeUS      float64 `json:"native_median_us"`
	ImportedGBps  float64 `json:"imported_gb_per_s"`
	NativeGBps    float64 `json:"native_gb_per_s"`
	ImportedRatio float64 `json:"imported_over_native_speed"`
	ReadBWRatio   float64 `json:"imported_ratio_to_read_bandwidth"`
}

// benchTwin (bench -model FILE -twin) times every loadable matrix of a
// model file against a natively quantized matrix of the same format and
// shape (random codes, binary16 metadata), interleaved call by call, in
// the same run as the read-bandwidth measurement, one matrix at a time.
func benchTwin(path string, opt importOpts, eng *qgemv.Engine, act benchAct, nthreads int, minTime time.Duration, asJSON, huge bool) error {
	md, err := openModel(path, opt)
	if err != nil {
		return err
	}
	defer md.Close()
	var skipped []string
	var ts []qgemv.TensorInfo
	for _, t := range md.Tensors() {
		if t.Err != nil {
			skipped = append(skipped, t.Err.Error())
		} else {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return fmt.Errorf("bench: %s has no loadable matrices (qgemv inspect says why)", path)
	}
	bw1 := measureReadBW(nthreads, huge)
	var res []modelResult
	for i, t := range ts {
		imp, how, err := md.Import(t.Name)
		if err != nil { // listed, as inspect lists it
			skipped = append(skipped, err.Error())
			continue
		}
		rows, cols := imp.Shape()
		nat, err := synth.Matrix(imp.Spec(), rows, cols, uint64(i+1))
		if err != nil {
			return err
		}
		mi, err := eng.Load(imp)
		if err != nil {
			return fmt.Errorf("bench: %s: %w", t.Name, err)
		}
		mn, err := eng.Load(nat)
		if err != nil {
			mi.Close()
			return err
		}
		a := act
		x := synth.Vector(cols, 7)
		dst := make([]float32, rows)
		if a == actA8 && !mi.TakesA8() {
			a = actA32 // offsets (Q4_1, Q4_K): float activations only
		}
		xh := make([]layout.FP16, cols)
		layout.ToFP16s(xh, x)
		call := func(mm *qgemv.Matrix) (time.Duration, error) {
			t0 := time.Now()
			var err error
			switch a {
			case actA16:
				err = mm.MulFP16(dst, xh, 1)
			case actA8:
				err = mm.Mul(dst, x, 1, qgemv.A8)
			default:
				err = mm.Mul(dst, x, 1, qgemv.A32)
			}
			return time.Since(t0), err
		}
		var ti, tn []time.Duration
		start := time.Now()
		for k := 0; k < 3 || time.Since(start) < minTime || len(ti) < 10; k++ {
			d1, err := call(mi)
			if err != nil {
				return fmt.Errorf("bench: %s: %w", t.Name, err)
			}
			d2, err := call(mn)
			if err != nil {
				return err
			}
			if k >= 2 { // the first calls warm caches and pages
				ti, tn = append(ti, d1), append(tn, d2)
			}
		}
		slices.Sort(ti)
		slices.Sort(tn)
		medI, medN := ti[len(ti)/2], tn[len(tn)/2]
		r := modelResult{Tensor: t.Name, Source: t.Type, Rows: rows, Cols: cols, Format: imp.Name(), Import: how,
			Activation: a.String(), Kernel: mi.Kernel(),
			ImportedUS: float64(medI.Nanoseconds()) / 1e3, NativeUS: float64(medN.Nanoseconds()) / 1e3,
			ImportedGBps: float64(imp.StreamBytes()) / medI.Seconds() / 1e9, NativeGBps: float64(nat.StreamBytes()) / medN.Seconds() / 1e9}
		r.ImportedRatio = medN.Seconds() / medI.Seconds()
		res = append(res, r)
		mi.Close()
		mn.Close()
	}
	bw := (bw1 + measureReadBW(nthreads, huge)) / 2
	for i := range res {
		res[i].ReadBWRatio = res[i].ImportedGBps * 1e9 / bw
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			File       string        `json:"file"`
			Threads    int           `json:"threads"`
			ReadBWGBps float64       `json:"read_bandwidth_gb_per_s"`
			Tensors    []modelResult `json:"tensors"`
		}{path, nthreads, bw / 1e9, res})
	}
	fmt.Printf("qgemv bench -model %s: %d matrices, %d threads, read bandwidth %.2f GB/s (this run)\n", path, len(res), nthreads, bw/1e9)
	fmt.Printf("  %-40s %-6s %-13s %-10s %-4s %9s %9s %8s %8s\n", "tensor", "source", "shape", "format", "act", "GB/s", "native", "imp/nat", "of BW")
	for _, r := range res {
		fmt.Printf("  %-40s %-6s %-13s %-10s %-4s %9.2f %9.2f %7.2fx %7.1f%%\n", r.Tensor, r.Source, fmt.Sprintf("%dx%d", r.Rows, r.Cols),
			r.Format, r.Activation, r.ImportedGBps, r.NativeGBps, r.ImportedRatio, 100*r.ReadBWRatio)
	}
	for _, s := range skipped {
		fmt.Printf("  skipped %s\n", s)
	}
	fmt.Println("  (native: a matrix of the same format and shape quantized by qgemv, timed alternately with the imported one;")
	fmt.Println("   imp/nat is the speed ratio; matrices smaller than the last-level cache run partly from cache)")
	return nil
}
