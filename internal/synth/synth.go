// Package synth builds deterministic synthetic quantized matrices and
// activation vectors for benchmarks and the CLI's main job: random codes,
// zero points and scales drawn from a seeded generator, fast enough to
// fill hundreds of MiB.
package synth

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/klauspost/cpuid/v2"
	"github.com/qgemv/qgemv/layout"
	_ "github.com/qgemv/qgemv/layout/ans" // registers the ANS formats
	"github.com/qgemv/qgemv/layout/codebook"
	"github.com/qgemv/qgemv/layout/ggml"
)

// Q4G128 returns layout.RandomQ4G128(rows, cols, seed).
func Q4G128(rows, cols int, seed uint64) (*layout.Q4G128, error) {
	return layout.RandomQ4G128(rows, cols, seed)
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

// ExtremeA8 returns int8 activations for n values that no quantizer
// makes, a third at -128, a third at 127 and the rest drawn from the
// whole int8 range, with n/128 positive scales below 1/64: inputs that
// check MulI8 gives the exact product for any int8.
func ExtremeA8(n int, seed uint64) ([]int8, []float32) {
	rng := rand.New(rand.NewPCG(seed, 11))
	xq, xs := make([]int8, n), make([]float32, n/layout.GroupSize)
	for i := range xq {
		switch i % 3 {
		case 0:
			xq[i] = -128
		case 1:
			xq[i] = 127
		default:
			xq[i] = int8(rng.IntN(256) - 128)
		}
	}
	for i := range xs {
		xs[i] = float32(rng.Float64()) / 64
	}
	return xq, xs
}

// Q8MinCodes returns a random Q8_0 matrix (ggml.Random) whose every
// second block holds one code of -128: valid, though llama.cpp's quantizer
// (and ggml.Random) never writes one, and beyond the kernels that give the
// codes the activations' signs.
func Q8MinCodes(rows, cols int, seed uint64) (*ggml.Matrix, error) {
	m, err := ggml.Random(ggml.Q8_0, rows, cols, seed)
	if err != nil {
		return nil, err
	}
	n := m.Type.BlockBytes()
	for b := 0; b < len(m.Data)/n; b += 2 {
		m.Data[b*n+2+b%32] = 0x80 // the codes follow the binary16 d
	}
	return m, nil
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

// Matrix returns a synthetic matrix of the given format (its registered
// Random constructor: random codes and metadata with integer zero points,
// so every activation type works), determined by seed.
func Matrix(spec layout.FormatSpec, rows, cols int, seed uint64) (layout.Matrix, error) {
	return layout.Random(spec, rows, cols, seed)
}

// Named is Matrix for a format name (layout.ParseFormatSpec).
func Named(name string, rows, cols int, seed uint64) (layout.Matrix, error) {
	spec, err := layout.ParseFormatSpec(name)
	if err != nil {
		return nil, err
	}
	return layout.Random(spec, rows, cols, seed)
}

// Codebook returns codebook.Random(spec, rows, cols, seed).
func Codebook(spec layout.FormatSpec, rows, cols int, seed uint64) (*codebook.Codebook, error) {
	return codebook.Random(spec, rows, cols, seed)
}
