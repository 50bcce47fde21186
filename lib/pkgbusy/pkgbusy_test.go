package pkgbusy

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// The child processes of these tests are this test binary run again:
// CRD_PKGBUSY_HOLD=posix|ofd FILE takes that kind of write lock on FILE,
// says "locked" and waits for its stdin to close, as dpkg (POSIX F_SETLK)
// and apt (OFD locks) hold theirs.
func TestMain(m *testing.M) {
	if kind := os.Getenv("CRD_PKGBUSY_HOLD"); kind != "" {
		os.Exit(holdLock(kind, os.Getenv("CRD_PKGBUSY_FILE")))
	}
	os.Exit(m.Run())
}

func holdLock(kind, path string) int {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := unix.F_SETLK
	if kind == "ofd" {
		cmd = unix.F_OFD_SETLK
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), cmd, &lk); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// holder starts a child that holds a kind lock on path until the test ends;
// it returns the child's pid.
func holder(t *testing.T, kind, path string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CRD_PKGBUSY_HOLD="+kind, "CRD_PKGBUSY_FILE="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("lock holder: %q, %v", line, err)
	}
	return cmd.Process.Pid
}

// A Debian machine at rest: both dpkg locks exist (dpkg leaves them
// behind), nothing holds them, every package is installed or config-files.
func debianAtRest() map[string]string {
	return map[string]string{
		"var/lib/dpkg/lock":          "",
		"var/lib/dpkg/lock-frontend": "",
		"var/lib/dpkg/updates/":      "",
		"var/lib/dpkg/status": "Package: dpkg\nStatus: install ok installed\nVersion: 1.21.22\n\n" +
			"Package: linux-image-6.1.0-50-cloud-amd64\nStatus: install ok installed\n\n" +
			"Package: linux-image-6.1.0-42-cloud-amd64\nStatus: deinstall ok config-files\n",
	}
}

func TestFcntlLocks(t *testing.T) {
	tests := []struct {
		name, kind, lock string
		wantPID          bool
	}{
		{"dpkg holds /var/lib/dpkg/lock with a POSIX lock", "posix", "var/lib/dpkg/lock", true},
		{"apt holds lock-frontend with an OFD lock", "ofd", "var/lib/dpkg/lock-frontend", false},
		{"rpm holds .rpm.lock", "posix", "var/lib/rpm/.rpm.lock", true},
		{"rpm on /usr/lib/sysimage", "posix", "usr/lib/sysimage/rpm/.rpm.lock", true},
		{"dnf 5 holds rpmtransaction.lock", "posix", "run/dnf/rpmtransaction.lock", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := testsupport.Tree(t, debianAtRest())
			if err := os.MkdirAll(filepath.Join(root, filepath.Dir(tt.lock)), 0o755); err != nil {
				t.Fatal(err)
			}
			if hs := Find(root); len(hs) != 0 {
				t.Fatalf("before the lock: %+v", hs)
			}
			pid := holder(t, tt.kind, filepath.Join(root, tt.lock))
			hs := Find(root)
			if len(hs) != 1 {
				t.Fatalf("Find = %+v, want one holder", hs)
			}
			h := hs[0]
			if h.Path != "/"+tt.lock {
				t.Errorf("path %q, want /%s", h.Path, tt.lock)
			}
			if tt.wantPID && (h.PID != pid || h.Command == "" || !strings.Contains(h.Detail, "pid "+strconv.Itoa(pid))) {
				t.Errorf("holder %+v, want pid %d named", h, pid)
			}
			if !tt.wantPID && h.PID != 0 {
				t.Errorf("an OFD lock names no pid, got %+v", h)
			}
			err := Check(root)
			if exitcode.CodeOf(err) != exitcode.PackageManagerBusy {
				t.Fatalf("Check = %v (code %v), want package_manager_busy", err, exitcode.CodeOf(err))
			}
			if msg := err.Error(); !strings.Contains(msg, "/"+tt.lock+" is locked by") || !strings.HasSuffix(msg, "; no reboot now") || !strings.Contains(msg, " is mid-transaction: ") {
				t.Errorf("message %q", msg)
			}
			if len(Holders(err)) != 1 {
				t.Errorf("Holders(err) = %+v", Holders(err))
			}
		})
	}
}

