package cpu

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/qgemv/qgemv/internal/matvans"
	"github.com/qgemv/qgemv/layout/ans"
)

// TestInt8AndANS checks the int8 baseline (every kernel set) and the ANS
// multiply (both layouts) against the exact reference on tails.
func TestInt8AndANS(t *testing.T) {
	saved := ansVariant
	defer func() { ansVariant = saved }()
	for _, v := range []int{ansMul, ansMadd, ansMaddQ} {
		ansVariant = v
		testInt8AndANS(t)
	}
}

func testInt8AndANS(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, sh := range [][2]int{{1, 1}, {5, 63}, {37, 200}, {64, 256}, {70, 1280}, {96, 2048}, {128, 512}} {
		rows, cols := sh[0], sh[1]
		w := matvans.Draw(rng, rows*cols, 20)
		if rows%2 == 1 { // every int8 value: many escapes
			for i := range w {
				w[i] = int8(rng.IntN(256) - 128)
			}
		}
		v := matvans.Draw(rng, cols, 40)
		want := make([]int32, rows)
		matvans.Dot(w, rows, cols, v, want)
		for _, isa := range supportedSets() {
			be, err := New(Config{ISA: isa, Threads: 3})
			if err != nil {
				t.Fatal(err)
			}
			m, err := be.LoadInt8(w, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			y := make([]int32, rows)
			if err := m.Mul(v, y); err != nil {
				t.Fatal(err)
			}
			for r := range y {
				if y[r] != want[r] {
					t.Fatalf("%s %dx%d: row %d = %d, want %d", m.Kernel(), rows, cols, r, y[r], want[r])
				}
			}
			for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
				if ans.CheckShape(l, rows, cols) != nil {
					continue
				}
				a, err := ans.Encode(w, rows, cols, l)
				if err != nil {
					t.Fatal(err)
				}
				clear(y)
				if err := be.MulANS(a, v, y); err != nil {
					t.Fatal(err)
				}
				for r := range y {
					if y[r] != want[r] {
						t.Fatalf("ANS %s %dx%d: row %d = %d, want %d", l, rows, cols, r, y[r], want[r])
					}
				}
			}
		}
	}
}

// TestANSEscapeMismatch: an escape list whose unit boundaries are off by
// one (the offsets stay valid; unit u hands its last escape to unit u+1)
// is an error from every decoder (the SIMD ones count the escapes they use).
func TestANSEscapeMismatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	w := matvans.Draw(rng, 64*512, 4)
	v := matvans.Draw(rng, 512, 30)
	y := make([]int32, 64)
	for _, isa := range supportedSets() {
		be, err := New(Config{ISA: isa, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
			m, err := ans.Encode(w, 64, 512, l)
			if err != nil {
				t.Fatal(err)
			}
			if err := be.MulANS(m, v, y); err != nil {
				t.Fatal(err)
			}
			u := 0
			for u < m.Units()-1 && m.EscOffsets[u+1] == m.EscOffsets[u] {
				u++
			}
			if u == m.Units()-1 {
				t.Fatalf("%s: no unit with escapes", l)
			}
			c := *m
			c.EscOffsets = append([]uint64(nil), m.EscOffsets...)
			c.EscOffsets[u+1]--
			if err := be.MulANS(&c, v, y); err == nil {
				t.Errorf("%s (%s): escape boundary of unit %d moved, no error", l, be.ANSKernel(), u)
			}
		}
	}
}

// TestANSCorruptSIMD: corrupted streams through MulANS (the AVX-512
// decoder where available) are errors, never a panic or an out-of-bounds
// read; most single-bit flips are detected by the state checks (the
// rest mostly hit padding; the container's CRC-32C guards files).
func TestANSCorruptSIMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	be, err := New(Config{ISA: Best(), Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkANSCorrupt(t, be, rng, nil)
}

// checkANSCorrupt encodes one matrix in each layout and requires be's
// MulANS to detect at least 100 of 200 single-bit flips and a truncated
// stream; more, if not nil, runs further checks on each encoding.
func checkANSCorrupt(t *testing.T, be *Backend, rng *rand.Rand, more func(l ans.Layout, m *ans.Matrix, v []int8)) {
	t.Helper()
	w := matvans.Draw(rng, 64*512, 4)
	v := matvans.Draw(rng, 512, 30)
	y := make([]int32, 64)
	for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
		m, err := ans.Encode(w, 64, 512, l)
		if err != nil {
			t.Fatal(err)
		}
		errs := 0
		for trial := 0; trial < 200; trial++ {
			c := *m
			c.Words = append([]uint32(nil), m.Words...)
			c.Words[rng.IntN(len(c.Words))] ^= 1 << rng.IntN(32)
			if err := be.MulANS(&c, v, y); err != nil {
				errs++
				continue
			}
			// Undetected: mostly padding the decoder never reads. rANS has no
			// redundancy beyond the state checks; files carry CRC-32C.
		}
		if errs < 100 {
			t.Errorf("%s (%s): only %d of 200 single-bit corruptions detected", l, be.ANSKernel(), errs)
		}
		c := *m
		c.Words = c.Words[:len(c.Words)-128]
		if err := be.MulANS(&c, v, y); err == nil {
			t.Errorf("%s: truncated words accepted", l)
		}
		if more != nil {
			more(l, m, v)
		}
	}
}

