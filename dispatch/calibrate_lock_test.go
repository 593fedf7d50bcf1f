//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package dispatch

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestCalibrationLock: a calibration waits while another process holds
// the machine's calibration lock, and uses the result that process cached
// instead of timing against it; a holder that never lets go is waited for
// only calibLockWait. (Two processes used to calibrate at once, each
// timing its device and CPU while the other loaded them.)
func TestCalibrationLock(t *testing.T) {
	dir := t.TempDir()
	oldPath, oldWait := calibLockPath, calibLockWait
	calibLockPath = filepath.Join(dir, "lock")
	t.Cleanup(func() { calibLockPath, calibLockWait = oldPath, oldWait })

	hold := func() func() {
		f, err := os.OpenFile(calibLockPath, os.O_RDONLY|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		return func() { f.Close() }
	}

	c, gm, cm := fakeCalibrator(t, "fake\x00lock", filepath.Join(dir, "cache"), time.Millisecond, 4*time.Millisecond)
	release := hold()
	done := make(chan calibration)
	go func() {
		r, err := c.calibrate()
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	time.Sleep(100 * time.Millisecond)
	if gm.Load() != 0 || cm.Load() != 0 {
		t.Fatalf("measured (%d+%d multiplies) while another process held the lock", gm.Load(), cm.Load())
	}
	theirs := calibration{Key: c.Key, Device: c.Device, GPUSeconds: 0.5, CPUSeconds: 0.25}
	if err := writeCalibration(c.path(), theirs); err != nil {
		t.Fatal(err)
	}
	release()
	select {
	case r := <-done:
		if r != theirs || gm.Load() != 0 || cm.Load() != 0 {
			t.Errorf("after the wait: %+v after %d+%d multiplies, want the other process's %+v without measuring", r, gm.Load(), cm.Load(), theirs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("calibration still waiting after the lock was released")
	}

	// A holder that never releases: measured after calibLockWait.
	calibLockWait = 50 * time.Millisecond
	release = hold()
	defer release()
	other := c
	other.Key = "fake\x00lock\x00other"
	start := time.Now()
	r, err := other.calibrate()
	if err != nil || !r.valid(other.Key) || gm.Load() != calibRuns {
		t.Errorf("lock never released: %+v, %v after %d device multiplies; want a measurement", r, err, gm.Load())
	}
	if waited := time.Since(start); waited < calibLockWait {
		t.Errorf("measured after %v, before the %v wait", waited, calibLockWait)
	}
}
