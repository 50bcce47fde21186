package slot

import (
	"reflect"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// handCount is a count of f built by hand (no etcd): the records, slots
// and rollout records given, as Count would parse them.
func handCount(f Fleet, records []policy.NodeRecord, slots []Parsed, r Rollout) Count {
	k := f.newCounting(10, "")
	c := k.c
	c.View.Nodes = append(c.View.Nodes, records...)
	for _, s := range slots {
		c.Slots = append(c.Slots, s)
		c.View.Rebooting = append(c.View.Rebooting, s.Policy())
	}
	c.Rollout = r
	return c
}

func handFleet(now time.Time, opts ...func(*Fleet)) Fleet {
	cfg := config.Default()
	cfg.NodeName = "self"
	f := Fleet{NS: "/ns/", Lock: "/ns/lock", Node: "self", BootID: "boot-self", Rules: policy.RulesOf(cfg),
		Now: func() time.Time { return now }}
	for _, o := range opts {
		o(&f)
	}
	return f
}

func rec(node, group string, wave int, state string, required bool) policy.NodeRecord {
	return policy.NodeRecord{Node: node, Group: group, Wave: wave, State: state, RebootRequired: required, Lock: "/ns/lock", BootID: "boot-" + node}
}

func slotOf(node, group string, wave int, since time.Time) Parsed {
	return Parsed{Value: Value{Node: node, Lock: "/ns/lock", Group: group, Wave: wave, Since: since, BootID: "boot-" + node}, Key: Key("/ns/", node), Bound: true, Lease: 0x10}
}

// Each node gets one progress, in the documented order (a slot first, then
// what its record says, then a completion); the tally counts them per wave
// and group, need_reboot including waiting, failed whatever the progress.
func TestProgressAndTally(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := handFleet(now)
	records := []policy.NodeRecord{
		rec("a", "", 0, policy.StateIdle, false),
		rec("b", "", 0, policy.StateNeedsReboot, true),
		rec("c", "db", 1, policy.StateBlocked, true),
		rec("d", "db", 1, policy.StateRebooting, true),
		rec("e", "db", 1, policy.StateIdle, false),
		rec("f", "db", 1, policy.StateWaiting, true),
		rec("held", "db", 1, policy.StateBlocked, true),
	}
	r := Rollout{
		Done: []Done{
			{Node: "e", Group: "db", Wave: 1, Since: now.Add(-time.Hour), At: now.Add(-50 * time.Minute), DurationMS: 600000},
			// f completed earlier and needs a reboot again: not done.
			{Node: "f", Group: "db", Wave: 1, At: now.Add(-2 * time.Hour)},
			// g is known only by its completion (a pipeline node).
			{Node: "g", Group: "", Wave: 0, At: now.Add(-3 * time.Hour)},
		},
		Failures: []slotinfo.Failure{{Node: "lost", Group: "db", Wave: 1, Kind: FailurePostReboot, CreateRevision: 3},
			{Node: "e", Group: "db", Wave: 1, Kind: FailureRebootCommand, CreateRevision: 4}},
		// h's slot ran out before it completed: a failure seen, not recorded.
		Inflight: []Inflight{{Node: "h", Group: "", Lease: "99", BootID: "boot-h", Since: now.Add(-time.Hour), TTLSec: 60, CreateRevision: 5}},
		// An acknowledged failure still happened within the window.
		Ack: &Ack{Revision: 3},
	}
	c := handCount(f, records, []Parsed{slotOf("d", "db", 1, now.Add(-5*time.Minute))}, r)
	c.View.Holds = []policy.Override{{Node: "held"}}
	got := map[string]string{}
	nodes := Progress(c)
	for _, n := range nodes {
		got[n.Node] = n.Progress
	}
	want := map[string]string{"a": ProgressUpToDate, "b": ProgressNeedReboot, "c": ProgressWaiting, "d": ProgressDown, "e": ProgressDone,
		"f": ProgressWaiting, "g": ProgressDone, "h": ProgressUnknown, "held": ProgressWaiting, "lost": ProgressUnknown}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("progress\n got %v\nwant %v", got, want)
	}
	for _, n := range nodes {
		switch n.Node {
		case "held":
			if n.Hold == nil {
				t.Error("the held node's hold is not named")
			}
		case "e":
			if len(n.Failures) != 1 || n.Failures[0].Kind != FailureRebootCommand || n.Done == nil || n.Record == nil {
				t.Errorf("e: failures %+v done %v record %v", n.Failures, n.Done, n.Record)
			}
		case "lost":
			if len(n.Failures) != 1 || n.Group != "db" || n.Wave != 1 {
				t.Errorf("lost: the acknowledged failure, its group and wave: %+v", n)
			}
		}
	}
	wantTally := []slotinfo.GroupProgress{
		{Wave: 0, Group: "", Nodes: 4, NeedReboot: 1, Done: 1, Failed: 1},
		{Wave: 1, Group: "db", Nodes: 6, NeedReboot: 3, Waiting: 3, Down: 1, Done: 1, Failed: 2},
	}
	if got := Tally(nodes); !reflect.DeepEqual(got, wantTally) {
		t.Fatalf("tally\n got %+v\nwant %+v", got, wantTally)
	}
}
