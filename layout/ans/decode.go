package ans

import "fmt"

// decodeUnit decodes unit u, calling emit(lane, step, quad values) for
// every quad in decoding order (step, then lane). It never reads outside
// the unit's words and escape bytes, and checks the end states.
func (m *Matrix) decodeUnit(u int, emit func(lane, step int, q *[4]int8)) error {
	_, err := m.decodeUnitN(u, emit)
	return err
}

// decodeUnitN is decodeUnit also returning the words read.
func (m *Matrix) decodeUnitN(u int, emit func(lane, step int, q *[4]int8)) (int, error) {
	if u < 0 || u >= m.Units() {
		return 0, fmt.Errorf("ans: unit %d of %d", u, m.Units())
	}
	w0, w1 := m.Offsets[u], m.Offsets[u+1]
	e0, e1 := m.EscOffsets[u], m.EscOffsets[u+1]
	if w1 < w0 || w1 > uint64(len(m.Words)) || w1-w0 < 2*Lanes || e1 < e0 || e1 > uint64(len(m.Esc)) {
		return 0, fmt.Errorf("%w: unit %d: words [%d, %d) of %d, escapes [%d, %d) of %d", ErrCorrupt, u, w0, w1, len(m.Words), e0, e1, len(m.Esc))
	}
	words := m.Words[w0:w1]
	esc := m.Esc[e0:e1]
	md := &m.Model
	var x [Lanes]uint64
	for t := range x {
		x[t] = uint64(words[2*t]) | uint64(words[2*t+1])<<32
		if x[t] < StateLow || x[t] >= 1<<63 {
			return 0, fmt.Errorf("%w: unit %d lane %d: initial state %#x out of range", ErrCorrupt, u, t, x[t])
		}
	}
	p, ep := 2*Lanes, 0
	var q [4]int8
	steps := m.steps()
	for step := 0; step < steps; step++ {
		for t := 0; t < Lanes; t++ {
			s := x[t] & (1<<QuadBits - 1)
			var rank, F uint64 = 0, 1
			for e := 0; e < 4; e++ {
				d := uint8(s >> (7 * e) & 127)
				k := md.PPF[d]
				f := uint64(md.Freq[k])
				rank += F * uint64(d-md.Cum[k])
				F *= f
				if int(k) == md.Escape {
					if ep >= len(esc) {
						return 0, fmt.Errorf("%w: unit %d: escape list exhausted", ErrCorrupt, u)
					}
					q[e] = esc[ep]
					ep++
				} else {
					q[e] = md.Value[k]
				}
			}
			x[t] = F*(x[t]>>QuadBits) + rank
			if x[t] < StateLow {
				if p >= len(words) {
					return 0, fmt.Errorf("%w: unit %d: stream exhausted at step %d", ErrCorrupt, u, step)
				}
				x[t] = x[t]<<32 | uint64(words[p])
				p++
			}
			emit(t, step, &q)
		}
	}
	for t := range x {
		if x[t] != StateLow {
			return 0, fmt.Errorf("%w: unit %d lane %d: final state %#x, want %#x", ErrCorrupt, u, t, x[t], uint64(StateLow))
		}
	}
	if ep != len(esc) {
		return 0, fmt.Errorf("%w: unit %d: %d of %d escape bytes used", ErrCorrupt, u, ep, len(esc))
	}
	for _, z := range words[p:] {
		if z != 0 {
			return 0, fmt.Errorf("%w: unit %d: %d unread nonzero words", ErrCorrupt, u, len(words)-p)
		}
	}
	return p, nil
}

