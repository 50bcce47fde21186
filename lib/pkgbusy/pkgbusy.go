// Package pkgbusy tells whether a package manager is in the middle of a
// transaction on this machine, by the package managers' own lock
// conventions, without ever taking a lock: a reboot then would boot a
// half-configured system (Debian's kernel hook writes /run/reboot-required
// before zz-update-grub has written the boot menu).
//
// What is checked, on every machine whatever its distribution (a file that
// does not exist holds nothing; docs/detectors.md has the table):
//
//   - dpkg and apt: the fcntl locks on /var/lib/dpkg/lock-frontend (apt,
//     and dpkg run by hand) and /var/lib/dpkg/lock (dpkg), tested with
//     F_OFD_GETLK; and a transaction that was interrupted: a journal in
//     /var/lib/dpkg/updates or a package that /var/lib/dpkg/status shows
//     half-installed, unpacked, half-configured, triggers-awaited or
//     triggers-pending (what `dpkg --audit` reports);
//   - rpm: the fcntl lock on .rpm.lock in /var/lib/rpm and in
//     /usr/lib/sysimage/rpm (rpm takes it for every transaction, whoever
//     runs rpm: dnf, yum, zypper, PackageKit);
//   - dnf 5: the fcntl lock on /run/dnf/rpmtransaction.lock;
//   - dnf 4: /var/lib/dnf/rpmdb_lock.pid naming a live process;
//   - zypper (libzypp): /run/zypp.pid and /run/zypp-rpm.pid naming a live
//     process (libzypp truncates the file when it lets go).
//
// A lock file that cannot be opened for the test (not root) is looked up in
// /proc/locks instead; a state that cannot be read at all is reported as
// busy ("cannot check"), never as free.
package pkgbusy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
)

// Holder is one package manager found mid-transaction (or one state that
// could not be checked).
type Holder struct {
	// Manager is the package manager: dpkg, rpm, dnf or zypper.
	Manager string `json:"manager"`
	// Path is the lock or state file, as the system sees it.
	Path string `json:"path"`
	// PID is the process holding it, 0 when unknown (an OFD lock, as apt
	// takes them, does not tell).
	PID int `json:"pid,omitempty"`
	// Command is that process's name (/proc/PID/comm), when known.
	Command string `json:"command,omitempty"`
	// Detail says in a few words what was found and what to do.
	Detail string `json:"detail"`
	// cannot is set when the state could not be checked (busy too).
	cannot bool
}

// lockKind is how a lock file says it is held.
type lockKind int

const (
	// fcntlLock: a POSIX or OFD write lock on the whole file.
	fcntlLock lockKind = iota
	// pidFile: the file names a live process.
	pidFile
)

// lockFile is one convention of one package manager.
type lockFile struct {
	manager string
	path    string
	kind    lockKind
}

// lockFiles are the locks Find tests, in this order.
func lockFiles() []lockFile {
	return []lockFile{
		{"dpkg", "/var/lib/dpkg/lock-frontend", fcntlLock},
		{"dpkg", "/var/lib/dpkg/lock", fcntlLock},
		{"rpm", "/var/lib/rpm/.rpm.lock", fcntlLock},
		{"rpm", "/usr/lib/sysimage/rpm/.rpm.lock", fcntlLock},
		{"dnf", "/run/dnf/rpmtransaction.lock", fcntlLock},
		{"dnf", "/var/lib/dnf/rpmdb_lock.pid", pidFile},
		{"zypper", "/run/zypp.pid", pidFile},
		{"zypper", "/run/zypp-rpm.pid", pidFile},
	}
}

// Find lists every package manager that is mid-transaction under root ("" or
// "/" is this machine), and every lock or state it could not check. Process
// ids are this machine's (/proc).
func Find(root string) []Holder {
	var found []Holder
	seen := map[string]bool{}
	dpkgHeld := false
	for _, l := range lockFiles() {
		real := under(root, l.path)
		// /var/lib/rpm is a link to /usr/lib/sysimage/rpm on newer
		// systems: one lock, looked at once.
		if id, ok := fileID(real); ok {
			if seen[id] {
				continue
			}
			seen[id] = true
		}
		var h *Holder
		switch l.kind {
		case fcntlLock:
			h = checkFcntl(real, l.path)
		case pidFile:
			h = checkPIDFile(real, l.path)
		}
		if h != nil {
			h.Manager, h.Path = l.manager, l.path
			if !h.cannot {
				h.Detail = l.manager + " is mid-transaction: " + h.Detail
			}
			found = append(found, *h)
			dpkgHeld = dpkgHeld || l.manager == "dpkg"
		}
	}
	// While dpkg holds its lock its half-done states are its work in
	// progress, which the lock already reports.
	if !dpkgHeld {
		found = append(found, dpkgInterrupted(root)...)
	}
	return found
}

// Check returns nil when no package manager is mid-transaction under root,
// else an error with exitcode.PackageManagerBusy that names what is busy
// and what to do.
func Check(root string) error {
	hs := Find(root)
	if len(hs) == 0 {
		return nil
	}
	return exitcode.New(exitcode.PackageManagerBusy, BusyError{Holders: hs})
}

// BusyError is Check's error: the holders found.
type BusyError struct{ Holders []Holder }

func (e BusyError) Error() string {
	msg := "pkgbusy: " + e.Holders[0].Detail
	if n := len(e.Holders) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more: %s)", n, e.names())
	}
	return msg + "; no reboot now"
}

func (e BusyError) names() string {
	var s []string
	for _, h := range e.Holders[1:] {
		s = append(s, h.Path)
	}
	return strings.Join(s, ", ")
}

// Holders returns the holders of a Check error (nil for any other error).
func Holders(err error) []Holder {
	var b BusyError
	if errors.As(err, &b) {
		return b.Holders
	}
	return nil
}

// under is p below root.
func under(root, p string) string {
	if root == "" || filepath.Clean(root) == "/" {
		return p
	}
	return filepath.Join(root, p)
}

// fileID is the device and inode of path, for telling a link to a lock
// from a second lock.
func fileID(path string) (string, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	if st, ok := statT(fi); ok {
		return fmt.Sprintf("%d:%d", st.dev, st.ino), true
	}
	return "", false
}

// holderOf describes the process pid for a detail: "pid 42 (apt-get)".
func holderOf(pid int) (string, string) {
	if pid <= 0 {
		return "a process (an open file description lock does not name its holder)", ""
	}
	comm := ""
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil {
		comm = strings.TrimSpace(string(b))
	}
	if comm == "" {
		return "pid " + strconv.Itoa(pid), ""
	}
	return "pid " + strconv.Itoa(pid) + " (" + comm + ")", comm
}

// cannotTell is the holder of a state that could not be checked.
func cannotTell(path string, err error) *Holder {
	return &Holder{cannot: true, Detail: fmt.Sprintf("cannot check %s (%v), so a package manager may be mid-transaction; run as root, or fix the file", path, exitcode.PathCause(err))}
}

// isNotExist reports a file that is not there (or a parent that is not a
// directory): nothing is held.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir)
}
