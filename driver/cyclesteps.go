package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
)

// Steps 1-4 of the cycle, run in this process by RunOnce in this order
// (docs/architecture.md, "The cycle"). Each records its decision in out and
// reports whether the cycle stops at it.

// stepKillSwitch is step 1: the kill switch file, then the cluster pause and
// this node's hold as the last view has them. It reports whether the cycle
// stops here.
func (d *Driver) stepKillSwitch(ctx context.Context, cfg config.Config, now time.Time, out *Outcome) bool {
	if set, reason, err := d.deps.KillSwitch(cfg.KillSwitchFile); set {
		if err != nil {
			d.log.Warn("kill switch undeterminable", "event", "kill_switch_error", "error", err)
		}
		out.block(CycleKillSwitch, protocol.ReasonKillSwitch, fmt.Sprintf("kill switch %s is set: %s; remove the file to allow reboots", cfg.KillSwitchFile, reason))
		d.refreshRequired(ctx, cfg, now)
		return true
	}
	if p := d.View().Paused; p != nil {
		out.block(CycleKillSwitch, protocol.ReasonPaused, fmt.Sprintf("reboots are paused cluster-wide by %s since %s: %s; run clusterrebootd resume", p.By, p.Since.UTC().Format(time.RFC3339), p.Reason))
		d.refreshRequired(ctx, cfg, now)
		return true
	}
	if h := d.View().Halted; h != nil {
		out.block(CycleKillSwitch, protocol.ReasonHalted, fmt.Sprintf("the rollout halted itself at %s: %s; look at the failed nodes, then run clusterrebootd resume --reason TEXT", h.Since.UTC().Format(time.RFC3339), h.Reason))
		d.refreshRequired(ctx, cfg, now)
		return true
	}
	if h := d.View().Held(cfg.NodeName); h != nil {
		out.block(CycleKillSwitch, protocol.ReasonHeld, fmt.Sprintf("node %s is held by %s since %s: %s; run clusterrebootd release-hold %s", cfg.NodeName, h.By, h.Since.UTC().Format(time.RFC3339), h.Reason, cfg.NodeName))
		d.refreshRequired(ctx, cfg, now)
		return true
	}
	out.step(CycleKillSwitch, DecisionPass, "", "kill switch not set")
	return false
}

// stepDetect is step 2: the detectors (or an operator's reboot request) and
// the reboot-loop guard. It reports whether the cycle stops here; a node
// that needs no reboot stops idle.
func (d *Driver) stepDetect(ctx context.Context, cfg config.Config, mode Mode, now time.Time, out *Outcome) bool {
	rep := d.deps.Detect.Detect(ctx, cfg)
	if d.metrics != nil {
		d.metrics.LastCheck.Set(float64(now.Unix()))
	}
	if rep.Err != nil {
		if exitcode.CodeOf(rep.Err) == exitcode.Interrupted || ctx.Err() != nil {
			out.block(CycleDetect, protocol.ReasonInterrupted, "stopped during detection")
			return true
		}
		out.block(CycleDetect, protocol.ReasonDetector, rep.Err.Error())
		return true
	}
	d.setRequired(rep.RebootRequired, now)
	// An operator's reboot request comes with the view the publisher read
	// (no etcd read here: an idle node does not ask etcd every cycle).
	requested := d.View().Requested(cfg.NodeName)
	if !rep.RebootRequired && requested == nil {
		d.mu.Lock()
		d.attempt = 0
		d.mu.Unlock()
		out.step(CycleDetect, DecisionBlock, protocol.ReasonNotNeeded, "no detector says a reboot is needed")
		out.Action, out.Reason, out.Detail, out.Step = ActionIdle, protocol.ReasonNotNeeded, "no reboot needed", CycleDetect.N
		return true
	}
	fired := ""
	for _, r := range rep.Fired() {
		if fired != "" {
			fired += ", "
		}
		fired += r.Name
		out.Detectors = append(out.Detectors, r.Name)
		if r.Detail != "" {
			fired += " (" + r.Detail + ")"
		}
	}
	if blocked, detail := d.loopCheck(ctx, cfg, now, mode); blocked {
		out.block(CycleDetect, protocol.ReasonRebootLoop, detail)
		return true
	}
	if fired == "" && requested != nil {
		fired = fmt.Sprintf("requested by %s since %s: %s", requested.By, requested.Since.UTC().Format(time.RFC3339), requested.Reason)
	}
	out.step(CycleDetect, DecisionPass, "", "reboot needed: "+fired)
	// Never while a package transaction runs: the need it reports may be
	// the transaction's own, written before the boot loader was updated.
	if err := d.deps.PackageBusy(); err != nil {
		out.block(CyclePackageManager, protocol.ReasonPackageManagerBusy, err.Error())
		return true
	}
	out.step(CyclePackageManager, DecisionPass, "", "no package manager is mid-transaction")
	return false
}

// stepWindow is step 3: the maintenance windows. It reports whether the
// cycle stops here.
func (d *Driver) stepWindow(cfg config.Config, now time.Time, out *Outcome) bool {
	if r := d.View().Requested(cfg.NodeName); r != nil && r.Now {
		// An emergency reboot (request --now): every rule but the windows.
		out.step(CycleWindow, DecisionPass, "", fmt.Sprintf("emergency reboot requested by %s since %s (%s): the windows are not checked",
			r.By, r.Since.UTC().Format(time.RFC3339), r.Reason))
		return false
	}
	dec, err := d.deps.Windows.At(cfg, now)
	if err != nil {
		out.block(CycleWindow, protocol.ReasonWindow, err.Error())
		return true
	}
	if !dec.Open {
		detail := dec.Reason
		if !dec.NextOpen.IsZero() {
			detail += "; next opening " + dec.NextOpen.Format(time.RFC3339)
		}
		out.block(CycleWindow, protocol.ReasonWindow, detail)
		return true
	}
	out.step(CycleWindow, DecisionPass, "", dec.Reason)
	return false
}

// stepPolicyGate is step 4: the built-in policies on the last view, then the
// health gate in phase pre-lock. It reports whether the cycle stops here.
func (d *Driver) stepPolicyGate(ctx context.Context, cfg config.Config, mode Mode, now time.Time, out *Outcome) bool {
	sum := d.summaryFor(ctx, cfg, mode, now, policy.Active(cfg.ClusterPolicies) || cfg.HealthScript != "")
	pd := policy.EvaluateSummary(sum, cfg.NodeName, cfg.ClusterPolicies)
	if !pd.Allowed {
		out.block(CyclePolicy, protocol.ReasonPolicy, pd.Rule+": "+pd.Reason)
		return true
	}
	out.step(CyclePolicy, DecisionPass, "", pd.Reason)
	gr := d.deps.Gate.Check(ctx, cfg, gate.PhasePreLock, sum)
	if !gr.Healthy && (exitcode.CodeOf(gr.Err()) == exitcode.Interrupted || ctx.Err() != nil) {
		// Not an answer of the script: neither counted nor logged as unhealthy.
		out.block(CycleHealth, protocol.ReasonInterrupted, "stopped during the health check")
		return true
	}
	d.countHealth(gr)
	if !gr.Healthy {
		out.block(CycleHealth, protocol.ReasonHealth, gr.Reason)
		return true
	}
	out.step(CycleHealth, DecisionPass, "", gr.Reason)
	return false
}