// BenchmarkANSDecode times the fused ANS decode and dot of one 4096x4096
// matrix at sigma 4 (the MatVANS default) on one thread, decoded
// repeatedly (cached after the first call): the decoder's own speed,
// without the chain's DRAM traffic.
func BenchmarkANSDecode(b *testing.B) {
	const d = 4096
	rng := rand.New(rand.NewPCG(7, 8))
	w := matvans.Draw(rng, d*d, 4)
	v := matvans.Draw(rng, d, 40)
	be, err := New(Config{ISA: Best(), Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	y := make([]int32, d)
	for _, l := range []ans.Layout{ans.WarpStripes, ans.WarpRows} {
		m, err := ans.Encode(w, d, d, l)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(l.String(), func(b *testing.B) {
			b.SetBytes(m.CodedBytes())
			for i := 0; i < b.N; i++ {
				if err := be.MulANS(m, v, y); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMulANSBadModel: a model whose tables were changed after Validate
// (or a nil matrix) is an error wrapping ans.ErrModel from every kernel
// set, not an index out of range (found by review: PPF[5] = 200 panicked
// in the table builders and the generic decoder).
func TestMulANSBadModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	w := make([]int8, 64*256)
	for i := range w {
		w[i] = int8(rng.NormFloat64() * 4)
	}
	for _, isa := range ISAs() {
		be, err := New(Config{ISA: isa})
		if err != nil {
			continue // not supported here
		}
		for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
			for name, edit := range map[string]func(m *ans.Model){
				"PPF past the symbols":  func(m *ans.Model) { m.PPF[5] = 200 },
				"PPF of another symbol": func(m *ans.Model) { m.PPF[0] = m.PPF[127] },
				"Cum changed":           func(m *ans.Model) { m.Cum[1]++ },
				"NSym 0":                func(m *ans.Model) { m.NSym = 0 },
			} {
				m, err := ans.Encode(w, 64, 256, l)
				if err != nil {
					t.Fatal(err)
				}
				edit(&m.Model)
				err = be.MulANS(m, make([]int8, 256), make([]int32, 64))
				if !errors.Is(err, ans.ErrModel) {
					t.Errorf("%s %v %s: %v, want ErrModel", isa, l, name, err)
				}
			}
		}
		if err := be.MulANS(nil, nil, nil); err == nil {
			t.Errorf("%s: a nil matrix multiplied", isa)
		}
	}
}

// TestLoadInt8BadShape: shapes whose element count overflows, or whose
// dot products could overflow int32, are errors (4 x 2^62 used to panic
// in a slice expression after rows*cols wrapped).
func TestLoadInt8BadShape(t *testing.T) {
	be, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range [][2]int{{4, 1 << 62}, {0, 5}, {5, -1}, {1, ans.MaxCols + 1}} {
		if _, err := be.LoadInt8(nil, s[0], s[1]); err == nil {
			t.Errorf("LoadInt8(nil, %d, %d): no error", s[0], s[1])
		}
	}
	if _, err := be.LoadInt8(make([]int8, 6), 2, 4); err == nil {
		t.Error("LoadInt8 of 6 values for 2x4: no error")
	}
}

// TestMulANSAllocs: on one thread, MulANS allocates the same whatever the
// number of units (up to the pools' slack). The AVX-512 and AVX2 kernels are called through
// function values, so arguments that are locals of the per-unit code move
// to the heap: six allocations per call of two warp-rows units once cost
// 10-20% of the decode time (found in a profile).
func TestMulANSAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const cols = 512
	v := matvans.Draw(rng, cols, 40)
	for _, isa := range ISAs() {
		be, err := New(Config{ISA: isa, Threads: 1})
		if err != nil {
			continue // not supported here
		}
		for _, l := range []ans.Layout{ans.WarpRows, ans.WarpStripes} {
			var allocs [2]float64
			for i, rows := range []int{64, 1024} {
				m, err := ans.Encode(matvans.Draw(rng, rows*cols, 4), rows, cols, l)
				if err != nil {
					t.Fatal(err)
				}
				y := make([]int32, rows)
				allocs[i] = testing.AllocsPerRun(10, func() {
					if err := be.MulANS(m, v, y); err != nil {
						t.Fatal(err)
					}
				})
			}
			// A few allocations of slack: the escape and stream copies
			// come from sync.Pools, which under -race drop some of what
			// is put back.
			if allocs[1] > allocs[0]+4 {
				t.Errorf("%s %v: %.0f allocations per multiply of 64 rows, %.0f of 1024", isa, l, allocs[0], allocs[1])
			}
		}
	}
}
