package slot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// An admission's count reads what its rules decide on, bounded by the
// budgets: not the fleet's health records (their number, and the policies'
// summary, come from count-only reads), not the waiters behind the line's
// holders. The same rules decide as on the whole view.
func TestAdmissionReadsNoRecords(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	policies := func(f *Fleet) { f.Policies = config.Policies{MinHealthyAbsolute: 3} }
	for i := range 40 {
		r.record(r.fleet(fmt.Sprintf("n%02d", i), "", time.Minute), policy.StateIdle, false)
	}
	a := r.fleet("a", "", time.Minute, policies)
	r.record(a, policy.StateNeedsReboot, true)
	seat := r.seatOf(a, 1, true)
	// The waiters end with the test, before the shared etcd stops: one
	// still waiting then would retry its lease's revocation against a
	// stopped server past the leak check (etcdtest.RunMain).
	wctx, stop := context.WithTimeout(ctx, 30*time.Second)
	var waiters sync.WaitGroup
	t.Cleanup(func() { stop(); waiters.Wait() })
	for i := range 5 { // waiters behind a's seat
		w := r.fleet(fmt.Sprintf("w%d", i), "", time.Minute)
		waiters.Go(func() {
			if h, err := lock.Acquire(wctx, r.c, lock.Options{Key: w.SeatKey(), MaxHolders: 1, TTL: 10 * time.Second, Node: w.Node, BootID: w.BootID}); err == nil {
				_ = h.Release(context.Background())
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	c, err := a.Count(ctx, seat.Entry())
	if err != nil {
		t.Fatal(err)
	}
	if c.Records || len(c.View.Nodes) != 1 || c.View.Nodes[0].Node != "a" {
		t.Fatalf("the count read %d records (all: %v), want this node's own", len(c.View.Nodes), c.Records)
	}
	if c.RecordCount != 41 || c.Summary == nil || c.Summary.ClusterSize != 41 || c.Summary.HealthyOthers != 40 {
		t.Fatalf("records %d, summary %+v: want 41 counted, 40 healthy others", c.RecordCount, c.Summary)
	}
	all, err := a.CountAll(ctx, seat.Entry())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.Decide(c), a.Decide(all); got.Admit != want.Admit || got.Policy.ClusterSize != want.Policy.ClusterSize || got.Policy.HealthyAfter != want.Policy.HealthyAfter {
		t.Fatalf("the bounded count decides %+v, the whole view %+v", got.Policy, want.Policy)
	}

	// Without a policy, nothing needs the fleet's size: the count reads no
	// summary (its two count-only ranges walk etcd's index of the whole
	// fleet), unless the caller needs CLUSTER_SIZE (Sized: a health script).
	plain := a
	plain.Policies = config.Policies{}
	c, err = plain.Count(ctx, seat.Entry())
	if err != nil {
		t.Fatal(err)
	}
	if v := plain.Decide(c); c.Summary != nil || c.RecordCount != 0 || !v.Admit || v.Policy.ClusterSize != 0 || v.FleetNodes != 0 {
		t.Fatalf("no policy, not sized: summary %+v, records %d, verdict %+v: want nothing counted, admitted", c.Summary, c.RecordCount, v)
	}
	sized := plain
	sized.Sized = true
	c, err = sized.Count(ctx, seat.Entry())
	if err != nil {
		t.Fatal(err)
	}
	if v := sized.Decide(c); c.Summary == nil || v.Policy.ClusterSize != 41 || v.FleetNodes != 41 || !v.Admit {
		t.Fatalf("sized: summary %+v, verdict %+v: want 41 counted, admitted", c.Summary, v)
	}
}

// The fleet's rules come from the rules keys, which outlive their nodes'
// records (a node gone keeps counting, the safe side), read once and then
// kept in the cache for as long as their marker (RulesChangedKey) holds and
// for at most RulesCacheMaxAge.
func TestRulesKeysAndTheirCache(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	cache := &RulesCache{Path: filepath.Join(t.TempDir(), RulesCacheFile)}
	withCache := func(f *Fleet) { f.RulesCache = cache; f.Rules.MaxHolders = config.Count(3) }
	strict := r.fleet("strict", "", time.Minute, func(f *Fleet) { f.Rules.MaxHolders = config.Count(1) })
	r.record(strict, policy.StateIdle, false)
	if _, err := r.c.Delete(ctx, RecordKey(r.ns, "strict")); err != nil {
		t.Fatal(err)
	}
	a := r.fleet("a", "", time.Minute, withCache)
	c, err := a.Count(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if m := a.Decide(c).Rules.MaxHolders; m != 1 {
		t.Fatalf("max_holders %d, want 1: the strict node's rules key outlives its record", m)
	}
	if _, err := os.Stat(cache.Path); err != nil {
		t.Fatalf("no cache written: %v", err)
	}
	// While the stamp holds, the cache answers: a forged entry in it shows
	// that the keys were not read again.
	var d rulesCacheData
	b, _ := os.ReadFile(cache.Path)
	if err := json.Unmarshal(b, &d); err != nil || len(d.Sets) != 1 {
		t.Fatalf("cache %s: %v", b, err)
	}
	d.Sets[0].Rules.MaxHolders = config.Count(2)
	b, _ = json.Marshal(d)
	if err := os.WriteFile(cache.Path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cache.data = rulesCacheData{}
	c, _ = a.Count(ctx, "")
	if m := a.Decide(c).Rules.MaxHolders; m != 2 {
		t.Fatalf("max_holders %d, want the cached 2: the keys were read again", m)
	}
	// A rules key written moves the stamp: read again.
	r.record(r.fleet("b", "", time.Minute, func(f *Fleet) { f.Rules.MaxHolders = config.Count(3) }), policy.StateIdle, false)
	c, _ = a.Count(ctx, "")
	if m := a.Decide(c).Rules.MaxHolders; m != 1 {
		t.Fatalf("max_holders %d after a new rules key, want 1 read again", m)
	}
	// A rules key that goes (its lease ended, or an operator deleted it)
	// leaves the marker: the cache keeps its rules, the safe side, until
	// it is a day old ...
	if _, err := r.c.Delete(ctx, RulesKey(r.ns, "strict")); err != nil {
		t.Fatal(err)
	}
	c, _ = a.Count(ctx, "")
	if m := a.Decide(c).Rules.MaxHolders; m != 1 {
		t.Fatalf("max_holders %d after the strict node's key went, want the cached 1", m)
	}
	later := a
	later.Now = func() time.Time { return time.Now().Add(RulesCacheMaxAge + time.Minute) }
	c, _ = later.Count(ctx, "")
	if m := later.Decide(c).Rules.MaxHolders; m != 3 {
		t.Fatalf("max_holders %d a day later, want 3: the keys read again", m)
	}
	// ... or the marker is deleted with it (docs/runbooks.md): read again
	// at once, and on every count until a publication writes it again.
	r.record(r.fleet("strict", "", time.Minute, func(f *Fleet) { f.Rules.MaxHolders = config.Count(1) }), policy.StateIdle, false)
	c, _ = a.Count(ctx, "")
	if m := a.Decide(c).Rules.MaxHolders; m != 1 {
		t.Fatalf("max_holders %d with the strict key back, want 1", m)
	}
	for _, k := range []string{RulesKey(r.ns, "strict"), RulesChangedKey(r.ns)} {
		if _, err := r.c.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	c, _ = a.Count(ctx, "")
	if m := a.Decide(c).Rules.MaxHolders; m != 3 {
		t.Fatalf("max_holders %d after the strict key and the marker were deleted, want 3", m)
	}
	// A publication writes the marker again, whatever its own key holds.
	r.record(r.fleet("b", "", time.Minute, func(f *Fleet) { f.Rules.MaxHolders = config.Count(3) }), policy.StateIdle, false)
	if resp, err := r.c.Get(ctx, RulesChangedKey(r.ns)); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("marker not written again: %v", err)
	}
}

// The ungrouped line shares its key range with the groups' lines: its
// limited read falls back to the whole range when it meets a group's entry.
func TestUngroupedLineBesideGroups(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for i := range 3 {
		r.seatOf(r.fleet(fmt.Sprintf("g%d", i), "rack", time.Minute), 5, true)
	}
	three := func(f *Fleet) { f.Rules.MaxHolders = config.Count(3) }
	r.seatOf(r.fleet("plain", "", time.Minute, three), 3, false)
	r.seatOf(r.fleet("plain2", "", time.Minute, three), 3, false)
	a := r.fleet("a", "", time.Minute, three)
	seat := r.seatOf(a, 3, true)
	c, err := a.Count(ctx, seat.Entry())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Nodes()); got != "[a plain plain2]" {
		t.Fatalf("present %v, want a and the plain seats (not the group's seats)", got)
	}

	// Long lines of waiters behind the holders (the count reads the values
	// of each line's possible holders only): the ungrouped line's and
	// rack's, and a line of etcdctl-style entries (no value: one holder).
	lease, err := r.c.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		for _, kv := range [][2]string{
			{fmt.Sprintf("%slock/u%02d", r.ns, i), fmt.Sprintf(`{"node":"u%d","max_holders":3,"candidate":true}`, i)},
			{fmt.Sprintf("%slock/rack/w%02d", r.ns, i), fmt.Sprintf(`{"node":"w%d","max_holders":5,"candidate":true}`, i)},
			{fmt.Sprintf("%slock/row/e%02d", r.ns, i), ""},
		} {
			if _, err := r.c.Put(ctx, kv[0], kv[1], clientv3.WithLease(lease.ID)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if c, err = a.Count(ctx, seat.Entry()); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Nodes()); got != "[a plain plain2]" {
		t.Fatalf("with waiters: present %v, want a and the plain seats", got)
	}
}

// watchedClient is a client of the embedded etcd whose requests go through
// ic, closed with the test.
func watchedClient(t *testing.T, ic grpc.UnaryClientInterceptor) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{embedded.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(ic)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Reads at a count's revision are served serializably (no ReadIndex round
// trip to the leader); a member that has not applied the revision yet
// answers ErrFutureRev, and the read goes again, linearizable. Reads
// without a revision stay linearizable.
func TestReadsAtARevisionAreSerializable(t *testing.T) {
	var mu sync.Mutex
	var sent []bool // per transaction: every range serializable
	record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if q, ok := req.(*etcdserverpb.TxnRequest); ok {
			serial := true
			for _, op := range q.Success {
				serial = serial && op.GetRequestRange().GetSerializable()
			}
			mu.Lock()
			sent = append(sent, serial)
			mu.Unlock()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c := watchedClient(t, record)
	r := newRig(t)
	f := r.fleet("a", "", time.Minute)
	f.Client = c
	key := r.ns + "k"
	put, err := r.c.Put(context.Background(), key, "1")
	if err != nil {
		t.Fatal(err)
	}
	rev := put.Header.Revision
	again := 0
	readAgain = func() {
		again++
		if _, err := r.c.Put(context.Background(), key, "2"); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { readAgain = func() {} })
	read := func(ops ...clientv3.Op) string {
		t.Helper()
		mu.Lock()
		sent = nil
		mu.Unlock()
		resp, err := f.readTxn(context.Background(), ops)
		if err != nil {
			t.Fatal(err)
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) != 1 {
			t.Fatalf("read %d keys, want 1", len(kvs))
		}
		return string(kvs[0].Value)
	}
	if v := read(clientv3.OpGet(key, clientv3.WithRev(rev)), clientv3.OpGet(key, clientv3.WithRev(rev), clientv3.WithCountOnly())); v != "1" || again != 0 || fmt.Sprint(sent) != "[true]" {
		t.Fatalf("at an applied revision: value %q, read again %d times, sent %v: want 1, 0, one serializable transaction", v, again, sent)
	}
	if v := read(clientv3.OpGet(key, clientv3.WithRev(rev+1))); v != "2" || again != 1 || fmt.Sprint(sent) != "[true false]" {
		t.Fatalf("at a future revision: value %q, read again %d times, sent %v: want 2, once, serializable then linearizable", v, again, sent)
	}
	if v := read(clientv3.OpGet(key), clientv3.OpGet(key, clientv3.WithRev(rev))); v != "2" || again != 1 || fmt.Sprint(sent) != "[false]" {
		t.Fatalf("one read without a revision: value %q, read again %d times, sent %v: want 2, never, one linearizable transaction", v, again, sent)
	}
}

// A Sized Fleet without a policy (a health script's CLUSTER_SIZE, nothing
// that decides on the fleet's size) counts the fleet's records only for a
// count that admits, once per admission: a refused count walks no index of
// the fleet (a node waiting for a slot counts again on every change), and
// after the checks (Recheck) the count that takes keeps the size they saw.
func TestSizedAdmissionCountsTheFleetOnce(t *testing.T) {
	var mu sync.Mutex
	walks := 0 // count-only ranges of the records
	record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if q, ok := req.(*etcdserverpb.TxnRequest); ok {
			for _, op := range q.Success {
				if rr := op.GetRequestRange(); rr != nil && rr.CountOnly && len(rr.RangeEnd) > 0 && strings.HasSuffix(string(rr.Key), "nodes/") {
					mu.Lock()
					walks++
					mu.Unlock()
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	walked := func() int { mu.Lock(); defer mu.Unlock(); w := walks; walks = 0; return w }
	c := watchedClient(t, record)
	r := newRig(t)
	for i := range 6 {
		r.record(r.fleet(fmt.Sprintf("n%d", i), "", time.Minute), policy.StateIdle, false)
	}
	sized := func(f *Fleet) { f.Client, f.Sized = c, true }
	b := r.fleet("b", "", time.Minute, sized)
	r.record(b, policy.StateNeedsReboot, true)
	a := r.fleet("a", "", time.Minute, sized)
	r.record(a, policy.StateNeedsReboot, true)
	if RecordsDir(r.ns) != r.ns+"nodes/" {
		t.Fatalf("the records' prefix is %s: the interceptor above looks for %snodes/", RecordsDir(r.ns), r.ns)
	}

	// b admitted, with the checks: one walk, the size the checks saw (8
	// records) kept by the count that takes.
	var seen []int
	ab := Admission{Fleet: b, Recheck: func(_ context.Context, _ Count, v slotinfo.Verdict) error {
		seen = append(seen, v.Policy.ClusterSize)
		return nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := ab.Admit(ctx)
	if err != nil || out.Reboot == nil {
		t.Fatalf("b: admission: %v", err)
	}
	if w := walked(); w != 1 || !slices.Equal(seen, []int{8}) || out.Count.Summary == nil || out.Count.Summary.ClusterSize != 8 || out.Verdict.Policy.ClusterSize != 8 || out.Count.RecordCount != 8 {
		t.Fatalf("b: %d walks, the checks saw %v, the outcome's summary %+v, verdict's %+v: want one walk, 8 seen and kept", w, seen, out.Count.Summary, out.Verdict.Policy)
	}
	// a, refused while b holds the one slot: no walk, no size.
	v := r.refused(a, RuleMaxHolders)
	if w := walked(); w != 0 || v.Policy.ClusterSize != 0 {
		t.Fatalf("a refused: %d walks, cluster size %d: want none counted", w, v.Policy.ClusterSize)
	}
	// Without the checks, the count that admits is sized before the take;
	// b, back, counts by its record: 8.
	x := Completion{Client: r.c, NS: r.ns, BootID: "boot-b-2", FailureWindowSec: 3600}
	if _, err := x.Complete(ctx, NewClaim(b, out.Reboot.Leases, time.Now(), 1)); err != nil {
		t.Fatal(err)
	}
	out, err = r.admit(a)
	if err != nil || out.Reboot == nil || out.Count.Summary == nil || out.Count.Summary.ClusterSize != 8 {
		t.Fatalf("a: admission %v, summary %+v: want admitted with 8 counted", err, out.Count.Summary)
	}
	if w := walked(); w != 1 {
		t.Fatalf("a admitted: %d walks, want 1", w)
	}
}
