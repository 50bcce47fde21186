package slot

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// The index (docs/scaling.md): keys without values that a node's
// publication writes beside its health record, on the record's lease (the
// first two in the record's transaction, the group key in a request of its
// own: GroupOp), so that what a decision needs of the fleet can be counted
// instead of reading every record.
//
//	<ns>index/member/<node>          the node publishes a record (always)
//	<ns>index/down/<node>            ... and its state is rebooting
//	<ns>index/group/<group>/<node>   ... and it is of group ("" for none)
//	<ns>index/busy/<ww>/<node>       ... and it is busy (Busy) in wave ww
//
// The healthy nodes are the records less the down keys and the slots: the
// down keys are as few as the nodes in their reboots, so a summary walks
// two ranges of the fleet's size (the records' and the members' counts),
// not three. A record without its member key was written by a version that
// keeps no index (0.1.0): a reader that finds fewer member keys than
// records reads the records instead (Summary).

// IndexDir is <ns>index/.
func IndexDir(ns string) string { return ns + "index/" }

// MemberDir holds a key per node that publishes a record.
func MemberDir(ns string) string { return IndexDir(ns) + "member/" }

// DownDir holds the nodes whose record says they are rebooting.
func DownDir(ns string) string { return IndexDir(ns) + "down/" }

// GroupsDir holds each node's group key (GroupDir); GroupDir(ns, group)
// the keys of group's nodes, which a count-only range counts: a percentage
// resolves against it without reading the records (Fleet.fleetCounts). Group
// names are letters, digits, '.', '_' and '-', so no group's directory
// holds another's.
func GroupsDir(ns string) string { return IndexDir(ns) + "group/" }

// GroupDir holds the keys of group's nodes.
func GroupDir(ns, group string) string { return GroupsDir(ns) + group + "/" }

// IndexOps are the index's writes for node's record in state, on lease: to
// go into the record's own transaction.
func IndexOps(ns, node, state string, lease clientv3.LeaseID) []clientv3.Op {
	ops := []clientv3.Op{clientv3.OpPut(MemberDir(ns)+node, "", clientv3.WithLease(lease))}
	if state == policy.StateRebooting {
		return append(ops, clientv3.OpPut(DownDir(ns)+node, "", clientv3.WithLease(lease)))
	}
	return append(ops, clientv3.OpDelete(DownDir(ns)+node))
}

// BusyDir holds a key per node whose record is busy (Busy), by wave: a
// node of a later wave finds the lower waves' busy nodes with a keys-only
// range bounded by what they still have pending (Fleet.lowerWaves), not by
// the fleet. The key is written in the record's own transaction (BusyOps),
// so a busy record of this version never lacks it; a key can outlive its
// busy state (a wave changed after an unreadable record), which costs the
// reader one record's read: the reader decides on the record, never on the
// key.
func BusyDir(ns string) string { return IndexDir(ns) + "busy/" }

// BusyWaveDir holds the busy keys of wave; the waves sort by number.
func BusyWaveDir(ns string, wave int) string { return fmt.Sprintf("%s%02d/", BusyDir(ns), wave) }

// BusyKey is node's busy key in wave.
func BusyKey(ns string, wave int, node string) string { return BusyWaveDir(ns, wave) + node }

// Busy reports whether rec holds the later waves back: it needs its
// reboot, or is in it (rebooting, post_reboot). The waves rule's own test
// (Fleet.waves).
func Busy(rec policy.NodeRecord) bool {
	return rec.RebootRequired || rec.State == policy.StateRebooting || rec.State == policy.StatePostReboot
}

// BusyOps are the busy index's writes for rec, published on lease over
// prev (the record it replaces; nil: none, or unreadable): to go into the
// record's own transaction. The key of rec's wave while it is busy; the
// key of prev's wave deleted when prev was busy and rec is not, or is of
// another wave. A role (etcd-rbac.sh --wave) may write only its waves'
// keys: an idle record of an ungranted wave writes none, so only a busy one
// is refused, and then its whole publication (exit 7) rather than a busy
// record the index misses.
func BusyOps(ns string, rec policy.NodeRecord, prev *policy.NodeRecord, lease clientv3.LeaseID) []clientv3.Op {
	var ops []clientv3.Op
	if prev != nil && Busy(*prev) && (!Busy(rec) || prev.Wave != rec.Wave) {
		ops = append(ops, clientv3.OpDelete(BusyKey(ns, prev.Wave, rec.Node)))
	}
	if Busy(rec) {
		ops = append(ops, clientv3.OpPut(BusyKey(ns, rec.Wave, rec.Node), "", clientv3.WithLease(lease)))
	}
	return ops
}

// GroupKey is node's key in group's directory of the index.
func GroupKey(ns, group, node string) string { return GroupDir(ns, group) + node }

