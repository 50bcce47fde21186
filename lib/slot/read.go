package slot

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/lock/lockinfo"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// What an admission reads (docs/cluster-protocol.md, "What the admission
// reads"): the keys its rules decide on, each bounded by the budgets and
// the failures, not by the fleet's size — the first seats of this node's
// line, the slots, the in-flight and failure records, the halts, the
// acknowledgement, the pause, this node's own record, hold and request,
// the recent pacing and start records, the fleet's line, the rules keys'
// stamp — plus count-only ranges for the fleet's size and the policies'
// summary. Rules that need every node read more, only when they are in
// effect: waves (wave > 0) and percentages read every health record.

// startsRead is how many start records (the oldest) an admission reads;
// it counts them all, and waits for the oldest one's end.
const startsRead = 64

// Count reads what this node's admission decides on, at one revision.
// seat is this node's own seat key ("" when it holds none): it is this
// node, not another machine.
func (f Fleet) Count(ctx context.Context, seat string) (Count, error) {
	return f.count(ctx, seat, false)
}

// CountAll is Count plus what status, report and the estimate show, at
// the same revision: every health record and hold, the lines of every
// group, the completions within the failure window (<ns>rollout/done/).
// No admission decides on it.
func (f Fleet) CountAll(ctx context.Context, seat string) (Count, error) {
	return f.count(ctx, seat, true)
}

// The responses of count's transaction, in order.
const (
	rLine = iota
	rSlots
	rRecords
	rPause
	rHolds
	rRequest
	rHalts
	rLegacyHalt
	rAck
	rInflight
	rFailures
	rPaced
	rStarts
	rStartCount
	rWaveDone
	rQueue
	rRulesChanged
	rDone
)

// count reads everything at one revision. With a summary (an admission's
// Count of a Fleet summarized) it reads in two transactions: the names of
// the nodes holding slots, then everything, the summary's reads of those
// nodes included (when a slot was taken in between, the summary's reads
// of the slots found are made again at the count's revision). A
// compaction that overtook a read of the count's revision makes it count
// again.
func (f Fleet) count(ctx context.Context, seat string, all bool) (Count, error) {
	var err error
	for range 10 {
		var names []string
		if !all && f.summarized() {
			if names, err = f.slotNames(ctx); err != nil {
				return Count{}, err
			}
		}
		var c Count
		c, err = f.countOnce(ctx, seat, all, names)
		if errors.Is(err, rpctypes.ErrCompacted) {
			continue
		}
		return c, err
	}
	return Count{}, err
}

// slotNames are the nodes that hold slots, sorted, each once: a guess of
// the count's (countOnce reads its summary's per-slot keys again when its
// own read of the slots finds others), so any member may serve it
// serializably, without a round trip to the leader.
func (f Fleet) slotNames(ctx context.Context) ([]string, error) {
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	resp, err := f.Client.Get(rctx, Dir(f.NS), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSerializable())
	if err != nil {
		return nil, err
	}
	return slotNamesOf(f.NS, resp.Kvs), nil
}

func slotNamesOf(ns string, kvs []*mvccpb.KeyValue) []string {
	var names []string
	for _, kv := range kvs {
		names = append(names, strings.TrimPrefix(string(kv.Key), Dir(ns)))
	}
	sort.Strings(names)
	return slices.Compact(names)
}

