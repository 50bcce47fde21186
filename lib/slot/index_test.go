package slot

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// The summary from the index is the summary of the whole view, for any
// fleet: members with and without records, up or rebooting, slots with and
// without records, self with or without its own, fallback nodes in every
// state. A fleet with a record an older version wrote (no index) is read in
// full, and gives the same answer.
func TestSummaryIsTheViews(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	for round := range 40 {
		if _, err := r.c.Delete(ctx, r.ns, clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
		lease, err := r.c.Grant(ctx, 600)
		if err != nil {
			t.Fatal(err)
		}
		nodes := 1 + rnd.IntN(12)
		legacy := round%5 == 4 // one record without its index
		var fallbacks []string
		for i := range nodes {
			n := fmt.Sprintf("n%d", i)
			if rnd.IntN(3) == 0 {
				fallbacks = append(fallbacks, n)
			}
			if rnd.IntN(5) > 0 { // a record
				state := policy.StateIdle
				if rnd.IntN(3) == 0 {
					state = policy.StateRebooting
				}
				b, _ := json.Marshal(policy.NodeRecord{Node: n, State: state, Lock: r.ns + "lock", V: policy.ProtocolVersion})
				ops := []clientv3.Op{clientv3.OpPut(RecordKey(r.ns, n), string(b), clientv3.WithLease(lease.ID))}
				if !(legacy && i == 0) {
					ops = append(ops, IndexOps(r.ns, n, state, lease.ID)...)
				}
				if _, err := r.c.Txn(ctx).Then(ops...).Commit(); err != nil {
					t.Fatal(err)
				}
			}
			if rnd.IntN(4) == 0 { // a slot
				r.put(Key(r.ns, n), fmt.Sprintf(`{"node":%q,"lock":%q,"group":""}`, n, r.ns+"lock"), 0)
			}
		}
		fallbacks = append(fallbacks, "gone") // a fallback node nothing knows
		self := fmt.Sprintf("n%d", rnd.IntN(nodes+1))
		got, full, err := Summary(ctx, r.c, r.ns, self, fallbacks, now)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := summaryOfView(ctx, r.c, r.ns, self, fallbacks, now, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d (self %s, fallbacks %v): index summary %+v, the view's %+v", round, self, fallbacks, got, want)
		}
		if full != (legacy && r.exists(RecordKey(r.ns, "n0"))) {
			t.Errorf("round %d: read in full %v, legacy record %v", round, full, legacy)
		}
	}
}

// The summary's read does not grow with the fleet: whatever the number of
// records, etcd's answers to Summary are of the same size (count-only
// ranges, single keys, one key per slot and fallback node).
func TestSummaryReadIsFlat(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	lease, err := r.c.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	c, kv := testsupport.SizingClient(t, embedded.Endpoint)
	read := func() int {
		t.Helper()
		kv.Reset()
		if _, full, err := Summary(ctx, c, r.ns, "n0", []string{"n1", "n2"}, time.Now()); err != nil || full {
			t.Fatalf("summary: full %v, %v", full, err)
		}
		return kv.Bytes()
	}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			n := fmt.Sprintf("n%d", i)
			b, _ := json.Marshal(policy.NodeRecord{Node: n, State: policy.StateIdle, V: policy.ProtocolVersion, Reason: "a reason long enough to matter"})
			ops := append([]clientv3.Op{clientv3.OpPut(RecordKey(r.ns, n), string(b), clientv3.WithLease(lease.ID))}, IndexOps(r.ns, n, policy.StateIdle, lease.ID)...)
			if _, err := r.c.Txn(ctx).Then(ops...).Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(0, 10)
	small := read()
	publish(10, 1000)
	if big := read(); big > small+16 {
		t.Fatalf("the summary's answers grew from %d to %d bytes with 100 times the records", small, big)
	}
}
