package qgemv_test

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qgemv/qgemv"
	"github.com/qgemv/qgemv/internal/synth"
	"github.com/qgemv/qgemv/layout"
)

// FuzzBufferAPI runs programs of buffer operations drawn from the input
// on every CPU kernel set (and GPU backend, with $QGEMV_FUZZ_GPU=1):
// buffers of any length and element type made, written, read and closed
// in any order, nil buffers and buffers of another engine, multiplies of
// three matrices (Q4G128, Bits4G128, Int8) with any batch and activation
// type, the quantization, elementwise and requantization operations,
// recorded sequences run (also with RunIO's copies), waits, host-slice
// multiplies, shared inputs and the int8 chain with slices of any
// length, and the engine closed part way. Every call succeeds or returns
// an error: nothing panics or hangs, and while the engine is open a
// canary multiply gives the same bits as before the program.
func FuzzBufferAPI(f *testing.F) {
	f.Add([]byte{0, 10, 0, 0, 20, 0, 2, 0, 10, 5, 1, 0, 1, 1, 9, 4, 1, 0})
	f.Add([]byte{0, 255, 0, 0, 64, 1, 0, 32, 2, 6, 1, 2, 0, 1, 7, 0, 1, 2, 1, 10, 5, 0, 1, 1, 0, 11})
	f.Add([]byte{0, 2, 1, 0, 2, 2, 8, 0, 1, 0, 12, 3, 0, 4, 0, 13})
	ms, backends, x := bufferFuzzFixture(f)
	f.Fuzz(func(t *testing.T, prog []byte) {
		wd := time.AfterFunc(20*time.Second, func() { panic("FuzzBufferAPI: one input took over 20 s") })
		defer wd.Stop()
		for _, be := range backends {
			runBufferProgram(t, be, [][]byte{prog}, ms, x)
		}
	})
}

// FuzzBufferAPIConcurrent runs two of FuzzBufferAPI's programs at once on
// one engine (each with its own buffers; the engine and its matrices
// shared, closed by either part way): nothing panics, hangs or, under
// -race, races.
func FuzzBufferAPIConcurrent(f *testing.F) {
	f.Add([]byte{0, 10, 0, 0, 20, 0, 2, 0, 10, 5, 1, 0, 1, 1, 9}, []byte{0, 255, 0, 0, 64, 1, 0, 32, 2, 11, 5, 0, 1, 1, 0, 11})
	f.Add([]byte{13, 0, 0, 14, 1, 0, 3, 4, 2, 15, 3, 0, 1, 2}, []byte{12, 0, 0, 16, 2, 3, 4, 5, 6, 1, 17, 4, 5, 1})
	ms, backends, x := bufferFuzzFixture(f)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		wd := time.AfterFunc(20*time.Second, func() { panic("FuzzBufferAPIConcurrent: one input took over 20 s") })
		defer wd.Stop()
		for _, be := range backends {
			runBufferProgram(t, be, [][]byte{a, b}, ms, x)
		}
	})
}

// bufferFuzzFixture returns the buffer programs' matrices (Q4G128 64x256,
// Bits4G128 40x200, Int8 48x64), the backends they run on (fuzzBackends)
// and an input vector.
func bufferFuzzFixture(f *testing.F) ([]layout.Matrix, []string, []float32) {
	q4, err := synth.Matrix(layout.FormatSpec{Format: layout.FormatQ4G128, N: 4, G: 128}, 64, 256, 4)
	if err != nil {
		f.Fatal(err)
	}
	spec, err := layout.ParseFormatSpec("bits4g128")
	if err != nil {
		f.Fatal(err)
	}
	b4, err := synth.Matrix(spec, 40, 200, 5)
	if err != nil {
		f.Fatal(err)
	}
	w := make([]int8, 48*64)
	for i := range w {
		w[i] = int8(i*7 - 100)
	}
	i8, err := layout.NewInt8(w, 48, 64)
	if err != nil {
		f.Fatal(err)
	}
	return []layout.Matrix{q4, b4, i8}, fuzzBackends(), synth.Vector(256, 6)
}

