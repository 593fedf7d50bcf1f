package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Helpers the Bits and Sparse12 families share: the tile and chunk loops
// of the int8-activation kernels (AVX-512 and YMM), the YMM kernels' code
// regrouping, and the row loop of the one-row float32 kernels.

const bitsKernelSig = "func(w *byte, stride int, meta *byte, act *byte, chunks int, out *float32, ntiles int, ctrl *byte, idx *int32)"

// blockTerm adds one block's terms to the row accumulator, lane i = row i
// of a tile: isum (exact sums q*xq) minus zero*sum(xq), times s*xs, with
// meta the block's scales (zeros one vector on) and act its lane
// activation scales (lane sums one vector on); the products and the sum
// are rounded separately, as DotA8Exact does. isum is clobbered.
func blockTerm(v fvec, isum, accRow VecVirtual, meta, act Mem) {
	w := 4 * v.lanes()
	zl := v.reg()
	VMOVUPS(meta.Offset(w), zl)
	VPMULLD(act.Offset(w), zl, zl)
	VPSUBD(zl, isum, isum)
	f := v.reg()
	VMOVUPS(meta, f)
	VMULPS(act, f, f)
	VCVTDQ2PS(isum, isum)
	VMULPS(isum, f, f)
	VADDPS(f, accRow, accRow)
}

// lowA8Loops emits the tile and chunk loops the low-bit A8 kernels share:
// per tile of R rows, per chunk, it zeroes the nacc accumulators, points ap
// at the chunk's activations (act + k*actChunk), mp at the tile's metadata
// for the chunk (meta + k*metaBlock) and wp at the chunk of the tile's
// first row, calls row for each row (after prefetching the next tile's
// rows linearly, as nextTile does for Q4G128, where pf says, and the
// next tile's metadata for the chunk into L1: a stream of
// its own that the hardware prefetchers served late), reduces (reduce, or
// reduce16 of 16 accumulators when nil) to the lanes i*L+j, lets epilogue
// turn the exact isum into the float lane scales f (isum is then converted
// and multiplied in), and adds lane i*L+j of f into lane i of the row
// accumulator in block order.
func lowA8Loops(name string, R, L, actChunk, metaBlock, nacc int, pf pfMode,
	row func(i int, wp, ap, mp GPVirtual, acc []VecVirtual),
	reduce func(acc []VecVirtual) VecVirtual,
	epilogue func(isum VecVirtual, ap, mp GPVirtual) VecVirtual) {
	if reduce == nil {
		reduce = reduce16
	}
	tileChunks(name, R, metaBlock, 128, ZMM, func(a VecVirtual) { VPXORD(a, a, a) }, func(k, pfp GPVirtual, accRow VecVirtual) {
		acc := make([]VecVirtual, nacc)
		for i := range acc {
			acc[i] = ZMM()
			VPXORD(acc[i], acc[i], acc[i])
		}
		ap, mp, wp := chunkPtrs(k, actChunk, metaBlock, 128)
		if metaBlock != 0 { // the next tile's metadata of this chunk
			nm := param("chunks")
			IMUL3Q(U32(metaBlock), nm, nm)
			for o := 0; o < metaBlock; o += 64 {
				PREFETCHT0(Mem{Base: mp, Index: nm, Scale: 1, Disp: o})
			}
		}
		stride := param("stride")
		var lead rowLead
		if pf == pfLead { // pfp: the lead past this chunk, started afresh each chunk
			lead = newRowLead(pfp, wp, param("w"), stride, R)
			lead.wrap(name)
		}
		for i := 0; i < R; i++ {
			if pf == pfLead {
				lead.row(pfp, i, 2)
			} else {
				prefetch := map[pfMode]func(Op){pfL2: PREFETCHT1, pfL1: PREFETCHT0, pfNTA: PREFETCHNTA}[pf]
				prefetch(Mem{Base: pfp, Disp: 128 * i})
				prefetch(Mem{Base: pfp, Disp: 128*i + 64})
			}
			row(i, wp, ap, mp, acc)
			if i != R-1 {
				ADDQ(stride, wp)
			}
		}
		isum := reduce(acc)
		f := epilogue(isum, ap, mp)
		VCVTDQ2PS(isum, isum)
		VMULPS(isum, f, f)
		if L == 1 {
			VADDPS(f, accRow, accRow)
		} else {
			ip := param("idx")
			for j := 0; j < L; j++ {
				p, t := ZMM(), ZMM()
				VMOVDQU32(Mem{Base: ip, Disp: 64 * j}, p)
				VPERMPS(f, p, t)
				VADDPS(t, accRow, accRow)
			}
		}
	})
}

