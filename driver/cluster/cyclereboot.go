package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/proc"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot/slotinfo"
)

// hooks runs pre_reboot_hooks in order, each with its timeout, in the lock's
// context: a lost lock kills the running hook.
func (c *cycleRun) hooks() error {
	for i, h := range c.cfg.PreRebootHooks {
		if err := c.alive(); err != nil {
			return err
		}
		if err := c.notPaused("the pre-reboot hooks ran"); err != nil {
			return err
		}
		name := hookName(h, "pre_reboot_hooks", i)
		timeout := h.Timeout()
		c.doing(protocol.RunningHook)
		if c.ctx.Err() == nil {
			c.at.Hook, c.at.HookIndex = name, i+1
		}
		c.hooksStarted = true
		pr := c.w.runner.Run(c.uctx, proc.Spec{Argv: h.Cmd, Env: c.hookEnv(), Dir: "/", Timeout: timeout})
		switch {
		case pr.TimedOut && h.OnTimeout == config.OnTimeoutContinue && !c.lost() && c.ctx.Err() == nil:
			// kured's force-reboot, asked for by this hook's on_timeout.
			c.log.Warn("PRE-REBOOT HOOK TIMED OUT AND THE REBOOT GOES ON (on_timeout: continue): its work may be unfinished",
				"event", "hook_timeout_continue", "hook", name, "timeout_sec", int64(timeout/time.Second), "detail", pr.Describe(timeout))
		case !pr.OK():
			return c.stop(protocol.ReasonHook, exitcode.Errorf(exitcode.RebootFailed,
				"cluster: pre-reboot hook %s %s; nothing was rebooted and the slot is freed: fix the hook or remove it from pre_reboot_hooks", name, pr.Describe(timeout)))
		default:
			c.log.Info("pre-reboot hook passed", "event", "hook_ok", "hook", name, "duration_ms", pr.Duration.Milliseconds())
		}
		if c.ctx.Err() == nil {
			c.at.HooksDone++
		}
		c.doing(protocol.RunningNothing)
	}
	return nil
}

// hookEnv is the complete environment of a pre-reboot hook: every hook's
// (reboot.HookEnv) and the lock's and the slot's.
func (c *cycleRun) hookEnv() []string { return c.hookEnvFor("pre-reboot") }

// hookEnvFor is hookEnv with PHASE set to phase (abort hooks get the
// pre-reboot hooks' environment under their own phase).
func (c *cycleRun) hookEnvFor(phase string) []string {
	return append(reboot.HookEnv(c.cfg.NodeName, c.cfg.EtcdEndpoints, phase),
		"LOCK_KEY="+c.lockKey(),
		"LEASE_ID="+c.res.LeaseID,
		"FENCING_TOKEN="+strconv.FormatInt(c.res.FencingToken, 10),
		"SLOT_KEY="+c.slotKey(),
	)
}

// notPaused reads the cluster-wide pause key, the rollout's halt and this
// node's hold again: a pause, halt or hold given after the admission (while
// the hooks ran) stops the reboot, as the kill switch file does. An
// unreadable key stops it too.
func (c *cycleRun) notPaused(while string) error {
	rctx, cancel := c.rpcCtx(c.uctx)
	defer cancel()
	hold := slot.HoldKey(c.ns, c.cfg.NodeName)
	ops := append([]clientv3.Op{clientv3.OpGet(c.pauseKey()), clientv3.OpGet(hold)}, slot.HaltOps(c.ns)...)
	resp, err := c.client.Txn(rctx).Then(ops...).Commit()
	if err != nil {
		return c.stop(protocol.ReasonEtcd, c.etcdErr(c.uctx, "reading the pause key "+c.pauseKey()+", the halts and "+hold+" before the reboot", err))
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		h := policy.Override{Node: c.cfg.NodeName, Pause: *parsePause(kvs[0].Value)}
		return c.stop(protocol.ReasonHeld, heldErr(c.cfg.NodeName, " (held while "+while+")", &h))
	}
	if h := (slot.Rollout{Halts: slot.ParseHalts(resp.Responses[2:])}).HaltOf(c.cfg.Group); h != nil {
		return c.stop(protocol.ReasonHalted, exitcode.Errorf(exitcode.KillSwitch,
			"cluster: the rollout halted itself while %s (%s); nothing was rebooted: look at the failed nodes, then run `%s`", while, h.Reason, slot.ResumeHint(h.Scope, h.Group)))
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil
	}
	p := parsePause(kvs[0].Value)
	return c.stop(protocol.ReasonPaused, exitcode.Errorf(exitcode.KillSwitch,
		"cluster: reboots were paused cluster-wide while %s (%s, by %s since %s); nothing was rebooted: run `clusterrebootd resume` to allow them",
		while, p.Reason, p.By, p.Since.Format("2006-01-02T15:04:05Z07:00")))
}

