package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/internal/outpath"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/internal/sysmem"
	"github.com/qgemv/qgemv/internal/testmodel"
	"github.com/qgemv/qgemv/layout"
)

// benchResult is what "qgemv bench -json" prints.
type benchResult struct {
	Backend       string  `json:"backend"`
	Format        string  `json:"format"`
	Activation    string  `json:"activation"`
	Hidden        int     `json:"hidden"`
	Intermediate  int     `json:"intermediate"`
	Layers        int     `json:"layers_rotated"`
	WorkingSetMiB float64 `json:"working_set_mib"`
	Iters         int     `json:"iters"`
	Threads       int     `json:"threads"`
	BlockMedianUS float64 `json:"block_median_us"`
	BlockMeanUS   float64 `json:"block_mean_us"`
	BlockP10US    float64 `json:"block_p10_us"`
	BlockP90US    float64 `json:"block_p90_us"`
	GFLOPS        float64 `json:"gflops"`
	BytesPerBlock int64   `json:"bytes_per_block"`
	GBps          float64 `json:"gb_per_s"`
	ReadBWGBps    float64 `json:"read_bandwidth_gb_per_s"`
	RatioToReadBW float64 `json:"ratio_to_read_bandwidth"`
	// KernelsUS is the sum of the gate, up and down kernels' own times
	// (same rotation; device backends only), and BlockOverKernels the
	// block's median over it.
	KernelsUS        float64 `json:"kernels_us,omitempty"`
	BlockOverKernels float64 `json:"block_over_kernels,omitempty"`
	// ReplayedUS is the device's time per recorded block, replayed
	// back to back with one wait per ffnReplays blocks (no copies), and
	// FloorUS the round trip of the smallest block: a recorded
	// one-kernel sequence run with its input written and output read
	// (Sequence.RunIO; device backends only).
	ReplayedUS float64 `json:"replayed_us,omitempty"`
	FloorUS    float64 `json:"floor_us,omitempty"`
}

type ffnLayer struct{ gate, up, down *qgemv.Matrix }

// maxWorkingSetMiB bounds -working-set-mib, as synth.WorkingSet bounds
// its variable.
const maxWorkingSetMiB = 65536

// benchFlagModes names, for each flag that applies to some of bench's
// workloads only, the workloads it applies to (the rest apply to all): a
// flag given where it changes nothing is an error, not silently dropped.
// The workloads: ffn, matvans, decode (steps of a generated model), model
// (steps of -model) and twin (-model -twin).
var benchFlagModes = map[string][]string{
	"iters": {"ffn"}, "hidden": {"ffn"}, "intermediate": {"ffn"}, "working-set-mib": {"ffn"},
	"d": {"matvans"}, "sigma": {"matvans"}, "reps": {"matvans"},
	"act":       {"ffn", "decode", "model", "twin"},
	"format":    {"ffn", "decode", "model", "twin"},
	"hugepages": {"ffn", "decode", "model", "twin"},
	"mix":       {"decode"}, "layers": {"decode"},
	"model": {"model", "twin"}, "twin": {"twin"},
	"batch": {"decode", "model"}, "steps": {"decode", "model"}, "svg": {"decode", "model"},
	"mintime": {"decode", "model", "twin"},
	"method":  {"decode", "model", "twin"}, "bits": {"decode", "model", "twin"}, "group": {"decode", "model", "twin"},
	"gptq-v2": {"decode", "model", "twin"}, "hqq-rows": {"decode", "model", "twin"}, "hqq-cols": {"decode", "model", "twin"},
}

var benchModeNames = map[string]string{
	"ffn": "the FFN block (-workload ffn)", "matvans": "the MatVANS chain (-workload matvans)",
	"decode": "decode steps of a generated model", "model": "decode steps of -model", "twin": "-model -twin",
}

