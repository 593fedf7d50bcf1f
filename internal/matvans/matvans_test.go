package matvans

import "testing"

func TestChain(t *testing.T) {
	wl, err := New(64, 4, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := wl.Run(func(i int, v []int8, y []int32) error {
		Dot(wl.W[i], wl.D, wl.D, v, y)
		return nil
	})
	if err != nil || Hash(got) != Hash(wl.Ref) {
		t.Fatal(err)
	}
	nonzero := 0
	for _, x := range got {
		if x != 0 {
			nonzero++
		}
	}
	if nonzero < 32 {
		t.Fatalf("chain collapsed: %d nonzero of 64", nonzero)
	}
	// A wrong product is caught.
	if _, err := wl.Run(func(i int, v []int8, y []int32) error {
		Dot(wl.W[i], wl.D, wl.D, v, y)
		y[3]++
		return nil
	}); err == nil {
		t.Fatal("a wrong product passed")
	}
	if Hash([]int8{1, 2, 3}) == Hash([]int8{1, 3, 2}) {
		t.Fatal("hash ignores order")
	}
	if _, err := New(0, 1, 4, 1); err == nil {
		t.Fatal("d = 0 accepted")
	}
}
