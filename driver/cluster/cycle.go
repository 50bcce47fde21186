package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// LockLostDetail is the detail of a cycle that stopped because its lock seat
// was gone.
const LockLostDetail = "lock lost"

// cycleRun is one `step cycle` holding the lock.
type cycleRun struct {
	*session
	// ctx ends on SIGTERM; uctx also ends when the lock is lost.
	ctx, uctx context.Context
	held      *lock.Held
	res       *protocol.CycleResult
	log       *slog.Logger
	// fleet is this node's side of the reboot slots (lib/slot); count is
	// the last count, which the slot transaction is guarded by.
	fleet slot.Fleet
	count slot.Count
	// slotLease carries the reboot slot's lease once granted, slot the slot
	// once taken.
	slotLease  clientv3.LeaseID
	slotLeases slot.Leases
	slot       *slot.Reboot
	// slotExpired: the slot's lease ran out under the lock.
	slotExpired bool
	// commitReason is the reason token of the reboot's last check (commit)
	// when it stopped the reboot.
	commitReason string
	// slotTaken: the slot was taken (reboot_starting was sent).
	slotTaken bool
	// warnedMax: the max_holders disagreement was logged once.
	warnedMax bool
	// noWait answers instead of waiting for other nodes' slots (simulate).
	noWait bool
	// hooksStarted: a pre-reboot hook started, so an abort runs abort_hooks.
	hooksStarted bool
	// requested is an operator's reboot request of this node, read under
	// the lock (nil: none).
	requested *policy.Override
	// stopped: stop ended the cycle (its reason and detail are set).
	stopped bool
	// at is what the cycle runs now. It no longer changes once ctx ends
	// (SIGTERM): it then says what was running when the stop came.
	at protocol.StopPoint
}

// doing records what the cycle runs next, unless SIGTERM already came.
func (c *cycleRun) doing(running string) {
	if c.ctx.Err() == nil {
		c.at.Running, c.at.Hook, c.at.HookIndex = running, "", 0
	}
}

// cycle acquires the lock and runs everything under it (docs/cluster-protocol.md).
func (s *session) cycle(ctx context.Context, a protocol.CycleArgs, res *protocol.CycleResult) error {
	res.Attempt = a.Attempt
	log := s.log.With("attempt", a.Attempt)
	bootID, machineID, err := s.w.ids()
	if err != nil {
		log.Warn("boot id unreadable; the lock annotation goes without it (no reboot slot can be taken)", "error", err.Error())
	}
	fleet := slot.FromConfig(s.client, s.cfg, bootID, machineID, slot.ViaDaemon)
	fleet.RPCTimeout, fleet.Now = s.rpc, s.w.now
	o := lock.FromConfig(s.cfg, bootID, machineID)
	o.Purpose, o.Candidate, o.RPCTimeout, o.Now = "reboot", true, s.rpc, s.w.now
	if s.cfg.MaxHolders.Percent > 0 {
		seats, err := fleet.Seats(ctx)
		if err != nil {
			return s.etcdErr(ctx, "counting the health records for max_holders "+s.cfg.MaxHolders.String(), err)
		}
		o.MaxHolders = seats
	}
	o.Backoff.Rand = s.w.rand
	o.OnRetry = func(attempt int, err error, wait time.Duration) {
		log.Warn("etcd failed while acquiring the lock; retrying", "event", "lock_retry", "reason", protocol.ReasonEtcd, "retry", attempt, "wait_ms", wait.Milliseconds(), "error", err.Error())
	}
	o.OnRequeued = func(attempt int, err error, wait time.Duration) {
		// etcd did not fail: this process was frozen (or its entry evicted)
		// for longer than the lease, and the line went on without it.
		log.Warn("our place in line for the lock expired (lease gone or entry deleted); queuing again", "event", "lock_requeued",
			"reason", protocol.ReasonLockBusy, "lock_key", s.lockKey(), "lock_ttl_sec", s.cfg.LockTTLSec, "retry", attempt, "wait_ms", wait.Milliseconds(), "error", err.Error())
	}
	o.OnQueued = func(position int) {
		log.Info("waiting for the lock", "event", "lock_waiting", "reason", protocol.ReasonLockBusy, "position", position, "lock_key", s.lockKey())
	}
	actx := ctx
	if a.NoWait {
		// One etcd request's time to find the lock free; a real run would
		// wait in line instead.
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, s.rpc)
		defer cancel()
	}
	held, err := lock.Acquire(actx, s.client, o)
	if err != nil && a.NoWait && exitcode.CodeOf(err) == exitcode.LockBusy {
		err = exitcode.Errorf(exitcode.LockBusy, "cluster: the lock %s is held by others; a real run would wait in line (crd-lock status --key %s)", s.lockKey(), s.lockKey())
	}
	if err != nil {
		log.Info("lock not acquired", "event", "lock_failed", "error", err.Error())
		return err
	}
	res.LockWaitMS = held.Waited().Milliseconds()
	res.LeaseID = fmt.Sprintf("%x", held.LeaseID())
	res.FencingToken = held.FencingToken()
	log = log.With("lease_id", res.LeaseID, "fencing_token", res.FencingToken)
	log.Info("lock acquired", "event", "lock_acquired", "lock_key", s.lockKey(), "lock_wait_ms", res.LockWaitMS)
	holding := filepath.Join(s.cfg.RunDir, protocol.LockHoldingFile)
	if err := writeFileAtomic(holding, []byte(res.LeaseID+"\n")); err != nil {
		log.Debug("cannot mark the lock as held in run_dir (metrics only)", "error", err.Error())
	}
	defer func() {
		_ = os.Remove(holding)
		fctx, cancel := s.fresh()
		defer cancel()
		if err := held.Release(fctx); err != nil {
			log.Warn("lock release failed; the seat expires with its lease", "event", "lock_release_failed", "error", err.Error())
			return
		}
		log.Info("lock released", "event", "lock_released")
	}()

	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(held.Context(), cancel)
	defer stop()
	c := &cycleRun{session: s, ctx: ctx, uctx: uctx, held: held, res: res, log: log, noWait: a.NoWait,
		fleet: fleet, at: protocol.StopPoint{Running: protocol.RunningNothing}}
	err = c.run()
	c.notifyFailed(err)
	if ctx.Err() != nil && res.Outcome == protocol.OutcomeBlocked {
		at := c.at
		res.Stopped = &at
	}
	return err
}