func (f Fleet) countOnce(ctx context.Context, seat string, all bool, names []string) (Count, error) {
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	byCreate := clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)
	prefix := clientv3.WithPrefix()
	countOnly := clientv3.WithCountOnly()
	ops := []clientv3.Op{
		rLine:         f.lineOp(all),
		rSlots:        clientv3.OpGet(Dir(f.NS), prefix),
		rRecords:      clientv3.OpGet(RecordKey(f.NS, f.Node)),
		rPause:        clientv3.OpGet(PauseKey(f.NS)),
		rHolds:        clientv3.OpGet(HoldKey(f.NS, f.Node)),
		rRequest:      clientv3.OpGet(RequestKey(f.NS, f.Node)),
		rHalts:        clientv3.OpGet(HaltsDir(f.NS), prefix),
		rLegacyHalt:   clientv3.OpGet(LegacyHaltKey(f.NS)),
		rAck:          clientv3.OpGet(AckKey(f.NS)),
		rInflight:     clientv3.OpGet(InflightDir(f.NS), prefix),
		rFailures:     clientv3.OpGet(FailuresDir(f.NS), prefix),
		rPaced:        clientv3.OpGet(PacedDir(f.NS), prefix),
		rStarts:       clientv3.OpGet(StartsDir(f.NS), prefix, byCreate, clientv3.WithLimit(startsRead)),
		rStartCount:   clientv3.OpGet(StartsDir(f.NS), prefix, countOnly),
		rWaveDone:     clientv3.OpGet(WaveDoneDir(f.NS), prefix, countOnly),
		rQueue:        clientv3.OpGet(QueueDir(f.NS), prefix, byCreate),
		rRulesChanged: rulesChangedOp(f.NS),
	}
	if all {
		ops[rRecords] = clientv3.OpGet(RecordsDir(f.NS), prefix)
		ops[rHolds] = clientv3.OpGet(HoldsDir(f.NS), prefix)
		ops[rStarts] = clientv3.OpGet(StartsDir(f.NS), prefix, byCreate)
		ops = append(ops, clientv3.OpGet(DoneDir(f.NS), prefix))
	}
	if all || f.Wave > 0 {
		// The lower waves' completions: only a node of a later wave waits
		// for their bake time.
		ops[rWaveDone] = clientv3.OpGet(WaveDoneDir(f.NS), prefix)
	}
	// The summary without a policy is the health script's CLUSTER_SIZE
	// alone: the members' count (is every record indexed?) is left out.
	sumAt, summarize, checked := len(ops), !all && f.summarized(), policy.Active(f.Policies)
	if summarize {
		// The summary's reads that do not grow with the fleet; its counts
		// of the fleet's size are read below, with the others.
		ops = append(ops, localOps(f.NS, f.Node, f.Policies.FallbackNodes, names, 0, false)...)
	}
	resp, err := f.Client.Txn(rctx).Then(ops...).Commit()
	if err != nil {
		return Count{}, err
	}
	rev := resp.Header.Revision
	locals := resp.Responses[sumAt:]
	if found := slotNamesOf(f.NS, resp.Responses[rSlots].GetResponseRange().Kvs); summarize && !slices.Equal(found, names) {
		// A slot was taken (or freed) between the two reads: the summary's
		// per-slot reads again, for the slots found, at the count's revision.
		names = found
		sresp, err := f.readTxn(ctx, localOps(f.NS, f.Node, f.Policies.FallbackNodes, names, rev, false))
		if err != nil {
			return Count{}, err
		}
		locals = sresp.Responses
	}
	kvs := func(i int) []*mvccpb.KeyValue { return resp.Responses[i].GetResponseRange().Kvs }
	line := kvs(rLine)
	if !all {
		if f.Group == "" && len(line) > 0 && nested(f.Lock, line) {
			// The ungrouped line shares its range with the groups' lines:
			// a limited read may have met theirs. Read its own entries
			// whole (keys only).
			if line, err = f.get(ctx, rev, f.Lock+"/", prefix, byCreate, clientv3.WithKeysOnly()); err != nil {
				return Count{}, err
			}
		}
		if line, err = f.values(ctx, rev, line); err != nil {
			return Count{}, err
		}
	}
	k := f.newCounting(rev, seat)
	k.seats(line, seat)
	k.slots(kvs(rSlots))
	k.records(kvs(rRecords))
	c := k.c
	c.Records = all
	if p := kvs(rPause); len(p) > 0 {
		c.View.Paused = ParsePause(p[0].Value)
	}
	c.View.Holds = ParseOverrides(HoldsDir(f.NS), kvs(rHolds))
	c.Hold = c.View.Held(f.Node)
	if r := ParseOverrides(RequestsDir(f.NS), kvs(rRequest)); len(r) > 0 {
		c.Request = &r[0]
		c.View.Requests = r
	}
	var rollout []*mvccpb.KeyValue
	for _, i := range []int{rHalts, rLegacyHalt, rAck, rInflight, rFailures, rPaced, rStarts, rWaveDone} {
		rollout = append(rollout, kvs(i)...)
	}
	if all {
		rollout = append(rollout, kvs(rDone)...)
	}
	c.Rollout = parseRollout(f.NS, rollout)
	c.Rollout.StartCount = int(resp.Responses[rStartCount].GetResponseRange().Count)
	c.Tickets = parseTickets(f.NS, kvs(rQueue))
	var changed int64
	if ch := kvs(rRulesChanged); len(ch) > 0 {
		changed = ch[0].ModRevision
	}
	if c.RuleSets, err = f.ruleSets(ctx, changed, rev); err != nil {
		return Count{}, err
	}
	pct, wave := !all && f.percentages(c), !all && f.Wave > 0
	fc, err := f.fleetCounts(ctx, c, rev, summarize, checked, pct, wave)
	if err != nil {
		return Count{}, err
	}
	c.slotNames = slotNamesOf(f.NS, kvs(rSlots))
	c.counted, c.records = summarize || pct || wave, fc.records
	if summarize {
		c.RecordCount = int(fc.records)
	}
	if pct {
		// A percentage resolves against the nodes of this node's group
		// and of the fleet: counted in the index when every record is
		// indexed there, else (nil) read below.
		c.Sizes = fc.sizes
	}
	if wave && fc.indexed {
		// Waves: the lower waves' busy nodes, found in the busy index.
		if err := f.lowerWaves(ctx, &c, rev); err != nil {
			return Count{}, err
		}
	}
	if (wave || pct) && !fc.indexed {
		// Waves and percentages when some records are not indexed: every
		// record and the operators' holds, at the count's revision.
		if err := f.readRecords(ctx, k, &c, rev); err != nil {
			return Count{}, err
		}
	}
	if summarize && !c.Records {
		// As summaryOps reads them: the records' count, the local reads,
		// the members' count.
		sums := append([]*etcdserverpb.ResponseOp{fc.recordsResp}, locals...)
		if checked {
			sums = append(sums, fc.membersResp)
		}
		s, indexed := parseSummary(sums, f.NS, f.Node, f.Policies.FallbackNodes, names, f.now(), checked)
		if !indexed {
			// Some records carry no index (an older version publishes
			// them): the summary of the records themselves.
			sctx, scancel := context.WithTimeout(ctx, 2*f.RPCTimeout)
			s, _, err = summaryOfView(sctx, f.Client, f.NS, f.Node, f.Policies.FallbackNodes, f.now(), rev)
			scancel()
			if err != nil {
				return Count{}, err
			}
		}
		c.Summary = &s
	}
	if err := f.needAges(ctx, &c); err != nil {
		return Count{}, err
	}
	if len(k.maxSeen) > 1 {
		for n := range k.maxSeen {
			c.Disagree = append(c.Disagree, n)
		}
		sort.Ints(c.Disagree)
	}
	sort.SliceStable(c.Members[1:], func(i, j int) bool { return c.Members[1+i].Node < c.Members[1+j].Node })
	sort.SliceStable(c.Total[1:], func(i, j int) bool { return c.Total[1+i].Node < c.Total[1+j].Node })
	return c, nil
}

