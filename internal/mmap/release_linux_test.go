package mmap

import "testing"

// rssFile returns this process's resident file-backed memory in bytes.
func rssFile(t *testing.T) int64 {
	u, err := Resident()
	if err != nil {
		t.Skip(err)
	}
	return u.File
}

// TestRelease: reading a mapped file makes it resident; releasing its
// pages takes them out of the process's resident memory, and the bytes
// read back unchanged.
func TestRelease(t *testing.T) {
	const size = 32 << 20
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i * 7 >> 3)
	}
	m := openWritten(t, want)
	defer m.Close()
	before := rssFile(t)
	var sum int
	for i := 0; i < size; i += 512 {
		sum += int(m.Data[i])
	}
	if sum == 0 {
		t.Fatal("the mapping reads as zeros")
	}
	touched := rssFile(t)
	if touched-before < size/2 {
		t.Skipf("reading the mapping raised RssFile by only %d bytes (%d to %d)", touched-before, before, touched)
	}
	m.Release(m.Data[100 : size-100]) // partial pages at both ends: released too
	after := rssFile(t)
	if after-before > size/16 {
		t.Fatalf("RssFile %d before, %d after reading, %d after Release: the pages stayed resident", before, touched, after)
	}
	for i := 0; i < size; i += 4099 {
		if m.Data[i] != want[i] {
			t.Fatalf("byte %d reads %d after Release, want %d", i, m.Data[i], want[i])
		}
	}
	m.Release(want[:10]) // not part of the mapping: ignored
	m.Release(nil)
}
