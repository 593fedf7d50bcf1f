package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/mmap"
	"github.com/qgemv/qgemv/internal/outpath"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// decodeGroup is one row of the per-type or per-kind table: the
// matrices of one stored type (or kind), their bytes per step and the
// sum of their median times.
type decodeGroup struct {
	Name          string  `json:"name"`
	Formats       string  `json:"formats"`
	Activation    string  `json:"activation"`
	Count         int     `json:"count"`
	BytesPerStep  int64   `json:"bytes_per_step"`
	TimeUS        float64 `json:"time_us_per_step"`
	GBps          float64 `json:"gb_per_s"`
	RatioToReadBW float64 `json:"ratio_to_read_bandwidth"`
}

// decodeTensor is one matrix of the step.
type decodeTensor struct {
	Name       string  `json:"name"`
	Type       string  `json:"type"`
	Kind       string  `json:"kind"`
	Layer      int     `json:"layer"`
	Rows       int     `json:"rows"`
	Cols       int     `json:"cols"`
	Format     string  `json:"format"`
	Activation string  `json:"activation"`
	Kernel     string  `json:"kernel"`
	Bytes      int64   `json:"bytes"`
	MedianUS   float64 `json:"median_us"`
	GBps       float64 `json:"gb_per_s"`
}

// decodeResult is what "qgemv bench -model FILE" reports.
type decodeResult struct {
	File            string         `json:"file"`
	FileFormat      string         `json:"file_format"`
	FileBytes       int64          `json:"file_bytes"`
	Backend         string         `json:"backend"`
	Threads         int            `json:"threads"`
	Batch           int            `json:"batch"`
	Activation      string         `json:"activation"`
	HugePages       bool           `json:"huge_pages"`
	Loaded          int            `json:"matrices_loaded"`
	NotLoaded       []string       `json:"not_loaded,omitempty"`
	NotMultiplied   []string       `json:"not_multiplied,omitempty"`
	LoadSeconds     float64        `json:"load_seconds"`
	RSSBytes        int64          `json:"rss_after_load_bytes"`
	RSSAnonBytes    int64          `json:"rss_anon_after_load_bytes"`
	RSSFileBytes    int64          `json:"rss_file_after_load_bytes"`
	RSSOverFile     float64        `json:"rss_over_file_size"`
	Steps           int            `json:"steps"`
	StepMedianUS    float64        `json:"step_median_us"`
	StepP10US       float64        `json:"step_p10_us"`
	StepP90US       float64        `json:"step_p90_us"`
	TokensPerSecond float64        `json:"tokens_per_s"`
	BytesPerStep    int64          `json:"bytes_per_step"`
	GBps            float64        `json:"gb_per_s"`
	ReadBWGBps      float64        `json:"read_bandwidth_gb_per_s"`
	RatioToReadBW   float64        `json:"ratio_to_read_bandwidth"`
	InputUS         float64        `json:"input_prep_us_per_step"`
	PerType         []decodeGroup  `json:"per_type"`
	PerKind         []decodeGroup  `json:"per_kind"`
	Tensors         []decodeTensor `json:"tensors"`
}

// decodeOpts are bench -model's settings.
type decodeOpts struct {
	batch    int
	act      benchAct
	actSet   bool // -act given: A8 is required, not preferred
	minTime  time.Duration
	minSteps int
	nthreads int
	huge     bool
	asJSON   bool
	svg      string
	quiet    bool
}

// memStatus returns VmRSS, RssAnon and RssFile of this process in bytes
// (zeros where /proc/self/status is missing).
func memStatus() (rss, anon, file int64) {
	u, err := mmap.Resident()
	if err != nil {
		return 0, 0, 0
	}
	return u.RSS, u.Anon, u.File
}

// stepPart is one call of a decode step: preparing a stage's input, or
// multiplying one matrix.
type stepPart struct {
	in    *qgemv.SharedInput // A8, A32
	x     []float32
	xh    []layout.FP16 // A16: the stage's input as binary16
	xf    []float32     // A16: the input it converts
	w     *qgemv.Weight // nil: the input preparation
	i     int           // index in in
	dst   []float32
	act   string
	a     qgemv.Activation
	times []time.Duration
}