// lineOp reads this node's group's line: whole for CountAll (every
// group's), else its first entries, as many as this node's seats: a node
// that holds a seat is among them, and so is every other holder (no entry
// behind the first max_holders can hold one). Those keys only: etcd sorts
// a range after reading all of it, and with values it would read every
// waiter's value from its backend; keys only, it walks its in-memory index
// (values reads the few values after, at the same revision).
func (f Fleet) lineOp(all bool) clientv3.Op {
	byCreate := clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)
	if all {
		return clientv3.OpGet(f.Lock+"/", clientv3.WithPrefix(), byCreate)
	}
	opts := []clientv3.OpOption{clientv3.WithPrefix(), byCreate, clientv3.WithKeysOnly()}
	if f.Rules.MaxHolders.Percent == 0 {
		opts = append(opts, clientv3.WithLimit(int64(max(1, f.Rules.MaxHolders.N))))
	}
	return clientv3.OpGet(f.SeatKey()+"/", opts...)
}

// values reads, at rev, the values of the entries of kvs (read keys only)
// that can hold a seat, in kvs' order. In each line the holders are a
// prefix no longer than its first entry's max_holders (counting.seats), so
// each line's first entry is read, then as many more as it allows; an
// entry behind them is a waiter and is left out, as the limited read of
// the line leaves it out (lineOp). A line of 10,000 waiters costs etcd a
// few values, not 10,000.
func (f Fleet) values(ctx context.Context, rev int64, kvs []*mvccpb.KeyValue) ([]*mvccpb.KeyValue, error) {
	lines := map[string][]string{}
	var parents []string
	for _, kv := range kvs {
		key := string(kv.Key)
		parent := key[:strings.LastIndex(key, "/")]
		if lines[parent] == nil {
			parents = append(parents, parent)
		}
		lines[parent] = append(lines[parent], key)
	}
	var firsts []string
	for _, p := range parents {
		firsts = append(firsts, lines[p][0])
	}
	got, err := f.valuesOf(ctx, rev, firsts, nil)
	if err != nil {
		return nil, err
	}
	var more []string
	for _, p := range parents {
		first := got[lines[p][0]]
		if first == nil {
			continue // gone at rev: no such line
		}
		more = append(more, lines[p][1:min(len(lines[p]), lockinfo.ParseAnnotation(first.Value).MaxHolders)]...)
	}
	if got, err = f.valuesOf(ctx, rev, more, got); err != nil {
		return nil, err
	}
	var out []*mvccpb.KeyValue
	for _, kv := range kvs {
		if v := got[string(kv.Key)]; v != nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// valuesOf adds keys' key-values at rev to got (batches).
func (f Fleet) valuesOf(ctx context.Context, rev int64, keys []string, got map[string]*mvccpb.KeyValue) (map[string]*mvccpb.KeyValue, error) {
	if got == nil {
		got = map[string]*mvccpb.KeyValue{}
	}
	var ops []clientv3.Op
	for _, k := range keys {
		ops = append(ops, clientv3.OpGet(k, clientv3.WithRev(rev)))
	}
	resps, err := f.batches(ctx, ops)
	if err != nil {
		return nil, err
	}
	for _, r := range resps {
		for _, kv := range r.GetResponseRange().Kvs {
			got[string(kv.Key)] = kv
		}
	}
	return got, nil
}

// batches runs reads in transactions of at most a hundred (etcd's
// --max-txn-ops is 128 by default) and returns their responses in order.
// Reads of many transactions agree only when each names its revision.
func (f Fleet) batches(ctx context.Context, ops []clientv3.Op) ([]*etcdserverpb.ResponseOp, error) {
	var out []*etcdserverpb.ResponseOp
	for len(ops) > 0 {
		batch := ops[:min(len(ops), 100)]
		ops = ops[len(batch):]
		resp, err := f.readTxn(ctx, batch)
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Responses...)
	}
	return out, nil
}

// readTxn runs ops, reads only, in one transaction. When every one names
// its revision it is served serializably first: what a revision holds never
// changes once a member has applied it, so any member answers as the
// leader would, without the round trip to the leader and its quorum that a
// linearizable read waits for (etcd's ReadIndex). A member that has not
// applied the revision yet answers ErrFutureRev, and the reads go again,
// linearizable (docs/cluster-protocol.md, "How it reads").
func (f Fleet) readTxn(ctx context.Context, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	serial := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		if op.Rev() <= 0 {
			serial = nil
			break
		}
		serial[i] = op
		clientv3.WithSerializable()(&serial[i])
	}
	if serial != nil {
		rctx, cancel := f.rpc(ctx)
		resp, err := f.Client.Txn(rctx).Then(serial...).Commit()
		cancel()
		if !errors.Is(err, rpctypes.ErrFutureRev) {
			return resp, err
		}
		readAgain()
	}
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	return f.Client.Txn(rctx).Then(ops...).Commit()
}

