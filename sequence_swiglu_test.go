package qgemv_test

import (
	"math"
	"strings"
	"testing"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// TestSequenceSwiGLUMerged: a recorded SwiGLU whose output an A8 or A16
// multiply reads next (on CUDA computed by that multiply's activation
// preparation in the sequence's graph) gives, bit for bit, what the
// operations give run one by one: the SwiGLU output too, for Q4G128 and
// Bits4G128 (two quantization kernels; Bits' block sums read the stored
// values), an act-order matrix (gathered columns), a column count not a
// multiple of four, batches 1, 3 and 16, a NaN reported (A8), and
// SwiGLUs that cannot be merged (another input, other lengths) queued as
// they are.
func TestSequenceSwiGLUMerged(t *testing.T) {
	eng, err := qgemv.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	actOrder, err := layout.RandomBits(96, 512, 4, 128, 5)
	if err != nil {
		t.Fatal(err)
	}
	actOrder.Perm = make([]int32, 512)
	for i := range actOrder.Perm {
		actOrder.Perm[i] = int32((i*37 + 11) % 512)
	}
	mats := map[string]*qgemv.Matrix{
		"q4g128":              loadNamed(t, eng, "q4g128", 96, 512, 1),
		"bits4g128":           loadNamed(t, eng, "bits4g128", 96, 512, 2),
		"q4g128 1001 columns": loadNamed(t, eng, "q4g128", 80, 1001, 3),
	}
	if mats["act-order"], err = eng.Load(actOrder); err != nil {
		t.Fatal(err)
	}
	for name, m := range mats {
		for _, batch := range []int{1, 3, 16} {
			for _, tc := range []struct {
				mode string
				act  qgemv.Activation
			}{{"merged", qgemv.A8}, {"other input", qgemv.A8}, {"longer SwiGLU", qgemv.A8}, {"merged", qgemv.A16}, {"other input", qgemv.A16}} {
				mode := tc.mode
				cols := m.Cols()
				n := batch * cols
				full := n // SwiGLU runs over whole buffers: merged only where the multiply reads all of them
				if mode == "longer SwiGLU" {
					full = n + 8
				}
				g, u, h := newBuf(t, eng, full, qgemv.Float32), newBuf(t, eng, full, qgemv.Float32), newBuf(t, eng, full, qgemv.Float32)
				other := newBuf(t, eng, n, qgemv.Float32)
				y := newBuf(t, eng, batch*m.Rows(), qgemv.Float32)
				ops := func() error {
					if err := eng.SwiGLU(h, g, u); err != nil {
						return err
					}
					in := h
					if mode == "other input" {
						in = other
					}
					return m.MulBuffer(y, in, batch, tc.act)
				}
				seq, err := eng.Record(ops)
				if err != nil {
					t.Fatal(err)
				}
				for step := range 4 {
					gv, uv := synth.Vector(full, uint64(100+step)), synth.Vector(full, uint64(200+step))
					if step == 3 {
						gv[full/2] = float32(math.NaN())
					}
					for _, w := range []struct {
						b *qgemv.Buffer
						v []float32
					}{{g, gv}, {u, uv}, {other, synth.Vector(n, 300)}} {
						if err := w.b.Write(w.v); err != nil {
							t.Fatal(err)
						}
					}
					// run, wait, read y and h: the sequence, then the same
					// operations one by one
					runRead := func(run func() error) ([]float32, []float32, error) {
						err := run()
						if err == nil {
							err = eng.Wait()
						}
						ys, hs := make([]float32, batch*m.Rows()), make([]float32, full)
						if rerr := y.Read(ys); rerr != nil && err == nil {
							err = rerr
						}
						if rerr := h.Read(hs); rerr != nil {
							t.Fatal(rerr)
						}
						return ys, hs, err
					}
					gotY, gotH, runErr := runRead(seq.Run)
					wantY, wantH, opsErr := runRead(ops)
					what := name + " " + mode + " " + tc.act.String()
					if (runErr == nil) != (opsErr == nil) {
						t.Fatalf("%s batch %d step %d: sequence %v, operations %v", what, batch, step, runErr, opsErr)
					}
					if step == 3 && mode != "other input" && tc.act == qgemv.A8 && runErr == nil {
						t.Fatalf("%s batch %d: a NaN through SwiGLU into A8 was not reported", what, batch)
					}
					for i := range wantH {
						if math.Float32bits(gotH[i]) != math.Float32bits(wantH[i]) {
							t.Fatalf("%s batch %d step %d: SwiGLU output %d = %v, want %v", what, batch, step, i, gotH[i], wantH[i])
						}
					}
					if runErr != nil {
						continue
					}
					for i := range wantY {
						if math.Float32bits(gotY[i]) != math.Float32bits(wantY[i]) {
							t.Fatalf("%s batch %d step %d: output %d = %v, want %v", what, batch, step, i, gotY[i], wantY[i])
						}
					}
				}
				if strings.HasPrefix(eng.Backend(), "cuda") && !seq.Graphed() {
					t.Errorf("%s batch %d: the sequence was not captured", name+" "+mode+" "+tc.act.String(), batch)
				}
				seq.Close()
				for _, b := range []*qgemv.Buffer{g, u, h, other, y} {
					b.Close()
				}
			}
		}
	}
}
