package cluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// assertFree fails unless nobody holds or waits for n's lock.
func assertFree(t *testing.T, c *clientv3.Client, n *node) {
	t.Helper()
	key := n.cfg["lock_key"].(string)
	info, err := lock.Status(context.Background(), c, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders)+len(info.Waiters) != 0 {
		t.Errorf("lock %s still has entries after the step: %+v", key, info)
	}
}

// slotOf returns the slot key's value and lease, or "" when absent.
func slotOf(t *testing.T, c *clientv3.Client, ns, name string) (string, int64) {
	t.Helper()
	resp, err := c.Get(context.Background(), "/t/"+ns+"/rebooting/"+name)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].Lease
}

// assertNothingLeft fails if the cycle ran the reboot command, left n's
// reboot slot or left an entry on its lock.
func assertNothingLeft(t *testing.T, c *clientv3.Client, ns string, n *node) {
	t.Helper()
	if calls := n.rebootCalls(); calls != nil {
		t.Errorf("reboot command ran: %q", calls)
	}
	if v, _ := slotOf(t, c, ns, n.name); v != "" {
		t.Errorf("reboot slot left: %s", v)
	}
	assertFree(t, c, n)
}

// cycleInHook starts a cycle whose one pre-reboot hook waits until resume is
// called, and returns once the hook runs.
func cycleInHook(t *testing.T, n *node) (done <-chan outcome, resume func()) {
	t.Helper()
	ready, cont := filepath.Join(n.dir, "hook-ready"), filepath.Join(n.dir, "hook-resume")
	script(t, filepath.Join(n.dir, "hook.sh"), `: > `+ready+`; i=0; while [ ! -e `+cont+` ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done`)
	n.cfg["pre_reboot_hooks"] = []map[string]any{{"name": "drain", "cmd": []string{filepath.Join(n.dir, "hook.sh")}, "timeout_sec": 30}}
	ch := make(chan outcome, 1)
	go func() { ch <- n.run("cycle") }()
	deadline := time.Now().Add(20 * time.Second)
	for _, err := os.Stat(ready); err != nil; _, err = os.Stat(ready) {
		if time.Now().After(deadline) {
			t.Fatal("the hook never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ch, func() { writeFile(t, cont, "") }
}

func TestCycleRealRebootThenComplete(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.boot = "boot-1"
	hookLog := filepath.Join(n.dir, "hook-log")
	script(t, filepath.Join(n.dir, "hook.sh"), `echo "hook $SLOT_KEY $(ls `+n.calls+` 2>/dev/null)" >> `+hookLog)
	n.cfg["pre_reboot_hooks"] = []map[string]any{{"name": "drain", "cmd": []string{filepath.Join(n.dir, "hook.sh")}, "timeout_sec": 5}}

	o := n.run("cycle", "--attempt", "2")
	if o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
		t.Fatalf("cycle = %d %s, want 0 rebooting\n%s\n%s", o.code, o.str("outcome"), o.stdout, o.stderr)
	}
	slotKey := "/t/" + ns + "/rebooting/node-a"
	if o.str("slot_key") != slotKey || o.str("lease_id") == "" || o.json["fencing_token"].(float64) <= 0 || o.json["attempt"].(float64) != 2 {
		t.Errorf("cycle output lacks slot/lease/fencing/attempt: %s", o.stdout)
	}
	if calls := n.rebootCalls(); len(calls) != 2 || calls[0] != "node-a" {
		t.Errorf("reboot command calls = %q, want one call for node-a", calls)
	}
	// The hook ran before the reboot command (it saw no calls file) and knew the slot.
	if b, err := os.ReadFile(hookLog); err != nil || strings.TrimSpace(string(b)) != "hook "+slotKey {
		t.Errorf("hook log = %q (%v), want it to run before the reboot command with SLOT_KEY", b, err)
	}
	m, err := reboot.ReadMarker(filepath.Join(n.dir, "state"))
	if err != nil || m.Node != "node-a" || m.Extra["slot_key"] != slotKey {
		t.Errorf("marker = %+v, %v; want one for node-a naming the slot", m, err)
	}
	val, lease := slotOf(t, c, ns, "node-a")
	var sl policy.Slot
	if err := json.Unmarshal([]byte(val), &sl); err != nil || sl.Node != "node-a" || lease == 0 {
		t.Fatalf("slot = %q lease %d; want a JSON slot of node-a on a lease", val, lease)
	}
	ttl, err := c.TimeToLive(context.Background(), clientv3.LeaseID(lease))
	if err != nil || ttl.GrantedTTL != 60 || ttl.TTL <= 0 {
		t.Errorf("slot lease TTL = %+v, %v; want granted 60 s and alive", ttl, err)
	}
	assertFree(t, c, n)

	// Before the reboot, complete refuses: the slot must outlast the shutdown.
	if o = n.run("complete"); o.code != exitcode.LockBusy || o.json["freed"] != false {
		t.Errorf("complete in the same boot = %d %s, want 4 and the slot kept", o.code, o.stdout)
	}
	if val, _ := slotOf(t, c, ns, "node-a"); val == "" {
		t.Fatal("complete in the same boot freed the slot")
	}

	n.boot = "boot-2" // the reboot
	o = n.run("complete")
	if o.code != exitcode.OK || o.json["freed"] != true {
		t.Fatalf("complete = %d %s, want freed", o.code, o.stdout)
	}
	if val, _ := slotOf(t, c, ns, "node-a"); val != "" {
		t.Errorf("slot still present after complete: %s", val)
	}
	if o = n.run("complete"); o.code != exitcode.OK || o.json["freed"] != false {
		t.Errorf("second complete = %d %s, want freed false", o.code, o.stdout)
	}
}

func TestCycleDryRun(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.cfg["dry_run"] = true
	n.cfg["pre_reboot_hooks"] = []map[string]any{{"cmd": []string{"/bin/false"}}}
	o := n.run("cycle")
	if o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeDryRun {
		t.Fatalf("dry-run cycle = %d %s, want 0 dry_run\n%s", o.code, o.str("outcome"), o.stdout)
	}
	if calls := n.rebootCalls(); calls != nil {
		t.Errorf("dry run called the reboot command: %q", calls)
	}
	if val, _ := slotOf(t, c, ns, "node-a"); val != "" {
		t.Errorf("dry run took a slot: %s", val)
	}
	if _, err := os.Stat(filepath.Join(n.dir, "state", reboot.MarkerFile)); !os.IsNotExist(err) {
		t.Errorf("dry run wrote a marker (stat: %v)", err)
	}
	assertFree(t, c, n)
}

func TestCycleBlockedUnderLock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, n *node, c *clientv3.Client)
		code   exitcode.Code
		reason string
	}{
		{"debounce: detector no longer fires", func(t *testing.T, n *node, _ *clientv3.Client) { os.Remove(n.needed) },
			exitcode.No, protocol.ReasonNotNeeded},
		{"health script fails", func(t *testing.T, n *node, _ *clientv3.Client) { script(t, n.health, "echo 'quorum lost' >&2; exit 3") },
			exitcode.HealthBlocked, protocol.ReasonHealth},
		{"cluster paused", func(t *testing.T, n *node, c *clientv3.Client) {
			if _, err := c.Put(context.Background(), "/t/"+nsName(t)+"/disable", `{"reason":"freeze","by":"ops"}`); err != nil {
				t.Fatal(err)
			}
		}, exitcode.KillSwitch, protocol.ReasonPaused},
		{"kill switch file", func(t *testing.T, n *node, _ *clientv3.Client) { writeFile(t, n.killFile, "incident 42\n") },
			exitcode.KillSwitch, protocol.ReasonKillSwitch},
		{"window closed", func(t *testing.T, n *node, _ *clientv3.Client) {
			n.cfg["windows"] = map[string]any{"timezone": "UTC", "deny": []string{"* 00:00-24:00"}}
		}, exitcode.WindowClosed, protocol.ReasonWindow},
		{"policy: too few healthy nodes", func(t *testing.T, n *node, _ *clientv3.Client) {
			n.cfg["cluster_policies"] = map[string]any{"min_healthy_absolute": 2}
		}, exitcode.HealthBlocked, protocol.ReasonPolicy},
		{"detector fails", func(t *testing.T, n *node, _ *clientv3.Client) {
			n.cfg["reboot_required_detectors"] = []map[string]any{{"type": "command", "cmd": []string{"/nonexistent/detector"}}}
		}, exitcode.DetectorError, protocol.ReasonDetector},
		{"pre-reboot hook fails", func(t *testing.T, n *node, _ *clientv3.Client) {
			n.cfg["pre_reboot_hooks"] = []map[string]any{{"name": "drain", "cmd": []string{"/bin/sh", "-c", "echo drain refused >&2; exit 1"}, "timeout_sec": 5}}
		}, exitcode.RebootFailed, protocol.ReasonHook},
		{"reboot command cannot start", func(t *testing.T, n *node, _ *clientv3.Client) {
			n.cfg["reboot_command"] = []string{"/nonexistent/reboot"}
		}, exitcode.RebootFailed, protocol.ReasonRebootFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := nsName(t)
			c := testsupport.NewClient(t, embedded.Endpoint)
			n := newNode(t, embedded.Endpoint, ns, "node-a")
			tc.setup(t, n, c)
			o := n.run("cycle")
			if o.code != tc.code || o.str("reason") != tc.reason || o.str("outcome") != protocol.OutcomeBlocked {
				t.Fatalf("cycle = %d %s/%s, want %d blocked/%s\n%s\n%s", o.code, o.str("outcome"), o.str("reason"), tc.code, tc.reason, o.stdout, o.stderr)
			}
			if o.str("lease_id") == "" {
				t.Errorf("blocked under the lock but no lease_id reported: %s", o.stdout)
			}
			if calls := n.rebootCalls(); calls != nil && tc.reason != protocol.ReasonRebootFailed {
				t.Errorf("reboot command ran: %q", calls)
			}
			if val, _ := slotOf(t, c, ns, "node-a"); val != "" {
				t.Errorf("slot left behind: %s", val)
			}
			assertFree(t, c, n)
		})
	}
}

