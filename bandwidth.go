package qgemv

import (
	"time"

	"github.com/qgemv/qgemv/cpu"
)

// StreamRead reads every word of buf once, split across threads
// goroutines, and returns a checksum (so that the reads cannot be
// optimized away): one sequential stream per thread. Time it over a
// buffer far larger than the last-level cache; ReadBandwidth is the
// roofline the benchmarks use.
func StreamRead(buf []uint64, threads int) uint64 { return cpu.StreamRead(buf, threads) }

// ReadBandwidth reads buf once with each loop shape the CPU has (one
// sequential stream per thread, four interleaved streams per thread,
// software prefetch ahead, non-temporal loads) and returns the best rate
// in bytes per second and the name of its shape: which shape streams
// fastest depends on the machine, and a roofline below what the machine
// can do would flatter the kernels compared with it. Time it over a
// buffer far larger than the last-level cache (synth.WorkingSet).
func ReadBandwidth(buf []uint64, threads int) (float64, string) {
	best, name := 0.0, ""
	for _, shape := range cpu.ReadShapes() {
		t0 := time.Now()
		if _, err := cpu.StreamReadShape(buf, threads, shape); err != nil {
			continue // ReadShapes lists only shapes this CPU has
		}
		if r := float64(8*len(buf)) / time.Since(t0).Seconds(); r > best {
			best, name = r, shape
		}
	}
	return best, name
}
