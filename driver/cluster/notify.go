package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/notifications"
	"github.com/clusterrebootd/clusterrebootd/lib/policy"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slotnotify"
)

// Notifications are sent only from here, the cluster child: Send queues and
// returns, a sender per destination delivers in the background, and
// notifyAfter, once the step's work is done (the lock released, the reboot
// command run), gives them one more notifications.timeout_sec and puts what
// happened in the step's JSON (docs/notifications.md).

// notifiedFile, in state_dir, remembers the blocked episode already
// reported, so node_blocked and reboot_loop go out once per episode.
const notifiedFile = "notified-blocked.json"

// notifier is this step's sender (the node's fields filled in).
func (s *session) notifier() *slotnotify.Sender {
	if s.sender == nil {
		s.sender = slotnotify.NewSender(s.cfg, s.lockKey(), s.w.now, s.log)
	}
	return s.sender
}

// notify queues f when the event is configured; it never waits for a
// destination.
func (s *session) notify(f notifications.Fields) { s.notifier().Send(f) }

// notifyOnce sends f only if no node sent it before (slotnotify.Sender.Once).
func (s *session) notifyOnce(ctx context.Context, id string, f notifications.Fields) {
	s.notifier().Once(ctx, s.client, s.ns, id, s.rpc, f)
}

// notifyAfter sends what a finished step is to report (pause, resume, a
// long blocked episode on publish), then waits for the queued
// notifications (at most notifications.timeout_sec more) and records them
// in the step's JSON.
func (s *session) notifyAfter(ctx context.Context, step string, pa protocol.PublishArgs, res any, err error) {
	if !s.cfg.Notifications.Enabled() {
		return
	}
	if err == nil {
		switch r := res.(type) {
		case *protocol.PauseResult:
			if r.Changed && step == protocol.StepPause && r.Paused != nil {
				s.notify(notifications.Fields{Event: config.NotifyPaused, By: r.Paused.By, Reason: r.Paused.Reason, Since: notifications.Stamp(r.Paused.Since)})
			} else if r.Changed && step == protocol.StepResume {
				s.notify(resumedFields(s.cfg.NodeName, r.Rollout))
			}
		case *protocol.PublishResult:
			s.notifyBlocked(pa)
			s.noticeExpiredSlots(ctx)
		}
	}
	rep, ok := s.sender.Wait()
	if !ok {
		return
	}
	n := NotificationsOf(rep)
	switch r := res.(type) {
	case *protocol.CycleResult:
		r.Notifications = n
	case *protocol.PublishResult:
		r.Notifications = n
	case *protocol.CompleteResult:
		r.Notifications = n
	case *protocol.PauseResult:
		r.Notifications = n
	}
}

// resumedFields is the resumed notification: who, and when a halt was
// ended, why, the scope and the failures acknowledged, and what stays
// halted.
func resumedFields(by string, r *protocol.RolloutResume) notifications.Fields {
	f := notifications.Fields{Event: config.NotifyResumed, By: by}
	if r == nil {
		return f
	}
	scope := "every scope"
	if r.Scope != "" {
		scope = r.Scope
	}
	f.Reason = r.Reason
	f.Detail = fmt.Sprintf("the halt of %s ended; failures acknowledged: %s", scope, strings.Join(r.Failures, ", "))
	if len(r.StillHalted) > 0 {
		f.Detail += "; still halted: " + strings.Join(r.StillHalted, ", ")
	}
	return f
}

// blockedRecord is notifiedFile: the blocked episodes (their start) already
// reported, per event.
type blockedRecord map[string]string

// notifyBlocked sends reboot_loop at once and node_blocked after
// blocked_after_sec, each once per blocked episode (the daemon passes since
// when and why on every publish). Waiting for a window or a cluster-wide
// pause or an operator's hold is not reported: those are plans, not trouble.
func (s *session) notifyBlocked(a protocol.PublishArgs) {
	if (a.State != policy.StateBlocked && a.State != policy.StatePostReboot) || a.BlockedSince.IsZero() {
		return
	}
	path := filepath.Join(s.cfg.StateDir, notifiedFile)
	rec := blockedRecord{}
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &rec)
	}
	since := notifications.Stamp(a.BlockedSince)
	f := notifications.Fields{Reason: a.BlockedReason, Detail: a.Detail, Since: since}
	changed := false
	if a.BlockedReason == protocol.ReasonRebootLoop && rec[config.NotifyRebootLoop] != since {
		f.Event = config.NotifyRebootLoop
		s.notify(f)
		rec[config.NotifyRebootLoop], changed = since, true
	}
	quiet := slices.Contains([]string{protocol.ReasonWindow, protocol.ReasonPaused, protocol.ReasonHeld}, a.BlockedReason)
	after := time.Duration(s.cfg.Notifications.BlockedAfterSec) * time.Second
	if !quiet && s.w.now().Sub(a.BlockedSince) >= after && rec[config.NotifyNodeBlocked] != since {
		f.Event = config.NotifyNodeBlocked
		s.notify(f)
		rec[config.NotifyNodeBlocked], changed = since, true
	}
	if !changed {
		return
	}
	b, _ := json.Marshal(rec)
	if err := writeFileAtomic(path, b); err != nil {
		s.log.Warn("cannot remember the blocked episode notified; it may be notified again", "event", "state_dir_error", "file", path, "error", err.Error())
	}
}

// completeNotify is complete, then reboot_completed (with the time from the
// reboot request to now) and, when the slot had expired meanwhile,
// slot_expired (once per cluster: other nodes may have noticed it too).
func (s *session) completeNotify(ctx context.Context, res *protocol.CompleteResult) error {
	m, merr := reboot.ReadMarker(s.cfg.StateDir)
	cl, hasClaim, _ := slot.ReadClaim(s.cfg.StateDir)
	err := s.complete(ctx, res)
	if err != nil || merr != nil || !s.cfg.Notifications.Enabled() {
		return err
	}
	if boot, _, berr := s.w.ids(); berr != nil || boot == m.BootID {
		return nil
	}
	f := slotnotify.Completed(m, true, cl, hasClaim, s.w.now())
	s.notify(f)
	if hasClaim && !res.Freed {
		s.notifyOnce(ctx, slotnotify.OnceID(s.cfg.NodeName, cl.Lease), slotnotify.ExpiredOnReturn(cl, f.FencingToken, s.cfg.RebootSlotTTLSec))
	}
	return nil
}

// notifyStarting is sent when the slot is taken: the hooks and the reboot
// command follow at once, without waiting for it.
func (c *cycleRun) notifyStarting() {
	c.slotTaken = true
	c.notify(notifications.Fields{Event: config.NotifyRebootStarting, FencingToken: c.res.FencingToken, Slot: c.res.SlotKey})
}

// notifyFailed reports a reboot aborted or failed after its slot was taken.
func (c *cycleRun) notifyFailed(err error) {
	if err == nil || !c.slotTaken {
		return
	}
	c.notify(notifications.Fields{Event: config.NotifyRebootFailed, FencingToken: c.res.FencingToken, Slot: c.fleet.Key(),
		Reason: c.res.Reason, Detail: c.res.Detail})
}

// NotificationsOf is a step's report as the JSON of its result (the
// cluster steps' and crd-lock's pipeline).
func NotificationsOf(rep notifications.Report) *protocol.Notifications {
	n := &protocol.Notifications{}
	for _, d := range rep.Sent {
		n.Sent = append(n.Sent, protocol.NotificationDelivery(d))
	}
	for _, d := range rep.Failed {
		n.Failed = append(n.Failed, protocol.NotificationDelivery(d))
	}
	return n
}
