//go:build opencl

package opencl

import (
	"errors"
	"fmt"
	"math"
	mrand "math/rand"
	"slices"
	"testing"
	"unsafe"

	"github.com/qgemv/qgemv/internal/devbuf"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
	"github.com/qgemv/qgemv/layout/ans"
)

func f32Bytes(s []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s)) }

// TestDeviceBuffers: on device buffers, MulA8Buf and QuantizeBuf +
// MulI8Buf give MulA8's bits (Q4G128, Bits4G128 act-order, Sparse12G128;
// batch 1, 3 and 16), MulF16Buf MulF16's result on the rounded values
// within 1e-5 of its largest, SwiGLU, Add and Scale the host formulas, a
// NaN is reported once by the next Wait, foreign buffers are errors and
// closed ones ErrClosed (a second Close too). It runs twice: with the
// device's own buffer kind and with buffers that are never mapped
// (copies through clEnqueueRead/Write, as on a discrete GPU).
func TestDeviceBuffers(t *testing.T) {
	backend(t) // skips without a device
	for _, mapped := range []bool{true, false} {
		t.Run(fmt.Sprintf("mapped=%v", mapped), func(t *testing.T) {
			b, err := Open(Options{CacheDir: cacheDir})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			d := *b.x.dev
			d.info.Unified = d.info.Unified && mapped
			b.x.dev = &d
			deviceBuffers(t, b)
		})
	}
}

