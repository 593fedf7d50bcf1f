//go:build !noasm && !purego

package cpu

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/klauspost/cpuid/v2"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout/ans"
)

// ansRequires is what the AnsDot kernels need.
var ansRequires = []string{"AVX", "AVX512F", "AVX512BW", "AVX512DQ", "AVX512VBMI", "AVX512VBMI2", "AVX512VNNI", "BMI2", "POPCNT"}

// ansKernelOK reports whether MulANS has a SIMD decoder: AVX-512 for the
// avx512vnni kernel set, AVX2 for the avx2 and avxvnni sets.
func ansKernelOK(b *Backend) bool { return ans512OK(b) || ansAVX2OK(b) }

func ans512OK(b *Backend) bool { return b.set.isa == AVX512VNNI && hasAll(ansRequires) }

// ansTables returns the AnsDot kernels' tables: frequency, digit minus
// cumulative frequency and value plus 128 by slot digit, the escape
// symbol's value byte being a marker no other symbol uses (a model has at
// most 128 symbols), then 64 copies of the marker.
func ansTables(md *ans.Model) *[512]byte {
	var used [256]bool
	for k := 0; k < md.NSym; k++ {
		if k != md.Escape {
			used[int(md.Value[k])+128] = true
		}
	}
	marker := byte(0)
	for used[marker] {
		marker++
	}
	var t [512]byte
	for d := 0; d < ans.ProbScale; d++ {
		k := int(md.PPF[d])
		t[d] = md.Freq[k]
		t[128+d] = byte(d) - md.Cum[k]
		t[256+d] = byte(int(md.Value[k]) + 128)
		if k == md.Escape {
			t[256+d] = marker
		}
	}
	for i := 384; i < 448; i++ {
		t[i] = marker
	}
	return &t
}

// ansSlackWords is how many words past a unit's end the AVX-512 kernels
// load (never decode): they load the 16 words at the stream position
// before the refill mask is known. Units lie back to back in Words, so
// only a unit ending within ansSlackWords of the end of Words needs a
// padded copy (dotUnitsSIMD makes it).
const ansSlackWords = 16

// ansEscSlack is how many escape bytes past a unit's list the AVX-512
// kernels' escape expand-load may cover. The kernels read escapes from
// ansEscCopy's copies, which end with ansEscSlack written zeros, so that
// the masked load never reaches a page that was never written (on Zen 4 a
// masked load whose window reaches such a page costs hundreds of cycles
// every time, whatever its mask, and never maps the page in).
const ansEscSlack = 64

// ansSlackWordsPool holds the padded copies of words, ansEscPool the
// escape copies.
var ansSlackWordsPool, ansEscPool sync.Pool

// ansEscCopy returns, from ansEscPool, the escapes of units [u0, u1) as
// the AVX-512 kernels read them: each byte XOR 0x80 (the value plus 128,
// as the value table holds them, which saves the kernels an add per half
// step), then ansEscSlack zeros.
// Index 0 is m.Esc[m.EscOffsets[u0]]. The caller puts it back.
func ansEscCopy(m *ans.Matrix, u0, u1 int) *[]int8 {
	e0, e1 := m.EscOffsets[u0], m.EscOffsets[u1]
	p := paddedCopy(&ansEscPool, m.Esc[e0:e1], ansEscSlack)
	e := (*p)[:e1-e0]
	// Eight bytes at a time (the buffer comes from make, so it is 8-byte
	// aligned): a matrix may have tens of thousands of escapes.
	q := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(e))), len(e)/8)
	for i := range q {
		q[i] ^= 0x8080808080808080
	}
	for i := 8 * len(q); i < len(e); i++ {
		e[i] ^= -0x80
	}
	return p
}

// paddedCopy returns a copy of src followed by slack zeros (written, so
// their pages are mapped), from pool; the caller puts it back.
func paddedCopy[T uint32 | int8](pool *sync.Pool, src []T, slack int) *[]T {
	p, _ := pool.Get().(*[]T)
	if p == nil {
		p = new([]T)
	}
	need := len(src) + slack
	if cap(*p) < need {
		*p = make([]T, need)
	}
	*p = (*p)[:need]
	clear((*p)[copy(*p, src):])
	return p
}

type ansDotFunc func(words *[2]*uint32, nwords *[2]int, steps int, tabs *byte, v *int8, acc *int32, esc *[2]*int8, nesc *[2]int, ahead int) int

// ansScratch holds an AVX-512 kernel call's arguments and results. The
// kernels are called through a function value, so escape analysis moves
// whatever they are handed to the heap: one ansScratch per chunk of units,
// instead of six allocations per call (warp rows, one thread: 2,048 calls
// and 12,288 allocations per 4096x4096 matrix, 10-20% of the decode time).
type ansScratch struct {
	words  [2]*uint32
	nwords [2]int
	acc    [2 * ans.Lanes]int32
	esc    [2]*int8
	nesc   [2]int
	none   int8 // the address passed for an empty escape list
}

