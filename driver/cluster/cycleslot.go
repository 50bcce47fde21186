package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// slotsFree counts the machines present (lib/slot: seats and reboot slots
// of this lock and group, this node included, at one revision). Over
// max_holders it keeps the seat and waits on a watch until that changes,
// then reports false: time passed, so the checks run again before the count
// is trusted. The count it returns true on is c.count, which the slot
// transaction is guarded by.
func (c *cycleRun) slotsFree() (bool, error) {
	defer c.doing(driver.RunningNothing)
	var logged []string
	for waited := false; ; waited = true {
		n, err := c.fleet.Count(c.uctx, c.held.Entry())
		if err != nil {
			if c.uctx.Err() != nil {
				return false, c.stop("", nil)
			}
			return false, c.stop(driver.ReasonEtcd, c.etcdErr(c.uctx, "counting the nodes present (lock seats and reboot slots)", err))
		}
		c.count = n
		c.res.Present = n.Nodes()
		if n.Problem != nil {
			return false, c.stop(driver.ReasonConflict, n.Problem)
		}
		if len(n.Disagree) > 0 && !c.warnedMax {
			c.warnedMax = true
			c.log.Warn("the nodes of this lock disagree on max_holders; the smallest counts", "event", "max_holders_disagree",
				"seen", fmt.Sprint(n.Disagree), "effective", n.MaxHolders, "configured", c.cfg.MaxHolders)
		}
		c.res.MaxHolders = n.MaxHolders
		if !n.Full() {
			return !waited, nil
		}
		if c.noWait {
			others := slices.DeleteFunc(n.Nodes(), func(s string) bool { return s == c.cfg.NodeName })
			return false, c.stop(driver.ReasonRebootInProgress, exitcode.Errorf(exitcode.HealthBlocked,
				"cluster: other nodes are rebooting (%s; max_holders %d); a real run would keep its seat and wait",
				strings.Join(others, ","), n.MaxHolders))
		}
		if nodes := n.Nodes(); logged == nil || !slices.Equal(logged, nodes) {
			// Once, and again only when who is present changed (not on
			// every Recheck).
			c.log.Info("other nodes are rebooting; keeping the seat and waiting", "event", "slot_waiting",
				"reason", driver.ReasonRebootInProgress, "present", n.Describe(), "max_holders", n.MaxHolders)
			logged = nodes
		}
		c.doing(driver.RunningSlotWait)
		if c.w.beforeWatch != nil {
			c.w.beforeWatch()
		}
		if err := c.fleet.Wait(c.uctx, n.Revision, c.w.recheck); err != nil {
			return false, c.stop("", nil)
		}
	}
}

// policyAtCount evaluates the built-in policies on the view read with the
// count: the slot transaction is guarded by that read's revision, so a node
// that proceeds saw every slot taken before its own (with max_holders > 1,
// two nodes cannot both pass on a view where neither is down yet).
func (c *cycleRun) policyAtCount() error {
	d := c.fleet.Evaluate(c.count)
	c.res.Policy = &d
	if !d.Allowed {
		return c.stop(driver.ReasonPolicy, exitcode.Errorf(exitcode.HealthBlocked, "cluster: policy %s: %s", d.Rule, d.Reason))
	}
	return nil
}

// errRecount: a slot changed between the count and the slot transaction.
var errRecount = errors.New("cluster: a reboot slot changed since the count")