// newBuf allocates an n-byte device buffer of b or fails the test.
func newBuf(t *testing.T, b *Backend, n int) *Buf {
	t.Helper()
	v, err := b.NewBuf(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	return v.(*Buf)
}

func deviceBuffers(t *testing.T, b *Backend) {
	const rows, cols = 70, 600
	perm, err := layout.RandomBits(rows, cols, 4, 128, 9)
	if err != nil {
		t.Fatal(err)
	}
	perm.Perm = make([]int32, cols)
	for i := range perm.Perm {
		perm.Perm[i] = int32((i*7 + 3) % cols)
	}
	ms := []layout.Matrix{perm}
	for _, name := range []string{"q4g128", "sparse12g128"} {
		m, err := synth.Named(name, rows, cols, 3)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	x := synth.Vector(16*cols, 5)
	xb, yb := newBuf(t, b, 4*len(x)), newBuf(t, b, 4*16*rows)
	if err := xb.Write(0, f32Bytes(x)); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		mx, err := b.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		pc := mx.geo.PCols
		qb, sb := newBuf(t, b, 16*pc), newBuf(t, b, 4*16*pc/128)
		for _, batch := range []int{1, 3, 16} {
			want := make([]float32, batch*rows)
			if err := mx.MulA8(want, x[:batch*cols], batch); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, batch*rows)
			for _, how := range []string{"MulA8Buf", "QuantizeBuf+MulI8Buf"} {
				if how == "MulA8Buf" {
					err = mx.MulA8Buf(yb, xb, batch)
				} else if err = mx.QuantizeBuf(qb, sb, xb, batch); err == nil {
					err = mx.MulI8Buf(yb, qb, sb, batch)
				}
				if errors.Is(err, devbuf.ErrNoDevicePath) && !b.bufQuant {
					t.Logf("%s: the device cannot quantize exactly (division or denormals): the host does", how)
					continue
				}
				if err == nil {
					err = yb.Read(0, f32Bytes(got))
				}
				if err != nil {
					t.Fatalf("%s %s batch %d: %v", m.Name(), how, batch, err)
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s %s batch %d: y[%d] = %v, MulA8 %v", m.Name(), how, batch, i, got[i], want[i])
					}
				}
			}
		}
		for _, batch := range []int{1, 3, 16} { // binary16: MulF16 of the rounded values
			xh := make([]layout.FP16, batch*cols)
			for i := range xh {
				xh[i] = layout.ToFP16(x[i])
			}
			want := make([]float32, batch*rows)
			if err := mx.MulF16(want, xh, batch); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, batch*rows)
			if err := mx.MulF16Buf(yb, xb, batch); err != nil {
				t.Fatal(err)
			}
			if err := yb.Read(0, f32Bytes(got)); err != nil {
				t.Fatal(err)
			}
			var big float64
			for _, w := range want {
				big = max(big, math.Abs(float64(w)))
			}
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-5*big) {
					t.Fatalf("%s MulF16Buf batch %d: y[%d] = %v, MulF16 %v", m.Name(), batch, i, got[i], want[i])
				}
			}
		}
		if m == ms[0] && b.bufQuant { // a NaN: reported by the next Wait, once
			bad := append([]float32(nil), x[:cols]...)
			bad[5] = float32(math.NaN())
			nb := newBuf(t, b, 4*cols)
			if err := nb.Write(0, f32Bytes(bad)); err != nil {
				t.Fatal(err)
			}
			if err := mx.MulA8Buf(yb, nb, 1); err != nil {
				t.Fatal(err)
			}
			if err := b.Wait(); !errors.Is(err, errNonFinite) {
				t.Fatalf("Wait after a NaN: %v, want %v", err, errNonFinite)
			}
			if err := b.Wait(); err != nil {
				t.Fatalf("second Wait: %v", err)
			}
			if err := nb.Close(); err != nil {
				t.Fatal(err)
			}
			if err := mx.MulA8Buf(yb, nb, 1); !errors.Is(err, ErrClosed) {
				t.Fatalf("a closed operand: %v, want ErrClosed", err)
			}
			if err := nb.Write(0, make([]byte, 4)); !errors.Is(err, ErrClosed) {
				t.Fatalf("Write after Close: %v, want ErrClosed", err)
			}
			if err := nb.Read(0, make([]byte, 4)); !errors.Is(err, ErrClosed) {
				t.Fatalf("Read after Close: %v, want ErrClosed", err)
			}
			if err := nb.Close(); !errors.Is(err, ErrClosed) {
				t.Fatalf("second Close: %v, want ErrClosed", err)
			}
		}
		if err := mx.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Element-wise operations.
	const n = 1000
	g, u := synth.Vector(n, 7), synth.Vector(n, 8)
	gb, ub, db := newBuf(t, b, 4*n), newBuf(t, b, 4*n), newBuf(t, b, 4*n)
	if err := gb.Write(0, f32Bytes(g)); err != nil {
		t.Fatal(err)
	}
	if err := ub.Write(0, f32Bytes(u)); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	for _, op := range []string{"swiglu", "add", "scale"} {
		switch op {
		case "swiglu":
			err = b.SwiGLU(db, gb, ub, n)
		case "add":
			err = b.Add(db, gb, ub, n)
		default:
			err = b.Scale(db, gb, 0.375, n)
		}
		if err == nil {
			err = db.Read(0, f32Bytes(got))
		}
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		for i := range got {
			var want float64
			switch op {
			case "swiglu":
				want = float64(g[i]) / (1 + math.Exp(-float64(g[i]))) * float64(u[i])
			case "add":
				want = float64(g[i] + u[i])
			default:
				want = float64(0.375 * g[i])
			}
			if d := math.Abs(float64(got[i]) - want); d > 8*math.Abs(want)*0x1p-24 {
				t.Fatalf("%s: element %d = %v, want %v", op, i, got[i], want)
			}
		}
	}

	// A buffer of another backend.
	other := backend(t)
	ob, err := other.NewBuf(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	if err := b.Add(db, gb, ob, n); err == nil {
		t.Fatal("a buffer of another backend was accepted")
	}
	if _, err := b.NewBuf(b.x.dev.info.GlobalMem + 1); err == nil {
		t.Fatal("a buffer larger than the device was allocated")
	}
}

