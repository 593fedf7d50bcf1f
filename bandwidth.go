package qgemv

import "github.com/qgemv/qgemv/cpu"

// StreamRead reads every word of buf once, split across threads
// goroutines, and returns a checksum (so that the reads cannot be
// optimized away): the read-bandwidth meter GEMV throughput is compared
// against. Time it over a buffer far larger than the last-level cache.
func StreamRead(buf []uint64, threads int) uint64 { return cpu.StreamRead(buf, threads) }
