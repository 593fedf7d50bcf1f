// Package dispatch probes what this machine can run (CPU features with OS
// support; OpenCL and CUDA devices when those backends are compiled in),
// selects a backend and kernel set, honours overrides by option and by the
// environment variable QGEMV_BACKEND, and reports what it found and chose.
//
// Backend names:
//
//	cpu            the CPU with the best kernel set it supports
//	cpu-<isa>      the CPU with a forced kernel set, e.g. cpu-generic
//	opencl[:i]     OpenCL device i (build tag opencl)
//	cuda[:i]       CUDA device i (build tag cuda)
//
// A GPU backend is chosen without being asked only when a calibration
// shows its default device faster than the CPU: one Q4G128 4096x4096
// multiply with int8 activations timed on both, cached per device and
// driver in os.UserCacheDir()/qgemv/opencl ($QGEMV_OPENCL_CACHE) or
// os.UserCacheDir()/qgemv/cuda ($QGEMV_CUDA_CACHE). An OpenCL device of
// CPU type (PoCL) is never chosen by default.
//
// Selection reads the probe, the options, QGEMV_BACKEND and the cached GPU
// calibrations; tests set each to force every path.
package dispatch

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/qgemv/qgemv/cpu"
	"github.com/qgemv/qgemv/internal/errs"
	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/internal/mat"
	"github.com/qgemv/qgemv/layout"
)

// EnvBackend is the environment variable that overrides backend selection
// when Options.Backend is empty.
const EnvBackend = "QGEMV_BACKEND"

// Options controls selection.
type Options struct {
	// Backend forces a backend by name ("cpu", "cpu-generic", ...). Empty
	// means: the environment variable QGEMV_BACKEND if set, else the best.
	Backend string
	// Threads bounds the CPU goroutines per multiply; 0 means GOMAXPROCS.
	Threads int
	// HugePages copies matrices into huge-page memory at Load (CPU).
	HugePages bool
}

// Matrix is a matrix loaded onto a backend (the backends' Mat types are
// this interface too).
type Matrix = mat.Matrix

// Backend runs multiplies.
type Backend interface {
	// Name is the backend's dispatch name, e.g. "cpu-generic".
	Name() string
	// Load validates m and prepares it for this backend; a format the
	// backend does not implement is an error wrapping
	// ErrFormatNotImplemented.
	Load(m layout.Matrix) (Matrix, error)
	// QuantizeA8 quantizes activations exactly as layout.QuantizeA8 does,
	// using the backend's parallelism.
	QuantizeA8(xq []int8, xs []float32, x []float32) error
	// Close releases the backend's resources.
	Close() error
}

// OwnedLoader is implemented by backends that can take a Bits or
// layout/ggml matrix's codes in huge-page memory (hugemem.Alloc) without
// copying them: the CPU backend. A model loader imports straight into
// such memory and hands it over; LoadOwned takes the block in every case
// (the matrix frees it on Close; a failed load frees it at once).
type OwnedLoader interface {
	LoadOwned(m layout.Matrix, own *hugemem.Block) (Matrix, error)
}

// Chainer is implemented by backends that run a MatVANS chain on their
// device: v_i = round_half_even(alpha[i] * W_i v_{i-1}) to int8
// (layout.Requantize) from v0 through every matrix (int8 formats loaded
// on this backend, shapes already checked), the last v into dst, with
// one copy in and one out. Other backends' chains are run by their
// caller with MulI32 and layout.Requantize.
type Chainer interface {
	Chain(dst []int8, mats []Matrix, alpha []float32, v0 []int8) error
}

// Candidate is one backend the probe knows of.
type Candidate struct {
	Name      string // dispatch name
	Available bool   // usable on this machine and compiled in
	Detail    string // features required, or why it is unavailable
}

// Report describes the machine and the selection.
type Report struct {
	CPU        string      // brand string
	Cores      int         // physical cores
	Threads    int         // logical processors
	L3         int64       // last-level cache bytes (0: unknown)
	Features   string      // CPU features relevant to the kernels
	Candidates []Candidate // every backend known, best first
	Chosen     string      // the selected backend's name
	Reason     string      // why it was selected
	Notes      []string    // settings that changed the choice, or were ignored
}

// String formats the report for people.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cpu:       %s (%d cores, %d threads)\n", r.CPU, r.Cores, r.Threads)
	fmt.Fprintf(&b, "features:  %s\n", r.Features)
	b.WriteString("backends:\n")
	for _, c := range r.Candidates {
		mark := " "
		if c.Name == r.Chosen {
			mark = "*"
		}
		avail := "available"
		if !c.Available {
			avail = "unavailable"
		}
		fmt.Fprintf(&b, "  %s %-18s %-11s %s\n", mark, c.Name, avail, c.Detail)
	}
	if r.Chosen != "" { // Probe selects none
		fmt.Fprintf(&b, "chosen:    %s (%s)\n", r.Chosen, r.Reason)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note:      %s\n", n)
	}
	return b.String()
}

