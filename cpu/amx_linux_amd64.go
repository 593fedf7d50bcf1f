//go:build !noasm && !purego

package cpu

import (
	"sync"
	"syscall"
	"unsafe"
)

// Linux makes a process ask before it uses the AMX tile data (a dynamic
// XSAVE feature): arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
// once, for all its threads. Go's 32 KiB signal stacks hold the 11 KiB
// signal frame the tiles add.
const (
	archGetXcompPerm  = 0x1022
	archReqXcompPerm  = 0x1023
	xfeatureXtiledata = 18
)

// amxPermitted asks for the tile data permission once and reports
// whether the process has it.
func amxPermitted() bool { return amxPerm() }

var amxPerm = sync.OnceValue(func() bool {
	if !hasAll(amxRequires) {
		return false
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0); e != 0 {
		return false
	}
	var mask uint64
	if _, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archGetXcompPerm, uintptr(unsafe.Pointer(&mask)), 0); e != 0 {
		return false
	}
	return mask&(1<<xfeatureXtiledata) != 0
})
