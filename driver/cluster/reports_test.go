package cluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// The tests of this file check that what a cycle reports is what happened.

// A waiter whose lease expired while it waited in line (a freeze longer than
// lock_ttl_sec; here the lease is revoked, as its expiry would) says so and
// queues again: etcd did not fail, so no lock_retry / reason=etcd line.
func TestCycleRequeuedWhenWaiterLeaseLost(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	key := n.cfg["lock_key"].(string)
	ctx := context.Background()
	other, err := lock.Acquire(ctx, c, lock.Options{Key: key, TTL: 60 * time.Second, Node: "node-x"})
	if err != nil {
		t.Fatal(err)
	}
	var stderr testsupport.SyncBuffer
	done := make(chan outcome, 1)
	go func() { done <- n.step(ctx, []string{"cycle"}, nil, &stderr) }()
	testsupport.Eventually(t, 10*time.Second, "node-a queues for the lock", func() bool { return strings.Contains(stderr.String(), `"event":"lock_waiting"`) })
	info, err := lock.Status(ctx, c, key)
	if err != nil || len(info.Waiters) != 1 {
		t.Fatalf("status %+v, %v; want node-a waiting", info, err)
	}
	lease, err := lock.ParseLeaseID(info.Waiters[0].LeaseID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	testsupport.Eventually(t, 10*time.Second, "node-a queues again", func() bool { return strings.Count(stderr.String(), `"event":"lock_waiting"`) == 2 })
	logs := stderr.String()
	if !strings.Contains(logs, `"msg":"our place in line for the lock expired (lease gone or entry deleted); queuing again"`) ||
		!strings.Contains(logs, `"event":"lock_requeued"`) {
		t.Errorf("no lock_requeued line:\n%s", logs)
	}
	if strings.Contains(logs, "lock_retry") || strings.Contains(logs, `"reason":"etcd"`) {
		t.Errorf("a lost place in line was reported as an etcd failure:\n%s", logs)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expectRebooting(t, done, 10*time.Second, "the requeued cycle, once the lock was free")
}

// SIGTERM (what the daemon sends when a local condition turns false) under
// the lock: the result says what was running then, and so does the detail.
func TestCycleStoppedSaysWhatRan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, n *node, c *clientv3.Client, ns string) (started string)
		want   protocol.StopPoint
		detail string
	}{
		{"waiting for a slot, no hooks", func(t *testing.T, n *node, c *clientv3.Client, ns string) string {
			nodeBRebooting(t, c, ns)
			return ""
		}, protocol.StopPoint{Running: protocol.RunningSlotWait}, "while waiting for a reboot slot (nothing was running)"},
		{"the under-lock health script", func(t *testing.T, n *node, _ *clientv3.Client, _ string) string {
			started := filepath.Join(n.dir, "health-started")
			script(t, n.health, `[ "$PHASE" = under-lock ] && touch `+started+`; sleep 20`)
			return started
		}, protocol.StopPoint{Running: protocol.RunningHealthScript}, "while the under-lock health script ran (it got SIGTERM)"},
		{"the second pre-reboot hook", func(t *testing.T, n *node, _ *clientv3.Client, _ string) string {
			started := filepath.Join(n.dir, "hook-started")
			script(t, filepath.Join(n.dir, "hook.sh"), `touch `+started+`; sleep 20`)
			n.cfg["pre_reboot_hooks"] = []map[string]any{
				{"name": "cordon", "cmd": []string{"/bin/true"}},
				{"name": "drain", "cmd": []string{filepath.Join(n.dir, "hook.sh")}, "timeout_sec": 30},
			}
			return started
		}, protocol.StopPoint{Running: protocol.RunningHook, Hook: "drain", HookIndex: 2, HooksDone: 1},
			"while pre-reboot hook 2 (drain) ran (it got SIGTERM; only abort_hooks undo what it did); 1 pre-reboot hook(s) had completed before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := nsName(t)
			c := testsupport.NewClient(t, embedded.Endpoint)
			n := newNode(t, embedded.Endpoint, ns, "node-a")
			started := tc.setup(t, n, c, ns)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stderr testsupport.SyncBuffer
			done := make(chan outcome, 1)
			go func() { done <- n.step(ctx, []string{"cycle"}, nil, &stderr) }()
			testsupport.Eventually(t, 10*time.Second, "the cycle gets to the point", func() bool {
				if started == "" {
					return strings.Contains(stderr.String(), "slot_waiting")
				}
				_, err := os.Stat(started)
				return err == nil
			})
			cancel() // what SIGTERM does through signal.NotifyContext
			var o outcome
			select {
			case o = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the cycle did not stop")
			}
			if o.code != exitcode.Interrupted || o.str("reason") != protocol.ReasonInterrupted {
				t.Fatalf("cycle = %d %s, want 130 interrupted\n%s", o.code, o.stdout, o.stderr)
			}
			var res protocol.CycleResult
			if err := json.Unmarshal([]byte(o.stdout), &res); err != nil {
				t.Fatal(err)
			}
			if res.Stopped == nil || *res.Stopped != tc.want {
				t.Errorf("stopped = %+v, want %+v\n%s", res.Stopped, tc.want, o.stdout)
			}
			if !strings.Contains(res.Detail, "under the lock "+tc.detail) {
				t.Errorf("detail %q, want it to say %q", res.Detail, tc.detail)
			}
			assertNothingLeft(t, c, ns, n)
		})
	}
}

