package cpu

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// StreamRead reads every word of buf once, split across threads
// goroutines in contiguous ranges, and returns a checksum (so the reads
// cannot be optimized away). It is the read-bandwidth roofline that GEMV
// throughput is compared against: time it over a buffer far larger than
// the last-level cache.
func StreamRead(buf []uint64, threads int) uint64 {
	return streamReadWith(streamShapes[0].fn, buf, threads)
}

// ReadShapes names the loop shapes of StreamReadShape: "seq" (the one
// StreamRead uses: one sequential stream per thread), "x4" (four
// interleaved streams per thread), "pf" (software prefetch 4 KiB ahead),
// "nt" (non-temporal loads), "win" (the threads claim 128 KiB chunks in
// address order, so that they read one window of memory together, as the
// multiplies' workers claim row chunks, instead of each its own region;
// each chunk read with the "pf" loop).
// Generic Go has "seq" only.
func ReadShapes() []string {
	var names []string
	for _, s := range streamShapes {
		if s.fn != nil {
			names = append(names, s.name)
		}
	}
	return names
}

// StreamReadShape is StreamRead with the loop shape named shape
// (ReadShapes); an unknown or unavailable shape is an error.
func StreamReadShape(buf []uint64, threads int, shape string) (uint64, error) {
	for _, s := range streamShapes {
		if s.name == shape && s.fn != nil {
			if s.window {
				return streamReadWindow(s.fn, buf, threads), nil
			}
			return streamReadWith(s.fn, buf, threads), nil
		}
	}
	return 0, fmt.Errorf("cpu: no read shape %q here (have %v)", shape, ReadShapes())
}

// streamShapes are the loop shapes of the streaming read (set by the
// assembly's init where the CPU has it); seq first.
var streamShapes = []struct {
	name   string
	fn     func([]uint64) uint64
	window bool // streamReadWindow splits the work
}{{"seq", streamReadGeneric, false}, {"x4", nil, false}, {"pf", nil, false}, {"nt", nil, false}, {"win", nil, true}}

func streamReadWith(read func([]uint64) uint64, buf []uint64, threads int) uint64 {
	threads = readThreads(threads, len(buf))
	per := (len(buf) + threads - 1) / threads
	per = (per + 7) &^ 7
	return streamTeam(threads, func(t int) uint64 {
		lo := min(t*per, len(buf))
		return read(buf[lo:min(lo+per, len(buf))])
	})
}

// streamReadWindow is streamReadWith with the threads claiming chunks of
// windowChunk words in address order from a shared counter.
func streamReadWindow(read func([]uint64) uint64, buf []uint64, threads int) uint64 {
	return streamReadClaims(read, buf, threads, windowChunk)
}

// streamReadClaims is streamReadWindow with claims of per words.
func streamReadClaims(read func([]uint64) uint64, buf []uint64, threads, per int) uint64 {
	threads = readThreads(threads, len(buf))
	n := (len(buf) + per - 1) / per
	var next atomic.Int64
	return streamTeam(threads, func(int) uint64 {
		var s uint64
		for c := int(next.Add(1) - 1); c < n; c = int(next.Add(1) - 1) {
			s ^= read(buf[c*per : min((c+1)*per, len(buf))])
		}
		return s
	})
}

// StreamReadTiles reads the whole tiles of buf, rows rows of rowBytes
// bytes (a multiple of 128) each, in the order the batch-1 A8 kernels
// read a row-major matrix: a tile 128 bytes of each row in turn, the next
// tile prefetched in order. threads goroutines claim whole tiles in
// address order, about 128 KiB at a time, as StreamReadShape's "win"
// claims its chunks; it returns a checksum. Set beside "win" over the
// same buffer it measures what that read order costs
// (BenchmarkReadPatterns). It needs AVX-512: elsewhere an error.
func StreamReadTiles(buf []uint64, threads, rows, rowBytes int) (uint64, error) {
	if streamTiles == nil {
		return 0, errors.New("cpu: the tile read needs AVX-512")
	}
	if rows < 1 || rowBytes < 128 || rowBytes%128 != 0 || rows > 1<<20 || rowBytes > 1<<20 {
		return 0, fmt.Errorf("cpu: tile read: %d rows of %d bytes (want 1 to 2^20 rows, bytes a multiple of 128 up to 2^20)", rows, rowBytes)
	}
	tw := rows * rowBytes / 8 // words per tile
	read := func(b []uint64) uint64 { return streamTiles(b, rows, rowBytes) }
	return streamReadClaims(read, buf, threads, max(1, windowChunk/tw)*tw), nil
}

// streamTiles is StreamReadTiles' loop (set where the CPU has it).
var streamTiles func(b []uint64, rows, rowBytes int) uint64

// readThreads bounds a read's goroutines: at least one, at most one per
// 8 words of n and maxReadThreads (a caller's absurd count would
// otherwise size the checksum slice past what make can allocate).
func readThreads(threads, n int) int {
	return max(1, min(threads, n/8, maxReadThreads))
}

// maxReadThreads is the most goroutines a streaming read starts.
const maxReadThreads = 4096

// streamTeam runs part(t) for t < threads on a worker team of its own
// (stopped when the read is done) and xors their checksums.
func streamTeam(threads int, part func(t int) uint64) uint64 {
	sums := make([]uint64, threads*8) // one cache line per goroutine
	fns := make([]func(), threads)
	for t := range fns {
		fns[t] = func() { sums[t*8] = part(t) }
	}
	tm := &team{}
	defer tm.close()
	tm.runFuncs(fns)
	var s uint64
	for i := 0; i < threads; i++ {
		s ^= sums[i*8]
	}
	return s
}

// windowChunk is the words of one claim of streamReadWindow (128 KiB, the
// row chunk of a multi-threaded multiply).
const windowChunk = 128 << 10 / 8

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
