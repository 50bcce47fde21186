package slot

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// The index (docs/scaling.md): keys without values that a node's
// publication writes beside its health record, on the record's lease and
// in the record's transaction, so that what a decision needs of the fleet
// can be counted with count-only ranges instead of reading every record.
//
//	<ns>index/member/<node>   the node publishes a record (always)
//	<ns>index/up/<node>       ... and its state is not rebooting
//
// A record without its member key was written by a version that keeps no
// index: a reader that finds fewer member keys than records reads the
// records instead (Summary).

// IndexDir is <ns>index/.
func IndexDir(ns string) string { return ns + "index/" }

// MemberDir and UpDir are the index's two sets.
func MemberDir(ns string) string { return IndexDir(ns) + "member/" }

// UpDir holds the nodes whose record says they are not rebooting.
func UpDir(ns string) string { return IndexDir(ns) + "up/" }

// IndexOps are the index's writes for node's record in state, on lease: to
// go into the record's own transaction.
func IndexOps(ns, node, state string, lease clientv3.LeaseID) []clientv3.Op {
	ops := []clientv3.Op{clientv3.OpPut(MemberDir(ns)+node, "", clientv3.WithLease(lease))}
	if state == policy.StateRebooting {
		return append(ops, clientv3.OpDelete(UpDir(ns)+node))
	}
	return append(ops, clientv3.OpPut(UpDir(ns)+node, "", clientv3.WithLease(lease)))
}

// Summary reads what the built-in policies and the health script's
// CLUSTER_SIZE need (policy.Summary) for self with these fallback nodes, in
// two transactions whose size does not grow with the fleet: count-only
// ranges of the records and of the index, the slots (at most the nodes
// down), and one key per slot and per fallback node. full is true when some
// records are not indexed (an older version publishes them): then the
// records themselves were read, as before the index.
func Summary(ctx context.Context, c *clientv3.Client, ns, self string, fallbacks []string, now time.Time) (s policy.Summary, full bool, err error) {
	countOnly := clientv3.WithCountOnly()
	ops := []clientv3.Op{
		clientv3.OpGet(RecordsDir(ns), clientv3.WithPrefix(), countOnly),
		clientv3.OpGet(MemberDir(ns), clientv3.WithPrefix(), countOnly),
		clientv3.OpGet(UpDir(ns), clientv3.WithPrefix(), countOnly),
		clientv3.OpGet(Dir(ns), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(RecordKey(ns, self), countOnly),
		clientv3.OpGet(UpDir(ns)+self, countOnly),
	}
	for _, f := range fallbacks {
		ops = append(ops, clientv3.OpGet(UpDir(ns)+f, countOnly))
	}
	resp, err := c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return s, false, err
	}
	count := func(i int) int64 { return resp.Responses[i].GetResponseRange().Count }
	records, members, up := count(0), count(1), count(2)
	rev := resp.Header.Revision
	if members < records {
		return summaryOfView(ctx, c, ns, self, fallbacks, now, rev)
	}
	slotted := map[string]bool{}
	var slots []string
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		n := strings.TrimPrefix(string(kv.Key), Dir(ns))
		if !slotted[n] {
			slotted[n] = true
			slots = append(slots, n)
		}
	}
	sort.Strings(slots)
	selfRecord, selfUp := count(4) > 0, count(5) > 0
	// Per slot: has it a record (a member anyway), is it up (then not
	// healthy all the same: it holds a slot). At the first read's revision.
	var per []clientv3.Op
	for _, n := range slots {
		per = append(per, clientv3.OpGet(RecordKey(ns, n), countOnly, clientv3.WithRev(rev)),
			clientv3.OpGet(UpDir(ns)+n, countOnly, clientv3.WithRev(rev)))
	}
	var slotRecord, slotUp []bool
	if len(per) > 0 {
		r2, err := c.Txn(ctx).Then(per...).Commit()
		if err != nil {
			return s, false, err
		}
		for i := range slots {
			slotRecord = append(slotRecord, r2.Responses[2*i].GetResponseRange().Count > 0)
			slotUp = append(slotUp, r2.Responses[2*i+1].GetResponseRange().Count > 0)
		}
	}
	s = policy.Summary{ClusterSize: int(records), HealthyOthers: int(up), FallbackUp: []string{}, ReadAt: now.UTC()}
	if !selfRecord {
		s.ClusterSize++ // self is a member whatever it published
	}
	if selfUp {
		s.HealthyOthers--
	}
	for i, n := range slots {
		if !slotRecord[i] && n != self {
			s.ClusterSize++ // a member by its slot alone
		}
		if slotUp[i] && n != self {
			s.HealthyOthers-- // up by its record, down by its slot
		}
	}
	for i, f := range fallbacks {
		if f != self && count(6+i) > 0 && !slotted[f] {
			s.FallbackUp = append(s.FallbackUp, f)
		}
	}
	sort.Strings(s.FallbackUp)
	return s, false, nil
}

