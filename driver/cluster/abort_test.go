package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// withAbortHooks gives n an abort hook that appends its environment's
// phase, reason and lock key to a log, and a failing one before it; it
// returns the log's path.
func withAbortHooks(t *testing.T, n *node) string {
	t.Helper()
	abortLog := filepath.Join(n.dir, "abort-log")
	script(t, filepath.Join(n.dir, "uncordon.sh"), `echo "$PHASE $ABORT_REASON $NODE_NAME $LOCK_KEY $LEASE_ID" >> '`+abortLog+`'`)
	n.cfg["abort_hooks"] = []map[string]any{
		{"name": "notify", "cmd": []string{"/bin/sh", "-c", "echo notify refused >&2; exit 3"}, "timeout_sec": 5},
		{"name": "uncordon", "cmd": []string{filepath.Join(n.dir, "uncordon.sh")}, "timeout_sec": 5},
	}
	return abortLog
}

// abortRuns returns the abort log's lines.
func abortRuns(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// An aborted reboot after a pre-reboot hook started runs abort_hooks once
// each, in order, all of them although the first fails, with the pre-reboot
// hooks' environment; the outcome stays blocked with the abort's reason. An
// abort before any hook started runs none.
func TestCycleAbortHooks(t *testing.T) {
	drainThen := func(second string) func(t *testing.T, n *node, c *clientv3.Client) {
		return func(t *testing.T, n *node, _ *clientv3.Client) {
			n.cfg["pre_reboot_hooks"] = []map[string]any{
				{"name": "drain", "cmd": []string{"/bin/true"}, "timeout_sec": 5},
				{"name": "second", "cmd": []string{"/bin/sh", "-c", second}, "timeout_sec": 1},
			}
		}
	}
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, n *node, c *clientv3.Client)
		code   exitcode.Code
		reason string
		runs   bool
	}{
		{"a later hook fails", drainThen("echo nope >&2; exit 1"), exitcode.RebootFailed, protocol.ReasonHook, true},
		{"a later hook times out (on_timeout abort)", drainThen("sleep 5"), exitcode.RebootFailed, protocol.ReasonHook, true},
		{"the reboot command cannot start", func(t *testing.T, n *node, c *clientv3.Client) {
			drainThen("true")(t, n, c)
			n.cfg["reboot_command"] = []string{"/nonexistent/reboot"}
		}, exitcode.RebootFailed, protocol.ReasonRebootFailed, true},
		{"the reboot command fails", func(t *testing.T, n *node, c *clientv3.Client) {
			drainThen("true")(t, n, c)
			n.cfg["reboot_command"] = []string{"/bin/false"}
		}, exitcode.RebootFailed, protocol.ReasonRebootFailed, true},
		{"blocked before any hook", func(t *testing.T, n *node, c *clientv3.Client) {
			drainThen("true")(t, n, c)
			script(t, n.health, "echo 'quorum lost' >&2; exit 3")
		}, exitcode.HealthBlocked, protocol.ReasonHealth, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := nsName(t)
			c := testsupport.NewClient(t, embedded.Endpoint)
			n := newNode(t, embedded.Endpoint, ns, "node-a")
			abortLog := withAbortHooks(t, n)
			tc.setup(t, n, c)
			o := n.run("cycle")
			if o.code != tc.code || o.str("reason") != tc.reason || o.str("outcome") != protocol.OutcomeBlocked {
				t.Fatalf("cycle = %d %s/%s, want %d blocked/%s\n%s\n%s", o.code, o.str("outcome"), o.str("reason"), tc.code, tc.reason, o.stdout, o.stderr)
			}
			runs := abortRuns(t, abortLog)
			if !tc.runs {
				if runs != nil || o.json["abort_hooks"] != nil {
					t.Fatalf("abort hooks ran although no pre-reboot hook had started: %q %v", runs, o.json["abort_hooks"])
				}
				return
			}
			want := "abort " + tc.reason + " node-a " + n.cfg["lock_key"].(string) + " " + o.str("lease_id")
			if len(runs) != 1 || runs[0] != want {
				t.Errorf("abort hook runs %q, want once %q", runs, want)
			}
			got, _ := o.json["abort_hooks"].([]any)
			if len(got) != 2 || got[0].(map[string]any)["ok"] != false || got[1].(map[string]any)["ok"] != true ||
				!strings.Contains(got[0].(map[string]any)["detail"].(string), "exited 3: notify refused") {
				t.Errorf("abort_hooks reported %v, want notify failed then uncordon ok", o.json["abort_hooks"])
			}
			if !strings.Contains(o.stderr, `"event":"abort_hook_failed"`) || !strings.Contains(o.stderr, `"hook":"notify"`) {
				t.Errorf("the failing abort hook was not logged:\n%s", o.stderr)
			}
			if strings.Contains(o.stderr, `"event":"rebooting"`) {
				t.Errorf("the cycle went on to reboot:\n%s", o.stderr)
			}
			if v, _ := slotOf(t, c, ns, "node-a"); v != "" && tc.name != "the reboot command fails" {
				t.Errorf("slot left behind: %s", v)
			}
			assertFree(t, c, n)
		})
	}
}