// Probe lists the backends of this machine without selecting one.
func Probe() Report {
	brand, cores, threads := cpu.Model()
	r := Report{CPU: brand, Cores: cores, Threads: threads, L3: cpu.L3(), Features: cpu.Features()}
	disabled, unknown := cpu.Disabled()
	for _, isa := range cpu.ISAs() {
		c := Candidate{Name: "cpu-" + string(isa), Available: cpu.Supported(isa)}
		if req := cpu.Requires(isa); len(req) > 0 {
			c.Detail = "needs " + strings.Join(req, ",")
		} else {
			c.Detail = "pure Go"
		}
		if slices.Contains(disabled, isa) {
			c.Detail += "; skipped by " + cpu.EnvDisable
		}
		r.Candidates = append(r.Candidates, c)
	}
	if len(unknown) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %q named no kernel set it can skip (%s); ignored", cpu.EnvDisable, unknown, isaNames()))
	}
	r.Candidates = append(r.Candidates, gpuCandidates()...)
	return r
}

// ErrUnknownBackend is wrapped by the error of opening a backend name
// dispatch does not know (errs.ErrUnknownBackend, qgemv.ErrUnknownBackend).
var ErrUnknownBackend = errs.ErrUnknownBackend

// ErrFormatNotImplemented is wrapped by Backend.Load's error when the
// backend has no kernels for the matrix's format
// (errs.ErrFormatNotImplemented, qgemv.ErrFormatNotImplemented); test for
// it with errors.Is.
var ErrFormatNotImplemented = errs.ErrFormatNotImplemented

// Open selects and opens a backend.
func Open(opts Options) (Backend, Report, error) {
	if opts.Threads < 0 { // every backend's host work uses it: refused whichever opens
		return nil, Report{}, fmt.Errorf("dispatch: %d threads: want 0 (GOMAXPROCS) or more", opts.Threads)
	}
	r := Probe()
	name, reason := opts.Backend, "forced by option"
	if name == "" {
		if env := os.Getenv(EnvBackend); env != "" {
			name, reason = env, "forced by "+EnvBackend
		}
	}
	forced := name != ""
	if !forced {
		name, reason = "cpu", "best available"
		if g, why := preferredGPU(opts); g != "" {
			name, reason = g, why
		}
	}
	b, err := open(name, opts)
	if err != nil && !forced && name != "cpu" {
		// The calibration preferred a GPU that does not open now (out of
		// memory, say): the CPU, saying why, rather than no backend.
		var cerr error
		if b, cerr = open("cpu", opts); cerr == nil {
			reason = fmt.Sprintf("best available (%s preferred by calibration, but opening it failed: %v)", name, err)
			err = nil
		}
	}
	if err != nil {
		return nil, r, err
	}
	r.Chosen, r.Reason = b.Name(), reason
	return b, r, nil
}

func open(name string, opts Options) (Backend, error) {
	switch {
	case name == "cpu":
		return newCPU(cpu.Config{Threads: opts.Threads, HugePages: opts.HugePages})
	case strings.HasPrefix(name, "cpu-"):
		isa := cpu.ISA(strings.TrimPrefix(name, "cpu-"))
		if !slices.Contains(cpu.ISAs(), isa) { // "cpu-" included: an empty set is not "the best"
			break
		}
		return newCPU(cpu.Config{ISA: isa, Threads: opts.Threads, HugePages: opts.HugePages})
	case baseName(name) == "opencl" || baseName(name) == "cuda":
		return openGPU(name, opts)
	}
	return nil, fmt.Errorf("dispatch: %w %q (known: cpu, cpu-<isa> with isa in %v, opencl, cuda)", ErrUnknownBackend, name, cpu.ISAs())
}

type cpuBackend struct{ *cpu.Backend }

func newCPU(cfg cpu.Config) (Backend, error) {
	b, err := cpu.New(cfg)
	if err != nil {
		return nil, err
	}
	return cpuBackend{b}, nil
}

func (c cpuBackend) Name() string { return "cpu-" + string(c.ISA()) }

func (c cpuBackend) Load(m layout.Matrix) (Matrix, error) {
	mx, err := c.Backend.LoadMatrix(m)
	if errors.Is(err, ErrFormatNotImplemented) {
		return nil, fmt.Errorf("dispatch: backend %s: %w", c.Name(), err)
	}
	if err != nil {
		return nil, err
	}
	return mx, nil
}

// LoadOwned is Load of a Bits or ggml matrix whose codes are own's
// memory, handed over (cpu.Backend.LoadOwned).
func (c cpuBackend) LoadOwned(m layout.Matrix, own *hugemem.Block) (Matrix, error) {
	return c.Backend.LoadOwned(m, own)
}

// isaNames lists the CPU kernel sets QGEMV_CPU_DISABLE can skip (all
// but the generic fallback) for messages.
func isaNames() string {
	var names []string
	for _, isa := range cpu.ISAs() {
		if isa != cpu.Generic {
			names = append(names, string(isa))
		}
	}
	return strings.Join(names, ", ")
}
