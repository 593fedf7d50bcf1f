//go:build !noasm && !purego

package cpu

import (
	"unsafe"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout/codebook"
)

type cbLookupFunc func(words *uint32, cbstride int, nper int, tab *float32, tabstride int, segbytes int, x *float32, v int, spg int, scales *float32, sstride int, acc *float32)

// cbKernels are a kernel set's codebook kernels: the Psumbook builder and
// the lookup (psum) and dequantize kernels by codebook count.
type cbKernels struct {
	lanes    int
	tableFn  func(ct *float32, x *float32, out *float32, nseg int, k int, v int)
	psum     map[[2]int]cbLookupFunc // by (bits, codebooks)
	dequant  map[[2]int]cbLookupFunc
	requires []string
}

// cbSets maps a backend's kernel set to its codebook kernels (checked
// against their Requires lines by TestRequiresCoverKernels).
var cbSets = map[ISA]*cbKernels{
	AVX512VNNI: {lanes: 16, tableFn: asm.CbTableAvx512,
		psum:     map[[2]int]cbLookupFunc{{4, 1}: asm.CbPsumB4M1Avx512, {6, 1}: asm.CbPsumB6M1Avx512, {8, 1}: asm.CbPsumB8M1Avx512, {10, 1}: asm.CbPsumB10M1Avx512, {12, 1}: asm.CbPsumB12M1Avx512, {4, 2}: asm.CbPsumB4M2Avx512, {6, 2}: asm.CbPsumB6M2Avx512, {8, 2}: asm.CbPsumB8M2Avx512, {10, 2}: asm.CbPsumB10M2Avx512, {12, 2}: asm.CbPsumB12M2Avx512},
		dequant:  map[[2]int]cbLookupFunc{{4, 1}: asm.CbDequantB4M1Avx512, {6, 1}: asm.CbDequantB6M1Avx512, {8, 1}: asm.CbDequantB8M1Avx512, {10, 1}: asm.CbDequantB10M1Avx512, {12, 1}: asm.CbDequantB12M1Avx512, {4, 2}: asm.CbDequantB4M2Avx512, {6, 2}: asm.CbDequantB6M2Avx512, {8, 2}: asm.CbDequantB8M2Avx512, {10, 2}: asm.CbDequantB10M2Avx512, {12, 2}: asm.CbDequantB12M2Avx512},
		requires: []string{"AVX", "AVX512F", "FMA3"}},
}

func init() {
	avx2 := &cbKernels{lanes: 8, tableFn: asm.CbTableAvx2,
		psum:     map[[2]int]cbLookupFunc{{4, 1}: asm.CbPsumB4M1Avx2, {6, 1}: asm.CbPsumB6M1Avx2, {8, 1}: asm.CbPsumB8M1Avx2, {10, 1}: asm.CbPsumB10M1Avx2, {12, 1}: asm.CbPsumB12M1Avx2, {4, 2}: asm.CbPsumB4M2Avx2, {6, 2}: asm.CbPsumB6M2Avx2, {8, 2}: asm.CbPsumB8M2Avx2, {10, 2}: asm.CbPsumB10M2Avx2, {12, 2}: asm.CbPsumB12M2Avx2},
		dequant:  map[[2]int]cbLookupFunc{{4, 1}: asm.CbDequantB4M1Avx2, {6, 1}: asm.CbDequantB6M1Avx2, {8, 1}: asm.CbDequantB8M1Avx2, {10, 1}: asm.CbDequantB10M1Avx2, {12, 1}: asm.CbDequantB12M1Avx2, {4, 2}: asm.CbDequantB4M2Avx2, {6, 2}: asm.CbDequantB6M2Avx2, {8, 2}: asm.CbDequantB8M2Avx2, {10, 2}: asm.CbDequantB10M2Avx2, {12, 2}: asm.CbDequantB12M2Avx2},
		requires: []string{"AVX", "AVX2", "FMA3"}}
	cbSets[AVX2], cbSets[AVXVNNI] = avx2, avx2
}

func cbKernelsFor(be *Backend) *cbKernels {
	k := cbSets[be.set.isa]
	if k == nil || !hasAll(k.requires) {
		return nil
	}
	return k
}

// table builds nseg segments of one codebook's Psumbook.
func (k *cbKernels) table(ct, x, out []float32, nseg, K, v int) {
	_ = x[nseg*v-1]
	_ = out[nseg*K-1]
	k.tableFn(&ct[0], &x[0], &out[0], nseg, K, v)
}

// cbTableBudget bounds the Psumbook bytes one column tile uses (all
// codebooks), so that the tile's tables stay in L2 while a thread's rows
// stream their codes.
const cbTableBudget = 128 << 10

// mulSIMD runs the assembly kernels: threads take contiguous ranges of
// 32-row tiles and walk the columns in tiles whose tables fit
// cbTableBudget, accumulating into acc (PRows values).
func (mx *CBMatrix) mulSIMD(acc, xp []float32, tab [][]float32) {
	c, k := mx.c, mx.kern
	K, V, nv := 1<<c.B, c.V, c.NV()
	spg := c.G / V
	P := codebook.CodesPerLane(c.B) // segments per kernel period
	T := nv
	if !mx.dequant {
		if tmax := cbTableBudget / (4 * K * c.M); tmax < nv {
			if spg <= tmax {
				T = tmax / spg * spg
			} else {
				T = 1 // a power of two dividing spg (a power of two)
				for T*2 <= tmax {
					T *= 2
				}
			}
			T = max(P, T/P*P) // whole periods (P and spg are powers of two)
		}
	}
	wl := c.WL()
	fn := k.psum[[2]int{c.B, c.M}]
	base, stride := mx.flatTables(tab)
	if mx.dequant {
		fn = k.dequant[[2]int{c.B, c.M}]
		base, stride = &mx.centFlat[0], 4*K*V
	}
	_ = mx.b.parallelFor(c.PRows/32, 1, func(t0, t1 int) error {
		for j0 := 0; j0 < nv; j0 += T {
			j1 := min(j0+T, nv)
			n := j1 - j0
			sp := min(spg, n) // a tile inside one group ends its partial group
			segBytes := 4 * K
			tp := unsafe.Add(unsafe.Pointer(base), 4*j0*K)
			if mx.dequant {
				segBytes, tp = 0, unsafe.Pointer(base)
			}
			for t := t0; t < t1; t++ {
				for h := 0; h < 32; h += k.lanes {
					r := t*32 + h
					fn(&c.Words[t*c.M*wl*32+j0*c.B/32*32+h], wl*128, n/P, (*float32)(tp), stride, segBytes,
						&xp[j0*V], V, sp, &mx.scales[(j0/spg)*c.PRows+r], 4*c.PRows, &acc[r])
				}
			}
		}
		return nil
	})
}

// flatTables returns the first table and the byte stride between
// codebooks' tables (the tables are one allocation, see tables).
func (mx *CBMatrix) flatTables(tab [][]float32) (*float32, int) {
	if len(tab) == 0 {
		return nil, 0
	}
	if len(tab) == 1 {
		return &tab[0][0], 0
	}
	return &tab[0][0], int(uintptr(unsafe.Pointer(&tab[1][0])) - uintptr(unsafe.Pointer(&tab[0][0])))
}
