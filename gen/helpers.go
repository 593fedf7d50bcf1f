package main

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Helpers every kernel family shares: arguments, read-only tables,
// horizontal reductions, the VEX-encoded VPDPBUSD, vector shapes and
// accumulator chains.

// param loads a kernel argument into a fresh register. Loop-invariant
// arguments stay in the argument frame and are reloaded where needed, so
// the hot loops keep enough general-purpose registers.
func param(name string) GPVirtual { return Load(Param(name), GP64()).(GPVirtual) }

// bump adds n to the pointer argument name in the argument frame.
func bump(name string, n Op) {
	r := param(name)
	ADDQ(n, r)
	Store(r, Param(name))
}

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

var rodataTables = map[string]Mem{}

// rodata returns the read-only table name of count elements of width
// bytes (1, 2, 4 or 8), element i being val(i), emitted once however
// often kernels ask for it.
func rodata(name string, count, width int, val func(i int) uint64) Mem {
	if m, ok := rodataTables[name]; ok {
		return m
	}
	m := GLOBL(name, RODATA|NOPTR)
	for i := 0; i < count; i++ {
		switch v := val(i); width {
		case 1:
			DATA(i, U8(uint8(v)))
		case 2:
			DATA(2*i, U16(uint16(v)))
		case 4:
			DATA(4*i, U32(uint32(v)))
		default:
			DATA(8*i, U64(v))
		}
	}
	rodataTables[name] = m
	return m
}

// nibbleFloats returns the read-only table float32{0, 1, ..., 15}.
func nibbleFloats() Mem { return codeTable(4, 0) }

// codeTable returns the read-only table float32{e >> (n*j) & (2^n-1) : e <
// 16}: the n-bit code at bits n*j of a 4-bit index.
func codeTable(n, j int) Mem {
	name := fmt.Sprintf("codeTable%d_%d", n, j)
	if n == 4 {
		name = "nibbleFloats"
	}
	return rodata(name, 16, 4, func(e int) uint64 {
		return uint64(math.Float32bits(float32(e >> (n * j) & (1<<n - 1))))
	})
}

// onesWords is 32 bytes of int16 ones as a memory operand (VPMADDWD's
// pair sum).
func onesWords() Mem { return rodata("q4Ones16", 8, 4, func(int) uint64 { return 0x00010001 }) }

// nibbleMask returns a register of the given kind with 0x0f in every byte.
func nibbleMask(v VecVirtual) VecVirtual {
	t := GP32()
	MOVL(U32(0x0f0f0f0f), t)
	VMOVD(t, v.AsX())
	VPBROADCASTD(v.AsX(), v)
	return v
}

// reduce16 sums each of 16 ZMM int32 accumulators horizontally: lane k of
// the result holds the sum of acc[k]'s lanes. The accumulators are
// clobbered.
func reduce16(acc []VecVirtual) VecVirtual {
	regs := make([]Register, len(acc))
	for i, a := range acc {
		regs[i] = a
	}
	addD := func(a, b, c Op) { VPADDD(a, b, c) }
	zmm := func() Register { return ZMM() }
	// Level 1: pairs -> per 128-bit lane [a02 b02 a13 b13]. Level 2: per
	// 128-bit chunk q, [acc 4j+0..3 summed over chunk q].
	r2 := pairLevel(pairLevel(regs, false, addD, zmm), true, addD, zmm)
	l2 := []VecVirtual{r2[0].(VecVirtual), r2[1].(VecVirtual), r2[2].(VecVirtual), r2[3].(VecVirtual)}
	// Level 3 and 4: sum the four chunks, chunk j of the result = vector j.
	x01, x23 := ZMM(), ZMM()
	VSHUFI32X4(U8(0x88), l2[1], l2[0], x01)
	VSHUFI32X4(U8(0xdd), l2[1], l2[0], l2[0])
	VPADDD(l2[0], x01, x01)
	VSHUFI32X4(U8(0x88), l2[3], l2[2], x23)
	VSHUFI32X4(U8(0xdd), l2[3], l2[2], l2[2])
	VPADDD(l2[2], x23, x23)
	res := ZMM()
	VSHUFI32X4(U8(0x88), x23, x01, res)
	VSHUFI32X4(U8(0xdd), x23, x01, x01)
	VPADDD(x01, res, res)
	return res
}

// pairLevel is one level of the horizontal-sum trees: for each pair
// (a, b) of vs it interleaves and adds, per 128-bit lane, the 32-bit
// (qwords false) or 64-bit (qwords true) elements, so the result has half
// as many vectors, each holding partial sums of both inputs. The inputs are
// clobbered; tmp hands out scratch registers.
func pairLevel(vs []Register, qwords bool, add func(a, b, c Op), tmp func() Register) []Register {
	out := make([]Register, len(vs)/2)
	for j := range out {
		a, b := vs[2*j], vs[2*j+1]
		t := tmp()
		if qwords {
			VPUNPCKLQDQ(b, a, t)
			VPUNPCKHQDQ(b, a, a)
		} else {
			VPUNPCKLDQ(b, a, t)
			VPUNPCKHDQ(b, a, a)
		}
		add(t, a, a)
		out[j] = a
	}
	return out
}

