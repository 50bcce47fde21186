package cluster

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// The protocol's assumptions (docs/cluster-protocol.md, "Why never more than
// max_holders"), each broken on purpose: two machines with one name, two
// fleets in one namespace, policies under max_holders > 1, slots without a
// lock or group, nodes that disagree on max_holders, a reboot command that
// fails half-way.

// machine makes a node that is a machine of its own: its own boot id and
// machine id.
func machine(t *testing.T, ns, name, id string) *node {
	n := newNode(t, embedded.Endpoint, ns, name)
	n.boot, n.machine = id+"-boot-1", id+"-machine"
	return n
}

func TestTwoMachinesWithOneName(t *testing.T) {
	for _, tc := range []struct {
		name string
		// machineB is the second machine's machine id ("" = the same as
		// the first's, as a cloned image without a fresh machine-id).
		machineB string
		code     exitcode.Code
		reason   string
	}{
		{"different machine ids: a conflict, loudly", "b-machine", exitcode.Config, protocol.ReasonConflict},
		// A clone with the same machine id cannot be told from this
		// machine's own earlier boot: refused, never waiting to take it.
		{"cloned machine id: a conflict too", "", exitcode.Config, protocol.ReasonConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := nsName(t)
			c := testsupport.NewClient(t, embedded.Endpoint)
			a := machine(t, ns, "web", "a")
			b := machine(t, ns, "web", "b")
			if tc.machineB == "" {
				b.machine = a.machine
			}
			if o := a.run("cycle"); o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
				t.Fatalf("machine a: cycle = %d %s", o.code, o.stdout)
			}
			slotA, leaseA := slotOf(t, c, ns, "web")

			// Machine b, same name, while a is down: never rebooting.
			o := b.run("cycle", "--no-wait")
			if o.code != tc.code || o.str("reason") != tc.reason {
				t.Fatalf("machine b: cycle = %d %s, want %d %s\n%s", o.code, o.str("reason"), tc.code, tc.reason, o.stderr)
			}
			if calls := b.rebootCalls(); calls != nil {
				t.Fatalf("machine b rebooted while machine a (same name) was down: %q", calls)
			}
			if v, l := slotOf(t, c, ns, "web"); v != slotA || l != leaseA {
				t.Errorf("machine b changed machine a's slot: %s (lease %x), was %s (lease %x)", v, l, slotA, leaseA)
			}
			// b "reboots" and completes: it frees nothing of a's.
			b.boot = "b-boot-2"
			if o := b.run("complete"); o.code != exitcode.OK || o.json["freed"] != false {
				t.Errorf("machine b: complete = %d %s, want freed false", o.code, o.stdout)
			}
			if v, _ := slotOf(t, c, ns, "web"); v != slotA {
				t.Fatalf("machine b's complete deleted machine a's slot")
			}
			// a is back: its complete frees its own slot.
			a.boot = "a-boot-2"
			if o := a.run("complete"); o.code != exitcode.OK || o.json["freed"] != true {
				t.Errorf("machine a: complete = %d %s, want freed", o.code, o.stdout)
			}
		})
	}
}

func TestPublishRefusesAnotherMachinesRecord(t *testing.T) {
	ns := nsName(t)
	a := machine(t, ns, "web", "a")
	b := machine(t, ns, "web", "b")
	args := []string{"publish", "--state", "idle", "--last-check", "2026-12-01T00:00:00Z"}
	if o := a.run(args...); o.code != exitcode.OK {
		t.Fatalf("a: publish = %d %s", o.code, o.stdout)
	}
	o := b.run(args...)
	if o.code != exitcode.Config || !strings.Contains(o.str("error"), `node_name "web" is used by another machine too (machine id a-machine`) {
		t.Fatalf("b: publish = %d %s, want 2 naming the other machine", o.code, o.stdout)
	}
	// The same machine after a reboot is not another machine.
	a.boot = "a-boot-2"
	if o := a.run(args...); o.code != exitcode.OK {
		t.Fatalf("a after its reboot: publish = %d %s", o.code, o.stdout)
	}
}

