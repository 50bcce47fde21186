package slot

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// The annotation's version is the protocol's.
func TestOneProtocolVersion(t *testing.T) {
	if lock.ProtocolVersion != policy.ProtocolVersion {
		t.Errorf("lock.ProtocolVersion %d, policy.ProtocolVersion %d: one protocol, one number", lock.ProtocolVersion, policy.ProtocolVersion)
	}
}

// During an upgrade two versions share a lock. Seats, slots and records a
// newer version wrote, with a higher "v" and fields this one does not know,
// are read and counted; values this version cannot decode count on the safe
// side: a seat allows one holder, a slot counts against every lock and
// group, a record's node is not healthy (docs/cluster-protocol.md, "Versions").
func TestCountAcrossVersions(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	ns := "/t/count-versions/"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Cleanup(func() { _, _ = c.Delete(context.Background(), ns, clientv3.WithPrefix()) })
	put := func(key, value string) {
		t.Helper()
		if _, err := c.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}
	f := Fleet{Client: c, NS: ns, Lock: ns + "lock", Node: "a", BootID: "boot-a", Rules: policy.Rules{MaxHolders: config.Count(5)}, TTL: time.Minute, RPCTimeout: 5 * time.Second}
	since := `"since":"2026-01-01T00:00:00Z"`

	t.Run("newer values are read and counted", func(t *testing.T) {
		put(ns+"lock/1", `{"v":2,"node":"b","boot_id":"boot-b","max_holders":4,"queued_at":"2026-01-01T00:00:00Z","priority":"high"}`)
		put(ns+"rebooting/c", `{"v":2,"node":"c","lock":"`+ns+`lock","group":"",`+since+`,"boot_id":"boot-c","max_holders":3,"drain":{"pods":12}}`)
		put(ns+"nodes/d", `{"v":7,"node":"d","state":"idle","lock":"`+ns+`lock","boot_id":"boot-d","labels":{"rack":"r1"}}`)
		n, err := f.CountAll(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Nodes(); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Errorf("present %v, want a, b (seat), c (slot)", got)
		}
		if m := f.Decide(n).Rules.MaxHolders; m != 3 {
			t.Errorf("max_holders %d, want 3: the newer slot's", m)
		}
		if !n.View.Healthy("d") || n.View.Healthy("c") {
			t.Errorf("view %+v: d healthy, c rebooting", n.View)
		}
		if n.Problem != nil {
			t.Errorf("problem: %v", n.Problem)
		}
	})
	t.Run("values this version cannot read count on the safe side", func(t *testing.T) {
		// A seat ahead whose max_holders is not a number: one holder.
		put(ns+"lock/2", `{"v":3,"node":"e","max_holders":"many"}`)
		// A slot whose since is not a time, naming another lock and group:
		// it still counts here.
		put(ns+"rebooting/f", `{"v":3,"node":"f","lock":"/elsewhere/lock","group":"g9","since":1767225600}`)
		// A record whose state is an object: its node is not healthy.
		put(ns+"nodes/g", `{"v":3,"node":"g","state":{"phase":"idle"},"lock":"`+ns+`lock"}`)
		n, err := f.Count(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if m := f.Decide(n).Rules.MaxHolders; m != 1 {
			t.Errorf("max_holders %d, want 1: an unreadable annotation allows one holder", m)
		}
		if !slices.Contains(n.Nodes(), "f") {
			t.Errorf("present %v: the unreadable slot of f must count", n.Nodes())
		}
		if n.Problem != nil {
			t.Errorf("problem %v: an unreadable slot is not evidence of another lock", n.Problem)
		}
		if n.View.Healthy("g") {
			t.Error("g's unreadable record counts it as healthy")
		}
		for _, r := range n.View.Nodes {
			if r.Node == "g" {
				t.Errorf("unreadable record in the view: %+v", r)
			}
		}
	})
}

// A pause written by a newer version is read; one this version cannot
// decode still pauses.
func TestParsePauseAcrossVersions(t *testing.T) {
	for _, tc := range []struct{ name, value, reason string }{
		{"newer, with fields this version does not know", `{"v":2,"reason":"freeze","by":"alice","since":"2026-01-01T00:00:00Z","until":"2026-01-02T00:00:00Z"}`, "freeze"},
		{"newer, since of another type", `{"v":2,"reason":"freeze","by":"alice","since":1767225600}`, "paused; the disable key holds no JSON reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ParsePause([]byte(tc.value))
			if p == nil || len(p.Reason) < len(tc.reason) || p.Reason[:len(tc.reason)] != tc.reason {
				t.Errorf("pause %+v, want reason %q", p, tc.reason)
			}
		})
	}
}
