package hfquant

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/safetensors"
)

// The packers below follow the published packing code of each project
// (AutoGPTQ QuantLinear.pack, AutoAWQ's pack with order [0,2,4,6,1,3,5,7],
// HQQ BitPack), written independently of the importers' unpackers.

// gptqPack packs vals (n x m, row-major, n along the packed axis) into
// int32 rows as AutoGPTQ does for qweight (and, transposed, qzeros).
func gptqPack(vals [][]uint32, bits int) [][]uint32 {
	n, m := len(vals), len(vals[0])
	var out [][]uint32
	if bits != 3 {
		per := 32 / bits
		for row := 0; row < n/per; row++ {
			w := make([]uint32, m)
			for j := 0; j < per; j++ {
				for c := 0; c < m; c++ {
					w[c] |= vals[row*per+j][c] << (bits * j)
				}
			}
			out = append(out, w)
		}
		return out
	}
	// 3 bits: the three-word pattern of AutoGPTQ's pack loop.
	for i := 0; i < n; {
		w0, w1, w2 := make([]uint32, m), make([]uint32, m), make([]uint32, m)
		for c := 0; c < m; c++ {
			for j := 0; j < 10; j++ {
				w0[c] |= vals[i+j][c] << (3 * j)
			}
			w0[c] |= vals[i+10][c] << 30
			w1[c] |= vals[i+10][c] >> 2 & 1
			for j := 0; j < 10; j++ {
				w1[c] |= vals[i+11+j][c] << (3*j + 1)
			}
			w1[c] |= vals[i+21][c] << 31
			w2[c] |= vals[i+21][c] >> 1 & 3
			for j := 0; j < 10; j++ {
				w2[c] |= vals[i+22+j][c] << (3*j + 2)
			}
		}
		out = append(out, w0, w1, w2)
		i += 32
	}
	return out
}

func transpose(v [][]uint32) [][]uint32 {
	out := make([][]uint32, len(v[0]))
	for i := range out {
		out[i] = make([]uint32, len(v))
		for j := range v {
			out[i][j] = v[j][i]
		}
	}
	return out
}

func flat(v [][]uint32) []int32 {
	var out []int32
	for _, r := range v {
		for _, x := range r {
			out = append(out, int32(x))
		}
	}
	return out
}

func randCodes(rng *rand.Rand, n, m, bits int) [][]uint32 {
	v := make([][]uint32, n)
	for i := range v {
		v[i] = make([]uint32, m)
		for j := range v[i] {
			v[i][j] = uint32(rng.IntN(1 << bits))
		}
	}
	return v
}

func randFP16(rng *rand.Rand, n int) []layout.FP16 {
	out := make([]layout.FP16, n)
	for i := range out {
		out[i] = layout.ToFP16(float32(rng.Float64()*0.05 + 1e-4))
	}
	return out
}

// checkExact compares b.Dequantize() with want (Out x In) bit for bit.
func checkExact(t *testing.T, name string, b *layout.Bits, want []float32) {
	t.Helper()
	got := b.Dequantize()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: weight (%d, %d) = %v, want %v", name, i/b.Cols, i%b.Cols, got[i], want[i])
		}
	}
}

// suppliedWords returns a Words function that hands out one zeroed
// slice, and a check that b's code words are that slice (written in
// place, not copied).
func suppliedWords() (func(n int) []uint32, func(t *testing.T, name string, b *layout.Bits)) {
	var got []uint32
	words := func(n int) []uint32 {
		got = make([]uint32, n)
		return got
	}
	return words, func(t *testing.T, name string, b *layout.Bits) {
		t.Helper()
		if len(got) == 0 || len(b.Words) != len(got) || &b.Words[0] != &got[0] {
			t.Fatalf("%s: the matrix's words are not the ones Words supplied", name)
		}
	}
}

type gptqCase struct {
	in, out, bits, group int
	actOrder, v2         bool
}