func TestTwoLocksInOneNamespace(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	a := machine(t, ns, "node-a", "a")
	b := machine(t, ns, "node-b", "b")
	b.cfg["lock_key"] = "/t/" + ns + "/lock2" // same directory, so same default namespace
	if o := a.run("cycle"); o.code != exitcode.OK {
		t.Fatalf("a: cycle = %d %s", o.code, o.stdout)
	}
	o := b.run("cycle", "--no-wait")
	if o.code != exitcode.Config || o.str("reason") != protocol.ReasonConflict ||
		!strings.Contains(o.str("error"), "two fleets share etcd_namespace /t/"+ns+"/") {
		t.Fatalf("b: cycle = %d %s, want 2 conflict naming the shared namespace", o.code, o.stdout)
	}
	if calls := b.rebootCalls(); calls != nil {
		t.Fatalf("b rebooted: %q", calls)
	}

	// Each lock in a namespace of its own: they do not count each other.
	b.cfg["lock_key"] = "/t/" + ns + "/fleet2/lock"
	if o := b.run("cycle", "--no-wait"); o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
		t.Fatalf("b in its own namespace: cycle = %d %s", o.code, o.stdout)
	}
	if v, _ := slotOf(t, c, ns, "node-a"); v == "" {
		t.Error("a's slot is gone")
	}
}

