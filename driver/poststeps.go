package driver

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
)

// rebootPending handles a marker written in this boot: the reboot was
// requested and has not happened (yet). Within the slot's TTL the node
// waits for it to go down; after that the marker is stale and removed. It
// reports whether the cycle stops here.
func (d *Driver) rebootPending(ctx context.Context, cfg config.Config, mode Mode, m reboot.Marker, boot string, now time.Time, out *Outcome) bool {
	name := CyclePostReboot
	slotTTL := time.Duration(cfg.RebootSlotTTLSec) * time.Second
	if now.Sub(m.RequestedAt) < slotTTL {
		out.block(name, protocol.ReasonRebootInProgress, fmt.Sprintf("reboot requested at %s; waiting for the machine to go down", m.RequestedAt.UTC().Format(time.RFC3339)))
		return true
	}
	// The command returned, yet nothing rebooted within the slot's TTL.
	d.log.Error("the reboot command returned but the machine did not reboot; removing the stale marker",
		"event", "reboot_not_happened", "requested_at", m.RequestedAt, "boot_id", boot, "command", m.Command)
	if d.metrics != nil {
		d.metrics.Blocked.Inc(protocol.ReasonRebootFailed)
	}
	if mode.Simulate {
		out.step(name, DecisionSkip, protocol.ReasonRebootFailed, "stale marker of a reboot that did not happen would be removed")
		return false
	}
	if err := d.record(cfg, HistoryEntry{At: m.RequestedAt, BootID: m.BootID, Rebooted: false}, now); err != nil {
		out.block(name, protocol.ReasonPostReboot, stateDirError(err))
		return true
	}
	d.recordFailure(ctx, cfg, "reboot_command", fmt.Sprintf("its reboot command (%s) ran at %s, but the machine did not go down within reboot_slot_ttl_sec (%d s)",
		strings.Join(m.Command, " "), m.RequestedAt.UTC().Format(time.RFC3339), cfg.RebootSlotTTLSec), m.RequestedAt)
	if err := reboot.RemoveMarker(cfg.StateDir); err != nil {
		out.block(name, protocol.ReasonPostReboot, err.Error())
		return true
	}
	out.step(name, DecisionDone, protocol.ReasonRebootFailed, "removed the marker of a reboot that did not happen")
	return false
}

// postRun is one pass of the post-reboot steps for the marker m, in boot.
// Each step records its decision in out and reports whether the cycle
// stops at it.
type postRun struct {
	d        *Driver
	ctx      context.Context
	cfg      config.Config
	mode     Mode
	m        reboot.Marker
	boot     string
	now      time.Time
	out      *Outcome
	progress postProgress
}

// startPost begins the post-reboot steps: the progress recorded for this
// marker and boot, and the post_reboot state.
func (d *Driver) startPost(ctx context.Context, cfg config.Config, mode Mode, m reboot.Marker, boot string, now time.Time, out *Outcome) *postRun {
	d.mu.Lock()
	if !d.post.is(m.BootID, boot) {
		d.post = readPostProgress(cfg.StateDir, m.BootID, boot)
	}
	progress := d.post
	d.status.State = policy.StatePostReboot
	d.mu.Unlock()
	return &postRun{d: d, ctx: ctx, cfg: cfg, mode: mode, m: m, boot: boot, now: now, out: out, progress: progress}
}

// hold blocks the cycle at step. The node is back from the reboot it asked
// for. Whatever blocks it now keeps its slot, renewed every cycle, so that
// the fleet waits for it rather than follow a node that is not healthy
// again.
func (p *postRun) hold(step CycleStep, reason, detail string) bool {
	if p.ctx.Err() != nil {
		// Stopped (SIGTERM) while a post-reboot step ran: that step
		// failed because of it, and the slot is renewed by the next
		// daemon's first cycle, not by a child started already cancelled.
		p.out.block(step, protocol.ReasonInterrupted, "stopped during the post-reboot checks: "+detail)
		return true
	}
	p.out.block(step, reason, detail)
	if !p.mode.Simulate {
		p.d.keepSlot(p.ctx, p.cfg)
	}
	return true
}

// recordReboot adds the completed reboot to the history and stops at a
// reboot-loop block recorded there.
func (p *postRun) recordReboot() bool {
	name := CyclePostReboot
	if !p.mode.Simulate {
		if err := p.d.record(p.cfg, HistoryEntry{At: p.m.RequestedAt, BootID: p.m.BootID, Rebooted: true}, p.now); err != nil {
			return p.hold(name, protocol.ReasonPostReboot, stateDirError(err))
		}
	}
	if h, err := ReadHistory(p.cfg.StateDir); err != nil {
		return p.hold(name, protocol.ReasonPostReboot, stateDirError(err))
	} else if h.Block != nil {
		return p.hold(name, protocol.ReasonRebootLoop, h.Block.Detail+"; clear it with clusterrebootd resume --local")
	}
	return false
}

// postHooks runs the post-reboot hooks, once per boot.
func (p *postRun) postHooks() bool {
	d, cfg, ctx := p.d, p.cfg, p.ctx
	if p.progress.Hooks || len(cfg.PostRebootHooks) == 0 {
		return false
	}
	if cfg.DryRun || p.mode.Simulate {
		p.out.step(CyclePostRebootHooks, DecisionSkip, "", fmt.Sprintf("dry run: %d post-reboot hook(s) not run", len(cfg.PostRebootHooks)))
	} else {
		// The slot, granted before the reboot, gets its whole TTL again
		// before the hooks run (their timeouts are validated to fit).
		d.keepSlot(ctx, cfg)
		if err := d.deps.Hooks.Run(ctx, cfg, cfg.PostRebootHooks); err != nil {
			return p.hold(CyclePostRebootHooks, protocol.ReasonPostReboot, err.Error())
		}
		p.out.step(CyclePostRebootHooks, DecisionPass, "", fmt.Sprintf("%d post-reboot hook(s) ran", len(cfg.PostRebootHooks)))
	}
	if !cfg.DryRun && !p.mode.Simulate {
		d.markPost(cfg, p.m.BootID, p.boot, func(pp *postProgress) { pp.Hooks = true })
	}
	return false
}

