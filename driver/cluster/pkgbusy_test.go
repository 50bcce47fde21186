package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// busyRoot makes n's file system root for the cycle (--root): a boot id, its
// detector's marker and the path of zypper's pid file, which names a live
// process when a package manager is mid-transaction (lib/pkgbusy has every
// convention).
func busyRoot(t *testing.T, n *node) (root, pidFile, livePID string) {
	t.Helper()
	root = t.TempDir()
	writeFile(t, filepath.Join(root, "reboot-required"), "")
	n.cfg["reboot_required_detectors"] = []map[string]any{{"type": "file", "path": "/reboot-required"}}
	for _, d := range []string{"proc/sys/kernel/random", "run"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "proc/sys/kernel/random/boot_id"), "6f0e2c1a-0000-4000-8000-00000000000b\n")
	zypper := exec.Command("sleep", "60")
	if err := zypper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zypper.Process.Kill(); _ = zypper.Wait() })
	return root, filepath.Join(root, "run/zypp.pid"), strconv.Itoa(zypper.Process.Pid)
}

// Under the lock, beside the detectors: a transaction that runs when the
// node's turn comes stops it before a slot is taken or a hook runs.
func TestCyclePackageManagerBusyUnderLock(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	root, pidFile, pid := busyRoot(t, n)
	writeFile(t, pidFile, pid+"\n")
	hookLog := filepath.Join(n.dir, "hook-log")
	script(t, filepath.Join(n.dir, "hook.sh"), `echo ran >> `+hookLog)
	n.cfg["pre_reboot_hooks"] = []map[string]any{{"name": "drain", "cmd": []string{filepath.Join(n.dir, "hook.sh")}, "timeout_sec": 5}}

	o := n.run("cycle", "--root", root)
	if o.code != exitcode.PackageManagerBusy || o.str("reason") != protocol.ReasonPackageManagerBusy ||
		!strings.Contains(o.str("detail"), "zypper is mid-transaction: /run/zypp.pid names pid "+pid) {
		t.Fatalf("cycle = %d %s: %s, want 11 package_manager_busy\n%s", o.code, o.str("reason"), o.str("detail"), o.stderr)
	}
	if _, err := os.Stat(hookLog); err == nil {
		t.Error("the pre-reboot hook ran while a package manager was busy")
	}
	assertNothingLeft(t, c, ns, n)

	// Done: the same cycle reboots.
	writeFile(t, pidFile, "")
	o = n.run("cycle", "--root", root)
	if o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
		t.Fatalf("cycle after the transaction = %d %s/%s: %s\n%s", o.code, o.str("outcome"), o.str("reason"), o.str("detail"), o.stderr)
	}
}

// Right before the reboot command (lib/reboot): a transaction that began
// while the pre-reboot hooks ran stops the reboot; the abort hooks run and
// the slot is freed, as for any abort before the command.
func TestCyclePackageManagerBusyBeforeRebootCommand(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	root, pidFile, pid := busyRoot(t, n)
	abortLog := withAbortHooks(t, n)
	script(t, filepath.Join(n.dir, "hook.sh"), `echo `+pid+` > `+pidFile)
	n.cfg["pre_reboot_hooks"] = []map[string]any{{"name": "upgrade", "cmd": []string{filepath.Join(n.dir, "hook.sh")}, "timeout_sec": 5}}

	o := n.run("cycle", "--root", root)
	if o.code != exitcode.PackageManagerBusy || o.str("reason") != protocol.ReasonPackageManagerBusy {
		t.Fatalf("cycle = %d %s: %s, want 11 package_manager_busy\n%s", o.code, o.str("reason"), o.str("detail"), o.stderr)
	}
	reb, _ := o.json["reboot"].(map[string]any)
	if busy, _ := reb["package_manager_busy"].([]any); len(busy) != 1 || reb["command_started"] != false {
		t.Errorf("reboot result %v, want one busy package manager and no command", reb)
	}
	if runs := abortRuns(t, abortLog); len(runs) != 1 || !strings.HasPrefix(runs[0], "abort package_manager_busy node-a") {
		t.Errorf("abort hooks %q, want one run with reason package_manager_busy", runs)
	}
	if _, err := os.Stat(filepath.Join(n.dir, "state", "reboot-marker.json")); err == nil {
		t.Error("a reboot marker was written")
	}
	assertNothingLeft(t, c, ns, n)
}