// nodeBRebooting writes node-b's reboot slot in namespace ns on a lease of
// its own and returns that lease.
func nodeBRebooting(t *testing.T, c *clientv3.Client, ns string) clientv3.LeaseID {
	t.Helper()
	ctx := context.Background()
	grant, err := c.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/t/"+ns+"/rebooting/node-b", `{"node":"node-b","since":"2026-01-01T00:00:00Z"}`, clientv3.WithLease(grant.ID)); err != nil {
		t.Fatal(err)
	}
	return grant.ID
}

// freeAndExpectRebooting frees node-b's slot and expects the waiting cycle
// to go on and reboot within 5 s.
func freeAndExpectRebooting(t *testing.T, c *clientv3.Client, slot clientv3.LeaseID, done <-chan outcome) {
	t.Helper()
	if _, err := c.Revoke(context.Background(), slot); err != nil {
		t.Fatal(err)
	}
	expectRebooting(t, done, 5*time.Second, "the cycle after node-b's slot was freed")
}

func TestCycleWaitsForAnotherNodesSlot(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	ctx := context.Background()
	slot := nodeBRebooting(t, c, ns)
	var stderr testsupport.SyncBuffer
	done := make(chan outcome, 1)
	go func() { done <- n.step(ctx, []string{"cycle"}, nil, &stderr) }()
	testsupport.Eventually(t, 10*time.Second, "the cycle waits for node-b's slot", func() bool { return strings.Contains(stderr.String(), "slot_waiting") })
	select {
	case o := <-done:
		t.Fatalf("cycle ended while node-b's slot exists: %s", o.stdout)
	case <-time.After(300 * time.Millisecond):
	}
	if calls := n.rebootCalls(); calls != nil {
		t.Fatalf("reboot command ran while node-b was rebooting: %q", calls)
	}
	freeAndExpectRebooting(t, c, slot, done)
	if calls := n.rebootCalls(); len(calls) != 2 {
		t.Errorf("reboot calls = %q, want one", calls)
	}
}

