package cluster

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

func statusOf(t *testing.T, n *node) protocol.RolloutStatus {
	t.Helper()
	o := n.run("status")
	var st protocol.StatusResult
	if err := json.Unmarshal([]byte(o.stdout), &st); err != nil || o.code != exitcode.OK || st.Rollout == nil {
		t.Fatalf("status = %d %s (%v)", o.code, o.stdout, err)
	}
	return *st.Rollout
}

func reportOf(t *testing.T, n *node) map[string]protocol.ReportRow {
	t.Helper()
	o := n.run("report")
	var r protocol.ReportResult
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil || o.code != exitcode.OK || r.ReadAt.IsZero() {
		t.Fatalf("report = %d %s (%v)", o.code, o.stdout, err)
	}
	rows := map[string]protocol.ReportRow{}
	for _, row := range r.Nodes {
		rows[row.Node] = row
	}
	return rows
}

// Status counts the nodes per wave and group and estimates the end from the
// measured reboots; the report has a row per node with its record's fields,
// its last reboot and its failures. Neither writes anything.
func TestStatusProgressAndReport(t *testing.T) {
	ns := nsName(t)
	a := newNode(t, embedded.Endpoint, ns, "node-a")
	a.boot = "boot-a-1"
	b := newNode(t, embedded.Endpoint, ns, "node-b")
	c := newNode(t, embedded.Endpoint, ns, "node-c")
	c.cfg["group"] = "db"
	c.cfg["rollout"] = map[string]any{"wave": 1}

	// node-a takes its slot: down; nothing measured yet.
	if o := a.run("cycle"); o.code != exitcode.OK || o.str("outcome") != protocol.OutcomeRebooting {
		t.Fatalf("cycle = %d %s", o.code, o.stdout)
	}
	ro := statusOf(t, a)
	if len(ro.Progress) != 1 || ro.Progress[0] != (slotinfo.GroupProgress{Nodes: 1, Down: 1}) {
		t.Fatalf("progress %+v, want node-a down", ro.Progress)
	}
	if ro.ETA.At != nil || !strings.Contains(ro.ETA.Unknown, "no reboot duration measured") || ro.ETA.Remaining != 1 || ro.ETA.Down != 1 {
		t.Fatalf("eta %+v, want unknown: nothing measured", ro.ETA)
	}

	// node-a is back: its completion is recorded with its duration.
	a.boot = "boot-a-2"
	if o := a.run("complete"); o.code != exitcode.OK || o.json["freed"] != true {
		t.Fatalf("complete = %d %s", o.code, o.stdout)
	}
	a.publishAs(t, machineRoot(t), protocol.PublishArgs{State: policy.StateIdle})
	b.publishAs(t, nil, protocol.PublishArgs{State: policy.StateBlocked, RebootRequired: true, Detail: "window: closed, opens 02:00", RequiredSince: time.Now().Add(-time.Hour)})
	c.publishAs(t, nil, protocol.PublishArgs{State: policy.StateNeedsReboot, RebootRequired: true})
	ro = statusOf(t, a)
	want := []slotinfo.GroupProgress{{Wave: 0, Nodes: 2, NeedReboot: 1, Waiting: 1, Done: 1}, {Wave: 1, Group: "db", Nodes: 1, NeedReboot: 1}}
	if len(ro.Progress) != 2 || ro.Progress[0] != want[0] || ro.Progress[1] != want[1] {
		t.Fatalf("progress %+v, want %+v", ro.Progress, want)
	}
	e := ro.ETA
	if e.At == nil || e.Unknown != "" || e.Samples != 1 || e.Remaining != 2 || len(e.Groups) != 2 || e.Groups[1] != (slotinfo.GroupPlan{Group: "db", Remaining: 1, MaxHolders: 1}) || e.Ignores == "" {
		t.Fatalf("eta %+v: want an estimate from 1 sample for 2 reboots in 2 groups", e)
	}
	// node-c waits for wave 0 (node-b): two reboots one after the other.
	if got, want := time.Until(*e.At), 2*time.Duration(e.MedianRebootMS)*time.Millisecond; got > want+5*time.Second || got < want-5*time.Second {
		t.Errorf("eta in %v, want about 2 × the median %d ms", got, e.MedianRebootMS)
	}

	if o := c.run("failure", "--kind", "reboot_command", "--detail", "systemctl reboot exited 1", "--since", time.Now().UTC().Format(time.RFC3339)); o.code != exitcode.OK {
		t.Fatalf("failure = %d %s", o.code, o.stdout)
	}
	cl := testsupport.NewClient(t, embedded.Endpoint)
	rev := func() int64 {
		resp, err := cl.Get(t.Context(), "/t/"+ns+"/")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	before := rev()
	rows := reportOf(t, a)
	statusOf(t, a)
	if after := rev(); after != before {
		t.Errorf("status and report wrote to etcd: revision %d → %d", before, after)
	}
	if len(rows) != 3 {
		t.Fatalf("report rows %v, want node-a, node-b, node-c", rows)
	}
	ra, rb, rc := rows["node-a"], rows["node-b"], rows["node-c"]
	if ra.Progress != "done" || ra.LastReboot == nil || ra.LastRebootSec == nil || ra.KernelInstalled != "6.1.0-28-amd64" || ra.RebootRequired == nil || *ra.RebootRequired {
		t.Errorf("node-a %+v: want done, its last reboot, its kernels", ra)
	}
	if rb.Progress != "waiting" || rb.State != policy.StateBlocked || rb.Reason != "window: closed, opens 02:00" || rb.NeedsRebootSince == nil || rb.LastReboot != nil {
		t.Errorf("node-b %+v: want waiting, blocked with its reason and since when", rb)
	}
	if rc.Group != "db" || rc.Wave != 1 || rc.Progress != "need_reboot" || len(rc.Failures) != 1 || rc.Failures[0] != "reboot_command" {
		t.Errorf("node-c %+v: want db, wave 1, its failure", rc)
	}
	if e := statusOf(t, a).ETA; e.At != nil || !strings.Contains(e.Unknown, "halted") {
		t.Errorf("eta %+v after the failure spent the budget: want unknown, halted", e)
	}
}
