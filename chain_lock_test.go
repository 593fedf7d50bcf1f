package qgemv

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qgemv/qgemv/layout"
)

// TestChainCloseNoDeadlock: two chains over the same two matrices in
// opposite orders, each matrix's Close waiting behind one of them, all
// return. Chain read-locked the matrices in the caller's order before:
// chain A held m1 and waited for m2 behind m2's Close, which waited for
// chain B, which held m2 and waited for m1 behind m1's Close, which
// waited for A (a deadlock).
func TestChainCloseNoDeadlock(t *testing.T) {
	eng, err := Open(WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	// Closed only once everything returned: a deadlocked chain would hold
	// Engine.Close too.
	const d = 64
	var mats [2]*Matrix
	for i := range mats {
		m, err := layout.RandomInt8(d, d, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if mats[i], err = eng.Load(m); err != nil {
			t.Fatal(err)
		}
	}
	v0 := make([]int8, d)
	alpha := []float32{1. / 64, 1. / 64}
	locked, release := make(chan *Matrix, 1), make(chan struct{})
	var calls atomic.Int32
	chainLocked = func(m *Matrix) {
		if calls.Add(1) == 1 { // chain A's first lock: hold it there
			locked <- m
			<-release
		}
	}
	defer func() { chainLocked = nil }()
	done := make(chan error, 4)
	chain := func(ms ...*Matrix) {
		err := eng.Chain(make([]int8, d), ms, alpha, v0)
		if errors.Is(err, ErrClosed) {
			err = nil
		}
		done <- err
	}
	go chain(mats[0], mats[1]) // A
	first := <-locked
	second := mats[0]
	if first == mats[0] {
		second = mats[1]
	}
	pause := func() { time.Sleep(20 * time.Millisecond) } // let the goroutine started reach its lock
	go func() { done <- first.Close() }()
	pause()
	go chain(second, first) // B: the other order
	pause()
	go func() { done <- second.Close() }()
	pause()
	close(release)
	timeout := time.After(10 * time.Second)
	for range 4 {
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-timeout:
			t.Fatal("chains and Closes still waiting after 10 s: deadlock")
		}
	}
	eng.Close()
}
