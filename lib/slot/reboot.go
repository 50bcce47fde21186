package slot

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// Reboot is one reboot's life in its slot, from the take (Admission.Admit)
// to its end, the same for every entry point (the daemon's cycle, the
// pipeline's `crd-lock hold --reboot-slot`, the FleetLock server):
//
//	take ─► Renew* ─► Start ─► (the reboot command; the node goes down)
//	  │                 │
//	  └──► Abort ◄──────┘ (refused, or anything before the command failed)
//
// and after the boot, from the claim in state_dir, Completion.Complete (or
// Keep while its post-reboot checks run). Each entry point keeps only how
// it waits and how it reports.
type Reboot struct {
	f Fleet
	// Key and Lease identify the slot; Value is what was written.
	Key   string
	Lease clientv3.LeaseID
	Value Value
	// Leases are every lease the take wrote on; InflightRevision is the
	// revision the in-flight record was written at.
	Leases           Leases
	InflightRevision int64
	// Started: Start (or the take, for FleetLock) marked it started.
	Started bool
}

// Renew gives the slot its whole TTL again, and its in-flight record with
// it: the record must outlive the slot by the failure window, or a node
// lost after a renewal would leave a slot that ends with nothing to say it
// was a failure. ErrExpired: the slot's lease is gone.
func (r *Reboot) Renew(ctx context.Context) error {
	rctx, cancel := r.f.rpc(ctx)
	defer cancel()
	return renew(rctx, r.f.Client, r.Leases)
}

// renew keeps the slot's lease and then the in-flight record's alive.
func renew(ctx context.Context, c *clientv3.Client, l Leases) error {
	resp, err := c.KeepAliveOnce(ctx, l.Slot)
	if isLeaseNotFound(err) || (err == nil && resp.TTL <= 0) {
		return ErrExpired
	}
	if err != nil {
		return err
	}
	if l.Inflight != 0 {
		if _, err := c.KeepAliveOnce(ctx, l.Inflight); err != nil && !isLeaseNotFound(err) {
			return err
		}
	}
	return nil
}

// Start marks the reboot started, right before its reboot command: it
// renews the slot (Renew) and writes "started" into the in-flight record,
// only while the slot is still this reboot's and no pause, no halt of this
// node's scope and no operator's hold of this node exists: each is read,
// then guarded by the write. A pause, halt or hold given while the
// pre-reboot hooks ran (a drain may take minutes) stops the reboot here: a
// *slotinfo.Refusal with its rule; ErrExpired: the slot is gone. Nothing
// is changed then; the caller aborts.
func (r *Reboot) Start(ctx context.Context) error {
	if err := r.Renew(ctx); err != nil {
		return err
	}
	f := r.f
	for range 5 {
		rctx, cancel := f.rpc(ctx)
		ikey := InflightKey(f.NS, f.Node)
		ops := append([]clientv3.Op{clientv3.OpGet(PauseKey(f.NS)), clientv3.OpGet(HoldKey(f.NS, f.Node)), clientv3.OpGet(ikey)}, HaltOps(f.NS)...)
		resp, err := f.Client.Txn(rctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return err
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			p := ParsePause(kvs[0].Value)
			return refusal(RulePaused, exitcode.KillSwitch, "reboots were paused cluster-wide before the reboot command (%s, by %s since %s); nothing was rebooted: run `clusterrebootd resume` to allow them",
				p.Reason, p.By, stamp(p.Since))
		}
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
			h := ParseOverrides(HoldsDir(f.NS), kvs)[0]
			return refusal(RuleHeld, exitcode.KillSwitch, "node %s was held before the reboot command (%s, by %s since %s); nothing was rebooted: run `clusterrebootd release-hold %s` to allow its reboot",
				f.Node, h.Reason, h.By, stamp(h.Since), f.Node)
		}
		for _, h := range ParseHalts(resp.Responses[3:]) {
			if h.Covers(f.Group) {
				return refusal(RuleHalted, exitcode.KillSwitch, "the rollout halted itself before the reboot command (%s); nothing was rebooted: look at the failed nodes, then run `%s`", h.Reason, ResumeHint(h.Scope, h.Group))
			}
		}
		ikvs := resp.Responses[2].GetResponseRange().Kvs
		if len(ikvs) == 0 || ikvs[0].Lease != int64(r.Leases.Inflight) {
			return ErrExpired // the record is gone or another reboot's: so is this slot
		}
		var in Inflight
		_ = json.Unmarshal(ikvs[0].Value, &in)
		now := f.now().UTC()
		in.Started, in.StartedAt = true, &now
		val, _ := json.Marshal(in)
		next := resp.Header.Revision + 1
		rctx, cancel = f.rpc(ctx)
		t, err := f.Client.Txn(rctx).If(
			clientv3.Compare(clientv3.LeaseValue(r.Key), "=", r.Lease),
			clientv3.Compare(clientv3.ModRevision(ikey), "=", ikvs[0].ModRevision),
			clientv3.Compare(clientv3.CreateRevision(PauseKey(f.NS)), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(HoldKey(f.NS, f.Node)), "=", 0),
			clientv3.Compare(clientv3.ModRevision(HaltsDir(f.NS)), "<", next).WithPrefix(),
			clientv3.Compare(clientv3.ModRevision(LegacyHaltKey(f.NS)), "<", next),
		).Then(clientv3.OpPut(ikey, string(val), clientv3.WithIgnoreLease())).
			Else(clientv3.OpGet(r.Key, clientv3.WithCountOnly())).Commit()
		cancel()
		if err != nil {
			return err
		}
		if t.Succeeded {
			r.Started = true
			return nil
		}
		if t.Responses[0].GetResponseRange().Count == 0 {
			return ErrExpired
		}
		// A halt of another scope, or a write in between: read again.
	}
	return fmt.Errorf("slot: marking the reboot started: the keys it is guarded by kept changing")
}

