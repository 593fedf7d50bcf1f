//go:build !noasm && !purego

package cpu

import (
	"fmt"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout/ans"
)

// ansRequires is what the AnsDot kernels need.
var ansRequires = []string{"AVX", "AVX512F", "AVX512BW", "AVX512DQ", "AVX512VBMI", "AVX512VNNI", "BMI1", "BMI2", "POPCNT"}

func ansKernelOK(b *Backend) bool { return b.set.isa == AVX512VNNI && hasAll(ansRequires) }

// ansTables returns the AnsDot kernels' four digit tables.
func ansTables(md *ans.Model) *[512]byte {
	var t [512]byte
	for d := 0; d < ans.ProbScale; d++ {
		k := int(md.PPF[d])
		t[d] = md.Freq[k]
		t[128+d] = byte(d) - md.Cum[k]
		if k == md.Escape {
			t[256+d], t[384+d] = 128, 1
		} else {
			t[256+d] = byte(int(md.Value[k]) + 128)
		}
	}
	return &t
}

// dotUnitSIMD is ans.Matrix.DotUnit with the AVX-512 kernel: the same
// checks (bounds, final states, escape count), escapes added afterwards.
func dotUnitSIMD(m *ans.Matrix, tabs *[512]byte, u int, v []int8, vsum []int32, out []int32, escBuf []uint32) error {
	w0, w1 := m.Offsets[u], m.Offsets[u+1]
	e0, e1 := m.EscOffsets[u], m.EscOffsets[u+1]
	if w1 < w0 || w1 > uint64(len(m.Words)) || w1-w0 < 2*ans.Lanes || e1 < e0 || e1 > uint64(len(m.Esc)) {
		return fmt.Errorf("%w: unit %d: words [%d, %d) of %d, escapes [%d, %d) of %d", ans.ErrCorrupt, u, w0, w1, len(m.Words), e0, e1, len(m.Esc))
	}
	words := m.Words[w0:w1]
	var states [ans.Lanes]uint64
	var acc [ans.Lanes]int32
	for t := range states {
		states[t] = uint64(words[2*t]) | uint64(words[2*t+1])<<32
		if states[t] < ans.StateLow || states[t] >= 1<<63 {
			return fmt.Errorf("%w: unit %d lane %d: initial state %#x out of range", ans.ErrCorrupt, u, t, states[t])
		}
	}
	stripes := m.Layout == ans.WarpStripes
	steps := m.Cols / 128
	fn := asm.AnsDotRowsAvx512
	if stripes {
		steps, fn = m.Cols/4, asm.AnsDotStripesAvx512
	}
	rest := words[2*ans.Lanes:]
	var wp *uint32
	if len(rest) > 0 {
		wp = &rest[0]
	} else {
		wp = &words[0] // never read: nwords is 0
	}
	n := fn(wp, len(rest), steps, &tabs[0], &v[0], &states[0], &acc[0], &escBuf[0], len(escBuf))
	switch {
	case n == -1:
		return fmt.Errorf("%w: unit %d: stream exhausted", ans.ErrCorrupt, u)
	case n == -2: // more escapes than the buffer holds: the generic decoder
		return m.DotUnit(u, v, out)
	case n != int(e1-e0):
		return fmt.Errorf("%w: unit %d: %d escapes decoded, %d stored", ans.ErrCorrupt, u, n, e1-e0)
	}
	for t, x := range states {
		if x != ans.StateLow {
			return fmt.Errorf("%w: unit %d lane %d: final state %#x, want %#x", ans.ErrCorrupt, u, t, x, uint64(ans.StateLow))
		}
	}
	esc := m.Esc[e0:e1]
	for i, ev := range escBuf[:n] {
		j, t, e := int(ev>>8), int(ev>>2&31), int(ev&3)
		c := 4*j + e
		if !stripes {
			c = 128*j + 4*t + e
		}
		acc[t] += int32(esc[i]) * int32(v[c])
	}
	if stripes {
		for t := range acc {
			out[t] = acc[t] - 128*vsum[0]
		}
		return nil
	}
	var s int32
	for t := range acc {
		s += acc[t] - 128*vsum[t]
	}
	out[0] = s
	return nil
}

// mulANSSIMD runs the AVX-512 decoder over units in parallel.
func (b *Backend) mulANSSIMD(m *ans.Matrix, v []int8, y []int32) error {
	if err := m.Validate(); err != nil {
		return err
	}
	tabs := ansTables(&m.Model)
	per := 1
	vsum := make([]int32, ans.Lanes) // per lane: the inputs it multiplies
	if m.Layout == ans.WarpStripes {
		per = ans.Lanes
		for _, x := range v {
			vsum[0] += int32(x)
		}
	} else {
		for c, x := range v {
			vsum[c%128/4] += int32(x)
		}
	}
	return b.parallelFor(m.Units(), max(1, 64/per), func(u0, u1 int) error {
		out := make([]int32, ans.Lanes)
		escBuf := make([]uint32, 4096)
		for u := u0; u < u1; u++ {
			if err := dotUnitSIMD(m, tabs, u, v, vsum, out, escBuf); err != nil {
				return err
			}
			copy(y[u*per:(u+1)*per], out[:per])
		}
		return nil
	})
}
