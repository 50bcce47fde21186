package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
)

// postReboot is step 0 (and 8): it handles a reboot marker. It reports
// whether the cycle stops here.
func (d *Driver) postReboot(ctx context.Context, cfg config.Config, mode Mode, out *Outcome) bool {
	name := CyclePostReboot
	m, err := reboot.ReadMarker(cfg.StateDir)
	if errors.Is(err, fs.ErrNotExist) {
		out.step(name, DecisionSkip, "", "no reboot marker")
		return false
	}
	if err != nil {
		out.block(name, protocol.ReasonPostReboot, err.Error())
		return true
	}
	boot, err := d.deps.BootID()
	if err != nil {
		out.block(name, protocol.ReasonPostReboot, err.Error()+"; cannot tell whether the requested reboot happened")
		return true
	}
	now := d.deps.Now()
	if m.BootID == boot {
		return d.rebootPending(ctx, cfg, mode, m, boot, now, out)
	}

	// A coordinated reboot completed: finish it, step by step in the order
	// of docs/architecture.md's step 8.
	p := d.startPost(ctx, cfg, mode, m, boot, now, out)
	if stop := p.recordReboot(); stop {
		return true
	}
	if stop := p.postHooks(); stop {
		return true
	}
	if stop := p.detectorQuiet(); stop {
		return true
	}
	if stop := p.postHealth(); stop {
		return true
	}
	if mode.Simulate {
		out.step(name, DecisionSkip, "", "simulation: the slot is not freed and the marker stays")
		return false
	}
	if stop := p.settle(); stop {
		return true
	}
	res, stop := p.freeSlot()
	if stop {
		return true
	}
	return p.rebootCompleted(res)
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

func (d *Driver) setBlock(ctx context.Context, cfg config.Config, detail string, now time.Time) error {
	h, err := ReadHistory(cfg.StateDir)
	if err != nil {
		return err
	}
	if h.Block == nil {
		h.Block = &LoopBlock{Since: now.UTC(), Detail: detail}
		d.log.Error("reboot loop: this node is blocked until an operator clears it", "event", "reboot_loop", "detail", detail)
		// A reboot loop is a failure of the rollout too: a bad update may
		// reboot a node over and over.
		d.recordFailure(ctx, cfg, "reboot_loop", detail, now)
	}
	return WriteHistory(cfg.StateDir, h)
}

// loopCheck is the reboot-loop guard of step 2: a block recorded earlier,
// or max_reboots_per_day reached.
func (d *Driver) loopCheck(ctx context.Context, cfg config.Config, now time.Time, mode Mode) (bool, string) {
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
			if err := d.setBlock(ctx, cfg, detail, now); err != nil {
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

func (d *Driver) publish(ctx context.Context, readSummary bool) error {
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
	args := protocol.PublishArgs{State: st.State, RebootRequired: st.RebootRequired, LastCheck: protocol.Seconds(last), Detail: oneLine(detail, 200), ReadSummary: readSummary}
	since, reason := d.blockedEpisode(st, d.deps.Now())
	args.BlockedSince, args.BlockedReason = protocol.Seconds(since), reason
	args.RequiredSince = protocol.Seconds(d.RequiredSince())
	var res protocol.PublishResult
	code, err := d.deps.Child.Run(ctx, protocol.StepPublish, args, cfg, &res)
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
	var res protocol.CompleteResult
	code, err := d.deps.Child.Run(ctx, protocol.StepComplete, protocol.CompleteArgs{Keep: true}, cfg, &res)
	d.countSilences(res.Silences)
	if err != nil || code != exitcode.OK {
		detail := res.Error
		if err != nil {
			detail = err.Error()
		}
		d.log.Warn("cannot renew the reboot slot while the post-reboot checks fail; it frees itself when its lease runs out",
			"event", "slot_keep_failed", "error", detail)
	}
}

// recordFailure records a failure of this node against the rollout's
// failure budget through the child (step failure), best effort: a failure
// that cannot be recorded is logged, and a reboot that did not complete in
// time is seen anyway from its in-flight record.
func (d *Driver) recordFailure(ctx context.Context, cfg config.Config, kind, detail string, since time.Time) {
	var res protocol.FailureResult
	code, err := d.deps.Child.Run(ctx, protocol.StepFailure, protocol.FailureArgs{Kind: kind, Detail: detail, Since: protocol.Seconds(since)}, cfg, &res)
	if err != nil || code != exitcode.OK {
		why := res.Error
		if err != nil {
			why = err.Error()
		}
		d.log.Warn("cannot record the failure against the rollout's failure budget", "event", "failure_record_failed", "kind", kind, "error", why)
	}
}

// stateDirError says what to do about a history that cannot be read or
// written: it is not a reboot loop, and resume --local (which would skip
// the post-reboot checks) is not the answer.
func stateDirError(err error) string {
	return err.Error() + "; make state_dir writable (free space, permissions): the post-reboot steps go on at the next cycle"
}
