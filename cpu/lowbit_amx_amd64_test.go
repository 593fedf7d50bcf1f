//go:build !noasm && !purego

package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/qgemv/qgemv/layout"
)

// bitsAmxModel is the contract of asm.Bits<n>A8Amx[Meta16]T<M> in Go
// (asm package doc, "Bits int8 kernels"): what the kernel computes, tile
// by tile, from the words, the AVX-512 kernel's metadata and the B-tile
// activations. TestBitsAMXLayout runs the driver's layout and scatter
// code on it, so they are checked on every AVX-512 machine;
// TestBitsAMXKernels checks the kernels where the CPU has AMX.
func bitsAmxModel(n, sub int, meta16 bool, M int) bitsA8Func {
	return bitsTileModel(n, sub, meta16, M, false)
}

// bitsT16Model is the contract of asm.Bits<n>A8[Meta16]T<M>Avx512: the
// AMX kernels' with the activations vector-major and out vector-major.
func bitsT16Model(n, sub int, meta16 bool, M int) bitsA8Func {
	return bitsTileModel(n, sub, meta16, M, true)
}

func bitsTileModel(n, sub int, meta16 bool, M int, t16 bool) bitsA8Func {
	pos := func(v, d int) int { return d*4*M + 4*v }
	if t16 {
		pos = func(v, d int) int { return 128*v + 4*d }
	}
	return func(w *byte, stride int, meta *byte, act *byte, chunks int, out *float32, ntiles int, _ *byte, _ *int32) {
		bpc := 8 / n
		L := bpc * sub // groups per chunk
		r := 16 / L    // rows per metadata tile
		mb := 128
		if meta16 {
			mb = 64
		}
		blk := amxBlockBytes(M)
		perm := [4]int{3, 2, 1, 0} // the gen tables, written out: the driver's copy is under test
		if n == 4 {
			perm = [4]int{3, 1, 2, 0}
		}
		lanes := 16 // out[row*16 + v]; for M = 1 out[row]
		if M == 1 {
			lanes = 1
		}
		o := unsafe.Slice(out, 16*max(lanes, M)*ntiles)
		for T := 0; T < ntiles; T++ {
			for i := 0; i < 16; i++ {
				words := unsafe.Slice((*uint32)(unsafe.Add(unsafe.Pointer(w), (16*T+i)*stride)), 32*chunks)
				var acc [16]float32
				for k := 0; k < chunks; k++ {
					for j := 0; j < L; j++ {
						b := j / sub // the group's block
						a := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(act), (k*L+j)*blk)), blk)
						m := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(meta), ((16/r*T+i/r)*chunks+k)*mb)), mb)
						lane := (i%r)*L + j
						var s float32
						var z int32
						if meta16 {
							s = layout.FP16(getU16(m[2*lane:])).Float32()
							z = int32(int16(getU16(m[32+2*lane:])))
						} else {
							s = *(*float32)(unsafe.Pointer(&m[4*lane]))
							z = *(*int32)(unsafe.Pointer(&m[64+4*lane]))
						}
						for v := 0; v < M; v++ {
							var dot int32
							for h := 0; h < 2; h++ {
								for t := 0; t < 16; t++ {
									word := words[32*k+16*h+t]
									for p, q := range perm {
										plane := q
										if n == 4 { // block b holds planes 4b..4b+3
											plane += 4 * b
										}
										code := word >> (32 - n*(plane+1)) & (1<<n - 1)
										dot += int32(code) * int32(int8(a[pos(v, 16*h+t)+p]))
									}
								}
							}
							xs := *(*float32)(unsafe.Pointer(&a[128*M+4*v]))
							isum := *(*int32)(unsafe.Pointer(&a[128*M+64+4*v]))
							f := float32(s * xs)
							acc[v] = float32(acc[v] + float32(f*float32(dot-z*isum)))
						}
					}
				}
				if t16 {
					for v := 0; v < M; v++ {
						o[(T*M+v)*16+i] = acc[v]
					}
					continue
				}
				copy(o[(16*T+i)*lanes:], acc[:lanes])
			}
		}
	}
}

