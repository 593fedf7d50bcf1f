package qgemv_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/qgemv/qgemv"
)

// TestRecordMisuse: Record(nil), a Record inside Record's fn, a panic in
// fn and a Sequence not made by Record are errors (or the panic, passed
// on), and the engine runs buffer operations normally afterwards. Before,
// Record(nil) and the zero Sequence's Run panicked with a nil
// dereference, the nested Record waited for ever on the recording lock,
// and after a recovered panic in fn every later buffer operation was
// silently recorded into the dead recording instead of running.
func TestRecordMisuse(t *testing.T) {
	eng, b := cpuBuffer(t, 4)
	if _, err := eng.Record(nil); err == nil {
		t.Error("Record(nil) accepted")
	}
	done := make(chan error, 1)
	go func() {
		_, err := eng.Record(func() error {
			_, err := eng.Record(func() error { return eng.Scale(b, b, 2) })
			return err
		})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a Record inside Record accepted")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Record inside Record still waiting after 10 s")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic in fn was not passed on")
			}
		}()
		eng.Record(func() error {
			if err := eng.Scale(b, b, 2); err != nil {
				return err
			}
			panic("fn fails")
		})
	}()
	if err := b.Write([]float32{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Scale(b, b, 2); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 4)
	if err := b.Read(got); err != nil {
		t.Fatal(err)
	}
	if want := []float32{2, 4, 6, 8}; !slices.Equal(got, want) {
		t.Errorf("Scale after a panicking Record: %v, want %v (recorded instead of run?)", got, want)
	}
	var s qgemv.Sequence
	if err := s.Run(); err == nil {
		t.Error("Run of a zero Sequence accepted")
	}
	if err := s.RunIO(b, got, b, got); err == nil {
		t.Error("RunIO of a zero Sequence accepted")
	}
}

// TestScaleNonFinite: a NaN or infinite Scale factor is an error and
// leaves the buffer as it was (it filled it with NaN before, where
// Requantize and Chain refuse such scales).
func TestScaleNonFinite(t *testing.T) {
	eng, b := cpuBuffer(t, 4)
	want := []float32{1, 2, 3, 4}
	if err := b.Write(want); err != nil {
		t.Fatal(err)
	}
	for _, s := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		if err := eng.Scale(b, b, s); err == nil {
			t.Errorf("Scale by %v accepted", s)
		}
	}
	got := make([]float32, 4)
	if err := b.Read(got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("buffer after refused Scales: %v, want %v", got, want)
	}
}

// cpuBuffer opens a CPU engine, closed when the test ends, and a float32
// buffer of n values on it.
func cpuBuffer(t *testing.T, n int) (*qgemv.Engine, *qgemv.Buffer) {
	t.Helper()
	eng, err := qgemv.Open(qgemv.WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	b, err := eng.NewBuffer(n, qgemv.Float32)
	if err != nil {
		t.Fatal(err)
	}
	return eng, b
}
