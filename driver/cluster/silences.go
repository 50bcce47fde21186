package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/clusterrebootd/clusterrebootd/driver/protocol"
	"github.com/clusterrebootd/clusterrebootd/lib/exitcode"
	"github.com/clusterrebootd/clusterrebootd/lib/silence"
	"github.com/clusterrebootd/clusterrebootd/lib/silence/record"
	"github.com/clusterrebootd/clusterrebootd/lib/slot"
)

// silences is this node's configured silence (nil: none configured). The
// configuration was validated, so rendering cannot fail; if it did, the
// error is reported as a silence failure.
func (s *session) silences() (*silence.Node, error) {
	n, err := silence.FromConfig(s.cfg)
	if n != nil {
		n.Now = s.w.now
	}
	return n, err
}

// slotEnd is when the slot's lease runs out (lib/slot Ends, as every entry
// point's silence computes it).
func (s *session) slotEnd(ctx context.Context, lease clientv3.LeaseID) time.Time {
	return slot.Ends(ctx, s.client, lease, secs(s.cfg.RebootSlotTTLSec), s.rpc, s.w.now)
}

// silenceSlot creates (or, on a retried cycle, updates) this node's
// silence on every Alertmanager once the reboot slot is taken, ending with
// the slot's lease. A failure is logged and counted; with
// silences.required it stops the reboot and frees the slot.
func (c *cycleRun) silenceSlot() error {
	n, err := c.silences()
	if n == nil && err == nil {
		return nil
	}
	rep := &protocol.SilenceReport{}
	c.res.Silences = rep
	var errs []error
	if err != nil {
		errs = []error{err}
	} else {
		rec, e := n.Ensure(c.uctx, silence.Slot{Key: c.slot.Key, FencingToken: c.res.FencingToken, EndsAt: c.slotEnd(c.uctx, c.slotLease)})
		rep.IDs, errs = rec.IDs(), e
		if len(rec.Silences) > 0 {
			c.log.Info("alerts of this node silenced while it reboots", "event", "silence_created", "silence_ids", strings.Join(rep.IDs, ","),
				"ends_at", rec.Silences[0].EndsAt.Format(time.RFC3339))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	rep.CreateFailures, rep.Errors = len(errs), errStrings(errs)
	required := err != nil || n.Required
	if !required {
		c.log.Warn("the silence could not be created; the reboot goes on (silences.required is false)", "event", "silence_failed",
			"op", protocol.SilenceOpCreate, "error", strings.Join(rep.Errors, "; "))
		return nil
	}
	c.log.Warn("the silence could not be created and silences.required is true; nothing is rebooted", "event", "silence_failed",
		"op", protocol.SilenceOpCreate, "error", strings.Join(rep.Errors, "; "))
	c.freeSlot()
	return c.stop(protocol.ReasonHook, exitcode.Errorf(exitcode.RebootFailed,
		"cluster: silences.required is true and the silence could not be created: %s; nothing was rebooted and the slot is freed: "+
			"bring the Alertmanager back or set silences.required to false", strings.Join(rep.Errors, "; ")))
}

// extendSilence moves the silence's end to the renewed slot's (just before
// the reboot command). A failure is logged and counted; the silence then
// ends a little before the slot.
func (c *cycleRun) extendSilence() {
	n, err := c.silences()
	if n == nil || err != nil || c.res.Silences == nil || len(c.res.Silences.IDs) == 0 {
		return
	}
	rec, errs := n.Extend(c.uctx, silence.Slot{EndsAt: c.slotEnd(c.uctx, c.slotLease)})
	c.res.Silences.IDs = rec.IDs()
	if len(errs) > 0 {
		c.res.Silences.CreateFailures += len(errs)
		c.res.Silences.Errors = append(c.res.Silences.Errors, errStrings(errs)...)
		c.log.Warn("the silence could not be extended with the reboot slot; it ends a little earlier", "event", "silence_failed",
			"op", protocol.SilenceOpCreate, "error", strings.Join(errStrings(errs), "; "))
	}
}

// expireSilences ends the silences recorded in state_dir when the slot is
// freed without a reboot (an abort). A failure is logged and counted: the
// silence ends by itself.
func (c *cycleRun) expireSilences() {
	if _, ok, _ := record.ReadRecord(c.cfg.StateDir); !ok {
		return
	}
	if c.res.Silences == nil {
		c.res.Silences = &protocol.SilenceReport{}
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), secs(2*c.cfg.Silences.TimeoutSec))
	defer cancel()
	c.session.expireSilences(fctx, c.res.Silences, "the reboot was called off")
	c.res.Silences.IDs = nil
}

// expireSilencesAfterBoot ends the silences once complete freed the slot.
func (s *session) expireSilencesAfterBoot(ctx context.Context, res *protocol.CompleteResult) {
	if _, ok, _ := record.ReadRecord(s.cfg.StateDir); !ok {
		return
	}
	res.Silences = &protocol.SilenceReport{}
	s.expireSilences(ctx, res.Silences, "the node is back and its reboot slot is freed")
}

func (s *session) expireSilences(ctx context.Context, rep *protocol.SilenceReport, why string) {
	n, _ := s.silences()
	expired, errs := n.Expire(ctx, s.cfg.StateDir)
	rep.Expired = len(expired)
	if len(expired) > 0 {
		ids := make([]string, len(expired))
		for i, e := range expired {
			ids[i] = e.ID
		}
		s.log.Info("silence expired: "+why, "event", "silence_expired", "silence_ids", strings.Join(ids, ","))
	}
	if len(errs) > 0 {
		rep.ExpireFailures += len(errs)
		rep.Errors = append(rep.Errors, errStrings(errs)...)
		s.log.Warn("the silence could not be expired; it ends by itself with the slot's lease", "event", "silence_failed",
			"op", protocol.SilenceOpExpire, "error", strings.Join(errStrings(errs), "; "))
	}
}

// keepSilences extends the silences with the slot that complete --keep
// renewed (the node is back but its post-reboot checks fail).
func (s *session) keepSilences(ctx context.Context, lease clientv3.LeaseID, res *protocol.CompleteResult) {
	n, err := s.silences()
	if n == nil || err != nil {
		return
	}
	if _, ok, _ := record.ReadRecord(s.cfg.StateDir); !ok {
		return
	}
	rec, errs := n.Extend(ctx, silence.Slot{EndsAt: s.slotEnd(ctx, lease)})
	res.Silences = &protocol.SilenceReport{IDs: rec.IDs()}
	if len(errs) > 0 {
		res.Silences.CreateFailures, res.Silences.Errors = len(errs), errStrings(errs)
		s.log.Warn("the silence could not be extended with the kept reboot slot; it ends by itself", "event", "silence_failed",
			"op", protocol.SilenceOpCreate, "error", strings.Join(res.Silences.Errors, "; "))
	}
}

// silencePlan says, for a dry run, what silence a real run would create
// ("" when none is configured).
func (c *cycleRun) silencePlan() string {
	n, err := c.silences()
	if n == nil && err == nil {
		return ""
	}
	if err != nil {
		return "; would fail to silence: " + err.Error()
	}
	ms := make([]string, len(n.Matchers))
	for i, m := range n.Matchers {
		ms[i] = m.String()
	}
	urls := make([]string, len(n.Clients))
	for i, cl := range n.Clients {
		urls[i] = cl.Name()
	}
	return fmt.Sprintf("; would silence {%s} on %s until the slot's lease ends (%d s), expired after the boot",
		strings.Join(ms, ", "), strings.Join(urls, ", "), c.cfg.RebootSlotTTLSec)
}

func errStrings(errs []error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}
