package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/notifications"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// RuleReason is the daemon's reason token for a rule of the admission
// (lib/slot): the two budgets are reboot_in_progress, pacing and the rate
// are paced, every other rule is its own name.
func RuleReason(rule string) string {
	switch rule {
	case slot.RuleMaxHolders, slot.RuleMaxTotal:
		return protocol.ReasonRebootInProgress
	case slot.RuleMinInterval, slot.RuleRate:
		return protocol.ReasonPaced
	case slot.RuleConflict:
		return protocol.ReasonConflict
	case slot.RulePaused:
		return protocol.ReasonPaused
	case slot.RuleHalted:
		return protocol.ReasonHalted
	case slot.RuleHeld:
		return protocol.ReasonHeld
	case slot.RuleWave:
		return protocol.ReasonWave
	case slot.RulePolicy:
		return protocol.ReasonPolicy
	}
	return protocol.ReasonInternal
}

// admit takes this node's reboot slot through the one admission point
// (lib/slot.Admission): every fleet rule in one etcd transaction, the
// node-local rules (checks) before the take and after every wait, the slot
// in the transaction guarded by that count. It returns nil with c.slot set,
// or nil in a dry run once everything passed, or the stop error.
func (c *cycleRun) admit() error {
	var lastWait string
	a := slot.Admission{Fleet: c.fleet, Seat: c.held, Wait: !c.noWait, DryRun: c.cfg.DryRun, Recount: c.w.recheck,
		Recheck: c.checks,
		Prepare: c.prepareSlot,
		OnWait: func(v slotinfo.Verdict) {
			c.res.Present, c.res.MaxHolders = c.countOf(v)
			if key := v.Rule + "\x00" + v.Reason; key != lastWait {
				// Once, and again only when what it waits for changed (not
				// on every re-count).
				c.log.Info("waiting: "+v.Reason, "event", "slot_waiting", "reason", RuleReason(v.Rule), "rule", v.Rule,
					"max_holders", v.Rules.MaxHolders, "until", stampOrEmpty(v))
				lastWait = key
			}
			c.doing(protocol.RunningSlotWait)
			if c.w.beforeWatch != nil {
				c.w.beforeWatch()
			}
		},
	}
	out, err := a.Admit(c.uctx)
	c.doing(protocol.RunningNothing)
	c.count = out.Count
	if out.Count.Revision != 0 {
		c.res.Present, c.res.MaxHolders = c.countOf(out.Verdict)
		v := out.Verdict
		c.res.Admission = &v
		c.res.Policy = v.Policy
		if len(out.Count.Disagree) > 0 && !c.warnedMax {
			c.warnedMax = true
			c.log.Warn("the nodes of this lock disagree on max_holders; the smallest counts", "event", "max_holders_disagree",
				"seen", fmt.Sprint(out.Count.Disagree), "effective", v.Rules.MaxHolders, "configured", c.cfg.MaxHolders.String())
		}
	}
	if out.Halted {
		c.notifyHalted(out.Verdict)
	}
	var refusal *slotinfo.Refusal
	switch {
	case err == nil && out.Reboot == nil:
		return c.dryRun()
	case err == nil:
		c.slot = out.Reboot
		c.slotLease = out.Reboot.Lease
		c.res.SlotKey = out.Reboot.Key
		c.log.Info("reboot slot taken", "event", "slot_taken", "slot_key", out.Reboot.Key, "slot_ttl_sec", c.cfg.RebootSlotTTLSec,
			"slot_lease_id", fmt.Sprintf("%x", int64(out.Reboot.Lease)), "max_holders", out.Verdict.Rules.MaxHolders)
		c.notifyStarting()
		return c.silenceSlot()
	case c.stopped:
		return err // a node-local check stopped it and said why
	case errors.As(err, &refusal):
		if refusal.Wait && c.noWait {
			return c.stop(RuleReason(refusal.Rule), exitcode.Errorf(exitcode.HealthBlocked, "cluster: %s; a real run would keep its seat and wait", refusal.Reason))
		}
		return c.stop(RuleReason(refusal.Rule), exitcode.Errorf(exitcode.CodeOf(err), "cluster: %s", refusal.Reason))
	case errors.Is(err, slot.ErrSeatLost):
		return c.stop(protocol.ReasonLockBusy, exitcode.Errorf(exitcode.LockBusy,
			"cluster: lock lost: the seat %s was gone when the reboot slot was to be taken; nothing was run", c.held.Entry()))
	case c.uctx.Err() != nil:
		return c.stop("", nil)
	}
	switch exitcode.CodeOf(err) {
	case exitcode.Config:
		return c.stop(protocol.ReasonConflict, err)
	case exitcode.RebootFailed:
		return c.stop(protocol.ReasonRebootFailed, err)
	}
	return c.stop(protocol.ReasonEtcd, c.etcdErr(c.uctx, "admitting the reboot slot "+c.fleet.Key(), err))
}