// A watch can lose a deletion on some etcd releases (lock.Recheck): while it
// waits for another node's slot, the cycle counts again every recheck even
// without an event, says slot_waiting only once while nothing changes, and
// still goes on at once when the slot is freed.
func TestCycleRechecksWhileWaitingForASlot(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	ctx := context.Background()
	slot := nodeBRebooting(t, c, ns)
	var watches atomic.Int32
	var stderr testsupport.SyncBuffer
	done := make(chan outcome, 1)
	go func() {
		done <- n.step(ctx, []string{"cycle"}, func(w *world) {
			w.recheck = 100 * time.Millisecond
			w.beforeWatch = func() { watches.Add(1) }
		}, &stderr)
	}()
	testsupport.Eventually(t, 10*time.Second, "the cycle re-reads the line several times", func() bool { return watches.Load() >= 5 })
	if got := strings.Count(stderr.String(), `"event":"slot_waiting"`); got != 1 {
		t.Errorf("slot_waiting logged %d times while nothing changed, want once:\n%s", got, stderr.String())
	}
	if calls := n.rebootCalls(); calls != nil {
		t.Fatalf("reboot command ran while node-b was rebooting: %q", calls)
	}
	freeAndExpectRebooting(t, c, slot, done)
}

// With --no-wait (clusterrebootd simulate) the cycle answers instead of
// waiting in line: reboot_in_progress when another node holds a reboot slot,
// lock_busy when another holder has the lock.
func TestCycleNoWait(t *testing.T) {
	ctx := context.Background()
	t.Run("another node's slot", func(t *testing.T) {
		ns := nsName(t)
		c := testsupport.NewClient(t, embedded.Endpoint)
		n := newNode(t, embedded.Endpoint, ns, "node-a")
		n.cfg["dry_run"] = true
		grant, err := c.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, "/t/"+ns+"/rebooting/node-b", `{"node":"node-b","since":"2026-01-01T00:00:00Z"}`, clientv3.WithLease(grant.ID)); err != nil {
			t.Fatal(err)
		}
		o := n.run("cycle", "--no-wait")
		if o.code != exitcode.HealthBlocked || o.str("reason") != protocol.ReasonRebootInProgress ||
			!strings.Contains(o.str("detail"), "other nodes of the ungrouped fleet are rebooting (node-b(slot); max_holders 1); a real run would keep its seat and wait") {
			t.Fatalf("cycle --no-wait = %d %s: %s\n%s", o.code, o.str("reason"), o.str("detail"), o.stderr)
		}
		assertFree(t, c, n)
	})
	t.Run("the lock held by another", func(t *testing.T) {
		ns := nsName(t)
		c := testsupport.NewClient(t, embedded.Endpoint)
		n := newNode(t, embedded.Endpoint, ns, "node-a")
		n.cfg["dry_run"] = true
		held, err := lock.Acquire(ctx, c, lock.Options{Key: n.cfg["lock_key"].(string), TTL: 60 * time.Second, Node: "node-b"})
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(ctx)
		o := n.run("cycle", "--no-wait")
		if o.code != exitcode.LockBusy || !strings.Contains(o.stderr+o.str("error"), "a real run would wait in line") {
			t.Fatalf("cycle --no-wait = %d %s: %s %s\n%s", o.code, o.str("reason"), o.str("detail"), o.str("error"), o.stderr)
		}
	})
}

