package hugemem

import "testing"

func TestAlloc(t *testing.T) {
	for _, n := range []int{0, 1, 4095, 3 << 20} {
		b := Alloc(n)
		if len(b.Bytes) != n {
			t.Fatalf("Alloc(%d): %d bytes", n, len(b.Bytes))
		}
		for i := range b.Bytes {
			if b.Bytes[i] != 0 {
				t.Fatalf("Alloc(%d): byte %d not zero", n, i)
			}
			b.Bytes[i] = byte(i)
		}
		b.Free()
		b.Free()
		if b.Bytes != nil {
			t.Fatal("Free left the slice")
		}
	}
}