// checkBitsTiles runs batches 1..16 (rows-in-lanes kernels: 2..16)
// through the AMX path, or with t16 the AVX-512 rows-in-lanes path, of be
// on tail shapes, 8 and 4 bits, groups of 32, 64, 128 and 256 (t16: 128
// and 256), both metadata layouts and act order, against the exact
// reference; kernels, if set, replaces the path's kernels (the model).
func checkBitsTiles(t *testing.T, be *Backend, t16 bool, kernels func(n, sub int, meta16 bool, M int) bitsA8Func, rng *rand.Rand) {
	// Every kernel, also those of batches the backend leaves to others.
	from, fromT := bitsAmxFrom, bitsT16From
	bitsAmxFrom, bitsT16From = map[int]int{1: 1, 2: 1, 4: 1}, map[int]int{8: 2, 4: 2}
	defer func() { bitsAmxFrom, bitsT16From = from, fromT }()
	for _, n := range []int{8, 4} {
		shapes := [][2]int{{16, 256}, {37, 512}, {129, 1000}}
		batches := []int{1, 2, 3, 4, 7, 8, 13, 16}
		if t16 {
			batches = batches[1:]
		}
		switch {
		case raceEnabled: // the model under -race is slow; its layout is the same
			shapes, batches = shapes[1:2], []int{1, 3, 16}
		case kernels == nil: // the kernels: a longer row too
			shapes = append(shapes, [2]int{300, 4096})
		}
		for _, shape := range shapes {
			type mode struct {
				name string
				fp32 bool
				zero float32 // set on row 5, group 1 (0: keep)
				perm bool
				g    int
			}
			modes := []mode{{"wide-zero", false, 40000, false, 256}, {"act-order", false, 0, true, 128}}
			for _, g := range []int{32, 64, 128} {
				modes = append(modes, mode{"fp16", false, -300, false, g}, mode{"fp32", true, 0, false, g}, mode{"wide-zero", false, 40000, false, g})
			}
			for _, mode := range modes {
				if t16 && mode.g < 128 {
					continue
				}
				rows, cols := shape[0], shape[1]
				b := importedBits(t, rng, rows, cols, n, mode.g, false, mode.perm, mode.fp32)
				if mode.zero != 0 && rows > 5 && b.Groups() > 1 {
					b.Zeros16[1*b.PRows+5] = layout.ToFP16(mode.zero)
				}
				name := fmt.Sprintf("%s/%dx%d/%s/t%d", b.Name(), rows, cols, mode.name, be.threads)
				mx, err := be.LoadBits(b)
				if err != nil {
					t.Fatal(err)
				}
				s := mx.simd
				ks := &s.amx
				if t16 {
					ks = &s.t16
				}
				if s == nil || *ks == nil {
					t.Fatalf("%s: no batch kernels", name)
				}
				if kernels != nil { // a map of its own: *ks is bitsAmxKernels' or bitsT16Kernels'
					m16 := s.metaBlock == 64
					model := map[int]bitsA8Func{}
					for M := range *ks {
						model[M] = kernels(n, s.sub, m16, M)
					}
					*ks = model
				}
				for _, batch := range batches {
					x := randVec(rng, batch*cols)
					full, dst := guarded(batch * rows)
					if err := mx.MulA8(dst, x, batch); err != nil {
						t.Fatal(err)
					}
					checkGuards(t, full, batch*rows)
					var gather func(dst, x []float32)
					if mode.perm {
						gather = mx.gather
					}
					checkA8Exact(t, fmt.Sprintf("%s/b%d", name, batch), b.DotA8Exact, gather, dst, x, batch, rows, cols, b.PCols)
				}
				mx.Close()
			}
		}
	}
}

// TestBitsAMXLayout checks the AMX driver (B-tile layout, metadata
// addressing, scatter) on the kernels' Go model.
func TestBitsAMXLayout(t *testing.T) {
	if !hasAll(bitsA8Kernels.requires) {
		t.Skip("no AVX-512 VNNI + VBMI")
	}
	set := *findSet(AVX512VNNI)
	set.tiles = true
	rng := rand.New(rand.NewPCG(41, 42))
	for _, threads := range []int{1, 3} {
		be := &Backend{set: &set, threads: threads, team: &team{}}
		checkBitsTiles(t, be, false, bitsAmxModel, rng)
		be.Close()
	}
}

// TestBitsAMXKernels checks the Bits AMX kernels against the reference
// where the CPU has AMX and Linux lets the process use it.
func TestBitsAMXKernels(t *testing.T) {
	set := findSet(AVX512VNNI).amx
	if !hasAll(set.requires) || !amxPermitted() {
		t.Skipf("no AMX here (CPU lacks %v, or the OS did not permit the tile data)", missing(set.requires))
	}
	rng := rand.New(rand.NewPCG(43, 44))
	for _, threads := range []int{1, 3} {
		be := &Backend{set: set, threads: threads, team: &team{}}
		checkBitsTiles(t, be, false, nil, rng)
		be.Close()
	}
}

// TestBitsT16Layout checks the rows-in-lanes driver on the kernels' Go
// model, TestBitsT16Kernels the kernels.
func TestBitsT16Layout(t *testing.T) {
	if !hasAll(bitsT16Requires) {
		t.Skipf("no %v", missing(bitsT16Requires))
	}
	rng := rand.New(rand.NewPCG(45, 46))
	for _, threads := range []int{1, 3} {
		be := &Backend{set: findSet(AVX512VNNI), threads: threads, team: &team{}}
		checkBitsTiles(t, be, true, bitsT16Model, rng)
		be.Close()
	}
}

func TestBitsT16Kernels(t *testing.T) {
	if !hasAll(bitsT16Requires) {
		t.Skipf("no %v", missing(bitsT16Requires))
	}
	rng := rand.New(rand.NewPCG(47, 48))
	for _, threads := range []int{1, 3} {
		be := &Backend{set: findSet(AVX512VNNI), threads: threads, team: &team{}}
		checkBitsTiles(t, be, true, nil, rng)
		be.Close()
	}
}