func TestCycleSeatLostBeforeSlot(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	key := n.cfg["lock_key"].(string)
	o := n.step(context.Background(), []string{"cycle"}, func(w *world) {
		w.beforeSlot = func() {
			if ev, err := lock.Evict(context.Background(), c, key, "node-a"); err != nil || len(ev) != 1 {
				t.Errorf("evict = %v, %v", ev, err)
			}
		}
	}, nil)
	if o.code != exitcode.LockBusy || o.str("reason") != protocol.ReasonLockBusy || o.str("detail") != LockLostDetail {
		t.Fatalf("cycle = %d %s/%s, want 4 lock_busy/lock lost\n%s", o.code, o.str("reason"), o.str("detail"), o.stdout)
	}
	if calls := n.rebootCalls(); calls != nil {
		t.Errorf("reboot command ran without the lock: %q", calls)
	}
	if val, _ := slotOf(t, c, ns, "node-a"); val != "" {
		t.Errorf("slot taken without the lock: %s", val)
	}
	assertFree(t, c, n)
}

func TestCycleLockLostDuringHealthCheck(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	started := filepath.Join(n.dir, "health-started")
	script(t, n.health, "touch "+started+"; sleep 2; exit 0")
	key := n.cfg["lock_key"].(string)
	done := make(chan outcome, 1)
	go func() { done <- n.run("cycle") }()
	testsupport.Eventually(t, 10*time.Second, "the health script starts", func() bool { _, err := os.Stat(started); return err == nil })
	if _, err := lock.Evict(context.Background(), c, key, "node-a"); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.code != exitcode.LockBusy || o.str("detail") != LockLostDetail {
		t.Fatalf("cycle = %d %s, want 4 lock lost", o.code, o.stdout)
	}
	if calls := n.rebootCalls(); calls != nil {
		t.Errorf("reboot command ran after the lock was lost: %q", calls)
	}
	if val, _ := slotOf(t, c, ns, "node-a"); val != "" {
		t.Errorf("slot taken after the lock was lost: %s", val)
	}
}

