//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package dispatch

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// lockCalibration takes an exclusive advisory lock (flock) on
// calibLockPath, so that two processes calibrating at once do not time
// their devices and CPUs against each other's load. It waits at most
// calibLockWait for another holder, then goes on without the lock (a
// calibration is a hint, never worth hanging for). The file is opened
// read-only, so any user who can read it can lock it; a user who cannot
// open it calibrates without the lock. The returned function releases the
// lock.
func lockCalibration() func() {
	// Open before create: Linux with fs.protected_regular refuses an
	// O_CREAT open of another user's file in a sticky directory (/tmp)
	// even when the file exists.
	f, err := os.Open(calibLockPath)
	if errors.Is(err, os.ErrNotExist) {
		f, err = os.OpenFile(calibLockPath, os.O_RDONLY|os.O_CREATE, 0o666)
	}
	if err != nil {
		return func() {}
	}
	deadline := time.Now().Add(calibLockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) || time.Now().After(deadline) {
			f.Close()
			return func() {}
		}
		time.Sleep(10 * time.Millisecond)
	}
}
