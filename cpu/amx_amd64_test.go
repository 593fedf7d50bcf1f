//go:build !noasm && !purego

package cpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"unsafe"
)

// amxModel is the calling convention of asm.Q4A8AmxT<M> in Go (asm
// package doc, "Q4G128 kernels"): what the kernel computes, tile by tile.
// TestAMXLayout runs the family's layout and scatter code on it, so they
// are checked on every machine; TestAMXKernels checks the kernels where
// the CPU has AMX.
func amxModel(M int) kernelFunc {
	return func(w *byte, stride int, sc *float32, z *byte, groups int, act *byte, _ *int32, out *float32, nst int) {
		block := 128*M + 128
		lanes := 16 // out[row*16 + v]; for M = 1 out[row]
		if M == 1 {
			lanes = 1
		}
		for st := 0; st < nst; st++ {
			o := unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(out), 4*16*lanes*st)), 16*lanes)
			for i := 0; i < 16; i++ {
				row := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(w), (16*st+i)*stride)), 64*groups)
				for g := 0; g < groups; g++ {
					a := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(act), g*block)), block)
					s := *(*float32)(unsafe.Add(unsafe.Pointer(sc), 4*(16*st+i+128*g)))
					zb := *(*byte)(unsafe.Add(unsafe.Pointer(z), 8*st+i/2+64*g))
					zi := int32(zb>>(4*(i%2))) & 15
					for v := 0; v < M; v++ {
						var dot int32
						for k := 0; k < 16; k++ {
							for t := 0; t < 4; t++ {
								q := row[64*g+4*k+t]
								dot += int32(q&15) * int32(int8(a[4*M*k+4*v+t]))
								dot += int32(q>>4) * int32(int8(a[64*M+4*M*k+4*v+t]))
							}
						}
						xs := *(*float32)(unsafe.Pointer(&a[128*M+4*v]))
						isum := *(*int32)(unsafe.Pointer(&a[128*M+64+4*v]))
						f := float32(s * xs)
						o[lanes*i+v] = float32(o[lanes*i+v] + float32(f*float32(dot-zi*isum)))
					}
				}
			}
		}
	}
}

// amxFamily returns the AMX family with kernels k(M).
func amxFamily(k func(M int) kernelFunc) *family {
	f := &family{lanes: a8Amx.lanes, amx: true, byM: map[int]kernelFunc{}, maxM: a8Amx.maxM, idx: a8Amx.idx}
	for m := range a8Amx.byM {
		f.byM[m] = k(m)
	}
	return f
}

// checkAMXSet runs every batch on tail shapes through a backend of set.
func checkAMXSet(t *testing.T, set *kernelSet, rng *rand.Rand) {
	for _, threads := range []int{1, 3} {
		be := &Backend{set: set, threads: threads, team: &team{}}
		defer be.Close()
		for _, shape := range [][2]int{{16, 128}, {129, 300}, {300, 4095}, {40, 1000}} {
			m := randMatrix(t, rng, shape[0], shape[1])
			mx, err := be.Load(m)
			if err != nil {
				t.Fatal(err)
			}
			for _, batch := range allBatches {
				checkA8(t, fmt.Sprintf("%s/t%d/%dx%d/b%d", set.name(), threads, shape[0], shape[1], batch), mx, rng, batch)
			}
		}
	}
}

func TestAMXLayout(t *testing.T) {
	set := newKernelSet(AVX512VNNI, nil, amxFamily(amxModel), a32Av512)
	set.label = "amx-model"
	checkAMXSet(t, set, rand.New(rand.NewPCG(5, 6)))
}

// TestAMXKernels checks the AMX kernels against the reference where the
// CPU has AMX and Linux lets the process use it, and that New picks them.
func TestAMXKernels(t *testing.T) {
	set := findSet(AVX512VNNI).amx
	if !hasAll(set.requires) || !amxPermitted() {
		t.Skipf("no AMX here (CPU lacks %v, or the OS did not permit the tile data)", missing(set.requires))
	}
	if os.Getenv(EnvDisable) == "" {
		be, err := New(Config{ISA: AVX512VNNI})
		if err != nil {
			t.Fatal(err)
		}
		if be.set != set {
			t.Errorf("New picked %s, want %s", be.set.name(), set.name())
		}
		be.Close()
	}
	checkAMXSet(t, set, rand.New(rand.NewPCG(7, 8)))
	// Batch 1 runs on the AVX-512 family (a8Amx.b1); the tiles' own
	// one-vector kernel, Q4A8AmxT1, stays checked on a set without it.
	if a8Amx.b1 == nil || a8Amx.tm == nil {
		t.Fatal("the AMX family should run batch 1 on AVX-512")
	}
	own := *a8Amx
	own.b1, own.tm = nil, nil
	tiles := newKernelSet(AVX512VNNI, nil, &own, a32Av512)
	tiles.label = "amx-t1"
	checkAMXSet(t, tiles, rand.New(rand.NewPCG(9, 10)))
}