// GroupOp writes node's group key on lease, its record's. Publish writes it
// after the record, in a request of its own, and only when it is missing
// or on another lease (driver/cluster): a role that may not write it
// (etcd-rbac.sh before the group keys) still publishes its record, and the
// admissions with a percentage then read every record. A node that moves to
// another group deletes its key in the group it left first: a key left
// there would count the node in two groups (the reader then finds more
// group keys than records and reads every record, Fleet.fleetCounts) or, with
// its new key refused, in the wrong one.
func GroupOp(ns, group, node string, lease clientv3.LeaseID) clientv3.Op {
	return clientv3.OpPut(GroupKey(ns, group, node), "", clientv3.WithLease(lease))
}

// CountsKey holds the fleet's two counts that a summary needs, the records'
// and the members' (fleetCounts), shared by every node for a while: on a
// lease of the writer's health_publish_interval_sec, written by the first
// node whose summary finds it missing. The counts are the only part of a
// summary whose cost grows with the fleet (etcd walks its index over each
// counted range); with them shared, the fleet counts about once an interval
// instead of once per node and interval (docs/scaling.md).
//
// Only the checks before the lock and after the reboot read them
// (publish --read-summary): a node that passes them still queues, and its
// admission under the lock counts afresh in its own Count (Fleet.count), so
// counts one interval old can delay a reboot or let a node queue in vain,
// never admit one.
func CountsKey(ns string) string { return IndexDir(ns) + "counts" }

// fleetCounts is CountsKey's value: the counts at one revision.
type fleetCounts struct {
	Records  int64 `json:"records"`
	Members  int64 `json:"members"`
	Revision int64 `json:"revision"`
}

// Summary reads what the built-in policies and the health script's
// CLUSTER_SIZE need (policy.Summary) for self with these fallback nodes, in
// reads whose size does not grow with the fleet: the slots' names, then at
// one revision the records' and members' counts, the down keys, and one
// key per slot and per fallback node (summaryOps). full is true when some
// records are not indexed (an older version publishes them): then the
// records themselves were read, as before the index.
//
// share, when not 0, takes the two counts from CountsKey while it lives,
// and writes them there on a lease of share when it counted them (unless
// some records are not indexed: then every reader reads them in full, as
// before). 0 counts every time and shares nothing.
func Summary(ctx context.Context, c *clientv3.Client, ns, self string, fallbacks []string, now time.Time, share time.Duration) (s policy.Summary, full bool, err error) {
	keysOnly := clientv3.WithKeysOnly()
	first, err := c.Txn(ctx).Then(clientv3.OpGet(Dir(ns), clientv3.WithPrefix(), keysOnly), clientv3.OpGet(CountsKey(ns))).Commit()
	if err != nil {
		return s, false, err
	}
	names := slotNamesOf(ns, first.Responses[0].GetResponseRange().Kvs)
	var shared *fleetCounts
	var sharedRev int64 // CountsKey's modification revision, 0 when missing
	if kvs := first.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		sharedRev = kvs[0].ModRevision
		var fc fleetCounts
		if share > 0 && json.Unmarshal(kvs[0].Value, &fc) == nil && fc.Records >= 0 && fc.Members >= fc.Records {
			shared = &fc
		}
	}
	read := func(rev int64) []clientv3.Op {
		if shared != nil {
			return localOps(ns, self, fallbacks, names, rev, true)
		}
		return summaryOps(ns, self, fallbacks, names, rev, true)
	}
	ops := append(read(0), clientv3.OpGet(Dir(ns), clientv3.WithPrefix(), keysOnly))
	tresp, err := c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return s, false, err
	}
	rev, sums := tresp.Header.Revision, tresp.Responses[:len(ops)-1]
	if found := slotNamesOf(ns, tresp.Responses[len(ops)-1].GetResponseRange().Kvs); !slices.Equal(found, names) {
		// A slot was taken (or freed) in between: its reads again, at
		// the summary's revision.
		names = found
		if tresp, err = c.Txn(ctx).Then(read(rev)...).Commit(); err != nil {
			return s, false, err
		}
		sums = tresp.Responses
	}
	if shared != nil {
		return summaryOf(sums, shared.Records, shared.Revision, ns, self, fallbacks, names, now), false, nil
	}
	s, indexed := parseSummary(sums, ns, self, fallbacks, names, now, true)
	if !indexed {
		return summaryOfView(ctx, c, ns, self, fallbacks, now, rev)
	}
	if share > 0 {
		records, members := sums[0].GetResponseRange().Count, sums[len(sums)-1].GetResponseRange().Count
		shareCounts(ctx, c, ns, fleetCounts{Records: records, Members: members, Revision: rev}, sharedRev, share)
	}
	return s, false, nil
}