func TestFreeMachines(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
	}{
		{"empty root: no package manager at all", map[string]string{"etc/": ""}},
		{"debian at rest", debianAtRest()},
		{"rpm at rest, /var/lib/rpm a link to /usr/lib/sysimage/rpm", map[string]string{
			"usr/lib/sysimage/rpm/.rpm.lock": "", "var/lib/rpm": "->../../usr/lib/sysimage/rpm"}},
		{"zypp.pid truncated by libzypp on release", map[string]string{"run/zypp.pid": "", "run/zypp-rpm.pid": "\n"}},
		{"zypp.pid 0", map[string]string{"run/zypp.pid": "0\n"}},
		{"a file where a directory is expected", map[string]string{"var/lib/dpkg": "a file", "run": "a file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := testsupport.Tree(t, tt.files)
			if hs := Find(root); len(hs) != 0 {
				t.Fatalf("Find = %+v, want nothing", hs)
			}
			if err := Check(root); err != nil {
				t.Fatalf("Check = %v", err)
			}
		})
	}
}

func TestRPMLinkCountedOnce(t *testing.T) {
	root := testsupport.Tree(t, map[string]string{"usr/lib/sysimage/rpm/.rpm.lock": "", "var/lib/rpm": "->../../usr/lib/sysimage/rpm"})
	holder(t, "posix", filepath.Join(root, "usr/lib/sysimage/rpm/.rpm.lock"))
	hs := Find(root)
	if len(hs) != 1 || hs[0].Manager != "rpm" {
		t.Fatalf("Find = %+v, want the one rpm lock once", hs)
	}
}

