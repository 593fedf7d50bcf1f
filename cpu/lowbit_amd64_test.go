//go:build !noasm && !purego

package cpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout"
)

// TestBitsA8MetaLayouts runs the AVX-512 A8 kernels on both metadata
// layouts: binary16 scales with int16 zeros (a negative zero point checks
// the sign extension) and the float32 fallback, taken for float32
// metadata and for zero points outside int16; and the 4-bit kernels'
// prefetch variants whatever the CPU (L1 on one thread, NTA on more, or
// lead),
// checking that the variant asked for runs. Results are exact.
func TestBitsA8MetaLayouts(t *testing.T) {
	if !hasAll(bitsA8Kernels.requires) {
		t.Skip("no AVX-512 VNNI + VBMI")
	}
	defer func(l1, lead bool) { bitsA8PrefetchL1, bitsA8Lead = l1, lead }(bitsA8PrefetchL1, bitsA8Lead)
	for _, c := range []struct {
		l1, lead bool
		threads  int
		variant  string // the 4-bit G128 kernels' name part ("": the L2 kernels, no "Pf")
	}{{false, false, 3, ""}, {true, false, 1, "PfL1"}, {true, false, 3, "PfNta"}, {true, true, 1, "PfLead"}, {true, true, 3, "PfLead"}} {
		bitsA8PrefetchL1, bitsA8Lead = c.l1, c.lead
		t.Run(fmt.Sprintf("prefetchL1=%v/lead=%v/threads=%d", c.l1, c.lead, c.threads), func(t *testing.T) {
			testBitsA8MetaLayouts(t, c.threads, c.variant)
		})
	}
}

