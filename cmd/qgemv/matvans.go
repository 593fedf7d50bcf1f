package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout"
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

// matvansEngine runs the chains on one engine: int8 and ans(layout
// index) each compute the whole chain once (a recorded sequence of
// buffer operations) and return v_N on the host.
type matvansEngine struct {
	desc       string // the backend, for the report
	threads    int
	int8Kernel string
	ansKernel  string
	int8       func() ([]int8, error)
	ans        func(li int) func() ([]int8, error)
}

// loadChains loads the workload's matrices onto eng (plain int8 and every
// coded layout in coded) and returns their chains.
func loadChains(eng *qgemv.Engine, threads int, wl *matvans.Workload, coded [][]*ans.Matrix) (*matvansEngine, error) {
	load := func(ms []layout.Matrix) ([]*qgemv.Matrix, error) {
		var out []*qgemv.Matrix
		for _, m := range ms {
			mx, err := eng.Load(m)
			if err != nil {
				return nil, fmt.Errorf("bench: -workload matvans: %w", err)
			}
			out = append(out, mx)
		}
		return out, nil
	}
	// A chain on buffers, recorded once: v0 written, MulInt32Buffer and
	// Requantize per matrix (on a GPU all on the device), v_N read.
	chain := func(mats []*qgemv.Matrix) (func() ([]int8, error), error) {
		v, err := eng.NewBuffer(wl.D, qgemv.Int8)
		if err != nil {
			return nil, err
		}
		y, err := eng.NewBuffer(wl.D, qgemv.Int32)
		if err != nil {
			return nil, err
		}
		seq, err := eng.Record(func() error {
			for i, m := range mats {
				if err := m.MulInt32Buffer(y, v, 1); err != nil {
					return err
				}
				if err := eng.Requantize(v, y, wl.Alpha[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("bench: -workload matvans: %w", err)
		}
		return func() ([]int8, error) {
			out := make([]int8, wl.D)
			if err := v.WriteInt8(wl.V0); err != nil {
				return nil, err
			}
			if err := seq.Run(); err != nil {
				return nil, err
			}
			return out, v.ReadInt8(out)
		}, nil
	}
	var plain []layout.Matrix
	for _, w := range wl.W {
		m, err := layout.NewInt8(w, wl.D, wl.D)
		if err != nil {
			return nil, err
		}
		plain = append(plain, m)
	}
	int8s, err := load(plain)
	if err != nil {
		return nil, err
	}
	int8Chain, err := chain(int8s)
	if err != nil {
		return nil, err
	}
	me := &matvansEngine{desc: fmt.Sprintf("%s, %d threads", eng.Backend(), threads), threads: threads,
		int8Kernel: int8s[0].Kernel(), int8: int8Chain}
	var ansChains []func() ([]int8, error)
	var kernels []string
	for _, ms := range coded {
		var lm []layout.Matrix
		for _, m := range ms {
			lm = append(lm, m)
		}
		mats, err := load(lm)
		if err != nil {
			return nil, err
		}
		c, err := chain(mats)
		if err != nil {
			return nil, err
		}
		ansChains = append(ansChains, c)
		kernels = append(kernels, mats[0].Kernel())
	}
	me.ansKernel = strings.Join(slices.Compact(kernels), ", ")
	me.ans = func(li int) func() ([]int8, error) { return ansChains[li] }
	return me, nil
}

// benchMatVANS runs the MatVANS chain on the engine: n matrices d x d,
// coded in both ANS layouts, against the plain int8 chain in the same
// invocation. On a GPU a chain is timed from its first launch to the
// result on the host; the matrices are uploaded before.
func benchMatVANS(qe *qgemv.Engine, d, n, reps int, sigma float64, threads int, asJSON bool) error {
	t0 := time.Now()
	wl, err := matvans.New(d, n, sigma, 1)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if !asJSON {
		fmt.Fprintf(os.Stderr, "generated %d matrices %dx%d (sigma %g) in %v; encoding...\n", n, d, d, sigma, time.Since(t0).Round(time.Millisecond))
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
		c := coded{l: l, ms: make([]*ans.Matrix, n)}
		reps := make([]ans.Report, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
		for i, w := range wl.W {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if c.ms[i], errs[i] = ans.Encode(w, d, d, l); errs[i] == nil {
					reps[i] = c.ms[i].Compression(w)
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		var bits, payload, ent float64
		for _, r := range reps {
			bits, payload, ent = bits+r.BitsPerElement, payload+r.PayloadBits, ent+r.EntropyBits
		}
		c.rep = ans.Report{BitsPerElement: bits / float64(n), PayloadBits: payload / float64(n), EntropyBits: ent / float64(n)}
		cs = append(cs, c)
	}
	all := make([][]*ans.Matrix, len(cs))
	for i, c := range cs {
		all[i] = c.ms
	}
	eng, err := loadChains(qe, threads, wl, all)
	if err != nil {
		return err
	}
	// The chains run interleaved, int8 then each layout, rep by rep, so
	// that a drift in DRAM speed during the run (tens of percent within
	// minutes on the shared VMs) hits them alike.
	runs := []func() ([]int8, error){eng.int8}
	chainErr := func(k int, err error) error { // names the chain, int8 or a layout
		if k == 0 {
			return fmt.Errorf("bench: int8 chain: %w", err)
		}
		return fmt.Errorf("bench: %s chain: %w", cs[k-1].l, err)
	}
	for i := range cs {
		runs = append(runs, eng.ans(i))
	}
	// The encoders' garbage is collected now, not by a collection running
	// beside the first chain and slowing it.
	runtime.GC()
	for k, run := range runs { // warm-up
		if _, err := run(); err != nil {
			return chainErr(k, err)
		}
	}
	ts := make([][]time.Duration, len(runs))
	hashes := make([]string, len(runs))
	ref := matvans.Hash(wl.Ref)
	for r := 0; r < reps; r++ {
		for k, run := range runs {
			t := time.Now()
			v, err := run()
			if err != nil {
				return chainErr(k, err)
			}
			ts[k] = append(ts[k], time.Since(t))
			h := matvans.Hash(v)
			if h != ref || !slices.Equal(v, wl.Ref) {
				return chainErr(k, fmt.Errorf("result differs from the reference (hash %08x, reference %08x)", h, ref))
			}
			hashes[k] = fmt.Sprintf("%08x", h)
		}
	}
	median := func(k int) time.Duration {
		slices.Sort(ts[k])
		return ts[k][len(ts[k])/2]
	}
	tInt8, hInt8 := median(0), hashes[0]
	var out []matvansLayout
	for i, c := range cs {
		t, h := median(i+1), hashes[i+1]
		var bytes int64
		for _, m := range c.ms {
			bytes += m.CodedBytes()
		}
		out = append(out, matvansLayout{Layout: c.l.String(), BitsPerElement: c.rep.BitsPerElement, PayloadBits: c.rep.PayloadBits,
			EntropyBits: c.rep.EntropyBits, ChainMedianMS: t.Seconds() * 1e3,
			CompressedGBps: float64(bytes) / t.Seconds() / 1e9, RatioToInt8: t.Seconds() / tInt8.Seconds(), Hash: h})
	}
	// A chain whose int8 matrices are under twice the L3 cpuid reports
	// may run from cache (the device host's Xeon: 160 MiB of int8 at
	// d = 4096 in a 300 MiB L3): the ratio is then not the DRAM one.
	int8MiB := float64(n*d*d) / (1 << 20)
	l3MiB := float64(qe.Report().L3) / (1 << 20)
	resident := int8MiB < 2*l3MiB && strings.HasPrefix(qe.Backend(), "cpu")
	// On a GPU: the read kernel over one matrix's bytes, rotated past the
	// device's cache, against the int8 chain's time per matrix.
	var readUS float64
	if rt, err := qe.ReadTime(int64(d*d), 200); err == nil {
		readUS = rt.Seconds() * 1e6
	}
	perMatUS := tInt8.Seconds() * 1e6 / float64(n)
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			D, N, Threads      int
			Backend            string
			Sigma              float64
			Int8MedianMS       float64
			Int8Kernel         string
			Int8Hash           string
			Int8MiB            float64
			L3MiB              float64
			MayBeCacheResident bool
			Int8PerMatrixUS    float64
			ReadKernelUS       float64 `json:",omitempty"`
			Layouts            []matvansLayout
		}{d, n, eng.threads, eng.desc, sigma, tInt8.Seconds() * 1e3, eng.int8Kernel, hInt8, int8MiB, l3MiB, resident, perMatUS, readUS, out})
	}
	fmt.Printf("qgemv bench -workload matvans: %d matrices %dx%d, sigma %g, %s, median of %d chains\n", n, d, d, sigma, eng.desc, reps)
	fmt.Printf("  int8 chain (%s): %.3f ms, %.2f GB/s of int8 weights, hash %s\n", eng.int8Kernel, tInt8.Seconds()*1e3,
		float64(n*d*d)/tInt8.Seconds()/1e9, hInt8)
	if readUS > 0 {
		fmt.Printf("  per matrix: int8 chain %.1f us, read kernel over its %.0f MiB %.1f us (rotated past the device cache): %.2fx\n",
			perMatUS, float64(d*d)/(1<<20), readUS, perMatUS/readUS)
	}
	for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
		if err := ans.CheckShape(l, d, d); err != nil {
			fmt.Printf("  ANS %-12s skipped: %v\n", l, err)
		}
	}
	for _, o := range out {
		fmt.Printf("  ANS %-12s %.3f bits/element (payload %.3f, entropy %.3f), chain %.3f ms, %.2f GB/s compressed, %.2fx the int8 chain, hash %s\n",
			o.Layout, o.BitsPerElement, o.PayloadBits, o.EntropyBits, o.ChainMedianMS, o.CompressedGBps, o.RatioToInt8, o.Hash)
	}
	fmt.Printf("  (ANS decoder: %s; the chains ran interleaved; every chain is checked against the reference by value and hash)\n", eng.ansKernel)
	if resident {
		fmt.Printf("  note: the %d int8 matrices (%.0f MiB) are under twice this host's %.0f MiB L3: they may run from cache, so the ratio may not be the DRAM one (-d %d is %.0f MiB)\n",
			n, int8MiB, l3MiB, 2*d, 4*int8MiB)
	}
	return nil
}
