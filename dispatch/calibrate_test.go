package dispatch

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qgemv/qgemv/layout"
)

// fakeBackend multiplies in a fixed time on the fake clock (and computes
// nothing), counting its multiplies.
type fakeBackend struct {
	name  string
	delay time.Duration
	muls  *atomic.Int64
	load  error // returned by Load
}

func (f fakeBackend) Name() string { return f.name }
func (f fakeBackend) Close() error { return nil }
func (f fakeBackend) QuantizeA8(xq []int8, xs []float32, x []float32) error {
	return layout.QuantizeA8(xq, xs, x)
}
func (f fakeBackend) Load(m layout.Matrix) (Matrix, error) {
	if f.load != nil {
		return nil, f.load
	}
	return fakeMatrix{f}, nil
}

type fakeMatrix struct{ b fakeBackend }

// fakeNow is the fake clock fakeCalibrator installs as clock: a fake
// multiply advances it by its delay instead of sleeping, so the
// calibrations the tests assert on are exact, whatever the load on the
// machine.
var fakeNow atomic.Int64

func (m fakeMatrix) mul() error {
	m.b.muls.Add(1)
	fakeNow.Add(int64(m.b.delay))
	return nil
}
func (m fakeMatrix) MulF32(dst, x []float32, batch int) error               { return m.mul() }
func (m fakeMatrix) MulF16(dst []float32, x []layout.FP16, batch int) error { return m.mul() }
func (m fakeMatrix) MulA8(dst, x []float32, batch int) error                { return m.mul() }
func (m fakeMatrix) MulI8(dst []float32, xq []int8, xs []float32, batch int) error {
	return m.mul()
}
func (m fakeMatrix) MulI32(dst []int32, x []int8, batch int) error { return m.mul() }
func (m fakeMatrix) Kernel() string                                { return m.b.name }
func (m fakeMatrix) Close() error                                  { return nil }

// fakeCalibrator calibrates a fake device taking gpu per multiply against
// a fake CPU taking cpu, caching in dir; gpuMuls and cpuMuls count the
// multiplies.
func fakeCalibrator(t *testing.T, key, dir string, gpu, cpu time.Duration) (c calibrator, gpuMuls, cpuMuls *atomic.Int64) {
	t.Helper()
	clock = func() time.Time { return time.Unix(0, fakeNow.Load()) }
	t.Cleanup(func() { clock = time.Now })
	gpuMuls, cpuMuls = new(atomic.Int64), new(atomic.Int64)
	c = calibrator{
		Key: key, Device: "FakeGPU 9000", Dir: dir,
		Open: func() (Backend, error) { return fakeBackend{name: "fakegpu", delay: gpu, muls: gpuMuls}, nil },
		CPU:  func() (Backend, error) { return fakeBackend{name: "fakecpu", delay: cpu, muls: cpuMuls}, nil },
	}
	return c, gpuMuls, cpuMuls
}

func TestCalibrationPrefersFasterDevice(t *testing.T) {
	for _, tc := range []struct {
		name     string
		gpu, cpu time.Duration
		want     bool
	}{
		{"faster", time.Millisecond, 8 * time.Millisecond, true},
		{"slower", 8 * time.Millisecond, time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, gm, cm := fakeCalibrator(t, "fake\x00"+tc.name+"\x00"+t.TempDir(), t.TempDir(), tc.gpu, tc.cpu)
			ok, why := c.preferred()
			if ok != tc.want {
				t.Fatalf("preferred = %v (%q), want %v", ok, why, tc.want)
			}
			if ok && (!strings.HasPrefix(why, "calibration: ") || !strings.Contains(why, "FakeGPU 9000")) {
				t.Errorf("reason %q: want the calibration and the device named", why)
			}
			if !ok && why != "" {
				t.Errorf("not preferred, yet reason %q", why)
			}
			if gm.Load() != calibRuns || cm.Load() != calibRuns {
				t.Errorf("%d device and %d CPU multiplies, want %d each", gm.Load(), cm.Load(), calibRuns)
			}
			// The process memo answers again without measuring.
			if ok2, _ := c.preferred(); ok2 != ok || gm.Load() != calibRuns {
				t.Errorf("second preferred: %v after %d device multiplies, want %v without measuring", ok2, gm.Load(), ok)
			}
		})
	}
}