// runBufferProgram runs the programs progs on one engine of backend, each
// on its own goroutine (their buffers apart; the engine and its matrices
// shared), then checks the canary.
func runBufferProgram(t *testing.T, backend string, progs [][]byte, ms []layout.Matrix, x []float32) {
	e, err := qgemv.Open(qgemv.WithBackend(backend), qgemv.WithThreads(2))
	if err != nil {
		t.Fatal(err)
	}
	other, err := qgemv.Open(qgemv.WithBackend(backend), qgemv.WithThreads(1))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var mats []*qgemv.Matrix
	for _, m := range ms {
		mx, err := e.Load(m)
		if err != nil {
			t.Fatal(err)
		}
		mats = append(mats, mx)
	}
	otherMat, err := other.Load(ms[0])
	if err != nil {
		t.Fatal(err)
	}
	xv := func(n int) []float32 { // n activations, the first NaN when n % 7 == 3
		v := make([]float32, n)
		for i := range v {
			v[i] = x[i%len(x)]
		}
		if n%7 == 3 {
			v[0] = float32(math.NaN())
		}
		return v
	}
	canary := newFuzzCanary(t, mats[0], x)
	var closed atomic.Bool
	run := func(prog []byte) {
		foreign, err := other.NewBuffer(64, qgemv.Float32) // each program its own: a buffer is written by one goroutine at a time
		if err != nil {
			t.Error(err)
			return
		}
		at := 0
		next := func() int {
			if at >= len(prog) {
				return 0
			}
			at++
			return int(prog[at-1])
		}
		var bufs []*qgemv.Buffer
		buf := func() *qgemv.Buffer {
			i := next()
			switch {
			case i == 255:
				return foreign
			case i < len(bufs):
				return bufs[i]
			}
			return nil // a nil buffer
		}
		acts := []qgemv.Activation{qgemv.A32, qgemv.A16, qgemv.A8, qgemv.Activation(7)}
		var op func(rec bool) error
		op = func(rec bool) error {
			switch next() % 19 {
			case 0:
				b, err := e.NewBuffer(next()*3-10, qgemv.ElemType(next()%4))
				if err == nil && len(bufs) < 8 {
					bufs = append(bufs, b)
				}
				return err
			case 1:
				if b := buf(); b != nil {
					return b.Close()
				}
			case 2:
				b, n := buf(), next()*2
				if b == nil {
					return nil
				}
				return b.Write(xv(n))
			case 3:
				b, n := buf(), next()*2
				if b == nil {
					return nil
				}
				switch n % 3 {
				case 0:
					return b.WriteInt8(make([]int8, n))
				case 1:
					return b.WriteInt32(make([]int32, n))
				}
				return b.WriteFP16(make([]layout.FP16, n))
			case 4:
				b, n := buf(), next()*2
				if b == nil {
					return nil
				}
				switch n % 3 {
				case 0:
					return b.Read(make([]float32, n))
				case 1:
					return b.ReadInt8(make([]int8, n))
				}
				return b.ReadInt32(make([]int32, n))
			case 5:
				m := mats[next()%len(mats)]
				return m.MulBuffer(buf(), buf(), next()%18, acts[next()%len(acts)])
			case 6:
				m := mats[next()%len(mats)]
				return m.QuantizeBuffer(buf(), buf(), buf(), next()%18)
			case 7:
				m := mats[next()%len(mats)]
				return m.MulInt8Buffer(buf(), buf(), buf(), next()%18)
			case 8:
				m := mats[next()%len(mats)]
				return m.MulInt32Buffer(buf(), buf(), next()%18)
			case 9:
				switch next() % 4 {
				case 0:
					return e.SwiGLU(buf(), buf(), buf())
				case 1:
					return e.Add(buf(), buf(), buf())
				case 2:
					return e.Scale(buf(), buf(), float32(next())-100)
				}
				return e.Requantize(buf(), buf(), float32(next())/64)
			case 10:
				return e.Wait()
			case 11:
				if rec {
					return nil
				}
				n := next() % 4
				s, err := e.Record(func() error {
					for i := 0; i < n; i++ {
						if err := op(true); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
				defer s.Close()
				if err := s.Run(); err != nil {
					return err
				}
				for range next() % 3 { // input and output of any buffers and lengths
					if err := s.RunIO(buf(), xv(next()*2), buf(), make([]float32, next()*2)); err != nil {
						return err
					}
				}
				return nil
			case 12:
				if !rec && next()%8 == 0 {
					closed.Store(true)
					return e.Close()
				}
			case 13:
				m := mats[next()%len(mats)]
				r, c := m.Rows(), m.Cols()
				dst := make([]float32, r)
				return m.Mul(dst, x[:c], 1, acts[next()%len(acts)])
			case 14: // host slices of any length
				m := mats[next()%len(mats)]
				dst, xs := make([]float32, next()*2), xv(next()*2)
				batch := next()%18 - 1
				switch next() % 4 {
				case 0:
					return m.Mul(dst, xs, batch, acts[next()%len(acts)])
				case 1:
					return m.MulFP16(dst, make([]layout.FP16, len(xs)), batch)
				case 2:
					return m.MulInt8(dst, make([]int8, next()*3), make([]float32, next()%8), batch)
				}
				return m.MulInt32(make([]int32, len(dst)), make([]int8, len(xs)), batch)
			case 15: // a shared input over any matrices (nil, closed, of another engine)
				var sm []*qgemv.Matrix
				for n := next() % 4; n > 0; n-- {
					switch i := next() % 5; {
					case i < len(mats):
						sm = append(sm, mats[i])
					case i == 3:
						sm = append(sm, nil)
					default:
						sm = append(sm, otherMat)
					}
				}
				si, err := e.NewSharedInput(sm...)
				if err != nil {
					return err
				}
				if err := si.Set(xv(next()*2), next()%18-1, acts[next()%len(acts)]); err != nil {
					_ = si.Mul(0, make([]float32, 64)) // Mul before a good Set
					return err
				}
				return si.Mul(next()%4-1, make([]float32, next()*2))
			case 16:
				k := next() % 3
				dst := make([][]float32, k)
				for i := range dst {
					dst[i] = make([]float32, next()*2)
				}
				sm := mats[:next()%3]
				return e.MulShared(dst, sm, xv(next()*2), next()%18-1, acts[next()%len(acts)])
			case 17:
				n := next() * 2
				return e.QuantizeA8(make([]int8, n+next()%3), make([]float32, next()%4), xv(n))
			case 18: // the int8 chain (mats[2] is 48x64: not square, so usually an error)
				al := []float32{float32(next()) / 64, float32(math.Inf(1))}[:1+next()%2]
				cm := []*qgemv.Matrix{mats[2], mats[next()%len(mats)]}[:len(al)]
				return e.Chain(make([]int8, next()), cm, al, make([]int8, next()))
			}
			return nil
		}
		for steps := 0; at < len(prog) && steps < 64; steps++ {
			if err := op(false); err != nil && err.Error() == "" {
				t.Errorf("%s: an error with no text", backend)
			}
		}
	}
	var wg sync.WaitGroup
	for _, p := range progs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(p)
		}()
	}
	wg.Wait()
	if closed.Load() {
		if err := mats[0].Mul(make([]float32, 64), x, 1, qgemv.A32); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("%s: a multiply after Close: %v", backend, err)
		}
		return
	}
	_ = e.Wait() // a program may leave a fault to report
	canary.check(t, "the program")
	e.Close()
}