// buildGPTQ returns the stored tensors of a random GPTQ layer and its
// weights by the published formula, w = s * (q - (z_stored + 1)).
func buildGPTQ(rng *rand.Rand, c gptqCase) (GPTQ, []float32) {
	groups := c.in / c.group
	q := randCodes(rng, c.in, c.out, c.bits)    // [in][out]
	zs := randCodes(rng, groups, c.out, c.bits) // stored zeros [groups][out]
	if !c.v2 {
		for _, r := range zs {
			for j := range r {
				r[j] = min(r[j], 1<<c.bits-2) // z = stored + 1 stays a code
			}
		}
	}
	sc := randFP16(rng, groups*c.out)
	gidx := make([]int32, c.in)
	for i := range gidx {
		gidx[i] = int32(i / c.group)
	}
	if c.actOrder {
		perm := rng.Perm(c.in)
		for j, i := range perm {
			gidx[i] = int32(j / c.group)
		}
	}
	off := 1
	if c.v2 {
		off = 0
	}
	w := make([]float32, c.out*c.in)
	for o := 0; o < c.out; o++ {
		for i := 0; i < c.in; i++ {
			g := int(gidx[i])
			z := float64(zs[g][o]) + float64(off)
			w[o*c.in+i] = float32(float64(sc[g*c.out+o].Float32()) * (float64(q[i][o]) - z))
		}
	}
	st := GPTQ{In: c.in, Out: c.out, Bits: c.bits, QWeight: flat(gptqPack(q, c.bits)),
		QZeros: flat(transpose(gptqPack(transpose(zs), c.bits))), Scales: sc, ZeroOffset: off}
	if c.actOrder || rng.IntN(2) == 0 {
		st.GIdx = gidx
	}
	return st, w
}

func TestGPTQExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, bits := range []int{2, 3, 4, 8} {
		for _, group := range []int{32, 64, 128, 256} {
			for _, act := range []bool{false, true} {
				in := 256
				if bits != 3 {
					in = 3 * max(layout.BitsChunk(bits), 256) // several chunks of the fast path
				}
				c := gptqCase{in: in, out: 96, bits: bits, group: group, actOrder: act, v2: group == 64}
				st, w := buildGPTQ(rng, c)
				words, supplied := suppliedWords()
				if group != 32 { // and the Go heap's
					st.Words = words
				}
				b, err := FromGPTQ(st)
				if err != nil {
					t.Fatalf("%+v: %v", c, err)
				}
				if st.Words != nil {
					supplied(t, fmt.Sprintf("%+v", c), b)
				}
				if act && group < 256 && b.Perm == nil {
					t.Fatalf("%+v: act-order without a permutation", c)
				}
				checkExact(t, fmt.Sprintf("%+v", c), b, w)
				if err := b.IntegerZeros(); err != nil {
					t.Fatalf("%+v: %v", c, err)
				}
			}
		}
	}
	// Whole-row groups (group_size -1).
	st, w := buildGPTQ(rng, gptqCase{in: 160, out: 32, bits: 4, group: 160})
	b, err := FromGPTQ(st)
	if err != nil {
		t.Fatal(err)
	}
	if !b.WholeRow {
		t.Fatal("one group did not become a whole-row group")
	}
	checkExact(t, "whole row", b, w)
}

// TestGPTQRows: the 2-, 4- and 8-bit fast path (gptqRows, a transpose of
// n-bit elements) writes the words unpackColumn and Bits.PackRow write,
// for random words over several chunks and output tiles.
func TestGPTQRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{2, 4, 8} {
		e := layout.BitsChunk(n)
		for _, sh := range [][2]int{{e, 8}, {3 * e, 24}, {2 * e, 300}} {
			in, out := sh[0], sh[1]
			codes := make([]uint8, in)
			checkFastRows(t, fmt.Sprintf("GPTQ %d-bit", n), rng, n, in, out, in*n/32*out, func(qw []int32, o int) []uint8 {
				unpackColumn(codes, qw, out, o, n)
				return codes
			}, func(words []uint32, wpr int, qw []int32) {
				for o := 0; o < out; o += gptqTile {
					gptqRows(words, wpr, qw, out, o, n)
				}
			})
		}
	}
}

