//go:build opencl

package dispatch_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/dispatch"
	"github.com/qgemv/qgemv/internal/conformance"
	"github.com/qgemv/qgemv/opencl"
)

// openclOrSkip skips when no OpenCL device exists, unless
// QGEMV_REQUIRE_OPENCL=1 (CI), which makes that a failure.
func openclOrSkip(t *testing.T) []opencl.DeviceInfo {
	t.Helper()
	ds, err := opencl.Devices()
	if err != nil {
		if os.Getenv("QGEMV_REQUIRE_OPENCL") == "1" {
			t.Fatalf("OpenCL required (QGEMV_REQUIRE_OPENCL=1): %v", err)
		}
		t.Skipf("no OpenCL device (set QGEMV_REQUIRE_OPENCL=1 to fail instead): %v", err)
	}
	return ds
}

func TestConformanceOpenCL(t *testing.T) {
	openclOrSkip(t)
	be, r, err := dispatch.Open(dispatch.Options{Backend: "opencl"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if r.Chosen != "opencl" {
		t.Fatalf("chosen %q, want opencl", r.Chosen)
	}
	conformance.Run(t, be, conformance.Options{Short: testing.Short()})
}

func TestProbeOpenCL(t *testing.T) {
	devs := openclOrSkip(t)
	r := dispatch.Probe()
	n := 0
	for _, c := range r.Candidates {
		if c.Name == "opencl" || strings.HasPrefix(c.Name, "opencl:") {
			n++
			if !c.Available || c.Detail == "" {
				t.Errorf("candidate %+v: want available with a detail", c)
			}
		}
	}
	if n != len(devs) {
		t.Errorf("%d OpenCL candidates, want one per device (%d)", n, len(devs))
	}
	// A CPU-type device is never chosen by default.
	allCPU := true
	for _, d := range devs {
		allCPU = allCPU && d.Type != "gpu"
	}
	if allCPU && os.Getenv(dispatch.EnvBackend) == "" {
		be, r, err := dispatch.Open(dispatch.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		if strings.HasPrefix(r.Chosen, "opencl") {
			t.Errorf("CPU-type OpenCL device chosen by default: %s", r.Reason)
		}
	}
	// Every spelling of a device opens under the name its candidate line
	// has (opencl:0 used to be reported as "opencl:0" next to a candidate
	// named "opencl").
	names := map[string]bool{}
	for _, c := range r.Candidates {
		names[c.Name] = true
	}
	for i := range devs {
		for _, spell := range []string{fmt.Sprintf("opencl:%d", i), fmt.Sprintf("opencl:0%d", i)} {
			be, rr, err := dispatch.Open(dispatch.Options{Backend: spell})
			if err != nil {
				t.Errorf("Open(%q): %v", spell, err)
				continue
			}
			if !names[rr.Chosen] || be.Name() != rr.Chosen {
				t.Errorf("Open(%q): chosen %q, backend %q; candidates %v", spell, rr.Chosen, be.Name(), names)
			}
			be.Close()
		}
	}
	for _, bad := range []string{"opencl:x", "opencl:999", "opencl:-1"} {
		if _, _, err := dispatch.Open(dispatch.Options{Backend: bad}); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

// TestMissingICDLoader runs this test binary again with the ICD loader
// pointed at a file that does not exist (QGEMV_OPENCL_LIB; the loader is
// opened once per process): the binary starts, the OpenCL candidate is
// unavailable with an error naming the loader, the default backend is a
// CPU one, and asking for OpenCL is that error.
func TestMissingICDLoader(t *testing.T) {
	if os.Getenv("QGEMV_TEST_NO_ICD") == "1" {
		r := dispatch.Probe()
		for _, c := range r.Candidates {
			if c.Name == "opencl" && (c.Available || !strings.Contains(c.Detail, "ICD loader")) {
				t.Fatalf("candidate %+v: want unavailable, naming the ICD loader", c)
			}
		}
		be, r, err := dispatch.Open(dispatch.Options{})
		if err != nil {
			t.Fatal(err)
		}
		be.Close()
		if !strings.HasPrefix(r.Chosen, "cpu") {
			t.Fatalf("chosen %q without an ICD loader, want a CPU backend", r.Chosen)
		}
		if _, _, err := dispatch.Open(dispatch.Options{Backend: "opencl"}); err == nil || !strings.Contains(err.Error(), "libOpenCL.so.1") {
			t.Fatalf("opencl without a loader: %v", err)
		}
		return
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the ICD loader is linked, not opened, off amd64")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingICDLoader$", "-test.v")
	cmd.Env = append(os.Environ(), "QGEMV_TEST_NO_ICD=1", "QGEMV_OPENCL_LIB="+filepath.Join(t.TempDir(), "libOpenCL.so.1"), dispatch.EnvBackend+"=")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestMissingICDLoader") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