// countOf is the members counted and the effective max_holders of a verdict.
func (c *cycleRun) countOf(v slotinfo.Verdict) ([]string, int) {
	return c.count.Nodes(), v.Rules.MaxHolders
}

func stampOrEmpty(v slotinfo.Verdict) string {
	if v.Until.IsZero() {
		return ""
	}
	return v.Until.UTC().Format("2006-01-02T15:04:05Z")
}

// prepareSlot runs just before the take: state_dir must take the reboot
// marker (else nothing is taken: a full disk must not drain the node on
// every attempt), and the claim records the take's leases before the slot
// exists, so that whatever follows, the lease that can delete it is known.
func (c *cycleRun) prepareSlot(_ context.Context, l slot.Leases) error {
	if err := c.alive(); err != nil {
		return err
	}
	if c.w.beforeSlot != nil {
		c.w.beforeSlot()
	}
	if err := reboot.CheckStateDir(c.cfg.StateDir); err != nil {
		return c.stop(protocol.ReasonRebootFailed, err)
	}
	c.slotLeases = l
	if err := slot.WriteClaim(c.cfg.StateDir, slot.NewClaim(c.fleet, l, c.w.now(), c.res.FencingToken)); err != nil {
		return c.stop(protocol.ReasonRebootFailed, err)
	}
	return nil
}

// notifyHalted sends rollout_halted: this node's admission recorded the
// halt, so it alone sends it.
func (c *cycleRun) notifyHalted(v slotinfo.Verdict) {
	c.log.Error(v.Reason, "event", "rollout_halted", "reason", protocol.ReasonHalted, "failures", len(v.Failures))
	c.notify(notifications.Fields{Event: config.NotifyRolloutHalted, Reason: protocol.ReasonHalted, Detail: v.Reason})
}

// renewSlot gives the slot its whole TTL again just before the reboot
// command runs. The hooks may have used up part of it, or all of it: while
// this node holds its lock seat it is counted anyway, but once the seat is
// released after the reboot command, the slot alone keeps it counted until
// it is back. A slot that expired is not re-taken: nothing reboots.
func (c *cycleRun) renewSlot() error {
	if err := c.alive(); err != nil {
		return err
	}
	err := c.slot.Renew(c.uctx)
	if errors.Is(err, slot.ErrExpired) {
		c.slotExpired = true
		return c.stop(protocol.ReasonHook, exitcode.Errorf(exitcode.RebootFailed,
			"cluster: the reboot slot %s expired while the pre-reboot hooks ran (reboot_slot_ttl_sec is %d); nothing was rebooted: "+
				"raise reboot_slot_ttl_sec above the hooks' total run time", c.slot.Key, c.cfg.RebootSlotTTLSec))
	}
	if err != nil {
		return c.stop(protocol.ReasonEtcd, c.etcdErr(c.uctx, "renewing the reboot slot "+c.slot.Key, err))
	}
	c.extendSilence()
	return nil
}

// freeSlot gives back a slot taken for a reboot that did not start
// (lib/slot.Abort: the in-flight record first, then the slot, with a fresh
// bounded context), and removes the claim; when etcd cannot be reached
// the slot expires with its lease.
func (c *cycleRun) freeSlot() {
	if c.slotLease == 0 {
		return
	}
	fctx, cancel := c.fresh()
	defer cancel()
	key := c.fleet.Key()
	switch err := slot.Abort(fctx, c.client, c.slotLeases); {
	case errors.Is(err, slot.ErrExpired):
		c.log.Info("the reboot slot had already expired", "event", "slot_expired", "slot_key", key, "slot_ttl_sec", c.cfg.RebootSlotTTLSec)
	case err != nil:
		c.log.Warn("cannot free the reboot slot; it expires with its lease", "event", "slot_free_failed", "slot_key", key,
			"slot_ttl_sec", c.cfg.RebootSlotTTLSec, "error", err.Error())
	default:
		c.log.Info("reboot slot freed", "event", "slot_freed", "slot_key", key)
	}
	if err := slot.RemoveClaim(c.cfg.StateDir); err != nil {
		c.log.Warn("cannot remove the reboot slot claim", "event", "slot_claim_error", "error", err.Error())
	}
	c.expireSilences()
	c.slotLease = 0
	c.slotLeases = slot.Leases{}
	c.slot = nil
	c.res.SlotKey = ""
}

// keepSlotAfterCommand is 25.9's rule: once the reboot command started, the
// shutdown it asked for may be under way even though the command failed
// (systemctl killed by the shutdown it started): the slot and its in-flight
// record stay until the node is back (the boot id says so) or its lease
// ends.
func (c *cycleRun) keepSlotAfterCommand() {
	c.log.Warn("the reboot command failed after it started; the reboot slot is kept until the node is back or the slot expires",
		"event", "slot_kept_after_command", "slot_key", c.fleet.Key(), "slot_ttl_sec", c.cfg.RebootSlotTTLSec)
	c.slotLease = 0
	c.slotLeases = slot.Leases{}
	c.slot = nil
}
