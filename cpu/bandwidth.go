package cpu

// StreamRead reads every word of buf once, split across threads
// goroutines in contiguous ranges, and returns a checksum (so the reads
// cannot be optimized away). It is the read-bandwidth roofline that GEMV
// throughput is compared against: time it over a buffer far larger than
// the last-level cache.
func StreamRead(buf []uint64, threads int) uint64 {
	threads = max(1, threads)
	per := (len(buf) + threads - 1) / threads
	per = (per + 7) &^ 7
	sums := make([]uint64, threads*8) // one cache line per goroutine
	fns := make([]func(), threads)
	for t := range fns {
		lo := min(t*per, len(buf))
		part := buf[lo:min(lo+per, len(buf))]
		fns[t] = func() { sums[t*8] = streamRead(part) }
	}
	t := &team{} // workers of its own, stopped when the read is done
	defer t.close()
	t.runFuncs(fns)
	var s uint64
	for i := 0; i < threads; i++ {
		s ^= sums[i*8]
	}
	return s
}

// streamReadGeneric xors every word of b.
func streamReadGeneric(b []uint64) uint64 {
	var a0, a1, a2, a3, a4, a5, a6, a7 uint64
	for len(b) >= 8 {
		a0 ^= b[0]
		a1 ^= b[1]
		a2 ^= b[2]
		a3 ^= b[3]
		a4 ^= b[4]
		a5 ^= b[5]
		a6 ^= b[6]
		a7 ^= b[7]
		b = b[8:]
	}
	for _, v := range b {
		a0 ^= v
	}
	return a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7
}

var streamRead = streamReadGeneric
