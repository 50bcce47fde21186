package crdlock

import (
	"context"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/cluster"
	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/config"
	"github.com/clusterrebootd/clusterrebootd/lib/notifications"
	"github.com/clusterrebootd/clusterrebootd/lib/reboot"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
	"github.com/clusterrebootd/clusterrebootd/lib/slotnotify"
)

// The pipeline's notifications (docs/notifications.md), the events the
// daemon's cycle and complete steps send, through the same code
// (lib/slotnotify): `crd-lock hold --reboot-slot` queues reboot_starting
// once the slot is taken and starts COMMAND at once; reboot_failed when
// COMMAND fails or the slot is freed without a reboot; `crd-lock complete`
// sends reboot_completed and, when the slot had expired, slot_expired (once
// per cluster). Before crd-lock exits, what is queued gets at most one more
// notifications.timeout_sec; the result's JSON says what became of it.

// pipelineNotes is one crd-lock run's notifications.
type pipelineNotes struct {
	s   *slotnotify.Sender
	cfg config.Config
	log *slog.Logger
	// starting is reboot_starting once queued (the slot taken): a failure
	// after it is reboot_failed.
	starting *notifications.Fields
	// failReason is the reason token of that failure when not the
	// command's (hook: the required silence).
	failReason string
}

func newPipelineNotes(cfg config.Config, log *slog.Logger) *pipelineNotes {
	return &pipelineNotes{s: slotnotify.NewSender(cfg, cfg.LockKeyForGroup(), time.Now, log), cfg: cfg, log: log}
}

// rpc bounds one etcd request of the notifications.
func (p *pipelineNotes) rpc() time.Duration {
	return time.Duration(p.cfg.EtcdDialTimeoutSec) * time.Second
}

// slotTaken queues reboot_starting. It never waits for a destination.
// (The in-flight record that lets other nodes see a slot that ran out is
// written by the admission with the slot itself.)
func (p *pipelineNotes) slotTaken(token int64, key string) {
	if p == nil || !p.s.Enabled() {
		return
	}
	f := notifications.Fields{Event: config.NotifyRebootStarting, FencingToken: token, Slot: key}
	p.starting = &f
	p.s.Send(f)
}

// halted sends rollout_halted: this pipeline's admission recorded the halt.
func (p *pipelineNotes) halted(detail string) {
	if p == nil {
		return
	}
	p.s.Send(notifications.Fields{Event: config.NotifyRolloutHalted, Reason: protocol.ReasonHalted, Detail: detail})
}

// holdEnded sends reboot_failed when hold fails after reboot_starting
// (COMMAND failed or could not run, the lock was lost, the required
// silence failed), then waits for the queue and reports it in res.
func (p *pipelineNotes) holdEnded(err error, res *HoldResult) {
	if p == nil {
		return
	}
	if p.starting != nil && err != nil {
		f := *p.starting
		f.Event, f.Reason, f.Detail = config.NotifyRebootFailed, p.reason(res), err.Error()
		if res.SlotKept {
			f.Detail += "; the reboot slot is kept (a reboot command started)"
		} else {
			f.Detail += "; the reboot slot is freed"
		}
		p.s.Send(f)
	}
	res.Notifications = p.wait()
}

// reason is the daemon's reason token for how hold failed.
func (p *pipelineNotes) reason(res *HoldResult) string {
	switch {
	case p.failReason != "":
		return p.failReason
	case res.LockLost:
		return protocol.ReasonLockBusy
	}
	return protocol.ReasonRebootFailed
}

// wait gives the queue at most one more notifications.timeout_sec.
func (p *pipelineNotes) wait() *protocol.Notifications {
	if p == nil {
		return nil
	}
	rep, ok := p.s.Wait()
	if !ok {
		return nil
	}
	return cluster.NotificationsOf(rep)
}

// completed is `crd-lock complete`'s part once the slot of claim cl was
// freed or found expired (the boot id changed): reboot_completed with the
// time since the reboot request (the marker, read before complete removes
// it) or since the slot was taken, and slot_expired once per cluster when
// the slot had expired meanwhile.
func (p *pipelineNotes) completed(ctx context.Context, client *clientv3.Client, cl slot.Claim, expired bool) {
	if p == nil || !p.s.Enabled() {
		return
	}
	m, merr := reboot.ReadMarker(p.cfg.StateDir)
	f := slotnotify.Completed(m, merr == nil, cl, true, time.Now())
	p.s.Send(f)
	if expired {
		p.s.Once(ctx, client, p.cfg.Namespace(), slotnotify.OnceID(p.cfg.NodeName, cl.Lease), p.rpc(),
			slotnotify.ExpiredOnReturn(cl, f.FencingToken, p.cfg.RebootSlotTTLSec))
	}
}

// silenceFailed marks the failure as the required silence's.
func (p *pipelineNotes) silenceFailed() {
	if p != nil {
		p.failReason = protocol.ReasonHook
	}
}
