package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// FaultKind names a fault the scheduler runs between two requests.
type FaultKind string

// The faults.
const (
	// FaultExpireSlot: a reboot slot's lease runs out (it is revoked): its
	// node is lost, or froze past reboot_slot_ttl_sec. A slot of a node
	// that went down never to return is drawn first.
	FaultExpireSlot FaultKind = "expire-slot"
	// FaultFreezeSeat: the actor's process freezes past its lock seat's
	// lease right after its request (the lease is revoked), and it is
	// delayed for a while.
	FaultFreezeSeat FaultKind = "freeze-seat"
	// FaultStall: the actor is delayed: the others go first for a while.
	FaultStall FaultKind = "stall"
	// FaultPause: an operator pauses reboots (<ns>disable), or lifts the
	// pause.
	FaultPause FaultKind = "pause"
	// FaultHold: an operator holds a node (<ns>holds/<node>), or releases
	// it.
	FaultHold FaultKind = "hold"
	// FaultEndPacing: a pacing mark's, a start record's or a wave's
	// completion mark's lease runs out (it is revoked): the group's bake
	// time after a reboot's start, the hour a start counts for
	// max_starts_per_hour, or wave_bake_sec after a completion, is over.
	FaultEndPacing FaultKind = "end-pacing"
	// FaultEndRecord: the health record of a node that went down never
	// to return runs out (its lease is revoked, with the index keys on
	// it): the node has been gone for longer than its record's lease
	// (three publish intervals).
	FaultEndRecord FaultKind = "end-record"
)

// Fault is one fault drawn by the scheduler.
type Fault struct {
	Kind FaultKind
	// Pick chooses the target among those there are when it runs.
	Pick uint64
	// Steps is how long a delay lasts.
	Steps int
}

// FaultRates are the chances of each fault at each step (0 to 1).
type FaultRates struct {
	// ExpireAfterCount is the chance that a slot runs out right after an
	// admission's count (before its take); Expire at any other step.
	ExpireAfterCount, Expire float64
	// Freeze is FaultFreezeSeat's chance at a seat holder's request, Stall
	// FaultStall's, Pause FaultPause's and Hold FaultHold's at any step;
	// EndPacing FaultEndPacing's at any step (drawn only when it is not 0,
	// so that the schedules of scenarios without pacing stay the same), and
	// EndRecord FaultEndRecord's once a node is gone for ever (the same).
	Freeze, Stall, Pause, Hold, EndPacing, EndRecord float64
}

// World is the etcd the actors share, as the faults and the checker see
// it: its namespace, a client of its own (outside the schedule), the nodes
// that went down never to return.
type World struct {
	// NS is the namespace, ending in "/".
	NS string
	// Client is the world's own client: faults and history.
	Client *clientv3.Client
	// Rates are the faults' chances.
	Rates FaultRates
	// Nodes are the node names a hold may name.
	Nodes []string
	// MarkDirs are the prefixes of the records FaultEndPacing ends.
	MarkDirs []string
	names    *names

	mu sync.Mutex
	// doomed are the slot leases of nodes that will never come back.
	doomed map[int64]bool
	// gone are the nodes that went down never to return, in that order:
	// the records FaultEndRecord may end.
	gone []string
	// shared are the names of more than one machine (Gone leaves them out).
	shared map[string]bool
}

// NewWorld is the world of namespace ns, empty at revision base.
func NewWorld(c *clientv3.Client, ns string, base int64, rates FaultRates, nodes []string) *World {
	return &World{NS: ns, Client: c, Rates: rates, Nodes: nodes, names: newNames(ns, base), doomed: map[int64]bool{}}
}

// Doom marks a slot lease as one whose node never comes back: its
// expiry is drawn first.
func (w *World) Doom(lease int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.doomed[lease] = true
}

// Gone marks node as gone for ever: its health record may run out
// (FaultEndRecord). Not a name that another machine still runs under: that
// machine keeps the record alive.
func (w *World) Gone(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.shared[node] && !slices.Contains(w.gone, node) {
		w.gone = append(w.gone, node)
	}
}

// someGone reports whether some node has gone for ever (Gone).
func (w *World) someGone() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.gone) > 0
}

