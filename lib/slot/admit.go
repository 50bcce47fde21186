package slot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// Admission is one entry point's way to its reboot slot: the one function
// every way into a reboot goes through (docs/rollout.md). The entry point
// fills in what it is and what it can do; Admit applies every rule.
type Admission struct {
	Fleet Fleet
	// Seat is the lock seat the slot is taken under (the take is guarded by
	// it). Nil only in tests of the rules.
	Seat *lock.Held
	// Wait: keep the seat and wait on a verdict that waits (daemon,
	// pipeline); else it is returned as a refusal (FleetLock, simulate).
	Wait bool
	// Recheck runs the node-local rules (windows, detectors, the under-lock
	// gate) once a count admits, and again after every wait, before the
	// slot is taken on a fresh count; nil: none.
	Recheck func(ctx context.Context, c Count, v slotinfo.Verdict) error
	// Prepare records the leases before the slot exists (the claim in
	// state_dir), so that whatever follows, the lease that can delete it is
	// known. An error stops before the take.
	Prepare func(ctx context.Context, l Leases) error
	// DryRun stops where the slot would be taken.
	DryRun bool
	// Renewal re-admits a slot this node already holds (FleetLock's holder
	// asking again after its slot's first TTL): no new start or pacing
	// record is written.
	Renewal bool
	// Started takes the slot with its reboot started (FleetLock: the
	// client reboots once it is granted); else the entry point marks it
	// right before its reboot command (Reboot.Start).
	Started bool
	// TicketTTL, when set, gives this node's ticket in the fleet's line a
	// lease of its own, renewed by each admission (FleetLock: a client's
	// place outlives the request it asked in); else it is on the seat's.
	TicketTTL time.Duration
	// OnWait is told of every verdict the admission waits on.
	OnWait func(slotinfo.Verdict)
	// Recount bounds each wait without an event (default lock.Recheck).
	Recount time.Duration
}

// Leases are the leases a take writes on, granted before it. Failure
// carries the failure record of this node's own earlier reboot that did
// not complete in time, when the take found one (an abort keeps it).
type Leases struct {
	Slot, Inflight, Start, Paced, Failure clientv3.LeaseID
}

// Outcome is what Admit decided on: the last count and verdict, and the
// reboot when its slot was taken.
type Outcome struct {
	Count   Count
	Verdict slotinfo.Verdict
	Reboot  *Reboot
	// Halted: this admission recorded the halt (it alone sends
	// rollout_halted).
	Halted bool
}

// Admit counts, decides and takes: until a slot is taken (Outcome.Reboot), a
// rule refuses (a *Refusal), the node-local re-check fails (its error), or
// ctx ends. Every error leaves no slot and no lease of this call behind.
func (a *Admission) Admit(ctx context.Context) (Outcome, error) {
	f := a.Fleet
	// Without a policy the fleet's size decides nothing: a Sized Fleet's
	// counts leave it out, and a count that admits reads it (size), once:
	// after the checks, the summary they saw.
	counting := f
	counting.Sized = false
	var out Outcome
	var seen *policy.Summary // the size the checks saw
	var seenRecords int
	rechecked := false
	for {
		c, err := counting.Count(ctx, a.seatKey())
		if err != nil {
			return out, err
		}
		v := f.Decide(c)
		if v.Admit && f.Sized && c.Summary == nil && !c.Records {
			if rechecked && seen != nil {
				c.Summary, c.RecordCount = seen, seenRecords
			} else if err := f.size(ctx, &c); errors.Is(err, rpctypes.ErrCompacted) {
				continue
			} else if err != nil {
				return out, err
			}
			seen, seenRecords = c.Summary, c.RecordCount
			v = f.Decide(c)
		}
		out.Count, out.Verdict = c, v
		if v.HaltNew && f.Halt(ctx, c, v) {
			out.Halted = true
		}
		a.ticket(ctx, c, v)
		if !v.Admit {
			if !v.Wait || !a.Wait {
				return out, v.Err()
			}
			v.Until = f.Until(ctx, v.Marks)
			out.Verdict = v
			if a.OnWait != nil {
				a.OnWait(v)
			}
			if err := f.WaitChange(ctx, c.Revision, a.recount(v.Until)); err != nil {
				return out, err
			}
			rechecked = false
			continue
		}
		if a.Recheck != nil && !rechecked {
			if err := a.Recheck(ctx, c, v); err != nil {
				if t := c.ticketOf(f.Node); t != nil {
					// Not waiting any more (a window, a detector, the
					// gate): its place would hold the others back.
					rctx, cancel := f.rpc(ctx)
					a.dropTicket(rctx, t)
					cancel()
				}
				return out, err
			}
			rechecked = true
			continue // time passed: count again
		}
		if a.DryRun {
			return out, nil
		}
		r, err := a.take(ctx, c, v)
		if errors.Is(err, ErrChanged) {
			rechecked = false
			continue
		}
		if err != nil {
			return out, err
		}
		out.Reboot = r
		return out, nil
	}
}