// summaryOps are the reads of a Summary for self with these fallback
// nodes, given the nodes that hold slots (read before): count-only ranges
// and single keys, for one transaction with other reads (the admission's
// count). parseSummary turns their responses into the Summary.
// rev, when not 0, reads them at that revision.
func summaryOps(ns, self string, fallbacks, slots []string, rev int64) []clientv3.Op {
	countOnly, at := clientv3.WithCountOnly(), clientv3.WithRev(rev)
	ops := []clientv3.Op{
		clientv3.OpGet(RecordsDir(ns), clientv3.WithPrefix(), countOnly, at),
		clientv3.OpGet(MemberDir(ns), clientv3.WithPrefix(), countOnly, at),
		clientv3.OpGet(UpDir(ns), clientv3.WithPrefix(), countOnly, at),
		clientv3.OpGet(RecordKey(ns, self), countOnly, at),
		clientv3.OpGet(UpDir(ns)+self, countOnly, at),
	}
	for _, f := range fallbacks {
		ops = append(ops, clientv3.OpGet(UpDir(ns)+f, countOnly, at))
	}
	for _, n := range slots {
		ops = append(ops, clientv3.OpGet(RecordKey(ns, n), countOnly, at), clientv3.OpGet(UpDir(ns)+n, countOnly, at))
	}
	return ops
}

// parseSummary is the Summary of summaryOps' responses. indexed is false
// when some records carry no index (an older version's): the summary must
// then be read from the records (summaryOfView).
func parseSummary(resps []*etcdserverpb.ResponseOp, self string, fallbacks, slots []string, now time.Time) (s policy.Summary, indexed bool) {
	count := func(i int) int64 { return resps[i].GetResponseRange().Count }
	records, members, up := count(0), count(1), count(2)
	s = policy.Summary{ClusterSize: int(records), HealthyOthers: int(up), FallbackUp: []string{}, ReadAt: now.UTC()}
	if count(3) == 0 {
		s.ClusterSize++ // self is a member whatever it published
	}
	if count(4) > 0 {
		s.HealthyOthers--
	}
	slotted := map[string]bool{}
	per := 5 + len(fallbacks)
	for i, n := range slots {
		slotted[n] = true
		if n == self {
			continue
		}
		if count(per+2*i) == 0 {
			s.ClusterSize++ // a member by its slot alone
		}
		if count(per+2*i+1) > 0 {
			s.HealthyOthers-- // up by its record, down by its slot
		}
	}
	for i, f := range fallbacks {
		if f != self && count(5+i) > 0 && !slotted[f] {
			s.FallbackUp = append(s.FallbackUp, f)
		}
	}
	sort.Strings(s.FallbackUp)
	return s, members >= records
}

// summaryOfView reads the records and slots (at rev) and summarises them:
// some records carry no index.
func summaryOfView(ctx context.Context, c *clientv3.Client, ns, self string, fallbacks []string, now time.Time, rev int64) (policy.Summary, bool, error) {
	resp, err := c.Txn(ctx).Then(
		clientv3.OpGet(RecordsDir(ns), clientv3.WithPrefix(), clientv3.WithRev(rev)),
		clientv3.OpGet(Dir(ns), clientv3.WithPrefix(), clientv3.WithRev(rev)),
	).Commit()
	if err != nil {
		return policy.Summary{}, true, err
	}
	v := policy.View{Nodes: []policy.NodeRecord{}, Rebooting: []policy.Slot{}, ReadAt: now.UTC()}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var rec policy.NodeRecord
		if json.Unmarshal(kv.Value, &rec) != nil {
			continue // unreadable: the node counts as not healthy
		}
		rec.Node = strings.TrimPrefix(string(kv.Key), RecordsDir(ns))
		v.Nodes = append(v.Nodes, rec)
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		v.Rebooting = append(v.Rebooting, Parse(ns, string(kv.Key), kv.Value, kv.Lease, kv.ModRevision).Policy())
	}
	return v.Summarize(self, fallbacks), true, nil
}
