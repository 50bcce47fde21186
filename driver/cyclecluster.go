package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// clusterCycle runs steps 5-7 in the child while watching the local
// conditions; it stops the child when one turns false.
func (d *Driver) clusterCycle(ctx context.Context, cfg config.Config, mode Mode, out *Outcome) {
	d.mu.Lock()
	d.attempt++
	attempt := d.attempt
	d.status.State = policy.StateWaiting
	d.status.Reason, d.status.Detail = "", ""
	st, hook := d.status, d.onStatus
	d.mu.Unlock()
	if hook != nil {
		hook(st)
	}
	out.Attempt = attempt
	if d.metrics != nil {
		d.metrics.LockHeld.Set(1)
		defer d.metrics.LockHeld.Set(0)
	}

	r := d.runCycleChild(ctx, cfg, mode, attempt)
	if r.err == nil {
		out.Cycle = &r.res
		d.countSilences(r.res.Silences)
		d.countNotifications(r.res.Notifications)
		if r.res.View != nil {
			d.SetView(*r.res.View)
		}
		if d.metrics != nil && (r.res.LeaseID != "" || r.res.FencingToken != 0) {
			d.metrics.LockAcquire.Observe(float64(r.res.LockWaitMS) / 1000)
		}
	}
	d.clusterOutcome(ctx, r, out)
}

// childCycle is what the child `cycle` answered, and why the daemon
// stopped it (reason "" when it did not).
type childCycle struct {
	res            protocol.CycleResult
	code           exitcode.Code
	err            error
	reason, detail string
}

// runCycleChild runs the child `cycle` (steps 5-7) while watchLocal
// re-checks the local conditions; the first that turns false stops it.
func (d *Driver) runCycleChild(ctx context.Context, cfg config.Config, mode Mode, attempt int) childCycle {
	childCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stopMu sync.Mutex
	var stopReason, stopDetail string
	stop := func(reason, detail string) {
		stopMu.Lock()
		if stopReason == "" {
			stopReason, stopDetail = reason, detail
		}
		stopMu.Unlock()
		cancel()
	}
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		d.watchLocal(childCtx, cfg, stop)
	}()

	var r childCycle
	r.code, r.err = d.deps.Child.Run(childCtx, protocol.StepCycle, protocol.CycleArgs{Attempt: attempt, NoWait: mode.Simulate}, cfg, &r.res)
	cancel()
	<-watchDone
	stopMu.Lock()
	r.reason, r.detail = stopReason, stopDetail
	stopMu.Unlock()
	return r
}

// clusterOutcome records in out what the child's answer means for the
// cycle: rebooting, dry run, or blocked (with backoff, unless interrupted
// or not needed).
func (d *Driver) clusterOutcome(ctx context.Context, r childCycle, out *Outcome) {
	res, code, err, reason, detail := r.res, r.code, r.err, r.reason, r.detail
	switch {
	case err == nil && code == exitcode.OK && res.Outcome == protocol.OutcomeRebooting:
		out.step(CycleCluster, DecisionPass, "", "lock held, reboot slot taken, reboot command ran")
		out.Action, out.Step = ActionRebooting, CycleReboot.N
		d.mu.Lock()
		d.attempt = 0
		d.mu.Unlock()
		if d.metrics != nil {
			d.metrics.Reboots.Inc()
		}
		return
	case err == nil && code == exitcode.OK && res.Outcome == protocol.OutcomeDryRun:
		out.step(CycleCluster, DecisionPass, "", "dry run: every check under the lock passed; no hook or reboot command ran")
		out.Action, out.Step = ActionDryRun, CycleReboot.N
		return
	}
	out.backoff = true
	switch {
	case reason != "":
		phase := "stopped waiting for the lock: "
		switch {
		case err == nil && res.Stopped != nil:
			phase = "stopped under the lock " + res.Stopped.Describe() + ": "
		case err == nil && res.FencingToken != 0:
			// The child held the lock but did not say what it ran (a child
			// of another version): it may have been running a hook.
			phase = "stopped under the lock, before the reboot command (a pre-reboot hook then running got SIGTERM; only abort_hooks undo it): "
		}
		out.block(CycleCluster, reason, phase+detail)
	case ctx.Err() != nil:
		out.block(CycleCluster, protocol.ReasonInterrupted, "stopped while the cluster step ran")
		out.backoff = false
	case err != nil:
		out.block(CycleCluster, protocol.CodeReason(code), err.Error())
	default:
		r := res.Reason
		if r == "" {
			r = protocol.CodeReason(code)
		}
		detail := res.Detail
		if detail == "" {
			detail = res.Error
		}
		if code == exitcode.OK {
			detail = fmt.Sprintf("child answered %q with exit 0: %s", res.Outcome, detail)
		}
		out.block(CycleCluster, r, detail)
	}
	if out.Reason == protocol.ReasonNotNeeded {
		out.Action = ActionIdle
		out.backoff = false
	}
}

// watchLocal re-checks the kill switch, the window and the detectors while
// the child waits, and calls stop when one says "not now" — or when the
// daemon asks (Interrupt).
func (d *Driver) watchLocal(ctx context.Context, cfg config.Config, stop func(reason, detail string)) {
	every := d.WatchEvery
	if every <= 0 {
		every = time.Duration(cfg.CheckIntervalSec) * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case why := <-d.interrupt:
			stop(protocol.ReasonInterrupted, why)
			return
		case <-t.C:
		}
		if set, reason, _ := d.deps.KillSwitch(cfg.KillSwitchFile); set {
			stop(protocol.ReasonKillSwitch, "kill switch "+cfg.KillSwitchFile+" was set: "+reason)
			return
		}
		// An operator's request (as the last publication read it) stands in
		// for the detectors, and an emergency one for the windows, as the
		// checks under the lock do.
		req := d.View().Requested(cfg.NodeName)
		if dec, err := d.deps.Windows.At(cfg, d.deps.Now()); err == nil && !dec.Open && (req == nil || !req.Now) {
			stop(protocol.ReasonWindow, "the window closed: "+dec.Reason)
			return
		}
		rep := d.deps.Detect.Detect(ctx, cfg)
		if rep.Err == nil && !rep.RebootRequired && req == nil && !errors.Is(ctx.Err(), context.Canceled) {
			d.setRequired(false, d.deps.Now())
			stop(protocol.ReasonNotNeeded, "a reboot is no longer needed")
			return
		}
	}
}