// draw decides the faults around a's next step r (called with the
// scheduler's lock held; the faults run later, outside it).
func (w *World) draw(rng *rand.Rand, a *Actor, r request, others bool) (before, after *Fault) {
	f := func(k FaultKind) *Fault { return &Fault{Kind: k, Pick: rng.Uint64(), Steps: 2 + rng.IntN(6)} }
	rates := w.Rates
	if others && rng.Float64() < rates.Stall {
		return f(FaultStall), nil
	}
	isCount := false
	if q, ok := r.req.(*pb.TxnRequest); ok {
		isCount = txnKind(w.NS, q) == txnCount
	}
	switch {
	case isCount && rng.Float64() < rates.ExpireAfterCount:
		after = f(FaultExpireSlot)
	case rng.Float64() < rates.Expire:
		if rng.IntN(2) == 0 {
			before = f(FaultExpireSlot)
		} else {
			after = f(FaultExpireSlot)
		}
	case a.seat != nil && r.method != "" && rng.Float64() < rates.Freeze:
		after = f(FaultFreezeSeat)
	case rng.Float64() < rates.Pause:
		before = f(FaultPause)
	case rng.Float64() < rates.Hold:
		before = f(FaultHold)
	case rates.EndPacing > 0 && rng.Float64() < rates.EndPacing:
		before = f(FaultEndPacing)
	case rates.EndRecord > 0 && w.someGone() && rng.Float64() < rates.EndRecord:
		before = f(FaultEndRecord)
	}
	return before, after
}

// run carries out fault x around a's step, with the world's own client.
func (w *World) run(a *Actor, x Fault, t *Trace) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var what string
	var err error
	switch x.Kind {
	case FaultExpireSlot:
		what, err = w.expireSlot(ctx, x.Pick)
	case FaultFreezeSeat:
		what, err = w.freeze(ctx, a, x)
	case FaultPause:
		what, err = w.toggle(ctx, slot.PauseKey(w.NS), `{"reason":"a fault of the robustness test","by":"robustness"}`)
	case FaultHold:
		node := w.Nodes[x.Pick%uint64(len(w.Nodes))]
		what, err = w.toggle(ctx, slot.HoldKey(w.NS, node), `{"reason":"a fault of the robustness test","by":"robustness"}`)
	case FaultEndPacing:
		what, err = w.endPacing(ctx, x.Pick)
	case FaultEndRecord:
		what, err = w.endRecord(ctx, x.Pick)
	}
	if err != nil {
		what = fmt.Sprintf("%s failed: %v", what, err)
	}
	if what != "" {
		t.fault(x, what)
	}
}

// expireSlot revokes one slot's lease: a doomed one when there is one.
func (w *World) expireSlot(ctx context.Context, pick uint64) (string, error) {
	resp, err := w.Client.Get(ctx, slot.Dir(w.NS), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) == 0 {
		return "", err
	}
	kvs := resp.Kvs
	w.mu.Lock()
	var doomed []int
	for i, kv := range kvs {
		if w.doomed[kv.Lease] {
			doomed = append(doomed, i)
		}
	}
	w.mu.Unlock()
	i := int(pick % uint64(len(kvs)))
	if len(doomed) > 0 && pick%4 != 0 {
		i = doomed[int(pick/4)%len(doomed)]
	}
	kv := kvs[i]
	what := fmt.Sprintf("the slot %s runs out (its lease %s is revoked)", w.names.key(string(kv.Key)), w.names.lease(kv.Lease))
	if kv.Lease == 0 {
		return what, fmt.Errorf("the slot has no lease")
	}
	_, err = w.Client.Revoke(ctx, clientv3.LeaseID(kv.Lease))
	return what, err
}

// endPacing revokes the lease of one pacing mark or start record (of
// MarkDirs): its time is over.
func (w *World) endPacing(ctx context.Context, pick uint64) (string, error) {
	return w.runOut(ctx, pick, "the record %s", w.MarkDirs, clientv3.WithPrefix())
}

// endRecord revokes the lease of the health record of one node gone for
// ever that still has one.
func (w *World) endRecord(ctx context.Context, pick uint64) (string, error) {
	w.mu.Lock()
	var keys []string
	for _, node := range w.gone {
		keys = append(keys, slot.RecordKey(w.NS, node))
	}
	w.mu.Unlock()
	return w.runOut(ctx, pick, "the health record %s of a node gone for ever", keys)
}