func (c *cycleRun) rebootOptions() reboot.Options {
	o := reboot.FromConfig(c.cfg)
	o.Root, o.Runner, o.Now = c.w.root, c.w.runner, c.w.now
	o.Commit = c.commit
	o.Extra = map[string]string{
		"lease_id":      c.res.LeaseID,
		"fencing_token": strconv.FormatInt(c.res.FencingToken, 10),
		"lock_key":      c.lockKey(),
		"slot_key":      c.slotKey(),
	}
	if c.requested != nil {
		// complete consumes the request after the boot, unless it changed.
		o.Extra[requestRevision] = strconv.FormatInt(c.requested.Revision, 10)
	}
	return o
}

// reboot writes the marker and runs reboot_command through lib/reboot,
// which checks the kill switch and the package managers once more, and
// then asks commit: the windows and the slot's start.
func (c *cycleRun) reboot() error {
	if err := c.alive(); err != nil {
		return err
	}
	c.doing(protocol.RunningRebootCommand)
	rr, err := reboot.Do(c.uctx, c.rebootOptions())
	c.res.Reboot = &rr
	if c.at.Running == protocol.RunningRebootCommand && !rr.CommandStarted {
		// Stopped in lib/reboot's last checks: the command never started.
		c.at.Running = protocol.RunningNothing
	}
	if err != nil {
		return c.rebootStopped(err)
	}
	c.res.Outcome, c.res.Reason, c.res.Detail = protocol.OutcomeRebooting, "", "reboot command "+strings.Join(rr.Command, " ")+" exited 0"
	c.log.Info("reboot command ran; releasing the lock seat, the slot keeps the node counted", "event", "rebooting",
		"slot_key", c.res.SlotKey, "action", "reboot", "command", strings.Join(rr.Command, " "))
	return nil
}

// commit is the reboot's last check, right before its command (lib/reboot
// Options.Commit): the windows once more (a pre-reboot hook such as a drain
// may have run past the window's end; not for an emergency request), then
// the slot's start (lib/slot Reboot.Start): a pause, a halt or a hold given
// while the hooks ran stops the reboot, and so does a slot that is gone.
func (c *cycleRun) commit(ctx context.Context) error {
	if err := c.alive(); err != nil {
		return err
	}
	if c.requested == nil || !c.requested.Now {
		if r := (LocalChecks{Cfg: c.cfg, Now: c.w.now}).Window(); r.Err != nil {
			c.commitReason = r.Reason
			return exitcode.Errorf(exitcode.CodeOf(r.Err), "%v (checked again right before the reboot command); nothing was rebooted", r.Err)
		}
	}
	err := c.slot.Start(ctx)
	var ref *slotinfo.Refusal
	switch {
	case err == nil:
		c.extendSilence()
		return nil
	case errors.As(err, &ref):
		c.commitReason = RuleReason(ref.Rule)
		return exitcode.Errorf(ref.Code, "cluster: %s", ref.Reason)
	case errors.Is(err, slot.ErrExpired):
		c.slotExpired = true
		c.commitReason = protocol.ReasonHook
		return exitcode.Errorf(exitcode.RebootFailed, "cluster: the reboot slot %s ended before the reboot command (reboot_slot_ttl_sec is %d); nothing was rebooted: "+
			"raise reboot_slot_ttl_sec above the pre-reboot hooks' total run time", c.slot.Key, c.cfg.RebootSlotTTLSec)
	}
	c.commitReason = protocol.ReasonEtcd
	return c.etcdErr(ctx, "marking the reboot started in "+slot.InflightKey(c.ns, c.cfg.NodeName), err)
}

// dryRun reports what a real run would do next: no slot, no hook, no command.
func (c *cycleRun) dryRun() error {
	rr, err := reboot.Do(c.uctx, c.rebootOptions())
	c.res.Reboot = &rr
	if err != nil {
		return c.rebootStopped(err)
	}
	c.res.Outcome = protocol.OutcomeDryRun
	c.res.Detail = fmt.Sprintf("dry run: would take slot %s, run %d pre-reboot hook(s) and %s", c.slotKey(), len(c.cfg.PreRebootHooks), strings.Join(c.cfg.RebootCommand, " "))
	c.res.Detail += c.silencePlan()
	c.log.Info("dry run: every check passed; nothing was changed", "event", "dry_run", "slot_key", c.slotKey())
	return nil
}

// rebootStopped ends the run after reboot.Do refused or failed: the kill
// switch and a busy package manager are their own reasons, anything else
// is reboot_failed.
func (c *cycleRun) rebootStopped(err error) error {
	reason := protocol.ReasonRebootFailed
	switch {
	case c.commitReason != "":
		reason = c.commitReason
	case exitcode.CodeOf(err) == exitcode.KillSwitch:
		reason = protocol.ReasonKillSwitch
	case exitcode.CodeOf(err) == exitcode.PackageManagerBusy:
		reason = protocol.ReasonPackageManagerBusy
	}
	return c.stop(reason, err)
}
