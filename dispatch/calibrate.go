package dispatch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/qgemv/qgemv/cpu"
	"github.com/qgemv/qgemv/layout"
)

// Calibration: before a GPU driver's device is used without being asked
// for, one Q4G128 calibSize x calibSize multiply with int8 activations
// (A8, the main job's path) is timed on the device and on the CPU backend,
// both through the Backend interface; the device is preferred only if it
// is faster. The result is cached on disk per device and driver (a JSON
// file named by a hash of the key, written atomically) and in memory per
// process, so a machine calibrates once per driver update.

// EnvCUDACache overrides the directory of the CUDA calibration cache
// (default os.UserCacheDir()/qgemv/cuda). OpenCL calibrations live with
// the OpenCL program cache (opencl.EnvCache, QGEMV_OPENCL_CACHE).
const EnvCUDACache = "QGEMV_CUDA_CACHE"

// calibSize is the calibration matrix's rows and columns.
const calibSize = 4096

// calibRuns is how many multiplies each backend runs; the first is a
// warm-up, the fastest of the others counts.
const calibRuns = 6

// calibration is the (cached) result of one device's calibration.
type calibration struct {
	Key        string  // the calibrator's key: device and driver
	Device     string  // the device's name, for people
	GPUSeconds float64 // one Q4G128 4096x4096 A8 multiply on the device
	CPUSeconds float64 // the same on the CPU backend
}

// valid reports whether c is a complete calibration for key.
func (c calibration) valid(key string) bool {
	ok := func(s float64) bool { return s > 0 && !math.IsInf(s, 0) && !math.IsNaN(s) }
	return c.Key == key && ok(c.GPUSeconds) && ok(c.CPUSeconds)
}

// calibrator describes one device to calibrate.
type calibrator struct {
	// Key identifies the device and its driver (name, driver version,
	// ...): a cached result is used only for the same key.
	Key string
	// Device names the device in the reason given for preferring it.
	Device string
	// Dir is the cache directory; "" means no disk cache.
	Dir string
	// Open opens the device's backend.
	Open func() (Backend, error)
	// CPU opens the backend the device must beat.
	CPU func() (Backend, error)
}

// calibVersion is part of every calibration key: raise it when a
// release changes the CPU or GPU kernels' speed enough to change the
// verdict, so that caches written by older versions are measured again.
const calibVersion = 2

// cpuReferenceKey identifies the CPU reference a calibration is measured
// against (its kernel set, after QGEMV_CPU_DISABLE, its goroutines and
// memory), the CPU model and calibVersion: a calibration cached for
// another reference (Open(WithThreads(1)), say) is not reused.
func cpuReferenceKey(opts Options) string {
	threads := opts.Threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	brand, _, _ := cpu.Model()
	return fmt.Sprintf("v%d\x00%s\x00cpu-%s\x00%d threads\x00huge pages %v", calibVersion, brand, cpu.Best(), threads, opts.HugePages)
}

// cpuReference returns a calibrator.CPU opening the CPU backend as Open
// would by default with opts.
func cpuReference(opts Options) func() (Backend, error) {
	return func() (Backend, error) {
		return newCPU(cpu.Config{Threads: opts.Threads, HugePages: opts.HugePages})
	}
}

