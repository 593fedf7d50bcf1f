package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// AMX (Advanced Matrix Extensions) instructions. The Go assembler encodes
// none of them, so each form a kernel uses is a macro of BYTEs (defined at
// the top of the .s file like the VEX VPDPBUSD ones) on physical
// registers. Tile registers are not avo registers: a kernel names them by
// number and keeps track of them itself. Memory operands are [base] (tile
// configuration) or [base + index*1] (tile rows, index = the row stride),
// with base and index among the registers whose encoding needs neither a
// SIB escape nor a displacement.

// amxMacros maps each macro used to its documentation and BYTEs.
var amxMacros = map[string]string{}

// amxGP are the general-purpose registers an AMX memory operand may use.
var amxGP = map[Physical]bool{RAX: true, RCX: true, RDX: true, RBX: true, RSI: true, RDI: true,
	R8: true, R9: true, R10: true, R11: true, R14: true, R15: true}

func amxReg(r Physical) int {
	if !amxGP[r] {
		panic(fmt.Sprintf("gen: %s cannot be an AMX address register", r.Asm()))
	}
	return int(r.PhysicalIndex())
}

// amxInstr records macro name (bytes b, described by doc) and emits it as
// an instruction reading inputs (so that register allocation keeps them).
func amxInstr(name, doc string, isa string, b []byte, inputs ...Op) {
	def := fmt.Sprintf("\n// %s is %s.\n#define %s", name, doc, name)
	for i, x := range b {
		if i > 0 {
			def += ";"
		}
		def += fmt.Sprintf(" BYTE $0x%02x", x)
	}
	amxMacros[name] = def + "\n"
	Instruction(&ir.Instruction{Opcode: name, Inputs: inputs, ISA: []string{isa}})
}

// vex3 returns the first three bytes of a VEX.128.0F38.W0 prefix: the X
// and B register extensions (index and base registers 8..15), the vvvv
// register and the implied prefix pp (0 none, 1 66, 2 F3, 3 F2).
func vex3(x, b, vvvv, pp int) []byte {
	b1 := 0x02 | 0x80 // 0F38 map; R not extended (tiles are 0..7)
	if x < 8 {
		b1 |= 0x40
	}
	if b < 8 {
		b1 |= 0x20
	}
	return []byte{0xc4, byte(b1), byte((^vvvv&15)<<3 | pp)}
}

// LDTILECFG loads the 64-byte tile configuration at [base].
func LDTILECFG(base Physical) {
	r := amxReg(base)
	amxInstr("LDTILECFG_"+base.Asm(), fmt.Sprintf("LDTILECFG [%s]", base.Asm()), "AMXTILE",
		append(vex3(0, r, 0, 0), 0x49, byte(r&7)), base)
}

// TILERELEASE returns the tile registers to their initial state.
func TILERELEASE() {
	amxInstr("TILERELEASE", "TILERELEASE", "AMXTILE", []byte{0xc4, 0xe2, 0x78, 0x49, 0xc0})
}

// TILEZERO zeroes tile register t.
func TILEZERO(t int) {
	amxInstr(fmt.Sprintf("TILEZERO_TMM%d", t), fmt.Sprintf("TILEZERO tmm%d", t), "AMXTILE",
		append(vex3(0, 0, 0, 3), 0x49, byte(0xc0|t<<3)))
}

// tileMem returns the ModRM and SIB bytes of tile register t with memory
// operand [base + index*1].
func tileMem(t, base, index int) []byte {
	return []byte{byte(t<<3 | 4), byte((index&7)<<3 | base&7)}
}

// TILELOADD loads tile register t from rows stride bytes apart at base.
func TILELOADD(t int, base, stride Physical) {
	b, x := amxReg(base), amxReg(stride)
	name := fmt.Sprintf("TILELOADD_TMM%d_%s_%s", t, base.Asm(), stride.Asm())
	amxInstr(name, fmt.Sprintf("TILELOADD tmm%d, [%s + %s*1]", t, base.Asm(), stride.Asm()), "AMXTILE",
		append(append(vex3(x, b, 0, 3), 0x4b), tileMem(t, b, x)...), base, stride)
}

// TILESTORED stores tile register t as rows stride bytes apart at base.
func TILESTORED(t int, base, stride Physical) {
	b, x := amxReg(base), amxReg(stride)
	name := fmt.Sprintf("TILESTORED_%s_%s_TMM%d", base.Asm(), stride.Asm(), t)
	amxInstr(name, fmt.Sprintf("TILESTORED [%s + %s*1], tmm%d", base.Asm(), stride.Asm(), t), "AMXTILE",
		append(append(vex3(x, b, 0, 2), 0x4b), tileMem(t, b, x)...), base, stride)
}

// TDPBUSD adds to the int32 tile c the dot products of the unsigned bytes
// of tile a (rows of c, 4 bytes per dot) with the signed bytes of tile b
// (in 4-byte column groups): c[i][j] += sum_k u8(a[i][k]) * s8(b[k/4][4j+k%4]).
func TDPBUSD(c, a, b int) {
	amxInstr(fmt.Sprintf("TDPBUSD_TMM%d_TMM%d_TMM%d", c, a, b), fmt.Sprintf("TDPBUSD tmm%d, tmm%d, tmm%d", c, a, b), "AMXINT8",
		append(vex3(0, 0, b, 1), 0x5e, byte(0xc0|c<<3|a)))
}

// tileLoadPair loads tiles t0 and t1 from rows stride bytes apart at
// first and at first + second.
func tileLoadPair(t0, t1 int, first Mem, second int, stride Op) {
	MOVQ(stride, RDI)
	if first.Disp == 0 && first.Index == nil {
		MOVQ(first.Base, RSI)
	} else {
		LEAQ(first, RSI)
	}
	TILELOADD(t0, RSI, RDI)
	LEAQ(first.Offset(second), RSI)
	TILELOADD(t1, RSI, RDI)
}

// amxDots sets C tile tc to a0*b0 + a1*b1 (TDPBUSD), the B tiles loaded
// from b (rows of 4*M bytes, the second 64*M bytes on), and stores it at
// c: rows 64 bytes apart (one ZMM each), or for M = 1 4 bytes apart (one
// ZMM of the 16 rows' dots).
func amxDots(tc, a0, a1, b0, b1, M int, b, c Mem) {
	tileLoadPair(b0, b1, b, 64*M, U32(4*M))
	TILEZERO(tc)
	TDPBUSD(tc, a0, b0)
	TDPBUSD(tc, a1, b1)
	cStride := 64
	if M == 1 {
		cStride = 4
	}
	MOVQ(U32(cStride), RDI)
	LEAQ(c, RSI)
	TILESTORED(tc, RSI, RDI)
}

// tileConfig writes the 64-byte tile configuration (palette 1) with
// tile i holding rows[i] rows of colsb[i] bytes into mem, through gp.
func tileConfig(mem Mem, rows []int, colsb []int) {
	var cfg [64]byte
	cfg[0] = 1
	for i := range rows {
		cfg[16+2*i] = byte(colsb[i])
		cfg[17+2*i] = byte(colsb[i] >> 8)
		cfg[48+i] = byte(rows[i])
	}
	t := GP64()
	for q := 0; q < 8; q++ {
		var v uint64
		for k := 7; k >= 0; k-- {
			v = v<<8 | uint64(cfg[8*q+k])
		}
		MOVQ(U64(v), t)
		MOVQ(t, mem.Offset(8*q))
	}
}