// reduce8Y sums each of 8 YMM accumulators horizontally into lane k of the
// result, with add (VPADDD or VADDPS). The accumulators are clobbered; tmp
// hands out scratch registers. evex selects EVEX-encodable shuffles (for
// AVX-512 kernels, whose registers may be Y16..Y31).
func reduce8Y(acc []Register, add func(a, b, c Op), tmp func() Register, evex bool) Register {
	l2 := pairLevel(pairLevel(acc, false, add, tmp), true, add, tmp)
	res := tmp()
	if evex {
		VSHUFI64X2(U8(0), l2[1], l2[0], res)
		VSHUFI64X2(U8(3), l2[1], l2[0], l2[0])
	} else {
		VPERM2I128(U8(0x20), l2[1], l2[0], res)
		VPERM2I128(U8(0x31), l2[1], l2[0], l2[0])
	}
	add(l2[0], res, res)
	return res
}

// reduce4Y sums each of 4 YMM float accumulators into lane k of an XMM.
func reduce4Y(acc []VecVirtual) VecVirtual {
	regs := []Register{acc[0], acc[1], acc[2], acc[3]}
	addPS := func(a, b, c Op) { VADDPS(a, b, c) }
	ymm := func() Register { return YMM() }
	c := pairLevel(pairLevel(regs, false, addPS, ymm), true, addPS, ymm)[0].(VecVirtual)
	hi := XMM()
	VEXTRACTF128(U8(1), c, hi)
	VADDPS(hi, c.AsX(), hi)
	return hi
}

// vexVNNI records the VEX-encoded AVX-VNNI forms used (resolveVEX), for
// the macros.
var vexVNNI = map[string][3]int{}

// vpdpbusdY emits the AVX-VNNI "VPDPBUSD b, a, acc" (Go operand order:
// acc += u8(a) . s8(b), per 32-bit lane) on YMM registers, virtual or
// physical, as a macro of BYTEs (the Go assembler only encodes the EVEX
// form, which needs AVX512VL): a placeholder instruction that resolveVEX
// rewrites, once the registers are allocated, into the VPDPBUSD_VEX_*
// macro of the physical ones.
func vpdpbusdY(b, a, acc Register) { vexPlaceholder("VPDPBUSD", b, a, acc) }

// vpdpwssdY is the AVX-VNNI "VPDPWSSD b, a, acc" (acc += the int16 pairs
// of a times those of b, per 32-bit lane, wrapping like VPMADDWD then
// VPADDD) on any YMM registers, as vpdpbusdY.
func vpdpwssdY(b, a, acc Register) { vexPlaceholder("VPDPWSSD", b, a, acc) }

// vexOpcodes are the VEX.256.66.0F38.W0 opcode bytes of the AVX-VNNI
// instructions the generator emits.
var vexOpcodes = map[string]int{"VPDPBUSD": 0x50, "VPDPWSSD": 0x52}