// pfMode is where a low-bit A8 kernel prefetches its next tile: L2
// (PREFETCHT1), L1 (PREFETCHT0) or non-temporally (PREFETCHNTA); or, with
// pfLead, each of the tile's rows leadBytes (at most half a row) ahead into
// L1, continuing into the next tile's rows past row 0's end (as the GGML
// four-row kernels' r4PfLead).
type pfMode int

const (
	pfL2 pfMode = iota
	pfL1
	pfNTA
	pfLead
)

// leadBytes is how far ahead in each row the lead prefetches (pfLead,
// r4PfLead, the Q4G128 ...PfLead kernels) run, or half the row where that
// is less (cpu.leadBytes): about 4 to 16 KiB in flight for tiles of 4 to 8
// rows.
const leadBytes = 2048

// rowLead emits a lead prefetch over tiles of rows rows, stride bytes
// apart: pf runs leadBytes (at most half a row) ahead in the tile's row 0,
// each step prefetches the same offset in every row, and once pf passes
// row 0's end (end) it moves rows-1 strides on, into the next tile's row
// 0, end with it. Where the next-tile prefetch keeps up to two tiles in
// flight (94-115 KB for tiles of 4096x14336, more than L1), this keeps
// rows*leadBytes.
type rowLead struct {
	pf, end, stride GPVirtual
	rows            int
}

// newRowLead starts a lead in pf at pos, a position in row 0 of a tile
// whose row 0 starts at row0.
func newRowLead(pf, pos, row0, stride GPVirtual, rows int) rowLead {
	lead, most := GP64(), GP64()
	MOVQ(stride, lead)
	SHRQ(U8(1), lead)
	MOVQ(U32(leadBytes), most)
	CMPQ(lead, most)
	CMOVQGT(most, lead)
	LEAQ(Mem{Base: pos, Index: lead, Scale: 1}, pf)
	l := rowLead{pf: pf, end: GP64(), stride: stride, rows: rows}
	LEAQ(Mem{Base: row0, Index: stride, Scale: 1}, l.end)
	return l
}

// wrap emits the check a step starts with (label name+"_lead"): past row
// 0's end, pf and end move on to the next tile.
func (l rowLead) wrap(name string) {
	CMPQ(l.pf, l.end)
	JB(LabelRef(name + "_lead"))
	t := GP64()
	IMUL3Q(U32(l.rows-1), l.stride, t)
	ADDQ(t, l.pf)
	ADDQ(t, l.end)
	ADDQ(l.stride, l.end)
	Label(name + "_lead")
}

// walker returns a copy of pf for row to walk the tile's rows.
func (l rowLead) walker() GPVirtual {
	r := GP64()
	MOVQ(l.pf, r)
	return r
}

// row prefetches lines lines of row i into L1 at r and moves r on to
// row i+1.
func (l rowLead) row(r GPVirtual, i, lines int) {
	for k := 0; k < lines; k++ {
		PREFETCHT0(Mem{Base: r, Disp: 64 * k})
	}
	if i != l.rows-1 {
		ADDQ(l.stride, r)
	}
}

