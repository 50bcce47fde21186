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

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
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
		got, full, err := Summary(ctx, r.c, r.ns, self, fallbacks, now, 0)
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
		if _, full, err := Summary(ctx, c, r.ns, "n0", []string{"n1", "n2"}, time.Now(), 0); err != nil || full {
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

// Summary with share takes the fleet's two counts from CountsKey while it
// lives: the first reader counts and shares them on a lease of share; a
// later reader counts nothing of the fleet's size, takes the down keys, its
// own record and the slots' afresh, and adds what was created after the
// counts (itself, a slot holder). Counts that say some records carry no
// index, or that another node overwrote since they were read, are not
// written; counts that are not consistent are counted again.
func TestSummarySharesTheCounts(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	lease, err := r.c.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(n, state string, indexed bool) {
		t.Helper()
		b, _ := json.Marshal(policy.NodeRecord{Node: n, State: state, Lock: r.ns + "lock", V: policy.ProtocolVersion})
		ops := []clientv3.Op{clientv3.OpPut(RecordKey(r.ns, n), string(b), clientv3.WithLease(lease.ID))}
		if indexed {
			ops = append(ops, IndexOps(r.ns, n, state, lease.ID)...)
		}
		if _, err := r.c.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	summary := func(self string, share time.Duration) policy.Summary {
		t.Helper()
		s, full, err := Summary(ctx, r.c, r.ns, self, []string{"n3"}, now, share)
		if err != nil || full {
			t.Fatalf("summary for %s: full %v, %v", self, full, err)
		}
		return s
	}
	shared := func() (fc fleetCounts, ttl int64) {
		t.Helper()
		resp, err := r.c.Get(ctx, CountsKey(r.ns))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("counts key: %v, %v", resp, err)
		}
		if err := json.Unmarshal(resp.Kvs[0].Value, &fc); err != nil {
			t.Fatal(err)
		}
		tl, err := r.c.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
		if err != nil {
			t.Fatal(err)
		}
		return fc, tl.TTL
	}
	for i := range 5 {
		publish(fmt.Sprintf("n%d", i), policy.StateIdle, true)
	}
	if s := summary("n0", time.Minute); s.ClusterSize != 5 || s.HealthyOthers != 4 {
		t.Fatalf("first summary %+v: want 5 nodes, 4 healthy others", s)
	}
	if fc, ttl := shared(); fc.Records != 5 || fc.Members != 5 || ttl <= 0 || ttl > 60 {
		t.Fatalf("shared counts %+v on a lease of %d s: want 5 records and members, at most 60 s", fc, ttl)
	}

	// Two nodes join, one goes down, two take slots: one counted (n2), one
	// not (n5).
	publish("n5", policy.StateIdle, true)
	publish("n6", policy.StateIdle, true)
	publish("n1", policy.StateRebooting, true)
	r.put(Key(r.ns, "n2"), fmt.Sprintf(`{"node":"n2","lock":%q,"group":""}`, r.ns+"lock"), 0)
	r.put(Key(r.ns, "n5"), fmt.Sprintf(`{"node":"n5","lock":%q,"group":""}`, r.ns+"lock"), 0)
	// n0: the 5 counted (n1 down, n2 in its slot, n0 itself) and n5 by its
	// slot; n6 is not seen yet.
	if s := summary("n0", time.Minute); s.ClusterSize != 6 || s.HealthyOthers != 2 || !reflect.DeepEqual(s.FallbackUp, []string{"n3"}) {
		t.Fatalf("shared summary for n0 %+v: want 6 nodes, 2 healthy others (n3, n4), fallback n3 up", s)
	}
	// n6 was created after the counts: it adds itself.
	if s := summary("n6", time.Minute); s.ClusterSize != 7 || s.HealthyOthers != 3 {
		t.Fatalf("shared summary for n6 %+v: want 7 nodes, 3 healthy others (n0, n3, n4)", s)
	}
	// Without share, and once the counts are gone, it counts afresh: the
	// view's summary.
	want, _, err := summaryOfView(ctx, r.c, r.ns, "n0", []string{"n3"}, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := summary("n0", 0); !reflect.DeepEqual(s, want) {
		t.Fatalf("summary without share %+v, the view's %+v", s, want)
	}
	if _, err := r.c.Delete(ctx, CountsKey(r.ns)); err != nil {
		t.Fatal(err)
	}
	if s := summary("n0", time.Minute); !reflect.DeepEqual(s, want) || want.ClusterSize != 7 {
		t.Fatalf("summary after the counts expired %+v, the view's %+v (7 nodes)", s, want)
	}
	fc, _ := shared()
	if fc.Records != 7 {
		t.Fatalf("shared again %+v: want 7 records", fc)
	}

	// A node that counted while another shared first does not overwrite.
	shareCounts(ctx, r.c, r.ns, fleetCounts{Records: 99, Members: 99, Revision: 1}, 0, time.Minute)
	if again, _ := shared(); again != fc {
		t.Fatalf("counts overwritten by a writer that read none: %+v, was %+v", again, fc)
	}
	// Counts that cannot be (fewer members than records) are counted again
	// and replaced.
	r.put(CountsKey(r.ns), `{"records":3,"members":1,"revision":1}`, 0)
	if s := summary("n0", time.Minute); !reflect.DeepEqual(s, want) {
		t.Fatalf("summary with inconsistent counts %+v, the view's %+v", s, want)
	}
	if fc, _ := shared(); fc.Records != 7 || fc.Members != 7 {
		t.Fatalf("inconsistent counts not replaced: %+v", fc)
	}
	// A record without its index (an older version): read in full, and
	// nothing shared.
	if _, err := r.c.Delete(ctx, CountsKey(r.ns)); err != nil {
		t.Fatal(err)
	}
	publish("old", policy.StateIdle, false)
	if _, full, err := Summary(ctx, r.c, r.ns, "n0", nil, now, time.Minute); err != nil || !full {
		t.Fatalf("summary with an unindexed record: full %v, %v: want read in full", full, err)
	}
	if r.exists(CountsKey(r.ns)) {
		t.Fatal("counts shared while some records carry no index")
	}
}

// The sizes a percentage resolves against, counted in the index, are those
// of every record read, for any fleet: nodes of several groups, slots with
// and without records (a node down past its record's lease), slots bound to
// another group, self with or without its record (a pipeline publishes
// none), and of another group than its record names. A fleet with a record
// an older version wrote (no group key), or with a group key left behind by
// a node that moved, is read in full, and gives the same answer.
func TestSizesAreTheViews(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(3, 4))
	groups := []string{"", "db", "web"}
	pct := func(f *Fleet) { f.Rules.MaxHolders = config.Budget{Percent: 30} }
	for round := range 60 {
		if _, err := r.c.Delete(ctx, r.ns, clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
		nodes := 1 + rnd.IntN(12)
		legacy, moved := round%6 == 4, round%6 == 5
		for i := range nodes {
			n, g := fmt.Sprintf("n%d", i), groups[rnd.IntN(len(groups))]
			if rnd.IntN(5) > 0 { // a record
				b, _ := json.Marshal(policy.NodeRecord{Node: n, State: policy.StateIdle, Lock: r.ns + "lock", Group: g, V: policy.ProtocolVersion})
				ops := []clientv3.Op{clientv3.OpPut(RecordKey(r.ns, n), string(b))}
				switch {
				case legacy && i == 0:
				case moved && i == 0:
					// It was of another group before, and the key there stayed.
					ops = append(ops, append(IndexOps(r.ns, n, policy.StateIdle, 0), GroupOp(r.ns, g, n, 0), GroupOp(r.ns, g+"x", n, 0))...)
				default:
					ops = append(ops, append(IndexOps(r.ns, n, policy.StateIdle, 0), GroupOp(r.ns, g, n, 0))...)
				}
				if _, err := r.c.Txn(ctx).Then(ops...).Commit(); err != nil {
					t.Fatal(err)
				}
			}
			if rnd.IntN(4) == 0 { // a slot, bound to a group or not
				sg := groups[rnd.IntN(len(groups))]
				v := fmt.Sprintf(`{"node":%q,"lock":%q,"group":%q}`, n, r.ns+"lock", sg)
				if rnd.IntN(4) == 0 {
					v = fmt.Sprintf(`{"node":%q}`, n)
				}
				r.put(Key(r.ns, n), v, 0)
			}
		}
		f := r.fleet(fmt.Sprintf("n%d", rnd.IntN(nodes+1)), groups[rnd.IntN(len(groups))], time.Minute, pct)
		f.Sized = round%2 == 0 // the records' count from the summary's read
		c, err := f.Count(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		all, err := f.CountAll(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		gotGroup, gotFleet := f.scopes(c)
		wantGroup, wantFleet := f.scopes(all)
		if gotGroup != wantGroup || gotFleet != wantFleet {
			t.Fatalf("round %d (self %s of group %q): counted %d in the group and %d in the fleet, the records say %d and %d",
				round, f.Node, f.Group, gotGroup, gotFleet, wantGroup, wantFleet)
		}
		stray := (legacy || moved) && r.exists(RecordKey(r.ns, "n0"))
		if c.Records != stray || (c.Sizes == nil) != stray {
			t.Errorf("round %d: records read %v, sizes %v, with a record not indexed by group %v", round, c.Records, c.Sizes, stray)
		}
	}
}

// The waves rule decided on the busy index is the rule decided on every
// record, for any fleet: nodes of several waves in every state, held ones,
// ones past wave_timeout_sec (their needs lease ended), busy keys left in
// another wave or by a record no longer busy, a record without a busy key
// where the index is not whole (an older version's, or no group key), and
// pages small enough that the one holding the candidate back comes after
// held and timed-out ones.
func TestLowerWavesAreTheViews(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(5, 6))
	defer func(p int64) { lowerPage = p }(lowerPage)
	lowerPage = 2
	ended, err := r.c.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Revoke(ctx, ended.ID); err != nil {
		t.Fatal(err)
	}
	live, err := r.c.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	states := []string{policy.StateIdle, policy.StateNeedsReboot, policy.StateBlocked, policy.StateWaiting, policy.StateRebooting, policy.StatePostReboot}
	var indexed, refused int
	for round := range 80 {
		if _, err := r.c.Delete(ctx, r.ns, clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
		nodes := 1 + rnd.IntN(14)
		legacy, stray := round%8 == 6, round%8 == 7
		for i := range nodes {
			n := fmt.Sprintf("n%d", i)
			state := states[rnd.IntN(len(states))]
			rec := policy.NodeRecord{Node: n, State: state, RebootRequired: state != policy.StateIdle && rnd.IntN(4) > 0, Lock: r.ns + "lock",
				Wave: rnd.IntN(4), V: policy.ProtocolVersion}
			if rec.RebootRequired {
				switch rnd.IntN(3) {
				case 0:
					rec.NeedsRebootLease = fmt.Sprintf("%x", int64(ended.ID)) // needed for longer than any timeout
				case 1:
					rec.NeedsRebootLease = fmt.Sprintf("%x", int64(live.ID))
				}
			}
			if (legacy || stray) && i == 0 {
				// The one record the index would miss holds every later
				// wave back.
				rec.State, rec.RebootRequired, rec.Wave, rec.NeedsRebootLease = policy.StateNeedsReboot, true, 0, ""
			}
			b, _ := json.Marshal(rec)
			ops := []clientv3.Op{clientv3.OpPut(RecordKey(r.ns, n), string(b))}
			switch {
			case legacy && i == 0:
			case stray && i == 0:
				// Indexed but for its group key: the index is not whole.
				ops = append(ops, IndexOps(r.ns, n, state, 0)...)
			default:
				ops = append(ops, append(IndexOps(r.ns, n, state, 0), GroupOp(r.ns, "", n, 0))...)
				ops = append(ops, BusyOps(r.ns, rec, nil, 0)...)
				if rnd.IntN(6) == 0 { // a key left in another wave
					ops = append(ops, clientv3.OpPut(BusyKey(r.ns, (rec.Wave+1+rnd.IntN(3))%4, n), ""))
				}
			}
			if _, err := r.c.Txn(ctx).Then(ops...).Commit(); err != nil {
				t.Fatal(err)
			}
			if rnd.IntN(5) == 0 && (i > 0 || !(legacy || stray)) {
				r.put(HoldKey(r.ns, n), `{"reason":"disk","by":"op"}`, 0)
			}
		}
		wave := 1 + rnd.IntN(3)
		f := r.fleet(fmt.Sprintf("n%d", rnd.IntN(nodes+1)), "", time.Minute, func(f *Fleet) {
			f.Wave, f.Rules.MaxHolders, f.Rules.WaveTimeoutSec = wave, config.Count(50), 60*rnd.IntN(2)
		})
		f.Sized = round%2 == 0
		c, err := f.Count(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		all, err := f.CountAll(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var v slotinfo.Verdict
		v.Rules.WaveTimeoutSec = f.Rules.WaveTimeoutSec
		got, want := f.waves(c, v), f.waves(all, v)
		if got.Rule != want.Rule {
			t.Fatalf("round %d (%s of wave %d, timeout %d s): the index's verdict %q (%s), the records' %q (%s)",
				round, f.Node, wave, f.Rules.WaveTimeoutSec, got.Rule, got.Reason, want.Rule, want.Reason)
		}
		if c.Records != (legacy || stray) {
			t.Errorf("round %d: records read %v, the index whole %v", round, c.Records, !(legacy || stray))
		}
		if !c.Records {
			indexed++
			if got.Rule != "" {
				refused++
			}
		}
	}
	t.Logf("indexed %d refused %d", indexed, refused)
	if indexed < 40 || refused < 10 || refused > indexed-10 {
		t.Errorf("%d rounds decided on the index, %d refused there: the rounds do not try both answers", indexed, refused)
	}
}
