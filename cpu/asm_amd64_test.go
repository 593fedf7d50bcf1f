//go:build !noasm && !purego

package cpu

import (
	"fmt"
	"github.com/klauspost/cpuid/v2"
	"github.com/qgemv/qgemv/asm"
	"github.com/qgemv/qgemv/layout/ggml"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// asmFile is one generated assembly file: a kernel family's asm/*_amd64.s.
type asmFile struct {
	name  string
	lines []string
}

// asmFiles reads every generated assembly file.
func asmFiles(t *testing.T) []asmFile {
	paths, err := filepath.Glob("../asm/*_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no generated assembly in ../asm")
	}
	var out []asmFile
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, asmFile{filepath.Base(p), strings.Split(string(src), "\n")})
	}
	return out
}

// requiresLines parses asm/*.s: kernel name -> its "// Requires:" features.
func requiresLines(t *testing.T) map[string][]string {
	out := map[string][]string{}
	for _, f := range asmFiles(t) {
		var fn string
		for _, line := range f.lines {
			if rest, ok := strings.CutPrefix(line, "// func "); ok {
				fn = rest[:strings.IndexByte(rest, '(')]
				out[fn] = nil
			} else if rest, ok := strings.CutPrefix(line, "// Requires: "); ok && fn != "" {
				out[fn] = strings.Split(rest, ", ")
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no kernels found in the generated assembly")
	}
	return out
}

func funcName(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	return name[strings.LastIndexByte(name, '.')+1:]
}

// amd64Baseline lists avo ISA names that every CPU Go's amd64 port runs
// on has: SSE2 is required by GOAMD64=v1, and avo files the SSE prefetch
// hints (PREFETCHT0/T1/NTA) under "MMX+" (AMD's MMX extensions), which
// cpuid reports only on AMD although every x86-64 CPU executes them.
var amd64Baseline = map[string]bool{"SSE": true, "SSE2": true, "CMOV": true, "MMX+": true}

// cpuidName maps the avo ISA names that cpuid spells differently.
var cpuidName = map[string]string{"BMI": "BMI1"}

// TestRequiresCoverKernels checks that each kernel set's dispatch condition
// includes every feature the generated "// Requires:" line of each kernel
// it calls names (avo's names are cpuid's names), and that every generated
// kernel is reachable from some gate.
func TestRequiresCoverKernels(t *testing.T) {
	req := requiresLines(t)
	reached := map[string]bool{}
	check := func(owner, fn string, gate []string) {
		need, ok := req[fn]
		if !ok {
			t.Errorf("%s calls %s, which is not in the generated assembly", owner, fn)
			return
		}
		reached[fn] = true
		for _, g := range gate {
			if cpuid.ParseFeature(g) == cpuid.UNKNOWN {
				t.Errorf("%s gates %s on %q, which cpuid does not know (the gate can never pass)", owner, fn, g)
			}
		}
		for _, f := range need {
			if n, ok := cpuidName[f]; ok {
				f = n
			}
			if !slices.Contains(gate, f) && !amd64Baseline[f] {
				t.Errorf("%s calls %s, which requires %s, but its gate %v does not check it", owner, fn, f, gate)
			}
		}
	}
	for _, s := range kernelSets {
		for _, v := range []*kernelSet{s, s.amx} {
			if v == nil {
				continue
			}
			for _, k := range v.kernels {
				check(v.name(), funcName(k), v.requires)
			}
		}
	}
	for _, q := range quantizers {
		check("quantizer", funcName(q.fn), q.requires)
	}
	for _, s := range streamReaders {
		for _, fn := range s.shapes {
			check("streamRead", funcName(fn), s.requires)
		}
	}
	check("streamReadTiles", funcName(asm.StreamReadTilesAvx512), streamTilesRequires)
	check("swiglu", funcName(asm.SwiGLUAvx512), swigluRequires)
	for _, e := range encoders {
		for _, fn := range e.asm {
			check(e.name+" encode", funcName(fn), e.requires)
		}
	}
	check("interleave", funcName(asm.Interleave4x16Avx), interleaveRequires)
	for _, k := range bitsA8Kernels.kernels {
		check("bitsA8", funcName(k), bitsA8Kernels.requires)
	}
	for _, k := range bitsA8PfL1Kernels {
		check("bitsA8 (L1 prefetch)", funcName(k), bitsA8Kernels.requires)
	}
	for _, k := range bitsA8PfNtaKernels {
		check("bitsA8 (NTA prefetch)", funcName(k), bitsA8Kernels.requires)
	}
	for _, k := range bitsA8PfLeadKernels {
		check("bitsA8 (lead prefetch)", funcName(k), bitsA8Kernels.requires)
	}
	// The Bits AMX kernels run on the AMX variant's backends, for matrices
	// that have an AVX-512 A8 kernel.
	amxGate := append(slices.Clip(findSet(AVX512VNNI).amx.requires), bitsA8Kernels.requires...)
	for _, ks := range bitsAmxKernels {
		for _, k := range ks {
			check("bitsAMX", funcName(k), amxGate)
		}
	}
	for _, ks := range bitsT16Kernels {
		for _, k := range ks {
			check("bitsT16", funcName(k), bitsT16Requires)
		}
	}
	for _, tab := range []map[ISA]*ymmA8Kernels{bitsA8YMM, bitsA8YMM16} {
		for isa, ks := range tab {
			for _, k := range ks.kernels {
				check(string(isa)+" bitsA8", funcName(k), ks.requires)
			}
		}
	}
	check("sparseA8", funcName(sparseA8.fn), sparseA8.requires)
	check("sparseA8", funcName(sparseA8.fnG64), sparseA8.requires)
	for isa, ks := range sparseA8YMM {
		for _, k := range ks.kernels {
			check(string(isa)+" sparseA8", funcName(k), ks.requires)
		}
	}
	for _, ks := range bitsLutKernels {
		for _, k := range ks {
			check("bitsLut", funcName(k), bitsLutRequires)
		}
	}
	for _, k := range bitsLutTables {
		check("bitsLut", funcName(k), bitsLutRequires)
	}
	for _, f := range ggmlA8Funcs {
		check("ggml", funcName(f), ggmlA8Requires)
	}
	for _, m := range []map[ggml.Type]ggmlA8Func{ggmlA8R4Funcs, ggmlA8R4PfL1Funcs, ggmlA8R4PfLeadFuncs} {
		for t, f := range m {
			gate := append(slices.Clone(ggmlA8Requires), ggmlR4Requires(t)...)
			check("ggml four rows", funcName(f), gate)
		}
	}
	for _, fs := range ggmlA8TAVX2Funcs {
		for _, f := range fs {
			check("ggml rows in lanes (AVX2)", funcName(f), ggmlA8AVX2Requires)
		}
	}
	for _, m := range []map[ggml.Type]ggmlA8M16Func{ggmlA8M16AVXVNNIFuncs, ggmlA8M16AVXVNNISmallFuncs} {
		for _, f := range m {
			check("ggml batch (AVX-VNNI)", funcName(f), ggmlA8AVXVNNIRequires)
		}
	}
	for _, m := range []map[ggml.Type]ggmlA8Func{ggmlA8AVXVNNIFuncs, ggmlA8R4AVXVNNIFuncs} {
		for _, f := range m {
			check("ggml one vector (AVX-VNNI)", funcName(f), ggmlA8AVXVNNIRequires)
		}
	}
	for _, fs := range ggmlA8TAVXVNNIFuncs {
		for _, f := range fs {
			check("ggml rows in lanes (AVX-VNNI)", funcName(f), ggmlA8AVXVNNIRequires)
		}
	}
	for _, fs := range ggmlA8TFuncs {
		for _, f := range fs {
			check("ggml rows in lanes", funcName(f), ggmlA8Requires)
		}
	}
	for _, k := range ggmlPairs {
		for _, f := range []any{k.r4, k.m16Full, k.m16, k.f32} {
			check("ggml pair order", funcName(f), ggmlPairsRequires)
		}
	}
	for _, f := range ggmlA8AVX2Funcs {
		check("ggml avx2", funcName(f), ggmlA8AVX2Requires)
	}
	for _, f := range ggmlA8R4AVX2Funcs {
		check("ggml avx2 four rows", funcName(f), ggmlA8AVX2Requires)
	}
	for _, f := range ggmlF32AVX2Funcs {
		check("ggml float avx2", funcName(f), ggmlF32AVX2Requires)
	}
	for _, f := range ggmlF32Funcs {
		check("ggml float", funcName(f), ggmlA8Requires)
	}
	check("int8", funcName(asm.Int8GemvAvx512), int8Requires)
	check("int8 avx2", funcName(asm.Int8GemvAvx2), int8AVX2Requires)
	for _, vs := range ansDotFuncs {
		for _, fs := range vs {
			for _, f := range fs {
				check("ans", funcName(f), ansRequires)
			}
		}
	}
	for _, vs := range ansDecodeFuncs {
		for _, f := range vs {
			check("ans decode", funcName(f), ansDecodeRequires)
		}
	}
	for _, f := range ansAVX2Funcs {
		check("ans avx2", funcName(f), ansAVX2Requires)
	}
	for isa, ck := range cbSets {
		for _, k := range ck.tableFn {
			check(string(isa)+" codebook", funcName(k), ck.requires)
		}
		for _, k := range ck.table16 {
			check(string(isa)+" codebook", funcName(k), append(ck.requires, ck.req16...))
		}
		for _, k := range append(ck.psumI16[1:], ck.psumI16P[1:]...) {
			if k != nil {
				check(string(isa)+" codebook", funcName(k), append(ck.requires, ck.reqI16...))
			}
		}
		for _, k := range ck.tableI16 {
			check(string(isa)+" codebook", funcName(k), append(ck.requires, ck.reqI16...))
		}
		for _, k := range ck.scalar[1:] {
			if k != nil {
				check(string(isa)+" codebook", funcName(k), ck.requires)
			}
		}
		for _, k := range ck.psum16 {
			check(string(isa)+" codebook", funcName(k), append(ck.requires, ck.req16...))
		}
		for _, m := range []map[[2]int]cbLookupFunc{ck.psum, ck.dequant} {
			for _, k := range m {
				check(string(isa)+" codebook", funcName(k), ck.requires)
			}
		}
	}
	for isa, fk := range floatSets {
		for _, m := range []map[[2]int]bitsA32Func{fk.bits, fk.bits16} {
			for _, k := range m {
				check(string(isa)+" bits float", funcName(k), fk.requires)
			}
		}
		for _, m := range []map[int]sparseA32Func{fk.sparse, fk.sparse16} {
			for _, k := range m {
				check(string(isa)+" sparse float", funcName(k), fk.requires)
			}
		}
	}
	check("widenF16", funcName(widenKernel.fn), widenKernel.requires)
	check("narrowF16", funcName(narrowKernel.fn), narrowKernel.requires)
	for fn := range req {
		// The codebook quantizer's assignment kernels are gated in
		// layout/codebook (nearestSets; TestNearestRequires there).
		if strings.HasPrefix(fn, "Nearest") {
			continue
		}
		if !reached[fn] {
			t.Errorf("generated kernel %s is not called by any gated kernel set", fn)
		}
	}
}

// evexOnly matches the registers only EVEX (AVX-512) instructions encode:
// X16..X31, Y16..Y31, any Z register and the mask registers K1..K7.
var evexOnly = regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z([0-9]|[12][0-9]|3[01])|K[1-7])\b`)

// TestNoEVEXWithoutAVX512 checks that kernels whose Requires line lacks
// AVX512F use no register only EVEX encodes: the Go assembler silently
// encodes VEX mnemonics on X16..X31 as EVEX, which faults on AVX2-only
// CPUs, and avo does not add AVX512F to Requires for them.
func TestNoEVEXWithoutAVX512(t *testing.T) {
	req := requiresLines(t)
	bad := map[string]string{}
	for _, f := range asmFiles(t) {
		var fn string
		for _, line := range f.lines {
			if rest, ok := strings.CutPrefix(line, "TEXT ·"); ok {
				fn = rest[:strings.IndexByte(rest, '(')]
				continue
			}
			if fn == "" || strings.HasPrefix(strings.TrimSpace(line), "//") || slices.Contains(req[fn], "AVX512F") {
				continue
			}
			if m := evexOnly.FindString(line); m != "" && bad[fn] == "" {
				bad[fn] = strings.TrimSpace(line)
			}
		}
	}
	if len(req) == 0 {
		t.Fatal("no kernels found")
	}
	for fn, line := range bad {
		t.Errorf("%s (Requires %v) uses an EVEX-only register: %s", fn, req[fn], line)
	}
}

// TestColumnTiles forces the smallest column tiles (one group per kernel
// call) so that every batched kernel continues sums across calls: A8
// results stay bit-exact, A32 within the bound.
func TestColumnTiles(t *testing.T) {
	defer func(b int) { colTileBytes = b }(colTileBytes)
	colTileBytes = 1
	rng := rand.New(rand.NewPCG(7, 8))
	for _, isa := range supportedSets() {
		be, err := New(Config{ISA: isa, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, shape := range [][2]int{{129, 300}, {40, 1000}} {
			mx, err := be.Load(randMatrix(t, rng, shape[0], shape[1]))
			if err != nil {
				t.Fatal(err)
			}
			for _, batch := range allBatches {
				name := fmt.Sprintf("%s/%dx%d/b%d/tiles", isa, shape[0], shape[1], batch)
				checkA32(t, name, mx, rng, batch)
				checkA8(t, name, mx, rng, batch)
			}
		}
	}
}

// TestAsmStackSlots checks every (SP)-relative access of the generated
// kernels against the frame size on their TEXT line: an access past the
// locals reaches the saved frame pointer or the return address (a 16-byte
// store into an 8-byte slot once clobbered the caller's frame pointer).
// The width is the vector register's (X 16, Y 32, Z 64 bytes), 4 or 8 for
// broadcasts and scalar moves, 8 for Q-suffixed integer instructions.
func TestAsmStackSlots(t *testing.T) {
	text := regexp.MustCompile(`^TEXT ·(\w+)\(SB\), (?:[\w|]+, )?\$(\d+)-\d+$`)
	access := regexp.MustCompile(`^\s+(\S+)\s+(.*)$`)
	slot := regexp.MustCompile(`(-?\d*)\(SP\)`)
	vreg := regexp.MustCompile(`\b([XYZ])\d+\b`)
	checked := 0
	for _, f := range asmFiles(t) {
		fn, frame := "", 0
		for i, line := range f.lines {
			if m := text.FindStringSubmatch(line); m != nil {
				fn, frame = m[1], 0
				fmt.Sscan(m[2], &frame)
				continue
			}
			if strings.HasPrefix(line, "TEXT") {
				t.Fatalf("%s:%d: unparsed TEXT line %q", f.name, i+1, line)
			}
			m := access.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			s := slot.FindStringSubmatch(m[2])
			if s == nil {
				continue
			}
			off := 0
			if s[1] != "" {
				fmt.Sscan(s[1], &off)
			}
			op, w := m[1], 0
			switch {
			case strings.HasSuffix(op, ".BCST") || op == "VBROADCASTSS" || op == "VMOVSS" || strings.HasSuffix(op, "L"):
				w = 4
			case op == "VMOVSD" || op == "VBROADCASTSD" || strings.HasSuffix(op, "Q") && !strings.HasPrefix(op, "V"):
				w = 8
			case strings.HasPrefix(op, "VPBROADCAST") && len(op) == len("VPBROADCASTD"):
				w = map[byte]int{'B': 1, 'W': 2, 'D': 4, 'Q': 8}[op[len(op)-1]]
			case strings.HasPrefix(op, "VPMOVSX") || strings.HasPrefix(op, "VPMOVZX"):
				// a widening load reads the destination's width over the factor
				f := map[string]int{"BW": 2, "BD": 4, "BQ": 8, "WD": 2, "WQ": 4, "DQ": 2}[op[len(op)-2:]]
				for _, r := range vreg.FindAllStringSubmatch(m[2], -1) {
					w = max(w, map[string]int{"X": 16, "Y": 32, "Z": 64}[r[1]]/f)
				}
			default:
				for _, r := range vreg.FindAllStringSubmatch(m[2], -1) {
					w = max(w, map[string]int{"X": 16, "Y": 32, "Z": 64}[r[1]])
				}
			}
			if w == 0 {
				t.Errorf("%s:%d (%s): cannot tell the width of %q", f.name, i+1, fn, strings.TrimSpace(line))
				continue
			}
			checked++
			if off < 0 || off+w > frame {
				t.Errorf("%s:%d: %s (frame %d bytes) accesses %d bytes at %d(SP): %s", f.name, i+1, fn, frame, w, off, strings.TrimSpace(line))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no (SP) accesses found: the parser is out of date")
	}
}

// TestQ4A8M1Variants: the AVX-512 set's batch-1 W4A8 kernels (the next
// super tile prefetched with PREFETCHT1 or PREFETCHNTA, on the format's
// metadata or on the super-tile copy, or the AVX2 kernel the set runs on
// Zen 5, with either prefetch; the CPU picks) equal the exact reference on
// every AVX-512 VNNI machine, on shapes with partial super tiles and
// 128-row blocks, several super tiles per call and rows split between
// threads.
func TestQ4A8M1Variants(t *testing.T) {
	if !hasAll(Requires(AVX512VNNI)) {
		t.Skip("no AVX-512 VNNI")
	}
	f := a8Avx512
	defer func(m1, tm, lead kernelFunc, b1 *family, tiles func(int) bool) {
		f.byM[1], f.tm, a8Avx2.tmLead, f.b1, q4MetaTiles = m1, tm, lead, b1, tiles
	}(f.byM[1], f.tm, a8Avx2.tmLead, f.b1, q4MetaTiles)
	rng := rand.New(rand.NewPCG(7, 8))
	type variant struct {
		m1, tm      kernelFunc
		b1          *family
		tiles       bool
		rows, rows1 int  // of the metadata copy on 3 threads and on 1, 0: none
		lead        bool // the AVX2 kernel's lead-prefetch variant
	}
	for i, v := range []variant{
		{q4A8M1Variants[0], q4A8M1TmVariants[0], nil, false, 0, 0, false},
		{q4A8M1Variants[1], q4A8M1TmVariants[1], nil, false, 0, 0, false},
		{q4A8M1Variants[0], q4A8M1TmVariants[0], nil, true, 16, 16, false},
		{q4A8M1Variants[1], q4A8M1TmVariants[1], nil, true, 16, 16, false},
		{q4A8M1Variants[1], q4A8M1TmVariants[1], a8Avx2, true, 8, 8, false},
		{q4A8M1Variants[1], q4A8M1TmVariants[1], a8Avx2, true, 8, 8, true},
	} {
		f.byM[1], f.tm, f.b1 = v.m1, v.tm, v.b1
		a8Avx2.tmLead = nil
		if v.lead { // on the rows of 4096 columns (leadFits)
			a8Avx2.tmLead = asm.Q4A8Avx2M1TmPfLead
		}
		q4MetaTiles = func(int) bool { return v.tiles }
		for _, threads := range []int{1, 3} {
			want := v.rows
			if threads == 1 {
				want = v.rows1
			}
			// the set itself, not its AMX variant New picks where the CPU has AMX
			be := &Backend{set: findSet(AVX512VNNI), threads: threads, team: &team{}}
			defer be.Close()
			for _, sh := range [][2]int{{1, 127}, {129, 300}, {300, 4096}, {2085, 129}} {
				mx, err := be.Load(randMatrix(t, rng, sh[0], sh[1]))
				if err != nil {
					t.Fatal(err)
				}
				got := 0
				if mx.tm != nil {
					got = mx.tm.rows
				}
				if got != want {
					t.Fatalf("variant %d/t%d: metadata copy in super tiles of %d rows (0: none), want %d", i, threads, got, want)
				}
				checkA8(t, fmt.Sprintf("variant %d/t%d/%dx%d", i, threads, sh[0], sh[1]), mx, rng, 1)
			}
		}
	}
}