// chunkPtrs returns the addresses of chunk k of a kernel's activations
// (act + k*actChunk), block metadata (meta + k*metaBlock; none when
// metaBlock is 0) and weights (w + k*chunkBytes, a power of two).
func chunkPtrs(k GPVirtual, actChunk, metaBlock, chunkBytes int) (ap, mp, wp GPVirtual) {
	ap = GP64()
	IMUL3Q(U32(actChunk), k, ap)
	ADDQ(param("act"), ap)
	if metaBlock != 0 {
		mp = GP64()
		IMUL3Q(U32(metaBlock), k, mp)
		ADDQ(param("meta"), mp)
	}
	wp = GP64()
	MOVQ(k, wp)
	SHLQ(U8(log2(chunkBytes)), wp)
	ADDQ(param("w"), wp)
	return ap, mp, wp
}

// tileChunks emits the tile and chunk loops of the low-bit A8 kernels:
// per tile of R rows a row accumulator (newAcc, cleared by zero), pf at
// the next tile's rows (w + R*stride, for prefetching), and per chunk k
// (0 .. chunks-1) the body, after which pf moves one chunk (chunkBytes of
// each row) of R rows on; tileEnd stores the accumulator and loops over
// the tiles.
func tileChunks(name string, R, metaBlock, chunkBytes int, newAcc func() VecVirtual, zero func(VecVirtual), body func(k, pf GPVirtual, accRow VecVirtual)) {
	tileChunksThen(name, R, metaBlock, chunkBytes, newAcc, zero, body, nil)
}

// tileChunksThen is tileChunks with finish (if not nil) run on accRow
// after the tile's last chunk, before it is stored.
func tileChunksThen(name string, R, metaBlock, chunkBytes int, newAcc func() VecVirtual, zero func(VecVirtual), body func(k, pf GPVirtual, accRow VecVirtual), finish func(accRow VecVirtual)) {
	accRow, pf, k := tileStart(name, R, newAcc, zero)
	Label(name + "_chunk")
	body(k, pf, accRow)
	nextChunk(pf, k, chunkBytes*R)
	JB(LabelRef(name + "_chunk"))
	if finish != nil {
		finish(accRow)
	}
	tileEnd(name, accRow, R, metaBlock)
}

// tileStart begins a tile (label name+"_tile"): the row accumulator
// (newAcc, cleared by zero), pf at the next tile's rows (w + R*stride)
// and the chunk counter k at 0.
func tileStart(name string, R int, newAcc func() VecVirtual, zero func(VecVirtual)) (accRow VecVirtual, pf, k GPVirtual) {
	Label(name + "_tile")
	accRow = newAcc()
	zero(accRow)
	pf = param("stride")
	IMUL3Q(U32(R), pf, pf)
	ADDQ(param("w"), pf)
	k = GP64()
	XORQ(k, k)
	return accRow, pf, k
}

// nextChunk moves pf on by step bytes and k to the next chunk, and
// compares k with the chunk count (JB loops while chunks remain).
func nextChunk(pf, k GPVirtual, step int) {
	ADDQ(U32(step), pf)
	INCQ(k)
	CMPQ(k, param("chunks"))
}