// readAgain runs before a read that a member could not serve at its
// revision goes again, linearizable (a variable for the tests).
var readAgain = func() {}

// nested reports whether any of the entries under lock/ is a group's.
func nested(lock string, kvs []*mvccpb.KeyValue) bool {
	for _, kv := range kvs {
		if isNested(lock, string(kv.Key)) {
			return true
		}
	}
	return false
}

// get reads key with opts at revision rev (readTxn).
func (f Fleet) get(ctx context.Context, rev int64, key string, opts ...clientv3.OpOption) ([]*mvccpb.KeyValue, error) {
	resp, err := f.readTxn(ctx, []clientv3.Op{clientv3.OpGet(key, append(opts, clientv3.WithRev(rev))...)})
	if err != nil {
		return nil, err
	}
	return resp.Responses[0].GetResponseRange().Kvs, nil
}

// readRecords adds every health record and hold at rev to c.
func (f Fleet) readRecords(ctx context.Context, k *counting, c *Count, rev int64) error {
	recs, err := f.get(ctx, rev, RecordsDir(f.NS), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	holds, err := f.get(ctx, rev, HoldsDir(f.NS), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	k.c = *c
	k.c.View.Nodes = k.c.View.Nodes[:0]
	k.records(recs)
	*c = k.c
	c.Records = true
	c.View.Holds = ParseOverrides(HoldsDir(f.NS), holds)
	return nil
}

// counts are the fleet's numbers a Count needs beyond its transaction
// (fleetCounts), all at its revision.
type counts struct {
	// records is the health records' number; recordsResp and membersResp
	// the summary's two counts as summaryOps reads them (membersResp nil
	// without a policy).
	records                  int64
	recordsResp, membersResp *etcdserverpb.ResponseOp
	// indexed says the group keys are as many as the records (read only
	// with a percentage or a wave): every record was published by a
	// version that writes its group and busy keys.
	indexed bool
	// sizes are a percentage's scopes counted in the index (nil: no
	// percentage, or not indexed).
	sizes *Sizes
}

// fleetCounts reads, at rev, the counts of the fleet's size that the
// summary (summarize; the members' too when checked), the percentages (pct)
// and the waves (wave) need: the records, the members, every group key and
// this group's keys, each in a request of its own, all at once (etcd
// counts a range by walking its index over it; walks in separate requests
// run on as many cores as it has, in one transaction one after another),
// and with a percentage this node's and each slot holder's record and group
// key.
func (f Fleet) fleetCounts(ctx context.Context, c Count, rev int64, summarize, checked, pct, wave bool) (counts, error) {
	at, countOnly, prefix := clientv3.WithRev(rev), clientv3.WithCountOnly(), clientv3.WithPrefix()
	var fc counts
	if !summarize && !pct && !wave {
		return fc, nil
	}
	reads := [][]clientv3.Op{{clientv3.OpGet(RecordsDir(f.NS), prefix, countOnly, at)}}
	members, groups, group, nodes := -1, -1, -1, -1
	if summarize && checked {
		members = len(reads)
		reads = append(reads, []clientv3.Op{clientv3.OpGet(MemberDir(f.NS), prefix, countOnly, at)})
	}
	if pct || wave {
		groups = len(reads)
		reads = append(reads, []clientv3.Op{clientv3.OpGet(GroupsDir(f.NS), prefix, countOnly, at)})
	}
	var sz sizesRead
	if pct {
		group = len(reads)
		reads = append(reads, []clientv3.Op{clientv3.OpGet(GroupDir(f.NS, f.Group), prefix, countOnly, at)})
		sz = f.sizesRead(c, rev)
		nodes = len(reads)
		reads = append(reads, sz.ops)
	}
	got := make([][]*etcdserverpb.ResponseOp, len(reads))
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for i, ops := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = f.batches(ctx, ops)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fc, err
	}
	fc.recordsResp, fc.records = got[0][0], got[0][0].GetResponseRange().Count
	if members >= 0 {
		fc.membersResp = got[members][0]
	}
	if groups >= 0 {
		fc.indexed = got[groups][0].GetResponseRange().Count == fc.records
	}
	if pct && fc.indexed {
		fc.sizes = sz.of(fc.records, got[group][0].GetResponseRange().Count, got[nodes])
	}
	return fc, nil
}

// size adds to c, at its revision, the summary that a Sized Fleet's
// caller needs without a policy (the health script's CLUSTER_SIZE) when
// the count left it out: the records' count (unless the count already
// counted them for its rules), the down keys and single keys of this
// node, the fallback nodes and the slot holders. The count is a walk of
// etcd's index over the whole fleet (docs/scaling.md), and without a
// policy no rule decides on it: an Admission reads it only for a count
// that admits, not for every count of a node waiting for a slot. A read
// at the count's revision, which any member serves.
func (f Fleet) size(ctx context.Context, c *Count) error {
	if !f.Sized || c.Summary != nil || c.Records {
		return nil
	}
	ops := localOps(f.NS, f.Node, f.Policies.FallbackNodes, c.slotNames, c.Revision, false)
	if !c.counted {
		ops = append([]clientv3.Op{clientv3.OpGet(RecordsDir(f.NS), clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(c.Revision))}, ops...)
	}
	resp, err := f.readTxn(ctx, ops)
	if err != nil {
		return err
	}
	local, records := resp.Responses, c.records
	if !c.counted {
		local, records = local[1:], local[0].GetResponseRange().Count
	}
	s := summaryOf(local, records, 0, f.NS, f.Node, f.Policies.FallbackNodes, c.slotNames, f.now())
	c.Summary, c.RecordCount = &s, int(records)
	return nil
}

// sizesRead are the single keys a percentage's scopes need beyond the
// counts: this node's and each slot holder's record and group key.
type sizesRead struct {
	ops     []clientv3.Op
	nodes   []string
	inGroup map[string]bool
}

// sizesRead: the scopes of c's percentages (scopesOf) are the records and
// this group's keys, counted, with this node and the slot holders whose
// record or key is missing (a node down in its reboot for longer than its
// record's lease still counts, as it does for the admission). Trusted only
// when the group keys are as many as the records (fleetCounts): otherwise
// some records are not indexed by group (a version before the group keys
// publishes them, or an operator wrote one) or a key outlived its node's
// move to another group, and the records must be read.
func (f Fleet) sizesRead(c Count, rev int64) sizesRead {
	at, countOnly := clientv3.WithRev(rev), clientv3.WithCountOnly()
	sz := sizesRead{nodes: []string{f.Node}, inGroup: map[string]bool{f.Node: true}}
	for _, s := range c.Slots {
		if !slices.Contains(sz.nodes, s.Node) {
			sz.nodes = append(sz.nodes, s.Node)
		}
		if s.Counts(f.Lock, f.Group) {
			sz.inGroup[s.Node] = true
		}
	}
	for _, n := range sz.nodes {
		sz.ops = append(sz.ops, clientv3.OpGet(RecordKey(f.NS, n), countOnly, at), clientv3.OpGet(GroupKey(f.NS, f.Group, n), countOnly, at))
	}
	return sz
}

// of are the sizes from the records' and the group's counts and the
// responses to ops.
func (sz sizesRead) of(records, group int64, resps []*etcdserverpb.ResponseOp) *Sizes {
	out := &Sizes{Fleet: int(records), Group: int(group)}
	for i, n := range sz.nodes {
		if resps[2*i].GetResponseRange().Count == 0 {
			out.Fleet++ // no record: a slot holder down past its lease, or this node
		}
		if sz.inGroup[n] && resps[2*i+1].GetResponseRange().Count == 0 {
			out.Group++
		}
	}
	return out
}

// lowerPage is how many busy keys lowerWaves reads at a time (a variable
// for the tests).
var lowerPage int64 = 16

// lowerWaves finds, at rev, the lower waves' busy nodes in the busy index
// (BusyDir: a keys-only range from wave 0 up to this node's wave) and reads
// their records and holds into c.Lower and c.View.Holds, a page at a time,
// until one still holds this node back (busy, not held, not past
// wave_timeout_sec by etcd's clock) or none is left: the reads are bounded
// by the lower waves' held and timed-out nodes, not by the fleet. Only for
// an index that is whole (counts.indexed): a version that writes group keys
// writes the busy key in its record's own transaction (BusyOps), so no busy
// record lacks its key.
func (f Fleet) lowerWaves(ctx context.Context, c *Count, rev int64) error {
	at := clientv3.WithRev(rev)
	timeout := time.Duration(f.Rules.WaveTimeoutSec) * time.Second
	held := map[string]bool{}
	for _, h := range c.View.Holds {
		held[h.Node] = true
	}
	listed := map[string]bool{}
	from, end := BusyDir(f.NS), BusyWaveDir(f.NS, f.Wave)
	for {
		resps, err := f.batches(ctx, []clientv3.Op{clientv3.OpGet(from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(lowerPage), at)})
		if err != nil {
			return err
		}
		got := resps[0].GetResponseRange()
		var nodes []string
		var reads []clientv3.Op
		for _, kv := range got.Kvs {
			node := strings.TrimPrefix(string(kv.Key), BusyDir(f.NS))
			if i := strings.IndexByte(node, '/'); i >= 0 {
				node = node[i+1:]
			}
			if node == f.Node || node == "" || listed[node] {
				continue // a key left in another wave names it twice
			}
			listed[node] = true
			nodes = append(nodes, node)
			reads = append(reads, clientv3.OpGet(RecordKey(f.NS, node), at), clientv3.OpGet(HoldKey(f.NS, node), at))
		}
		rs, err := f.batches(ctx, reads)
		if err != nil {
			return err
		}
		found := false
		for i, node := range nodes {
			if h := ParseOverrides(HoldsDir(f.NS), rs[2*i+1].GetResponseRange().Kvs); len(h) > 0 {
				c.View.Holds = append(c.View.Holds, h...)
				held[node] = true
			}
			kvs := rs[2*i].GetResponseRange().Kvs
			var rec policy.NodeRecord
			if len(kvs) == 0 || json.Unmarshal(kvs[0].Value, &rec) != nil || (rec.Lock != "" && rec.Lock != f.Lock) {
				continue // gone, unreadable or another lock's: not of these waves
			}
			rec.Node = node
			if rec.Wave >= f.Wave || !Busy(rec) || held[node] {
				continue
			}
			c.Lower = append(c.Lower, rec)
			if found {
				continue
			}
			if timeout <= 0 || rec.State == policy.StateRebooting || rec.State == policy.StatePostReboot || rec.NeedsRebootLease == "" {
				found = true
				continue
			}
			age, ok, err := f.needAge(ctx, rec)
			if err != nil {
				return err
			}
			if !ok {
				found = true
				continue
			}
			if c.NeedAge == nil {
				c.NeedAge = map[string]time.Duration{}
			}
			c.NeedAge[node] = age
			found = age <= timeout
		}
		if found || !got.More || len(got.Kvs) == 0 {
			return nil
		}
		from = string(got.Kvs[len(got.Kvs)-1].Key) + "\x00"
	}
}

// percentages reports whether a budget in effect for this node is a
// percentage: its own, or one its fleet's rule sets or slots carry.
func (f Fleet) percentages(c Count) bool {
	pct := func(r policy.Rules) bool {
		return r.MaxHolders.Percent > 0 || r.MaxTotal.Percent > 0 || r.MaxFailures.Percent > 0
	}
	if pct(f.Rules) {
		return true
	}
	for _, s := range c.RuleSets {
		if pct(s.Rules) {
			return true
		}
	}
	for _, s := range c.Slots {
		if s.Rules != nil && pct(*s.Rules) {
			return true
		}
	}
	return false
}

// needAges fills c.NeedAge for the lower waves' nodes that still need
// their reboot, until one is found that has not needed it for longer than
// wave_timeout_sec (that one holds this node back anyway): a few
// TimeToLive requests, not one per node. The age is the lease's granted
// TTL less its remaining one, so no node's clock is read.
func (f Fleet) needAges(ctx context.Context, c *Count) error {
	if f.Wave == 0 || f.Rules.WaveTimeoutSec <= 0 || !c.Records {
		return nil
	}
	timeout := time.Duration(f.Rules.WaveTimeoutSec) * time.Second
	held := map[string]bool{}
	for _, h := range c.View.Holds {
		held[h.Node] = true
	}
	for _, r := range c.View.Nodes {
		if r.Wave >= f.Wave || r.Node == f.Node || held[r.Node] || !r.RebootRequired || r.NeedsRebootLease == "" ||
			r.State == policy.StateRebooting || r.State == policy.StatePostReboot {
			continue
		}
		age, ok, err := f.needAge(ctx, r)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if c.NeedAge == nil {
			c.NeedAge = map[string]time.Duration{}
		}
		c.NeedAge[r.Node] = age
		if age <= timeout {
			return nil
		}
	}
	return nil
}

// needAge is how long r has needed its reboot by etcd's clock: its needs
// lease's granted TTL less its remaining one (false: r names no readable
// lease).
func (f Fleet) needAge(ctx context.Context, r policy.NodeRecord) (time.Duration, bool, error) {
	id, err := lock.ParseLeaseID(r.NeedsRebootLease)
	if err != nil {
		return 0, false, nil
	}
	rctx, cancel := f.rpc(ctx)
	ttl, err := f.Client.TimeToLive(rctx, id)
	cancel()
	if err != nil {
		return 0, false, err
	}
	if ttl.TTL < 0 {
		// Ended: older than any timeout it was granted for.
		return time.Duration(max(ttl.GrantedTTL, int64(f.Rules.WaveTimeoutSec)+1)) * time.Second, true, nil
	}
	return time.Duration(ttl.GrantedTTL-ttl.TTL) * time.Second, true, nil
}