// runOut revokes the lease of one of the keys read with opts (picked by
// pick; none when there are none): name is the trace's name for it, with
// %s for its key.
func (w *World) runOut(ctx context.Context, pick uint64, name string, keys []string, opts ...clientv3.OpOption) (string, error) {
	var kvs []*mvccpb.KeyValue
	for _, k := range keys {
		resp, err := w.Client.Get(ctx, k, opts...)
		if err != nil {
			return "", err
		}
		kvs = append(kvs, resp.Kvs...)
	}
	if len(kvs) == 0 {
		return "", nil
	}
	kv := kvs[int(pick%uint64(len(kvs)))]
	what := fmt.Sprintf(name, w.names.key(string(kv.Key))) + fmt.Sprintf(" runs out (its lease %s is revoked)", w.names.lease(kv.Lease))
	if kv.Lease == 0 {
		return what, fmt.Errorf("it has no lease")
	}
	_, err := w.Client.Revoke(ctx, clientv3.LeaseID(kv.Lease))
	return what, err
}

// freeze revokes a's seat lease and delays a: a process frozen past its
// seat's lease.
func (w *World) freeze(ctx context.Context, a *Actor, x Fault) (string, error) {
	a.sched.mu.Lock()
	seat := a.seat
	if seat != nil {
		a.stall = x.Steps
	}
	a.sched.mu.Unlock()
	if seat == nil {
		return "", nil
	}
	what := fmt.Sprintf("%s freezes past its seat's lease (%s revoked) for %d steps", a.Name, w.names.key(seat.entry), x.Steps)
	_, err := w.Client.Revoke(ctx, clientv3.LeaseID(seat.lease))
	return what, err
}

// toggle puts key (with value) when it is absent, deletes it otherwise.
func (w *World) toggle(ctx context.Context, key, value string) (string, error) {
	resp, err := w.Client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value)).Else(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return "toggle " + w.names.key(key), err
	}
	if resp.Succeeded {
		return "put " + w.names.key(key), nil
	}
	return "delete " + w.names.key(key), nil
}

// anyGone reports whether any of keys is absent.
func (w *World) anyGone(ctx context.Context, keys []string) (bool, error) {
	ops := make([]clientv3.Op, 0, len(keys))
	for _, k := range keys {
		ops = append(ops, clientv3.OpGet(k, clientv3.WithCountOnly()))
	}
	resp, err := w.Client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	for _, r := range resp.Responses {
		if r.GetResponseRange().Count == 0 {
			return true, nil
		}
	}
	return false, nil
}

// sortedNames is a copy of names, sorted.
func sortedNames(names []string) []string {
	out := append([]string(nil), names...)
	sort.Strings(out)
	return out
}

// clean removes what the run left in etcd once its history is read: the
// namespace's keys, the leases of the run (those the schedule met and
// those of its keys), and the revisions before now (compacted), so that a
// long exploration on one etcd does not slow down as it goes.
func (w *World) clean(ctx context.Context) error {
	resp, err := w.Client.Get(ctx, w.NS, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("robustness: cleaning up %s: %w", w.NS, err)
	}
	leases := map[int64]bool{}
	for _, kv := range resp.Kvs {
		if kv.Lease != 0 {
			leases[kv.Lease] = true
		}
	}
	w.names.mu.Lock()
	for id := range w.names.leases {
		leases[id] = true
	}
	w.names.mu.Unlock()
	for id := range leases {
		_, _ = w.Client.Revoke(ctx, clientv3.LeaseID(id)) // gone already: fine
	}
	del, err := w.Client.Delete(ctx, w.NS, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("robustness: cleaning up %s: %w", w.NS, err)
	}
	if _, err := w.Client.Compact(ctx, del.Header.Revision); err != nil {
		return fmt.Errorf("robustness: compacting etcd after the run in %s: %w", w.NS, err)
	}
	return nil
}

// doomKey dooms the lease of the slot at key (a FleetLock client that went
// down never to return: its server took the slot).
func (w *World) doomKey(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := w.Client.Get(ctx, key); err == nil && len(resp.Kvs) > 0 {
		w.Doom(resp.Kvs[0].Lease)
	}
}
