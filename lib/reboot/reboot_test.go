package reboot

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

const testBootID = "6f0e2c1a-0000-4000-8000-000000000001"

// recorder is a Runner that records each call and answers with res. It
// also notes whether the marker existed when the command ran.
type recorder struct {
	mu          sync.Mutex
	res         proc.Result
	stateDir    string
	calls       [][]string
	markerSeen  bool
	ctxCanceled bool
}

func (r *recorder) Run(ctx context.Context, spec proc.Spec) proc.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, spec.Argv)
	_, err := os.Stat(MarkerPath(r.stateDir))
	r.markerSeen = err == nil
	r.ctxCanceled = ctx.Err() != nil
	return r.res
}

func TestDo(t *testing.T) {
	// Fractions of a second: the marker keeps them, or the daemon's
	// reboot_completed duration_ms runs up to a second high.
	now := time.Date(2026, 11, 29, 2, 59, 30, 123456789, time.UTC)
	cmd := []string{"/usr/bin/systemctl", "reboot"}
	// A running package manager: a live process named in zypper's pid
	// file under the test's root (lib/pkgbusy has the other conventions).
	zypper := exec.Command("sleep", "60")
	if err := zypper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zypper.Process.Kill(); _ = zypper.Wait() })
	busy := func(o *Options, dir string) {
		if err := os.MkdirAll(filepath.Join(dir, "run"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "run"), "zypp.pid", strconv.Itoa(zypper.Process.Pid)+"\n")
	}
	tests := []struct {
		name       string
		opts       func(o *Options, dir string)
		res        proc.Result
		code       exitcode.Code
		msg        string // substring of the error
		ran        bool   // the command was run
		markerLeft bool   // a marker exists afterwards
		check      func(t *testing.T, r Result)
	}{
		{name: "reboot requested", code: exitcode.OK, ran: true, markerLeft: true,
			check: func(t *testing.T, r Result) {
				if !r.Executed || r.BootID != testBootID || r.RequestedAt != "2026-11-29T02:59:30.123456789Z" || r.CommandExitStatus == nil || *r.CommandExitStatus != 0 {
					t.Errorf("%+v", r)
				}
			}},
		{name: "kill switch set", opts: func(o *Options, dir string) {
			o.KillSwitchFile = writeFile(t, dir, "disable", "freeze\n")
		}, code: exitcode.KillSwitch, msg: "disable is set (freeze); remove the file",
			check: func(t *testing.T, r Result) {
				if !r.KillSwitch || r.KillSwitchReason != "freeze" || r.Executed {
					t.Errorf("%+v", r)
				}
			}},
		{name: "kill switch undeterminable", opts: func(o *Options, dir string) {
			o.KillSwitchFile = filepath.Join(writeFile(t, dir, "etc", ""), "disable")
		}, code: exitcode.KillSwitch, msg: "treating it as set"},
		{name: "kill switch wins over dry run", opts: func(o *Options, dir string) {
			o.DryRun = true
			o.KillSwitchFile = writeFile(t, dir, "disable", "")
		}, code: exitcode.KillSwitch, msg: "(present)"},
		{name: "a package manager is mid-transaction: nothing written, nothing run", opts: busy,
			code: exitcode.PackageManagerBusy, msg: "pkgbusy: zypper is mid-transaction: /run/zypp.pid names pid",
			check: func(t *testing.T, r Result) {
				if len(r.PackageManagerBusy) != 1 || r.PackageManagerBusy[0].Manager != "zypper" || r.Executed || r.BootID != "" {
					t.Errorf("%+v", r)
				}
			}},
		{name: "a dry run says so too", opts: func(o *Options, dir string) { busy(o, dir); o.DryRun = true },
			code: exitcode.PackageManagerBusy, msg: "; no reboot now"},
		{name: "dry run runs nothing and writes nothing", opts: func(o *Options, dir string) { o.DryRun = true }, code: exitcode.OK,
			check: func(t *testing.T, r Result) {
				if !r.DryRun || r.Executed || r.BootID != testBootID || r.RequestedAt != "" || r.CommandExitStatus != nil {
					t.Errorf("%+v", r)
				}
			}},
		{name: "dry run with an unwritable state dir", opts: func(o *Options, dir string) {
			o.DryRun = true
			o.StateDir = filepath.Join(writeFile(t, dir, "file", ""), "state")
		}, code: exitcode.RebootFailed, msg: "dry run: state_dir"},
		{name: "state dir not writable: command never runs", opts: func(o *Options, dir string) {
			o.StateDir = filepath.Join(writeFile(t, dir, "file", ""), "state")
		}, code: exitcode.RebootFailed, msg: "cannot write reboot marker"},
		{name: "command fails after it started: marker kept", res: proc.Result{ExitCode: 1, Stderr: "Failed to reboot: Access denied\n"},
			code: exitcode.RebootFailed, msg: "systemctl reboot exited 1: Failed to reboot: Access denied", ran: true, markerLeft: true,
			check: func(t *testing.T, r Result) {
				if r.Executed || !r.CommandStarted || r.CommandStderr != "Failed to reboot: Access denied\n" || *r.CommandExitStatus != 1 {
					t.Errorf("%+v", r)
				}
			}},
		{name: "command cannot start: marker removed", res: proc.Result{ExitCode: -1, StartErr: errors.New("exec: no such file")},
			code: exitcode.RebootFailed, msg: "could not be started: exec: no such file", ran: true,
			check: func(t *testing.T, r Result) {
				if r.CommandExitStatus != nil || r.CommandStarted {
					t.Errorf("%+v", r)
				}
			}},
		{name: "command times out: marker kept", res: proc.Result{ExitCode: -1, TimedOut: true, Signal: "SIGTERM"},
			code: exitcode.RebootFailed, msg: "timed out after 1m0s", ran: true, markerLeft: true},
		{name: "command killed (by the shutdown it started): marker kept", res: proc.Result{ExitCode: -1, Signal: "SIGKILL"},
			code: exitcode.RebootFailed, msg: "killed by signal SIGKILL", ran: true, markerLeft: true},
		{name: "empty command", opts: func(o *Options, dir string) { o.Command = nil }, code: exitcode.Config, msg: "reboot_command is empty"},
		{name: "empty state dir", opts: func(o *Options, dir string) { o.StateDir = "" }, code: exitcode.Config, msg: "state_dir is empty"},
		{name: "boot id unreadable", opts: func(o *Options, dir string) { o.Root = filepath.Join(dir, "nowhere") }, code: exitcode.RebootFailed, msg: "read boot id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			fakeBootID(t, dir, testBootID+"\n")
			stateDir := filepath.Join(dir, "state")
			rec := &recorder{res: tt.res, stateDir: stateDir}
			o := Options{Node: "node-a", Command: cmd, KillSwitchFile: filepath.Join(dir, "disable"), StateDir: stateDir,
				Root: dir, Runner: rec, Now: func() time.Time { return now }, Extra: map[string]string{"fencing_token": "3"}}
			if tt.opts != nil {
				tt.opts(&o, dir)
			}
			r, err := Do(context.Background(), o)
			if got := exitcode.CodeOf(err); got != tt.code {
				t.Fatalf("code %v (%v), want %v", got, err, tt.code)
			}
			if tt.msg != "" && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q lacks %q", err, tt.msg)
			}
			if got := len(rec.calls) > 0; got != tt.ran {
				t.Fatalf("command ran: %v, want %v", got, tt.ran)
			}
			if tt.ran {
				if !slices.Equal(rec.calls[0], o.Command) || !rec.markerSeen {
					t.Errorf("ran %q, marker present while running: %v", rec.calls[0], rec.markerSeen)
				}
			}
			_, statErr := os.Stat(MarkerPath(stateDir))
			if left := statErr == nil; left != tt.markerLeft {
				t.Errorf("marker left behind: %v, want %v", left, tt.markerLeft)
			}
			if tt.markerLeft {
				m, err := ReadMarker(stateDir)
				if err != nil || m.Node != "node-a" || m.BootID != testBootID || !m.RequestedAt.Equal(now) || m.Extra["fencing_token"] != "3" {
					t.Errorf("marker %+v %v", m, err)
				}
			}
			if o.DryRun {
				if _, err := os.Stat(stateDir); err == nil {
					t.Error("a dry run created the state dir")
				}
			}
			if r.Marker != MarkerPath(o.StateDir) || !slices.Equal(r.Command, o.Command) {
				t.Errorf("result %+v", r)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

// A recorded reboot is carried out even when the caller is being stopped.
func TestDoIgnoresCancelOnceRecorded(t *testing.T) {
	dir := t.TempDir()
	fakeBootID(t, dir, testBootID)
	stateDir := filepath.Join(dir, "state")
	rec := &recorder{stateDir: stateDir}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Do(ctx, Options{Node: "n", Command: []string{"/bin/true"}, StateDir: stateDir, Root: dir, Runner: rec})
	if err != nil || len(rec.calls) != 1 || rec.ctxCanceled {
		t.Fatalf("err %v calls %d canceled %v", err, len(rec.calls), rec.ctxCanceled)
	}
}

// The real runner: the command gets a fixed environment and its failure
// text reaches the error.
func TestDoRealCommand(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	stateDir := filepath.Join(dir, "state")
	t.Setenv("ETCDCTL_PASSWORD", "hunter2")
	ok := []string{"/bin/sh", "-c", `echo "called $* PATH=$PATH pw=${ETCDCTL_PASSWORD:-none}" >> "$0"`, calls, "now"}
	r, err := Do(context.Background(), Options{Node: "n", Command: ok, StateDir: stateDir})
	if err != nil || !r.Executed {
		t.Fatalf("%+v %v", r, err)
	}
	got, _ := os.ReadFile(calls)
	if want := "called now PATH=" + Path + " pw=none\n"; string(got) != want {
		t.Errorf("command saw %q, want %q", got, want)
	}
	if _, err := ReadMarker(stateDir); err != nil {
		t.Errorf("marker: %v", err)
	}

	fail := []string{"/bin/sh", "-c", "echo 'Failed to connect to bus' >&2; exit 1"}
	_, err = Do(context.Background(), Options{Node: "n", Command: fail, StateDir: stateDir})
	if exitcode.CodeOf(err) != exitcode.RebootFailed || !strings.Contains(err.Error(), "exited 1: Failed to connect to bus") {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(MarkerPath(stateDir)); err != nil {
		t.Errorf("marker removed after a command that started and failed (%v): the shutdown may still come", err)
	}
	_ = RemoveMarker(stateDir)
	_, err = Do(context.Background(), Options{Node: "n", Command: []string{"/nonexistent/reboot"}, StateDir: stateDir})
	if exitcode.CodeOf(err) != exitcode.RebootFailed {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(MarkerPath(stateDir)); err == nil {
		t.Error("marker left after a command that could not start")
	}
}

// A dry run on a read-only file system reports that a real run would fail.
func TestDoDryRunReadOnly(t *testing.T) {
	dir := mountTmpfs(t, "size=64k", unix.MS_RDONLY)
	_, err := Do(context.Background(), Options{Node: "n", Command: []string{"/bin/true"}, StateDir: dir, DryRun: true})
	if exitcode.CodeOf(err) != exitcode.RebootFailed || !strings.Contains(err.Error(), "read-only file system") {
		t.Fatalf("err %v", err)
	}
}

// A dry run on a full file system reports that a real run would fail: the
// access check alone says yes there, and the real marker write fails.
func TestDoDryRunDiskFull(t *testing.T) {
	dir := mountTmpfs(t, "size=64k", 0)
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	_, err = Do(context.Background(), Options{Node: "n", Command: []string{"/bin/true"}, StateDir: dir, DryRun: true})
	if exitcode.CodeOf(err) != exitcode.RebootFailed || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("dry run on a full disk: err %v, want the real run's refusal", err)
	}
	if _, err := Do(context.Background(), Options{Node: "n", Command: []string{"/bin/true"}, StateDir: dir}); exitcode.CodeOf(err) != exitcode.RebootFailed {
		t.Fatalf("real run on a full disk: err %v, want exit 9", err)
	}
}

// When the marker cannot be removed after a failure, the error says so.
func TestDoMarkerNotRemovable(t *testing.T) {
	dir := t.TempDir()
	fakeBootID(t, dir, testBootID)
	stateDir := filepath.Join(dir, "state")
	rec := &runFunc{fn: func() proc.Result {
		// Make removal fail: replace the marker by a non-empty directory.
		p := MarkerPath(stateDir)
		_ = os.Remove(p)
		_ = os.MkdirAll(filepath.Join(p, "x"), 0o755)
		return proc.Result{ExitCode: -1, StartErr: errors.New("exec: no such file")}
	}}
	_, err := Do(context.Background(), Options{Node: "n", Command: []string{"/bin/false"}, StateDir: stateDir, Root: dir, Runner: rec})
	if exitcode.CodeOf(err) != exitcode.RebootFailed || !strings.Contains(err.Error(), "could not be removed") {
		t.Fatalf("err %v", err)
	}
}

type runFunc struct{ fn func() proc.Result }

func (r *runFunc) Run(context.Context, proc.Spec) proc.Result { return r.fn() }

func TestTail(t *testing.T) {
	if got := tail("abcdef", 3); got != "def" {
		t.Errorf("tail %q", got)
	}
	if got := tail("ab", 3); got != "ab" {
		t.Errorf("tail %q", got)
	}
}

func TestFromConfig(t *testing.T) {
	cfg := config.Default()
	cfg.NodeName = "node-a"
	o := FromConfig(cfg)
	if o.Node != "node-a" || !slices.Equal(o.Command, []string{"/usr/bin/systemctl", "reboot"}) || o.DryRun ||
		o.KillSwitchFile != "/etc/clusterrebootd/disable" || o.StateDir != "/var/lib/clusterrebootd" {
		t.Errorf("%+v", o)
	}
}

// "rebooting" is announced only once nothing can stop the attempt any more
// (issue 17: crd-reboot logged it before the kill switch blocked it).
func TestDoStartingOnlyAfterTheChecks(t *testing.T) {
	for _, tt := range []struct {
		name   string
		kill   bool
		dryRun bool
		want   bool
	}{{"kill switch set", true, false, false}, {"dry run", false, true, false}, {"a real reboot", false, false, true}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			fakeBootID(t, dir, testBootID)
			ks := filepath.Join(dir, "disable")
			if tt.kill {
				if err := os.WriteFile(ks, []byte("freeze\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			stateDir := filepath.Join(dir, "state")
			rec := &recorder{stateDir: stateDir}
			called := false
			_, _ = Do(context.Background(), Options{Node: "n", Command: []string{"/bin/true"}, StateDir: stateDir, Root: dir,
				Runner: rec, KillSwitchFile: ks, DryRun: tt.dryRun, Starting: func() { called = true }})
			if called != tt.want {
				t.Errorf("Starting called = %v, want %v", called, tt.want)
			}
		})
	}
}
