package par

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

func TestEach(t *testing.T) {
	prev := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(prev)
	var workers atomic.Int64
	out := make([]int, 1000)
	err := Each(len(out), func() func(int) error {
		workers.Add(1)
		return func(i int) error { out[i] = i * i; return nil }
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range out {
		if v != i*i {
			t.Fatalf("item %d: %d", i, v)
		}
	}
	if w := workers.Load(); w < 1 || w > 4 {
		t.Errorf("%d workers, want 1 to 4", w)
	}
	// Items 300 and 700 fail: 300's error, every time.
	for range 20 {
		err := Each(1000, func() func(int) error {
			return func(i int) error {
				if i == 300 || i == 700 {
					return fmt.Errorf("item %d", i)
				}
				return nil
			}
		})
		if err == nil || err.Error() != "item 300" {
			t.Fatalf("error %v, want item 300", err)
		}
	}
	if err := Each(0, func() func(int) error { return func(int) error { return errors.New("called") } }); err != nil {
		t.Errorf("no items: %v", err)
	}
}