// tileChunksPiped is tileChunksThen with the chunk's work in two parts:
// rows(k, pf) emits chunk k's integer dot products and returns their sums,
// tail(k, isum, accRow) adds their float terms to the row sums. Chunk
// k-1's tail is emitted after chunk k's rows, so that its chain of
// dependent float steps (which ends in the row sums every chunk adds to)
// runs beside chunk k's multiplies instead of after them.
func tileChunksPiped(name string, R, metaBlock, chunkBytes int, newAcc func() VecVirtual, zero func(VecVirtual), rows func(k, pf GPVirtual) VecVirtual, tail func(k GPVirtual, isum, accRow VecVirtual), finish func(accRow VecVirtual)) {
	accRow, pf, k := tileStart(name, R, newAcc, zero)
	prev := newAcc() // the previous chunk's sums
	tailPrev := func() {
		kp := GP64()
		LEAQ(Mem{Base: k, Disp: -1}, kp)
		tail(kp, prev, accRow)
	}
	VMOVDQA(rows(k, pf), prev)
	nextChunk(pf, k, chunkBytes*R)
	JAE(LabelRef(name + "_last"))
	Label(name + "_chunk")
	cur := rows(k, pf)
	tailPrev()
	VMOVDQA(cur, prev)
	nextChunk(pf, k, chunkBytes*R)
	JB(LabelRef(name + "_chunk"))
	Label(name + "_last")
	tailPrev()
	if finish != nil {
		finish(accRow)
	}
	tileEnd(name, accRow, R, metaBlock)
}

// ymmUnitsAdd adds f's units to the row sums in accRow, for each row in
// column order (the definition's float order): f holds unit u of row i
// in lane i*nu + u. The units move within their 128-bit lanes
// (VPERMILPS, where a lane-crossing VPERMPS per unit took 6-7% more of the
// 2- and 4-bit kernels' time on Zen 3), so the row sums build up where
// ymmUnitsOut expects them: nu = 2, row 2l+k at position k of 128-bit
// lane l; nu = 4, row l in every position of lane l; nu = 8 (one row),
// every position of lane 0 (units 4-7 from a copy of f with its lanes
// swapped).
func ymmUnitsAdd(f, accRow VecVirtual, nu int) {
	if nu == 1 {
		VADDPS(f, accRow, accRow)
		return
	}
	var sw VecVirtual
	for u := 0; u < nu; u++ {
		src, e := f, u
		if u >= 4 {
			if sw == nil {
				sw = YMM()
				VPERM2F128(U8(1), f, f, sw)
			}
			src, e = sw, u-4
		}
		imm := e * 0x55 // element e in every position
		if nu == 2 {
			imm = e | (2+e)<<2 | e<<4 | (2+e)<<6 // positions 0, 1: rows 2l, 2l+1
		}
		t := YMM()
		VPERMILPS(U8(imm), src, t)
		VADDPS(t, accRow, accRow)
	}
}

// ymmUnitsOut moves ymmUnitsAdd's row sums to lanes 0..R-1 of accRow.
func ymmUnitsOut(accRow VecVirtual, nu int) {
	switch nu {
	case 2: // qwords 0 and 2: rows 0, 1 and 2, 3
		VPERMQ(U8(0x08), accRow, accRow)
	case 4: // [r0 r0 r1 r1], then positions 0 and 2
		VPERMQ(U8(0x08), accRow, accRow)
		VPERMILPS(U8(0x08), accRow, accRow)
	}
}

// tileEnd ends a low-bit A8 kernel's tile: it stores accRow (a ZMM or
// YMM of results) at "out", moves w R rows down and meta past this tile's
// chunks (metaBlock bytes each), and loops while tiles remain.
func tileEnd(name string, accRow VecVirtual, R, metaBlock int) {
	VMOVUPS(accRow, Mem{Base: param("out")})
	bump("out", U32(accRow.Size()))
	t := param("stride")
	IMUL3Q(U32(R), t, t)
	bump("w", t)
	m := param("chunks")
	IMUL3Q(U32(metaBlock), m, m)
	bump("meta", m)
	tilesLoop(name, "ntiles")
}

// tilesLoop decrements the tile-count argument count and jumps back to
// name+"_tile" while tiles remain, else returns.
func tilesLoop(name, count string) {
	nt := param(count)
	DECQ(nt)
	Store(nt, Param(count))
	JNZ(LabelRef(name + "_tile"))
	VZEROUPPER()
	RET()
}

// lowConst returns the read-only 32-byte table name filled by fill (made
// once).
func lowConst(name string, fill func(i int) byte) Mem {
	return rodata(name, 32, 1, func(i int) uint64 { return uint64(fill(i)) })
}