// The slot's lease runs out behind the node's back while a hook runs (here
// revoked, as its expiry after a freeze would), then the hook fails: freeing
// the slot finds no lease, and the log says the slot had already expired,
// not that it "cannot be freed".
func TestCycleFreeingAnExpiredSlotSaysSo(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	ready, cont := filepath.Join(n.dir, "hook-ready"), filepath.Join(n.dir, "hook-resume")
	script(t, filepath.Join(n.dir, "hook.sh"), `: > `+ready+`; i=0; while [ ! -e `+cont+` ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; echo drain refused >&2; exit 1`)
	n.cfg["pre_reboot_hooks"] = []map[string]any{{"name": "drain", "cmd": []string{filepath.Join(n.dir, "hook.sh")}, "timeout_sec": 30}}
	var stderr testsupport.SyncBuffer
	done := make(chan outcome, 1)
	go func() { done <- n.step(context.Background(), []string{"cycle"}, nil, &stderr) }()
	testsupport.Eventually(t, 10*time.Second, "the hook runs", func() bool { _, err := os.Stat(ready); return err == nil })
	_, lease := slotOf(t, c, ns, "node-a")
	if lease == 0 {
		t.Fatal("no slot while the hook runs")
	}
	if _, err := c.Revoke(context.Background(), clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, cont, "")
	o := <-done
	if o.code != exitcode.RebootFailed || o.str("reason") != protocol.ReasonHook || !strings.Contains(o.str("detail"), "pre-reboot hook drain exited 1: drain refused") {
		t.Fatalf("cycle = %d %s: %s, want 9 hook\n%s", o.code, o.str("reason"), o.str("detail"), o.stderr)
	}
	if !strings.Contains(o.stderr, `"msg":"the reboot slot had already expired"`) || !strings.Contains(o.stderr, `"event":"slot_expired"`) {
		t.Errorf("no slot_expired line:\n%s", o.stderr)
	}
	if strings.Contains(o.stderr, "slot_free_failed") || strings.Contains(o.stderr, "cannot free the reboot slot") {
		t.Errorf("an expired slot reported as one that cannot be freed:\n%s", o.stderr)
	}
	assertNothingLeft(t, c, ns, n)
}

// A node back from its reboot after its slot expired (down for longer than
// reboot_slot_ttl_sec): complete says the slot had already expired.
func TestCompleteAfterTheSlotExpiredSaysSo(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.boot = "boot-1"
	if o := n.run("cycle"); o.code != exitcode.OK {
		t.Fatalf("cycle = %d\n%s", o.code, o.stderr)
	}
	_, lease := slotOf(t, c, ns, "node-a")
	if _, err := c.Revoke(context.Background(), clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	n.boot = "boot-2" // the reboot
	o := n.run("complete")
	if o.code != exitcode.OK || o.json["freed"] != false {
		t.Fatalf("complete = %d %s, want exit 0, freed false", o.code, o.stdout)
	}
	if !strings.Contains(o.stderr, `"msg":"the reboot slot had already expired"`) || !strings.Contains(o.stderr, `"event":"slot_expired"`) {
		t.Errorf("no slot_expired line:\n%s", o.stderr)
	}
	if _, err := os.Stat(slot.ClaimPath(filepath.Join(n.dir, "state"))); err == nil {
		t.Error("the claim of the expired slot is still in state_dir")
	}
}
