//go:build opencl

package opencl

import (
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

// The GEMV benchmarks stream working sets beyond the device's L2 (at
// least 256 MiB or 4x the global memory cache, rotating over distinct
// matrices), time each launch with profiling events (device time,
// back to back), and report GB/s of bytes streamed (StreamBytes plus
// activations and results) and the ratio to the backend's read kernel measured in
// the same run (metric "%read").

var (
	readOnce sync.Once
	readGBs  float64
	readErr  error
)

func readBandwidth(b *testing.B, be *Backend) float64 {
	readOnce.Do(func() {
		size := max(1<<30, 8*be.Info().CacheBytes)
		if be.Info().Type == "cpu" {
			size = 256 << 20
		}
		size = int(min(int64(size), be.Info().MaxAlloc/2))
		readGBs, readErr = be.ReadBandwidth(size, 10)
	})
	if readErr != nil {
		b.Fatal(readErr)
	}
	return readGBs
}

func BenchmarkReadBandwidth(b *testing.B) {
	be := backend(b)
	gbs := readBandwidth(b, be)
	for i := 0; i < b.N; i++ {
	}
	b.ReportMetric(gbs, "GB/s")
}

// randomQ4 and randomBits4 build matrices with random codes and metadata
// directly (quantizing 60M weights per matrix would dominate the run).
func randomQ4(rng *rand.Rand, rows, cols int) layout.Matrix {
	m, err := layout.NewQ4G128(rows, cols)
	if err != nil {
		panic(err)
	}
	rng.Read(m.Weights)
	rng.Read(m.Zeros)
	for i := range m.Scales {
		m.Scales[i] = float32(rng.Float64()) * 0.01
	}
	return m
}

func randomBits4(rng *rand.Rand, rows, cols int) layout.Matrix {
	m, err := layout.NewBits(rows, cols, 4, 128, false)
	if err != nil {
		panic(err)
	}
	for i := range m.Words {
		m.Words[i] = rng.Uint32()
	}
	for i := range m.Scales16 {
		m.Scales16[i] = layout.ToFP16(float32(rng.Float64()) * 0.01)
		m.Zeros16[i] = layout.ToFP16(float32(rng.Intn(16)))
	}
	return m
}

// benchTiles are the variants compared with the default (tileFor) at
// batch 1: tile sizes (-DTWG, -DRPW, ..., -DMW: warps per tensor-core
// work-group), -DNOMMA (float: the CUDA-core tiled kernels instead of the
// tensor-core ones), -DPF (float tiled kernels: software-pipelined weight
// loads); also available: -DWARP (int8, NVIDIA: the warp-shuffle
// kernels), -DNOPTX (no inline PTX: portable dot product, no tensor
// cores).
// QGEMV_BENCH_TILES, a ';'-separated list of option strings, replaces
// them (e.g. "-DMW=8 -DAMU8=2;-DMW=16 -DAMU16=2" for tuning).
var benchTiles = []string{"-DNOMMA", "-DMW=8", "-DMW=16"}

func init() {
	if v := os.Getenv("QGEMV_BENCH_TILES"); v != "" {
		benchTiles = strings.Split(v, ";")
	}
}

func BenchmarkGEMV(b *testing.B) {
	be := backend(b)
	// the FFN shapes of an 8B model (31 MB per call: launch and ramp are
	// a large share of a call) and a 134 MB matrix, where they are not
	shapes := [][2]int{{4096, 14336}, {14336, 4096}, {16384, 16384}}
	if be.Info().Type == "cpu" {
		shapes = [][2]int{{1024, 4096}}
	}
	rd := readBandwidth(b, be)
	b.Logf("device %s: read kernel %.1f GB/s, inline PTX %v (%v), tensor cores %v (%v)", be.Info().Name, rd, be.ptx, be.ptxErr, be.mma, be.mmaErr)
	for _, f := range []struct {
		name string
		mk   func(*rand.Rand, int, int) layout.Matrix
	}{{"Q4G128", randomQ4}, {"Bits4G128", randomBits4}} {
		for _, sh := range shapes {
			rng := rand.New(rand.NewSource(1))
			first := f.mk(rng, sh[0], sh[1])
			target := int64(max(256<<20, 4*be.Info().CacheBytes))
			if be.Info().Type == "cpu" {
				target = 64 << 20
			}
			count := int(max(2, (target+first.StreamBytes()-1)/first.StreamBytes()))
			ms := []*Matrix{}
			for i := 0; i < count; i++ {
				m := first
				if i > 0 {
					m = f.mk(rng, sh[0], sh[1])
				}
				mx, err := be.Load(m)
				if err != nil {
					b.Fatal(err)
				}
				ms = append(ms, mx)
			}
			same := 0.0
			if be.Info().Type == "gpu" {
				// the read kernel over buffers of this matrix's size,
				// rotating like the GEMV benchmarks (launch and ramp
				// included): the ceiling at this per-call size
				if gbs, err := readRotating(be, int(first.StreamBytes()), count, 200); err != nil {
					b.Fatal(err)
				} else {
					same = gbs
					b.Logf("%s %dx%d: read kernel over %d buffers of %d bytes: %.1f GB/s (%.1f%% of the %.1f GB/s read kernel)",
						f.name, sh[0], sh[1], count, first.StreamBytes(), gbs, 100*gbs/rd, rd)
				}
			}
			for _, act := range []string{"A32", "A8"} {
				// tile variants of the tiled kernels (gemv.cl) on GPUs
				tiles := []string{""}
				if be.Info().Type == "gpu" {
					tiles = append(tiles, benchTiles...)
				}
				for _, batch := range []int{1, 16} {
					for _, to := range tiles {
						if batch > 1 && to != "" {
							continue
						}
						name := fmt.Sprintf("%s/%s/%dx%d/b%d/%s", f.name, act, sh[0], sh[1], batch, be.ShortName())
						if to != "" {
							name += "/" + strings.NewReplacer("-D", "", " ", ",", "=", "").Replace(to)
						}
						b.Run(name, func(b *testing.B) {
							be.tileOpts = to
							defer func() { be.tileOpts = "" }()
							benchGEMV(b, be, ms, act, batch, rd, same)
						})
					}
				}
			}
			for _, mx := range ms {
				mx.Close()
			}
		}
	}
}

// benchGEMV reports GB/s and the ratios to the 1 GiB read (%read) and,
// when measured (same > 0), to the read kernel over buffers of the
// matrix's size rotated alike (%rsame: the ceiling at this launch size).
func benchGEMV(b *testing.B, be *Backend, ms []*Matrix, act string, batch int, rd, same float64) {
	rows, cols := ms[0].geo.Rows, ms[0].geo.Cols
	pc := ms[0].geo.PCols
	x := make([]float32, batch*cols)
	for i := range x {
		x[i] = float32(i%17) - 8
	}
	y := make([]float32, batch*rows)
	float := act != "A8"
	actBytes := int64(batch * pc * 4)
	if !float {
		if err := ms[0].MulA8(y, x, batch); err != nil { // uploads xq, xs
			b.Fatal(err)
		}
		actBytes = int64(batch*pc + 4*batch*pc/128)
	} else if err := ms[0].MulF32(y, x, batch); err != nil {
		b.Fatal(err)
	}
	bytes := ms[0].m.StreamBytes() + actBytes + int64(4*batch*rows) // and the float32 results, as BenchmarkGEMV counts them
	be.mu.Lock()
	defer be.mu.Unlock()
	// warm up: one pass over every matrix
	for _, mx := range ms {
		if _, err := mx.launch(be.scratch(), float, batch, false); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.x.finish(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(bytes)
	b.ResetTimer()
	var total float64
	evs := make([]*event, 0, len(ms))
	for i := 0; i < b.N; {
		evs = evs[:0]
		for j := 0; j < len(ms) && i < b.N; j, i = j+1, i+1 {
			ev, err := ms[i%len(ms)].launch(be.scratch(), float, batch, true)
			if err != nil {
				b.Fatal(err)
			}
			evs = append(evs, ev)
		}
		if err := be.x.finish(); err != nil {
			b.Fatal(err)
		}
		total += timeEvents(b, evs)
	}
	b.StopTimer()
	reportRate(b, total, bytes, "us/launch", rd, same)
}

// reportRate reports the device time per operation (unit), GB/s of
// bytes per operation, the ratio to the 1 GiB read rd and, when
// measured (same > 0), to the same-size read.
func reportRate(b *testing.B, total float64, bytes int64, unit string, rd, same float64) {
	per := total / float64(b.N)
	gbs := float64(bytes) / per / 1e9
	b.ReportMetric(per*1e6, unit)
	b.ReportMetric(gbs, "GB/s")
	b.ReportMetric(100*gbs/rd, "%read")
	if same > 0 {
		b.ReportMetric(100*gbs/same, "%rsame")
	}
}

// readRotating times the read kernel (event device time, back to back)
// over count distinct buffers of size bytes each, in rotation, and
// returns the best mean GB/s over the read kernel's grid sizes.
func readRotating(be *Backend, size, count, iters int) (float64, error) {
	be.mu.Lock()
	defer be.mu.Unlock()
	n := size / 16
	bufs := make([]*buffer, 0, count)
	defer func() {
		for _, p := range bufs {
			p.release()
		}
	}()
	for i := 0; i < count; i++ {
		p, err := be.readSource(n)
		if err != nil {
			return 0, err
		}
		bufs = append(bufs, p)
	}
	return be.readSweep(n, bufs, iters)
}
