package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/lock"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// slotsFree counts the nodes present (lock seats and reboot slots of this
// group, this node included). Over max_holders it keeps the seat and waits
// on a watch until that changes, then reports false: time passed, so the
// checks run again before the count is trusted.
func (c *cycleRun) slotsFree() (bool, error) {
	var logged []string
	for waited := false; ; waited = true {
		p, err := c.present(c.uctx)
		if err != nil {
			return false, c.stop(driver.ReasonEtcd, err)
		}
		c.res.Present = p.Nodes
		if len(p.Nodes) <= c.cfg.MaxHolders {
			return !waited, nil
		}
		if c.noWait {
			others := slices.DeleteFunc(slices.Clone(p.Nodes), func(n string) bool { return n == c.cfg.NodeName })
			return false, c.stop(driver.ReasonRebootInProgress, exitcode.Errorf(exitcode.HealthBlocked,
				"cluster: other nodes are rebooting (%s; max_holders %d); a real run would keep its seat and wait",
				strings.Join(others, ","), c.cfg.MaxHolders))
		}
		if logged == nil || !slices.Equal(logged, p.Nodes) {
			// Once, and again only when who is present changed (not on
			// every Recheck).
			c.log.Info("other nodes are rebooting; keeping the seat and waiting", "event", "slot_waiting",
				"reason", driver.ReasonRebootInProgress, "present", strings.Join(p.Nodes, ","), "max_holders", c.cfg.MaxHolders)
			logged = p.Nodes
		}
		if err := c.waitChange(p.Revision); err != nil {
			return false, err
		}
	}
}

// waitChange blocks until a reboot slot or a lock entry changes after rev,
// or for lock.Recheck at most: a watch can lose a deletion on some etcd
// releases (see lock.Recheck), and a slot freed unseen must not keep this
// node waiting for ever.
func (c *cycleRun) waitChange(rev int64) error {
	if c.w.beforeWatch != nil {
		c.w.beforeWatch()
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(c.uctx))
	defer cancel()
	slots := c.client.Watch(wctx, c.slotsPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	seats := c.client.Watch(wctx, c.lockKey()+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	every := lock.Recheck
	if c.w.recheck > 0 {
		every = c.w.recheck
	}
	recheck := time.NewTimer(every)
	defer recheck.Stop()
	var wr clientv3.WatchResponse
	ok := true
	select {
	case <-c.uctx.Done():
		return c.stop("", nil)
	case <-recheck.C:
		return nil
	case wr, ok = <-slots:
	case wr, ok = <-seats:
	}
	if !ok || wr.Err() != nil {
		// The watch broke (leader change, compaction): count again after a
		// pause rather than spinning.
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-c.uctx.Done():
			return c.stop("", nil)
		case <-t.C:
		}
	}
	return nil
}

// takeSlot writes <ns>rebooting/<node> on a fresh lease of
// reboot_slot_ttl_sec (never kept alive), in one transaction that succeeds
// only while this node's lock seat exists.
func (c *cycleRun) takeSlot() error {
	if c.w.beforeSlot != nil {
		c.w.beforeSlot()
	}
	if err := c.alive(); err != nil {
		return err
	}
	rctx, cancel := c.rpcCtx(c.uctx)
	grant, err := c.client.Grant(rctx, int64(c.cfg.RebootSlotTTLSec))
	cancel()
	if err != nil {
		return c.stop(driver.ReasonEtcd, c.etcdErr(c.uctx, "granting the reboot slot lease", err))
	}
	c.slotLease = grant.ID
	slot := policy.Slot{Node: c.cfg.NodeName, Group: c.cfg.Group, Since: c.w.now().UTC(), BootID: c.held.Annotation().BootID}
	val, _ := json.Marshal(slot)
	rctx, cancel = c.rpcCtx(c.uctx)
	resp, err := c.client.Txn(rctx).If(c.held.IsOwnerCmp()).
		Then(clientv3.OpPut(c.slotKey(), string(val), clientv3.WithLease(grant.ID))).Commit()
	cancel()
	if err != nil {
		// The outcome is unknown: revoking the lease removes a slot that may
		// have been written.
		c.freeSlot()
		return c.stop(driver.ReasonEtcd, c.etcdErr(c.uctx, "taking the reboot slot "+c.slotKey(), err))
	}
	if !resp.Succeeded {
		c.freeSlot()
		return c.stop(driver.ReasonLockBusy, exitcode.Errorf(exitcode.LockBusy,
			"cluster: lock lost: the seat %s was gone when the reboot slot was to be taken; nothing was run", c.held.Entry()))
	}
	c.res.SlotKey = c.slotKey()
	c.log.Info("reboot slot taken", "event", "slot_taken", "slot_key", c.slotKey(), "slot_ttl_sec", c.cfg.RebootSlotTTLSec)
	return nil
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
	rctx, cancel := c.rpcCtx(c.uctx)
	resp, err := c.client.KeepAliveOnce(rctx, c.slotLease)
	cancel()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0) {
		return c.stop(driver.ReasonHook, exitcode.Errorf(exitcode.RebootFailed,
			"cluster: the reboot slot %s expired while the pre-reboot hooks ran (reboot_slot_ttl_sec is %d); nothing was rebooted: "+
				"raise reboot_slot_ttl_sec above the hooks' total run time", c.slotKey(), c.cfg.RebootSlotTTLSec))
	}
	if err != nil {
		return c.stop(driver.ReasonEtcd, c.etcdErr(c.uctx, "renewing the reboot slot "+c.slotKey(), err))
	}
	return nil
}

// freeSlot revokes the slot lease (deleting the slot) with a fresh bounded
// context; when etcd cannot be reached the slot expires with its lease.
func (c *cycleRun) freeSlot() {
	if c.slotLease == 0 {
		return
	}
	fctx, cancel := c.fresh()
	defer cancel()
	if _, err := c.client.Revoke(fctx, c.slotLease); err != nil {
		c.log.Warn("cannot free the reboot slot; it expires with its lease", "event", "slot_free_failed", "slot_key", c.slotKey(),
			"slot_ttl_sec", c.cfg.RebootSlotTTLSec, "error", err.Error())
	} else {
		c.log.Info("reboot slot freed", "event", "slot_freed", "slot_key", c.slotKey())
	}
	c.slotLease = 0
	c.res.SlotKey = ""
}