func TestCycleInterruptedWhileWaitingForLock(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	a := newNode(t, embedded.Endpoint, ns, "node-a")
	key := a.cfg["lock_key"].(string)
	o := lock.Options{Key: key, TTL: 5 * time.Second, Node: "node-x", RPCTimeout: 2 * time.Second}
	held, err := lock.Acquire(context.Background(), c, o)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testsupport.SyncBuffer
	done := make(chan outcome, 1)
	go func() { done <- a.step(ctx, []string{"cycle"}, nil, &stderr) }()
	testsupport.Eventually(t, 10*time.Second, "node-a queues for the lock", func() bool { return strings.Contains(stderr.String(), "lock_waiting") })
	cancel() // what SIGTERM does through signal.NotifyContext
	res := <-done
	if res.code != exitcode.Interrupted || res.str("reason") != protocol.ReasonInterrupted {
		t.Fatalf("cycle = %d %s, want 130 interrupted", res.code, res.stdout)
	}
	info, err := lock.Status(context.Background(), c, key)
	if err != nil || len(info.Waiters) != 0 || len(info.Holders) != 1 {
		t.Errorf("after SIGTERM: %+v, %v; want node-a's entry gone", info, err)
	}
}

// TestCycleStoppedWhileWaitingForSlot: a node that holds its seat and waits
// for another node's slot stops at once when SIGTERM arrives or its lock is
// taken away, releases what it holds and runs nothing.
func TestCycleStoppedWhileWaitingForSlot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   exitcode.Code
		reason string
	}{
		{"SIGTERM", exitcode.Interrupted, protocol.ReasonInterrupted},
		{"lock lost", exitcode.LockBusy, protocol.ReasonLockBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := nsName(t)
			c := testsupport.NewClient(t, embedded.Endpoint)
			n := newNode(t, embedded.Endpoint, ns, "node-a")
			if _, err := c.Put(context.Background(), "/t/"+ns+"/rebooting/node-b", `{"node":"node-b"}`); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stderr testsupport.SyncBuffer
			done := make(chan outcome, 1)
			go func() { done <- n.step(ctx, []string{"cycle"}, nil, &stderr) }()
			testsupport.Eventually(t, 10*time.Second, "the cycle waits for node-b's slot", func() bool { return strings.Contains(stderr.String(), "slot_waiting") })
			if tc.code == exitcode.Interrupted {
				cancel()
			} else if _, err := lock.Evict(context.Background(), c, n.cfg["lock_key"].(string), "node-a"); err != nil {
				t.Fatal(err)
			}
			select {
			case o := <-done:
				if o.code != tc.code || o.str("reason") != tc.reason {
					t.Fatalf("cycle = %d %s, want %d %s", o.code, o.stdout, tc.code, tc.reason)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the waiting cycle did not stop")
			}
			if calls := n.rebootCalls(); calls != nil {
				t.Errorf("reboot command ran: %q", calls)
			}
			if val, _ := slotOf(t, c, ns, "node-a"); val != "" {
				t.Errorf("slot taken: %s", val)
			}
			assertFree(t, c, n)
		})
	}
}