func TestPIDFiles(t *testing.T) {
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zombie.Wait() })
	// Until reaped, the exited child is a zombie: its cmdline is empty.
	for i := 0; i < 100; i++ {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", zombie.Process.Pid)); strings.Contains(string(b), ") Z ") {
			break
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 10e6}, nil)
	}
	livePID := strconv.Itoa(live.Process.Pid)
	tests := []struct {
		name, file, content string
		busy                bool
		detail              string
	}{
		{"dnf 4 rpmdb lock of a live dnf", "var/lib/dnf/rpmdb_lock.pid", livePID, true, "names pid " + livePID + " (sleep), which is running"},
		{"zypper's lock, pid and newline", "run/zypp.pid", livePID + "\n", true, "/run/zypp.pid names pid " + livePID},
		{"zypp-rpm's lock", "run/zypp-rpm.pid", livePID + "\n", true, "/run/zypp-rpm.pid names pid"},
		{"a dead process's lock is stale", "var/lib/dnf/rpmdb_lock.pid", strconv.Itoa(dead.Process.Pid), false, ""},
		{"a zombie holds nothing (libzypp's rule)", "run/zypp.pid", strconv.Itoa(zombie.Process.Pid), false, ""},
		{"not a pid: cannot tell", "run/zypp.pid", "garbage", true, `does not hold a process id ("garbage")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := testsupport.Tree(t, map[string]string{tt.file: tt.content})
			hs := Find(root)
			if !tt.busy {
				if len(hs) != 0 {
					t.Fatalf("Find = %+v, want nothing", hs)
				}
				return
			}
			if len(hs) != 1 || !strings.Contains(hs[0].Detail, tt.detail) || hs[0].Path != "/"+tt.file {
				t.Fatalf("Find = %+v, want one holder of /%s with %q", hs, tt.file, tt.detail)
			}
		})
	}
}

func TestDpkgInterrupted(t *testing.T) {
	status := "Package: dpkg\nStatus: install ok installed\n\n" +
		"Package: linux-image-6.1.0-57-cloud-amd64\nStatus: install ok half-configured\nVersion: 6.1.192-3\n\n" +
		"Package: grub-pc\nStatus: install ok triggers-pending\n"
	tests := []struct {
		name   string
		files  map[string]string
		detail string
	}{
		{"a half-configured kernel", map[string]string{"var/lib/dpkg/status": status, "var/lib/dpkg/updates/": ""},
			"a dpkg run was interrupted: linux-image-6.1.0-57-cloud-amd64 is half-configured (2 packages not fully installed; dpkg --audit lists them); run dpkg --configure -a"},
		{"an unpacked package", map[string]string{"var/lib/dpkg/status": "Package: x\nStatus: install reinstreq unpacked\n", "var/lib/dpkg/updates/": ""},
			"x is unpacked; run dpkg --configure -a"},
		{"a journal not yet applied", map[string]string{"var/lib/dpkg/updates/0000": "Package: x\n", "var/lib/dpkg/updates/0001": "", "var/lib/dpkg/updates/tmp.i": ""},
			"/var/lib/dpkg/updates holds 2 journal entries not yet applied; run dpkg --configure -a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := testsupport.Tree(t, tt.files)
			hs := Find(root)
			if len(hs) != 1 || hs[0].Manager != "dpkg" || !strings.Contains(hs[0].Detail, tt.detail) {
				t.Fatalf("Find = %+v, want one dpkg finding with %q", hs, tt.detail)
			}
		})
	}

	// While dpkg holds its lock, those states are its work in progress:
	// the lock is the one finding.
	files := debianAtRest()
	files["var/lib/dpkg/status"] = status
	root := testsupport.Tree(t, files)
	pid := holder(t, "posix", filepath.Join(root, "var/lib/dpkg/lock"))
	hs := Find(root)
	if len(hs) != 1 || hs[0].PID != pid {
		t.Fatalf("Find with dpkg running = %+v, want only the lock", hs)
	}
}

func TestProcLocks(t *testing.T) {
	// Not root, a lock file cannot be opened; its device and inode are
	// found in /proc/locks instead. Here the lookup is called directly.
	root := testsupport.Tree(t, debianAtRest())
	lock := filepath.Join(root, "var/lib/dpkg/lock")
	if h := procLocks(lock, "/var/lib/dpkg/lock"); h != nil {
		t.Fatalf("procLocks on a free lock = %+v", h)
	}
	for _, kind := range []string{"posix", "ofd"} {
		t.Run(kind, func(t *testing.T) {
			pid := holder(t, kind, lock)
			h := procLocks(lock, "/var/lib/dpkg/lock")
			if h == nil || !strings.Contains(h.Detail, "seen in /proc/locks") {
				t.Fatalf("procLocks = %+v, want the held lock", h)
			}
			if kind == "posix" && h.PID != pid {
				t.Errorf("pid %d, want %d", h.PID, pid)
			}
		})
	}
}

func TestLockedInParsesProcLocks(t *testing.T) {
	text := "1: POSIX  ADVISORY  WRITE 1367 08:01:262311 0 EOF\n" +
		"1: -> POSIX  ADVISORY  WRITE 2000 08:01:999 0 EOF\n" +
		"2: FLOCK  ADVISORY  WRITE 912 08:01:777 0 EOF\n" +
		"3: OFDLCK ADVISORY  WRITE -1 fd:00:12 0 EOF\n"
	f, err := os.CreateTemp(t.TempDir(), "locks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		major, minor uint32
		ino          uint64
		pid          int
		held         bool
	}{
		{"a POSIX lock", 8, 1, 262311, 1367, true},
		{"a waiter holds nothing", 8, 1, 999, 0, false},
		{"flock(2) is not fcntl", 8, 1, 777, 0, false},
		{"an OFD lock, device fd:00", 0xfd, 0, 12, -1, true},
		{"another inode", 8, 1, 1, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			pid, held, err := lockedIn(f, tt.major, tt.minor, tt.ino)
			if err != nil || held != tt.held || pid != tt.pid {
				t.Fatalf("lockedIn = %d, %v, %v; want %d, %v", pid, held, err, tt.pid, tt.held)
			}
		})
	}
}

func TestUnreadableStateIsBusy(t *testing.T) {
	if os.Geteuid() == 0 {
		// Root reads everything; a directory where the status file should
		// be is unreadable as a file for everyone.
		root := testsupport.Tree(t, map[string]string{"var/lib/dpkg/status/": "", "var/lib/dpkg/updates/": ""})
		err := Check(root)
		if exitcode.CodeOf(err) != exitcode.PackageManagerBusy || !strings.Contains(err.Error(), "cannot check /var/lib/dpkg/status") {
			t.Fatalf("Check = %v, want busy: cannot check", err)
		}
		return
	}
	root := testsupport.Tree(t, map[string]string{"run/zypp.pid": "1"})
	if err := os.Chmod(filepath.Join(root, "run/zypp.pid"), 0); err != nil {
		t.Fatal(err)
	}
	if err := Check(root); exitcode.CodeOf(err) != exitcode.PackageManagerBusy || !strings.Contains(err.Error(), "pkgbusy: cannot check /run/zypp.pid") {
		t.Fatalf("Check = %v, want busy: cannot check", err)
	}
}