func TestCalibrationCache(t *testing.T) {
	dir := t.TempDir()
	c, gm, cm := fakeCalibrator(t, "fake\x00cache", dir, time.Millisecond, 4*time.Millisecond)
	first, err := c.calibrate()
	if err != nil {
		t.Fatal(err)
	}
	if !first.valid(c.Key) || first.GPUSeconds >= first.CPUSeconds || first.GPUSeconds < 0.001 {
		t.Fatalf("calibration %+v: want a valid one with the device faster, at least 1 ms", first)
	}
	data, err := os.ReadFile(c.path())
	if err != nil {
		t.Fatalf("cache not written: %v", err)
	}
	var onDisk calibration
	if err := json.Unmarshal(data, &onDisk); err != nil || onDisk != first {
		t.Fatalf("cache holds %+v (%v), want %+v", onDisk, err, first)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("cache directory holds %d entries, want the one file (no temporary left)", len(ents))
	}

	// Cache hit: no multiply at all, the same result.
	gm.Store(0)
	cm.Store(0)
	again, err := c.calibrate()
	if err != nil || again != first || gm.Load() != 0 || cm.Load() != 0 {
		t.Errorf("cache hit: %+v, %v after %d+%d multiplies; want %+v without multiplying", again, err, gm.Load(), cm.Load(), first)
	}

	// Another key (another driver) with the same file measures again.
	other := c
	other.Key = "fake\x00cache\x00new driver"
	if err := os.WriteFile(other.path(), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := other.calibrate(); err != nil || r.Key != other.Key || gm.Load() != calibRuns {
		t.Errorf("stale key: %+v, %v after %d device multiplies; want a new measurement", r, err, gm.Load())
	}

	// A corrupt or incomplete cache file is measured again and replaced.
	for _, bad := range []string{"{not json", `{"Key":"fake\u0000cache","GPUSeconds":0,"CPUSeconds":1}`, ""} {
		if err := os.WriteFile(c.path(), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		gm.Store(0)
		r, err := c.calibrate()
		if err != nil || !r.valid(c.Key) || gm.Load() != calibRuns {
			t.Errorf("cache %q: %+v, %v after %d device multiplies; want a new measurement", bad, r, err, gm.Load())
		}
		data, _ := os.ReadFile(c.path())
		var fixed calibration
		if json.Unmarshal(data, &fixed) != nil || !fixed.valid(c.Key) {
			t.Errorf("cache %q not replaced: now %q", bad, data)
		}
	}
}

func TestCalibrationWithoutCacheDir(t *testing.T) {
	c, gm, _ := fakeCalibrator(t, "fake\x00nodir", "", time.Millisecond, 2*time.Millisecond)
	if c.path() != "" {
		t.Fatalf("path %q without a directory", c.path())
	}
	for i := 1; i <= 2; i++ {
		if _, err := c.calibrate(); err != nil {
			t.Fatal(err)
		}
		if gm.Load() != int64(i*calibRuns) {
			t.Errorf("run %d: %d device multiplies, want %d (nothing cached)", i, gm.Load(), i*calibRuns)
		}
	}
}

func TestCalibrationErrors(t *testing.T) {
	boom := errors.New("device lost")
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		mod  func(*calibrator)
	}{
		{"open", func(c *calibrator) { c.Open = func() (Backend, error) { return nil, boom } }},
		{"load", func(c *calibrator) {
			c.Open = func() (Backend, error) { return fakeBackend{name: "x", muls: new(atomic.Int64), load: boom}, nil }
		}},
		{"cpu", func(c *calibrator) { c.CPU = func() (Backend, error) { return nil, boom } }},
		{"no open function", func(c *calibrator) { c.Open = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := fakeCalibrator(t, "fake\x00err\x00"+tc.name, dir, time.Microsecond, time.Hour)
			tc.mod(&c)
			if _, err := c.calibrate(); err == nil {
				t.Error("no error")
			} else if tc.name != "no open function" && !errors.Is(err, boom) {
				t.Errorf("error %v does not wrap the cause", err)
			}
			if ok, why := c.preferred(); ok {
				t.Errorf("a failed calibration preferred the device: %s", why)
			}
			if _, err := os.Stat(c.path()); !os.IsNotExist(err) {
				t.Errorf("a failed calibration was cached (%v)", err)
			}
		})
	}
}

func TestCalibrationDir(t *testing.T) {
	t.Setenv(EnvCUDACache, "/some/where")
	if d := calibrationDir(EnvCUDACache, "cuda"); d != "/some/where" {
		t.Errorf("with %s set: %q", EnvCUDACache, d)
	}
	t.Setenv(EnvCUDACache, "")
	if c, err := os.UserCacheDir(); err == nil {
		if d := calibrationDir(EnvCUDACache, "cuda"); !strings.HasPrefix(d, c) || !strings.HasSuffix(d, "qgemv/cuda") {
			t.Errorf("default %q: want under %s, ending qgemv/cuda", d, c)
		}
	}
}
