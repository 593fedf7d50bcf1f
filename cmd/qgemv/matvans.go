package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/qgemv/qgemv/cpu"
	"github.com/qgemv/qgemv/dispatch"
	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
)

// matvansLayout is one layout's result of "qgemv bench -workload matvans".
type matvansLayout struct {
	Layout         string  `json:"layout"`
	BitsPerElement float64 `json:"bits_per_element"`
	PayloadBits    float64 `json:"payload_bits_per_element"`
	EntropyBits    float64 `json:"entropy_bits_per_element"`
	ChainMedianMS  float64 `json:"chain_median_ms"`
	CompressedGBps float64 `json:"compressed_gb_per_s"`
	RatioToInt8    float64 `json:"time_ratio_to_int8_chain"`
	Hash           string  `json:"hash"`
}

// matvansISA returns the CPU kernel set "-workload matvans" runs with for
// the -backend flag (or $QGEMV_BACKEND when the flag is empty): "" or
// "cpu" is the best, "cpu-<isa>" forces one. The ANS formats have no GPU
// kernels yet, so a GPU or unknown backend is an error saying so.
func matvansISA(backend string) (cpu.ISA, error) {
	name, from := backend, "-backend"
	if name == "" {
		name, from = os.Getenv(dispatch.EnvBackend), dispatch.EnvBackend
	}
	switch {
	case name == "" || name == "cpu":
		return cpu.Best(), nil
	case strings.HasPrefix(name, "cpu-"):
		return cpu.ISA(strings.TrimPrefix(name, "cpu-")), nil
	}
	if base, _, _ := strings.Cut(name, ":"); base == "opencl" || base == "cuda" {
		return "", fmt.Errorf("bench: -workload matvans runs on the CPU only: the ANS formats have no %s kernels yet (%s=%q); use -backend cpu or cpu-<isa>", base, from, name)
	}
	return "", fmt.Errorf("bench: -workload matvans: unknown backend %s=%q: want cpu or cpu-<isa>", from, name)
}

// benchMatVANS runs the MatVANS chain on the CPU with kernel set isa: n
// matrices d x d, coded in both ANS layouts, against the plain int8 chain
// in the same invocation.
func benchMatVANS(isa cpu.ISA, d, n, reps int, sigma float64, threads int, asJSON bool) error {
	be, err := cpu.New(cpu.Config{ISA: isa, Threads: threads})
	if err != nil {
		return fmt.Errorf("bench: -workload matvans: %w", err)
	}
	t0 := time.Now()
	wl, err := matvans.New(d, n, sigma, 1)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if !asJSON {
		fmt.Fprintf(os.Stderr, "generated %d matrices %dx%d (sigma %g) in %v; encoding...\n", n, d, d, sigma, time.Since(t0).Round(time.Millisecond))
	}
	int8s := make([]*cpu.Int8Matrix, n)
	for i, w := range wl.W {
		if int8s[i], err = be.LoadInt8(w, d, d); err != nil {
			return err
		}
	}
	type coded struct {
		l   ans.Layout
		ms  []*ans.Matrix
		rep ans.Report
	}
	var cs []coded
	for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
		if ans.CheckShape(l, d, d) != nil {
			continue
		}
		c := coded{l: l}
		var bits, payload, ent float64
		for _, w := range wl.W {
			m, err := ans.Encode(w, d, d, l)
			if err != nil {
				return err
			}
			r := m.Compression(w)
			bits, payload, ent = bits+r.BitsPerElement, payload+r.PayloadBits, ent+r.EntropyBits
			c.ms = append(c.ms, m)
		}
		c.rep = ans.Report{BitsPerElement: bits / float64(n), PayloadBits: payload / float64(n), EntropyBits: ent / float64(n)}
		cs = append(cs, c)
	}
	chain := func(mul func(i int, v []int8, y []int32) error) (time.Duration, string, error) {
		var ts []time.Duration
		var hash string
		for r := 0; r < reps; r++ {
			t := time.Now()
			v, err := wl.Run(mul)
			if err != nil {
				return 0, "", err
			}
			ts = append(ts, time.Since(t))
			hash = fmt.Sprintf("%08x", matvans.Hash(v))
		}
		slices.Sort(ts)
		return ts[len(ts)/2], hash, nil
	}
	tInt8, hInt8, err := chain(func(i int, v []int8, y []int32) error { return int8s[i].Mul(v, y) })
	if err != nil {
		return err
	}
	var out []matvansLayout
	for _, c := range cs {
		t, h, err := chain(func(i int, v []int8, y []int32) error { return be.MulANS(c.ms[i], v, y) })
		if err != nil {
			return fmt.Errorf("bench: %s chain: %w", c.l, err)
		}
		var bytes int64
		for _, m := range c.ms {
			bytes += m.CodedBytes()
		}
		out = append(out, matvansLayout{Layout: c.l.String(), BitsPerElement: c.rep.BitsPerElement, PayloadBits: c.rep.PayloadBits,
			EntropyBits: c.rep.EntropyBits, ChainMedianMS: float64(t.Microseconds()) / 1e3,
			CompressedGBps: float64(bytes) / t.Seconds() / 1e9, RatioToInt8: t.Seconds() / tInt8.Seconds(), Hash: h})
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			D, N, Threads int
			Sigma         float64
			Int8MedianMS  float64
			Int8Kernel    string
			Int8Hash      string
			Layouts       []matvansLayout
		}{d, n, be.Threads(), sigma, float64(tInt8.Microseconds()) / 1e3, int8s[0].Kernel(), hInt8, out})
	}
	fmt.Printf("qgemv bench -workload matvans: %d matrices %dx%d, sigma %g, %d threads, median of %d chains\n", n, d, d, sigma, be.Threads(), reps)
	fmt.Printf("  int8 chain (%s): %.2f ms, %.2f GB/s of int8 weights, hash %s\n", int8s[0].Kernel(), float64(tInt8.Microseconds())/1e3,
		float64(n*d*d)/tInt8.Seconds()/1e9, hInt8)
	for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
		if err := ans.CheckShape(l, d, d); err != nil {
			fmt.Printf("  ANS %-12s skipped: %v\n", l, err)
		}
	}
	for _, o := range out {
		fmt.Printf("  ANS %-12s %.3f bits/element (payload %.3f, entropy %.3f), chain %.2f ms, %.2f GB/s compressed, %.1fx the int8 chain, hash %s\n",
			o.Layout, o.BitsPerElement, o.PayloadBits, o.EntropyBits, o.ChainMedianMS, o.CompressedGBps, o.RatioToInt8, o.Hash)
	}
	fmt.Printf("  (ANS decoder: %s; every chain is checked against the reference by value and hash)\n", be.ANSKernel())
	return nil
}
