package lock

import (
	"context"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

// A waiter's read of the line does not grow with the line: it reads its
// max_holders nearest predecessors, not everybody ahead (a line of 10,000
// nodes waiting after a kernel update, each re-reading every Recheck). With
// entries of nested group lines in between, it reads on until it has them.
func TestWaiterReadIsFlat(t *testing.T) {
	for _, holders := range []int{1, 3} {
		t.Run(fmt.Sprintf("max_holders %d", holders), func(t *testing.T) {
			ctx := context.Background()
			admin := testsupport.NewClient(t, embedded.Endpoint)
			c, kv := testsupport.SizingClient(t, embedded.Endpoint)
			key := fmt.Sprintf("/t/flat%d/lock", holders)
			t.Cleanup(func() { _, _ = admin.Delete(context.Background(), "/t/flat", clientv3.WithPrefix()) })
			lease, err := admin.Grant(ctx, 60)
			if err != nil {
				t.Fatal(err)
			}
			ann := fmt.Sprintf(`{"node":"x","max_holders":%d,"purpose":"a long enough annotation to count"}`, holders)
			line := func(n int) {
				for i := range n {
					if _, err := admin.Put(ctx, fmt.Sprintf("%s/%x", key, 1000000+int64(lease.ID)+int64(i)), ann, clientv3.WithLease(lease.ID)); err != nil {
						t.Fatal(err)
					}
					// An entry of a group line nested under this key, in between.
					if i%7 == 0 {
						if _, err := admin.Put(ctx, fmt.Sprintf("%s/g/%x", key, 2000000+int64(i)), ann, clientv3.WithLease(lease.ID)); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			read := func() (aheadInfo, int) {
				t.Helper()
				mine := fmt.Sprintf("%s/%x", key, 9000000+len(key))
				r, err := admin.Put(ctx, mine, ann, clientv3.WithLease(lease.ID))
				if err != nil {
					t.Fatal(err)
				}
				defer admin.Delete(ctx, mine)
				o := opts(key, "me")
				o.MaxHolders = holders
				kv.Reset()
				a, err := entriesAhead(ctx, c, &o, mine, r.Header.Revision)
				if err != nil {
					t.Fatal(err)
				}
				return a, kv.Bytes()
			}
			line(20)
			a, small := read()
			if len(a.near) != holders || a.fewer {
				t.Fatalf("20 ahead: near %d, fewer %v; want %d, false", len(a.near), a.fewer, holders)
			}
			line(600)
			a, big := read()
			if len(a.near) != holders || a.fewer {
				t.Fatalf("620 ahead: near %d, fewer %v; want %d, false", len(a.near), a.fewer, holders)
			}
			if big > small+64 {
				t.Fatalf("the waiter's read grew from %d to %d bytes with 30 times the line", small, big)
			}
		})
	}
}