// takeSlot records the claim in state_dir, then writes <ns>rebooting/<node>
// on a fresh lease of reboot_slot_ttl_sec (never kept alive), in one
// transaction guarded by the seat and by the count's revision (lib/slot).
// errRecount: another slot changed meanwhile; count and check again.
func (c *cycleRun) takeSlot() error {
	if c.w.beforeSlot != nil {
		c.w.beforeSlot()
	}
	if err := c.alive(); err != nil {
		return err
	}
	lease, err := c.fleet.Grant(c.uctx)
	if err != nil {
		if exitcode.CodeOf(err) == exitcode.Config {
			return c.stop(driver.ReasonRebootFailed, err)
		}
		return c.stop(driver.ReasonEtcd, c.etcdErr(c.uctx, "granting the reboot slot lease", err))
	}
	c.slotLease = lease
	claim := slot.Claim{Key: c.fleet.Key(), Lease: fmt.Sprintf("%x", int64(lease)), Lock: c.fleet.Lock, Node: c.cfg.NodeName,
		BootID: c.fleet.BootID, Since: c.w.now().UTC().Format(time.RFC3339Nano), FencingToken: c.res.FencingToken}
	if err := slot.WriteClaim(c.cfg.StateDir, claim); err != nil {
		c.freeSlot()
		return c.stop(driver.ReasonRebootFailed, err)
	}
	held, err := c.fleet.Take(c.uctx, c.held.IsOwnerCmp(), c.held.Entry(), c.count, lease)
	switch {
	case errors.Is(err, slot.ErrChanged):
		c.freeSlot()
		c.log.Info("a reboot slot changed since the count; checking again", "event", "slot_recount")
		return errRecount
	case errors.Is(err, slot.ErrSeatLost):
		c.freeSlot()
		return c.stop(driver.ReasonLockBusy, exitcode.Errorf(exitcode.LockBusy,
			"cluster: lock lost: the seat %s was gone when the reboot slot was to be taken; nothing was run", c.held.Entry()))
	case exitcode.CodeOf(err) == exitcode.Config:
		c.freeSlot()
		return c.stop(driver.ReasonConflict, err)
	case err != nil && exitcode.CodeOf(err) == exitcode.RebootFailed:
		c.freeSlot()
		return c.stop(driver.ReasonRebootFailed, err)
	case err != nil:
		// The outcome is unknown: revoking the lease removes a slot that may
		// have been written.
		c.freeSlot()
		return c.stop(driver.ReasonEtcd, c.etcdErr(c.uctx, "taking the reboot slot "+c.fleet.Key(), err))
	}
	c.slot = held
	c.res.SlotKey = held.Key
	c.log.Info("reboot slot taken", "event", "slot_taken", "slot_key", held.Key, "slot_ttl_sec", c.cfg.RebootSlotTTLSec,
		"slot_lease_id", claim.Lease)
	c.notifyStarting()
	return c.silenceSlot()
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
		return c.stop(driver.ReasonHook, exitcode.Errorf(exitcode.RebootFailed,
			"cluster: the reboot slot %s expired while the pre-reboot hooks ran (reboot_slot_ttl_sec is %d); nothing was rebooted: "+
				"raise reboot_slot_ttl_sec above the hooks' total run time", c.slot.Key, c.cfg.RebootSlotTTLSec))
	}
	if err != nil {
		return c.stop(driver.ReasonEtcd, c.etcdErr(c.uctx, "renewing the reboot slot "+c.slot.Key, err))
	}
	c.extendSilence()
	return nil
}

// freeSlot revokes the slot lease (deleting the slot, and nothing another
// machine wrote) with a fresh bounded context, and removes the claim; when
// etcd cannot be reached the slot expires with its lease.
func (c *cycleRun) freeSlot() {
	if c.slotLease == 0 {
		return
	}
	fctx, cancel := c.fresh()
	defer cancel()
	key := c.fleet.Key()
	switch err := slot.Free(fctx, c.client, c.slotLease); {
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
	c.slot = nil
	c.res.SlotKey = ""
}

// keepSlotAfterCommand is 25.9's rule: once the reboot command started, the
// shutdown it asked for may be under way even though the command failed
// (systemctl killed by the shutdown it started): the slot stays until the
// node is back (the boot id says so) or its lease ends.
func (c *cycleRun) keepSlotAfterCommand() {
	c.log.Warn("the reboot command failed after it started; the reboot slot is kept until the node is back or the slot expires",
		"event", "slot_kept_after_command", "slot_key", c.fleet.Key(), "slot_ttl_sec", c.cfg.RebootSlotTTLSec)
	c.slotLease = 0
	c.slot = nil
}