// TestAWQ4Rows: the AWQ fast path (awq4Rows) writes the words of the
// per-code path (each output's codes gathered, Bits.PackRow), for random
// words over several chunks and output tiles.
func TestAWQ4Rows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, sh := range [][2]int{{256, 8}, {768, 48}, {512, 320}} {
		in, out := sh[0], sh[1]
		wc := out / 8
		codes := make([]uint8, in)
		checkFastRows(t, "AWQ", rng, 4, in, out, in*wc, func(qw []int32, o int) []uint8 {
			for i := range codes {
				codes[i] = uint8(uint32(qw[i*wc+o/8]) >> (4 * AWQOrder[o%8]) & 15)
			}
			return codes
		}, func(words []uint32, wpr int, qw []int32) {
			for w := 0; w < wc; w += awq4Tile {
				awq4Rows(words, wpr, qw, wc, w)
			}
		})
	}
}

// checkFastRows fills nw random qweight words and checks that fast writes
// the bits-bit Bits words (in x out, group 128) that Bits.PackRow writes
// of each output's codes.
func checkFastRows(t *testing.T, what string, rng *rand.Rand, bits, in, out, nw int, codes func(qw []int32, o int) []uint8, fast func(words []uint32, wpr int, qw []int32)) {
	t.Helper()
	qw := make([]int32, nw)
	for i := range qw {
		qw[i] = int32(rng.Uint32())
	}
	want, err := layout.NewBits(out, in, bits, 128, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := layout.NewBits(out, in, bits, 128, false)
	if err != nil {
		t.Fatal(err)
	}
	for o := 0; o < out; o++ {
		if err := want.PackRow(o, codes(qw, o)); err != nil {
			t.Fatal(err)
		}
	}
	wpr := got.WordsPerRow()
	fast(got.Words, wpr, qw)
	for i := range want.Words {
		if got.Words[i] != want.Words[i] {
			t.Fatalf("%s %dx%d: word %d (row %d) = %08x, want %08x", what, in, out, i, i/wpr, got.Words[i], want.Words[i])
		}
	}
}

func TestGPTQErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	good, _ := buildGPTQ(rng, gptqCase{in: 256, out: 64, bits: 4, group: 128, actOrder: true})
	for name, mut := range map[string]func(q *GPTQ){
		"bits 5":        func(q *GPTQ) { q.Bits = 5 },
		"short qweight": func(q *GPTQ) { q.QWeight = q.QWeight[1:] },
		"short qzeros":  func(q *GPTQ) { q.QZeros = q.QZeros[1:] },
		"odd scales":    func(q *GPTQ) { q.Scales = q.Scales[1:] },
		"no scales":     func(q *GPTQ) { q.Scales = nil },
		"group 96": func(q *GPTQ) {
			q.In, q.QWeight = 192, q.QWeight[:192/8*64]
			q.Scales = q.Scales[:2*64]
			q.QZeros = q.QZeros[:2*8]
		},
		"g_idx range":   func(q *GPTQ) { q.GIdx = append([]int32{5}, q.GIdx[1:]...) },
		"g_idx uneven":  func(q *GPTQ) { g := append([]int32(nil), q.GIdx...); g[0], g[1] = 0, 0; q.GIdx = g },
		"g_idx short":   func(q *GPTQ) { q.GIdx = q.GIdx[1:] },
		"NaN scale":     func(q *GPTQ) { s := append([]layout.FP16(nil), q.Scales...); s[3] = 0x7e00; q.Scales = s },
		"zero outputs":  func(q *GPTQ) { q.Out = 0 },
		"in not packed": func(q *GPTQ) { q.In = 250 },
		"zero offset 2": func(q *GPTQ) { q.ZeroOffset = 2 },
	} {
		q := good
		mut(&q)
		if _, err := FromGPTQ(q); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestAWQExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	order := [8]int{0, 2, 4, 6, 1, 3, 5, 7} // AutoAWQ's pack order
	pack := func(v [][]uint32) []int32 {    // [rows][out] -> [rows][out/8]
		var out []int32
		for _, r := range v {
			for col := 0; col < len(r)/8; col++ {
				var w uint32
				for i := 0; i < 8; i++ {
					w |= r[col*8+order[i]] << (4 * i)
				}
				out = append(out, int32(w))
			}
		}
		return out
	}
	for _, group := range []int{32, 64, 128} {
		const out = 48
		in := 256
		if group == 64 {
			in = 768 // several chunks of the fast path
		}
		groups := in / group
		q, z := randCodes(rng, in, out, 4), randCodes(rng, groups, out, 4)
		sc := randFP16(rng, groups*out)
		w := make([]float32, out*in)
		for o := 0; o < out; o++ {
			for i := 0; i < in; i++ {
				g := i / group
				w[o*in+i] = float32(float64(sc[g*out+o].Float32()) * (float64(q[i][o]) - float64(z[g][o])))
			}
		}
		words, supplied := suppliedWords()
		b, err := FromAWQ(AWQ{In: in, Out: out, QWeight: pack(q), QZeros: pack(z), Scales: sc, Words: words})
		if err != nil {
			t.Fatal(err)
		}
		supplied(t, fmt.Sprintf("AWQ g%d", group), b)
		checkExact(t, fmt.Sprintf("AWQ g%d", group), b, w)
	}
	if _, err := FromAWQ(AWQ{In: 128, Out: 12}); err == nil {
		t.Fatal("12 outputs accepted")
	}
	if _, err := FromAWQ(AWQ{In: 128, Out: 8, QWeight: make([]int32, 127), QZeros: make([]int32, 1), Scales: make([]layout.FP16, 8)}); err == nil {
		t.Fatal("short qweight accepted")
	}
}

// hqqPackRef packs W_q (n x g) as HQQ's BitPack does.
func hqqPackRef(wq [][]uint32, bits int) []uint32 {
	p := map[int]int{8: 1, 4: 2, 3: 10, 2: 4, 1: 8}[bits]
	n := len(wq)
	if bits == 3 {
		for len(wq)%10 != 0 {
			wq = append(wq, make([]uint32, len(wq[0])))
		}
		n = len(wq)
	}
	step := n / p
	var out []uint32
	for idx := 0; idx < step; idx++ {
		for k := range wq[0] {
			var v uint32
			for f := 0; f < p; f++ {
				v |= wq[f*step+idx][k] << ((p - 1 - f) * bits)
			}
			out = append(out, v)
		}
	}
	return out
}

func TestHQQExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, bits := range []int{8, 4, 3, 2, 1} {
		for _, c := range []struct {
			rows, cols, group int
			fp32              bool
		}{{16, 256, 64, false}, {24, 128, 128, true}, {16, 512, 256, false}, {6, 640, 128, false}} {
			n := c.rows * c.cols / c.group
			if p := map[int]int{8: 1, 4: 2, 2: 4, 1: 8}[bits]; p > 0 && n%p != 0 {
				// HQQ cannot pack this; the import must say so.
				if _, err := FromHQQ(HQQ{Rows: c.rows, Cols: c.cols, Bits: bits, Group: c.group, WQ: make([]uint32, n/p*c.group), Scale: make([]float32, n), Zero: make([]float32, n)}); err == nil {
					t.Fatalf("%d bits %+v: %d code rows accepted", bits, c, n)
				}
				continue
			}
			wq := randCodes(rng, n, c.group, bits)
			sc, zr := make([]float32, n), make([]float32, n)
			for i := range sc {
				sc[i] = layout.ToFP16(float32(rng.Float64()*0.1 + 1e-3)).Float32()
				zr[i] = layout.ToFP16(float32(rng.Float64() * float64(int(1)<<bits))).Float32() // fractional
				if c.fp32 {
					sc[i] = float32(rng.Float64()*0.1 + 1e-3)
				}
			}
			w := make([]float32, c.rows*c.cols)
			for i := range w { // W.reshape(-1, group): element i is (i/group, i%group)
				nn, k := i/c.group, i%c.group
				w[i] = float32((float64(wq[nn][k]) - float64(zr[nn])) * float64(sc[nn]))
			}
			words, supplied := suppliedWords()
			b, err := FromHQQ(HQQ{Rows: c.rows, Cols: c.cols, Bits: bits, Group: c.group, WQ: hqqPackRef(wq, bits), Scale: sc, Zero: zr, Words: words})
			if err != nil {
				t.Fatalf("%d bits %+v: %v", bits, c, err)
			}
			supplied(t, fmt.Sprintf("HQQ %d bits %+v", bits, c), b)
			if b.FP32Meta != c.fp32 {
				t.Fatalf("%d bits %+v: FP32Meta %v", bits, c, b.FP32Meta)
			}
			checkExact(t, fmt.Sprintf("HQQ %d bits %+v", bits, c), b, w)
		}
	}
	good := HQQ{Rows: 4, Cols: 64, Bits: 4, Group: 64, WQ: make([]uint32, 2*64), Scale: make([]float32, 4), Zero: make([]float32, 4)}
	if _, err := FromHQQ(good); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(q *HQQ){
		"bits 5":     func(q *HQQ) { q.Bits = 5 },
		"group 48":   func(q *HQQ) { q.Group = 48 },
		"short W_q":  func(q *HQQ) { q.WQ = q.WQ[1:] },
		"short zero": func(q *HQQ) { q.Zero = q.Zero[1:] },
		"inf scale":  func(q *HQQ) { q.Scale = []float32{1, float32(math.Inf(1)), 1, 1} },
		"odd rows":   func(q *HQQ) { q.Rows = 3 },
	} {
		q := good
		mut(&q)
		if _, err := FromHQQ(q); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// stFile writes tensors as a safetensors file (independently of the reader).
func stFile(t *testing.T, ts map[string]any) *safetensors.File {
	t.Helper()
	hdr := map[string]any{}
	var body []byte
	for name, v := range ts {
		var dt string
		var shape []int
		var data []byte
		switch x := v.(type) {
		case struct {
			shape []int
			v     []int32
		}:
			dt, shape = "I32", x.shape
			for _, e := range x.v {
				data = binary.LittleEndian.AppendUint32(data, uint32(e))
			}
		case struct {
			shape []int
			v     []layout.FP16
		}:
			dt, shape = "F16", x.shape
			for _, e := range x.v {
				data = binary.LittleEndian.AppendUint16(data, uint16(e))
			}
		case struct {
			shape []int
			v     []uint8
		}:
			dt, shape, data = "U8", x.shape, x.v
		case struct {
			shape []int
			v     []int8
		}:
			dt, shape = "I8", x.shape
			for _, e := range x.v {
				data = append(data, uint8(e))
			}
		default:
			t.Fatalf("tensor %s: type %T", name, v)
		}
		hdr[name] = map[string]any{"dtype": dt, "shape": shape, "data_offsets": []int{len(body), len(body) + len(data)}}
		body = append(body, data...)
	}
	j, _ := json.Marshal(hdr)
	file := append(binary.LittleEndian.AppendUint64(nil, uint64(len(j))), j...)
	f, err := safetensors.Parse(append(file, body...))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

type i32T = struct {
	shape []int
	v     []int32
}
type f16T = struct {
	shape []int
	v     []layout.FP16
}
type u8T = struct {
	shape []int
	v     []uint8
}
type i8T = struct {
	shape []int
	v     []int8
}

// TestLoadHQQStorage: Load reads an HQQ layer's W_q as stored (U8 for
// most widths, I8 for 8 bits, I32 for 3) into the same matrix FromHQQ
// makes of the values.
func TestLoadHQQStorage(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const rows, cols, group = 8, 64, 32
	n := rows * cols / group
	for _, bits := range []int{8, 4, 3} {
		wq := make([][]uint32, n)
		for i := range wq {
			wq[i] = make([]uint32, group)
			for k := range wq[i] {
				wq[i][k] = uint32(rng.IntN(1 << bits))
			}
		}
		packed := hqqPackRef(wq, bits)
		sc, zr := randFP16(rng, n), randFP16(rng, n)
		var wT any
		switch bits {
		case 8: // int8 storage: codes 128..255 read back negative
			v := make([]int8, len(packed))
			for i, x := range packed {
				v[i] = int8(uint8(x))
			}
			wT = i8T{[]int{len(packed) / group, group}, v}
		case 3:
			v := make([]int32, len(packed))
			for i, x := range packed {
				v[i] = int32(x)
			}
			wT = i32T{[]int{len(packed) / group, group}, v}
		default:
			v := make([]uint8, len(packed))
			for i, x := range packed {
				v[i] = uint8(x)
			}
			wT = u8T{[]int{len(packed) / group, group}, v}
		}
		f := stFile(t, map[string]any{
			"h.W_q": wT, "h.scale": f16T{[]int{n, 1}, sc}, "h.zero": f16T{[]int{n, 1}, zr},
			"h.shape": i32T{[]int{2}, []int32{rows, cols}}, "h.nbits": i32T{[]int{1}, []int32{int32(bits)}},
		})
		got, _, err := Load(f, "h", Options{Group: group})
		if err != nil {
			t.Fatalf("%d bits: %v", bits, err)
		}
		h := HQQ{Rows: rows, Cols: cols, Bits: bits, Group: group, WQ: packed, Scale: make([]float32, n), Zero: make([]float32, n)}
		for i := range sc {
			h.Scale[i], h.Zero[i] = sc[i].Float32(), zr[i].Float32()
		}
		want, err := FromHQQ(h)
		if err != nil {
			t.Fatal(err)
		}
		checkExact(t, fmt.Sprintf("HQQ %d bits from %T", bits, wT), got, want.Dequantize())
	}
}

func TestLoadSafetensors(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	st, w := buildGPTQ(rng, gptqCase{in: 256, out: 64, bits: 4, group: 128, actOrder: true})
	hq := make([]uint8, 2*64) // 4x64 HQQ, group 64: N = 4, 2 packed rows
	for i := range hq {
		hq[i] = uint8(rng.IntN(256))
	}
	f := stFile(t, map[string]any{
		"l.qweight": i32T{[]int{256 / 8, 64}, st.QWeight},
		"l.qzeros":  i32T{[]int{2, 8}, st.QZeros},
		"l.scales":  f16T{[]int{2, 64}, st.Scales},
		"l.g_idx":   i32T{[]int{256}, st.GIdx},
		"a.qweight": i32T{[]int{256, 8}, st.QWeight},
		"a.qzeros":  i32T{[]int{2, 8}, st.QZeros},
		"a.scales":  f16T{[]int{2, 64}, st.Scales},
		"h.W_q":     u8T{[]int{2, 64}, hq},
		"h.scale":   f16T{[]int{4, 1}, randFP16(rng, 4)},
		"h.zero":    f16T{[]int{4, 1}, randFP16(rng, 4)},
		"h.shape":   i32T{[]int{2}, []int32{4, 64}},
		"h.nbits":   i32T{[]int{1}, []int32{4}},
		"h.axis":    i32T{[]int{1}, []int32{1}},
		"t.W_q":     u8T{[]int{64, 2}, hq}, // h's codes transposed: the same length
		"t.scale":   f16T{[]int{4, 1}, randFP16(rng, 4)},
		"t.zero":    f16T{[]int{4, 1}, randFP16(rng, 4)},
		"t.shape":   i32T{[]int{2}, []int32{4, 64}},
		"t.nbits":   i32T{[]int{1}, []int32{4}},
		"z.W_q":     u8T{[]int{2, 64}, hq}, // an axis-0 layer with the same lengths
		"z.scale":   f16T{[]int{4, 1}, randFP16(rng, 4)},
		"z.zero":    f16T{[]int{4, 1}, randFP16(rng, 4)},
		"z.shape":   i32T{[]int{2}, []int32{4, 64}},
		"z.nbits":   i32T{[]int{1}, []int32{4}},
		"z.axis":    i32T{[]int{1}, []int32{0}},
		"other":     f16T{[]int{2}, randFP16(rng, 2)},
	})
	prefixes, kinds := Layers(f)
	got := map[string]Kind{}
	for i, p := range prefixes {
		got[p] = kinds[i]
	}
	if got["l"] != KindGPTQ || got["a"] != KindAWQ || got["h"] != KindHQQ || got["t"] != KindHQQ || got["z"] != KindHQQ || len(got) != 5 {
		t.Fatalf("layers %v", got)
	}
	b, k, err := Load(f, "l", Options{})
	if err != nil || k != KindGPTQ {
		t.Fatal(k, err)
	}
	checkExact(t, "GPTQ from safetensors", b, w)
	if _, _, err := Load(f, "a", Options{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(f, "h", Options{}); err == nil || !strings.Contains(err.Error(), "group") {
		t.Fatalf("HQQ without a group size: %v", err)
	}
	if b, _, err := Load(f, "h", Options{Group: 64}); err != nil || b.Rows != 4 || b.Cols != 64 || b.N != 4 {
		t.Fatalf("HQQ: %v", err)
	}
	if _, _, err := Load(f, "h", Options{Group: 64, Bits: 2}); err == nil || !strings.Contains(err.Error(), "h.nbits is 4") {
		t.Fatalf("HQQ of 4 bits (.nbits) with a config of 2: %v, want an error naming both", err)
	}
	if _, _, err := Load(f, "t", Options{Group: 64}); err == nil || !strings.Contains(err.Error(), "t.W_q has shape [64 2]") {
		t.Fatalf("HQQ W_q transposed: %v, want an error naming its shape", err)
	}
	if _, _, err := Load(f, "z", Options{Group: 64}); err == nil || !strings.Contains(err.Error(), "axis [0]") {
		t.Fatalf("HQQ axis 0: %v, want an error naming the axis", err)
	}
	if _, _, err := Load(f, "other", Options{}); err == nil {
		t.Fatal("a plain tensor imported as a quantized layer")
	}
	if _, _, err := Load(f, "l", Options{Bits: 8}); err == nil {
		t.Fatal("4-bit GPTQ imported as 8-bit")
	}
}

// TestReferenceFixture reads layers written by the safetensors library
// (internal/testmodel/reference/make_fixtures.py: packed with numpy after
// each project's packing code, weights computed in numpy).
func TestReferenceFixture(t *testing.T) {
	f, err := safetensors.Open("testdata/reference.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		prefix string
		opt    Options
		kind   Kind
		perm   bool
	}{
		{"gptq4", Options{}, KindGPTQ, true},
		{"gptq3", Options{Bits: 3}, KindGPTQ, false},
		{"awq", Options{}, KindAWQ, false},
		{"hqq4", Options{}, KindHQQ, false},
		{"hqq3", Options{}, KindHQQ, false},
	} {
		b, k, err := Load(f, c.prefix, c.opt)
		if err != nil {
			t.Fatalf("%s: %v", c.prefix, err)
		}
		if k != c.kind || (b.Perm != nil) != c.perm {
			t.Fatalf("%s: kind %s, permutation %v", c.prefix, k, b.Perm != nil)
		}
		exp, err := f.Tensor(c.prefix + ".expected")
		if err != nil {
			t.Fatal(err)
		}
		want, err := exp.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		if exp.Shape[0] != b.Rows || exp.Shape[1] != b.Cols {
			t.Fatalf("%s: %dx%d, fixture %v", c.prefix, b.Rows, b.Cols, exp.Shape)
		}
		checkExact(t, c.prefix, b, want)
	}
	if _, _, err := Load(f, "gptq3", Options{}); err == nil || !strings.Contains(err.Error(), "bit width") {
		t.Fatalf("3-bit GPTQ read as 4-bit: %v", err)
	}
}

// BenchmarkFromGPTQ: an ffn_down-shaped layer (14336 inputs, 4096
// outputs, group 128) of 4 and 8 bits converted, in MB of qweight per
// second.
func BenchmarkFromGPTQ(b *testing.B) {
	const in, out, g = 14336, 4096, 128
	for _, c := range []struct {
		bits     int
		actOrder bool
	}{{4, false}, {8, false}, {4, true}} {
		bits := c.bits
		name := fmt.Sprintf("%d-bit", bits)
		if c.actOrder {
			name += "/act-order"
		}
		b.Run(name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(5, 6))
			q := GPTQ{In: in, Out: out, Bits: bits, ZeroOffset: 1,
				QWeight: make([]int32, in*bits/32*out), QZeros: make([]int32, in/g*out*bits/32), Scales: make([]layout.FP16, in/g*out)}
			if c.actOrder { // every group's columns scattered
				q.GIdx = make([]int32, in)
				for i := range q.GIdx {
					q.GIdx[i] = int32(i / g)
				}
				rng.Shuffle(in, func(i, j int) { q.GIdx[i], q.GIdx[j] = q.GIdx[j], q.GIdx[i] })
			}
			fillLayer(rng, q.QWeight, q.QZeros, q.Scales, 0x77777777)
			b.SetBytes(int64(4 * len(q.QWeight)))
			for b.Loop() {
				if _, err := FromGPTQ(q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFromAWQ: BenchmarkFromGPTQ's layer as AWQ.
func BenchmarkFromAWQ(b *testing.B) {
	const in, out, g = 14336, 4096, 128
	rng := rand.New(rand.NewPCG(5, 6))
	q := AWQ{In: in, Out: out, QWeight: make([]int32, in*out/8), QZeros: make([]int32, in/g*out/8), Scales: make([]layout.FP16, in/g*out)}
	fillLayer(rng, q.QWeight, q.QZeros, q.Scales, 0xffffffff)
	b.SetBytes(int64(4 * len(q.QWeight)))
	for b.Loop() {
		if _, err := FromAWQ(q); err != nil {
			b.Fatal(err)
		}
	}
}

// fillLayer fills a benchmark layer's tensors: random words, zero words
// masked by zmask, positive finite scales.
func fillLayer(rng *rand.Rand, qw, qz []int32, sc []layout.FP16, zmask uint32) {
	for i := range qw {
		qw[i] = int32(rng.Uint32())
	}
	for i := range qz {
		qz[i] = int32(rng.Uint32() & zmask)
	}
	for i := range sc {
		sc[i] = layout.ToFP16(0.01 + rng.Float32()/64)
	}
}

// TestNilFile: a nil file is no layer and an error to load.
func TestNilFile(t *testing.T) {
	if k := Detect(nil, "x"); k != "" {
		t.Errorf("Detect(nil): %q", k)
	}
	if p, _ := Layers(nil); p != nil {
		t.Errorf("Layers(nil): %v", p)
	}
	if _, _, err := Load(nil, "x", Options{}); err == nil {
		t.Error("Load(nil): no error")
	}
}

// TestHQQPackedRowsBad: a count of rows below 1 is an error (-10 gave -5).
func TestHQQPackedRowsBad(t *testing.T) {
	for _, n := range []int{0, -10} {
		if p, err := HQQPackedRows(n, 4); err == nil {
			t.Errorf("HQQPackedRows(%d, 4) = %d, no error", n, p)
		}
	}
}
