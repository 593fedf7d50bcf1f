//go:build !noasm && !purego

package cpu

import (
	"fmt"

	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout/ans"
)

// ansAVX2Requires is what the AnsDot*Avx2 kernels need.
var ansAVX2Requires = []string{"AVX", "AVX2", "POPCNT"}

func ansAVX2OK(b *Backend) bool {
	return (b.set.isa == AVX2 || b.set.isa == AVXVNNI) && hasAll(ansAVX2Requires)
}

// ansAVX2Funcs are the AVX2 kernels by layout (rows, stripes).
var ansAVX2Funcs = [2]func(words *uint32, nwords int, steps int, tab *uint32, v *int8, acc *int32, esc *uint32, escCap int) int{
	asm.AnsDotRowsAvx2, asm.AnsDotStripesAvx2,
}

// ansAVX2Table returns the AVX2 kernels' digit table: per slot digit the
// symbol frequency, digit - cum, 0x80 for the escape symbol, the value (0
// for the escape symbol), one byte each.
func ansAVX2Table(md *ans.Model) *[ans.ProbScale]uint32 {
	var t [ans.ProbScale]uint32
	for d := range t {
		k := int(md.PPF[d])
		e := uint32(md.Freq[k]) | uint32(byte(d)-md.Cum[k])<<8
		if k == md.Escape {
			e |= 0x80 << 16
		} else {
			e |= uint32(uint8(md.Value[k])) << 24
		}
		t[d] = e
	}
	return &t
}

// dotUnitAVX2 is ans.Matrix.DotUnit for unit u with the AVX2 kernel,
// which checks the stream bounds and the initial and final states;
// escapes are added here and their count checked. The offsets must have
// passed Matrix.Check. acc is scratch for the kernel's sums, held by the
// caller: the kernels are called through a function value, so a local
// array would be a heap allocation per unit.
func dotUnitAVX2(m *ans.Matrix, tab *[ans.ProbScale]uint32, u int, v []int8, out []int32, escBuf []uint32, acc *[ans.Lanes]int32) error {
	w0, w1 := m.Offsets[u], m.Offsets[u+1]
	escs := m.Esc[m.EscOffsets[u]:m.EscOffsets[u+1]]
	stripes := m.Layout == ans.WarpStripes
	steps, fn := m.Cols/128, ansAVX2Funcs[0]
	if stripes {
		steps, fn = m.Cols/4, ansAVX2Funcs[1]
	}
	got := fn(&m.Words[w0], int(w1-w0), steps, &tab[0], &v[0], &acc[0], &escBuf[0], len(escBuf))
	switch got {
	case -1:
		return fmt.Errorf("%w: unit %d: stream exhausted", ans.ErrCorrupt, u)
	case -2, -3: // many escapes, or a bad state: the generic decoder decodes (and names the error)
		if err := m.DotUnit(u, v, out); err != nil {
			return err
		}
		if got == -3 {
			return fmt.Errorf("%w: unit %d: a coder state is out of range", ans.ErrCorrupt, u)
		}
		return nil
	}
	if got > len(escs) {
		return fmt.Errorf("%w: unit %d: %d escapes decoded, %d stored", ans.ErrCorrupt, u, got, len(escs))
	}
	for i, ev := range escBuf[:got] {
		j, t, e := int(ev>>8), int(ev>>2&31), int(ev&3)
		c := 4*j + e
		if !stripes {
			c = 128*j + 4*t + e
		}
		acc[t] += int32(escs[i]) * int32(v[c])
	}
	if got != len(escs) {
		return fmt.Errorf("%w: unit %d: %d escapes decoded, %d stored", ans.ErrCorrupt, u, got, len(escs))
	}
	m.StoreLanes(acc, out)
	return nil
}

// mulANSAVX2 runs the AVX2 decoder over units in parallel; MulANS has
// checked m (Matrix.Check).
func (b *Backend) mulANSAVX2(m *ans.Matrix, v []int8, y []int32) error {
	tab := ansAVX2Table(&m.Model)
	per := 1
	if m.Layout == ans.WarpStripes {
		per = ans.Lanes
	}
	return b.parallelFor(m.Units(), max(1, 64/per), func(u0, u1 int) error {
		out := make([]int32, ans.Lanes)
		escBuf := make([]uint32, 4096)
		acc := new([ans.Lanes]int32)
		for u := u0; u < u1; u++ {
			if err := dotUnitAVX2(m, tab, u, v, out, escBuf, acc); err != nil {
				return err
			}
			copy(y[u*per:(u+1)*per], out[:per])
		}
		return nil
	})
}