// shareCounts writes fc to CountsKey on a new lease of ttl, unless another
// node wrote it since it was read (at modification revision seen, 0 when
// missing). It is a cache: a failure leaves the next reader to count.
func shareCounts(ctx context.Context, c *clientv3.Client, ns string, fc fleetCounts, seen int64, ttl time.Duration) {
	secs := int64((ttl + time.Second - 1) / time.Second)
	lease, err := c.Grant(ctx, secs)
	if err != nil {
		return
	}
	b, _ := json.Marshal(fc)
	key := CountsKey(ns)
	resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", seen)).
		Then(clientv3.OpPut(key, string(b), clientv3.WithLease(lease.ID))).Commit()
	if err != nil || !resp.Succeeded {
		// Another node shared its counts first (or the write failed): the
		// lease carries nothing.
		_, _ = c.Revoke(ctx, lease.ID)
	}
}

// summaryOps are the reads of a Summary for self with these fallback
// nodes, given the nodes that hold slots (read before): the records'
// count, the local reads (localOps) and, when checked, the members' count
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
	ops := append([]clientv3.Op{clientv3.OpGet(RecordsDir(ns), clientv3.WithPrefix(), countOnly, at)}, localOps(ns, self, fallbacks, slots, rev, false)...)
	if checked {
		ops = append(ops, clientv3.OpGet(MemberDir(ns), clientv3.WithPrefix(), countOnly, at))
	}
	return ops
}

// localOps are the summary's reads that do not grow with the fleet: the
// down keys, then self's record, each fallback node's and each slot
// holder's, in that order (summaryOf): single keys, count-only, or keys
// only when the records were counted earlier (shared counts) and their
// create revisions tell whether the count includes them.
func localOps(ns, self string, fallbacks, slots []string, rev int64, keys bool) []clientv3.Op {
	one, at := clientv3.WithCountOnly(), clientv3.WithRev(rev)
	if keys {
		one = clientv3.WithKeysOnly()
	}
	ops := []clientv3.Op{
		clientv3.OpGet(DownDir(ns), clientv3.WithPrefix(), clientv3.WithKeysOnly(), at),
		clientv3.OpGet(RecordKey(ns, self), one, at),
	}
	for _, n := range append(slices.Clip(fallbacks), slots...) {
		ops = append(ops, clientv3.OpGet(RecordKey(ns, n), one, at))
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
	records := resps[0].GetResponseRange().Count
	local := resps[1 : 3+len(fallbacks)+len(slots)]
	s = summaryOf(local, records, 0, ns, self, fallbacks, slots, now)
	if !checked {
		return s, true
	}
	return s, resps[3+len(fallbacks)+len(slots)].GetResponseRange().Count >= records
}

// summaryOf is the Summary of localOps' responses with this number of
// records, counted at revision countedAt (0: at the responses' own, as
// summaryOps reads them).
func summaryOf(local []*etcdserverpb.ResponseOp, records, countedAt int64, ns, self string, fallbacks, slots []string, now time.Time) policy.Summary {
	exists := func(i int) bool { return local[i].GetResponseRange().Count > 0 }
	// counted: the record is one of the records counted. A record
	// created after shared counts were taken is not.
	counted := func(i int) bool {
		if !exists(i) || countedAt == 0 {
			return exists(i)
		}
		kvs := local[i].GetResponseRange().Kvs
		return len(kvs) > 0 && kvs[0].CreateRevision <= countedAt
	}
	down := map[string]bool{}
	for _, kv := range local[0].GetResponseRange().Kvs {
		down[strings.TrimPrefix(string(kv.Key), DownDir(ns))] = true
	}
	slotted := map[string]bool{}
	for _, n := range slots {
		slotted[n] = true
	}
	// up: a record that is not down. A down key outlives its record only
	// when the record was deleted by hand: one healthy node fewer, the
	// safe side.
	up := func(i int, n string) bool { return exists(i) && !down[n] }
	s := policy.Summary{ClusterSize: int(records), HealthyOthers: int(records) - len(down), FallbackUp: []string{}, ReadAt: now.UTC()}
	if !counted(1) {
		s.ClusterSize++ // self is a member whatever it published
	} else if !down[self] {
		s.HealthyOthers--
	}
	for i, f := range fallbacks {
		if f != self && up(2+i, f) && !slotted[f] {
			s.FallbackUp = append(s.FallbackUp, f)
		}
	}
	per := 2 + len(fallbacks)
	for i, n := range slots {
		if n == self {
			continue
		}
		if !counted(per + i) {
			s.ClusterSize++ // a member by its slot alone
		} else if !down[n] {
			s.HealthyOthers-- // up by its record, down by its slot
		}
	}
	// Shared counts may be older than the down keys: never fewer healthy
	// than none.
	s.HealthyOthers = max(s.HealthyOthers, 0)
	sort.Strings(s.FallbackUp)
	return s
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