func (a *Admission) seatKey() string {
	if a.Seat == nil {
		return ""
	}
	return a.Seat.Entry()
}

func (a *Admission) recount(until time.Time) time.Duration {
	d := a.Recount
	if d <= 0 {
		d = lock.Recheck
	}
	if !until.IsZero() {
		if left := time.Until(until) + 100*time.Millisecond; left < d {
			d = max(left, 100*time.Millisecond)
		}
	}
	return d
}

// grant gets the leases of one take: the slot's (reboot_slot_ttl_sec, never
// kept alive), the in-flight record's (the slot's TTL and the failure
// window: it outlives the slot), the start's (an hour) and, with
// min_interval_sec, the pacing record's.
func (a *Admission) grant(ctx context.Context, e policy.Effective, retake bool) (Leases, error) {
	f := a.Fleet
	var l Leases
	if f.TTL < 2*time.Second {
		return l, exitcode.Errorf(exitcode.Config, "slot: reboot_slot_ttl_sec %s is below etcd's minimum of 2s", f.TTL)
	}
	ttls := []struct {
		id  *clientv3.LeaseID
		sec int64
	}{
		{&l.Slot, int64(f.TTL / time.Second)},
		{&l.Inflight, int64(f.TTL/time.Second) + int64(max(e.FailureWindowSec, 60))},
	}
	if !retake {
		ttls = append(ttls, struct {
			id  *clientv3.LeaseID
			sec int64
		}{&l.Start, 3600})
		if e.MinIntervalSec > 0 {
			ttls = append(ttls, struct {
				id  *clientv3.LeaseID
				sec int64
			}{&l.Paced, int64(max(e.MinIntervalSec, 2))})
		}
	}
	for _, t := range ttls {
		rctx, cancel := f.rpc(ctx)
		g, err := f.Client.Grant(rctx, t.sec)
		cancel()
		if err != nil {
			f.revoke(l)
			return Leases{}, err
		}
		*t.id = g.ID
	}
	return l, nil
}

// revoke gives back leases of a take that did not happen (best effort:
// they expire by themselves).
func (f Fleet) revoke(l Leases) {
	ctx, cancel := context.WithTimeout(context.Background(), f.RPCTimeout)
	defer cancel()
	for _, id := range []clientv3.LeaseID{l.Slot, l.Inflight, l.Start, l.Paced, l.Failure} {
		if id != 0 {
			_, _ = f.Client.Revoke(ctx, id)
		}
	}
}