func testBitsA8MetaLayouts(t *testing.T, threads int, variant string) {
	be, err := New(Config{ISA: AVX512VNNI, Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(31, 32))
	rows, cols := 37, 512
	if variant == "PfLead" {
		cols = 8192 // rows long enough for the lead variants of 8, 4 and 2 bits (bitsLeadFits)
	}
	for _, n := range []int{8, 4, 2, 1} {
		for _, g := range []int{32, 64, 128} {
			if n == 1 && g == 32 {
				continue // no kernel
			}
			for _, mode := range []struct {
				name   string
				fp32   bool
				zero   float32 // set on row 5, group 1 (0: keep)
				meta16 bool
			}{{"fp16", false, -300, true}, {"fp32", true, 0, false}, {"wide-zero", false, 40000, false}} {
				b := importedBits(t, rng, rows, cols, n, g, false, false, mode.fp32)
				if mode.zero != 0 {
					b.Zeros16[1*b.PRows+5] = layout.ToFP16(mode.zero)
				}
				name := fmt.Sprintf("%s/%s", b.Name(), mode.name)
				if got := meta16Zeros(b); got != mode.meta16 {
					t.Fatalf("%s: meta16Zeros = %v, want %v", name, got, mode.meta16)
				}
				mx, err := be.LoadBits(b)
				if err != nil {
					t.Fatal(err)
				}
				if mx.simd == nil {
					t.Fatalf("%s: no A8 kernel", name)
				}
				if k := funcName(mx.simd.kern); g == 128 && (n == 4 && (variant == "" && strings.Contains(k, "Pf") || !strings.Contains(k, variant)) ||
					variant == "PfLead" && n > 1 && !strings.Contains(k, variant)) {
					t.Fatalf("%s on %d threads: kernel %s, want the %s variant", name, threads, k, variant)
				}
				x := randVec(rng, 3*cols)
				full, dst := guarded(3 * rows)
				if err := mx.MulA8(dst, x, 3); err != nil {
					t.Fatal(err)
				}
				checkGuards(t, full, 3*rows)
				checkA8Exact(t, name, b.DotA8Exact, nil, dst, x, 3, rows, cols, b.PCols)
			}
		}
	}
}

// TestSparse12FloatMeta runs the Sparse12 float kernels on both metadata
// layouts, binary16 (Meta16 kernels) and float32 (the (s, s*z) pairs),
// against the float64 reference, on every kernel set with float kernels.
func TestSparse12FloatMeta(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	const rows, cols = 37, 1100
	w := randVec(rng, rows*cols)
	for _, isa := range supportedSets() {
		be, err := New(Config{ISA: isa, Threads: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []int{64, 128, 0} {
			for _, fp32 := range []bool{false, true} {
				sp, _, err := layout.QuantizeSparse12(w, rows, cols, g, layout.QuantOptions{Method: layout.MinMax, FP32Meta: fp32})
				if err != nil {
					t.Fatal(err)
				}
				mx, err := be.LoadSparse12(sp)
				if err != nil {
					t.Fatal(err)
				}
				if mx.sa32 != nil && mx.sa32.meta16 == fp32 {
					t.Fatalf("%s/%s/fp32 %v: meta16 %v", isa, sp.Name(), fp32, mx.sa32.meta16)
				}
				x := randVec(rng, 3*cols)
				full, dst := guarded(3 * rows)
				if err := mx.MulF32(dst, x, 3); err != nil {
					t.Fatal(err)
				}
				checkGuards(t, full, 3*rows)
				checkFloat(t, fmt.Sprintf("%s/%s/fp32 %v", isa, sp.Name(), fp32), lowCase{sp.Name(), mx, sp.DotRef, sp.DotRefMag, sp.DotA8Exact}, dst, x, 3, rows, cols)
			}
		}
	}
}

// TestBitsDroppedMeta: a matrix whose A8 kernel holds its binary16
// metadata (the AVX-512 plane kernels, the YMM Meta16 kernels) releases
// the format's copy at load, and the first float multiply rebuilds it
// equal to the source (zero points by value), so its float results match
// a matrix that never dropped it.
func TestBitsDroppedMeta(t *testing.T) {
	ran := false
	for _, isa := range []ISA{AVX512VNNI, AVXVNNI, AVX2} {
		ymm := bitsA8YMM16[isa]
		if isa == AVX512VNNI && !hasAll(bitsA8Kernels.requires) || isa != AVX512VNNI && !hasAll(ymm.requires) {
			continue
		}
		ran = true
		t.Run(string(isa), func(t *testing.T) { testBitsDroppedMeta(t, isa) })
	}
	if !ran {
		t.Skip("no AVX-512 VNNI + VBMI, and no AVX2 with F16C")
	}
}

func testBitsDroppedMeta(t *testing.T, isa ISA) {
	be, err := New(Config{ISA: isa, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	rng := rand.New(rand.NewPCG(41, 42))
	const rows, cols = 37, 512
	for _, n := range []int{8, 4, 2, 1} {
		for _, g := range []int{32, 64, 128, 256, 0} {
			if n == 1 && g == 32 {
				continue
			}
			unit := 128
			if g == 32 || g == 64 {
				unit = g
			}
			if ks := bitsA8YMM16[isa]; ks != nil && ks.kernels[[2]int{n, unit}] == nil {
				continue // no YMM kernel for these groups: nothing to drop
			}
			b := importedBits(t, rng, rows, cols, n, g, false, false, false)
			b.Zeros16[(b.Groups()-1)*b.PRows+5] = layout.ToFP16(-300) // a negative zero point
			name := b.Name()
			mx, err := be.LoadBits(b)
			if err != nil {
				t.Fatal(err)
			}
			if mx.bits.Scales16 != nil || mx.restore == nil {
				t.Fatalf("%s: metadata kept at load", name)
			}
			x := randVec(rng, 2*cols)
			a8 := make([]float32, 2*rows)
			if err := mx.MulA8(a8, x, 2); err != nil {
				t.Fatal(err)
			}
			checkA8Exact(t, name, b.DotA8Exact, nil, a8, x, 2, rows, cols, b.PCols)
			got := make([]float32, 2*rows)
			if err := mx.MulF32(got, x, 2); err != nil {
				t.Fatal(err)
			}
			for i := range b.Scales16 {
				if mx.bits.Scales16[i] != b.Scales16[i] || mx.bits.Zeros16[i].Float32() != b.Zeros16[i].Float32() {
					t.Fatalf("%s: restored metadata %d: (%v, %v), want (%v, %v)", name, i, mx.bits.Scales16[i], mx.bits.Zeros16[i], b.Scales16[i], b.Zeros16[i])
				}
			}
			keep, err := New(Config{ISA: isa, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := keep.LoadBits(b)
			if err != nil {
				t.Fatal(err)
			}
			ref.bits.Scales16, ref.bits.Zeros16, ref.restore = b.Scales16, b.Zeros16, nil // as if never dropped
			want := make([]float32, 2*rows)
			if err := ref.MulF32(want, x, 2); err != nil {
				t.Fatal(err)
			}
			keep.Close()
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s: float result %d: %v, want %v", name, i, got[i], want[i])
				}
			}
		}
	}
}

// TestGatherRuns: for every plane kernel's activation order (Bits 8, 4,
// 2, 1; groups of 128, 64, 32), the interleaving assembly writes
// gatherActs' bytes, zero runs included, through gatherRuns' copy and as
// interleaveGather runs it (straight from the chunk where it has no zero
// runs).
func TestGatherRuns(t *testing.T) {
	if !hasAll(interleaveRequires) {
		t.Skip("no AVX")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{8, 4, 2, 1} {
		for _, sub := range []int{1, 2, 4} {
			s := &bitsSIMD{n: n, bpc: 8 / n, sub: sub}
			src := s.actSources()
			E := layout.BitsChunk(n)
			runs := interleaveRuns(src, int32(E))
			if runs == nil {
				t.Fatalf("Bits%d sub %d: the order is not four 16-byte runs per block", n, sub)
			}
			x := make([]int8, E)
			for i := range x {
				x[i] = int8(rng.IntN(255) - 127)
			}
			want, got := make([]byte, len(src)), guardedBytes(len(src))
			gatherActs(want, x, src)
			gatherRuns(got, x, runs)
			checkGuarded(t, fmt.Sprintf("Bits%d sub %d", n, sub), got, want)
			got = guardedBytes(len(src))
			interleaveGather(src, E)(got, x)
			checkGuarded(t, fmt.Sprintf("Bits%d sub %d, interleaveGather", n, sub), got, want)
		}
	}
	if interleaveRuns([]int32{0, 1}, 2) != nil {
		t.Error("a table of no whole block was accepted")
	}
	bad := (&bitsSIMD{n: 4, bpc: 2, sub: 1}).actSources()
	bad[7] = 3
	if interleaveRuns(bad, 256) != nil {
		t.Error("a table breaking a run was accepted")
	}
}

// BenchmarkInterleaveGather times one chunk's activation layout for the
// AVX-512 Bits4 kernel with groups of 128 (no zero runs) through
// gatherRuns' copy and straight from the chunk (interleaveGather).
func BenchmarkInterleaveGather(b *testing.B) {
	if !hasAll(interleaveRequires) {
		b.Skip("no AVX")
	}
	s := &bitsSIMD{n: 4, bpc: 2, sub: 1}
	src := s.actSources()
	E := layout.BitsChunk(4)
	runs := interleaveRuns(src, int32(E))
	x, a := make([]int8, E), make([]byte, len(src))
	b.Run("copy", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			gatherRuns(a, x, runs)
		}
	})
	g := interleaveGather(src, E)
	b.Run("straight", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			g(a, x)
		}
	})
}

// guardedBytes returns a buffer of n bytes and 64 guard bytes after them, all
// 0xa5 (checkGuarded).
func guardedBytes(n int) []byte {
	b := make([]byte, n+64)
	for i := range b {
		b[i] = 0xa5
	}
	return b
}

// checkGuarded fails t unless got (from guardedBytes) starts with want and its
// guard bytes are untouched.
func checkGuarded(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got[:len(want)], want) {
		t.Fatalf("%s: the layout differs from the reference", what)
	}
	for _, b := range got[len(want):] {
		if b != 0xa5 {
			t.Fatalf("%s: wrote past the layout", what)
		}
	}
}

// TestBitsA8LongRange: one thread's batch-1 range of more rows than one
// kernel call takes (the pooled tile buffer's 128 tiles), ending in a
// partial tile, equals the exact reference bit for bit.
func TestBitsA8LongRange(t *testing.T) {
	if !hasAll(bitsA8Kernels.requires) {
		t.Skip("no AVX-512 VNNI + VBMI")
	}
	be, err := New(Config{ISA: AVX512VNNI, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 2085, 512
	for _, n := range []int{4, 2} {
		b := importedBits(t, rng, rows, cols, n, 128, false, false, false)
		mx, err := be.LoadBits(b)
		if err != nil {
			t.Fatal(err)
		}
		x := randVec(rng, cols)
		full, dst := guarded(rows)
		if err := mx.MulA8(dst, x, 1); err != nil {
			t.Fatal(err)
		}
		checkGuards(t, full, rows)
		checkA8Exact(t, b.Name(), b.DotA8Exact, nil, dst, x, 1, rows, cols, b.PCols)
		mx.Close()
	}
}
