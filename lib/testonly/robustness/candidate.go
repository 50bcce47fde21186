package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// candidate is a daemon's cycle (clusterrebootd, `crd-lock step cycle`) or a
// pipeline (`crd-lock hold --reboot-slot -- COMMAND`): the library calls
// each makes, in its order (docs/cluster-protocol.md, "cycle").
type candidate struct {
	env  *env
	spec NodeSpec
	a    *Actor
	c    *clientv3.Client
	rng  *rand.Rand
	cfg  config.Config
	now  func() time.Time
	boot int
	// claim is the slot's record in state_dir: what completes it after
	// the reboot.
	claim slot.Claim
}

// How a reboot ended.
type ending int

const (
	endAborted ending = iota // the slot was given back, nothing rebooted
	endDone                  // rebooted and completed
	endLost                  // went down and never came back
)

func (n *candidate) bootID() string {
	return fmt.Sprintf("boot-%s-%s-%d", n.spec.Name, n.spec.Machine, n.boot)
}

func (n *candidate) via() string {
	if n.spec.Kind == KindPipeline {
		return slot.ViaPipeline
	}
	return slot.ViaDaemon
}

func (n *candidate) fleet() slot.Fleet {
	f := slot.FromConfig(n.c, n.cfg, n.bootID(), n.spec.Machine, n.via())
	f.Now = n.now
	return f
}

func (n *candidate) run(ctx context.Context) {
	ctx = n.a.Context(ctx)
	if n.spec.Publish && (policy.Active(n.cfg.ClusterPolicies) || n.env.sc.percent() || n.env.sc.Waves) {
		// The daemon publishes before its first cycle: with a policy the
		// healthy nodes are those that did, with a percentage the nodes
		// known; a wave's node does not need its reboot yet.
		n.publish(ctx, policy.StateIdle, false)
	}
	reboots := 0
	for range n.spec.Attempts {
		if reboots >= n.spec.Reboots {
			return
		}
		n.a.Yield("starts a cycle")
		if n.env.sc.Waves {
			// It needs its reboot: a later wave waits for it from now.
			n.publish(ctx, policy.StateWaiting, true)
		}
		held, err := n.seat(ctx)
		if err != nil {
			n.env.sched.trace.note(n.a, "no seat: "+err.Error())
			continue
		}
		r := n.admit(ctx, held)
		if r == nil {
			n.release(ctx, held)
			continue
		}
		switch n.reboot(ctx, held, r) {
		case endLost:
			return
		case endDone:
			reboots++
		}
	}
}

// seat queues for a candidate seat of the group's line (lib/lock).
func (n *candidate) seat(ctx context.Context) (*lock.Held, error) {
	o := lock.FromConfig(n.cfg, n.bootID(), n.spec.Machine)
	o.Purpose = "reboot"
	candidateSeat(&o)
	o.Backoff = lock.Backoff{Min: time.Millisecond, Max: time.Millisecond, Rand: func() float64 { return 0 }}
	o.Now = n.now
	if n.cfg.MaxHolders.Percent > 0 {
		// A percentage's seats, as the daemon's cycle and the pipeline
		// take them (lib/slot Fleet.Seats).
		seats, err := n.fleet().Seats(ctx)
		if err != nil {
			return nil, err
		}
		o.MaxHolders = seats
	}
	held, err := lock.Acquire(ctx, n.c, o)
	if err != nil {
		return nil, err
	}
	n.a.Holding(held.Entry(), int64(held.LeaseID()))
	return held, nil
}

func (n *candidate) release(ctx context.Context, held *lock.Held) {
	_ = held.Release(ctx)
	n.a.Holding("", 0)
}

// admit runs the admission under held, counting again (after a step of
// its own) while a rule says wait and it may wait.
func (n *candidate) admit(ctx context.Context, held *lock.Held) rebootSlot {
	f := n.fleet()
	var claim slot.Claim
	for waits := 0; ; waits++ {
		a := slot.Admission{Fleet: f, Seat: held, Prepare: func(_ context.Context, l slot.Leases) error {
			claim = slot.NewClaim(f, l, n.now(), held.FencingToken())
			return nil
		}}
		out, err := a.Admit(ctx)
		r := takenReboot(out)
		n.attempt(held, out, r != nil, err)
		if err == nil && r != nil {
			n.claim = claim
			return r
		}
		var ref *slotinfo.Refusal
		if !errors.As(err, &ref) || !ref.Wait || ref.Yield || waits >= n.spec.Waits {
			return nil
		}
		n.a.Yield("keeps its seat and waits (" + ref.Rule + ")")
	}
}

