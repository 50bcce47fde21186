package memtrim

import (
	"fmt"
	"os"
	"syscall"
)

// Trim advises the kernel that the clean read-only mappings of the running
// executable are not needed now (see the package comment). It is safe to
// call at any time from any goroutine; the daemon calls it after start-up
// and after each cycle.
func Trim() (Result, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return Result{}, fmt.Errorf("memtrim: %w", err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return Result{}, fmt.Errorf("memtrim: %w", err)
	}
	defer f.Close()
	return trim(f, exe, madviseDontNeed)
}

// madviseDontNeed is madvise(start, length, MADV_DONTNEED).
func madviseDontNeed(start, length uintptr) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, start, length, syscall.MADV_DONTNEED); errno != 0 {
		return errno
	}
	return nil
}