// take writes the slot, its in-flight record and the pacing records in one
// transaction that succeeds only while the seat is this node's and nothing
// the verdict was decided on changed since the count (guards): no slot was
// written and none of the counted slots is gone, no failure, in-flight
// record, halt or acknowledgement was written, nor the pause or this node's
// hold, nor (when the verdict depended on them) a pacing, start or wave
// record. Each guard covers keys whose number the budgets bound, not the
// fleet's size: the completions (<ns>rollout/done/, one per node rebooted
// within the failure window) and the tickets are not among them.
//
// A slot this machine already holds (its own, this boot's: a FleetLock
// client asked through two servers at once, a re-admission) is taken again
// on new leases without a new start or pacing record: one reboot, counted
// once.
func (a *Admission) take(ctx context.Context, c Count, v slotinfo.Verdict) (*Reboot, error) {
	f := a.Fleet
	if f.BootID == "" {
		return nil, exitcode.Errorf(exitcode.RebootFailed, "slot: this machine's boot id is unknown; a slot without it could not be told apart from another machine's")
	}
	retake := a.Renewal || f.ownSlot(c.Mine)
	l, err := a.grant(ctx, v.Rules, retake)
	if err != nil {
		var coded *exitcode.Error
		if errors.As(err, &coded) {
			return nil, err
		}
		return nil, fmt.Errorf("granting the reboot slot's leases: %w", err)
	}
	if a.Prepare != nil {
		if err := a.Prepare(ctx, l); err != nil {
			f.revoke(l)
			return nil, err
		}
	}
	now := f.now().UTC()
	rules := f.Rules
	val, _ := json.Marshal(Value{V: policy.ProtocolVersion, Node: f.Node, Lock: f.Lock, Group: f.Group, Since: now, BootID: f.BootID, MachineID: f.MachineID,
		MaxHolders: v.Rules.MaxHolders, MaxTotal: v.Rules.MaxTotal, Wave: f.Wave, Via: f.Via, Rules: &rules})
	in := Inflight{V: policy.ProtocolVersion, Node: f.Node, Group: f.Group, Wave: f.Wave, Via: f.Via, Lease: fmt.Sprintf("%x", int64(l.Slot)), BootID: f.BootID, Since: now, TTLSec: int(f.TTL / time.Second)}
	if a.Started {
		in.Started, in.StartedAt = true, &now
	}
	if a.Seat != nil {
		in.FencingToken = a.Seat.FencingToken()
	}
	ival, _ := json.Marshal(in)
	mark, _ := json.Marshal(slotinfo.Mark{Node: f.Node, Group: f.Group, Wave: f.Wave, Since: now})
	cmps := a.guards(c, v)
	var elseOps []clientv3.Op
	if a.Seat != nil {
		cmps = append(cmps, a.Seat.IsOwnerCmp())
		elseOps = append(elseOps, clientv3.OpGet(a.Seat.Entry(), clientv3.WithCountOnly()))
	}
	ops := []clientv3.Op{
		clientv3.OpPut(f.Key(), string(val), clientv3.WithLease(l.Slot)),
		clientv3.OpPut(InflightKey(f.NS, f.Node), string(ival), clientv3.WithLease(l.Inflight)),
		clientv3.OpDelete(QueueDir(f.NS) + f.Node),
	}
	// This node's own earlier reboot that did not complete in time is a
	// failure: the new in-flight record must not erase it.
	for _, x := range v.Failures {
		if x.Node != f.Node || x.Recorded {
			continue
		}
		if l.Failure == 0 {
			rctx, cancel := f.rpc(ctx)
			g, gerr := f.Client.Grant(rctx, int64(max(v.Rules.FailureWindowSec, 60)))
			cancel()
			if gerr != nil {
				f.revoke(l)
				return nil, gerr
			}
			l.Failure = g.ID
		}
		x.Recorded, x.By = true, f.Node
		fval, _ := json.Marshal(x)
		ops = append(ops, clientv3.OpPut(FailureKey(f.NS, f.Node, idSuffix(FailureID(f.NS, x))), string(fval), clientv3.WithLease(l.Failure)))
	}
	if l.Start != 0 {
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s%s/%x", StartsDir(f.NS), f.Node, int64(l.Start)), string(mark), clientv3.WithLease(l.Start)))
	}
	if l.Paced != 0 {
		ops = append(ops, clientv3.OpPut(PacedDir(f.NS)+f.Node, string(mark), clientv3.WithLease(l.Paced)))
	}
	rctx, cancel := f.rpc(ctx)
	resp, err := f.Client.Txn(rctx).If(cmps...).Then(ops...).Else(elseOps...).Commit()
	cancel()
	if err != nil {
		// The outcome is unknown: revoking the leases removes whatever was written.
		f.revoke(l)
		return nil, err
	}
	if !resp.Succeeded {
		f.revoke(l)
		if a.Seat != nil {
			if r := resp.Responses[0].GetResponseRange(); r != nil && r.Count == 0 {
				return nil, ErrSeatLost
			}
		}
		return nil, ErrChanged
	}
	if retake && c.Mine != nil && c.Mine.Lease != 0 && c.Mine.Lease != int64(l.Slot) {
		// The slot moved to the new lease: the old one holds nothing of
		// this reboot any more (best effort: it runs out by itself).
		f.revoke(Leases{Slot: clientv3.LeaseID(c.Mine.Lease)})
	}
	var parsed Value
	_ = json.Unmarshal(val, &parsed)
	return &Reboot{f: f, Key: f.Key(), Lease: l.Slot, Leases: l, Value: parsed, InflightRevision: resp.Header.Revision, Started: a.Started}, nil
}