func vexPlaceholder(op string, b, a, acc Register) {
	Instruction(&ir.Instruction{
		Opcode:   op + "_VEX",
		Operands: []Op{b, a, acc},
		Inputs:   []Op{b, a, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVXVNNI"},
	})
}

var vexPlaceholderLine = regexp.MustCompile(`(?m)^\t(VPDPBUSD|VPDPWSSD)_VEX +Y(\d+), Y(\d+), Y(\d+)$`)

// resolveVEX rewrites the placeholders of vpdpbusdY and vpdpwssdY in
// generated assembly into <op>_VEX_* macros (recorded in vexVNNI for
// insertVEXMacros).
func resolveVEX(src []byte) []byte {
	return vexPlaceholderLine.ReplaceAllFunc(src, func(line []byte) []byte {
		m := vexPlaceholderLine.FindSubmatch(line)
		var r [3]int
		for i := range r {
			r[i], _ = strconv.Atoi(string(m[i+2]))
		}
		name := fmt.Sprintf("%s_VEX_Y%d_Y%d_Y%d", m[1], r[0], r[1], r[2])
		vexVNNI[name] = r
		return []byte("\t" + name)
	})
}

// ymmISA names the instruction set of a YMM kernel with an AVX-VNNI
// variant: the suffix of its name and the words of its doc.
func ymmISA(vnni bool) (suffix, what string) {
	if vnni {
		return "AvxVnni", "AVX-VNNI"
	}
	return "Avx2", "AVX2"
}

// a8Mode selects the instruction set of a YMM W4A8 kernel.
type a8Mode int

const (
	modeAVX2    a8Mode = iota // VPMADDUBSW + VPMADDWD
	modeAVXVNNI               // VEX VPDPBUSD (AVX-VNNI)
)

// fvec is the vector shape of a one-row-at-a-time float kernel: ZMM with
// AVX-512 (16 lanes, EVEX-only forms allowed) or YMM with AVX2 (8 lanes).
type fvec struct{ avx512 bool }

func (f fvec) lanes() int { return map[bool]int{true: 16, false: 8}[f.avx512] }

func (f fvec) suffix() string {
	if f.avx512 {
		return "Avx512"
	}
	return "Avx2"
}

func (f fvec) reg() VecVirtual {
	if f.avx512 {
		return ZMM()
	}
	return YMM()
}

func (f fvec) zero(v VecVirtual) {
	if f.avx512 {
		VPXORD(v, v, v)
	} else {
		VPXOR(v, v, v)
	}
}

func (f fvec) and(a, b, dst Op) {
	if f.avx512 {
		VPANDD(a, b, dst)
	} else {
		VPAND(a, b, dst)
	}
}

func (f fvec) load(m Mem, dst VecVirtual) {
	if f.avx512 {
		VMOVDQU64(m, dst)
	} else {
		VMOVDQU(m, dst)
	}
}

func (f fvec) store(v VecVirtual, m Mem) {
	if f.avx512 {
		VMOVDQU64(v, m)
	} else {
		VMOVDQU(v, m)
	}
}

// broadcast returns a vector with v in every 32-bit lane.
func (f fvec) broadcast(v uint32) VecVirtual {
	r := f.reg()
	t := GP32()
	MOVL(U32(v), t)
	if f.avx512 {
		VPBROADCASTD(t, r)
	} else {
		VMOVD(t, r.AsX())
		VPBROADCASTD(r.AsX(), r)
	}
	return r
}

// fmaScale does acc += dot * (float32 at m).
func (f fvec) fmaScale(m Mem, dot, acc VecVirtual) {
	if f.avx512 {
		VFMADD231PS_BCST(m, dot, acc)
		return
	}
	t := YMM()
	VBROADCASTSS(m, t)
	VFMADD231PS(dot, t, acc)
}

// chains spreads a sum of n terms over up to k (at most chainsMax)
// independent accumulators, added pairwise at the end: the one-row float kernels had
// been bound by the latency of one accumulator's FMA chain (4 cycles per
// 16 or 8 weights), not by throughput.
type chains struct {
	regs []VecVirtual
	i    int
}

// chainsMax is the most accumulators a chain spreads over.
const chainsMax = 4

func newChains(f fvec, n, k int) *chains {
	c := &chains{}
	for i := 0; i < min(n, k, chainsMax); i++ {
		c.regs = append(c.regs, f.reg())
	}
	return c
}

// next returns the accumulator of the next term, and whether it is that
// accumulator's first (to be written, not added to).
func (c *chains) next() (VecVirtual, bool) {
	r := c.regs[c.i%len(c.regs)]
	c.i++
	return r, c.i <= len(c.regs)
}

// sum adds the accumulators pairwise and returns the register holding the
// total.
func (c *chains) sum() VecVirtual {
	rs := c.regs
	for len(rs) > 1 {
		var next []VecVirtual
		for j := 0; j+1 < len(rs); j += 2 {
			VADDPS(rs[j+1], rs[j], rs[j])
			next = append(next, rs[j])
		}
		if len(rs)%2 == 1 {
			next = append(next, rs[len(rs)-1])
		}
		rs = next
	}
	return rs[0]
}

// newChainsFrom returns a chains whose accumulators are regs (each
// already holding a partial sum).
func newChainsFrom(regs []VecVirtual) *chains { return &chains{regs: regs} }

// kernelDoc writes a kernel's doc comment: text, a sentence or two on
// what it computes (shape, batch, ISA), then the section of the package
// doc (asm/doc.go, written by hand) that describes its family's calling
// convention, preconditions and reference Go.
func kernelDoc(section, text string) {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text + ` See "` + section + `" in the package doc.`) {
		if line != "" && len(line)+1+len(w) > 76 {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	Doc(append(lines, line)...)
}

// gatherDwords loads the 16 dwords m addresses (a VSIB operand on a ZMM
// index) into dst. The mask and dst are written first (KMOVW, VPXORD are
// pure writes): the gather reads both, and avo would otherwise keep them
// live from the function entry.
func gatherDwords(m Mem, dst VecVirtual) {
	t := GP32()
	MOVL(U32(0xffff), t)
	km := K()
	KMOVW(t, km)
	VPXORD(dst, dst, dst)
	VPGATHERDD(m, km, dst)
}
