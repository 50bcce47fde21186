package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
)

// The tests of this file check that what a cycle reports is what happened.

// A waiter whose lease expired while it waited in line (a freeze longer than
// lock_ttl_sec; here the lease is revoked, as its expiry would) says so and
// queues again: etcd did not fail, so no lock_retry / reason=etcd line.
func TestCycleRequeuedWhenWaiterLeaseLost(t *testing.T) {
	ns := nsName(t)
	c := newClient(t, embedded.Endpoint)
	n := newNode(t, embedded.Endpoint, ns, "node-a")
	key := n.cfg["lock_key"].(string)
	ctx := context.Background()
	other, err := lock.Acquire(ctx, c, lock.Options{Key: key, TTL: 60 * time.Second, Node: "node-x"})
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	done := make(chan outcome, 1)
	go func() { done <- n.step(ctx, []string{"cycle"}, nil, &stderr) }()
	eventually(t, 10*time.Second, "node-a queues for the lock", func() bool { return strings.Contains(stderr.String(), `"event":"lock_waiting"`) })
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
	eventually(t, 10*time.Second, "node-a queues again", func() bool { return strings.Count(stderr.String(), `"event":"lock_waiting"`) == 2 })
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
	select {
	case o := <-done:
		if o.code != exitcode.OK || o.str("outcome") != driver.OutcomeRebooting {
			t.Fatalf("cycle = %d %s\n%s", o.code, o.stdout, o.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the requeued cycle did not get the free lock")
	}
}
