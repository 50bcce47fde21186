package pkgbusy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// errNotDir is what opening a path below a file gives.
var errNotDir = unix.ENOTDIR

// ids is the part of a stat result fileID needs.
type ids struct{ dev, ino uint64 }

func statT(fi os.FileInfo) (ids, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ids{}, false
	}
	return ids{dev: st.Dev, ino: st.Ino}, true
}

// checkFcntl reports whether any process holds an fcntl lock (POSIX or OFD)
// on path, by asking the kernel whether a write lock on the whole file
// could be placed (F_OFD_GETLK), which never takes one. dpkg takes
// traditional POSIX locks (F_SETLK: the answer names the holder's pid), apt
// takes OFD locks where the kernel has them (the answer's pid is -1).
//
// The file is opened read-only and closed again. This process holds no
// fcntl lock on these files, so closing cannot release one of its own
// (POSIX locks are dropped on any close by their owner).
func checkFcntl(path, shown string) *Holder {
	f, err := os.Open(path)
	if isNotExist(err) {
		return nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return procLocks(path, shown)
	}
	if err != nil {
		return cannotTell(shown, err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	err = unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk)
	if errors.Is(err, unix.EINVAL) {
		// A kernel before 3.15: the traditional test sees every other
		// process's POSIX locks (and, there, apt takes those too).
		lk = unix.Flock_t{Type: unix.F_WRLCK}
		err = unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk)
	}
	if err != nil {
		return cannotTell(shown, err)
	}
	if lk.Type == unix.F_UNLCK {
		return nil
	}
	who, comm := holderOf(int(lk.Pid))
	pid := int(lk.Pid)
	if pid < 0 {
		pid = 0
	}
	return &Holder{PID: pid, Command: comm, Detail: fmt.Sprintf("%s is locked by %s", shown, who)}
}

// procLocks looks path up in the kernel's table of file locks, readable by
// every user, when the file itself cannot be opened: a lock on its device
// and inode (POSIX or OFD, not a waiter) holds it.
func procLocks(path, shown string) *Holder {
	fi, err := os.Stat(path)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return cannotTell(shown, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return cannotTell(shown, errors.New("no device and inode"))
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return cannotTell(shown, err)
	}
	defer f.Close()
	pid, held, err := lockedIn(f, unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	if err != nil {
		return cannotTell(shown, err)
	}
	if !held {
		return nil
	}
	who, comm := holderOf(pid)
	return &Holder{PID: max(pid, 0), Command: comm, Detail: fmt.Sprintf("%s is locked by %s (seen in /proc/locks)", shown, who)}
}

// lockedIn scans /proc/locks text for a POSIX or OFD lock on the file
// major:minor:inode, e.g. "1: POSIX  ADVISORY  WRITE 1367 08:01:262311 0 EOF"
// (a blocked waiter has "->" after its number and holds nothing).
func lockedIn(r *os.File, major, minor uint32, ino uint64) (int, bool, error) {
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, ino)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] == "->" {
			continue
		}
		if (f[1] != "POSIX" && f[1] != "OFDLCK") || f[5] != want {
			continue
		}
		pid, _ := strconv.Atoi(f[4])
		return pid, true, nil
	}
	return 0, false, sc.Err()
}

// checkPIDFile reports whether the pid file at path names a live process,
// as dnf 4 and libzypp decide it: empty (libzypp truncates it on release)
// or a process that is gone (or a zombie, whose cmdline is empty) holds
// nothing.
func checkPIDFile(path, shown string) *Holder {
	b, err := readSmall(path, 64)
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return cannotTell(shown, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid < 0 {
		return &Holder{Detail: fmt.Sprintf("%s does not hold a process id (%q); make sure no package manager runs, then remove it", shown, s)}
	}
	if pid == 0 || !alive(pid) {
		return nil
	}
	who, comm := holderOf(pid)
	return &Holder{PID: pid, Command: comm, Detail: fmt.Sprintf("%s names %s, which is running", shown, who)}
}

// alive reports a running process that is not a zombie. kill(pid, 0) tells
// whether the process exists even where /proc hides it (ProtectProc=
// invisible in a drop-in); a zombie, whose cmdline is empty, holds nothing.
func alive(pid int) bool {
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return false
	}
	b, err := readSmall("/proc/"+strconv.Itoa(pid)+"/cmdline", 16)
	if err != nil {
		return true // exists, but /proc does not show it: busy
	}
	return len(b) > 0
}

// readSmall reads at most n bytes of path.
func readSmall(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(n)))
}