// TestDeviceBuffersANS: MulI32Buf of an ANS and an int8 matrix equals
// Mul; a damaged stream is reported by the next Wait (once), wrapping
// ans.ErrCorrupt; Requantize equals layout.Requantize.
func TestDeviceBuffersANS(t *testing.T) {
	b := backend(t)
	rng := mrand.New(mrand.NewSource(11))
	const rows, cols = 64, 512
	w := randInt8(rng, rows*cols, 30)
	enc, err := ans.Encode(w, rows, cols, ans.WarpRows)
	if err != nil {
		t.Fatal(err)
	}
	am, err := b.LoadANS(enc)
	if err != nil {
		t.Fatal(err)
	}
	defer am.Close()
	im, err := b.LoadInt8(w, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	v := randInt8(rng, cols, 50)
	want := make([]int32, rows)
	if err := im.Mul(v, want); err != nil {
		t.Fatal(err)
	}
	vb, err := b.NewBuf(cols)
	if err != nil {
		t.Fatal(err)
	}
	yb, err := b.NewBuf(4 * rows)
	if err != nil {
		t.Fatal(err)
	}
	if err := vb.Write(0, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), cols)); err != nil {
		t.Fatal(err)
	}
	got := make([]int32, rows)
	gotBytes := unsafe.Slice((*byte)(unsafe.Pointer(&got[0])), 4*rows)
	for _, m := range []interface {
		MulI32Buf(dst, x devbuf.Buf, batch int) error
	}{am, im} {
		clear(got)
		if err := m.MulI32Buf(yb, vb, 1); err != nil {
			t.Fatal(err)
		}
		if err := yb.Read(0, gotBytes); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%T: MulI32Buf differs from Mul", m)
		}
	}
	// Requantize.
	qb, err := b.NewBuf(rows)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Requantize(qb, yb, 0.0123, rows); err != nil {
		t.Fatal(err)
	}
	q := make([]int8, rows)
	if err := qb.Read(0, unsafe.Slice((*byte)(unsafe.Pointer(&q[0])), rows)); err != nil {
		t.Fatal(err)
	}
	wantQ := make([]int8, rows)
	layout.Requantize(wantQ, want, 0.0123)
	if !slices.Equal(q, wantQ) {
		t.Fatalf("Requantize: %v, want %v", q, wantQ)
	}
	// A damaged stream: the next Wait reports it, the one after does not.
	bad := *enc
	bad.Words = append([]uint32(nil), enc.Words...)
	bad.Words[bad.Offsets[2]+64] ^= 0x00ff00ff
	if _, err := bad.Decode(); err == nil {
		t.Fatal("the reference decodes the damaged matrix; the case tests nothing")
	}
	bm, err := b.LoadANS(&bad)
	if err != nil {
		t.Fatal(err)
	}
	defer bm.Close()
	if err := bm.MulI32Buf(yb, vb, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); !errors.Is(err, ans.ErrCorrupt) {
		t.Fatalf("Wait after a damaged stream: %v, want ans.ErrCorrupt", err)
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("second Wait: %v", err)
	}
}

