// Package reboot carries out the reboot itself, safely: it honours the kill
// switch, refuses while a package manager is mid-transaction (lib/pkgbusy),
// records a reboot marker (with the boot id) in state_dir before
// anything else happens, and only then runs reboot_command, without a
// shell. A node that cannot write its marker does not reboot. A reboot
// command that could not start leaves no marker behind; one that started and
// failed leaves it: the shutdown it asked for may still come (systemctl
// killed by the very shutdown it started), and the marker is what tells,
// after a boot, that a reboot was requested.
//
// The daemon and crd-reboot both call Do.
package reboot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/pkgbusy"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
)

// DefaultTimeout bounds the reboot command. `systemctl reboot` only queues
// the reboot job and returns within a second or two.
const DefaultTimeout = 60 * time.Second

// Path is the PATH the reboot command gets, whatever the caller's.
const Path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// HookEnv is the environment every hook gets in phase (pre-reboot,
// post-reboot): node, the phase and the etcd endpoints. A pre-reboot hook
// also gets the lock's and the slot's variables (driver/cluster); a node
// coming back holds neither, so this is the complete environment of a
// post-reboot hook.
func HookEnv(node string, endpoints []string, phase string) []string {
	return []string{
		"PATH=" + Path,
		"LC_ALL=C",
		"NODE_NAME=" + node,
		"PHASE=" + phase,
		"ETCD_ENDPOINTS=" + strings.Join(endpoints, ","),
	}
}

// Options describe one reboot.
type Options struct {
	// Node names this node in the marker.
	Node string
	// Command is reboot_command: argv, run without a shell.
	Command []string
	// DryRun reports what would happen and changes nothing: no marker is
	// written and no command runs.
	DryRun bool
	// KillSwitchFile disables reboots while it exists ("" = none).
	KillSwitchFile string
	// StateDir holds the marker; it must survive the reboot.
	StateDir string
	// Root is the file system root for /proc and the package managers'
	// lock and state files ("" = "/").
	Root string
	// Runner runs the command (nil: proc.Exec).
	Runner proc.Runner
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Timeout bounds the command (0: DefaultTimeout).
	Timeout time.Duration
	// Extra is copied into the marker (e.g. fencing_token, lease_id).
	Extra map[string]string
	// Commit, when set, is the last check, made after every other and
	// right before the marker and the command (not in a dry run): the
	// reboot slot's start (lib/slot Reboot.Start, with the windows) for the
	// daemon, the start gate (AskStart) for crd-reboot. An error stops the
	// reboot with nothing written and nothing run.
	Commit func(ctx context.Context) error
	// Starting, when set, is called once every check has passed, just
	// before the marker is written: where "rebooting" may be logged, and
	// not before the kill switch has had its say.
	Starting func()
}

// Result says what Do did or, in a dry run, would have done.
type Result struct {
	DryRun  bool     `json:"dry_run"`
	Command []string `json:"command"`
	// Marker is the marker's path (written only when Executed or while the
	// command ran).
	Marker string `json:"marker"`
	BootID string `json:"boot_id"`
	// KillSwitch is set when the kill switch stopped the reboot.
	KillSwitch       bool   `json:"kill_switch"`
	KillSwitchReason string `json:"kill_switch_reason,omitempty"`
	// PackageManagerBusy lists the package managers found mid-transaction
	// (lib/pkgbusy) when they stopped the reboot.
	PackageManagerBusy []pkgbusy.Holder `json:"package_manager_busy,omitempty"`
	// RequestedAt is when the marker was written (RFC 3339 with fractions of
	// a second, so that the reboot's logged duration is exact).
	RequestedAt string `json:"requested_at,omitempty"`
	// Executed is true when the reboot command ran and exited 0.
	Executed bool `json:"executed"`
	// CommandStarted is true once the reboot command was started, whatever
	// became of it: from then on a shutdown may be under way.
	CommandStarted bool `json:"command_started"`
	// CommandExitStatus is the command's exit status when it ran (-1: it
	// was killed or could not start).
	CommandExitStatus *int `json:"command_exit_status,omitempty"`
	// CommandStderr is the tail of the command's stderr when it failed.
	CommandStderr string `json:"command_stderr,omitempty"`
}

