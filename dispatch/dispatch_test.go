package dispatch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/cpu"
	"github.com/qgemv/qgemv/layout"
)

func TestOpenEveryCPUPath(t *testing.T) {
	for _, isa := range cpu.ISAs() {
		name := "cpu-" + string(isa)
		b, r, err := Open(Options{Backend: name})
		if !cpu.Supported(isa) {
			if err == nil {
				t.Errorf("%s: opened on a CPU that cannot run it", name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b.Name() != name || r.Chosen != name || r.Reason != "forced by option" {
			t.Errorf("%s: got backend %s, report chose %s (%s)", name, b.Name(), r.Chosen, r.Reason)
		}
		if !strings.Contains(r.String(), "* "+name) {
			t.Errorf("report does not mark %s:\n%s", name, r)
		}
	}
}

func TestEnvironmentOverride(t *testing.T) {
	t.Setenv(EnvBackend, "cpu-generic")
	b, r, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "cpu-generic" || r.Reason != "forced by "+EnvBackend {
		t.Errorf("env override ignored: %s (%s)", b.Name(), r.Reason)
	}
	// The option wins over the environment.
	t.Setenv(EnvBackend, "no-such-backend")
	if b, _, err = Open(Options{Backend: "cpu-generic"}); err != nil || b.Name() != "cpu-generic" {
		t.Errorf("option did not win over env: %v", err)
	}
	if _, _, err = Open(Options{}); !errors.Is(err, ErrUnknownBackend) {
		t.Errorf("bad env backend: got %v, want ErrUnknownBackend", err)
	}
}

// TestDefaultIsBestCPU: with nothing forced, the default is the CPU's best
// kernel set, unless a compiled-in GPU driver's calibration prefers its
// device (then the reason says so).
func TestDefaultIsBestCPU(t *testing.T) {
	t.Setenv(EnvBackend, "")
	b, r, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t.Logf("default: %s (%s)", r.Chosen, r.Reason)
	want := "cpu-" + string(cpu.Best())
	switch base := baseName(b.Name()); {
	case b.Name() == want:
		if r.Reason != "best available" {
			t.Errorf("default %s: reason %q, want \"best available\"", want, r.Reason)
		}
	case findDriver(base) != nil:
		if !strings.HasPrefix(r.Reason, "calibration") {
			t.Errorf("default chose GPU backend %s without a calibration: reason %q", b.Name(), r.Reason)
		}
	default:
		t.Errorf("default chose %s, want %s or a compiled-in GPU backend", b.Name(), want)
	}
	if r.Chosen != b.Name() {
		t.Errorf("report chose %s, backend is %s", r.Chosen, b.Name())
	}
	if r.CPU == "" || r.Features == "" || len(r.Candidates) == 0 {
		t.Errorf("incomplete report: %+v", r)
	}
}

// TestUnavailableBackends: unknown names and GPU backends not compiled into
// this binary fail to open, naming the problem.
func TestUnavailableBackends(t *testing.T) {
	for _, name := range []string{"tpu", "cpu-avx9000", "opencl-x", "cuda0"} {
		if _, _, err := Open(Options{Backend: name}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, name := range []string{"opencl", "cuda"} {
		if findDriver(name) != nil {
			continue // compiled in: its own tests open it
		}
		_, _, err := Open(Options{Backend: name})
		if err == nil || !strings.Contains(err.Error(), "not compiled") {
			t.Errorf("%s (not compiled in): got %v, want a \"not compiled\" error", name, err)
		}
		_, _, err = Open(Options{Backend: name + ":1"})
		if err == nil || !strings.Contains(err.Error(), "not compiled") {
			t.Errorf("%s:1 (not compiled in): got %v, want a \"not compiled\" error", name, err)
		}
	}
}

// otherFormat is a format no backend implements: a valid Q4G128 matrix
// under an id nobody registered.
type otherFormat struct{ *layout.Q4G128 }

func (otherFormat) Name() string            { return "otherFormat" }
func (otherFormat) Spec() layout.FormatSpec { return layout.FormatSpec{Format: 99} }

func TestFormatNotImplemented(t *testing.T) {
	b, _, err := Open(Options{Backend: "cpu-generic"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	q, err := layout.RandomQ4G128(20, 30, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Load(otherFormat{q})
	if !errors.Is(err, ErrFormatNotImplemented) || !strings.Contains(err.Error(), "otherFormat") || !strings.Contains(err.Error(), "cpu-generic") {
		t.Errorf("unknown format on the CPU: got %v, want ErrFormatNotImplemented naming the format and backend", err)
	}
	// A format the CPU implements, but invalid: an error, not "not implemented".
	if _, err := b.Load(&layout.Q4G128{Rows: 128, Cols: 128}); err == nil || errors.Is(err, ErrFormatNotImplemented) {
		t.Errorf("invalid Q4G128: got %v, want a validation error", err)
	}
}

// TestOpenFallsBackAndNames: a GPU the calibration prefers but that fails
// to open leaves the CPU chosen, saying why, unless it was forced; CPU
// backend names that name no compiled kernel set ("cpu-foo", "cpu-") are
// ErrUnknownBackend (found by review: Open failed outright, "cpu-foo" was
// another error and "cpu-" opened the best set).
func TestOpenFallsBackAndNames(t *testing.T) {
	t.Setenv(EnvBackend, "")
	saved := gpuDrivers
	defer func() { gpuDrivers = saved }()
	gpuDrivers = []driver{{
		Name:      "cuda",
		Probe:     func() []Candidate { return nil },
		Open:      func(string, Options) (Backend, error) { return nil, errors.New("cuda: out of memory") },
		Preferred: func(Options) (bool, string) { return true, "calibration: fake" },
	}}
	be, r, err := Open(Options{})
	if err != nil || !strings.HasPrefix(be.Name(), "cpu-") || !strings.Contains(r.Reason, "out of memory") {
		t.Fatalf("preferred GPU failing to open: %v, %+v", err, r)
	}
	be.Close()
	if _, _, err := Open(Options{Backend: "cuda"}); err == nil {
		t.Error("a forced GPU that fails to open: no error")
	}
	for _, name := range []string{"cpu-foo", "cpu-"} {
		if _, _, err := Open(Options{Backend: name}); !errors.Is(err, ErrUnknownBackend) {
			t.Errorf("%q: %v, want ErrUnknownBackend", name, err)
		}
	}
}

// TestCalibrationKeyNamesCPUReference: calibrations measured against
// different CPU references (threads, huge pages) or by another
// calibration version do not share a cache entry.
func TestCalibrationKeyNamesCPUReference(t *testing.T) {
	a, b, c := cpuReferenceKey(Options{}), cpuReferenceKey(Options{Threads: 1}), cpuReferenceKey(Options{HugePages: true})
	if a == b || a == c || b == c {
		t.Errorf("keys not distinct: %q %q %q", a, b, c)
	}
	if !strings.HasPrefix(a, fmt.Sprintf("v%d\x00", calibVersion)) {
		t.Errorf("key %q lacks the calibration version", a)
	}
}

// TestCPUDisable: QGEMV_CPU_DISABLE matches kernel sets in any case, with
// or without "cpu-", marks them in the report, and reports names that are
// no kernel set instead of ignoring them silently (it was case-sensitive,
// and a typo disabled nothing without a word).
func TestCPUDisable(t *testing.T) {
	best := cpu.Best()
	if best == cpu.Generic {
		t.Skip("no SIMD kernel set here")
	}
	t.Setenv(cpu.EnvDisable, " CPU-"+strings.ToUpper(string(best))+",avx513, generic")
	if got := cpu.Best(); got == best {
		t.Errorf("Best() = %s with %s disabled", got, best)
	}
	sets, unknown := cpu.Disabled()
	if len(sets) != 1 || sets[0] != best || len(unknown) != 2 || unknown[0] != "avx513" || unknown[1] != "generic" {
		t.Errorf("Disabled() = %v, %q", sets, unknown)
	}
	r := Probe()
	s := r.String()
	if !strings.Contains(s, "cpu-"+string(best)) || !strings.Contains(s, "skipped by "+cpu.EnvDisable) {
		t.Errorf("report does not mark %s as skipped:\n%s", best, s)
	}
	if strings.Contains(s, "pure Go; skipped") {
		t.Errorf("report marks cpu-generic, the fallback, as skipped:\n%s", s)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], `"avx513"`) || !strings.Contains(s, "note:") {
		t.Errorf("report does not name the unknown set: %q\n%s", r.Notes, s)
	}
	t.Setenv(cpu.EnvDisable, "")
	if got := cpu.Best(); got != best {
		t.Errorf("Best() = %s with nothing disabled, want %s", got, best)
	}
	// "amx" is no kernel set: it turns the AMX kernels off, in any case,
	// and is neither skipped nor reported unknown.
	for v, want := range map[string]bool{" AMX ": true, "avx2,amx": true, "": false, "amx2": false} {
		t.Setenv(cpu.EnvDisable, v)
		if got := cpu.AMXDisabled(); got != want {
			t.Errorf("%s=%q: AMXDisabled() = %v", cpu.EnvDisable, v, got)
		}
		if sets, unknown := cpu.Disabled(); want && len(unknown) > 0 {
			t.Errorf("%s=%q: Disabled() = %v, %q", cpu.EnvDisable, v, sets, unknown)
		}
	}
}

// TestOpenNegativeThreads: a negative thread count is refused whichever
// backend would open (OpenCL accepted it).
func TestOpenNegativeThreads(t *testing.T) {
	for _, name := range []string{"", "cpu", "opencl", "cuda"} {
		if b, _, err := Open(Options{Backend: name, Threads: -1}); err == nil {
			b.Close()
			t.Errorf("Open(%q, Threads -1): no error", name)
		}
	}
}