// A slot that expires while the pre-reboot hooks run is not re-taken and
// nothing reboots: once the seat is released after the reboot command, the
// slot alone would keep this node counted, and it is gone. The hook stands
// still while the test revokes the slot's lease, as its expiry would.
func TestCycleSlotExpiredDuringHooks(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	done, resume := cycleInHook(t, n)
	_, lease := slotOf(t, c, ns, "node-a")
	if lease == 0 {
		t.Fatal("no slot while the hook runs")
	}
	// Only the slot goes: the seat stays held, so the lost lock cannot be
	// what stops the reboot (in a frozen node it is noticed first).
	if info, err := lock.Status(context.Background(), c, n.cfg["lock_key"].(string)); err != nil || len(info.Holders) != 1 || info.Holders[0].Node != "node-a" {
		t.Fatalf("lock %+v, %v; want node-a holding it while the hook runs", info, err)
	}
	if _, err := c.Revoke(context.Background(), clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	resume()
	o := <-done
	if o.code != exitcode.RebootFailed || o.str("reason") != protocol.ReasonHook || !strings.Contains(o.str("detail"), "expired while the pre-reboot hooks ran") {
		t.Fatalf("cycle = %d %s: %s, want 9 hook, slot expired\n%s", o.code, o.str("reason"), o.str("detail"), o.stderr)
	}
	if strings.Contains(o.stderr, `"event":"rebooting"`) || strings.Contains(o.stderr, "lock lost") {
		t.Errorf("the cycle went on to reboot or lost its lock:\n%s", o.stderr)
	}
	assertNothingLeft(t, c, ns, n)
}

// A cluster-wide pause given while the pre-reboot hooks run stops the
// reboot, as the kill switch file does: the pause key is read again before
// every hook, and the slot's start right before the reboot command is
// guarded by it (lib/slot Reboot.Start).
func TestCyclePausedDuringHooks(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	done, resume := cycleInHook(t, n)
	if _, err := c.Put(context.Background(), "/t/"+ns+"/disable", `{"reason":"incident INC-7","by":"op","since":"2026-11-30T13:00:00Z"}`); err != nil {
		t.Fatal(err)
	}
	resume()
	o := <-done
	if o.code != exitcode.KillSwitch || o.str("reason") != protocol.ReasonPaused || !strings.Contains(o.str("detail"), "paused cluster-wide before the reboot command (incident INC-7") {
		t.Fatalf("cycle = %d %s: %s, want 6 paused\n%s", o.code, o.str("reason"), o.str("detail"), o.stderr)
	}
	assertNothingLeft(t, c, ns, n)
}

// A state_dir that cannot take the reboot marker stops the cycle before the
// slot and the hooks: a retry must not drain the node again and again.
func TestCycleStateDirUnusableBeforeHooks(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	hookLog := filepath.Join(n.dir, "hook-log")
	script(t, filepath.Join(n.dir, "hook.sh"), `echo ran >> `+hookLog)
	n.cfg["pre_reboot_hooks"] = []map[string]any{{"name": "drain", "cmd": []string{filepath.Join(n.dir, "hook.sh")}, "timeout_sec": 5}}
	writeFile(t, filepath.Join(n.dir, "file"), "")
	n.cfg["state_dir"] = filepath.Join(n.dir, "file", "state")

	o := n.run("cycle")
	if o.code != exitcode.RebootFailed || o.str("reason") != protocol.ReasonRebootFailed || !strings.Contains(o.str("detail"), "cannot take the reboot marker") {
		t.Fatalf("cycle = %d %s: %s, want 9 reboot_failed\n%s", o.code, o.str("reason"), o.str("detail"), o.stderr)
	}
	if _, err := os.Stat(hookLog); err == nil {
		t.Error("the pre-reboot hook ran although the marker could not be written")
	}
	assertNothingLeft(t, c, ns, n)
}

// Before the reboot command the slot gets its whole TTL again, however long
// the hooks took: from then on it is what keeps the node counted.
func TestCycleSlotRenewedBeforeReboot(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.cfg["pre_reboot_hooks"] = []map[string]any{{"name": "slow", "cmd": []string{"/bin/sleep", "3"}, "timeout_sec": 30}}
	n.cfg["reboot_slot_ttl_sec"] = 60
	o := n.run("cycle")
	if o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
		t.Fatalf("cycle = %d %s\n%s", o.code, o.str("outcome"), o.stderr)
	}
	_, lease := slotOf(t, c, ns, "node-a")
	ttl, err := c.TimeToLive(context.Background(), clientv3.LeaseID(lease))
	if err != nil {
		t.Fatal(err)
	}
	// Granted for 60 s before a 3 s hook: without the renewal at most 57 s
	// would be left.
	if ttl.TTL < 58 {
		t.Errorf("slot lease has %d s left after a 3 s hook; want it renewed to about 60", ttl.TTL)
	}
}