// run is steps 6 and 7: the admission (every fleet rule, and the
// node-local checks before the take), then the hooks and the reboot.
func (c *cycleRun) run() error {
	if err := c.admit(); err != nil || c.slot == nil {
		return err
	}
	// From here an abort undoes what the hooks did (abort_hooks) while the
	// slot still counts this node as down, then frees the slot.
	if err := c.hooks(); err != nil {
		c.abortHooks()
		c.freeSlot()
		return err
	}
	if err := c.renewSlot(); err != nil {
		c.abortHooks()
		c.freeSlot()
		return err
	}
	if err := c.reboot(); err != nil {
		c.abortHooks()
		if c.res.Reboot != nil && c.res.Reboot.CommandStarted {
			c.keepSlotAfterCommand()
		} else {
			c.freeSlot()
		}
		return err
	}
	return nil
}

// lost reports whether the lock is gone (not by our own release).
func (c *cycleRun) lost() bool {
	err := c.held.Err()
	return err != nil && !errors.Is(err, lock.ErrReleased)
}

// stop ends the cycle as blocked. A lost lock or a SIGTERM overrides the
// reason: whatever failed then failed because of it.
func (c *cycleRun) stop(reason string, err error) error {
	detail := ""
	switch {
	case c.lost():
		reason, err, detail = protocol.ReasonLockBusy, c.held.Err(), LockLostDetail
	case c.ctx.Err() != nil:
		reason = protocol.ReasonInterrupted
		err = exitcode.Errorf(exitcode.Interrupted, "cluster: interrupted (SIGTERM) under the lock %s; the lock is released", c.at.Describe())
	case reason == protocol.ReasonLockBusy:
		detail = LockLostDetail
	}
	if err == nil {
		err = exitcode.Errorf(exitcode.Internal, "cluster: cycle stopped without a reason (a bug)")
	}
	if detail == "" {
		detail = err.Error()
	}
	c.res.Outcome, c.res.Reason, c.res.Detail = protocol.OutcomeBlocked, reason, detail
	c.stopped = true
	c.log.Info("reboot blocked under the lock", "event", "blocked", "reason", reason, "detail", detail)
	return err
}

// alive returns the stop error when the lock is lost or SIGTERM arrived.
func (c *cycleRun) alive() error {
	if c.lost() || c.ctx.Err() != nil {
		return c.stop("", nil)
	}
	return nil
}

// checks runs the node-local checks under the lock (LocalChecks: the kill
// switch file, the windows, the detectors, the health gate) on behalf of
// the admission, which has just admitted on count c.
func (c *cycleRun) checks(ctx context.Context, n slot.Count, v slotinfo.Verdict) error {
	view := n.View
	c.res.View = &view
	c.requested = n.Request
	size := 0
	if v.Policy != nil {
		size = v.Policy.ClusterSize
	}
	l := LocalChecks{Cfg: c.cfg, Root: c.w.root, Runner: c.w.runner, Uname: c.w.uname, Now: c.w.now, Log: c.log, Doing: c.doing}
	r := l.Check(ctx, c.requested, size)
	if r.Gate != nil {
		c.res.Gate = r.Gate
	}
	if r.Err != nil {
		return c.stop(r.Reason, r.Err)
	}
	return c.alive()
}

// heldErr is the error of a node held by an operator.
func heldErr(node, while string, h *policy.Override) error {
	return exitcode.Errorf(exitcode.KillSwitch, "cluster: node %s is held%s (%s, by %s since %s); nothing was rebooted: run `clusterrebootd release-hold %s` to allow its reboot",
		node, while, h.Reason, h.By, h.Since.Format("2006-01-02T15:04:05Z07:00"), node)
}