// TestTimeGEMV: the kernels' own time is positive and finite for every
// activation, rotating over two matrices; mismatched matrices, a bad
// activation and codebooks are errors.
func TestTimeGEMV(t *testing.T) {
	b := backend(t)
	var mats []*Matrix
	for seed := uint64(1); seed <= 2; seed++ {
		m, err := synth.Named("q4g128", 256, 1024, seed)
		if err != nil {
			t.Fatal(err)
		}
		mx, err := b.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		defer mx.Close()
		mats = append(mats, mx)
	}
	for _, act := range []string{"A32", "A16", "A8"} {
		for _, batch := range []int{1, 5} {
			s, err := TimeGEMV(mats, act, batch, 4)
			if err != nil {
				t.Fatalf("%s batch %d: %v", act, batch, err)
			}
			if !(s > 0 && s < 10) {
				t.Fatalf("%s batch %d: %v s per multiply", act, batch, s)
			}
		}
	}
	other, err := synth.Named("bits4g128", 256, 1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	om, err := b.Load(other)
	if err != nil {
		t.Fatal(err)
	}
	defer om.Close()
	if _, err := TimeGEMV([]*Matrix{mats[0], om}, "A8", 1, 2); err == nil {
		t.Error("matrices of two formats were timed together")
	}
	if _, err := TimeGEMV(mats, "A4", 1, 2); err == nil {
		t.Error("activation A4 was accepted")
	}
	if _, err := TimeGEMV(mats, "A8", 17, 2); !errors.Is(err, ErrBatch) {
		t.Errorf("batch 17: %v, want ErrBatch", err)
	}
	cb, err := synth.Named("cb-m1v4b8g128", 256, 1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := b.Load(cb)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	if _, err := TimeGEMV([]*Matrix{cm}, "A32", 1, 2); err == nil {
		t.Error("a codebook matrix was timed")
	}
}

// TestBufferStagedWrites: buffer writes go through pinned staging memory
// without blocking, so the caller's slice is reused at once, several
// writes share the staging memory until a wait, a write larger than it
// grows it, and a write that finds it full waits for the queue first;
// Read brings back exactly what was written (buffers that are never
// mapped: the discrete-GPU path).
func TestBufferStagedWrites(t *testing.T) {
	b := discreteBackend(t)
	defer b.Close()
	rng := mrand.New(mrand.NewSource(7))
	sizes := []int{40 << 10, 100 << 10, 8 << 10, 3}
	bufs := make([]*Buf, len(sizes))
	want := make([][]byte, len(sizes))
	for i, n := range sizes {
		bufs[i] = newBuf(t, b, n)
		want[i] = make([]byte, n)
	}
	src := make([]byte, 100<<10)
	write := func(i, off, n int) {
		t.Helper()
		rng.Read(src[:n])
		if err := bufs[i].Write(int64(off), src[:n]); err != nil {
			t.Fatal(err)
		}
		copy(want[i][off:], src[:n])
		for j := range src[:n] { // the slice is the caller's again
			src[j] = ^src[j]
		}
	}
	for round := 0; round < 3; round++ {
		write(0, 0, sizes[0])
		write(1, 0, sizes[1])
		for k := 0; k < 40; k++ { // 40 KiB of small writes: the staging memory fills
			write(2, (k*1000)%(sizes[2]-1024), 1024)
		}
		write(3, 1, 2)
		for i, v := range bufs {
			got := make([]byte, sizes[i])
			if err := v.Read(0, got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want[i]) {
				t.Fatalf("round %d: buffer %d (%d bytes) read back differs from what was written", round, i, sizes[i])
			}
		}
		if err := bufs[0].Read(0, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBufferSharedOrder: int8 multiplies on one quantized input (gate and
// up) make the tiled kernels' order and block sums once; any write or
// launch in between (a new quantization, a written buffer) or a matrix
// with another order makes them again. Every result is MulI8's on the
// same values, computed after each run of buffer multiplies (a host-slice
// multiply in between would itself end the sharing).
func TestBufferSharedOrder(t *testing.T) {
	b := discreteBackend(t)
	defer b.Close()
	const rows, cols = 40, 700
	var ms []*Matrix
	for i, m := range []layout.Matrix{randomQ4(mrand.New(mrand.NewSource(1)), rows, cols), randomQ4(mrand.New(mrand.NewSource(2)), rows, cols), randomBits4(mrand.New(mrand.NewSource(3)), rows, cols)} {
		mx, err := b.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		defer mx.Close()
		if mx.tiled == 0 {
			t.Skipf("matrix %d: no tiled int8 kernel on this device", i)
		}
		ms = append(ms, mx)
	}
	pc := ms[0].geo.PCols
	xb, qb, sb := newBuf(t, b, 4*cols), newBuf(t, b, pc), newBuf(t, b, 4*pc/128)
	var ys []*Buf
	for range 4 {
		ys = append(ys, newBuf(t, b, 4*rows))
	}
	rng := mrand.New(mrand.NewSource(4))
	// run multiplies the quantized input by each matrix in turn, with no
	// other operation between them, then checks every result.
	run := func(step string, mxs ...*Matrix) {
		t.Helper()
		for i, mx := range mxs {
			if err := mx.MulI8Buf(ys[i], qb, sb, 1); err != nil {
				t.Fatal(err)
			}
		}
		xq, xs := make([]int8, pc), make([]float32, pc/128)
		if err := qb.Read(0, unsafe.Slice((*byte)(unsafe.Pointer(&xq[0])), pc)); err != nil {
			t.Fatal(err)
		}
		if err := sb.Read(0, f32Bytes(xs)); err != nil {
			t.Fatal(err)
		}
		for i, mx := range mxs {
			got, want := make([]float32, rows), make([]float32, rows)
			if err := ys[i].Read(0, f32Bytes(got)); err != nil {
				t.Fatal(err)
			}
			if err := mx.MulI8(want, xq, xs, 1); err != nil {
				t.Fatal(err)
			}
			for r := range got {
				if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
					t.Fatalf("%s, multiply %d: y[%d] = %v, MulI8 %v", step, i, r, got[r], want[r])
				}
			}
		}
	}
	quantize := func() {
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		if err := xb.Write(0, f32Bytes(x)); err != nil {
			t.Fatal(err)
		}
		if err := ms[0].QuantizeBuf(qb, sb, xb, 1); err != nil {
			if errors.Is(err, devbuf.ErrNoDevicePath) {
				t.Skip("the device cannot quantize exactly")
			}
			t.Fatal(err)
		}
	}
	quantize()
	run("gate, up, another order, the first again", ms[0], ms[1], ms[2], ms[1])
	quantize()
	run("a new quantization", ms[0], ms[1])
	q := make([]int8, pc)
	for i := range q {
		q[i] = int8(rng.Intn(255) - 127)
	}
	if err := qb.Write(0, unsafe.Slice((*byte)(unsafe.Pointer(&q[0])), pc)); err != nil {
		t.Fatal(err)
	}
	run("written activations", ms[1], ms[0])

	// binary16: gate and up share the gathered, rounded input the same way
	runF16 := func(step string, x []float32, mxs ...*Matrix) {
		t.Helper()
		if err := xb.Write(0, f32Bytes(x)); err != nil {
			t.Fatal(err)
		}
		for i, mx := range mxs {
			if err := mx.MulF16Buf(ys[i], xb, 1); err != nil {
				t.Fatal(err)
			}
		}
		xh := make([]layout.FP16, cols)
		for i := range xh {
			xh[i] = layout.ToFP16(x[i])
		}
		for i, mx := range mxs {
			got, want := make([]float32, rows), make([]float32, rows)
			if err := ys[i].Read(0, f32Bytes(got)); err != nil {
				t.Fatal(err)
			}
			if err := mx.MulF16(want, xh, 1); err != nil {
				t.Fatal(err)
			}
			for r := range got {
				if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
					t.Fatalf("%s, multiply %d: y[%d] = %v, MulF16 %v", step, i, r, got[r], want[r])
				}
			}
		}
	}
	for k := 0; k < 2; k++ {
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		runF16(fmt.Sprintf("binary16 input %d: gate, up, another order, the first again", k), x, ms[0], ms[1], ms[2], ms[1])
	}
}

// TestBufferReadFillsStaging: a Read as large as the whole staging memory
// still brings its data back intact with the status word (the two share
// one piece of staging memory: the word must not land on the data).
func TestBufferReadFillsStaging(t *testing.T) {
	b := discreteBackend(t)
	defer b.Close()
	mx, err := b.Load(randomQ4(mrand.New(mrand.NewSource(1)), 8, 256))
	if err != nil {
		t.Fatal(err)
	}
	defer mx.Close()
	xb, qb, sb := newBuf(t, b, 4*256), newBuf(t, b, 256), newBuf(t, b, 8)
	if err := mx.QuantizeBuf(qb, sb, xb, 1); err != nil { // makes the status word
		if errors.Is(err, devbuf.ErrNoDevicePath) {
			t.Skip("the device cannot quantize exactly")
		}
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{64 << 10, 128 << 10, 256 << 10} { // the staging memory's sizes as it grows
		big := newBuf(t, b, n)
		src := make([]byte, n)
		mrand.New(mrand.NewSource(int64(n))).Read(src)
		if err := big.Write(0, src); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		if err := big.Read(0, got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, src) {
			i := 0
			for got[i] == src[i] {
				i++
			}
			t.Fatalf("%d bytes: read back differs from byte %d", n, i)
		}
	}
}