// guards are the take's conditions: everything the verdict on count c
// counted is as it was (take).
func (a *Admission) guards(c Count, v slotinfo.Verdict) []clientv3.Cmp {
	f := a.Fleet
	next := c.Revision + 1
	unchanged := func(prefix string) clientv3.Cmp {
		return clientv3.Compare(clientv3.ModRevision(prefix), "<", next).WithPrefix()
	}
	cmps := []clientv3.Cmp{
		unchanged(Dir(f.NS)),
		unchanged(InflightDir(f.NS)),
		unchanged(FailuresDir(f.NS)),
		unchanged(HaltsDir(f.NS)),
		clientv3.Compare(clientv3.ModRevision(LegacyHaltKey(f.NS)), "<", next),
		clientv3.Compare(clientv3.ModRevision(AckKey(f.NS)), "<", next),
		clientv3.Compare(clientv3.ModRevision(PauseKey(f.NS)), "<", next),
		clientv3.Compare(clientv3.ModRevision(HoldKey(f.NS, f.Node)), "<", next),
	}
	// A slot whose lease ran out since the count is deleted without changing
	// any other key's revision: each counted slot must still be the one
	// counted (its in-flight record would now read as a failure).
	for _, s := range c.Slots {
		if s.CreateRevision != 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.Key), "=", s.CreateRevision))
		}
	}
	if v.Rules.MinIntervalSec > 0 {
		cmps = append(cmps, unchanged(PacedDir(f.NS)))
	}
	if v.Rules.MaxStartsPerHour > 0 {
		cmps = append(cmps, unchanged(StartsDir(f.NS)))
	}
	if f.Wave > 0 {
		cmps = append(cmps, unchanged(WaveDoneDir(f.NS)))
	}
	return cmps
}

// ownSlot reports whether m is this machine's own slot of this boot, lock
// and group.
func (f Fleet) ownSlot(m *Parsed) bool {
	return m != nil && m.Bound && f.BootID != "" && m.BootID == f.BootID && m.Lock == f.Lock && m.Group == f.Group
}

// Halt records the halt of this node's scope in this node's own halt key,
// only while no halt was written since the count (two admissions that find
// the budget spent at once write one halt, and one of them notifies); it
// reports whether this call wrote it (then this node alone notifies). The
// older versions' key is written beside it when absent, for the nodes that
// read only that one (best effort: a per-node etcd role may not write it).
func (f Fleet) Halt(ctx context.Context, c Count, v slotinfo.Verdict) bool {
	h := Halt{V: policy.ProtocolVersion, Reason: HaltReason(v.Failures, v.Rules), Scope: v.Rules.FailureScope, Failures: v.Failures, Since: f.now().UTC(), By: f.Node}
	if h.Scope == config.ScopeGroup {
		h.Group = f.Group
	}
	val, _ := json.Marshal(h)
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	key := HaltKey(f.NS, f.Node, ScopeID(h.Scope, h.Group))
	resp, err := f.Client.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(HaltsDir(f.NS)), "<", c.Revision+1).WithPrefix()).
		Then(clientv3.OpPut(key, string(val))).Commit()
	if err != nil || !resp.Succeeded {
		return false
	}
	_, _ = f.Client.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(LegacyHaltKey(f.NS)), "=", 0)).
		Then(clientv3.OpPut(LegacyHaltKey(f.NS), string(val))).Commit()
	return true
}

