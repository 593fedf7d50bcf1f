//go:build !noasm && !purego

package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkYMMPrep times the YMM Bits A8 kernels' activation layout of
// one vector (the part of every multiply that runs before its rows).
func BenchmarkYMMPrep(b *testing.B) {
	be, err := New(Config{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	for _, n := range []int{4, 2, 8} {
		for _, cols := range []int{4096, 14336} {
			rng := rand.New(rand.NewPCG(1, 2))
			s := newBitsYMM(be, importedBits(b, rng, 16, cols, n, 128, false, false, false))
			if s == nil {
				b.Skip("no YMM kernel on this CPU")
			}
			xq := make([]int8, cols)
			for i := range xq {
				xq[i] = int8(rng.IntN(256) - 128)
			}
			xs := make([]float32, cols/128)
			act := make([]byte, s.chunks*s.actChunk)
			b.Run(fmt.Sprintf("Bits%dG128/%d", n, cols), func(b *testing.B) {
				b.SetBytes(int64(cols))
				for i := 0; i < b.N; i++ {
					s.prep(act, xq, xs, 0, s.chunks)
				}
			})
		}
	}
}

// TestYMMGathers: for every YMM Bits A8 activation order (Bits 8, 4, 2, 1;
// units of 128, 64, 32 columns), the copy ymmGather picks writes the byte
// gather's bytes, and Bits8 with units of 128 (whose dwords take columns
// 32 apart) goes through the interleaving assembly where the CPU has it.
func TestYMMGathers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{8, 4, 2, 1} {
		for _, unit := range []int{128, 64, 32} {
			src := ymmActSources(n, unit)
			if n == 8 && unit == 128 && hasAll(interleaveRequires) && (dwordRuns(src) != nil || interleaveRuns(src, int32(len(src))) == nil) {
				t.Fatalf("Bits8 units of 128: the order is not four 16-byte runs per block")
			}
			x := make([]int8, len(src))
			for i := range x {
				x[i] = int8(rng.IntN(256) - 128)
			}
			want, got := make([]byte, len(src)), guardedBytes(len(src))
			gatherActs(want, x, src)
			ymmGather(src)(got, x)
			checkGuarded(t, fmt.Sprintf("Bits%d units of %d", n, unit), got, want)
		}
	}
}

// TestSparseActs: the Sparse12 YMM activation copy equals the definition
// (byte v of quarter h: pair d*32 + 8h + 4(v/16) + v%4, d = (v%16)/4, even
// column then odd, plus 128 for the AVX-VNNI kernel) byte for byte.
func TestSparseActs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := make([]int8, 256)
	for i := range x {
		x[i] = int8(rng.IntN(256) - 128)
	}
	for _, bias := range []int{0, 128} {
		want := make([]byte, 256)
		for h := 0; h < 4; h++ {
			for v := 0; v < 32; v++ {
				p := (v%16)/4*32 + 8*h + 4*(v/16) + v%4
				want[64*h+v] = byte(int(x[2*p]) + bias)
				want[64*h+32+v] = byte(int(x[2*p+1]) + bias)
			}
		}
		got := guardedBytes(256)
		sparseActs(got, x, uint32(bias/128)*0x80808080)
		checkGuarded(t, fmt.Sprintf("bias %d", bias), got, want)
	}
}

// BenchmarkSparseActs times the Sparse12 YMM activation copy of one
// vector of 4096 columns (16 chunks).
func BenchmarkSparseActs(b *testing.B) {
	x := make([]int8, 4096)
	a := make([]byte, 4096)
	b.SetBytes(4096)
	for i := 0; i < b.N; i++ {
		for k := 0; k < 16; k++ {
			sparseActs(a[k*256:(k+1)*256], x[k*256:(k+1)*256], 0x80808080)
		}
	}
}
