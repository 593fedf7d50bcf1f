// Package synth builds deterministic synthetic quantized matrices and
// activation vectors for benchmarks and the CLI's main job: random codes,
// zero points and scales drawn from a seeded generator, fast enough to
// fill hundreds of MiB.
package synth

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/klauspost/cpuid/v2"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/codebook"
)

// Q4G128 returns a rows x cols matrix with uniformly random 4-bit codes and
// zero points and scales in [0.001, 0.02), determined by seed.
func Q4G128(rows, cols int, seed uint64) (*layout.Q4G128, error) {
	m, err := layout.NewQ4G128(rows, cols)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	fill(rng, m.Weights)
	fill(rng, m.Zeros)
	for i := range m.Scales {
		m.Scales[i] = 0.001 + float32(0.019*rng.Float32())
	}
	return m, nil
}

func fill(rng *rand.Rand, b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, rng.Uint64())
		b = b[8:]
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// Vector returns n standard-normal float32 values determined by seed.
func Vector(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// Rotation returns how many distinct copies of a working set of the given
// size are needed for the set to exceed minBytes (at least 1).
func Rotation(bytesEach int64, minBytes int64) int {
	if bytesEach <= 0 {
		return 1
	}
	return int(max(1, (minBytes+bytesEach-1)/bytesEach))
}

// BeyondLLC is the least working-set size benchmarks rotate over so that
// weights stream from DRAM: four times the largest last-level cache a
// laptop or this project's VMs effectively give one process. WorkingSet
// raises it on hosts whose last-level cache is larger.
const BeyondLLC = 256 << 20

// WorkingSetEnv names the variable that sets WorkingSet in MiB.
const WorkingSetEnv = "QGEMV_WORKING_SET_MIB"

// maxWorkingSetMiB bounds WorkingSetEnv (64 GiB: a benchmark holds the
// working set about twice, rotation and read-bandwidth buffer).
const maxWorkingSetMiB = 64 << 10

// maxAutoWorkingSet caps the size WorkingSet derives from the reported
// cache (the CLI's tests measure a read bandwidth over it).
const maxAutoWorkingSet = 1 << 30

// WorkingSet returns the bytes benchmarks rotate over (and their
// read-bandwidth buffer holds) so that weights stream from DRAM: $QGEMV_WORKING_SET_MIB MiB
// when it is set, else the larger of BeyondLLC and twice the last-level
// cache cpuid reports, at most 1 GiB. The device host's Xeon reports a
// 300 MiB L3, in which a 256 MiB rotation was partly cache-resident. A
// value that is not a whole number of MiB from 1 to 65536 is an error.
func WorkingSet() (int64, error) {
	if v, ok := os.LookupEnv(WorkingSetEnv); ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 1 || n > maxWorkingSetMiB {
			return 0, fmt.Errorf("synth: %s=%q: want a whole number of MiB from 1 to %d", WorkingSetEnv, v, maxWorkingSetMiB)
		}
		return n << 20, nil
	}
	return max(BeyondLLC, min(maxAutoWorkingSet, 2*int64(cpuid.CPU.Cache.L3))), nil
}

// Matrix returns a synthetic matrix of the given format: random codes,
// scales in [0.001, 0.02) and integer zero points (so every activation
// type works), determined by seed.
func Matrix(spec layout.FormatSpec, rows, cols int, seed uint64) (layout.Matrix, error) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	switch spec.Format {
	case layout.FormatQ4G128:
		return Q4G128(rows, cols, seed)
	case layout.FormatBits:
		b, err := layout.NewBits(rows, cols, spec.N, spec.G, false)
		if err != nil {
			return nil, err
		}
		for i := range b.Words {
			b.Words[i] = rng.Uint32()
			if spec.N == 3 {
				b.Words[i] &^= 3 // spare bits are zero
			}
		}
		fillMeta(rng, &b.GroupMeta, 1<<spec.N-1)
		return b, nil
	case layout.FormatSparse12:
		m, err := layout.NewSparse12(rows, cols, spec.G, false)
		if err != nil {
			return nil, err
		}
		for i := range m.Words {
			m.Words[i] = rng.Uint32()
		}
		fillMeta(rng, &m.GroupMeta, 127)
		return m, nil
	case layout.FormatCodebook:
		return Codebook(spec, rows, cols, seed)
	}
	return nil, fmt.Errorf("synth: format %v unsupported", spec.Format)
}

func fillMeta(rng *rand.Rand, m *layout.GroupMeta, qmax int) {
	for i := range m.Scales16 {
		m.Scales16[i] = layout.ToFP16(0.001 + float32(0.019*rng.Float32()))
		m.Zeros16[i] = layout.ToFP16(float32(rng.IntN(qmax + 1)))
	}
}

// Codebook returns a synthetic codebook matrix: random codes, Gaussian
// centroids and scales in [0.01, 0.11), determined by seed.
func Codebook(spec layout.FormatSpec, rows, cols int, seed uint64) (*codebook.Codebook, error) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	c, err := codebook.New(rows, cols, spec.M, spec.V, spec.N, spec.G, false)
	if err != nil {
		return nil, err
	}
	for i := range c.Words[:len(c.Words)-32] { // random bit streams; the tail stays zero
		c.Words[i] = rng.Uint32()
	}
	for i := range c.Centroids16 {
		c.Centroids16[i] = layout.ToFP16(float32(rng.NormFloat64()))
	}
	for i := range c.Scales16 {
		c.Scales16[i] = layout.ToFP16(float32(float64(rng.Float64()*0.1) + 0.01))
	}
	return c, nil
}
