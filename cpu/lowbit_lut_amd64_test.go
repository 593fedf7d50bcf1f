//go:build !noasm && !purego

package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/qgemv/qgemv/internal/hugemem"
	"github.com/qgemv/qgemv/layout"
)

// lutMultiply loads a random Bits(n, 128) rows x cols matrix quantized
// with opt on an avx512vnni backend with cfg's threads and huge pages,
// checks that the table kernels run it, multiplies batch random vectors
// (guard bands checked) and checks them against the float64 reference.
func lutMultiply(t *testing.T, seed uint64, n, rows, cols, batch int, cfg Config, opt layout.QuantOptions) *LowMatrix {
	t.Helper()
	if !Supported(AVX512VNNI) {
		t.Skip("needs the avx512vnni kernel set")
	}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	cfg.ISA = AVX512VNNI
	be, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := layout.QuantizeBits(randVec(rng, rows*cols), rows, cols, n, 128, opt)
	if err != nil {
		t.Fatal(err)
	}
	mx, err := be.LoadBits(b)
	if err != nil {
		t.Fatal(err)
	}
	if mx.a32 == nil || mx.a32.lut == nil {
		t.Fatalf("%s does not run the table kernels", b.Name())
	}
	x := randVec(rng, batch*cols)
	full, dst := guarded(batch * rows)
	if err := mx.MulF32(dst, x, batch); err != nil {
		t.Fatal(err)
	}
	checkGuards(t, full, batch*rows)
	checkFloat(t, b.Name(), lowCase{b.Name(), mx, b.DotRef, b.DotRefMag, b.DotA8Exact}, dst, x, batch, rows, cols)
	return mx
}

// TestBitsLutVectorGroups forces the table kernels to take a batch in
// groups of vectors (lutMaxTableFloats below one vector's tables) and
// checks every vector against the float64 reference.
func TestBitsLutVectorGroups(t *testing.T) {
	defer func(v int) { lutMaxTableFloats = v }(lutMaxTableFloats)
	lutMaxTableFloats = 1
	lutMultiply(t, 31, 1, 70, 2100, 5, Config{Threads: 2}, layout.QuantOptions{Method: layout.MinMax})
}

// TestBitsLutTasks multiplies a 1000-row matrix on three threads: the
// table kernels' tasks (one per thread, on 16-row blocks) start inside the
// chunk regions of lutPack's chunk-major order, and the last ends at the
// padded row count; two vectors, so each must start from cleared sums.
// The backend keeps matrices in huge pages, so the packed words are there
// too; Close frees them and later multiplies fail.
func TestBitsLutTasks(t *testing.T) {
	mx := lutMultiply(t, 33, 1, 1000, 4096, 2, Config{Threads: 3, HugePages: true}, layout.QuantOptions{Method: layout.MinMax})
	if mx.a32.lut.block == nil {
		t.Error("packed words not in huge-page memory")
	}
	if err := mx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mx.MulF32(make([]float32, 1000), make([]float32, 4096), 1); err != ErrClosed {
		t.Errorf("multiply after Close: %v, want ErrClosed", err)
	}
	if raceEnabled { // the cleanup's write of Bytes is not ordered before the reads below
		return
	}
	// Dropped unclosed, the matrix frees the packed words and its own.
	mx = lutMultiply(t, 34, 1, 1000, 4096, 1, Config{Threads: 3, HugePages: true}, layout.QuantOptions{Method: layout.MinMax})
	blocks := []*hugemem.Block{mx.a32.lut.block, mx.block}
	mx = nil
	for i := 0; i < 200 && (blocks[0].Bytes != nil || blocks[1].Bytes != nil); i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if blocks[0].Bytes != nil || blocks[1].Bytes != nil {
		t.Errorf("a dropped matrix kept its blocks: packed words %v, words %v", blocks[0].Bytes != nil, blocks[1].Bytes != nil)
	}
}

// TestBitsLutPrefetchHints runs both prefetch variants of the table
// kernels (lutNTA picks one by vendor, so one of them would otherwise go
// untested on any given machine) for Bits1 and Bits2 with binary16 and
// float32 metadata, against the float64 reference.
func TestBitsLutPrefetchHints(t *testing.T) {
	defer func(v bool) { lutNTA = v }(lutNTA)
	seed := uint64(35)
	for _, nta := range []bool{false, true} {
		lutNTA = nta
		for _, n := range []int{1, 2} {
			for _, fp32 := range []bool{false, true} {
				seed++
				t.Run(fmt.Sprintf("nta=%v/bits%d/fp32=%v", nta, n, fp32), func(t *testing.T) {
					lutMultiply(t, seed, n, 90, 1500, 3, Config{Threads: 2}, layout.QuantOptions{Method: layout.MinMax, FP32Meta: fp32})
				})
			}
		}
	}
}