// detectorQuiet stops, and blocks the node as in a reboot loop, when a
// detector still fires after the reboot.
func (p *postRun) detectorQuiet() bool {
	rep := p.d.deps.Detect.Detect(p.ctx, p.cfg)
	if rep.Err != nil {
		return p.hold(CyclePostRebootDetect, protocol.ReasonDetector, rep.Err.Error())
	}
	if rep.RebootRequired {
		detail := fmt.Sprintf("the node still needs a reboot after the coordinated reboot requested at %s", p.m.RequestedAt.UTC().Format(time.RFC3339))
		if !p.mode.Simulate {
			if err := p.d.setBlock(p.ctx, p.cfg, detail, p.now); err != nil {
				detail += "; " + err.Error()
			}
		}
		return p.hold(CyclePostRebootDetect, protocol.ReasonRebootLoop, detail+"; fix the cause, then clear it with clusterrebootd resume --local")
	}
	p.out.step(CyclePostRebootDetect, DecisionPass, "", "no detector fires after the reboot")
	return false
}

// postHealth is the health gate in phase post-reboot.
func (p *postRun) postHealth() bool {
	d, cfg := p.d, p.cfg
	gr := d.deps.Gate.Check(p.ctx, cfg, gate.PhasePostReboot, d.summaryFor(p.ctx, cfg, p.mode, p.now, cfg.HealthScript != ""))
	d.countHealth(gr)
	if !gr.Healthy {
		return p.hold(CyclePostRebootHealth, protocol.ReasonPostReboot, gr.Reason)
	}
	p.out.step(CyclePostRebootHealth, DecisionPass, "", gr.Reason)
	return false
}

// settle waits settle_sec, once per boot.
func (p *postRun) settle() bool {
	d, cfg := p.d, p.cfg
	if p.progress.Settled || cfg.SettleSec <= 0 {
		return false
	}
	// The slot, granted before the reboot, gets its whole TTL again
	// before the wait, so that it outlasts settle_sec (validated to fit).
	d.keepSlot(p.ctx, cfg)
	if err := d.deps.Sleep(p.ctx, time.Duration(cfg.SettleSec)*time.Second); err != nil {
		p.out.block(CycleSettle, protocol.ReasonInterrupted, "stopped during settle_sec")
		return true
	}
	d.markPost(cfg, p.m.BootID, p.boot, func(pp *postProgress) { pp.Settled = true })
	return false
}

// freeSlot runs the child `complete`, which frees the reboot slot.
func (p *postRun) freeSlot() (protocol.CompleteResult, bool) {
	var res protocol.CompleteResult
	code, err := p.d.deps.Child.Run(p.ctx, protocol.StepComplete, nil, p.cfg, &res)
	p.d.countSilences(res.Silences)
	p.d.countNotifications(res.Notifications)
	if err != nil || code != exitcode.OK {
		detail := res.Error
		if err != nil {
			detail = err.Error()
		}
		p.out.block(CycleComplete, protocol.CodeReason(code), "cannot free the reboot slot: "+detail)
		return res, true
	}
	return res, false
}

// rebootCompleted removes the marker and the progress file, writes the
// time of completion to run_dir, and logs and counts reboot_completed.
func (p *postRun) rebootCompleted(res protocol.CompleteResult) bool {
	name := CyclePostReboot
	d, cfg, m := p.d, p.cfg, p.m
	if err := reboot.RemoveMarker(cfg.StateDir); err != nil {
		p.out.block(name, protocol.ReasonPostReboot, err.Error())
		return true
	}
	if err := removePostProgress(cfg.StateDir); err != nil {
		d.log.Warn("cannot remove the post-reboot progress file", "event", "state_dir_error", "error", err)
	}
	done := d.deps.Now()
	if err := WriteFileAtomic(filepath.Join(cfg.RunDir, LastRebootFile), []byte(done.UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		d.log.Warn("cannot write the post-reboot timestamp", "event", "run_dir_error", "error", err)
	}
	if d.metrics != nil {
		d.metrics.RebootDuration.Observe(done.Sub(m.RequestedAt).Seconds())
		if !res.Freed {
			d.metrics.SlotExpired.Inc()
		}
	}
	d.forgetRequest(cfg.NodeName, m.Extra[protocol.MarkerRequestRevision])
	d.log.Info("coordinated reboot completed", "event", "reboot_completed", "duration_ms", done.Sub(m.RequestedAt).Milliseconds(),
		"requested_at", m.RequestedAt, "slot_freed", res.Freed)
	p.out.step(name, DecisionDone, "", fmt.Sprintf("reboot requested at %s completed; slot freed", m.RequestedAt.UTC().Format(time.RFC3339)))
	return false
}

// forgetRequest drops from the cached view the reboot request a completed
// reboot carried out (the complete step consumed it at that revision): the
// rest of this cycle must not read it as a request for another reboot. A
// request changed since (another revision) stays.
func (d *Driver) forgetRequest(node, revision string) {
	rev, err := strconv.ParseInt(revision, 10, 64)
	if err != nil || rev <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.view.Requested(node); r != nil && r.Revision == rev {
		d.view.Requests = replaceOverride(d.view.Requests, node, nil)
	}
}