// meterSettle is the idle time between a read-bandwidth sample and the
// next step. Right after the meter's 256 MiB stream the first matrix of a
// step read slower on both threads (Zen 5 VM, two threads: the first
// attn_q 230-300 us against 200-210 for the same shape later in the step,
// both threads starting together), which a millisecond of idle removes,
// while busy-waiting the millisecond does not; one thread saw no such
// penalty. The step is still timed from idle workers (their wake is
// part of it), as after the attention and sampling of a real decode.
const meterSettle = time.Millisecond

// benchDecode (bench -model FILE) loads every weight matrix of a model
// file and times decode steps: every matrix multiplied once, in layer
// order, batch vectors at a time, matrices that read one input sharing
// its preparation (SharedInput), between two read-bandwidth
// measurements.
func benchDecode(path string, iopt importOpts, eng *qgemv.Engine, o decodeOpts) error {
	// a bar while loading (quantizing a float model on load takes minutes)
	loadBar := newProgress(os.Stderr, 100, o.quiet || o.asJSON)
	loadBar.prefix = "loading "
	md, err := openModel(path, iopt, qgemv.WithLoadProgress(func(done, total int64) {
		loadBar.update(int(100 * done / max(total, 1)))
	}))
	if err != nil {
		return err
	}
	defer md.Close()
	res := decodeResult{File: path, FileFormat: md.Format(), FileBytes: md.Size(), Backend: eng.Backend(), Threads: o.nthreads,
		Batch: o.batch, Activation: o.act.String(), HugePages: o.huge}
	var names []string
	for _, t := range md.Tensors() {
		switch {
		case t.Err != nil:
			res.NotLoaded = append(res.NotLoaded, t.Err.Error())
		case t.Kind == qgemv.KindTokenEmbd:
			res.NotMultiplied = append(res.NotMultiplied, t.Name+": embedding table (looked up, not multiplied; not loaded)")
		default:
			names = append(names, t.Name)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("bench: %s: no weight matrix can be loaded:\n  %s", path, strings.Join(res.NotLoaded, "\n  "))
	}
	t0 := time.Now()
	w, err := md.Load(eng, names...)
	loadBar.done()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer w.Close()
	res.LoadSeconds = time.Since(t0).Seconds()
	res.RSSBytes, res.RSSAnonBytes, res.RSSFileBytes = memStatus()
	res.RSSOverFile = float64(res.RSSBytes) / float64(md.Size())
	for _, f := range w.Failed() {
		res.NotLoaded = append(res.NotLoaded, f.Err.Error())
	}
	res.Loaded = len(w.All())
	if res.Loaded == 0 {
		return fmt.Errorf("bench: %s: no weight matrix loaded:\n  %s", path, strings.Join(res.NotLoaded, "\n  "))
	}

	// The step's plan: per stage, its inputs prepared once per
	// activation type, then each matrix.
	var parts []*stepPart
	inputs := map[int][]float32{} // a random input per width
	for _, st := range w.Stages() {
		cols := st.Weights[0].Cols()
		x, ok := inputs[cols]
		if !ok {
			x = synth.Vector(o.batch*cols, uint64(cols))
			inputs[cols] = x
		}
		res.BytesPerStep += int64(4 * o.batch * cols)
		groups := map[qgemv.Activation][]*qgemv.Weight{}
		var order []qgemv.Activation
		for _, wt := range st.Weights {
			a := qgemv.A32
			switch {
			case o.act == actA8 && wt.TakesA8():
				a = qgemv.A8
			case o.act == actA8 && o.actSet:
				return fmt.Errorf("bench: %s (%s) takes float activations only: use -act a32 or a16, or leave -act out (int8 where a matrix takes it)", wt.Info.Name, wt.Format())
			}
			if _, ok := groups[a]; !ok {
				order = append(order, a)
			}
			groups[a] = append(groups[a], wt)
		}
		for _, a := range order {
			ws := groups[a]
			if o.act == actA16 {
				xh := make([]layout.FP16, len(x))
				parts = append(parts, &stepPart{xh: xh, xf: x, act: "A16"})
				for _, wt := range ws {
					parts = append(parts, &stepPart{xh: xh, w: wt, dst: make([]float32, o.batch*wt.Rows()), act: "A16"})
				}
				continue
			}
			mats := make([]*qgemv.Matrix, len(ws))
			for i, wt := range ws {
				mats[i] = wt.Matrix
			}
			in, err := eng.NewSharedInput(mats...)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			parts = append(parts, &stepPart{in: in, x: x, act: a.String(), a: a})
			for i, wt := range ws {
				parts = append(parts, &stepPart{in: in, i: i, w: wt, dst: make([]float32, o.batch*wt.Rows()), act: a.String()})
			}
		}
	}
	step := func() (time.Duration, error) {
		start := time.Now()
		for _, p := range parts {
			t := time.Now()
			var err error
			switch {
			case p.w == nil && p.in != nil:
				err = p.in.Set(p.x, o.batch, p.a)
			case p.w == nil:
				layout.ToFP16s(p.xh, p.xf)
			case p.in != nil:
				err = p.in.Mul(p.i, p.dst)
			default:
				err = p.w.MulFP16(p.dst, p.xh, o.batch)
			}
			if err != nil {
				name := "input"
				if p.w != nil {
					name = p.w.Info.Name
				}
				return 0, fmt.Errorf("bench: %s: %w", name, err)
			}
			p.times = append(p.times, time.Since(t))
		}
		return time.Since(start), nil
	}

	// The read bandwidth is sampled between the steps, so that it and the
	// steps see the same machine (a shared VM's bandwidth drifts by half
	// within minutes).
	meter := newReadMeter(o.nthreads, o.huge)
	defer meter.free()
	for range 2 { // warm-up: caches, pages, workers
		if _, err := step(); err != nil {
			return err
		}
	}
	for _, p := range parts {
		p.times = p.times[:0]
	}
	var steps []time.Duration
	var rates []float64
	prog := newProgress(os.Stderr, 100, o.quiet || o.asJSON)
	start := time.Now()
	for len(steps) < o.minSteps || time.Since(start) < o.minTime {
		d, err := step()
		if err != nil {
			return err
		}
		steps = append(steps, d)
		rates = append(rates, meter.read())
		time.Sleep(meterSettle)
		prog.update(min(100, max(100*len(steps)/o.minSteps, int(100*time.Since(start)/max(o.minTime, 1)))))
	}
	prog.update(100)
	prog.done()
	slices.Sort(rates)
	bw := rates[len(rates)/2]

	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	slices.Sort(steps)
	res.Steps = len(steps)
	res.StepMedianUS, res.StepP10US, res.StepP90US = us(steps[len(steps)/2]), us(steps[len(steps)/10]), us(steps[len(steps)*9/10])
	res.TokensPerSecond = float64(o.batch) * 1e6 / res.StepMedianUS
	res.ReadBWGBps = bw / 1e9
	types, kinds := map[string]*decodeGroup{}, map[string]*decodeGroup{}
	var typeOrder, kindOrder []string
	add := func(m map[string]*decodeGroup, order *[]string, key, format, act string, bytes int64, t float64) {
		g, ok := m[key]
		if !ok {
			g = &decodeGroup{Name: key}
			m[key] = g
			*order = append(*order, key)
		}
		if !strings.Contains(","+g.Formats+",", ","+format+",") {
			g.Formats = strings.TrimPrefix(g.Formats+","+format, ",")
		}
		if !strings.Contains(","+g.Activation+",", ","+act+",") {
			g.Activation = strings.TrimPrefix(g.Activation+","+act, ",")
		}
		g.Count++
		g.BytesPerStep += bytes
		g.TimeUS += t
	}
	for _, p := range parts {
		m := us(med(p.times))
		if p.w == nil {
			res.InputUS += m
			continue
		}
		bytes := p.w.StreamBytes() + int64(4*o.batch*p.w.Rows())
		res.BytesPerStep += bytes
		kind := p.w.Info.Kind
		if kind == "" {
			kind = "other"
		}
		res.Tensors = append(res.Tensors, decodeTensor{Name: p.w.Info.Name, Type: p.w.Info.Type, Kind: kind, Layer: p.w.Info.Layer,
			Rows: p.w.Rows(), Cols: p.w.Cols(), Format: p.w.Format(), Activation: p.act, Kernel: p.w.Kernel(), Bytes: bytes,
			MedianUS: m, GBps: float64(bytes) / m / 1e3})
		add(types, &typeOrder, p.w.Info.Type, p.w.Format(), p.act, bytes, m)
		add(kinds, &kindOrder, kind, p.w.Format(), p.act, bytes, m)
	}
	// The activation types the matrices ran with (-act a8 prefers int8).
	var acts []string
	for _, t := range res.Tensors {
		if !slices.Contains(acts, t.Activation) {
			acts = append(acts, t.Activation)
		}
	}
	slices.Sort(acts)
	res.Activation = strings.Join(acts, "+")
	res.GBps = float64(res.BytesPerStep) / res.StepMedianUS / 1e3
	res.RatioToReadBW = res.GBps / res.ReadBWGBps
	for _, g := range []struct {
		m     map[string]*decodeGroup
		order []string
		dst   *[]decodeGroup
	}{{types, typeOrder, &res.PerType}, {kinds, kindOrder, &res.PerKind}} {
		for _, k := range g.order {
			x := g.m[k]
			x.GBps = float64(x.BytesPerStep) / x.TimeUS / 1e3
			x.RatioToReadBW = x.GBps / res.ReadBWGBps
			*g.dst = append(*g.dst, *x)
		}
	}
	sort.SliceStable(res.PerType, func(i, j int) bool { return res.PerType[i].BytesPerStep > res.PerType[j].BytesPerStep })

	if o.svg != "" {
		if err := outpath.Write(o.svg, false, func(w io.Writer) error { return writeDecodeSVG(w, &res) }); err != nil {
			return fmt.Errorf("bench: -svg: %w", err)
		}
	}
	if o.asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printDecode(&res)
	return nil
}

func printDecode(r *decodeResult) {
	kernels := map[string]bool{}
	for _, t := range r.Tensors {
		kernels[t.Kernel] = true
	}
	var ks []string
	for k := range kernels {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	fmt.Printf("qgemv bench -model %s: %s, %.1f MB, decode step of %d matrices, batch %d, %s, %d threads\n",
		r.File, r.FileFormat, float64(r.FileBytes)/1e6, len(r.Tensors), r.Batch, r.Activation, r.Threads)
	fmt.Printf("  loaded        %d matrices in %.2f s; resident %.1f MB = %.2fx the file (anonymous %.1f MB, file-backed %.1f MB)\n",
		r.Loaded, r.LoadSeconds, float64(r.RSSBytes)/1e6, r.RSSOverFile, float64(r.RSSAnonBytes)/1e6, float64(r.RSSFileBytes)/1e6)
	fmt.Printf("  kernels       %s\n", strings.Join(ks, ", "))
	fmt.Printf("  time/step     %.1f us median (p10 %.1f, p90 %.1f) over %d steps: %.1f tokens/s\n",
		r.StepMedianUS, r.StepP10US, r.StepP90US, r.Steps, r.TokensPerSecond)
	fmt.Printf("  streamed      %.2f GB/s (%.1f MB per step)\n", r.GBps, float64(r.BytesPerStep)/1e6)
	fmt.Printf("  read BW       %.2f GB/s (median of reads between the steps, %d threads)\n", r.ReadBWGBps, r.Threads)
	fmt.Printf("  ratio         %.1f%% of read bandwidth\n", 100*r.RatioToReadBW)
	fmt.Printf("  inputs        %.1f us per step (activation quantization, once per shared input)\n", r.InputUS)
	for _, t := range []struct {
		title string
		g     []decodeGroup
	}{{"stored type", r.PerType}, {"layer kind", r.PerKind}} {
		fmt.Printf("  per %s:\n    %-12s %5s %-22s %-7s %9s %10s %8s %7s\n", t.title, t.title, "count", "format", "act", "MB/step", "us/step", "GB/s", "of BW")
		for _, g := range t.g {
			fmt.Printf("    %-12s %5d %-22s %-7s %9.1f %10.1f %8.2f %6.1f%%\n", g.Name, g.Count, g.Formats, g.Activation,
				float64(g.BytesPerStep)/1e6, g.TimeUS, g.GBps, 100*g.RatioToReadBW)
		}
	}
	if len(r.NotLoaded) > 0 {
		fmt.Printf("  not loaded (%d):\n", len(r.NotLoaded))
		for _, s := range r.NotLoaded {
			fmt.Printf("    %s\n", s)
		}
	}
	for _, s := range r.NotMultiplied {
		fmt.Printf("  skipped %s\n", s)
	}
}