// Decode returns the row-major int8 matrix.
func (m *Matrix) Decode() ([]int8, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	out := make([]int8, m.Rows*m.Cols)
	for u := 0; u < m.Units(); u++ {
		err := m.decodeUnit(u, func(lane, step int, q *[4]int8) {
			r, c := m.element(u, lane, step, 0)
			copy(out[r*m.Cols+c:r*m.Cols+c+4], q[:])
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// digitInfo is everything decoding needs about one slot digit.
type digitInfo struct {
	f, off uint32 // the digit's symbol frequency, digit - cum
	val    int8
	esc    bool
}

// digits returns the per-digit decoding table of the model.
func (md *Model) digits() *[ProbScale]digitInfo {
	var t [ProbScale]digitInfo
	for d := range t {
		k := md.PPF[d]
		t[d] = digitInfo{f: uint32(md.Freq[k]), off: uint32(d) - uint32(md.Cum[k]), val: md.Value[k], esc: int(k) == md.Escape}
	}
	return &t
}

// DotUnit computes the exact int32 products of unit u's rows with v
// (Cols values): out[0] for a warp row, out[0..31] for a warp stripe.
// It decodes without materializing the rows, with the checks of Decode.
func (m *Matrix) DotUnit(u int, v []int8, out []int32) error {
	n := 1
	if m.Layout == WarpStripes {
		n = Lanes
	}
	if len(v) != m.Cols || len(out) < n {
		return fmt.Errorf("ans: DotUnit: v %d, out %d, want %d, >= %d", len(v), len(out), m.Cols, n)
	}
	if u < 0 || u >= m.Units() || len(m.Offsets) != m.Units()+1 || len(m.EscOffsets) != m.Units()+1 {
		return fmt.Errorf("ans: DotUnit: unit %d of %d", u, m.Units())
	}
	if err := m.Model.Check(); err != nil {
		return err
	}
	w0, w1 := m.Offsets[u], m.Offsets[u+1]
	e0, e1 := m.EscOffsets[u], m.EscOffsets[u+1]
	if w1 < w0 || w1 > uint64(len(m.Words)) || w1-w0 < 2*Lanes || e1 < e0 || e1 > uint64(len(m.Esc)) {
		return fmt.Errorf("%w: unit %d: words [%d, %d) of %d, escapes [%d, %d) of %d", ErrCorrupt, u, w0, w1, len(m.Words), e0, e1, len(m.Esc))
	}
	words := m.Words[w0:w1]
	esc := m.Esc[e0:e1]
	dt := m.Model.digits()
	var x [Lanes]uint64
	var acc [Lanes]int32
	for t := range x {
		x[t] = uint64(words[2*t]) | uint64(words[2*t+1])<<32
		if x[t] < StateLow || x[t] >= 1<<63 {
			return fmt.Errorf("%w: unit %d lane %d: initial state %#x out of range", ErrCorrupt, u, t, x[t])
		}
	}
	p, ep := 2*Lanes, 0
	stripes := m.Layout == WarpStripes
	steps := m.steps()
	for step := 0; step < steps; step++ {
		for t := 0; t < Lanes; t++ {
			s := uint32(x[t] & (1<<QuadBits - 1))
			a, b, c, d := &dt[s&127], &dt[s>>7&127], &dt[s>>14&127], &dt[s>>21]
			rank := uint64(a.off) + uint64(a.f)*(uint64(b.off)+uint64(b.f)*(uint64(c.off)+uint64(c.f)*uint64(d.off)))
			F := uint64(a.f * b.f * c.f * d.f)
			x[t] = F*(x[t]>>QuadBits) + rank
			if x[t] < StateLow {
				if p >= len(words) {
					return fmt.Errorf("%w: unit %d: stream exhausted at step %d", ErrCorrupt, u, step)
				}
				x[t] = x[t]<<32 | uint64(words[p])
				p++
			}
			q := [4]int8{a.val, b.val, c.val, d.val}
			if a.esc || b.esc || c.esc || d.esc {
				for e, di := range [4]*digitInfo{a, b, c, d} {
					if di.esc {
						if ep >= len(esc) {
							return fmt.Errorf("%w: unit %d: escape list exhausted", ErrCorrupt, u)
						}
						q[e] = esc[ep]
						ep++
					}
				}
			}
			var xv []int8
			if stripes {
				xv = v[4*step : 4*step+4]
			} else {
				xv = v[128*step+4*t : 128*step+4*t+4]
			}
			acc[t] += int32(q[0])*int32(xv[0]) + int32(q[1])*int32(xv[1]) + int32(q[2])*int32(xv[2]) + int32(q[3])*int32(xv[3])
		}
	}
	for t := range x {
		if x[t] != StateLow {
			return fmt.Errorf("%w: unit %d lane %d: final state %#x, want %#x", ErrCorrupt, u, t, x[t], uint64(StateLow))
		}
	}
	if ep != len(esc) {
		return fmt.Errorf("%w: unit %d: %d of %d escape bytes used", ErrCorrupt, u, ep, len(esc))
	}
	m.StoreLanes(&acc, out)
	return nil
}

// StoreLanes writes a unit's per-lane sums acc to out (DotUnit's
// result): all Lanes of them for warp stripes, their sum for rows.
func (m *Matrix) StoreLanes(acc *[Lanes]int32, out []int32) {
	if m.Layout == WarpStripes {
		copy(out, acc[:])
		return
	}
	var sum int32
	for _, a := range acc {
		sum += a
	}
	out[0] = sum
}

// Validate checks the shape, the model and every offset against the
// stream and escape lengths (not the streams' contents: decoding checks
// those).
func (m *Matrix) Validate() error {
	if err := m.CheckOffsets(); err != nil {
		return err
	}
	return m.Model.finish()
}

// Check checks, reading only, what a decoder indexes by: the shape, the
// offset tables (CheckOffsets) and the model's tables (Model.Check). The
// multiplies call it; Validate, which also derives the model's tables,
// is for loading.
func (m *Matrix) Check() error {
	if err := m.CheckOffsets(); err != nil {
		return err
	}
	return m.Model.Check()
}

// CheckOffsets checks the shape and the offset tables against the
// stream and escape lengths, reading only: what decoders need before
// they index by the offsets (Validate also derives the model's tables).
func (m *Matrix) CheckOffsets() error {
	if m == nil {
		return fmt.Errorf("ans: matrix is nil")
	}
	if err := CheckShape(m.Layout, m.Rows, m.Cols); err != nil {
		return err
	}
	units := m.Units()
	if len(m.Offsets) != units+1 || len(m.EscOffsets) != units+1 {
		return fmt.Errorf("%w: %d word offsets and %d escape offsets, want %d", ErrCorrupt, len(m.Offsets), len(m.EscOffsets), units+1)
	}
	if m.Offsets[0] != 0 || m.Offsets[units] != uint64(len(m.Words)) || m.EscOffsets[0] != 0 || m.EscOffsets[units] != uint64(len(m.Esc)) {
		return fmt.Errorf("%w: offset tables do not span the streams", ErrCorrupt)
	}
	for u := 0; u < units; u++ {
		n := m.Offsets[u+1] - m.Offsets[u]
		if m.Offsets[u+1] < m.Offsets[u] || n < 2*Lanes || n%128 != 0 || m.EscOffsets[u+1] < m.EscOffsets[u] {
			return fmt.Errorf("%w: unit %d: words [%d, %d), escapes [%d, %d)", ErrCorrupt, u, m.Offsets[u], m.Offsets[u+1], m.EscOffsets[u], m.EscOffsets[u+1])
		}
	}
	return nil
}

// CodedBytes returns the bytes a multiply reads: streams, escapes,
// offset tables and the model.
func (m *Matrix) CodedBytes() int64 {
	return 4*int64(len(m.Words)) + int64(len(m.Esc)) + 16*int64(len(m.Offsets)) + int64(2+2*m.Model.NSym)
}
