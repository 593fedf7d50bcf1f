//go:build !noasm && !purego

package cpu

import "github.com/qgemv/qgemv/asm"

// prefetchL2 asks for b's cache lines in L2 without waiting for them.
func prefetchL2(b []byte) { asm.PrefetchLinesT1(b) }
