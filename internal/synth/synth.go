// Package synth builds deterministic synthetic quantized matrices and
// activation vectors for benchmarks and the CLI's main job: random codes,
// zero points and scales drawn from a seeded generator, fast enough to
// fill hundreds of MiB.
package synth

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/qgemv/qgemv/layout"
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
		m.Scales[i] = 0.001 + 0.019*rng.Float32()
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

// BeyondLLC is the working-set size benchmarks rotate over so that weights
// stream from DRAM: four times the largest last-level cache a laptop or
// this project's VMs effectively give one process.
const BeyondLLC = 256 << 20
