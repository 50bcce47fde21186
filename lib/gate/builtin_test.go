package gate

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// utmpEntry is one record to write into a fake /run/utmp.
type utmpEntry struct {
	typ              int16
	pid              int32
	line, user, host string
}

// fakeRoot writes /run/utmp with entries in the glibc layout and creates
// /proc/PID for each live pid.
func fakeRoot(t *testing.T, entries []utmpEntry, live ...int32) string {
	t.Helper()
	root := t.TempDir()
	var b []byte
	for _, e := range entries {
		rec := make([]byte, utmpRecord)
		binary.NativeEndian.PutUint16(rec[0:2], uint16(e.typ))
		binary.NativeEndian.PutUint32(rec[4:8], uint32(e.pid))
		copy(rec[8:40], e.line)
		copy(rec[44:76], e.user)
		copy(rec[76:332], e.host)
		b = append(b, rec...)
	}
	if err := os.MkdirAll(filepath.Join(root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "run", "utmp"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, pid := range live {
		if err := os.MkdirAll(filepath.Join(root, "proc", strconv.Itoa(int(pid))), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCheckLoginSessions(t *testing.T) {
	boot := utmpEntry{typ: 2, user: "reboot", line: "~"}
	runLevel := utmpEntry{typ: 1, pid: 53, user: "runlevel", line: "~"}
	getty := utmpEntry{typ: 6, pid: 800, user: "LOGIN", line: "tty1"}
	alice := utmpEntry{typ: utmpUserProcess, pid: 1234, line: "pts/0", user: "alice", host: "10.0.0.5"}
	bob := utmpEntry{typ: utmpUserProcess, pid: 99, line: "tty2", user: "bob"}
	gone := utmpEntry{typ: 8, pid: 555, line: "pts/1"} // DEAD_PROCESS: logged out
	tests := []struct {
		name   string
		root   func(t *testing.T) string
		passed bool
		reason string
	}{
		{"nobody logged in", func(t *testing.T) string { return fakeRoot(t, []utmpEntry{boot, runLevel, getty, gone}, 53, 800) },
			true, "no interactive login session"},
		{"one ssh session", func(t *testing.T) string { return fakeRoot(t, []utmpEntry{boot, alice, getty}, 1234, 800) },
			false, "interactive login session open: alice on pts/0 from 10.0.0.5 (pid 1234)"},
		{"two sessions", func(t *testing.T) string { return fakeRoot(t, []utmpEntry{alice, bob}, 1234, 99) },
			false, "2 interactive login sessions open: alice on pts/0 from 10.0.0.5 (pid 1234), bob on tty2 (pid 99)"},
		{"a session whose process died is not counted", func(t *testing.T) string { return fakeRoot(t, []utmpEntry{alice, bob}, 99) },
			false, "interactive login session open: bob on tty2 (pid 99)"},
		{"only dead sessions", func(t *testing.T) string { return fakeRoot(t, []utmpEntry{alice, bob}) },
			true, "no interactive login session"},
		{"an empty utmp", func(t *testing.T) string { return fakeRoot(t, nil) }, true, "no interactive login session"},
		{"no utmp fails closed", func(t *testing.T) string { return t.TempDir() },
			false, "login sessions unknown, so not rebooting: cannot read "},
		{"a utmp of another layout fails closed", func(t *testing.T) string {
			root := fakeRoot(t, []utmpEntry{alice}, 1234)
			f, err := os.OpenFile(filepath.Join(root, "run", "utmp"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write([]byte("xx")); err != nil {
				t.Fatal(err)
			}
			return root
		}, false, "is 386 bytes, not a whole number of 384-byte glibc utmp records"},
		{"control characters in a name are not printed", func(t *testing.T) string {
			return fakeRoot(t, []utmpEntry{{typ: utmpUserProcess, pid: 7, line: "pts/3", user: "ev\x1b[2Jil"}}, 7)
		}, false, "ev?[2Jil on pts/3 (pid 7)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checkLoginSessions(tt.root(t))
			if r.Name != CheckNoLoginSessions || r.Passed != tt.passed || !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("got %+v, want passed %v and reason containing %q", r, tt.passed, tt.reason)
			}
		})
	}
}

// unitRunner answers systemctl with a canned result and runs everything
// else for real; it records the systemctl specs.
type unitRunner struct {
	res   proc.Result
	specs *[]proc.Spec
}

func (u unitRunner) Run(ctx context.Context, spec proc.Spec) proc.Result {
	if spec.Argv[0] != "systemctl" {
		return proc.Exec{}.Run(ctx, spec)
	}
	*u.specs = append(*u.specs, spec)
	return u.res
}

func TestCheckUnits(t *testing.T) {
	units := []string{"backup.service", "batch@1.service"}
	tests := []struct {
		name   string
		units  []string
		res    proc.Result
		passed bool
		reason string
	}{
		{"none active", units, proc.Result{ExitCode: 3, Stdout: "inactive\nfailed\n"}, true, "none of backup.service, batch@1.service is active"},
		{"one active", units, proc.Result{ExitCode: 0, Stdout: "active\ninactive\n"}, false, "unit backup.service active"},
		{"starting and stopping count", units, proc.Result{ExitCode: 3, Stdout: "activating\ndeactivating\n"}, false, "units backup.service (activating), batch@1.service (deactivating) active"},
		{"reloading counts", units[:1], proc.Result{ExitCode: 0, Stdout: "reloading\n"}, false, "unit backup.service (reloading) active"},
		{"no systemctl fails closed", units, proc.Result{ExitCode: -1, StartErr: os.ErrNotExist}, false, "states of backup.service, batch@1.service unknown, so not rebooting: systemctl could not be started"},
		{"no bus fails closed", units, proc.Result{ExitCode: 1, Stderr: "Failed to connect to bus: No such file or directory\n"}, false, "systemctl is-active exited 1: Failed to connect to bus"},
		{"a timeout fails closed", units, proc.Result{ExitCode: -1, TimedOut: true}, false, "timed out after 1s"},
		{"a signal fails closed", units, proc.Result{ExitCode: -1, Signal: "SIGKILL"}, false, "killed by signal SIGKILL"},
		{"missing answers fail closed", units, proc.Result{ExitCode: 3, Stdout: "inactive\n"}, false, "answered 1 states for 2 units"},
		{"an unknown state fails closed", units, proc.Result{ExitCode: 3, Stdout: "inactive\nmaintenance\n"}, false, `unknown state of batch@1.service ("maintenance")`},
		{"a unit name like an option is refused", []string{"--all"}, proc.Result{ExitCode: 3, Stdout: "inactive\n"}, false, `unit name "--all" starts with "-"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var specs []proc.Spec
			r, err := checkUnits(context.Background(), unitRunner{tt.res, &specs}, tt.units, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r.Name != CheckInactiveUnits || r.Passed != tt.passed || !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("got %+v, want passed %v and reason containing %q", r, tt.passed, tt.reason)
			}
			if strings.HasPrefix(tt.units[0], "-") {
				if len(specs) != 0 {
					t.Errorf("systemctl ran with %q", specs[0].Argv)
				}
				return
			}
			want := append([]string{"systemctl", "is-active", "--"}, tt.units...)
			if len(specs) != 1 || !slices.Equal(specs[0].Argv, want) || !slices.Contains(specs[0].Env, "LC_ALL=C") || specs[0].Timeout != time.Second {
				t.Errorf("specs %+v, want argv %q with LC_ALL=C and the timeout", specs, want)
			}
		})
	}
	t.Run("an interruption is not an answer", func(t *testing.T) {
		var specs []proc.Spec
		_, err := checkUnits(context.Background(), unitRunner{proc.Result{ExitCode: -1, Canceled: true}, &specs}, units, time.Second)
		if exitcode.CodeOf(err) != exitcode.Interrupted {
			t.Errorf("err %v, want interrupted", err)
		}
	})
}

// TestRunWithChecks: the built-in checks run before the script in the
// pre-lock and under-lock phases, block with the reason naming the session
// or unit, and are skipped after the reboot.
func TestRunWithChecks(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "check", "echo ran > "+filepath.Join(dir, "ran"), 0o755)
	alice := utmpEntry{typ: utmpUserProcess, pid: 1234, line: "pts/0", user: "alice", host: "10.0.0.5"}
	busy := proc.Result{ExitCode: 0, Stdout: "active\n"}
	idle := proc.Result{ExitCode: 3, Stdout: "inactive\n"}
	tests := []struct {
		name    string
		phase   string
		logins  bool
		units   []string
		systemd proc.Result
		code    exitcode.Code
		reason  string
		checks  []string // names of the checks reported
		ran     bool
	}{
		{"no checks configured", PhasePreLock, false, nil, idle, exitcode.OK, "health script " + script + " exited 0", nil, true},
		{"a login blocks before the script", PhasePreLock, true, nil, idle, exitcode.HealthBlocked,
			"interactive login session open: alice on pts/0 from 10.0.0.5 (pid 1234)", []string{CheckNoLoginSessions}, false},
		{"an active unit blocks under the lock", PhaseUnderLock, false, []string{"backup.service"}, busy, exitcode.HealthBlocked,
			"unit backup.service active", []string{CheckInactiveUnits}, false},
		{"both reasons when both block", PhasePreLock, true, []string{"backup.service"}, busy, exitcode.HealthBlocked,
			"interactive login session open: alice on pts/0 from 10.0.0.5 (pid 1234); unit backup.service active", []string{CheckNoLoginSessions, CheckInactiveUnits}, false},
		{"passing checks are named in the reason", PhasePreLock, false, []string{"backup.service"}, idle, exitcode.OK,
			"none of backup.service is active; health script " + script + " exited 0", []string{CheckInactiveUnits}, true},
		{"not after the reboot", PhasePostReboot, true, []string{"backup.service"}, busy, exitcode.OK,
			"health script " + script + " exited 0", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, "ran"))
			c := testContext()
			c.Phase = tt.phase
			c.Checks = Checks{NoLoginSessions: tt.logins, InactiveUnits: tt.units, Root: fakeRoot(t, []utmpEntry{alice}, 1234)}
			var specs []proc.Spec
			r := Run(context.Background(), unitRunner{tt.systemd, &specs}, script, 5*time.Second, c)
			if exitcode.CodeOf(r.Err()) != tt.code || r.Reason != tt.reason {
				t.Errorf("Run = %v, reason %q; want %v, %q", r.Err(), r.Reason, tt.code, tt.reason)
			}
			var names []string
			for _, chk := range r.Checks {
				names = append(names, chk.Name)
			}
			if !slices.Equal(names, tt.checks) {
				t.Errorf("checks %q, want %q", names, tt.checks)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran")); (err == nil) != tt.ran {
				t.Errorf("script ran: %v, want %v", err == nil, tt.ran)
			}
		})
	}
}

func TestChecksFromConfig(t *testing.T) {
	cfg := config.Default()
	cfg.Gate = config.GateChecks{NoLoginSessions: true, InactiveUnits: []string{"backup.service"}}
	want := Checks{NoLoginSessions: true, InactiveUnits: []string{"backup.service"}}
	if got := FromConfig(cfg, PhasePreLock).Checks; !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