// checkBenchFlags returns an error for the first flag in set (sorted by
// name) that does not apply to the workload wl (decode with a -model,
// with -twin, or of a generated model).
func checkBenchFlags(set map[string]bool, wl string, model, twin bool) error {
	mode := wl
	if wl == "decode" {
		switch {
		case model && twin:
			mode = "twin"
		case model:
			mode = "model"
		}
	}
	if benchModeNames[mode] == "" {
		return nil // an unknown workload: reported by the caller
	}
	names := make([]string, 0, len(set))
	for f := range set {
		names = append(names, f)
	}
	slices.Sort(names)
	for _, f := range names {
		modes, ok := benchFlagModes[f]
		if !ok || slices.Contains(modes, mode) {
			continue
		}
		var to []string
		for _, m := range modes {
			to = append(to, benchModeNames[m])
		}
		return fmt.Errorf("bench: -%s does not apply to %s; it applies to %s", f, benchModeNames[mode], strings.Join(to, ", "))
	}
	return nil
}

func cmdBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	iters := fs.Int("iters", 200, "ffn: iterations (FFN blocks) in the burst")
	backend := fs.String("backend", "", "backend (default: best, or $QGEMV_BACKEND)")
	threads := fs.Int("threads", 0, "CPU goroutines per multiply (0: all)")
	act := fs.String("act", "a8", "activations: a8 (int8, VNNI; decode: where a matrix takes them, unless given), a16 (binary16) or a32 (float32)")
	format := fs.String("format", "q4g128", formatHelp("ffn: weight format", nil)+"; -model: the format float tensors are quantized to")
	hidden := fs.Int("hidden", 4096, "ffn: model dimension (LLaMA-3 8B: 4096)")
	inter := fs.Int("intermediate", 14336, "ffn: FFN intermediate dimension (LLaMA-3 8B: 14336)")
	minWS := fs.Int("working-set-mib", -1, fmt.Sprintf("ffn: rotate over enough layers to stream at least this many MiB, 0 to %d (0: one layer, cache-resident when small; -1: $%s, else 256 or twice the last-level cache, at most 1024)", maxWorkingSetMiB, synth.WorkingSetEnv))
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	quiet := fs.Bool("quiet", false, "no progress bar")
	huge := fs.Bool("hugepages", true, "copy matrices into transparent-huge-page memory (Linux); the read-bandwidth buffer uses the same memory")
	workload := fs.String("workload", "", "decode (the default: a decode step of a generated 4-layer LLaMA-3-8B-shaped model), ffn (a LLaMA FFN block; the default when an ffn flag is given) or matvans (the MatVANS int8 chain, entropy-coded vs plain)")
	mix := fs.String("mix", "gptq", "decode: the generated model's types: gptq (4-bit, group 128), "+strings.Join(testmodel.Mixes, ", "))
	genLayers := fs.Int("layers", 4, "decode: the generated model's layers")
	mvD := fs.Int("d", 4096, "matvans: matrix dimension")
	mvSigma := fs.Float64("sigma", 4, "matvans: standard deviation of the int8 elements")
	mvReps := fs.Int("reps", 5, "matvans: chains timed (median)")
	modelPath := fs.String("model", "", "decode steps of this .gguf/.safetensors file instead of a generated model: every weight matrix once, in layer order")
	batch := fs.Int("batch", 1, "decode: vectors per step (tokens decoded together), 1 to 16")
	svg := fs.String("svg", "", "decode: also draw the per-type and per-kind times as an SVG bar chart into this file")
	minSteps := fs.Int("steps", 20, "decode: steps timed at least")
	twin := fs.Bool("twin", false, "with -model: instead of decode steps, time each matrix against a natively quantized twin of its format and shape")
	minTime := fs.Duration("mintime", 2*time.Second, "decode: time spent stepping (-twin: per matrix, default 300ms)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	iopt := importFlags(fs, false)
	var stopProfile func()
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))
	}
	if *threads < 0 || *threads > maxProcs() {
		return fmt.Errorf("bench: -threads %d: want 0 (all) to %d, the logical CPUs Go uses (GOMAXPROCS)", *threads, maxProcs())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// The workload: -model and the decode flags mean decode steps, the
	// FFN block's flags the FFN block; else decode steps of a generated
	// model (what a token costs).
	wl := *workload
	if wl == "" {
		wl = "decode"
		if *modelPath == "" && (set["format"] || set["hidden"] || set["intermediate"] || set["iters"] || set["working-set-mib"]) {
			wl = "ffn"
		}
	}
	if *modelPath != "" && wl != "decode" {
		return fmt.Errorf("bench: -model times decode steps, not -workload %s", wl)
	}
	if err := checkBenchFlags(set, wl, *modelPath != "", *twin); err != nil {
		return err
	}
	// The profile starts once the flags are checked, just before the
	// work: a mistaken command leaves no empty profile behind.
	startProfile := func() error {
		if *cpuProfile == "" {
			return nil
		}
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("bench: -cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("bench: -cpuprofile: %w", err)
		}
		stopProfile = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
		return nil
	}
	defer func() {
		if stopProfile != nil {
			stopProfile()
		}
	}()
	// The goroutines the CPU multiplies use (0: GOMAXPROCS), and so the
	// read-bandwidth threads: cpuid's logical-core count can be smaller
	// (one socket's, or a VM's topology).
	nthreads := *threads
	if nthreads == 0 {
		nthreads = maxProcs()
	}
	switch wl {
	case "matvans":
		if *mvReps < 1 {
			return fmt.Errorf("bench: -reps %d must be >= 1", *mvReps)
		}
		// The engine first: a bad backend fails before the matrices are
		// generated and encoded (seconds).
		if err := startProfile(); err != nil {
			return err
		}
		eng, err := qgemv.Open(qgemv.WithBackend(*backend), qgemv.WithThreads(*threads))
		if err != nil {
			return fmt.Errorf("bench: -workload matvans: %w", err)
		}
		defer eng.Close()
		return benchMatVANS(eng, *mvD, 10, *mvReps, *mvSigma, nthreads, *asJSON)
	case "decode":
		a, err := parseAct(*act)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if _, err := layout.ParseFormatSpec(*format); err != nil {
			return fmt.Errorf("bench: -format: %w", err)
		}
		if *batch < 1 || *batch > qgemv.MaxBatch {
			return fmt.Errorf("bench: -batch %d: want 1 to %d", *batch, qgemv.MaxBatch)
		}
		if *minSteps < 1 {
			return fmt.Errorf("bench: -steps %d must be >= 1", *minSteps)
		}
		if _, err := synth.WorkingSet(); err != nil { // the read-bandwidth buffer's size
			return fmt.Errorf("bench: %w", err)
		}
		if *svg != "" {
			if _, err := outpath.Resolve(*svg); err != nil { // before the work
				return fmt.Errorf("bench: -svg: %w", err)
			}
		}
		if err := startProfile(); err != nil {
			return err
		}
		eng, err := qgemv.Open(qgemv.WithBackend(*backend), qgemv.WithThreads(*threads), qgemv.WithHugePages(*huge))
		if err != nil {
			return err
		}
		defer eng.Close()
		iopt.format = *format
		iopt.finish()
		if *twin {
			if !set["mintime"] {
				*minTime = 300 * time.Millisecond
			}
			return benchTwin(*modelPath, *iopt, eng, a, nthreads, *minTime, *asJSON, *huge)
		}
		path := *modelPath
		if path == "" {
			dir, err := os.MkdirTemp("", "qgemv-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			if path, err = generateModel(dir, *mix, *genLayers, *quiet || *asJSON); err != nil {
				return fmt.Errorf("bench: %w", err)
			}
		}
		return benchDecode(path, *iopt, eng, decodeOpts{batch: *batch, act: a, actSet: set["act"], minTime: *minTime, minSteps: *minSteps,
			nthreads: nthreads, huge: *huge, asJSON: *asJSON, svg: *svg, quiet: *quiet})
	case "ffn":
	default:
		return fmt.Errorf("bench: -workload %q: want decode, ffn or matvans", wl)
	}
	if *iters < 1 {
		return fmt.Errorf("bench: -iters %d must be >= 1", *iters)
	}
	switch {
	case *minWS == -1:
		ws, err := synth.WorkingSet()
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		*minWS = int(ws >> 20)
	case *minWS < 0 || *minWS > maxWorkingSetMiB:
		return fmt.Errorf("bench: -working-set-mib %d: want 0 to %d (or -1 for the default)", *minWS, maxWorkingSetMiB)
	}
	a, err := parseAct(*act)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	spec, err := layout.ParseFormatSpec(*format)
	if err != nil {
		return fmt.Errorf("bench: -format: %w", err)
	}
	if a == actA8 && !takesA8(spec) {
		if set["act"] {
			return fmt.Errorf("bench: %s multiplies float activations only: use -act a32 or a16", spec)
		}
		a = actA32
	}
	if err := layout.CheckDims(*inter, *hidden); err != nil {
		return fmt.Errorf("bench: -hidden/-intermediate: %w", err)
	}
	if err := startProfile(); err != nil {
		return err
	}
	eng, err := qgemv.Open(qgemv.WithBackend(*backend), qgemv.WithThreads(*threads), qgemv.WithHugePages(*huge))
	if err != nil {
		return err
	}
	defer eng.Close()

	H, I := *hidden, *inter
	// The block's three matrices loaded and a fourth being copied, sized
	// from 128-row samples: refused before they end the process (the
	// kernel's out-of-memory kill).
	var need uint64
	for _, sh := range [3][2]int{{I, H}, {I, H}, {H, I}} {
		n := min(sh[0], 128)
		m, err := synth.Matrix(spec, n, sh[1], 0)
		if err != nil {
			return err
		}
		need += uint64(m.StreamBytes()) * uint64(sh[0]) / uint64(n)
	}
	if err := sysmem.Check(need * 4 / 3); err != nil {
		return fmt.Errorf("bench: an FFN block of -hidden %d -intermediate %d in %s: %w", H, I, spec, err)
	}
	perLayer := int64(0)
	var layers []ffnLayer
	nLayers := 1
	for l := 0; l < nLayers; l++ {
		var mats [3]*qgemv.Matrix
		for k, shape := range [3][2]int{{I, H}, {I, H}, {H, I}} {
			m, err := synth.Matrix(spec, shape[0], shape[1], uint64(3*l+k+1))
			if err != nil {
				return err
			}
			if l == 0 {
				perLayer += m.StreamBytes()
			}
			if mats[k], err = eng.Load(m); err != nil {
				return err
			}
		}
		layers = append(layers, ffnLayer{mats[0], mats[1], mats[2]})
		if l == 0 && *minWS > 0 {
			nLayers = synth.Rotation(perLayer, int64(*minWS)<<20)
			if err := sysmem.Check(uint64(nLayers)*uint64(perLayer) + uint64(perLayer)/3); err != nil { // the layers and one matrix being copied
				return fmt.Errorf("bench: -working-set-mib %d: %d layers rotated: %w", *minWS, nLayers, err)
			}
		}
	}

	x := synth.Vector(H, 99)
	y := make([]float32, H)
	// The block on buffers, recorded once per layer and run with
	// Sequence.RunIO: the input written once, gate and up (A8: from one
	// quantization), SwiGLU, down, the output read once; on a GPU the
	// buffers stay in device memory (on CUDA the copies are in the
	// block's graph).
	seqs, err := ffnSequences(eng, layers, H, I, a.activation())
	if err != nil {
		return err
	}
	block := func(li int) error { return seqs.seqs[li].RunIO(seqs.x, x, seqs.y, y) }

	bw1 := measureReadBW(nthreads, *huge)
	for l := range layers { // warm-up: one pass over every layer
		if err := block(l); err != nil {
			return err
		}
	}
	times := make([]time.Duration, *iters)
	prog := newProgress(os.Stderr, *iters, *quiet || *asJSON)
	start := time.Now()
	for i := range times {
		t0 := time.Now()
		if err := block(i % len(layers)); err != nil {
			return err
		}
		times[i] = time.Since(t0)
		prog.update(i + 1)
	}
	total := time.Since(start)
	prog.done()
	bw2 := measureReadBW(nthreads, *huge)
	readBW := (bw1 + bw2) / 2

	slices.Sort(times)
	med := times[len(times)/2]
	actBytes := int64(4 * (H + I + I + I + H)) // x in, gate/up out, h in, y out
	bytes := perLayer + actBytes
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	res := benchResult{
		Backend: layers[0].gate.Kernel(), Format: layers[0].gate.Format(), Activation: a.String(), Hidden: H, Intermediate: I,
		Layers: len(layers), WorkingSetMiB: float64(perLayer*int64(len(layers))) / (1 << 20),
		Iters: *iters, Threads: nthreads,
		BlockMedianUS: us(med), BlockMeanUS: us(total) / float64(*iters),
		BlockP10US: us(times[len(times)/10]), BlockP90US: us(times[len(times)*9/10]),
		GFLOPS:        float64(2*3*int64(H)*int64(I)) / med.Seconds() / 1e9,
		BytesPerBlock: bytes,
		GBps:          float64(bytes) / med.Seconds() / 1e9,
		ReadBWGBps:    readBW / 1e9,
	}
	res.RatioToReadBW = res.GBps / res.ReadBWGBps
	if k, err := kernelSum(eng, layers, a.activation(), *iters); err == nil {
		res.KernelsUS = us(k)
		res.BlockOverKernels = res.BlockMedianUS / res.KernelsUS
		rep, floor, err := deviceParts(eng, seqs, x, y, *iters)
		if err != nil {
			return err
		}
		res.ReplayedUS, res.FloorUS = us(rep), us(floor)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Printf("qgemv bench: LLaMA FFN block (gate+up %dx%d, down %dx%d), %s %s, kernels %s, %d threads\n",
		I, H, H, I, layers[0].gate.Format(), res.Activation, layers[0].gate.Kernel(), nthreads)
	fmt.Printf("  working set   %.0f MiB (%d layers rotated)\n", res.WorkingSetMiB, res.Layers)
	fmt.Printf("  time/block    %.1f us median (mean %.1f, p10 %.1f, p90 %.1f) over %d iterations\n",
		res.BlockMedianUS, res.BlockMeanUS, res.BlockP10US, res.BlockP90US, res.Iters)
	if res.KernelsUS > 0 {
		fmt.Printf("  kernels       %.1f us (gate + up + down kernels alone, same rotation): block/kernels %.2f\n", res.KernelsUS, res.BlockOverKernels)
		fmt.Printf("  replayed      %.1f us (the recorded block %d times back to back, one wait, no copies)\n", res.ReplayedUS, ffnReplays)
		fmt.Printf("  floor         %.1f us (a one-kernel sequence with its input written and output read)\n", res.FloorUS)
	}
	fmt.Printf("  compute       %.1f GFLOPS\n", res.GFLOPS)
	fmt.Printf("  streamed      %.2f GB/s (%.1f MB per block)\n", res.GBps, float64(bytes)/1e6)
	if strings.HasPrefix(eng.Backend(), "cpu") {
		fmt.Printf("  read BW       %.2f GB/s (measured in this run, %d threads)\n", res.ReadBWGBps, nthreads)
		fmt.Printf("  ratio         %.1f%% of read bandwidth\n", 100*res.RatioToReadBW)
	} else { // the roofline above is the host's; the device has its own
		fmt.Printf("  host read BW  %.2f GB/s (host memory, measured in this run, %d threads)\n", res.ReadBWGBps, nthreads)
		fmt.Printf("  ratio         %.1f%% of host read bandwidth (the device's own: %s)\n", 100*res.RatioToReadBW, deviceBWHint(eng.Backend()))
	}
	return nil
}

// ffnReplays is how many recorded blocks deviceParts queues per wait.
const ffnReplays = 20

// deviceParts splits a device block's time (device backends): the
// median per block of the recorded blocks replayed ffnReplays at a time
// with one wait (the device's own time, launches overlapped), and the
// median round trip of the least a block does (a recorded one-kernel
// sequence run with RunIO: the input written, the output read).
func deviceParts(eng *qgemv.Engine, f *ffnBuffers, x, y []float32, iters int) (replayed, floor time.Duration, err error) {
	rounds := max(5, iters/ffnReplays)
	reps := make([]time.Duration, rounds)
	for r := range reps {
		t0 := time.Now()
		for i := 0; i < ffnReplays; i++ {
			if err := f.seqs[(r*ffnReplays+i)%len(f.seqs)].Run(); err != nil {
				return 0, 0, err
			}
		}
		if err := eng.Wait(); err != nil {
			return 0, 0, err
		}
		reps[r] = time.Since(t0) / ffnReplays
	}
	one, err := eng.Record(func() error { return eng.Scale(f.y, f.y, 1) })
	if err != nil {
		return 0, 0, err
	}
	defer one.Close()
	trips := make([]time.Duration, iters)
	for i := range trips {
		t0 := time.Now()
		if err := one.RunIO(f.x, x, f.y, y); err != nil {
			return 0, 0, err
		}
		trips[i] = time.Since(t0)
	}
	slices.Sort(reps)
	slices.Sort(trips)
	return reps[len(reps)/2], trips[len(trips)/2], nil
}

// kernelSum returns the sum of the gate, up and down multiply kernels'
// own times (Engine.KernelTime, rotating over the layers as the block
// does), or an error where the backend does not time kernels alone.
func kernelSum(eng *qgemv.Engine, layers []ffnLayer, act qgemv.Activation, iters int) (time.Duration, error) {
	var sum time.Duration
	for k := 0; k < 3; k++ {
		mats := make([]*qgemv.Matrix, len(layers))
		for i, l := range layers {
			mats[i] = [3]*qgemv.Matrix{l.gate, l.up, l.down}[k]
		}
		d, err := eng.KernelTime(mats, act, 1, iters)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// generateModel writes a LLaMA-3-8B-shaped model with layers blocks of
// mix's types into dir and returns its path (bench's decode workload).
func generateModel(dir, mix string, layers int, quiet bool) (string, error) {
	l := testmodel.Llama3_8B(layers)
	t0 := time.Now()
	var path string
	if mix == "gptq" {
		var err error
		if path, err = l.WriteGPTQ(dir, testmodel.GPTQConfig{Bits: 4, Group: 128}); err != nil {
			return "", err
		}
	} else {
		path = filepath.Join(dir, "model.gguf")
		if _, err := l.WriteGGUFFile(path, mix); err != nil {
			return "", fmt.Errorf("-mix %s: %w (or gptq)", mix, err)
		}
	}
	if !quiet {
		fmt.Fprintf(os.Stderr, "generated a %d-layer LLaMA-3-8B-shaped %s model with random weights in %.1f s\n", layers, mix, time.Since(t0).Seconds())
	}
	return path, nil
}

// benchAct is the activation type of the FFN block.
type benchAct string

const (
	actA8  benchAct = "A8"
	actA16 benchAct = "A16"
	actA32 benchAct = "A32"
)

func (a benchAct) String() string { return string(a) }

// activation returns the API's activation type.
func (a benchAct) activation() qgemv.Activation {
	switch a {
	case actA8:
		return qgemv.A8
	case actA16:
		return qgemv.A16
	}
	return qgemv.A32
}

// parseAct parses -act.
func parseAct(s string) (benchAct, error) {
	switch a := benchAct(strings.ToUpper(s)); a {
	case actA8, actA16, actA32:
		return a, nil
	}
	return "", fmt.Errorf("-act %q: want a8, a16 or a32", s)
}

// takesA8 reports whether the format multiplies int8 activations
// (layout.A8Matrix).
func takesA8(spec layout.FormatSpec) bool {
	m, err := layout.Random(spec, 1, 1, 0)
	_, ok := m.(layout.A8Matrix)
	return err == nil && ok
}

// ffnBuffers is the FFN block on buffers: the input and output buffers
// and one recorded sequence per layer.
type ffnBuffers struct {
	x, y *qgemv.Buffer
	seqs []*qgemv.Sequence
}

// ffnSequences records each layer's block: with A8, x quantized once for
// gate and up (QuantizeBuffer, MulInt8Buffer), SwiGLU, then down with A8;
// else act throughout.
func ffnSequences(eng *qgemv.Engine, layers []ffnLayer, H, I int, act qgemv.Activation) (*ffnBuffers, error) {
	a8 := act == qgemv.A8
	f := &ffnBuffers{}
	pc := layers[0].gate.PaddedCols()
	var g, u, xq, xs *qgemv.Buffer
	for _, b := range []struct {
		p    **qgemv.Buffer
		n    int
		elem qgemv.ElemType
	}{{&f.x, H, qgemv.Float32}, {&f.y, H, qgemv.Float32}, {&g, I, qgemv.Float32}, {&u, I, qgemv.Float32},
		{&xq, pc, qgemv.Int8}, {&xs, pc / 128, qgemv.Float32}} {
		var err error
		if *b.p, err = eng.NewBuffer(b.n, b.elem); err != nil {
			return nil, err
		}
	}
	for _, l := range layers {
		seq, err := eng.Record(func() error {
			if a8 {
				if err := l.gate.QuantizeBuffer(xq, xs, f.x, 1); err != nil {
					return err
				}
				if err := l.gate.MulInt8Buffer(g, xq, xs, 1); err != nil {
					return err
				}
				if err := l.up.MulInt8Buffer(u, xq, xs, 1); err != nil {
					return err
				}
			} else {
				if err := l.gate.MulBuffer(g, f.x, 1, act); err != nil {
					return err
				}
				if err := l.up.MulBuffer(u, f.x, 1, act); err != nil {
					return err
				}
			}
			if err := eng.SwiGLU(g, g, u); err != nil {
				return err
			}
			return l.down.MulBuffer(f.y, g, 1, act)
		})
		if err != nil {
			return nil, err
		}
		f.seqs = append(f.seqs, seq)
	}
	return f, nil
}

// deviceBWHint says how to measure a GPU backend's own read bandwidth
// and GEMV ratio to it.
func deviceBWHint(backend string) string {
	switch base, _, _ := strings.Cut(backend, ":"); base {
	case "opencl":
		return "go test -tags opencl -run XXX -bench . ./opencl"
	case "cuda":
		return "QGEMV_CUDA_REPORT=1 go test -tags cuda -run Report -v ./cuda"
	}
	return "see the backend's benchmarks"
}

// measureReadBW returns the median of five timed streaming reads of a
// buffer beyond the last-level cache (synth.WorkingSet bytes, which
// cmdBench has checked), in bytes per second; huge puts the buffer in
// huge-page memory, as the matrices are.
func measureReadBW(threads int, huge bool) float64 {
	m := newReadMeter(threads, huge)
	defer m.free()
	var rates []float64
	for range 5 {
		rates = append(rates, m.read())
	}
	slices.Sort(rates)
	return rates[2]
}

// readMeter times streaming reads of one buffer beyond the last-level
// cache, for read-bandwidth samples taken between timed calls.
type readMeter struct {
	buf     []uint64
	blk     *hugemem.Block
	threads int
}

func newReadMeter(threads int, huge bool) *readMeter {
	ws, err := synth.WorkingSet()
	if err != nil {
		ws = synth.BeyondLLC
	}
	m := &readMeter{threads: threads}
	if huge {
		m.blk = hugemem.Alloc(int(ws))
		m.buf = unsafe.Slice((*uint64)(unsafe.Pointer(&m.blk.Bytes[0])), ws/8)
	} else {
		m.buf = make([]uint64, ws/8)
	}
	for i := range m.buf {
		m.buf[i] = uint64(i)
	}
	qgemv.StreamRead(m.buf, threads) // fault in, warm the workers
	return m
}

// read returns the rate of one read of the buffer in bytes per second:
// the best loop shape's (qgemv.ReadBandwidth).
func (m *readMeter) read() float64 {
	r, _ := qgemv.ReadBandwidth(m.buf, m.threads)
	return r
}

func (m *readMeter) free() {
	if m.blk != nil {
		m.blk.Free()
	}
}

type progress struct {
	w      io.Writer
	total  int
	off    bool
	last   int
	isTerm bool
	prefix string // before the bar ("loading ")
}

func newProgress(f *os.File, total int, off bool) *progress {
	st, err := f.Stat()
	isTerm := err == nil && st.Mode()&os.ModeCharDevice != 0
	return &progress{w: f, total: total, off: off, last: -1, isTerm: isTerm}
}

func (p *progress) update(done int) {
	if p.off {
		return
	}
	pct := 100 * done / p.total
	if !p.isTerm && pct/10 == p.last/10 { // plain logs: one line per 10%
		return
	}
	if pct == p.last {
		return
	}
	p.last = pct
	const width = 40
	n := width * done / p.total
	bar := strings.Repeat("#", n) + strings.Repeat(".", width-n)
	if p.isTerm {
		fmt.Fprintf(p.w, "\r%s[%s] %3d%% %d/%d", p.prefix, bar, pct, done, p.total)
	} else {
		fmt.Fprintf(p.w, "%s[%s] %3d%% %d/%d\n", p.prefix, bar, pct, done, p.total)
	}
}

func (p *progress) done() {
	if !p.off && p.isTerm {
		fmt.Fprintln(p.w)
	}
}
