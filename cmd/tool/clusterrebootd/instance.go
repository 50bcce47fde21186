package clusterrebootd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/trust"
)

// InstanceLock is the file in state_dir that `run` holds an exclusive flock
// on while it runs.
const InstanceLock = "clusterrebootd.lock"

// lockInstance makes `run` (the daemon, and run --once) the only one on its
// state_dir: two would each take the lock as this node, count its reboots
// twice and race on the reboot marker. The flock goes with the process, even
// on SIGKILL; the file, with the holder's PID for the message, stays.
func lockInstance(stateDir string) (*os.File, error) {
	if err := os.MkdirAll(stateDir, 0o750); err != nil {
		return nil, exitcode.Errorf(exitcode.Config, "clusterrebootd: state_dir %s: %v", stateDir, exitcode.PathCause(err))
	}
	if err := privateDir("state_dir", stateDir); err != nil {
		return nil, err
	}
	path := filepath.Join(stateDir, InstanceLock)
	// O_NOFOLLOW: a link planted here must not have root write its pid
	// into whatever it points to.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o640)
	if errors.Is(err, syscall.ELOOP) {
		return nil, exitcode.Errorf(exitcode.Config, "clusterrebootd: %s is a symbolic link, which is never followed; remove it", path)
	}
	if err != nil {
		return nil, exitcode.Errorf(exitcode.Config, "clusterrebootd: cannot open %s: %v", path, exitcode.PathCause(err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf("pid %d", pid)
			}
			return nil, exitcode.Errorf(exitcode.Config, "clusterrebootd: another clusterrebootd run (%s) uses state_dir %s; "+
				"stop it first (systemctl stop clusterrebootd) or give this one a state_dir of its own; clusterrebootd simulate works beside it", holder, stateDir)
		}
		return nil, exitcode.Errorf(exitcode.Config, "clusterrebootd: cannot lock %s: %v", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// privateDir refuses a state_dir or run_dir (field) that anyone but root
// and this user could change (lib/trust.PrivateDir): the daemon writes
// its marker, history and lock file there as root. A missing run_dir is
// fine: it is made when first written to.
func privateDir(field, dir string) error {
	err := trust.PrivateDir(dir, os.Geteuid())
	if err == nil || (field == "run_dir" && errors.Is(err, fs.ErrNotExist)) {
		return nil
	}
	return exitcode.Errorf(exitcode.Config, "clusterrebootd: %s %s is not safe to write as this user: %v", field, dir, exitcode.PathCause(err))
}