// Do reboots the node, in this order:
//
//  1. the kill switch is checked: set (or undeterminable) → exitcode.KillSwitch;
//  2. no package manager may be mid-transaction (lib/pkgbusy under Root):
//     one is, or it cannot be told → exitcode.PackageManagerBusy;
//  3. the boot id is read: unreadable → exitcode.RebootFailed;
//  4. in a dry run, state_dir is checked for writability (not written) and
//     Do returns without running anything;
//  5. Commit, when set, has the last word (the reboot slot's start: the
//     windows, a pause, a halt or a hold given meanwhile, the slot still
//     alive); its error stops the reboot, nothing written;
//  6. the marker is written: failure → exitcode.RebootFailed, and the
//     command never runs;
//  7. the command runs with a timeout; a start failure removes the marker;
//     a non-zero exit or a timeout keeps it (the shutdown may still come);
//     both are exitcode.RebootFailed.
//
// Once the marker is written the command is not interrupted by ctx: a
// reboot that has been decided and recorded runs to its end (bounded by
// the timeout), since a shutdown signal may be the reboot itself arriving.
func Do(ctx context.Context, o Options) (Result, error) {
	res := Result{DryRun: o.DryRun, Command: o.Command, Marker: MarkerPath(o.StateDir)}
	if len(o.Command) == 0 || o.Command[0] == "" {
		return res, exitcode.Errorf(exitcode.Config, "reboot: reboot_command is empty; set it, e.g. [/usr/bin/systemctl, reboot]")
	}
	if o.StateDir == "" {
		return res, exitcode.Errorf(exitcode.Config, "reboot: state_dir is empty; set it, e.g. /var/lib/clusterrebootd")
	}
	if set, reason, kerr := KillSwitch(o.KillSwitchFile); set {
		res.KillSwitch, res.KillSwitchReason = true, reason
		if kerr != nil {
			return res, exitcode.Errorf(exitcode.KillSwitch, "reboot: %s; make the path checkable to allow reboots", reason)
		}
		return res, exitcode.Errorf(exitcode.KillSwitch, "reboot: kill switch %s is set (%s); remove the file to allow reboots", o.KillSwitchFile, reason)
	}
	// The last look before the command: a transaction started after the
	// checks under the lock (while the hooks ran) stops the reboot too.
	if err := pkgbusy.Check(o.Root); err != nil {
		res.PackageManagerBusy = pkgbusy.Holders(err)
		return res, err
	}
	id, err := BootID(o.Root)
	if err != nil {
		return res, exitcode.Errorf(exitcode.RebootFailed, "%v; refusing to reboot without it (the marker needs it to tell a completed reboot)", err)
	}
	res.BootID = id
	if o.DryRun {
		if err := probeWritable(o.StateDir); err != nil {
			return res, exitcode.Errorf(exitcode.RebootFailed, "reboot: dry run: state_dir %s is not writable (%v); a real run would refuse to reboot", o.StateDir, err)
		}
		return res, nil
	}

	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	if o.Commit != nil {
		if err := o.Commit(ctx); err != nil {
			return res, err
		}
	}
	if o.Starting != nil {
		o.Starting()
	}
	m := Marker{Version: MarkerVersion, Node: o.Node, BootID: id, RequestedAt: now().UTC(), Command: o.Command, Extra: o.Extra}
	if err := WriteMarker(o.StateDir, m); err != nil {
		return res, err
	}
	res.RequestedAt = m.RequestedAt.Format(time.RFC3339Nano)

	runner := o.Runner
	if runner == nil {
		runner = proc.Exec{}
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	pr := runner.Run(context.WithoutCancel(ctx), proc.Spec{Argv: o.Command, Env: []string{"PATH=" + Path, "LC_ALL=C"}, Dir: "/", Timeout: timeout})
	if pr.StartErr == nil {
		status := pr.ExitCode
		res.CommandExitStatus = &status
		res.CommandStarted = true
	}
	if pr.OK() {
		res.Executed = true
		return res, nil
	}
	res.CommandStderr = tail(pr.Stderr, 2048)
	why := pr.Describe(timeout)
	if res.CommandStarted {
		why += fmt.Sprintf("; the marker %s stays, since the shutdown it asked for may still come", res.Marker)
	} else if rerr := RemoveMarker(o.StateDir); rerr != nil {
		why += fmt.Sprintf("; and the marker could not be removed (%v): remove %s by hand", rerr, res.Marker)
	}
	return res, exitcode.Errorf(exitcode.RebootFailed, "reboot: reboot command %s %s; check reboot_command", strings.Join(o.Command, " "), why)
}

// CheckStateDir reports, before anything is prepared for a reboot, whether
// the reboot marker could be written to dir: a directory (or a creatable
// path) that is writable and not full. The cluster step calls it before it
// takes a slot and runs the pre-reboot hooks, so that a full or read-only
// state_dir does not drain the node again on every attempt.
func CheckStateDir(dir string) error {
	if dir == "" {
		return exitcode.Errorf(exitcode.Config, "reboot: state_dir is empty; set it, e.g. /var/lib/clusterrebootd")
	}
	if err := probeWritable(dir); err != nil {
		return exitcode.Errorf(exitcode.RebootFailed, "reboot: state_dir %s cannot take the reboot marker (%v); nothing was prepared: free space or fix the directory", dir, err)
	}
	return nil
}

// probeWritable checks, without writing, that dir could be created and
// written: the nearest existing ancestor must be a directory that passes
// access(2) for writing (which also reports a read-only file system).
func probeWritable(dir string) error {
	d := filepath.Clean(dir)
	for {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", d)
			}
			if err := unix.Access(d, unix.W_OK|unix.X_OK); err != nil {
				return fmt.Errorf("%s: %w", d, err)
			}
			return probeSpace(d)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return exitcode.PathCause(err)
		}
		parent := filepath.Dir(d)
		if parent == d {
			return exitcode.PathCause(err)
		}
		d = parent
	}
}

// minFree is what writing the marker needs at least: the temporary file's
// block (the marker is well under 4 KiB) and the directory's, with margin.
const minFree = 16 << 10

// probeSpace reports a full file system: the access check alone says yes
// on a full disk, where the real run's marker write fails.
func probeSpace(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil // cannot tell; the access check passed
	}
	avail := st.Bavail
	if os.Geteuid() == 0 {
		avail = st.Bfree // root may use the reserved blocks
	}
	if free := avail * uint64(st.Bsize); free < minFree {
		return fmt.Errorf("%s: no space left on device (%d bytes free)", dir, free)
	}
	if st.Files > 0 && st.Ffree == 0 { // Files 0: the file system does not count inodes
		return fmt.Errorf("%s: no free inodes", dir)
	}
	return nil
}

// tail keeps the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[len(s)-n:], "")
}

// FromConfig fills the Options that cfg decides: node, reboot_command,
// dry_run, kill_switch_file and state_dir.
func FromConfig(cfg config.Config) Options {
	return Options{
		Node:           cfg.NodeName,
		Command:        cfg.RebootCommand,
		DryRun:         cfg.DryRun,
		KillSwitchFile: cfg.KillSwitchFile,
		StateDir:       cfg.StateDir,
	}
}