// A lock lost while a pre-reboot hook runs kills the hook and still runs the
// abort hooks, outside the lost lock's context.
func TestCycleAbortHooksAfterLockLost(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	abortLog := withAbortHooks(t, n)
	done, _ := cycleInHook(t, n)
	if _, err := lock.Evict(context.Background(), c, n.cfg["lock_key"].(string), "node-a"); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.code != exitcode.LockBusy || o.str("detail") != LockLostDetail {
		t.Fatalf("cycle = %d %s, want 4 lock lost\n%s", o.code, o.stdout, o.stderr)
	}
	if runs := abortRuns(t, abortLog); len(runs) != 1 || !strings.HasPrefix(runs[0], "abort lock_busy node-a ") {
		t.Errorf("abort hook runs %q, want one after the lost lock", runs)
	}
	assertNothingLeft(t, c, ns, n)
}

// A pause given while the hooks run aborts the reboot and runs the abort
// hooks.
func TestCycleAbortHooksAfterPause(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	abortLog := withAbortHooks(t, n)
	done, resume := cycleInHook(t, n)
	if _, err := c.Put(context.Background(), "/t/"+ns+"/disable", `{"reason":"incident","by":"op","since":"2026-11-30T13:00:00Z"}`); err != nil {
		t.Fatal(err)
	}
	resume()
	o := <-done
	if o.code != exitcode.KillSwitch || o.str("reason") != protocol.ReasonPaused {
		t.Fatalf("cycle = %d %s, want 6 paused\n%s", o.code, o.stdout, o.stderr)
	}
	if runs := abortRuns(t, abortLog); len(runs) != 1 || !strings.HasPrefix(runs[0], "abort paused node-a ") {
		t.Errorf("abort hook runs %q, want one after the pause", runs)
	}
	assertNothingLeft(t, c, ns, n)
}

// A pre-reboot hook with on_timeout: continue that times out lets the
// reboot go on (kured's force-reboot), logged loudly; no abort hook runs.
func TestCycleHookTimeoutContinue(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	abortLog := withAbortHooks(t, n)
	n.cfg["pre_reboot_hooks"] = []map[string]any{
		{"name": "drain", "cmd": []string{"/bin/sh", "-c", "sleep 5"}, "timeout_sec": 1, "on_timeout": "continue"},
	}
	o := n.run("cycle")
	if o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
		t.Fatalf("cycle = %d %s, want 0 rebooting\n%s", o.code, o.stdout, o.stderr)
	}
	if calls := n.rebootCalls(); len(calls) == 0 {
		t.Error("the reboot command did not run")
	}
	if !strings.Contains(o.stderr, `"event":"hook_timeout_continue"`) || !strings.Contains(o.stderr, `"level":"warn"`) {
		t.Errorf("the timed-out hook was not logged as a warning:\n%s", o.stderr)
	}
	if runs := abortRuns(t, abortLog); runs != nil {
		t.Errorf("abort hooks ran on a reboot: %q", runs)
	}
	if v, _ := slotOf(t, c, ns, "node-a"); v == "" {
		t.Error("no slot kept for the reboot")
	}
}