// calibrationDir returns $env if set, else os.UserCacheDir()/qgemv/sub, or
// "" when neither is known.
func calibrationDir(env, sub string) string {
	if dir := os.Getenv(env); dir != "" {
		return dir
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(c, "qgemv", sub)
}

// path returns the cache file of c, or "" without a cache directory.
func (c calibrator) path() string {
	if c.Dir == "" {
		return ""
	}
	h := sha256.Sum256([]byte(c.Key))
	return filepath.Join(c.Dir, "calibration-"+hex.EncodeToString(h[:8])+".json")
}

// calibrations memoizes calibrate per cache file and key for the
// process; calibMu also keeps two calibrations of the process from timing
// each other (lockCalibration does it across processes).
var (
	calibMu      sync.Mutex
	calibrations = map[string]calibResult{}
)

type calibResult struct {
	c   calibration
	err error
}

// preferred reports whether the device is faster than the CPU, with the
// reason to give when it is. A failed calibration prefers the CPU.
func (c calibrator) preferred() (bool, string) {
	calibMu.Lock()
	memo := c.Dir + "\x00" + c.Key
	r, ok := calibrations[memo]
	if !ok {
		r.c, r.err = c.calibrate()
		calibrations[memo] = r
	}
	calibMu.Unlock()
	if r.err != nil || r.c.GPUSeconds >= r.c.CPUSeconds {
		return false, ""
	}
	return true, fmt.Sprintf("calibration: Q4G128 %dx%d A8 takes %.3g ms on %s, %.3g ms on the CPU",
		calibSize, calibSize, 1e3*r.c.GPUSeconds, c.Device, 1e3*r.c.CPUSeconds)
}

// calibrate returns the cached calibration for c's key, or measures one
// and caches it. A missing, unreadable or corrupt cache file, or one for
// another key, means measuring again; failing to write the cache is not
// an error.
//
// Measuring holds a lock shared by the machine's processes
// (lockCalibration: a flock on a file in os.TempDir, on Linux, macOS and
// the BSDs; elsewhere no lock), and the cache is read again once it is
// held: a process that waited for another's calibration of the same
// device uses its result.
func (c calibrator) calibrate() (calibration, error) {
	path := c.path()
	if cached, ok := c.cached(path); ok {
		return cached, nil
	}
	unlock := lockCalibration()
	defer unlock()
	if cached, ok := c.cached(path); ok {
		return cached, nil
	}
	res, err := c.measure()
	if err != nil {
		return calibration{}, err
	}
	if path != "" {
		writeCalibration(path, res) // best effort: the next process measures again
	}
	return res, nil
}

// cached returns the valid calibration for c's key in the file path
// ("" for none).
func (c calibrator) cached(path string) (calibration, bool) {
	if path == "" {
		return calibration{}, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return calibration{}, false
	}
	var cached calibration
	if json.Unmarshal(data, &cached) != nil || !cached.valid(c.Key) {
		return calibration{}, false
	}
	return cached, true
}

// calibLockPath is the file lockCalibration locks; calibLockWait is how
// long it waits for another process's calibration (a few seconds each).
var (
	calibLockPath = filepath.Join(os.TempDir(), "qgemv-calibration.lock")
	calibLockWait = time.Minute
)

// measure times the calibration multiply on the device and on the CPU.
func (c calibrator) measure() (calibration, error) {
	if c.Open == nil || c.CPU == nil {
		return calibration{}, errors.New("dispatch: calibration needs the device's and the CPU's open functions")
	}
	m, err := layout.RandomQ4G128(calibSize, calibSize, 1)
	if err != nil {
		return calibration{}, err
	}
	x := make([]float32, calibSize)
	rng := layout.NewRand(2)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	res := calibration{Key: c.Key, Device: c.Device}
	if res.GPUSeconds, err = timeA8(c.Open, m, x); err != nil {
		return calibration{}, fmt.Errorf("dispatch: calibrating %s: %w", c.Device, err)
	}
	if res.CPUSeconds, err = timeA8(c.CPU, m, x); err != nil {
		return calibration{}, fmt.Errorf("dispatch: calibrating the CPU reference for %s: %w", c.Device, err)
	}
	return res, nil
}

// clock is timeA8's time source; the tests' fake backends advance a fake
// one, so that what they assert does not depend on this machine's timing.
var clock = time.Now

// timeA8 opens a backend, loads m and returns the fastest of calibRuns-1
// timed A8 multiplies by x (after one warm-up), in seconds.
func timeA8(open func() (Backend, error), m layout.Matrix, x []float32) (float64, error) {
	be, err := open()
	if err != nil {
		return 0, err
	}
	defer be.Close()
	lm, err := be.Load(m)
	if err != nil {
		return 0, err
	}
	defer lm.Close()
	rows, _ := m.Shape()
	y := make([]float32, rows)
	best := math.Inf(1)
	for i := 0; i < calibRuns; i++ {
		t := clock()
		if err := lm.MulA8(y, x, 1); err != nil {
			return 0, err
		}
		if s := max(clock().Sub(t).Seconds(), 1e-9); i > 0 {
			best = min(best, s)
		}
	}
	return best, nil
}

// writeCalibration writes res to path atomically (a temporary file in the
// same directory, renamed over path).
func writeCalibration(path string, res calibration) error {
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".calibration-*.tmp")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		os.Remove(f.Name())
	}
	return werr
}