// attempt records an admission for the checker.
func (n *candidate) attempt(held *lock.Held, out slot.Outcome, admitted bool, err error) {
	at := Attempt{Actor: n.a.Name, Node: n.spec.Name, Group: n.spec.Group, Wave: n.cfg.Rollout.Wave, Machine: n.spec.Machine, Boot: n.bootID(),
		Seat: held.Entry(), SeatRevision: held.FencingToken(), Revision: out.Count.Revision, Admitted: admitted}
	var ref *slotinfo.Refusal
	switch {
	case admitted:
	case errors.As(err, &ref):
		at.Rule, at.Wait, at.Yield, at.Reason = ref.Rule, ref.Wait, ref.Yield, ref.Reason
	case err != nil:
		at.Err = err.Error()
	}
	n.env.record.add(at)
	what := "admitted"
	if !admitted {
		what = "not admitted: " + at.Rule + at.Err
	}
	n.env.sched.trace.note(n.a, what)
}

// reboot runs the pre-reboot hooks, the last moment and the reboot; the
// seat is released on every way out.
func (n *candidate) reboot(ctx context.Context, held *lock.Held, r rebootSlot) ending {
	abort := func(why string) ending {
		n.env.sched.trace.note(n.a, why+": gives its slot back")
		_ = abortReboot(ctx, n.c, r)
		n.release(ctx, held)
		return endAborted
	}
	for range n.rng.IntN(3) {
		n.a.Yield("runs a pre-reboot hook")
	}
	if n.rng.Float64() < n.spec.Abort {
		return abort("a pre-reboot hook failed")
	}
	var err error
	if n.spec.Kind == KindPipeline && n.rng.IntN(3) == 0 {
		// COMMAND rebooted by other means than crd-reboot: marked started
		// once it ran.
		err = markStarted(ctx, r)
	} else {
		if n.spec.Kind == KindDaemon {
			if err := r.Renew(ctx); err != nil {
				return abort("the slot could not be renewed after the hooks (" + err.Error() + ")")
			}
		}
		err = startReboot(ctx, r)
	}
	if err != nil {
		return abort("the last moment said no (" + err.Error() + ")")
	}
	if n.spec.Publish {
		n.publish(ctx, policy.StateRebooting, true)
	}
	n.release(ctx, held)
	if n.rng.Float64() < n.spec.Loss {
		n.env.world.Doom(int64(rebootLease(r)))
		n.env.world.Gone(n.spec.Name)
		n.env.sched.trace.note(n.a, "goes down and never comes back")
		return endLost
	}
	if n.rng.Float64() < n.spec.Stay {
		// The reboot command started and failed, and the machine did not
		// go down: the slot is kept (it may still go down) until its lease
		// runs out; the next cycle is in the same boot.
		n.env.world.Doom(int64(rebootLease(r)))
		n.env.sched.trace.note(n.a, "its reboot command failed: it stays up in the same boot, its slot kept until it runs out")
		return endAborted
	}
	for range 1 + n.rng.IntN(3) {
		n.a.Yield("is down")
	}
	n.boot++
	x := slot.Completion{Client: n.c, NS: n.cfg.Namespace(), BootID: n.bootID(), WaveBakeSec: n.cfg.Rollout.WaveBakeSec, FailureWindowSec: n.cfg.Rollout.FailureWindowSec, Now: n.now}
	freed, err := x.Complete(ctx, n.claim)
	n.env.sched.trace.note(n.a, fmt.Sprintf("back: complete freed=%v err=%v", freed, err))
	if n.spec.Publish {
		n.publish(ctx, policy.StateIdle, false)
	}
	return endDone
}

// publish writes this node's health record, as the daemon's publish does,
// on a lease of three publish intervals (long: it outlives the run), with
// its index keys in the same transaction (without them as 0.1.0 wrote it,
// when Unindexed).
func (n *candidate) publish(ctx context.Context, state string, required bool) {
	rules := policy.RulesOf(n.cfg)
	rec := policy.NodeRecord{Node: n.spec.Name, State: state, RebootRequired: required, LastCheck: n.now().UTC(), Lock: n.cfg.LockKey,
		Group: n.spec.Group, Wave: n.cfg.Rollout.Wave, BootID: n.bootID(), MachineID: n.spec.Machine, Rules: &rules, V: policy.ProtocolVersion}
	val, _ := json.Marshal(rec)
	g, err := n.c.Grant(ctx, 600)
	if err != nil {
		return
	}
	ns := n.cfg.Namespace()
	ops := []clientv3.Op{clientv3.OpPut(slot.RecordKey(ns, n.spec.Name), string(val), clientv3.WithLease(g.ID))}
	if !n.spec.Unindexed {
		// Each publication is on a lease of its own: a busy key left on
		// the last one only costs a reader a record's read.
		ops = append(ops, append(slot.IndexOps(ns, n.spec.Name, state, g.ID), slot.GroupOp(ns, n.spec.Group, n.spec.Name, g.ID))...)
		ops = append(ops, slot.BusyOps(ns, rec, nil, g.ID)...)
	}
	_, _ = n.c.Txn(ctx).Then(ops...).Commit()
}
