package slot

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/testonly/testsupport"
)

func TestParse(t *testing.T) {
	const ns = "/c/"
	for _, tc := range []struct {
		name, value string
		bound       bool
		counts      bool // against lock /c/lock, group g1
	}{
		{"ours", `{"node":"a","lock":"/c/lock","group":"g1"}`, true, true},
		{"another group of our lock", `{"node":"a","lock":"/c/lock","group":"g2"}`, true, false},
		{"ungrouped fleet of our lock", `{"node":"a","lock":"/c/lock","group":""}`, true, false},
		{"another lock", `{"node":"a","lock":"/c/other","group":"g1"}`, true, false},
		{"no group", `{"node":"a","lock":"/c/lock"}`, false, true},
		{"no lock", `{"node":"a","group":"g1"}`, false, true},
		{"empty lock", `{"node":"a","lock":"","group":"g1"}`, false, true},
		{"empty object", `{}`, false, true},
		{"null", `null`, false, true},
		{"not JSON", `x`, false, true},
		{"newer version with fields this one does not know", `{"v":2,"node":"a","lock":"/c/lock","group":"g1","drain":{"by":"x"},"since":"2026-01-01T00:00:00Z"}`, true, true},
		{"newer version, another group", `{"v":9,"node":"a","lock":"/c/lock","group":"g2","labels":["x"]}`, true, false},
		// A known field this version cannot decode: the value is not
		// understood, whatever it says about its lock.
		{"a field of a type this version cannot read", `{"v":2,"node":"a","lock":"/c/lock","group":"g2","since":1767225600}`, false, true},
		{"a field of a type this version cannot read, another lock", `{"v":2,"node":"a","lock":"/c/other","group":"g1","max_holders":"2"}`, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Parse(ns, ns+"rebooting/key-node", []byte(tc.value), 7, 9)
			if p.Bound != tc.bound || p.Counts("/c/lock", "g1") != tc.counts {
				t.Errorf("bound %v counts %v, want %v %v", p.Bound, p.Counts("/c/lock", "g1"), tc.bound, tc.counts)
			}
			if p.Node != "key-node" {
				t.Errorf("node %q: the key names the node", p.Node)
			}
		})
	}
}

// Seats, slots, records and the pause are read in one transaction: a
// compaction racing with the count cannot fail it (it did when the slots
// were read in a second request at the first one's revision).
func TestCountUnderCompaction(t *testing.T) {
	c := testsupport.NewClient(t, embedded.Endpoint)
	ns := "/t/count-compaction/"
	f := Fleet{Client: c, NS: ns, Lock: ns + "lock", Node: "a", BootID: "b1", Rules: policy.Rules{MaxHolders: config.Count(1)}, TTL: time.Minute, RPCTimeout: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r, err := c.Put(ctx, fmt.Sprintf("%srebooting/x%d", ns, i%5), `{}`)
			if err == nil {
				_, _ = c.Compact(ctx, r.Header.Revision)
			}
		}
	}()
	for i := range 300 {
		if _, err := f.Count(ctx, ""); err != nil {
			t.Errorf("count %d under compaction: %v", i, err)
			break
		}
	}
	close(stop)
	wg.Wait()
	_, _ = c.Delete(ctx, ns, clientv3.WithPrefix())
}