// ticket keeps this node's place in a line while it waits for a budget
// (the fleet's, or a FleetLock client's group's), and while it waits on the
// pacing after it; it gives the place up otherwise (best effort: a ticket
// left behind ends with its lease).
func (a *Admission) ticket(ctx context.Context, c Count, v slotinfo.Verdict) {
	f := a.Fleet
	mine := c.ticketOf(f.Node)
	if mine != nil && !v.Ticket && v.Wait && (v.Rule == RuleMinInterval || v.Rule == RuleRate) {
		v.Ticket, v.TicketKind = true, mine.Kind
	}
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	key := QueueDir(f.NS) + f.Node
	switch {
	case v.Ticket && mine != nil:
		if a.TicketTTL > 0 && mine.Lease != 0 {
			_, _ = f.Client.KeepAliveOnce(rctx, clientv3.LeaseID(mine.Lease))
		}
		if mine.Kind != v.TicketKind {
			// The same place (its create revision), for the other budget.
			val, _ := json.Marshal(Ticket{Node: f.Node, Group: f.Group, Kind: v.TicketKind, Via: f.Via, Since: mine.Since})
			_, _ = f.Client.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", mine.CreateRevision)).
				Then(clientv3.OpPut(key, string(val), clientv3.WithIgnoreLease())).Commit()
		}
	case v.Ticket:
		var lease clientv3.LeaseID
		switch {
		case a.TicketTTL > 0:
			g, err := f.Client.Grant(rctx, int64(max(a.TicketTTL/time.Second, 2)))
			if err != nil {
				return
			}
			lease = g.ID
		case a.Seat != nil:
			lease = a.Seat.LeaseID()
		default:
			return
		}
		val, _ := json.Marshal(Ticket{Node: f.Node, Group: f.Group, Kind: v.TicketKind, Via: f.Via, Since: f.now().UTC()})
		_, _ = f.Client.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease))).Commit()
	case mine != nil && !v.Admit:
		a.dropTicket(rctx, mine)
	}
}

// dropTicket gives up this node's ticket, if it is still the one read.
func (a *Admission) dropTicket(ctx context.Context, t *Ticket) {
	_, _ = a.Fleet.Client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(t.Key), "=", t.CreateRevision)).
		Then(clientv3.OpDelete(t.Key)).Commit()
}

// Enqueue keeps node's place in its group's line for a FleetLock client
// that could not even get a seat of the group's lock (the line busy): a
// group ticket on a lease of ttl, or the lease of the one it has renewed.
func (f Fleet) Enqueue(ctx context.Context, ttl time.Duration) {
	key := QueueDir(f.NS) + f.Node
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	resp, err := f.Client.Get(rctx, key)
	if err != nil {
		return
	}
	if len(resp.Kvs) > 0 {
		if l := resp.Kvs[0].Lease; l != 0 {
			_, _ = f.Client.KeepAliveOnce(rctx, clientv3.LeaseID(l))
		}
		return
	}
	g, err := f.Client.Grant(rctx, int64(max(ttl/time.Second, 2)))
	if err != nil {
		return
	}
	val, _ := json.Marshal(Ticket{Node: f.Node, Group: f.Group, Kind: TicketGroup, Via: f.Via, Since: f.now().UTC()})
	_, _ = f.Client.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(g.ID))).Commit()
}

