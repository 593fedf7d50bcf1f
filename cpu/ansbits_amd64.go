//go:build !noasm && !purego

package cpu

import (
	"fmt"
	"unsafe"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout/ans"
)

// ansDecodeRequires is what the AnsDecodeRows kernels need (those of
// AnsDot without VNNI).
var ansDecodeRequires = []string{"AVX", "AVX512F", "AVX512BW", "AVX512DQ", "AVX512VBMI", "AVX512VBMI2", "BMI2", "POPCNT"}

type ansDecodeFunc func(words *[2]*uint32, nwords *[2]int, steps int, tabs *byte, out *[2]*byte, esc *[2]*int8, nesc *[2]int, ahead int) int

// ansDecodeFuncs are the decoders by variant and units (1, 2).
var ansDecodeFuncs = [3][2]ansDecodeFunc{
	ansMul:   {asm.AnsDecodeRowsX1Avx512, asm.AnsDecodeRowsX2Avx512},
	ansMadd:  {asm.AnsDecodeRowsX1MaddAvx512, asm.AnsDecodeRowsX2MaddAvx512},
	ansMaddQ: {asm.AnsDecodeRowsX1MaddQAvx512, asm.AnsDecodeRowsX2MaddQAvx512},
}

// ansDecodeScratch holds a decoder call's arguments (the kernels are
// called through a function value: see ansScratch).
type ansDecodeScratch struct {
	words  [2]*uint32
	nwords [2]int
	out    [2]*byte
	esc    [2]*int8
	nesc   [2]int
	none   int8
}

// ansDecoderFor returns the AVX-512 decoder of m on backends of the
// avx512vnni kernel set, else nil (the generic decoder).
func ansDecoderFor(b *Backend, m *ans.Bits) *ansBitsDecoder {
	if b.set.isa != AVX512VNNI || !hasAll(ansDecodeRequires) {
		return nil
	}
	c := m.Code
	tabs := ansTables(&c.Model)
	variant := ansMul
	if c.Model.NSym > 1 { // frequency 128 (one symbol) needs the VPMULLD kernels
		variant = ansVariant
	}
	ahead := 2 * 4 * len(c.Words) / c.Units() // the next call's units (see mulANSSIMD)
	steps := c.Cols / 128
	n := c.Cols / 4 // words per unit
	return &ansBitsDecoder{name: string(b.set.isa), decode: func(u0, units int, w []uint32) error {
		if len(w) < units*n {
			return fmt.Errorf("cpu: ANS decode: %d words for %d units of %d", len(w), units, n)
		}
		esc := ansEscCopy(c, u0, u0+units)
		defer ansEscPool.Put(esc)
		sc := new(ansDecodeScratch)
		for u := u0; u < u0+units; u += 2 {
			k := min(2, u0+units-u)
			sc.esc, sc.nesc = [2]*int8{&sc.none, &sc.none}, [2]int{}
			for j := 0; j < k; j++ {
				v := u + j
				w0, w1 := c.Offsets[v], c.Offsets[v+1]
				sc.words[j], sc.nwords[j] = &c.Words[w0], int(w1-w0)
				if w1+ansSlackWords > uint64(len(c.Words)) {
					p := paddedCopy(&ansSlackWordsPool, c.Words[w0:w1], ansSlackWords)
					defer ansSlackWordsPool.Put(p)
					sc.words[j] = &(*p)[0]
				}
				if e0, e1 := c.EscOffsets[v], c.EscOffsets[v+1]; e1 > e0 {
					sc.esc[j], sc.nesc[j] = &(*esc)[e0-c.EscOffsets[u0]], int(e1-e0)
				}
				sc.out[j] = (*byte)(unsafe.Pointer(&w[(v-u0)*n]))
			}
			switch ansDecodeFuncs[variant][k-1](&sc.words, &sc.nwords, steps, &tabs[0], &sc.out, &sc.esc, &sc.nesc, ahead) {
			case 0:
			case -1:
				return fmt.Errorf("cpu: %s: %w: units %d..%d: stream exhausted", m.Name(), ans.ErrCorrupt, u, u+k-1)
			default: // escapes or states off: the generic decoder names the error
				for j := 0; j < k; j++ {
					if err := m.DecodeUnitWords(u+j, w[(u+j-u0)*n:]); err != nil {
						return fmt.Errorf("cpu: %s: %w", m.Name(), err)
					}
				}
				return fmt.Errorf("cpu: %s: %w: units %d..%d: escapes or coder states do not match the stream", m.Name(), ans.ErrCorrupt, u, u+k-1)
			}
		}
		return nil
	}}
}

// withoutLut returns a unless it runs the table kernels, which read a
// packed copy of the words made at load: an entropy-coded matrix has no
// stored words to pack, and the one-row kernels do not exist for those
// shapes, so it multiplies float activations with the generic kernel.
func withoutLut(a *bitsA32) *bitsA32 {
	if a != nil && a.lut != nil {
		return nil
	}
	return a
}