// dotUnitsSIMD is ans.Matrix.DotUnit for units u0 and u0+1 (n = 1 or 2)
// with the AVX-512 kernel of the variant, which checks the stream bounds,
// the escape counts and the initial and final states, and adds the
// escapes itself; ahead is the kernels' second prefetch distance. The
// offsets must have passed Matrix.Validate. esc8 is an ansEscCopy of
// units from ue (<= u0) on; vsum is the sum of v. out holds n*per
// results; sc is the call's scratch.
func dotUnitsSIMD(m *ans.Matrix, tabs *[512]byte, variant, ahead, u0, n int, esc8 []int8, ue int, v []int8, vsum int32, out []int32, sc *ansScratch) error {
	sc.esc, sc.nesc = [2]*int8{&sc.none, &sc.none}, [2]int{}
	for k := 0; k < n; k++ {
		u := u0 + k
		w0, w1 := m.Offsets[u], m.Offsets[u+1]
		sc.words[k], sc.nwords[k] = &m.Words[w0], int(w1-w0)
		if w1+ansSlackWords > uint64(len(m.Words)) {
			p := paddedCopy(&ansSlackWordsPool, m.Words[w0:w1], ansSlackWords)
			defer ansSlackWordsPool.Put(p)
			sc.words[k] = &(*p)[0]
		}
		e0, e1 := m.EscOffsets[u], m.EscOffsets[u+1]
		if e1 > e0 {
			sc.esc[k], sc.nesc[k] = &esc8[e0-m.EscOffsets[ue]], int(e1-e0)
		}
	}
	stripes := m.Layout == ans.WarpStripes
	steps := m.Cols / 128
	fn := ansDotFuncs[variant][n-1][0]
	if stripes {
		steps, fn = m.Cols/4, ansDotFuncs[variant][n-1][1]
	}
	got := fn(&sc.words, &sc.nwords, steps, &tabs[0], &v[0], &sc.acc[0], &sc.esc, &sc.nesc, ahead)
	per := 1
	if stripes {
		per = ans.Lanes
	}
	switch got {
	case -1:
		return fmt.Errorf("%w: units %d..%d: stream exhausted", ans.ErrCorrupt, u0, u0+n-1)
	case -2, -3: // escape counts off, or a bad state: the generic decoder decodes (and names the error)
		for k := 0; k < n; k++ {
			if err := m.DotUnit(u0+k, v, out[k*per:]); err != nil {
				return err
			}
		}
		return fmt.Errorf("%w: units %d..%d: escapes or coder states do not match the stream", ans.ErrCorrupt, u0, u0+n-1)
	}
	for k := 0; k < n; k++ {
		a := sc.acc[k*ans.Lanes : (k+1)*ans.Lanes]
		if stripes {
			for t := range a {
				out[k*ans.Lanes+t] = a[t] - 128*vsum
			}
			continue
		}
		sum := -128 * vsum // each input is in one lane's sum
		for _, x := range a {
			sum += x
		}
		out[k] = sum
	}
	return nil
}

// ansDotFuncs are the kernels by variant, units (1, 2) and layout (rows,
// stripes).
var ansDotFuncs = [3][2][2]ansDotFunc{
	ansMul:   {{asm.AnsDotRowsX1Avx512, asm.AnsDotStripesX1Avx512}, {asm.AnsDotRowsX2Avx512, asm.AnsDotStripesX2Avx512}},
	ansMadd:  {{asm.AnsDotRowsX1MaddAvx512, asm.AnsDotStripesX1MaddAvx512}, {asm.AnsDotRowsX2MaddAvx512, asm.AnsDotStripesX2MaddAvx512}},
	ansMaddQ: {{asm.AnsDotRowsX1MaddQAvx512, asm.AnsDotStripesX1MaddQAvx512}, {asm.AnsDotRowsX2MaddQAvx512, asm.AnsDotStripesX2MaddQAvx512}},
}

// ansVariant is the decoder variant for models of more than one symbol:
// on Intel cores, where VPMULLD and VPMULLQ are multi-uop with long
// latencies, the multiply-add one; elsewhere multiply-adds with VPMULLQ
// (Zen 5 runs VPMULLQ two per cycle). QGEMV_ANS_KERNEL=mul, =madd or
// =maddq forces one.
var ansVariant = func() int {
	switch os.Getenv("QGEMV_ANS_KERNEL") {
	case "mul":
		return ansMul
	case "madd":
		return ansMadd
	case "maddq":
		return ansMaddQ
	}
	if cpuid.CPU.VendorID == cpuid.Intel {
		return ansMadd
	}
	return ansMaddQ
}()

// mulANSSIMD runs the AVX-512 (or AVX2) decoder over units in parallel;
// MulANS has checked m (Matrix.Check).
func (b *Backend) mulANSSIMD(m *ans.Matrix, v []int8, y []int32) error {
	if !ans512OK(b) {
		return b.mulANSAVX2(m, v, y)
	}
	tabs := ansTables(&m.Model)
	variant := ansMul
	if m.Model.NSym > 1 { // frequency 128 (one symbol) needs the VPMULLD kernels
		variant = ansVariant
	}
	// Warp rows: a unit's stream is a few KiB, so each step also
	// prefetches the units of the next call, two units' average length
	// ahead. Warp stripes (streams of tens of KiB) gain nothing from it:
	// ahead 0 prefetches the line in use.
	ahead := 0
	if m.Layout == ans.WarpRows {
		ahead = 2 * 4 * len(m.Words) / m.Units()
	}
	per := 1
	if m.Layout == ans.WarpStripes {
		per = ans.Lanes
	}
	var vsum int32 // the kernels' values are plus 128: 128*vsum comes off
	for _, x := range v {
		vsum += int32(x)
	}
	return b.parallelChunks(m.Units(), max(2, 64/per), func(u0, u1 int) error {
		out := make([]int32, 2*ans.Lanes)
		sc := new(ansScratch)
		esc := ansEscCopy(m, u0, u1)
		defer ansEscPool.Put(esc)
		for u := u0; u < u1; u += 2 {
			n := min(2, u1-u)
			if err := dotUnitsSIMD(m, tabs, variant, ahead, u, n, *esc, u0, v, vsum, out, sc); err != nil {
				return err
			}
			copy(y[u*per:(u+n)*per], out[:n*per])
		}
		return nil
	})
}