func TestSlotWithoutLockOrGroupCountsEverywhere(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		blocks      bool
	}{
		{"empty object", `{}`, true},
		{"null", `null`, true},
		{"node only", `{"node":"x"}`, true},
		{"no lock", `{"node":"x","group":"rack2"}`, true},
		{"not JSON", `garbage`, true},
		{"this lock, another group", `{"node":"x","lock":"LOCK","group":"rack2"}`, false},
		{"this lock, this group", `{"node":"x","lock":"LOCK","group":"rack1"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := nsName(t)
			c := testsupport.NewClient(t, embedded.Endpoint)
			n := machine(t, ns, "node-a", "a")
			n.cfg["group"] = "rack1"
			value := strings.ReplaceAll(tc.value, "LOCK", "/t/"+ns+"/lock")
			grant, err := c.Grant(context.Background(), 60)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Put(context.Background(), "/t/"+ns+"/rebooting/x", value, clientv3.WithLease(grant.ID)); err != nil {
				t.Fatal(err)
			}
			o := n.run("cycle", "--no-wait")
			if tc.blocks && (o.code != exitcode.HealthBlocked || o.str("reason") != protocol.ReasonRebootInProgress) {
				t.Fatalf("cycle = %d %s, want 3 reboot_in_progress", o.code, o.stdout)
			}
			if !tc.blocks && o.code != exitcode.OK {
				t.Fatalf("cycle = %d %s, want 0: another group's slot does not count", o.code, o.stdout)
			}
		})
	}
}

// With max_holders 2 and min_healthy_absolute 2 over three healthy nodes,
// two nodes hold seats and pass every check on a view where neither is down
// yet. The slot transaction is guarded by the count's revision: the second
// to take its slot sees the first's and the policy stops it.
func TestPolicyHoldsUnderMaxHoldersTwo(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	var nodes []*node
	for _, name := range []string{"a", "b", "c"} {
		n := machine(t, ns, "node-"+name, name)
		n.cfg["max_holders"] = 2
		n.cfg["cluster_policies"] = map[string]any{"min_healthy_absolute": 2}
		if o := n.run("publish", "--state", "idle", "--last-check", time.Now().UTC().Format(time.RFC3339)); o.code != exitcode.OK {
			t.Fatalf("publish: %s", o.stdout)
		}
		nodes = append(nodes, n)
	}
	// Both reach the slot transaction before either takes its slot.
	var arrived sync.WaitGroup
	arrived.Add(2)
	gate := make(chan struct{})
	results := make(chan outcome, 2)
	for _, n := range nodes[:2] {
		go func() {
			results <- n.step(context.Background(), []string{"cycle"}, func(w *world) {
				once := sync.Once{}
				w.beforeSlot = func() {
					once.Do(func() { arrived.Done(); <-gate })
				}
			}, nil)
		}()
	}
	arrived.Wait()
	close(gate)
	rebooting, blocked := 0, 0
	for range 2 {
		o := <-results
		switch {
		case o.code == exitcode.OK && o.str("outcome") == protocol.OutcomeRebooting:
			rebooting++
		case o.code == exitcode.HealthBlocked && o.str("reason") == protocol.ReasonPolicy:
			blocked++
		default:
			t.Errorf("cycle = %d %s", o.code, o.stdout)
		}
	}
	if rebooting != 1 || blocked != 1 {
		t.Fatalf("%d rebooting and %d blocked by the policy, want 1 and 1: min_healthy_absolute 2 of 3 allows one node down", rebooting, blocked)
	}
	resp, err := c.Get(context.Background(), "/t/"+ns+"/rebooting/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 1 {
		t.Fatalf("%d slots (%v), want 1", resp.Count, err)
	}
}

// Nodes that disagree on max_holders: the smallest in the line counts.
func TestSmallestMaxHoldersCounts(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	a := machine(t, ns, "node-a", "a")
	a.cfg["max_holders"] = 1
	if o := a.run("cycle"); o.code != exitcode.OK {
		t.Fatalf("a: cycle = %d %s", o.code, o.stdout)
	}
	b := machine(t, ns, "node-b", "b")
	b.cfg["max_holders"] = 3
	var stderr testsupport.SyncBuffer
	o := b.step(context.Background(), []string{"cycle", "--no-wait"}, nil, &stderr)
	if o.code != exitcode.HealthBlocked || o.str("reason") != protocol.ReasonRebootInProgress {
		t.Fatalf("b (max_holders 3) while a (max_holders 1) is down: cycle = %d %s, want 3 reboot_in_progress", o.code, o.stdout)
	}
	if o.json["max_holders"] != float64(1) || !strings.Contains(stderr.String(), `"event":"max_holders_disagree"`) {
		t.Errorf("max_holders %v, want 1 and a max_holders_disagree warning:\n%s", o.json["max_holders"], stderr.String())
	}
	if v, _ := slotOf(t, c, ns, "node-b"); v != "" {
		t.Errorf("b took a slot: %s", v)
	}
}

// A reboot command that started and failed (systemctl killed by the very
// shutdown it started) keeps the slot: the node may be going down.
func TestFailedRebootCommandKeepsTheSlot(t *testing.T) {
	ns := nsName(t)
	c := testsupport.NewClient(t, embedded.Endpoint)
	n := machine(t, ns, "node-a", "a")
	script(t, n.dir+"/reboot.sh", `echo "$1" >> `+n.calls+`; kill -KILL $$`)
	o := n.run("cycle")
	if o.code != exitcode.RebootFailed || o.str("reason") != protocol.ReasonRebootFailed {
		t.Fatalf("cycle = %d %s", o.code, o.stdout)
	}
	if v, lease := slotOf(t, c, ns, "node-a"); v == "" || lease == 0 {
		t.Fatal("the slot was freed after a reboot command that started: the next node may go while this one goes down")
	}
	if o.str("slot_key") == "" {
		t.Errorf("the result does not name the slot it keeps: %s", o.stdout)
	}
	assertFree(t, c, n)
	// Another node waits for it.
	b := machine(t, ns, "node-b", "b")
	if o := b.run("cycle", "--no-wait"); o.code != exitcode.HealthBlocked || o.str("reason") != protocol.ReasonRebootInProgress {
		t.Fatalf("b: cycle = %d %s, want 3 reboot_in_progress", o.code, o.stdout)
	}
}