// bitsYMMShape is the shape of one YMM Bits A8 kernel.
type bitsYMMShape struct {
	n, U       int
	bpc, nu, R int
	shuffle    bool
}

func newBitsYMMShape(n, U int) bitsYMMShape {
	bpc := 8 / n
	nu := 128 * bpc / U
	return bitsYMMShape{n: n, U: U, bpc: bpc, nu: nu, R: 8 / nu, shuffle: n != 8 || U < 128}
}

// field is one masked n-bit (or 4-bit for 8-bit codes) slice of a
// quarter: its shift, its int16 accumulator class and its activations'
// offset within the chunk's block of the quarter.
type field struct{ shift, class, act int }

func (s bitsYMMShape) fields(h int) []field {
	if s.n == 8 { // nibbles of one byte: the same activation, weights 1 and 16
		return []field{{0, 0, 32 * h}, {4, 1, 32 * h}}
	}
	var out []field
	for j := 0; j < s.bpc; j++ {
		c := 0
		if s.nu == 8 { // two units per dword: the class is the unit within it
			c = (s.bpc - 1 - j) * 32 / s.U
		}
		out = append(out, field{j * s.n, c, (h*s.bpc + j) * 32})
	}
	return out
}

func (s bitsYMMShape) classes() int {
	if s.n == 8 || s.nu == 8 {
		return 2
	}
	return 1
}

// bitsYMMReduce sums the rows' int32 vectors into lane i*nu + u (row i,
// unit u). Dword d of each 128-bit lane of a row's vector holds unit d/2
// (nu = 2), unit d (nu = 4), or with nu = 8 units 2d (first vector) and
// 2d+1 (second); with nu = 1 every lane is unit 0.
func bitsYMMReduce(s bitsYMMShape, rows []Register) VecVirtual {
	regs := rows
	addD := func(a, b, c Op) { VPADDD(a, b, c) }
	ymm := func() Register { return YMM() }
	lanes := func(lo, hi Register) VecVirtual { // lo's lanes + hi's lanes -> [lo | hi]
		res := YMM()
		VPERM2I128(U8(0x20), hi, lo, res)
		VPERM2I128(U8(0x31), hi, lo, lo)
		VPADDD(lo, res, res)
		return res
	}
	switch s.nu {
	case 1:
		return reduce8Y(regs, addD, ymm, false).(VecVirtual)
	case 2: // 4 rows
		VPHADDD(rows[1], rows[0], rows[0])
		VPHADDD(rows[3], rows[2], rows[2])
		return lanes(rows[0], rows[2])
	case 4: // 2 rows
		return lanes(rows[0], rows[1])
	default: // 1 row, units 2d and 2d+1 in two vectors
		lo, hi := YMM(), YMM()
		VPUNPCKLDQ(rows[1], rows[0], lo)
		VPUNPCKHDQ(rows[1], rows[0], hi)
		return lanes(lo, hi)
	}
}

// rowPrefetchRows is how many rows ahead the one-row float kernels
// prefetch: each chunk of a row prefetches the same chunk of the row
// rowPrefetchRows further on, so a column tile's row segments (2 KB of
// 4-bit weights in a 16 KiB tile, stride bytes apart) arrive before
// their row starts. Prefetching 1 KB ahead in the same row left every
// segment's first half to demand misses. Four rows is the best distance
// found (docs/KERNELS.md).
const rowPrefetchRows = 4

// rowPrefetchOffset returns rowPrefetchRows*stride in a register.
func rowPrefetchOffset() GPVirtual {
	o := param("stride")
	IMUL3Q(U32(rowPrefetchRows), o, o)
	return o
}

// rowPrefetch prefetches into L2 the 128 bytes at row + off.
func rowPrefetch(row, off GPVirtual) {
	PREFETCHT1(Mem{Base: row, Index: off, Scale: 1})
	PREFETCHT1(Mem{Base: row, Index: off, Scale: 1, Disp: 64})
}

