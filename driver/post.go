package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/gate"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
)

// postReboot is step 0 (and 8): it handles a reboot marker. It reports
// whether the cycle stops here.
func (d *Driver) postReboot(ctx context.Context, cfg config.Config, mode Mode, out *Outcome) bool {
	const name = "post_reboot"
	m, err := reboot.ReadMarker(cfg.StateDir)
	if errors.Is(err, fs.ErrNotExist) {
		out.step(0, name, DecisionSkip, "", "no reboot marker")
		return false
	}
	if err != nil {
		out.block(0, name, ReasonPostReboot, err.Error())
		return true
	}
	boot, err := d.deps.BootID()
	if err != nil {
		out.block(0, name, ReasonPostReboot, err.Error()+"; cannot tell whether the requested reboot happened")
		return true
	}
	now := d.deps.Now()
	slotTTL := time.Duration(cfg.RebootSlotTTLSec) * time.Second

	if m.BootID == boot {
		if now.Sub(m.RequestedAt) < slotTTL {
			out.block(0, name, ReasonRebootInProgress, fmt.Sprintf("reboot requested at %s; waiting for the machine to go down", m.RequestedAt.UTC().Format(time.RFC3339)))
			return true
		}
		// The command returned, yet nothing rebooted within the slot's TTL.
		d.log.Error("the reboot command returned but the machine did not reboot; removing the stale marker",
			"event", "reboot_not_happened", "requested_at", m.RequestedAt, "boot_id", boot, "command", m.Command)
		if d.metrics != nil {
			d.metrics.Blocked.Inc(ReasonRebootFailed)
		}
		if mode.Simulate {
			out.step(0, name, DecisionSkip, ReasonRebootFailed, "stale marker of a reboot that did not happen would be removed")
			return false
		}
		if err := d.record(cfg, HistoryEntry{At: m.RequestedAt, BootID: m.BootID, Rebooted: false}, now); err != nil {
			out.block(0, name, ReasonPostReboot, stateDirError(err))
			return true
		}
		if err := reboot.RemoveMarker(cfg.StateDir); err != nil {
			out.block(0, name, ReasonPostReboot, err.Error())
			return true
		}
		out.step(0, name, DecisionDone, ReasonRebootFailed, "removed the marker of a reboot that did not happen")
		return false
	}

	// A coordinated reboot completed: finish it.
	d.mu.Lock()
	if !d.post.is(m.BootID, boot) {
		d.post = readPostProgress(cfg.StateDir, m.BootID, boot)
	}
	progress := d.post
	d.status.State = policy.StatePostReboot
	d.mu.Unlock()
	// The node is back from the reboot it asked for. Whatever blocks it now
	// keeps its slot, renewed every cycle, so that the fleet waits for it
	// rather than follow a node that is not healthy again.
	hold := func(step, reason, detail string) bool {
		if ctx.Err() != nil {
			// Stopped (SIGTERM) while a post-reboot step ran: that step
			// failed because of it, and the slot is renewed by the next
			// daemon's first cycle, not by a child started already cancelled.
			out.block(0, step, ReasonInterrupted, "stopped during the post-reboot checks: "+detail)
			return true
		}
		out.block(0, step, reason, detail)
		if !mode.Simulate {
			d.keepSlot(ctx, cfg)
		}
		return true
	}
	if !mode.Simulate {
		if err := d.record(cfg, HistoryEntry{At: m.RequestedAt, BootID: m.BootID, Rebooted: true}, now); err != nil {
			return hold(name, ReasonPostReboot, stateDirError(err))
		}
	}
	if h, err := ReadHistory(cfg.StateDir); err != nil {
		return hold(name, ReasonPostReboot, stateDirError(err))
	} else if h.Block != nil {
		return hold(name, ReasonRebootLoop, h.Block.Detail+"; clear it with clusterrebootd resume --local")
	}
	if !progress.Hooks && len(cfg.PostRebootHooks) > 0 {
		if cfg.DryRun || mode.Simulate {
			out.step(0, "post_reboot_hooks", DecisionSkip, "", fmt.Sprintf("dry run: %d post-reboot hook(s) not run", len(cfg.PostRebootHooks)))
		} else {
			// The slot, granted before the reboot, gets its whole TTL again
			// before the hooks run (their timeouts are validated to fit).
			d.keepSlot(ctx, cfg)
			if err := d.deps.Hooks.Run(ctx, cfg, cfg.PostRebootHooks); err != nil {
				return hold("post_reboot_hooks", ReasonPostReboot, err.Error())
			}
			out.step(0, "post_reboot_hooks", DecisionPass, "", fmt.Sprintf("%d post-reboot hook(s) ran", len(cfg.PostRebootHooks)))
		}
		if !cfg.DryRun && !mode.Simulate {
			d.markPost(cfg, m.BootID, boot, func(p *postProgress) { p.Hooks = true })
		}
	}
	rep := d.deps.Detect.Detect(ctx, cfg)
	if rep.Err != nil {
		return hold("post_reboot_detect", ReasonDetector, rep.Err.Error())
	}
	if rep.RebootRequired {
		detail := fmt.Sprintf("the node still needs a reboot after the coordinated reboot requested at %s", m.RequestedAt.UTC().Format(time.RFC3339))
		if !mode.Simulate {
			if err := d.setBlock(cfg, detail, now); err != nil {
				detail += "; " + err.Error()
			}
		}
		return hold("post_reboot_detect", ReasonRebootLoop, detail+"; fix the cause, then clear it with clusterrebootd resume --local")
	}
	out.step(0, "post_reboot_detect", DecisionPass, "", "no detector fires after the reboot")
	gr := d.deps.Gate.Check(ctx, cfg, gate.PhasePostReboot, d.viewFor(ctx, cfg, mode, now, cfg.HealthScript != ""))
	d.countHealth(gr)
	if !gr.Healthy {
		return hold("post_reboot_health", ReasonPostReboot, gr.Reason)
	}
	out.step(0, "post_reboot_health", DecisionPass, "", gr.Reason)
	if mode.Simulate {
		out.step(0, name, DecisionSkip, "", "simulation: the slot is not freed and the marker stays")
		return false
	}
	if !progress.Settled && cfg.SettleSec > 0 {
		// The slot, granted before the reboot, gets its whole TTL again
		// before the wait, so that it outlasts settle_sec (validated to fit).
		d.keepSlot(ctx, cfg)
		if err := d.deps.Sleep(ctx, time.Duration(cfg.SettleSec)*time.Second); err != nil {
			out.block(0, "settle", ReasonInterrupted, "stopped during settle_sec")
			return true
		}
		d.markPost(cfg, m.BootID, boot, func(p *postProgress) { p.Settled = true })
	}
	var res CompleteResult
	code, err := d.deps.Child.Run(ctx, StepComplete, nil, cfg, &res)
	d.countNotifications(res.Notifications)
	if err != nil || code != exitcode.OK {
		detail := res.Error
		if err != nil {
			detail = err.Error()
		}
		out.block(0, "complete", CodeReason(code), "cannot free the reboot slot: "+detail)
		return true
	}
	if err := reboot.RemoveMarker(cfg.StateDir); err != nil {
		out.block(0, name, ReasonPostReboot, err.Error())
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
	d.log.Info("coordinated reboot completed", "event", "reboot_completed", "duration_ms", done.Sub(m.RequestedAt).Milliseconds(),
		"requested_at", m.RequestedAt, "slot_freed", res.Freed)
	out.step(0, name, DecisionDone, "", fmt.Sprintf("reboot requested at %s completed; slot freed", m.RequestedAt.UTC().Format(time.RFC3339)))
	return false
}

// markPost records a post-reboot step as done, in memory and in state_dir
// (for a restarted daemon). A file that cannot be written is logged: this
// daemon remembers anyway, and a restart would run the step again.
func (d *Driver) markPost(cfg config.Config, markerBoot, boot string, f func(*postProgress)) {
	d.mu.Lock()
	if !d.post.is(markerBoot, boot) {
		d.mu.Unlock()
		return
	}
	f(&d.post)
	p := d.post
	d.mu.Unlock()
	if err := writePostProgress(cfg.StateDir, p); err != nil {
		d.log.Warn("cannot record the post-reboot progress; a restart of the daemon would run the step again",
			"event", "state_dir_error", "error", err)
	}
}

// record adds a reboot to the history (once per marker).
func (d *Driver) record(cfg config.Config, e HistoryEntry, now time.Time) error {
	h, err := ReadHistory(cfg.StateDir)
	if err != nil {
		return err
	}
	if !h.Add(e, now) {
		return nil
	}
	return WriteHistory(cfg.StateDir, h)
}

func (d *Driver) setBlock(cfg config.Config, detail string, now time.Time) error {
	h, err := ReadHistory(cfg.StateDir)
	if err != nil {
		return err
	}
	if h.Block == nil {
		h.Block = &LoopBlock{Since: now.UTC(), Detail: detail}
		d.log.Error("reboot loop: this node is blocked until an operator clears it", "event", "reboot_loop", "detail", detail)
	}
	return WriteHistory(cfg.StateDir, h)
}

// loopCheck is the reboot-loop guard of step 2: a block recorded earlier,
// or max_reboots_per_day reached.
func (d *Driver) loopCheck(cfg config.Config, now time.Time, mode Mode) (bool, string) {
	h, err := ReadHistory(cfg.StateDir)
	if err != nil {
		return true, err.Error()
	}
	if h.Block != nil {
		return true, h.Block.Detail + "; clear it with clusterrebootd resume --local"
	}
	if n := h.InLastDay(now); n >= cfg.MaxRebootsPerDay {
		detail := fmt.Sprintf("%d reboots in the last 24 hours, max_reboots_per_day is %d", n, cfg.MaxRebootsPerDay)
		if !mode.Simulate {
			if err := d.setBlock(cfg, detail, now); err != nil {
				detail += "; " + err.Error()
			}
		}
		return true, detail + "; clear it with clusterrebootd resume --local"
	}
	return false, ""
}

// ClearLoop removes a reboot_loop block and the reboots counted against
// max_reboots_per_day (`clusterrebootd resume --local`). It reports whether
// there was a block.
func ClearLoop(stateDir string) (bool, error) {
	h, err := ReadHistory(stateDir)
	if err != nil {
		// An unreadable history is cleared by starting a new one.
		return true, WriteHistory(stateDir, History{})
	}
	had := h.Block != nil
	h.Block = nil
	h.Reboots = nil
	return had, WriteHistory(stateDir, h)
}

// Publish runs the child's publish step with the current status. It reads
// the pause key only; viewFor reads the whole view when a decision needs it.
func (d *Driver) Publish(ctx context.Context) error { return d.publish(ctx, false) }

func (d *Driver) publish(ctx context.Context, readView bool) error {
	cfg := d.Config()
	st := d.Status()
	last := st.LastCheck
	if last.IsZero() {
		last = d.deps.Now()
	}
	detail := st.Detail
	if st.Reason != "" && detail != "" {
		detail = st.Reason + ": " + detail
	} else if st.Reason != "" {
		detail = st.Reason
	}
	args := PublishArgs{State: st.State, RebootRequired: st.RebootRequired, LastCheck: last, Detail: oneLine(detail, 200), ReadView: readView}
	args.BlockedSince, args.BlockedReason = d.blockedEpisode(st, d.deps.Now())
	var res PublishResult
	code, err := d.deps.Child.Run(ctx, StepPublish, args.Args(), cfg, &res)
	if err != nil {
		return exitcode.New(code, err)
	}
	if code != exitcode.OK {
		return exitcode.Errorf(code, "publish: %s", res.Error)
	}
	d.countNotifications(res.Notifications)
	d.published(res, d.deps.Now())
	return nil
}

func oneLine(s string, max int) string {
	b := []rune(s)
	for i, r := range b {
		if r == '\n' || r == '\r' {
			b[i] = ' '
		}
	}
	if len(b) > max {
		b = append(b[:max], '.', '.', '.')
	}
	return string(b)
}

// keepSlot renews this node's reboot slot through the child (complete
// --keep). A failure is logged: the node is blocked anyway, and the slot
// then frees itself when its lease runs out.
func (d *Driver) keepSlot(ctx context.Context, cfg config.Config) {
	if ctx.Err() != nil {
		return // a child started already cancelled could only fail
	}
	var res CompleteResult
	code, err := d.deps.Child.Run(ctx, StepComplete, CompleteArgs{Keep: true}.Args(), cfg, &res)
	if err != nil || code != exitcode.OK {
		detail := res.Error
		if err != nil {
			detail = err.Error()
		}
		d.log.Warn("cannot renew the reboot slot while the post-reboot checks fail; it frees itself when its lease runs out",
			"event", "slot_keep_failed", "error", detail)
	}
}

// stateDirError says what to do about a history that cannot be read or
// written: it is not a reboot loop, and resume --local (which would skip
// the post-reboot checks) is not the answer.
func stateDirError(err error) string {
	return err.Error() + "; make state_dir writable (free space, permissions): the post-reboot steps go on at the next cycle"
}
