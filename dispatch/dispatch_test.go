package dispatch

import (
	"errors"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/cpu"
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

func TestDefaultIsBestCPU(t *testing.T) {
	t.Setenv(EnvBackend, "")
	b, r, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "cpu-" + string(cpu.Best()); b.Name() != want {
		t.Errorf("default chose %s, want %s", b.Name(), want)
	}
	if r.CPU == "" || r.Features == "" || len(r.Candidates) == 0 {
		t.Errorf("incomplete report: %+v", r)
	}
}

func TestUnavailableBackends(t *testing.T) {
	for _, name := range []string{"opencl", "cuda", "tpu", "cpu-avx9000"} {
		if _, _, err := Open(Options{Backend: name}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