// slotVec returns a vector register holding P float32 slots (at least an
// XMM).
func slotVec(P int) VecVirtual {
	switch {
	case P > 8:
		return ZMM()
	case P > 4:
		return YMM()
	}
	return XMM()
}

// meta16Chunk widens a chunk's metadata at m (P binary16 scales, then P
// binary16 zeros) and returns s and m = s*z (rounded to float32 as
// layout's Affine takes it) in slots 0..P-1 of two vectors (slotVec(P);
// with P = 1 the pair shares one dword and only slot 0 counts).
func meta16Chunk(m Mem, P int) (sv, mv VecVirtual) {
	sv, mv = slotVec(P), slotVec(P)
	if P == 1 {
		VMOVD(m, sv)
		VCVTPH2PS(sv, sv) // (s, z)
		VMOVSHDUP(sv, mv)
		VMULSS(mv, sv, mv)
		return sv, mv
	}
	meta16Load(m, P, sv)
	meta16Load(m.Offset(2*P), P, mv)
	VMULPS(mv, sv, mv)
	return sv, mv
}

// meta16Load widens P binary16 values at m into the float32 slots of v
// (slotVec(P)), reading exactly 2*P bytes.
func meta16Load(m Mem, P int, v VecVirtual) {
	if P == 2 {
		VMOVD(m, v)
		VCVTPH2PS(v, v)
		return
	}
	VCVTPH2PS(m, v)
}

// slotSum returns an XMM whose lane 0 is the sum of v's P slots (v is
// clobbered).
func slotSum(v VecVirtual, P int, f fvec) VecVirtual {
	if P > 8 {
		h := YMM()
		VEXTRACTF64X4(U8(1), v, h)
		VADDPS(h, v.AsY(), h)
		v = h
	}
	if P > 4 {
		h := XMM()
		if f.avx512 {
			VEXTRACTF32X4(U8(1), v, h)
		} else {
			VEXTRACTF128(U8(1), v, h)
		}
		VADDPS(h, v.AsX(), h)
		v = h
	}
	x := v // an XMM from here on
	if P > 2 {
		t := XMM()
		VPERMILPS(U8(0x4e), x, t)
		VADDPS(t, x, x)
	}
	if P > 1 {
		t := XMM()
		VMOVSHDUP(x, t)
		VADDSS(t, x, x)
	}
	return x
}

// rowEnd ends a one-row-at-a-time float kernel's row: it stores the
// horizontal sum of acc (minus corr's lane 0, if given) at "out", moves
// "out" and wp on, and loops while rows remain. With AVX-512 the shuffles
// are EVEX encodable (registers may be X16..X31).
func rowEnd(name string, acc, corr VecVirtual, wp GPVirtual, f fvec) {
	h := acc
	if f.avx512 {
		h = YMM()
		VEXTRACTF64X4(U8(1), acc, h)
		VADDPS(h, acc.AsY(), h)
	}
	res, t2 := XMM(), XMM()
	if f.avx512 {
		VEXTRACTF32X4(U8(1), h, res)
	} else {
		VEXTRACTF128(U8(1), h, res)
	}
	VADDPS(res, h.AsX(), res)
	VPERMILPS(U8(0x4e), res, t2)
	VADDPS(t2, res, res)
	VPERMILPS(U8(0xb1), res, t2)
	VADDPS(t2, res, res)
	if corr != nil {
		VSUBSS(corr, res, res)
	}
	op := param("out")
	VMOVSS(res, Mem{Base: op})
	ADDQ(U32(4), op)
	Store(op, Param("out"))
	ADDQ(param("stride"), wp)
	r := param("rows")
	DECQ(r)
	Store(r, Param("rows"))
	JNZ(LabelRef(name + "_row"))
	VZEROUPPER()
	RET()
}