// Dequeue gives up node's place in a line, if the ticket there is this
// entry point's (a FleetLock client's steady-state: it needs no reboot any
// more, so it must not keep others of its group waiting). A ticket of
// another entry point under the same name is left alone.
func (f Fleet) Dequeue(ctx context.Context) error {
	key := QueueDir(f.NS) + f.Node
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	resp, err := f.Client.Get(rctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return err
	}
	var t Ticket
	if json.Unmarshal(resp.Kvs[0].Value, &t) != nil || t.Via != f.Via {
		return nil
	}
	_, err = f.Client.Txn(rctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)).
		Then(clientv3.OpDelete(key)).Commit()
	return err
}

// Until is when the marks a paced node waits for end: the earliest end of
// their leases, as etcd times them (zero when it cannot tell).
func (f Fleet) Until(ctx context.Context, marks []slotinfo.Mark) time.Time {
	var earliest time.Time
	for _, m := range marks {
		if m.Lease == 0 {
			continue
		}
		rctx, cancel := f.rpc(ctx)
		r, err := f.Client.TimeToLive(rctx, clientv3.LeaseID(m.Lease))
		cancel()
		if err != nil || r.TTL < 0 {
			continue
		}
		t := f.now().Add(time.Duration(r.TTL) * time.Second)
		if earliest.IsZero() || t.Before(earliest) {
			earliest = t
		}
	}
	return earliest
}

// WaitChange blocks until anything the rules read changes after rev — a
// slot, a seat of this node's group's line, a rollout record, a ticket,
// the pause or this node's hold — or for at most d (a watch can lose a
// deletion on some etcd releases: see lock.Recheck). It watches what the
// admission reads, not the whole lock tree: the other groups' lines (their
// waiters come and go all the time in a large fleet) wake nobody here. A
// broken watch returns after a pause of a second, so the caller counts
// again rather than spin.
func (f Fleet) WaitChange(ctx context.Context, rev int64, d time.Duration) error {
	if d <= 0 {
		d = lock.Recheck
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	from := clientv3.WithRev(rev + 1)
	type watch struct {
		ch clientv3.WatchChan
		// relevant filters the events (nil: every one counts).
		relevant func(key string) bool
	}
	ungroupedLine := func(key string) bool { return f.Group != "" || !isNested(f.Lock, key) }
	watches := []watch{
		{f.Client.Watch(wctx, Dir(f.NS), clientv3.WithPrefix(), from), nil},
		{f.Client.Watch(wctx, f.SeatKey()+"/", clientv3.WithPrefix(), from), ungroupedLine},
		{f.Client.Watch(wctx, RolloutDir(f.NS), clientv3.WithPrefix(), from), nil},
		{f.Client.Watch(wctx, QueueDir(f.NS), clientv3.WithPrefix(), from), nil},
		{f.Client.Watch(wctx, PauseKey(f.NS), from), nil},
		{f.Client.Watch(wctx, HoldKey(f.NS, f.Node), from), nil},
	}
	t := time.NewTimer(d)
	defer t.Stop()
	got := make(chan clientv3.WatchResponse, len(watches))
	for _, w := range watches {
		go func() {
			for {
				select {
				case wr, ok := <-w.ch:
					if !ok {
						wr = clientv3.WatchResponse{Canceled: true}
					}
					if w.relevant != nil && !wr.Canceled && wr.Err() == nil && !anyRelevant(wr, w.relevant) {
						continue
					}
					got <- wr
					return
				case <-wctx.Done():
					return
				}
			}
		}()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	case wr := <-got:
		if wr.Canceled || wr.Err() != nil {
			p := time.NewTimer(time.Second)
			defer p.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-p.C:
			}
		}
	}
	return nil
}

// anyRelevant reports whether any event of wr is about a key relevant says.
func anyRelevant(wr clientv3.WatchResponse, relevant func(string) bool) bool {
	for _, ev := range wr.Events {
		if relevant(string(ev.Kv.Key)) {
			return true
		}
	}
	return false
}