// complete --keep renews the slot of a node that is back but failing its
// post-reboot checks, so the fleet keeps waiting for it; without a slot
// (it expired while the node was down) there is nothing to keep.
func TestCompleteKeepRenewsTheSlot(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.cfg["reboot_slot_ttl_sec"] = 60
	if o := n.run("cycle"); o.code != exitcode.OK {
		t.Fatalf("cycle = %d\n%s", o.code, o.stderr)
	}
	_, lease := slotOf(t, c, ns, "node-a")
	time.Sleep(2100 * time.Millisecond)
	o := n.run("complete", "--keep")
	if o.code != exitcode.OK || o.json["kept"] != true || o.json["freed"] != false {
		t.Fatalf("complete --keep = %d %s", o.code, o.stdout)
	}
	ttl, err := c.TimeToLive(context.Background(), clientv3.LeaseID(lease))
	if err != nil || ttl.TTL < 59 {
		t.Errorf("slot lease TTL %+v, %v after --keep; want about 60 again (57 without)", ttl, err)
	}
	if val, _ := slotOf(t, c, ns, "node-a"); val == "" {
		t.Error("--keep removed the slot")
	}
	if _, err := c.Revoke(context.Background(), clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	if o := n.run("complete", "--keep"); o.code != exitcode.OK || o.json["kept"] != nil {
		t.Errorf("complete --keep without a slot = %d %s, want exit 0, not kept", o.code, o.stdout)
	}
}

// The cycle marks run_dir/lock-holding while it holds a seat (the daemon's
// clusterrebootd_lock_holding), and removes the mark with the seat.
func TestCycleMarksTheSeatInRunDir(t *testing.T) {
	ns := nsName(t)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	mark := filepath.Join(n.dir, "run", protocol.LockHoldingFile)
	done, resume := cycleInHook(t, n)
	b, err := os.ReadFile(mark)
	if err != nil || strings.TrimSpace(string(b)) == "" {
		t.Errorf("under the lock: %s = %q (%v), want the lease id", mark, b, err)
	}
	resume()
	if o := <-done; o.code != exitcode.OK {
		t.Fatalf("cycle = %d %s", o.code, o.stdout)
	}
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Errorf("the mark outlived the seat (stat: %v)", err)
	}
}

// The maintenance window is checked once more right before the reboot
// command (lib/reboot Commit): a pre-reboot hook that drained the node past
// the window's end does not reboot it. The clock (the world's) moves past
// the end while the hook runs.
func TestCycleWindowClosedWhileHooksRan(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	n.cfg["windows"] = map[string]any{"timezone": "UTC", "allow": []string{"Tue 22:00-23:00"}}
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 22, 30, 0, 0, time.UTC) // a Tuesday, inside
	clock := func(w *world) {
		w.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	}
	ready, cont := filepath.Join(n.dir, "hook-ready"), filepath.Join(n.dir, "hook-resume")
	script(t, filepath.Join(n.dir, "hook.sh"), `: > `+ready+`; i=0; while [ ! -e `+cont+` ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done`)
	n.cfg["pre_reboot_hooks"] = []map[string]any{{"name": "drain", "cmd": []string{filepath.Join(n.dir, "hook.sh")}, "timeout_sec": 30}}
	done := make(chan outcome, 1)
	go func() { done <- n.step(context.Background(), []string{"cycle"}, clock, nil) }()
	testsupport.Eventually(t, 20*time.Second, "the hook to run", func() bool { _, err := os.Stat(ready); return err == nil })
	mu.Lock()
	now = now.Add(45 * time.Minute) // 23:15: the drain took too long
	mu.Unlock()
	writeFile(t, cont, "")
	o := <-done
	if o.code != exitcode.WindowClosed || o.str("reason") != protocol.ReasonWindow || !strings.Contains(o.str("detail"), "checked again right before the reboot command") {
		t.Fatalf("cycle = %d %s: %s, want 5 window\n%s", o.code, o.str("reason"), o.str("detail"), o.stderr)
	}
	if calls := n.rebootCalls(); len(calls) != 0 {
		t.Fatalf("the reboot command ran: %v", calls)
	}
	assertNothingLeft(t, c, ns, n)
}
