package slot

import (
	"context"
	"encoding/json"
	"slices"
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
// can be counted instead of reading every record.
//
//	<ns>index/member/<node>   the node publishes a record (always)
//	<ns>index/down/<node>     ... and its state is rebooting
//
// The healthy nodes are the records less the down keys and the slots: the
// down keys are as few as the nodes in their reboots, so a summary walks
// two ranges of the fleet's size (the records' and the members' counts),
// not three. A record without its member key was written by a version that
// keeps no index (0.1.0): a reader that finds fewer member keys than
// records reads the records instead (Summary).

// IndexDir is <ns>index/.
func IndexDir(ns string) string { return ns + "index/" }

// MemberDir and DownDir are the index's two sets.
func MemberDir(ns string) string { return IndexDir(ns) + "member/" }

// DownDir holds the nodes whose record says they are rebooting.
func DownDir(ns string) string { return IndexDir(ns) + "down/" }

// IndexOps are the index's writes for node's record in state, on lease: to
// go into the record's own transaction.
func IndexOps(ns, node, state string, lease clientv3.LeaseID) []clientv3.Op {
	ops := []clientv3.Op{clientv3.OpPut(MemberDir(ns)+node, "", clientv3.WithLease(lease))}
	if state == policy.StateRebooting {
		return append(ops, clientv3.OpPut(DownDir(ns)+node, "", clientv3.WithLease(lease)))
	}
	return append(ops, clientv3.OpDelete(DownDir(ns)+node))
}

// Summary reads what the built-in policies and the health script's
// CLUSTER_SIZE need (policy.Summary) for self with these fallback nodes, in
// reads whose size does not grow with the fleet: the slots' names, then at
// one revision the records' and members' counts, the down keys, and one
// key per slot and per fallback node (summaryOps). full is true when some
// records are not indexed (an older version publishes them): then the
// records themselves were read, as before the index.
func Summary(ctx context.Context, c *clientv3.Client, ns, self string, fallbacks []string, now time.Time) (s policy.Summary, full bool, err error) {
	keysOnly := clientv3.WithKeysOnly()
	resp, err := c.Get(ctx, Dir(ns), clientv3.WithPrefix(), keysOnly)
	if err != nil {
		return s, false, err
	}
	names := slotNamesOf(ns, resp.Kvs)
	ops := append(summaryOps(ns, self, fallbacks, names, 0, true), clientv3.OpGet(Dir(ns), clientv3.WithPrefix(), keysOnly))
	tresp, err := c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return s, false, err
	}
	rev, sums := tresp.Header.Revision, tresp.Responses[:len(ops)-1]
	if found := slotNamesOf(ns, tresp.Responses[len(ops)-1].GetResponseRange().Kvs); !slices.Equal(found, names) {
		// A slot was taken (or freed) in between: its reads again, at
		// the summary's revision.
		names = found
		if tresp, err = c.Txn(ctx).Then(summaryOps(ns, self, fallbacks, names, rev, true)...).Commit(); err != nil {
			return s, false, err
		}
		sums = tresp.Responses
	}
	s, indexed := parseSummary(sums, ns, self, fallbacks, names, now, true)
	if !indexed {
		return summaryOfView(ctx, c, ns, self, fallbacks, now, rev)
	}
	return s, false, nil
}

// summaryOps are the reads of a Summary for self with these fallback
// nodes, given the nodes that hold slots (read before): the records'
// count, the down keys, single keys and, when checked, the members' count
// (a second count-only range of the fleet's size), for one transaction
// with other reads (the admission's count). parseSummary turns their
// responses into the Summary. rev, when not 0, reads them at that
// revision.
//
// The members' count only tells whether every record is indexed, which
// the healthy counts depend on, not the cluster's size: an admission
// without a policy (whose summary gives only the health script's
// CLUSTER_SIZE) leaves it out.
func summaryOps(ns, self string, fallbacks, slots []string, rev int64, checked bool) []clientv3.Op {
	countOnly, at := clientv3.WithCountOnly(), clientv3.WithRev(rev)
	ops := []clientv3.Op{
		clientv3.OpGet(RecordsDir(ns), clientv3.WithPrefix(), countOnly, at),
		clientv3.OpGet(DownDir(ns), clientv3.WithPrefix(), clientv3.WithKeysOnly(), at),
		clientv3.OpGet(RecordKey(ns, self), countOnly, at),
	}
	for _, n := range append(slices.Clip(fallbacks), slots...) {
		ops = append(ops, clientv3.OpGet(RecordKey(ns, n), countOnly, at))
	}
	if checked {
		ops = append(ops, clientv3.OpGet(MemberDir(ns), clientv3.WithPrefix(), countOnly, at))
	}
	return ops
}

// parseSummary is the Summary of summaryOps' responses. indexed is false
// when some records carry no index (an older version's): the summary must
// then be read from the records (summaryOfView). Without the members'
// count (checked false) indexed is true: the cluster's size is right, its
// healthy counts may count an unindexed record that is down as healthy,
// and nothing may decide on them.
func parseSummary(resps []*etcdserverpb.ResponseOp, ns, self string, fallbacks, slots []string, now time.Time, checked bool) (s policy.Summary, indexed bool) {
	count := func(i int) int64 { return resps[i].GetResponseRange().Count }
	records := count(0)
	down := map[string]bool{}
	for _, kv := range resps[1].GetResponseRange().Kvs {
		down[strings.TrimPrefix(string(kv.Key), DownDir(ns))] = true
	}
	slotted := map[string]bool{}
	for _, n := range slots {
		slotted[n] = true
	}
	// up: a record that is not down. A down key outlives its record only
	// when the record was deleted by hand: one healthy node fewer, the
	// safe side.
	up := func(i int, n string) bool { return count(i) > 0 && !down[n] }
	s = policy.Summary{ClusterSize: int(records), HealthyOthers: int(records) - len(down), FallbackUp: []string{}, ReadAt: now.UTC()}
	if count(2) == 0 {
		s.ClusterSize++ // self is a member whatever it published
	}
	if up(2, self) {
		s.HealthyOthers--
	}
	for i, f := range fallbacks {
		if f != self && up(3+i, f) && !slotted[f] {
			s.FallbackUp = append(s.FallbackUp, f)
		}
	}
	per := 3 + len(fallbacks)
	for i, n := range slots {
		if n == self {
			continue
		}
		if count(per+i) == 0 {
			s.ClusterSize++ // a member by its slot alone
		}
		if up(per+i, n) {
			s.HealthyOthers-- // up by its record, down by its slot
		}
	}
	sort.Strings(s.FallbackUp)
	if !checked {
		return s, true
	}
	return s, count(per+len(slots)) >= records
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
