//go:build !noasm && !purego

package cpu

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ggml"
)

// TestGGMLPrefetchAB times the four-row kernels' L1 prefetch variants
// against each other from DRAM, call by call in one process, so that the
// host's memory phases (which move a run's rate by 1.5x within minutes
// on the VMs) fall on both alike: per item of QGEMV_GGML_PREFETCH_AB
// ("Q6_K:4096x14336,Q4_0:14336x4096", types as ggml names them) it loads
// random matrices until they exceed 300 MiB, then multiplies them in turn
// at batch 1 with A8, three calls with the next-four-rows prefetch
// (PfL1) and three with the lead prefetch (PfLead), 600 calls, and logs
// each variant's median. QGEMV_GGML_PREFETCH_AB_THREADS sets the threads.
//
//	QGEMV_GGML_PREFETCH_AB=Q4_K:4096x14336 go test -run GGMLPrefetchAB -v ./cpu
func TestGGMLPrefetchAB(t *testing.T) {
	spec := os.Getenv("QGEMV_GGML_PREFETCH_AB")
	if spec == "" {
		t.Skip("QGEMV_GGML_PREFETCH_AB not set")
	}
	threads := abThreads(t)
	be, err := New(Config{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	defer func(l1, lead bool) { ggmlR4L1, ggmlR4Lead = l1, lead }(ggmlR4L1, ggmlR4Lead)
	for _, item := range strings.Split(spec, ",") {
		typ, rows, cols, err := parseABItem(item)
		if err != nil {
			t.Fatal(err)
		}
		var mats []*GGMLMatrix
		for total := 0; total < 300<<20; {
			m, err := ggml.Random(typ, rows, cols, uint64(len(mats)+1))
			if err != nil {
				t.Fatal(err)
			}
			mx, err := be.LoadGGML(m)
			if err != nil {
				t.Fatal(err)
			}
			mats = append(mats, mx)
			total += len(m.Data)
		}
		x, dst := abVectors(rows, cols)
		abAlternate(t, fmt.Sprintf("%s %dx%d (%s)", typ, rows, cols, mats[0].Kernel()), [2]string{"PfL1", "PfLead"}, func(v, it int) error {
			ggmlR4L1, ggmlR4Lead = true, v == 1
			return mats[it%len(mats)].MulA8(dst, x, 1)
		})
		for _, m := range mats {
			m.Close()
		}
	}
}

func parseABItem(item string) (ggml.Type, int, int, error) {
	name, shape, _ := strings.Cut(item, ":")
	var rows, cols int
	if _, err := fmt.Sscanf(shape, "%dx%d", &rows, &cols); err != nil || rows < 4 || cols < 1 {
		return 0, 0, 0, fmt.Errorf("%q: want TYPE:ROWSxCOLS", item)
	}
	for _, t := range ggml.Types {
		if t.String() == name {
			return t, rows, cols, nil
		}
	}
	return 0, 0, 0, fmt.Errorf("%q: no type %q", item, name)
}

// TestBitsPrefetchAB is TestGGMLPrefetchAB for the Bits A8 kernels with
// groups of at least 128: the kernel the backend takes without the lead
// variants (on Zen 5, for 4 bits, the L1 variant on one thread, the NTA
// one on more; elsewhere the L2 kernels) against the lead one, on random Bits matrices, items of
// QGEMV_BITS_PREFETCH_AB as "BITS:G:ROWSxCOLS" (a G below 128 runs the
// same kernel twice: a control), threads from
// QGEMV_GGML_PREFETCH_AB_THREADS.
func TestBitsPrefetchAB(t *testing.T) {
	spec := os.Getenv("QGEMV_BITS_PREFETCH_AB")
	if spec == "" {
		t.Skip("QGEMV_BITS_PREFETCH_AB not set")
	}
	threads := abThreads(t)
	defer func(lead bool) { bitsA8Lead = lead }(bitsA8Lead)
	bitsA8Lead = false
	be, err := New(Config{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, item := range strings.Split(spec, ",") {
		var n, g, rows, cols int
		if _, err := fmt.Sscanf(item, "%d:%d:%dx%d", &n, &g, &rows, &cols); err != nil {
			t.Fatalf("%q: want BITS:G:ROWSxCOLS", item)
		}
		var mats []*LowMatrix
		for total := 0; total < 300<<20; {
			b, err := layout.RandomBits(rows, cols, n, g, uint64(len(mats)+1))
			if err != nil {
				t.Fatal(err)
			}
			mx, err := be.LoadBits(b)
			if err != nil {
				t.Fatal(err)
			}
			mats = append(mats, mx)
			total += 4 * len(b.Words)
		}
		// both variants on the same matrices (the kernel swapped call by
		// call), so that where the pages lie favours neither
		kern := [2]bitsA8Func{mats[0].simd.kern, bitsA8PfLeadKernels[bitsA8Key{n, max(1, 128/g), strings.Contains(funcName(mats[0].simd.kern), "Meta16")}]}
		if kern[1] == nil || os.Getenv("QGEMV_BITS_PREFETCH_AB_CONTROL") != "" {
			kern[1] = kern[0] // no lead variant, or asked: a control
		}
		x, dst := abVectors(rows, cols)
		abAlternate(t, fmt.Sprintf("Bits%dG%d %dx%d", n, g, rows, cols), [2]string{funcName(kern[0]), funcName(kern[1])}, func(v, it int) error {
			mx := mats[it%len(mats)]
			mx.simd.kern = kern[v]
			return mx.MulA8(dst, x, 1)
		})
		for _, m := range mats {
			m.Close()
		}
	}
}

// abThreads returns QGEMV_GGML_PREFETCH_AB_THREADS (0, every core, if unset).
func abThreads(t *testing.T) int {
	v := os.Getenv("QGEMV_GGML_PREFETCH_AB_THREADS")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("QGEMV_GGML_PREFETCH_AB_THREADS=%q: want a positive count", v)
	}
	return n
}

// TestQ4PrefetchAB is TestGGMLPrefetchAB for the batch-1 Q4G128 A8
// kernel of Zen 5 (the AVX2 kernel on metadata in super-tile order, eight
// rows a super tile): the next-super-tile
// prefetch against the lead one, items of QGEMV_Q4_PREFETCH_AB as
// "ROWSxCOLS", threads from QGEMV_GGML_PREFETCH_AB_THREADS.
func TestQ4PrefetchAB(t *testing.T) {
	spec := os.Getenv("QGEMV_Q4_PREFETCH_AB")
	if spec == "" {
		t.Skip("QGEMV_Q4_PREFETCH_AB not set")
	}
	if !l1PrefetchCPU() {
		t.Skip("the AVX2 batch-1 kernels run batch 1 only on Zen 5")
	}
	be, err := New(Config{Threads: abThreads(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	defer func(k kernelFunc) { a8Avx2.tmLead = k }(a8Avx2.tmLead)
	kerns := [2]kernelFunc{nil, asm.Q4A8Avx2M1TmPfLead}
	for _, item := range strings.Split(spec, ",") {
		var rows, cols int
		if _, err := fmt.Sscanf(item, "%dx%d", &rows, &cols); err != nil {
			t.Fatalf("%q: want ROWSxCOLS", item)
		}
		var mats []*Matrix
		for total := 0; total < 300<<20; {
			m, err := layout.RandomQ4G128(rows, cols, uint64(len(mats)+1))
			if err != nil {
				t.Fatal(err)
			}
			mx, err := be.Load(m)
			if err != nil {
				t.Fatal(err)
			}
			mats = append(mats, mx)
			total += len(m.Weights) + 4*len(m.Scales)
		}
		x, dst := abVectors(rows, cols)
		abAlternate(t, fmt.Sprintf("Q4G128 %dx%d", rows, cols), [2]string{"next super tile", "lead"}, func(v, it int) error {
			a8Avx2.tmLead = kerns[v]
			return mats[it%len(mats)].MulA8(dst, x, 1)
		})
		for _, m := range mats {
			m.Close()
		}
	}
}

// abVectors returns an activation vector of cols and a result vector of
// rows.
func abVectors(rows, cols int) (x, dst []float32) {
	x = make([]float32, cols)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	return x, make([]float32, rows)
}

// abAlternate calls mul 612 times, three calls with variant 0, then three
// with variant 1, in turn (it counts the calls), and logs each variant's
// median time (after the first 12 calls, which warm the workers and
// pools) and variant 1's over variant 0's, under label.
func abAlternate(t *testing.T, label string, names [2]string, mul func(v, it int) error) {
	var us [2][]float64
	for it := 0; it < 612; it++ {
		v := it / 3 % 2
		t0 := time.Now()
		if err := mul(v, it); err != nil {
			t.Fatal(err)
		}
		if it >= 12 {
			us[v] = append(us[v], float64(time.Since(t0).Nanoseconds())/1e3)
		}
	}
	for v := range us {
		slices.Sort(us[v])
		n := len(us[v])
		t.Logf("%s %s: median %.0f us (25-75%%: %.0f-%.0f)", label, names[v], us[v][n/2], us[v][n/4], us[v][3*n/4])
	}
	t.Logf("%s %s/%s %.3f", label, names[1], names[0], us[1][len(us[1])/2]/us[0][len(us[0])/2])
}
