package qgemv_test

import (
	"strings"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// TestMulAllocsAPI: after a warm-up, Mul, MulFP16, MulInt8 and
// QuantizeA8 through the public API allocate nothing (Q4G128, Bits4G128,
// Sparse12G128, Q4_0, Q4_K, Q6_K; batch 1 and 16) on allocBackends.
func TestMulAllocsAPI(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, be := range allocBackends() {
		t.Run(be, func(t *testing.T) { mulAllocs(t, be) })
	}
}

func mulAllocs(t *testing.T, backend string) {
	eng, err := qgemv.Open(qgemv.WithBackend(backend), qgemv.WithThreads(2))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	// 8192 columns: CUDA's host-slice A8 quantizes on the host from
	// there (cuda.EnvHostQuant)
	for _, c := range []struct {
		name       string
		rows, cols int
	}{{"q4g128", 512, 2048}, {"q4g128", 64, 8192}, {"bits4g128", 512, 2048}, {"sparse12g128", 512, 2048}, {"q4_0", 512, 2048}, {"q4_k", 512, 2048}, {"q6_k", 512, 2048}} {
		name, cols := c.name, c.cols
		m, err := synth.Named(name, c.rows, cols, 1)
		if err != nil {
			t.Fatal(err)
		}
		mat, err := eng.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, batch := range []int{1, 16} {
			x, y := synth.Vector(batch*cols, 2), make([]float32, batch*c.rows)
			xh := make([]layout.FP16, batch*cols)
			pc := mat.PaddedCols()
			xq, xs := make([]int8, batch*pc), make([]float32, batch*pc/128)
			if err := eng.QuantizeA8(xq, xs, x); err != nil && batch == 1 {
				t.Fatal(err)
			}
			for what, f := range map[string]func() error{
				"Mul A32":    func() error { return mat.Mul(y, x, batch, qgemv.A32) },
				"Mul A8":     func() error { return mat.Mul(y, x, batch, qgemv.A8) },
				"MulFP16":    func() error { return mat.MulFP16(y, xh, batch) },
				"MulInt8":    func() error { return mat.MulInt8(y, xq, xs, batch) },
				"QuantizeA8": func() error { return eng.QuantizeA8(xq[:pc], xs[:pc/128], x[:cols]) },
			} {
				// Warm-up: a few calls, so that the pooled per-call state
				// every P may hand out has grown to this batch (the calls
				// before ran other batches and paths).
				for range 4 {
					if err := f(); err != nil {
						t.Fatalf("%s %dx%d %s: %v", name, c.rows, cols, what, err)
					}
				}
				if n := testing.AllocsPerRun(10, func() { _ = f() }); n != 0 {
					t.Errorf("%s %dx%d batch %d %s: %v allocations per call", name, c.rows, cols, batch, what, n)
				}
			}
		}
	}
}

// TestBufferAllocs: buffer operations allocate nothing after a warm-up
// on the CPU backend and on the GPU backends this build and machine have.
func TestBufferAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, be := range allocBackends() {
		t.Run(be, func(t *testing.T) { bufferAllocs(t, be) })
	}
}

// allocBackends are the backends whose multiplies must not allocate:
// the CPU, and OpenCL and CUDA where this build and machine have them.
func allocBackends() []string {
	backends := []string{"cpu"}
	for _, c := range qgemv.Probe().Candidates {
		if c.Available && (strings.HasPrefix(c.Name, "opencl") || strings.HasPrefix(c.Name, "cuda")) {
			backends = append(backends, c.Name)
		}
	}
	return backends
}

func bufferAllocs(t *testing.T, backend string) {
	eng, err := qgemv.Open(qgemv.WithBackend(backend), qgemv.WithThreads(2))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	m, err := synth.Named("q4g128", 512, 2048, 1)
	if err != nil {
		t.Fatal(err)
	}
	mat, err := eng.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	// An act-order matrix: its activations are gathered before quantizing.
	ao, err := layout.RandomBits(512, 2048, 4, 128, 3)
	if err != nil {
		t.Fatal(err)
	}
	ao.Perm = make([]int32, 2048)
	for i := range ao.Perm {
		ao.Perm[i] = int32((i*7 + 3) % 2048)
	}
	aoMat, err := eng.Load(ao)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := eng.NewBuffer(2048, qgemv.Float32)
	y, _ := eng.NewBuffer(512, qgemv.Float32)
	z, _ := eng.NewBuffer(512, qgemv.Float32)
	xq, _ := eng.NewBuffer(2048, qgemv.Int8)
	xs, _ := eng.NewBuffer(16, qgemv.Float32)
	host := make([]float32, 512)
	hostX := make([]float32, 2048)
	seq, err := eng.Record(func() error {
		if err := mat.MulBuffer(y, x, 1, qgemv.A8); err != nil {
			return err
		}
		return eng.SwiGLU(z, y, y)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	for what, f := range map[string]func() error{
		"Sequence Run":             seq.Run,
		"Sequence RunIO":           func() error { return seq.RunIO(x, hostX, z, host) },
		"MulBuffer A8":             func() error { return mat.MulBuffer(y, x, 1, qgemv.A8) },
		"MulBuffer A16":            func() error { return mat.MulBuffer(y, x, 1, qgemv.A16) },
		"QuantizeBuffer":           func() error { return mat.QuantizeBuffer(xq, xs, x, 1) },
		"QuantizeBuffer act-order": func() error { return aoMat.QuantizeBuffer(xq, xs, x, 1) },
		"MulBuffer A8 act-order":   func() error { return aoMat.MulBuffer(y, x, 1, qgemv.A8) },
		"MulInt8Buffer":            func() error { return mat.MulInt8Buffer(z, xq, xs, 1) },
		"SwiGLU":                   func() error { return eng.SwiGLU(z, y, z) },
		"Add":                      func() error { return eng.Add(z, y, z) },
		"Read":                     func() error { return y.Read(host) },
		"Write":                    func() error { return y.Write(host) },
	} {
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n := testing.AllocsPerRun(5, func() { _ = f() }); n != 0 {
			t.Errorf("%s: %v allocations per call", what, n)
		}
	}
}