// MarkStarted records that the reboot command ran without Start (the
// pipeline's COMMAND that reboots by other means than crd-reboot): only
// while the slot is this reboot's. Nothing is guarded: the command already
// ran.
func (r *Reboot) MarkStarted(ctx context.Context) error {
	if r.Started {
		return nil
	}
	f := r.f
	rctx, cancel := f.rpc(ctx)
	defer cancel()
	ikey := InflightKey(f.NS, f.Node)
	resp, err := f.Client.Get(rctx, ikey)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].Lease != int64(r.Leases.Inflight) {
		return ErrExpired
	}
	var in Inflight
	_ = json.Unmarshal(resp.Kvs[0].Value, &in)
	now := f.now().UTC()
	in.Started, in.StartedAt = true, &now
	val, _ := json.Marshal(in)
	t, err := f.Client.Txn(rctx).If(clientv3.Compare(clientv3.LeaseValue(r.Key), "=", r.Lease),
		clientv3.Compare(clientv3.ModRevision(ikey), "=", resp.Kvs[0].ModRevision)).
		Then(clientv3.OpPut(ikey, string(val), clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return err
	}
	if !t.Succeeded {
		return ErrExpired
	}
	r.Started = true
	return nil
}

// Abort gives back the slot of a reboot whose command did not start (a
// hook failed, a pause came, the lock was lost): Abort.
func (r *Reboot) Abort(ctx context.Context) error { return Abort(ctx, r.f.Client, r.Leases) }

// refusal is a rule's refusal after the take.
func refusal(rule string, code exitcode.Code, format string, args ...any) error {
	v := slotinfo.Verdict{Rule: rule, Code: code, Reason: fmt.Sprintf(format, args...)}
	return v.Err()
}

// Ends is when the slot's lease runs out, on now's clock and never later:
// the time before asking etcd plus the whole seconds it says are left;
// when etcd cannot say within timeout, the configured TTL less that
// timeout from now. What a silence of the reboot ends with
// (docs/silences.md), for every entry point.
func Ends(ctx context.Context, c *clientv3.Client, lease clientv3.LeaseID, ttl, timeout time.Duration, now func() time.Time) time.Time {
	before := now()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if resp, err := c.TimeToLive(rctx, lease); err == nil && resp.TTL > 0 {
		return before.Add(time.Duration(resp.TTL) * time.Second)
	}
	return before.Add(ttl - timeout)
}
